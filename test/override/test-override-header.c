/* ----------------------------------------------------------------------------
  test-override-header.c -- source-level override: with mimalloc-override.h
  included, the standard names in this file are macros for the mi_ functions.
  Linked with a static mimalloc built WITHOUT the symbol override, so only the
  header can make these blocks ours.
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <mimalloc-override.h>

#if !defined(malloc) || !defined(free) || !defined(posix_memalign) || !defined(_aligned_malloc)
#error "mimalloc-override.h must define the standard names as macros"
#endif

static void test_header_macros(void** state) {
  (void)state;
  void* p = malloc(10);
  assert_true(mi_is_in_heap_region(p));
  p = realloc(p, 1000);
  assert_true(mi_is_in_heap_region(p));
  assert_true(malloc_usable_size(p) >= 1000);
  free(p);
  p = calloc(3, 3);
  assert_true(mi_is_in_heap_region(p));
  cfree(p);
  char* s = strdup("abc");
  assert_true(mi_is_in_heap_region(s));
  free(s);
  s = strndup("abcdef", 2);
  assert_string_equal(s, "ab");
  assert_true(mi_is_in_heap_region(s));
  free(s);
  char* r = realpath(".", NULL);
  assert_non_null(r);
  assert_true(mi_is_in_heap_region(r));
  free(r);
  void* q = NULL;
  assert_int_equal(posix_memalign(&q, 64, 100), 0);
  assert_true(mi_is_in_heap_region(q));
  free(q);
  q = aligned_alloc(128, 256);
  assert_true(mi_is_in_heap_region(q));
  assert_int_equal((uintptr_t)q % 128, 0);
  free(q);
  q = memalign(64, 10);
  assert_true(mi_is_in_heap_region(q));
  free(q);
  q = valloc(10);
  assert_true(mi_is_in_heap_region(q));
  free(q);
  q = pvalloc(10);
  assert_true(mi_is_in_heap_region(q));
  free(q);
  q = reallocarray(NULL, 4, 4);
  assert_true(mi_is_in_heap_region(q));
  q = reallocf(q, 100);
  assert_true(mi_is_in_heap_region(q));
  assert_true(malloc_size(q) >= 100);
  free(q);
  // Microsoft names (size first, then alignment)
  q = _aligned_malloc(100, 64);
  assert_true(mi_is_in_heap_region(q));
  assert_int_equal((uintptr_t)q % 64, 0);
  q = _aligned_realloc(q, 200, 64);
  assert_int_equal((uintptr_t)q % 64, 0);
  _aligned_free(q);
  q = _aligned_offset_malloc(100, 64, 8);
  assert_int_equal(((uintptr_t)q + 8) % 64, 0);
  free(q);
  q = _expand(NULL, 10);
  assert_null(q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_header_macros),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
