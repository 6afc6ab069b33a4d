/* ----------------------------------------------------------------------------
  test-preload.c -- run with LD_PRELOAD=libmimalloc.so. The program is not
  linked with mimalloc: every standard allocation entry point must be served
  by the preloaded library (its blocks are in mimalloc's heap), from the main
  thread and from threads that end while their blocks live on.
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "override-check.h"

// glibc's internal names, not declared in its headers
extern void* __libc_malloc(size_t size);
extern void* __libc_calloc(size_t count, size_t size);
extern void* __libc_realloc(void* p, size_t size);
extern void  __libc_free(void* p);
extern void* __libc_memalign(size_t alignment, size_t size);
extern void* __libc_valloc(size_t size);
extern void* __libc_pvalloc(size_t size);

static mi_owned_fun* owned;
static mi_size_fun* usable;

// a block of at least `size` bytes, ours, writable over its whole size
static void check_ours(void* p, size_t size) {
  assert_non_null(p);
  assert_true(owned(p));
  assert_true(usable(p) >= size);
  memset(p, 0xA5, size);
}

static int setup(void** state) {
  (void)state;
  owned = mi_test_owned_fun();
  usable = mi_test_size_fun();
  if (owned == NULL || usable == NULL) {
    fprintf(stderr, "mimalloc is not in this process: run with LD_PRELOAD=.../libmimalloc.so\n");
    return -1;
  }
  return 0;
}

static void test_c_functions(void** state) {
  (void)state;
  void* p = malloc(100);
  check_ours(p, 100);
  p = realloc(p, 10000);
  check_ours(p, 10000);
  free(p);
  unsigned char* z = (unsigned char*)calloc(100, 33);
  check_ours(z, 0);
  for (size_t i = 0; i < 3300; i++) assert_int_equal(z[i], 0);
  free(z);
  p = malloc(0);   // a unique pointer
  check_ours(p, 0);
  free(p);
  free(NULL);
  p = malloc(5 * 1024 * 1024);   // huge
  check_ours(p, 5 * 1024 * 1024);
  free(p);
}

static void test_posix_functions(void** state) {
  (void)state;
  void* p = NULL;
  assert_int_equal(posix_memalign(&p, 64, 1000), 0);
  check_ours(p, 1000);
  assert_int_equal((uintptr_t)p % 64, 0);
  free(p);
  assert_int_equal(posix_memalign(&p, 3, 100), EINVAL);

  p = aligned_alloc(256, 512);
  check_ours(p, 512);
  assert_int_equal((uintptr_t)p % 256, 0);
  free(p);
  p = aligned_alloc(64, 100);   // C17: any size
  check_ours(p, 100);
  assert_int_equal((uintptr_t)p % 64, 0);
  free(p);

  p = memalign(4096, 100);
  check_ours(p, 100);
  assert_int_equal((uintptr_t)p % 4096, 0);
  free(p);

  const size_t psize = (size_t)sysconf(_SC_PAGESIZE);
  p = valloc(10);
  check_ours(p, 10);
  assert_int_equal((uintptr_t)p % psize, 0);
  free(p);
  p = pvalloc(10);
  check_ours(p, psize);
  assert_int_equal((uintptr_t)p % psize, 0);
  free(p);

  p = reallocarray(NULL, 10, 10);
  check_ours(p, 100);
  errno = 0;
  volatile size_t half = SIZE_MAX / 2;   // hidden from -Walloc-size-larger-than
  void* (*volatile reallocarray_fun)(void*, size_t, size_t) = &reallocarray;
  void* q = reallocarray_fun(p, half, 3);   // overflow: fails and keeps p
  assert_null(q);
  assert_int_equal(errno, ENOMEM);
  free(p);

  p = malloc(33);
  assert_true(malloc_usable_size(p) >= 33);
  assert_int_equal(malloc_usable_size(p), usable(p));
  free(p);
}

static void test_bsd_functions(void** state) {
  (void)state;
  // not declared by glibc: reach them the way a BSD-minded program would
  void* (*reallocf_fun)(void*, size_t) = (void* (*)(void*, size_t))dlsym(RTLD_DEFAULT, "reallocf");
  size_t (*malloc_size_fun)(const void*) = (size_t (*)(const void*))dlsym(RTLD_DEFAULT, "malloc_size");
  void (*cfree_fun)(void*) = (void (*)(void*))dlsym(RTLD_DEFAULT, "cfree");
  assert_non_null(reallocf_fun);
  assert_non_null(malloc_size_fun);
  assert_non_null(cfree_fun);
  void* p = reallocf_fun(NULL, 200);
  check_ours(p, 200);
  assert_int_equal(malloc_size_fun(p), usable(p));
  cfree_fun(p);
}

static void test_glibc_internal_names(void** state) {
  (void)state;
  void* p = __libc_malloc(50);
  check_ours(p, 50);
  p = __libc_realloc(p, 5000);
  check_ours(p, 5000);
  __libc_free(p);
  p = __libc_calloc(10, 10);
  check_ours(p, 100);
  __libc_free(p);
  p = __libc_memalign(128, 100);
  check_ours(p, 100);
  assert_int_equal((uintptr_t)p % 128, 0);
  __libc_free(p);
  p = __libc_valloc(100);
  check_ours(p, 100);
  __libc_free(p);
  p = __libc_pvalloc(100);
  check_ours(p, 100);
  __libc_free(p);
  // glibc does not export __posix_memalign; the override does
  int (*posix_memalign_fun)(void**, size_t, size_t) = (int (*)(void**, size_t, size_t))dlsym(RTLD_DEFAULT, "__posix_memalign");
  assert_non_null(posix_memalign_fun);
  p = NULL;
  assert_int_equal(posix_memalign_fun(&p, 32, 100), 0);
  check_ours(p, 100);
  __libc_free(p);
}

static void test_libc_allocates_with_us(void** state) {
  (void)state;
  // the C library's own allocations (strdup, getline, ...) come from us too
  char* s = strdup("hello");
  check_ours(s, 6);
  free(s);
  s = strndup("hello world", 5);
  assert_string_equal(s, "hello");
  check_ours(s, 6);
  free(s);
  char* line = NULL;
  size_t n = 0;
  FILE* f = fmemopen((void*)"a line\n", 7, "r");
  assert_non_null(f);
  assert_true(getline(&line, &n, f) > 0);
  check_ours(line, n);
  free(line);
  fclose(f);
}

// threads: allocate, hand blocks to the main thread, exit (the pthread key
// destructor tears the thread's heap down) while the blocks live on
#define THREAD_BLOCKS 1000
static void* thread_alloc(void* arg) {
  void** blocks = (void**)arg;
  for (int i = 0; i < THREAD_BLOCKS; i++) {
    blocks[i] = malloc((size_t)(16 + (i % 200) * 8));
    memset(blocks[i], i & 0xFF, 16);
  }
  // and some garbage that the thread frees itself
  for (int i = 0; i < 1000; i++) free(malloc(64));
  return NULL;
}

static void test_threads(void** state) {
  (void)state;
  static void* blocks[8][THREAD_BLOCKS];
  for (int round = 0; round < 4; round++) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++) assert_int_equal(pthread_create(&t[i], NULL, &thread_alloc, blocks[i]), 0);
    for (int i = 0; i < 8; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < 8; i++) {
      for (int j = 0; j < THREAD_BLOCKS; j++) {
        assert_true(owned(blocks[i][j]));
        assert_int_equal(((unsigned char*)blocks[i][j])[0], j & 0xFF);
        free(blocks[i][j]);
      }
    }
  }
}

// free() of memory we never allocated: reported (with MIMALLOC_SHOW_ERRORS=1),
// nothing written, and the allocator keeps working
static void test_free_foreign_pointer(void** state) {
  (void)state;
  const size_t unit = 4 * 1024 * 1024;   // a segment unit
  uint8_t* area = (uint8_t*)mmap(NULL, 3 * unit, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(area != MAP_FAILED);
  uint8_t* unit_start = (uint8_t*)(((uintptr_t)area + unit - 1) & ~(uintptr_t)(unit - 1));
  void* foreign = unit_start + 4096;
  assert_false(owned(foreign));
  free(foreign);
  for (size_t i = 0; i < unit; i++) {
    if (unit_start[i] != 0) fail_msg("free() of a foreign pointer wrote at offset %zu", i);
  }
  munmap(area, 3 * unit);
  void* p = malloc(100);   // still fine
  check_ours(p, 100);
  free(p);
}

// A size no allocation can have fails with ENOMEM through every standard
// name, as POSIX and glibc say (the mi_ names keep 1.6's EOVERFLOW), and a
// failed realloc keeps the block.
typedef void* (*size_fun_t)(size_t);
typedef void* (*count_fun_t)(size_t, size_t);
typedef void* (*resize_fun_t)(void*, size_t);

static void expect_enomem(void* p, const char* what) {
  if (p != NULL || errno != ENOMEM) fail_msg("%s: %p, errno %d (ENOMEM is %d)", what, p, errno, ENOMEM);
}

static void test_impossible_sizes_fail_with_enomem(void** state) {
  (void)state;
  volatile size_t huge = SIZE_MAX, half = SIZE_MAX / 2, over = (size_t)PTRDIFF_MAX + 1;
  const struct { size_fun_t fun; const char* name; } sized[] = {
    { &malloc, "malloc" }, { &__libc_malloc, "__libc_malloc" }, { &valloc, "valloc" },
    { &pvalloc, "pvalloc" }, { &__libc_valloc, "__libc_valloc" }, { &__libc_pvalloc, "__libc_pvalloc" },
  };
  for (size_t i = 0; i < sizeof(sized) / sizeof(sized[0]); i++) {
    size_fun_t volatile fun = sized[i].fun;
    errno = 0; expect_enomem(fun(huge), sized[i].name);
    errno = 0; expect_enomem(fun(over), sized[i].name);
  }
  const struct { count_fun_t fun; const char* name; } counted[] = {
    { &calloc, "calloc" }, { &__libc_calloc, "__libc_calloc" },
  };
  for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
    count_fun_t volatile fun = counted[i].fun;
    errno = 0; expect_enomem(fun(half, 3), counted[i].name);   // count * size overflows
    errno = 0; expect_enomem(fun(1, huge), counted[i].name);
  }
  count_fun_t volatile aligned = &aligned_alloc, memalign_fun = &memalign, libc_memalign = &__libc_memalign;
  errno = 0; expect_enomem(aligned(64, huge - 63), "aligned_alloc");
  errno = 0; expect_enomem(memalign_fun(64, huge), "memalign");
  errno = 0; expect_enomem(libc_memalign(64, over), "__libc_memalign");
  const struct { resize_fun_t fun; const char* name; } resized[] = {
    { &realloc, "realloc" }, { &__libc_realloc, "__libc_realloc" },
  };
  for (size_t i = 0; i < sizeof(resized) / sizeof(resized[0]); i++) {
    resize_fun_t volatile fun = resized[i].fun;
    char* p = (char*)malloc(100);
    check_ours(p, 100);
    errno = 0; expect_enomem(fun(p, huge), resized[i].name);
    errno = 0; expect_enomem(fun(NULL, over), resized[i].name);
    assert_int_equal((unsigned char)p[99], 0xA5);   // kept
    free(p);
  }
  void* p = (void*)1;
  assert_int_equal(posix_memalign(&p, 64, huge), ENOMEM);
  assert_ptr_equal(p, (void*)1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_c_functions),
    cmocka_unit_test(test_posix_functions),
    cmocka_unit_test(test_bsd_functions),
    cmocka_unit_test(test_glibc_internal_names),
    cmocka_unit_test(test_impossible_sizes_fail_with_enomem),
    cmocka_unit_test(test_libc_allocates_with_us),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_free_foreign_pointer),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
