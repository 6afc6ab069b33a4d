# find_package(mimalloc 1.6): imports the targets `mimalloc` (shared) and
# `mimalloc-static`, and sets MIMALLOC_TARGET_DIR to the folder that holds the
# object file (mimalloc.o) for static overriding.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include(${CMAKE_CURRENT_LIST_DIR}/mimalloc.cmake)
get_filename_component(MIMALLOC_TARGET_DIR "${CMAKE_CURRENT_LIST_DIR}" PATH)   # lib/mimalloc-1.6
