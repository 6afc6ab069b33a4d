/* ----------------------------------------------------------------------------
  override-check.h -- how a test program that is NOT linked with mimalloc
  proves that an allocation was served by it: the preloaded library's own
  ownership query, found with dlsym. Shared by the C and C++ preload tests.
-----------------------------------------------------------------------------*/
#pragma once
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

typedef bool   (mi_owned_fun)(const void* p);
typedef size_t (mi_size_fun)(const void* p);

// mi_is_in_heap_region and mi_usable_size of the preloaded library, or NULL
// when mimalloc is not in the process.
static inline mi_owned_fun* mi_test_owned_fun(void) {
  return (mi_owned_fun*)dlsym(RTLD_DEFAULT, "mi_is_in_heap_region");
}
static inline mi_size_fun* mi_test_size_fun(void) {
  return (mi_size_fun*)dlsym(RTLD_DEFAULT, "mi_usable_size");
}
