# Build options. Sanitizers are per-build-tree choices (see CMakePresets.json), applied to our targets only.
option(HCASIM_BUILD_TESTS "Build the GoogleTest suites" ON)
set(HCASIM_SANITIZE "" CACHE STRING "Sanitizers: empty, 'address,undefined' or 'thread'")

# hcasim_target_defaults(<target>): warnings and sanitizer flags for one of our targets.
function(hcasim_target_defaults tgt)
  target_compile_features(${tgt} PRIVATE cxx_std_17)
  target_compile_options(${tgt} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(HCASIM_SANITIZE)
    target_compile_options(${tgt} PRIVATE -fsanitize=${HCASIM_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${tgt} PRIVATE -fsanitize=${HCASIM_SANITIZE})
  endif()
endfunction()
