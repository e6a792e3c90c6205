# Read by CMake (3.21 and later names it from the environment's CMAKE_TOOLCHAIN_FILE) before the compiler's defaults.
# A cache entry set here is kept when those defaults set theirs, so Horovod's setup.py, which asks for RelWithDebInfo,
# gets these flags instead of -O2 -g -DNDEBUG; Horovod's CMakeLists raises -O2 to -O3 as it does for the default.
set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O2 -DNDEBUG" CACHE STRING "RelWithDebInfo without debug information")
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O2 -DNDEBUG" CACHE STRING "RelWithDebInfo without debug information")
set(CMAKE_CUDA_FLAGS_RELWITHDEBINFO "-O2 -DNDEBUG" CACHE STRING "RelWithDebInfo without debug information")
