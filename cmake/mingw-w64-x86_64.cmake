# Toolchain file: build for 64-bit Windows with mingw-w64 (Debian's mingw-w64
# package) and run the tests under wine (Debian's wine64 package):
#
#   cmake -S . -B build-win -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake
#
# The same as the plain cross-compiling variables (CMAKE_SYSTEM_NAME=Windows,
# CMAKE_C_COMPILER=x86_64-w64-mingw32-gcc, ...), plus:
# - the compilers of the "posix" thread model where installed (the tests use
#   std::thread, which mingw-w64's gcc 12 has only in that model; the library
#   itself uses no thread library, so it is the same either way);
# - the emulator: CTest runs every test program through test/windows/wine-run.sh;
# - find_package and find_library look in the mingw-w64 tree, never in the
#   build machine's (GoogleTest is then built from its sources: MI_GTEST_SOURCE_DIR).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(mi_mingw x86_64-w64-mingw32)

foreach(lang_tool C:gcc CXX:g++)
  string(REPLACE ":" ";" pair "${lang_tool}")
  list(GET pair 0 lang)
  list(GET pair 1 tool)
  if(NOT CMAKE_${lang}_COMPILER)
    find_program(mi_${lang}_posix ${mi_mingw}-${tool}-posix)
    if(mi_${lang}_posix)
      set(CMAKE_${lang}_COMPILER ${mi_${lang}_posix})
    else()
      set(CMAKE_${lang}_COMPILER ${mi_mingw}-${tool})
    endif()
  endif()
endforeach()
set(CMAKE_RC_COMPILER ${mi_mingw}-windres)

set(CMAKE_FIND_ROOT_PATH /usr/${mi_mingw})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/../test/windows/wine-run.sh)
