/* ----------------------------------------------------------------------------
  glibc-simple.c -- the latency of malloc+free for a few sizes and batch
  lengths (after glibc's bench-malloc-simple).

  glibc's simple micro benchmark allocates a batch of N blocks of one size and
  frees them in the same order, for a few sizes and batch lengths, first in
  the main thread and then in a new thread (which in glibc means another
  arena). This program does the same for sizes 16, 64, 256, 1024 and 4096 and
  batches of 25, 100, 400 and 1600 blocks, `pairs` malloc+free pairs for each
  combination, in the main thread and then in a second thread. Each block gets
  one byte written, so no compiler can drop the pair.

  usage: glibc-simple [pairs=1500000]
  prints: the mean nanoseconds per malloc+free pair over every combination,
          then per size (main thread, all batch lengths).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

static const size_t sizes[] = { 16, 64, 256, 1024, 4096 };
static const size_t batches[] = { 25, 100, 400, 1600 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define NBATCHES (sizeof(batches) / sizeof(batches[0]))

static long pairs;

// nanoseconds per pair for each size (summed over the batch lengths)
static void run_all(double ns[NSIZES]) {
  void** blocks = (void**)bench_malloc(1600 * sizeof(void*));
  for (size_t s = 0; s < NSIZES; s++) {
    ns[s] = 0;
    for (size_t b = 0; b < NBATCHES; b++) {
      const size_t n = batches[b];
      const long reps = pairs / (long)n;
      const double start = bench_now();
      for (long r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++) {
          blocks[i] = bench_malloc(sizes[s]);
          *(volatile char*)blocks[i] = (char)i;
        }
        for (size_t i = 0; i < n; i++) free(blocks[i]);
      }
      ns[s] += (bench_now() - start) * 1e9 / (double)(reps * (long)n);
    }
  }
  free(blocks);
}

static void* thread_run(void* arg) {
  run_all((double*)arg);
  return NULL;
}

int main(int argc, char** argv) {
  pairs = bench_arg(argc, argv, 1, 1500000);
  double main_ns[NSIZES], thread_ns[NSIZES];
  run_all(main_ns);
  pthread_t t;
  if (pthread_create(&t, NULL, thread_run, thread_ns) != 0) bench_fail("pthread_create");
  pthread_join(t, NULL);
  double total = 0;
  for (size_t s = 0; s < NSIZES; s++) total += main_ns[s] + thread_ns[s];
  printf("glibc-simple: %.2f ns per malloc+free (mean of %zu cases);", total / (2 * NSIZES * NBATCHES),
         2 * NSIZES * NBATCHES);
  for (size_t s = 0; s < NSIZES; s++) printf(" %zu:%.2f", sizes[s], main_ns[s] / NBATCHES);
  printf("\n");
  return 0;
}
