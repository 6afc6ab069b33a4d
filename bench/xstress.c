/* ----------------------------------------------------------------------------
  xstress.c -- rounds of threads that all end, with blocks handed over.

  The shape of the stress tests allocators ship (and the classic benchmark
  suites run with 32 threads on any core count): each of `rounds` rounds
  starts `threads` threads at once and waits for all of them. Thread t does
  100 x scale x (t % 8 + 1) allocation steps (so some threads work eight
  times longer than others, and the last ones run alone):
  - an allocation (calloc, every word written) goes either to its working
    list or, while it has some left to do, to a list it keeps until it ends
    (half of its steps);
  - sizes are 1 to 16 words (working list) or 1 to 64 words (kept list);
    1 in 100 is 100 times that, 1 in 1000 of those 1000 times, and 1 in
    10000 of those 10000 times (megabytes: blocks "some of them big");
  - after each step, 2 in 3 free a random working block, and 1 in 4 swap a
    random working block with a slot of a process-wide transfer array of
    1000 slots, so blocks are freed by threads that did not allocate them,
    and blocks in the array outlive the thread and the round.
  A thread frees both of its lists when it ends. After each round the main
  thread frees half of the transfer slots (all after the last round).

  Every block carries a tag (bench.h) checked before it is freed.

  usage: xstress [threads=32] [scale=10] [rounds=20]
  prints: allocations per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include <stdatomic.h>
#include "bench.h"

#define TRANSFERS 1000

typedef bench_item_t item_t;

static _Atomic(item_t*) transfer[TRANSFERS];   // boxed items, exchanged atomically
static long scale;
static _Atomic(long) total_allocs;

static size_t words(bench_rng_t* r, unsigned shift) {
  size_t n = (size_t)1 << bench_below(r, shift);
  if (bench_below(r, 100) == 0) {
    if (bench_below(r, 100) == 0) n *= 10000;        // megabytes
    else if (bench_below(r, 10) == 0) n *= 1000;     // hundreds of KiB
    else n *= 100;
  }
  return n;
}

static item_t* box_new(bench_rng_t* r, unsigned shift) {
  item_t* b = (item_t*)bench_malloc(sizeof(item_t));
  const size_t size = words(r, shift) * sizeof(uintptr_t);
  b->block = calloc(1, size);
  if (b->block == NULL) bench_fail("calloc(%zu) returned NULL", size);
  memset(b->block, 0x5a, size);   // every word written, as a program fills what it allocates
  b->size = size;
  bench_mark(b->block, size, 0);
  return b;
}

static void box_free(item_t* b) {
  if (b == NULL) return;
  bench_check(b->block, b->size, 0, "xstress");
  free(b->block);
  free(b);
}

static void* worker(void* arg) {
  const long tid = (long)(intptr_t)arg;
  bench_rng_t r;
  bench_rng_init(&r, (uint64_t)tid * 43 + 1);
  size_t allocs = 100 * (size_t)scale * (size_t)(tid % 8 + 1);
  size_t keep = allocs / 2;
  const size_t steps = allocs + keep;
  item_t** data = NULL;
  size_t data_size = 0, data_top = 0;
  item_t** kept = (item_t**)bench_malloc((keep + 1) * sizeof(item_t*));
  size_t kept_top = 0;
  while (allocs > 0 || keep > 0) {
    if (keep == 0 || (bench_below(&r, 2) == 0 && allocs > 0)) {
      allocs--;
      if (data_top >= data_size) {
        data_size += 1000;
        data = (item_t**)bench_realloc(data, data_size * sizeof(item_t*));
      }
      data[data_top++] = box_new(&r, 5);
    }
    else {
      kept[kept_top++] = box_new(&r, 7);
      keep--;
    }
    if (bench_below(&r, 3) < 2 && data_top > 0) {
      const size_t i = bench_below(&r, data_top);
      box_free(data[i]);
      data[i] = NULL;
    }
    if (bench_below(&r, 4) == 0 && data_top > 0) {
      const size_t i = bench_below(&r, data_top);
      data[i] = atomic_exchange(&transfer[bench_below(&r, TRANSFERS)], data[i]);
    }
  }
  for (size_t i = 0; i < kept_top; i++) box_free(kept[i]);
  for (size_t i = 0; i < data_top; i++) box_free(data[i]);
  free(kept);
  free(data);
  atomic_fetch_add(&total_allocs, (long)steps);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, 32);
  scale = bench_arg(argc, argv, 2, 10);
  const long rounds = bench_arg(argc, argv, 3, 20);
  bench_rng_t r;
  bench_rng_init(&r, 42);
  pthread_t* tids = (pthread_t*)bench_malloc((size_t)threads * sizeof(pthread_t));
  const double start = bench_now();
  for (long n = 0; n < rounds; n++) {
    for (long t = 0; t < threads; t++) {
      if (pthread_create(&tids[t], NULL, &worker, (void*)(intptr_t)t) != 0) bench_fail("pthread_create");
    }
    for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    for (size_t i = 0; i < TRANSFERS; i++) {
      if (n + 1 == rounds || bench_below(&r, 2) == 0) box_free(atomic_exchange(&transfer[i], NULL));
    }
  }
  const double secs = bench_now() - start;
  free(tids);
  printf("xstress: %ld threads, scale %ld, %ld rounds: %.2f M allocations/s\n",
         threads, scale, rounds, (double)atomic_load(&total_allocs) / secs / 1e6);
  return 0;
}
