# Build options. Sanitizers are per-build-tree choices (see CMakePresets.json), applied to our targets only.
option(HCASIM_BUILD_TESTS "Build the GoogleTest suites" ON)
set(HCASIM_SANITIZE "" CACHE STRING "Sanitizers: empty, 'address,undefined' or 'thread'")
# libFuzzer harnesses (tests/fuzz): coverage instrumentation on every target of ours. Clang only.
option(HCASIM_FUZZ "Build the libFuzzer harnesses (Clang; preset fuzz, scripts/fuzz)" OFF)
if(HCASIM_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "HCASIM_FUZZ needs Clang (libFuzzer): configure with the preset fuzz "
                      "(CMAKE_CXX_COMPILER=clang++), or run scripts/fuzz")
endif()

# HCASIM_ASAN_RUNTIME: with ASan, the runtime a program that is not itself sanitized must preload
# first (LD_PRELOAD) to load our sanitized libraries (the drop-in libibverbs and librdmacm).
if(HCASIM_SANITIZE MATCHES "address")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE HCASIM_ASAN_RUNTIME
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

# hcasim_target_defaults(<target>): warnings and sanitizer flags for one of our targets.
function(hcasim_target_defaults tgt)
  target_compile_features(${tgt} PRIVATE cxx_std_17)
  target_compile_options(${tgt} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(HCASIM_SANITIZE)
    target_compile_options(${tgt} PRIVATE -fsanitize=${HCASIM_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${tgt} PRIVATE -fsanitize=${HCASIM_SANITIZE})
  endif()
  if(HCASIM_FUZZ)
    target_compile_options(${tgt} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()
