/* ----------------------------------------------------------------------------
  cache-thrash.c -- active false sharing of cache lines between threads.

  Berger's cache-thrash (from the Hoard papers): every worker repeatedly
  allocates a small object, writes every byte of it `repetitions` times and
  frees it. The threads never exchange memory, yet an allocator that serves
  concurrent small requests of different threads from one cache line (one
  shared heap carved sequentially, for example) makes them write into the
  same line from several cores, and the line bounces between them. Allocators
  with per-thread memory keep each object on a line of its own thread.

  usage: cache-thrash [threads=ncpu] [iterations=500] [size=8] [repetitions=400000]
  prints: writes per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

static long iterations, repetitions;
static size_t size;

static void* worker(void* arg) {
  (void)arg;
  bench_touch_loop(iterations, repetitions, size);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, bench_ncpu());
  iterations = bench_arg(argc, argv, 2, 500);
  size = (size_t)bench_arg(argc, argv, 3, 8);
  repetitions = bench_arg(argc, argv, 4, 400000);
  const double secs = bench_run_threads(threads, worker);
  printf("cache-thrash: %ld threads x %ld iterations x %ld repetitions of %zu bytes, %.1f Mwrites/s\n",
         threads, iterations, repetitions, size,
         (double)threads * (double)iterations * (double)repetitions * (double)size / secs / 1e6);
  return 0;
}
