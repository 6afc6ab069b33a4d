/* ----------------------------------------------------------------------------
  sh6bench.c -- batches freed in reverse order (sh6bench), optionally by
  another thread (sh8bench).

  MicroQuill's sh6bench (SmartHeap) allocates batches of blocks and frees
  them in the reverse order of allocation, a pattern where allocators that
  hand out memory in address order and keep sorted free lists do poorly; its
  successor sh8bench adds migration: the blocks are freed by another thread.
  Each of `threads` threads runs `iterations` iterations; an iteration
  - allocates `batch` blocks of random size in [8, max];
  - frees every other block front to back and allocates them again with new
    sizes (holes refilled);
  - frees the whole batch back to front (sh6bench mode), or (sh8bench mode,
    `migrate` = 1) hands the batch to the next thread and frees, back to
    front, the batch the previous thread handed over.

  Every block carries a tag (bench.h) checked before it is freed.

  usage: sh6bench [threads=ncpu] [iterations=8000] [batch=2000] [max=1000] [migrate=0]
  prints: blocks per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdatomic.h>
#include "bench.h"

typedef struct batch_s {
  size_t count;
  void** blocks;
  size_t* sizes;
} batch_t;

static long threads, iterations;
static size_t batch_size, max_size;
static int migrate;
static _Atomic(batch_t*)* inbox;   // per thread: a batch handed over by the previous thread

static void batch_free_reverse(batch_t* b) {
  for (size_t i = b->count; i-- > 0; ) {
    bench_check(b->blocks[i], b->sizes[i], i, "sh6bench");
    free(b->blocks[i]);
  }
  free(b->blocks);
  free(b->sizes);
  free(b);
}

static void* worker(void* arg) {
  const long self = (long)(uintptr_t)arg;
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)self + 1000);
  for (long it = 0; it < iterations; it++) {
    batch_t* b = (batch_t*)bench_malloc(sizeof(batch_t));
    b->count = batch_size;
    b->blocks = (void**)bench_malloc(batch_size * sizeof(void*));
    b->sizes = (size_t*)bench_malloc(batch_size * sizeof(size_t));
    for (size_t i = 0; i < batch_size; i++) {
      b->sizes[i] = bench_range(&rng, 8, max_size);
      b->blocks[i] = bench_malloc(b->sizes[i]);
      bench_mark(b->blocks[i], b->sizes[i], i);
    }
    for (size_t i = 1; i < batch_size; i += 2) {
      bench_check(b->blocks[i], b->sizes[i], i, "sh6bench");
      free(b->blocks[i]);
    }
    for (size_t i = 1; i < batch_size; i += 2) {
      b->sizes[i] = bench_range(&rng, 8, max_size);
      b->blocks[i] = bench_malloc(b->sizes[i]);
      bench_mark(b->blocks[i], b->sizes[i], i);
    }
    if (!migrate) {
      batch_free_reverse(b);
      continue;
    }
    // hand ours to the next thread; if it has not taken our last one yet, free that ourselves
    batch_t* unclaimed = atomic_exchange(&inbox[(self + 1) % threads], b);
    if (unclaimed != NULL) batch_free_reverse(unclaimed);
    batch_t* received = atomic_exchange(&inbox[self], NULL);
    if (received != NULL) batch_free_reverse(received);
  }
  return NULL;
}

int main(int argc, char** argv) {
  threads = bench_arg(argc, argv, 1, bench_ncpu());
  iterations = bench_arg(argc, argv, 2, 8000);
  batch_size = (size_t)bench_arg(argc, argv, 3, 2000);
  max_size = (size_t)bench_arg(argc, argv, 4, 1000);
  migrate = (int)bench_arg(argc, argv, 5, 0);
  if (max_size < 8) max_size = 8;
  inbox = (_Atomic(batch_t*)*)calloc((size_t)threads, sizeof(*inbox));
  pthread_t* tids = (pthread_t*)bench_malloc((size_t)threads * sizeof(pthread_t));
  if (inbox == NULL) bench_fail("calloc");
  const double start = bench_now();
  for (long t = 0; t < threads; t++) {
    if (pthread_create(&tids[t], NULL, worker, (void*)(uintptr_t)t) != 0) bench_fail("pthread_create");
  }
  for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  const double secs = bench_now() - start;
  for (long t = 0; t < threads; t++) {
    batch_t* left = atomic_load(&inbox[t]);
    if (left != NULL) batch_free_reverse(left);
  }
  free(inbox);
  free(tids);
  printf("%s: %ld threads x %ld iterations x %zu blocks, %.2f Mblocks/s\n", migrate ? "sh8bench" : "sh6bench",
         threads, iterations, batch_size,
         (double)threads * (double)iterations * (double)batch_size * 1.5 / secs / 1e6);
  return 0;
}
