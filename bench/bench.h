/* ----------------------------------------------------------------------------
  bench.h -- the few helpers every workload of the benchmark suite shares.

  The workloads call only the standard malloc/free/realloc (and new/delete in
  C++) so the same binary can be measured under any allocator through
  LD_PRELOAD. None of them links mimalloc. This header gives them:
  - a small, fast, seedable random generator (xorshift64*), so every run of a
    workload with the same arguments does the same allocations;
  - a monotonic clock;
  - integer arguments by position with a default;
  - a checked-block convention: a workload writes a tag into the first and last
    word of a block and verifies both before freeing it, so an allocator that
    hands out one block twice, or corrupts a block, makes the workload fail
    (exit 1 with "FAILED: ...") instead of printing a figure;
  - the output convention: one line, `name: figure ...`, optionally ending in
    `check=HEX` for single-threaded workloads whose result is deterministic
    (the runner compares it across allocators).
-----------------------------------------------------------------------------*/
#ifndef BENCH_H
#define BENCH_H

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
#define BENCH_UNUSED [[maybe_unused]]
#else
#define BENCH_UNUSED __attribute__((unused))
#endif

/* ---------------------------------------------------------------------------
  Random numbers
---------------------------------------------------------------------------*/

typedef struct bench_rng_s { uint64_t state; } bench_rng_t;

BENCH_UNUSED static inline void bench_rng_init(bench_rng_t* r, uint64_t seed) {
  // splitmix the seed once so that small seeds (thread numbers) diverge at once
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  r->state = (z ^ (z >> 31)) | 1;
}

