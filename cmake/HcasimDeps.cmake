# System packages, found the modern way and exposed as imported targets.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)

# SystemC 2.3.4 from Debian is built as C++17: every TU that includes <systemc> must see the
# same SC_CPLUSPLUS or linking fails on sc_api_version_2_3_4_cxx201703L. Carry it on the target.
pkg_check_modules(SYSTEMC REQUIRED IMPORTED_TARGET systemc>=2.3.3)
add_library(SystemC::systemc INTERFACE IMPORTED)
target_link_libraries(SystemC::systemc INTERFACE PkgConfig::SYSTEMC)
target_compile_definitions(SystemC::systemc INTERFACE SC_CPLUSPLUS=201703L SC_INCLUDE_FX=0)
target_compile_features(SystemC::systemc INTERFACE cxx_std_17)

# ibverbs: the headers only. Our drop-in replaces the library, so nothing of ours links the real one
# except where a test deliberately compares against it.
find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h REQUIRED)
add_library(IBVerbs::headers INTERFACE IMPORTED)
target_include_directories(IBVerbs::headers INTERFACE ${IBVERBS_INCLUDE_DIR})
find_library(IBVERBS_SYSTEM_LIBRARY NAMES ibverbs)

if(HCASIM_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
find_package(Doxygen QUIET)
