/* ----------------------------------------------------------------------------
  large.c -- large blocks, from 64 KiB to tens of MiB.

  Buffers, images, arrays and hash tables that grow: blocks far above the
  small size classes, which allocators take from the OS, cache or return.
  Each of `threads` threads keeps `slots` such blocks and does `steps` steps:
  4 in 5 steps replace a random slot with a new block of log-uniform size in
  [min, max] (64 KiB to 32 MiB); 1 in 5 grows the block of a random slot by half with
  realloc (up to 1.5 x max). Every new or grown part is touched, one word per
  4 KiB page, as a program would use its memory, so the page faults of memory
  fresh from the OS count, and so does the resident size of memory kept around.
  The trade-off shows in both figures: keeping freed memory is faster but
  raises the peak RSS.

  Every block carries a tag (bench.h) checked before it is freed and on
  realloc.

  With min below 64 KiB and max near 128 KiB, many slots and steps, it plays
  the medium size classes (16-128 KiB): `large 2 100000 256 131072 16384`.

  usage: large [threads=ncpu] [steps=1000] [slots=6] [max=33554432] [min=65536]
  prints: steps per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

#define PAGE 4096

typedef struct slot_s { char* block; size_t size; } slot_t;

static long steps;
static size_t slots, max_size, min_size;

// touch [from, to) one word per page, then re-tag the block
static void touch(slot_t* s, size_t from) {
  for (size_t off = from; off + sizeof(uint64_t) <= s->size; off += PAGE) {
    const uint64_t v = off;
    memcpy(s->block + off, &v, sizeof v);
  }
  bench_mark(s->block, s->size, 1);
}

static void* worker(void* arg) {
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)(uintptr_t)arg);
  slot_t* set = (slot_t*)calloc(slots, sizeof(slot_t));
  if (set == NULL) bench_fail("calloc");
  for (long st = 0; st < steps; st++) {
    slot_t* s = &set[bench_below(&rng, slots)];
    if (s->block != NULL && bench_below(&rng, 5) == 0 && s->size < max_size) {
      bench_check(s->block, s->size, 1, "large realloc");
      const size_t old = s->size;
      s->size = old + old / 2;
      s->block = (char*)bench_realloc(s->block, s->size);
      uint64_t first;
      memcpy(&first, s->block, sizeof first);
      if (first != bench_tag(old, 1)) bench_fail("large: realloc lost the contents of a block");
      touch(s, old);
      continue;
    }
    if (s->block != NULL) {
      bench_check(s->block, s->size, 1, "large");
      free(s->block);
    }
    s->size = bench_log_range(&rng, min_size, max_size);
    s->block = (char*)bench_malloc(s->size);
    touch(s, 0);
  }
  for (size_t k = 0; k < slots; k++) {
    if (set[k].block == NULL) continue;
    bench_check(set[k].block, set[k].size, 1, "large");
    free(set[k].block);
  }
  free(set);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, bench_ncpu());
  steps = bench_arg(argc, argv, 2, 1000);
  slots = (size_t)bench_arg(argc, argv, 3, 6);
  max_size = (size_t)bench_arg(argc, argv, 4, 32 * 1024 * 1024);
  min_size = (size_t)bench_arg(argc, argv, 5, 64 * 1024);
  if (max_size < 128 * 1024) max_size = 128 * 1024;
  if (min_size < 1024 || min_size > max_size) bench_fail("large: min must lie in [1024, max]");
  const double secs = bench_run_threads(threads, worker);
  printf("large: %ld threads x %ld steps, %.0f steps/s\n", threads, steps, (double)threads * (double)steps / secs);
  return 0;
}
