/* ----------------------------------------------------------------------------
  test-static-object.c -- linked with the object file mimalloc.o placed first
  on the link line: malloc and friends of the whole program (the C library's
  own allocations included) must come from mimalloc, also allocations made
  before mimalloc's constructor has run.
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <mimalloc.h>

// runs before every constructor of default priority, mimalloc's included
static void* early_block;
__attribute__((constructor(101))) static void allocate_early(void) {
  early_block = malloc(123);
  memset(early_block, 1, 123);
}

static void test_early_allocation(void** state) {
  (void)state;
  assert_non_null(early_block);
  assert_true(mi_is_in_heap_region(early_block));
  assert_true(mi_usable_size(early_block) >= 123);
  free(early_block);
}

static void test_malloc_is_ours(void** state) {
  (void)state;
  // (blocks are written before the const-pointer queries: gcc warns otherwise)
  void* p = malloc(1000);
  memset(p, 0, 1000);
  assert_true(mi_is_in_heap_region(p));
  p = realloc(p, 100000);
  assert_true(mi_is_in_heap_region(p));
  free(p);
  p = calloc(10, 10);
  assert_true(mi_is_in_heap_region(p));
  free(p);
  void* q = NULL;
  assert_int_equal(posix_memalign(&q, 1024, 10), 0);
  memset(q, 0, 10);
  assert_true(mi_is_in_heap_region(q));
  assert_int_equal((uintptr_t)q % 1024, 0);
  free(q);
  char* s = strdup("the C library allocates with us too");
  assert_true(mi_is_in_heap_region(s));
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_early_allocation),
    cmocka_unit_test(test_malloc_is_ours),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
