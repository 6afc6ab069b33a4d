/* ----------------------------------------------------------------------------
  fastpath.c -- the loop whose instructions are counted: malloc+free pairs.

  Run under `valgrind --tool=callgrind --toggle-collect=measured_loop` (with
  the allocator preloaded and --soname-synonyms=somalloc=nouserintercepts, so
  valgrind leaves the preloaded malloc in place), this program counts the
  instructions of `count` malloc(size)+free pairs on the fast path: a warm-up
  loop of as many allocations runs first, uncounted, so pages and thread state are
  set up; then `measured_loop` runs and only it (with everything it calls) is
  counted. The runner (bench/run.py) runs it with `count` and 2 x `count` and
  takes the difference divided by `count`, which cancels any one-time cost
  left, and subtracts the loop's own instructions (its self cost), so the
  figure is the instructions of malloc and free themselves, call and return
  included.

  Counts do not depend on machine noise: they are exact and repeatable.

  Two cases, by the third argument:
  - `live` (1, the default): one more block of the same size stays allocated
    during the loop, so the page of the measured block never becomes empty:
    the steady fast path of a program that holds memory;
  - `lone` (0): the measured block is the only one of its size, so every free
    empties its page (allocators that react to an empty page pay for it here;
    glibc's simple benchmark with batches of one block looks like this).

  usage: fastpath size count [live=1]
-----------------------------------------------------------------------------*/
#include "bench.h"

// the warm-up: two blocks at a time (its code must differ from the measured
// loop, or the compiler folds the two functions into one)
__attribute__((noinline)) static void warm_up(size_t size, long count) {
  for (long i = 0; i < count; i += 2) {
    void* p = malloc(size);
    void* q = malloc(size);
    __asm__ volatile("" : : "r"(p), "r"(q) : "memory");
    free(p);
    free(q);
  }
}

// one malloc+free pair per iteration; the empty asm makes the block escape
// so that the compiler keeps the pair (built with -fno-builtin as well)
__attribute__((noinline)) void measured_loop(size_t size, long count);
__attribute__((noinline)) void measured_loop(size_t size, long count) {
  for (long i = 0; i < count; i++) {
    void* p = malloc(size);
    __asm__ volatile("" : : "r"(p) : "memory");
    free(p);
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fastpath size count [live=1]\n");
    return 2;
  }
  const size_t size = (size_t)strtoul(argv[1], NULL, 0);
  const long count = strtol(argv[2], NULL, 0);
  const int live = (argc < 4 || atoi(argv[3]) != 0);
  warm_up(size, count);         // not counted
  void* neighbour = (live ? bench_malloc(size) : NULL);
  measured_loop(size, count);   // counted
  free(neighbour);
  printf("fastpath: %ld pairs of %zu bytes (%s)\n", count, size, live ? "live" : "lone");
  return 0;
}
