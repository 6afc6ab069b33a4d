/* ----------------------------------------------------------------------------
  alloctest.c -- an allocation-intensive size mix, at 1 and at N threads.

  The alloc-test of OLogN Technologies measures raw allocation throughput
  with little else going on: every step picks a random slot of a working set,
  frees the block there and allocates a new one whose size follows a skewed
  distribution. Here each of `threads` threads owns `slots` slots (so threads
  never share blocks) and does `steps` steps; sizes are log-uniform in
  [8, 8 KiB] with an extra weight on the smallest classes (half the requests
  are at most 64 bytes). The work per thread is the same whatever the thread
  count, so on a machine with at least `threads` cores an allocator that
  scales perfectly takes the same time with 1 thread as with N: compare the
  runs alloc-test1 and alloc-testN.

  Every block carries a tag (bench.h) checked before it is freed.

  usage: alloctest [threads=1] [steps=25000000] [slots=16384]
  prints: steps per second per thread.
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

typedef struct slot_s { void* block; size_t size; } slot_t;

static long steps;
static size_t slots;

static size_t random_size(bench_rng_t* rng) {
  if (bench_below(rng, 2) == 0) return bench_range(rng, 8, 64);
  return bench_log_range(rng, 8, 8192);
}

static void* worker(void* arg) {
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)(uintptr_t)arg);
  slot_t* set = (slot_t*)calloc(slots, sizeof(slot_t));
  if (set == NULL) bench_fail("calloc");
  for (long s = 0; s < steps; s++) {
    slot_t* sl = &set[bench_below(&rng, slots)];
    if (sl->block != NULL) {
      bench_check(sl->block, sl->size, 0, "alloc-test");
      free(sl->block);
    }
    sl->size = random_size(&rng);
    sl->block = bench_malloc(sl->size);
    bench_mark(sl->block, sl->size, 0);
  }
  for (size_t k = 0; k < slots; k++) {
    if (set[k].block == NULL) continue;
    bench_check(set[k].block, set[k].size, 0, "alloc-test");
    free(set[k].block);
  }
  free(set);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, 1);
  steps = bench_arg(argc, argv, 2, 25000000);
  slots = (size_t)bench_arg(argc, argv, 3, 16384);
  const double secs = bench_run_threads(threads, worker);
  printf("alloc-test: %ld threads x %ld steps, %.2f Msteps/s per thread\n", threads, steps,
         (double)steps / secs / 1e6);
  return 0;
}