BENCH_UNUSED static inline uint64_t bench_rand(bench_rng_t* r) {
  uint64_t x = r->state;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  r->state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

// uniform in [0, n) (n > 0; the bias of the modulo is irrelevant here)
BENCH_UNUSED static inline size_t bench_below(bench_rng_t* r, size_t n) {
  return (size_t)((bench_rand(r) >> 11) % n);
}

// uniform in [lo, hi]
BENCH_UNUSED static inline size_t bench_range(bench_rng_t* r, size_t lo, size_t hi) {
  return lo + bench_below(r, hi - lo + 1);
}

// log-uniform in [lo, hi]: every power-of-two range equally likely, so small
// sizes dominate the count and large ones the bytes, as in real programs.
BENCH_UNUSED static inline size_t bench_log_range(bench_rng_t* r, size_t lo, size_t hi) {
  unsigned lo_bits = 63 - (unsigned)__builtin_clzll((unsigned long long)lo);
  unsigned hi_bits = 63 - (unsigned)__builtin_clzll((unsigned long long)hi);
  unsigned b = lo_bits + (unsigned)bench_below(r, hi_bits - lo_bits + 1);
  size_t base = (size_t)1 << b;
  size_t n = base + bench_below(r, base);   // in [2^b, 2^(b+1))
  if (n < lo) n = lo;
  if (n > hi) n = hi;
  return n;
}

/* ---------------------------------------------------------------------------
  Time, arguments, failure
---------------------------------------------------------------------------*/

BENCH_UNUSED static inline double bench_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// argument `i` (1-based) as an integer, or `def` when absent or "-"
BENCH_UNUSED static inline long bench_arg(int argc, char** argv, int i, long def) {
  if (i >= argc || strcmp(argv[i], "-") == 0) return def;
  return strtol(argv[i], NULL, 0);
}

BENCH_UNUSED static inline int bench_ncpu(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return (n < 1 ? 1 : (int)n);
}

BENCH_UNUSED __attribute__((noreturn, format(printf, 1, 2)))
static void bench_fail(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fputs("FAILED: ", stdout);
  vfprintf(stdout, fmt, args);
  fputc('\n', stdout);
  fflush(stdout);
  va_end(args);
  exit(1);
}

// malloc that treats NULL as a failure of the run (the workloads never ask
// for more than a few hundred MiB in total)
BENCH_UNUSED static inline void* bench_malloc(size_t n) {
  void* p = malloc(n);
  if (p == NULL) bench_fail("malloc(%zu) returned NULL", n);
  return p;
}

// Memory on cache lines of its own (BENCH_LINE bytes: two 64-byte lines, as
// the adjacent-line prefetcher fetches them in pairs), for state that threads
// write often and that must not share a line with another thread's state.
#define BENCH_LINE 128
BENCH_UNUSED static inline void* bench_malloc_lines(size_t n) {
  n = (n + BENCH_LINE - 1) / BENCH_LINE * BENCH_LINE;
  void* p = aligned_alloc(BENCH_LINE, n);
  if (p == NULL) bench_fail("aligned_alloc(%d, %zu) returned NULL", BENCH_LINE, n);
  return p;
}

BENCH_UNUSED static inline void* bench_realloc(void* p, size_t n) {
  void* q = realloc(p, n);
  if (q == NULL) bench_fail("realloc(%zu) returned NULL", n);
  return q;
}

/* ---------------------------------------------------------------------------
  Checked blocks: the tag is written into the first and the last word of a
  block (blocks are at least one word; a block of exactly one word holds one
  copy). The tag mixes the block size, so a block confused with another of a
  different size is caught too.
---------------------------------------------------------------------------*/

BENCH_UNUSED static inline uint64_t bench_tag(size_t size, uint64_t salt) {
  return ((uint64_t)size * 0x9E3779B97F4A7C15ull) ^ salt ^ 0x5A5A5A5A5A5A5A5Aull;
}

BENCH_UNUSED static inline void bench_mark(void* p, size_t size, uint64_t salt) {
  uint64_t t = bench_tag(size, salt);
  memcpy(p, &t, sizeof t);
  if (size >= 2 * sizeof t) memcpy((char*)p + size - sizeof t, &t, sizeof t);
}

BENCH_UNUSED static inline void bench_check(const void* p, size_t size, uint64_t salt, const char* where) {
  uint64_t t = bench_tag(size, salt), a, b;
  memcpy(&a, p, sizeof a);
  b = a;
  if (size >= 2 * sizeof t) memcpy(&b, (const char*)p + size - sizeof t, sizeof b);
  if (a != t || b != t) bench_fail("%s: block %p of %zu bytes was corrupted", where, p, size);
}

// a hash of a word into a running check value (order-dependent)
BENCH_UNUSED static inline uint64_t bench_hash(uint64_t h, uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

// The false-sharing loop of cache-scratch and cache-thrash: allocate a small
// object, write every byte of it `repetitions` times, free it; `iterations` times.
// Objects of threads that share a cache line slow each other down.
BENCH_UNUSED static inline void bench_touch_loop(long iterations, long repetitions, size_t size) {
  for (long i = 0; i < iterations; i++) {
    volatile char* p = (volatile char*)bench_malloc(size);
    for (long r = 0; r < repetitions; r++) {
      for (size_t j = 0; j < size; j++) p[j] = (char)(p[j] + 1);
    }
    free((void*)p);
  }
}

// Wait a little in a loop that polls for another thread's progress; `spins`
// counts the calls since the last progress (start at 0). First the CPU's pause
// hint, then sched_yield, then 20 us sleeps: on a loaded machine the thread we
// wait for may share our core, and a yield does not always let it run.
BENCH_UNUSED static inline void bench_backoff(unsigned* spins) {
  const unsigned n = (*spins)++;
  if (n < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (n < 128) {
    sched_yield();
  } else {
    const struct timespec t = { 0, 20000 };
    nanosleep(&t, NULL);
  }
}

// Run `worker` in `threads` threads (argument: the thread number, 1..threads)
// and return the elapsed wall time in seconds.
BENCH_UNUSED static inline double bench_run_threads(long threads, void* (*worker)(void*)) {
  pthread_t* tids = (pthread_t*)bench_malloc((size_t)threads * sizeof(pthread_t));
  const double start = bench_now();
  for (long t = 0; t < threads; t++) {
    if (pthread_create(&tids[t], NULL, worker, (void*)(uintptr_t)(t + 1)) != 0) bench_fail("pthread_create");
  }
  for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  const double secs = bench_now() - start;
  free(tids);
  return secs;
}

// A checked block and its size: tagged (salt 0) when made, checked when freed.
typedef struct bench_item_s { void* block; size_t size; } bench_item_t;

BENCH_UNUSED static inline bench_item_t bench_item_new(size_t size) {
  bench_item_t it;
  it.size = size;
  it.block = bench_malloc(size);
  bench_mark(it.block, size, 0);
  return it;
}

BENCH_UNUSED static inline void bench_item_free(bench_item_t it, const char* where) {
  bench_check(it.block, it.size, 0, where);
  free(it.block);
}

// Lanes: work that a thread does for a while and then hands to a fresh thread
// before it ends (so blocks outlive the threads that allocated them). At the
// end of its share a thread calls bench_lane_next: with `more` it starts
// `work(lane)` in a new detached thread, else it counts the lane as done;
// the main thread waits for all lanes with bench_lanes_wait.
BENCH_UNUSED static pthread_mutex_t bench_lanes_lock = PTHREAD_MUTEX_INITIALIZER;
BENCH_UNUSED static pthread_cond_t bench_lanes_cond = PTHREAD_COND_INITIALIZER;
BENCH_UNUSED static long bench_lanes_done;

BENCH_UNUSED static inline void bench_lane_next(void* (*work)(void*), void* lane, int more) {
  if (more) {
    pthread_t next;
    if (pthread_create(&next, NULL, work, lane) != 0) bench_fail("pthread_create");
    pthread_detach(next);
    return;
  }
  pthread_mutex_lock(&bench_lanes_lock);
  bench_lanes_done++;
  pthread_cond_signal(&bench_lanes_cond);
  pthread_mutex_unlock(&bench_lanes_lock);
}

BENCH_UNUSED static inline void bench_lanes_wait(long lanes) {
  pthread_mutex_lock(&bench_lanes_lock);
  while (bench_lanes_done < lanes) pthread_cond_wait(&bench_lanes_cond, &bench_lanes_lock);
  pthread_mutex_unlock(&bench_lanes_lock);
}

#endif
