/* ----------------------------------------------------------------------------
  cache-scratch.c -- passive false sharing of cache lines between threads.

  Berger's cache-scratch (from the Hoard papers): the main thread allocates
  one small object per worker, all at once, so the objects lie next to each
  other in a few cache lines. Each worker frees the object it was given, then
  `iterations` times allocates an object of the same size, writes every byte
  of it `repetitions` times and frees it. An allocator that hands the freed
  object (on the main thread's cache line) back to the worker makes the
  workers write into one cache line from several cores: the line bounces
  between the cores and the run is many times slower. An allocator that keeps
  each thread's memory apart runs at the speed of one thread. With one thread
  every allocator performs the same; run it with N threads.

  usage: cache-scratch [threads=ncpu] [iterations=500] [size=8] [repetitions=400000]
  prints: writes per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

static long iterations, repetitions;
static size_t size;

static void* worker(void* arg) {
  free(arg);   // the object the main thread allocated next to the others
  bench_touch_loop(iterations, repetitions, size);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, bench_ncpu());
  iterations = bench_arg(argc, argv, 2, 500);
  size = (size_t)bench_arg(argc, argv, 3, 8);
  repetitions = bench_arg(argc, argv, 4, 400000);
  pthread_t* tids = (pthread_t*)bench_malloc((size_t)threads * sizeof(pthread_t));
  void** objects = (void**)bench_malloc((size_t)threads * sizeof(void*));
  for (long t = 0; t < threads; t++) objects[t] = bench_malloc(size);   // adjacent objects
  const double start = bench_now();
  for (long t = 0; t < threads; t++) {
    if (pthread_create(&tids[t], NULL, worker, objects[t]) != 0) bench_fail("pthread_create");
  }
  for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  const double secs = bench_now() - start;
  free(objects);
  free(tids);
  printf("cache-scratch: %ld threads x %ld iterations x %ld repetitions of %zu bytes, %.1f Mwrites/s\n",
         threads, iterations, repetitions, size,
         (double)threads * (double)iterations * (double)repetitions * (double)size / secs / 1e6);
  return 0;
}
