/* ----------------------------------------------------------------------------
  glibc-thread.c -- random malloc/free in every thread (after glibc's
  bench-malloc-thread).

  glibc's threaded micro benchmark runs the same loop in each of N threads:
  pick a random slot of a working set, free its block, allocate a new one of
  a random size in which small sizes are much more common than large ones
  (sizes up to 32 KiB), and reports the time per iteration. The random slots
  and sizes are drawn in advance into a table, so the loop measures the
  allocator and not the random generator. Here each of `threads` threads runs
  `iterations` iterations on its own working set of `slots` blocks; sizes are
  drawn with density proportional to 1/size^1.5 over [4, 32768] (a power
  law: about 80% of the requests are below 256 bytes).

  usage: glibc-thread [threads=ncpu] [iterations=50000000] [slots=4096]
  prints: nanoseconds per iteration (per thread, as glibc reports it).
-----------------------------------------------------------------------------*/
#include <math.h>
#include <pthread.h>
#include "bench.h"

#define TABLE 65536   // precomputed random (slot, size) pairs, cycled through

typedef struct draw_s { uint32_t slot; uint32_t size; } draw_t;

static long iterations;
static size_t slots;

static void* worker(void* arg) {
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)(uintptr_t)arg);
  draw_t* table = (draw_t*)bench_malloc(TABLE * sizeof(draw_t));
  for (size_t i = 0; i < TABLE; i++) {
    // inverse transform of the density c / x^1.5 on [4, 32768]
    const double lo = 1.0 / sqrt(4.0), hi = 1.0 / sqrt(32768.0);
    const double u = (double)(bench_rand(&rng) >> 11) / 9007199254740992.0;
    const double v = lo - u * (lo - hi);
    table[i].size = (uint32_t)(1.0 / (v * v));
    table[i].slot = (uint32_t)bench_below(&rng, slots);
  }
  void** set = (void**)calloc(slots, sizeof(void*));
  if (set == NULL) bench_fail("calloc");
  for (long it = 0; it < iterations; it++) {
    const draw_t d = table[(size_t)it & (TABLE - 1)];
    free(set[d.slot]);
    set[d.slot] = bench_malloc(d.size);
    *(volatile char*)set[d.slot] = 1;
  }
  for (size_t k = 0; k < slots; k++) free(set[k]);
  free(set);
  free(table);
  return NULL;
}

int main(int argc, char** argv) {
  const long threads = bench_arg(argc, argv, 1, bench_ncpu());
  iterations = bench_arg(argc, argv, 2, 50000000);
  slots = (size_t)bench_arg(argc, argv, 3, 4096);
  const double secs = bench_run_threads(threads, worker);
  printf("glibc-thread: %ld threads x %ld iterations, %.2f ns per iteration\n", threads, iterations,
         secs * 1e9 / (double)iterations);
  return 0;
}
