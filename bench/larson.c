/* ----------------------------------------------------------------------------
  larson.c -- a server that allocates in one thread and frees in another.

  Larson and Krishnan observed in long-running servers that objects allocated
  by one thread are freed by another ("bleeding"): a request is handled by
  whatever worker is free, and the objects of earlier requests are released
  by later workers. The benchmark keeps `threads` lanes running at once. A lane
  owns an array of `slots` blocks of random size in [min, max]. The thread
  working a lane replaces `replacements` random blocks (free the old one,
  allocate a new one), then starts its successor on the same array and ends.
  So every block is allocated by one thread and, most of the time, freed by a
  later one that never allocated it; the main thread allocates the first blocks
  and frees the last ones. There are `generations` threads per lane.

  Every block carries a tag (bench.h) checked before it is freed.

  usage: larson [threads=ncpu] [generations=250] [replacements=50000]
                [slots=5000] [min=8] [max=1000]
  prints: replacements per second (all lanes).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

// Each lane on cache lines of its own: the thread working a lane writes its
// random state on every replacement, and two lanes sharing a line would make
// the benchmark measure that line moving between cores, not the allocator.
typedef struct lane_s {
  _Alignas(BENCH_LINE) void** blocks;         // the lane's live blocks, one per slot
  size_t* sizes;         // the size of each block
  bench_rng_t rng;
  long generation;       // the generation now working the lane
} lane_t;

static long generations, replacements;
static size_t slots, min_size, max_size;


static void* lane_work(void* arg) {
  lane_t* lane = (lane_t*)arg;
  for (long r = 0; r < replacements; r++) {
    const size_t k = bench_below(&lane->rng, slots);
    bench_check(lane->blocks[k], lane->sizes[k], k, "larson");
    free(lane->blocks[k]);
    const size_t size = bench_range(&lane->rng, min_size, max_size);
    lane->blocks[k] = bench_malloc(size);
    lane->sizes[k] = size;
    bench_mark(lane->blocks[k], size, k);
  }
  // hand the lane to a fresh thread and end this one
  bench_lane_next(lane_work, lane, ++lane->generation < generations);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, bench_ncpu());
  generations = bench_arg(argc, argv, 2, 250);
  replacements = bench_arg(argc, argv, 3, 50000);
  slots = (size_t)bench_arg(argc, argv, 4, 5000);
  min_size = (size_t)bench_arg(argc, argv, 5, 8);
  max_size = (size_t)bench_arg(argc, argv, 6, 1000);
  if (min_size < 8) min_size = 8;   // room for the tag

  lane_t* lanes = (lane_t*)bench_malloc_lines((size_t)threads * sizeof(lane_t));
  for (long t = 0; t < threads; t++) {
    lane_t* lane = &lanes[t];
    bench_rng_init(&lane->rng, (uint64_t)t);
    lane->generation = 0;
    lane->blocks = (void**)bench_malloc(slots * sizeof(void*));
    lane->sizes = (size_t*)bench_malloc(slots * sizeof(size_t));
    for (size_t k = 0; k < slots; k++) {
      lane->sizes[k] = bench_range(&lane->rng, min_size, max_size);
      lane->blocks[k] = bench_malloc(lane->sizes[k]);
      bench_mark(lane->blocks[k], lane->sizes[k], k);
    }
  }

  const double start = bench_now();
  for (long t = 0; t < threads; t++) {
    pthread_t first;
    if (pthread_create(&first, NULL, lane_work, &lanes[t]) != 0) bench_fail("pthread_create");
    pthread_detach(first);
  }
  bench_lanes_wait(threads);
  const double secs = bench_now() - start;

  for (long t = 0; t < threads; t++) {
    for (size_t k = 0; k < slots; k++) {
      bench_check(lanes[t].blocks[k], lanes[t].sizes[k], k, "larson (main)");
      free(lanes[t].blocks[k]);
    }
    free(lanes[t].blocks);
    free(lanes[t].sizes);
  }
  free(lanes);
  const double total = (double)threads * (double)generations * (double)replacements;
  printf("larson: %ld threads x %ld generations x %ld replacements, %.2f Mreplacements/s\n",
         threads, generations, replacements, total / secs / 1e6);
  return 0;
}
