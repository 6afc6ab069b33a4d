/* ----------------------------------------------------------------------------
  test-memreturn.c -- does freed memory go back to the OS?

  Usage: mimalloc-test-memreturn [SLACK_MIB] [DELAY_MS]
         (defaults: 16 MiB, 0 ms)

  Each phase allocates about 256 MiB, touches every byte, frees it all, calls
  mi_collect(true) and then reads the resident set size of the process
  (statm.h: /proc/self/statm on Linux, the working set on Windows). The
  phase passes when

      rss after collect  <=  rss at start + SLACK_MIB

  where "rss at start" is measured once, after a small warm-up allocation.

    A  small blocks (64 B .. 1 KiB) allocated and freed by the main thread
    B  large blocks (256 KiB .. 8 MiB) plus huge ones of 33 and 97 MiB
       (one each side of the 64 MiB limit above which 1.6 maps huge objects
       straight from the OS), main thread
    C  phase A run by a second thread that frees everything and exits; the
       main thread then calls mi_collect(true)
    D  a second thread allocates the small blocks and exits holding all of
       them (its pages are abandoned); the main thread frees them (cross-thread
       frees into abandoned pages) and calls mi_collect(true), which must
       reclaim and release the abandoned segments

  Blocks are chained through their first word, so the test keeps no side
  array of pointers (which would itself be resident); frees go in two passes
  (every other block, then the rest) so that pages first become partly free.

  Why 16 MiB: after a forced collect a lean allocator may legitimately keep
  the segment(s) holding live objects from before the test (the warm-up
  block, stdio buffers and thread bookkeeping when it is also the process's
  malloc), a few KiB of metadata per thread and region/arena bitmaps, and the
  C library keeps the exited thread's (mostly untouched) stack in its cache.
  Together that is a few MiB; 16 MiB is four 4 MiB segments, about 6% of the
  256 MiB each phase moves through. An allocator that keeps whole freed
  segments or huge objects resident, or frees with MADV_FREE (pages stay
  counted in RSS until the kernel is short of memory), fails.

  DELAY_MS > 0 waits that long after the first collect and collects again
  before the final reading -- for allocators that purge with a delay (the
  default 0 demands that mi_collect(true) itself returns the memory).

  Every figure is printed in MiB: start, peak (measured right before the
  frees), after free (before collect) and after collect. As a sanity check
  each phase must also have raised RSS by at least 3/4 of what it allocated,
  or the measurement itself is broken. Exits 0 when all phases pass, 1 when
  one fails, 77 (the CTest "skipped" convention) where the resident size
  cannot be read.
-----------------------------------------------------------------------------*/
#define _POSIX_C_SOURCE 200809L   // nanosleep, sysconf

#include <mimalloc.h>
#include "statm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------

#define KiB ((size_t)1024)
#define MiB (KiB*KiB)

#define PHASE_BYTES        (256*MiB)   // requested bytes per phase
#define DEFAULT_SLACK_MIB  16          // see the essay above
#define SMALL_MIN          64
#define SMALL_MAX          KiB
#define LARGE_MIN          (256*KiB)
#define LARGE_MAX          (8*MiB)
#define HUGE_1             (33*MiB)    // below the 64 MiB region limit of 1.6
#define HUGE_2             (97*MiB)    // above it

#define EXIT_SKIP          77

// ---------------------------------------------------------------------------
// Resident set size
// ---------------------------------------------------------------------------

static bool rss_read(size_t* rss) {
  size_t vsize;
  return statm_read(&vsize, rss);
}

static size_t rss_now(void) {
  size_t rss = 0;
  if (!rss_read(&rss)) {
    fprintf(stderr, "mimalloc-test-memreturn: cannot read the resident size (statm.h)\n");
    exit(1);
  }
  return rss;
}

static double mib(size_t bytes) { return (double)bytes / (double)MiB; }

// ---------------------------------------------------------------------------
// Allocating and freeing a chain of blocks
// ---------------------------------------------------------------------------

typedef struct block_s {
  struct block_s* next;
} block_t;

static uint64_t rng_state = UINT64_C(0x6d656d7265747572);   // "memretur": fixed, so runs are repeatable

static uint64_t rnd(void) {
  uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static block_t* push_block(block_t* head, size_t size) {
  block_t* b = (block_t*)mi_malloc(size);
  if (b == NULL) {
    fprintf(stderr, "mimalloc-test-memreturn: mi_malloc(%zu) failed\n", size);
    exit(1);
  }
  memset(b, 0x5A, size);   // touch every byte
  b->next = head;
  return b;
}

static block_t* alloc_small(void) {
  block_t* head = NULL;
  for (size_t total = 0; total < PHASE_BYTES; ) {
    const size_t size = SMALL_MIN + (size_t)(rnd() % (SMALL_MAX - SMALL_MIN + 1));
    head = push_block(head, size);
    total += size;
  }
  return head;
}

static block_t* alloc_large(void) {
  block_t* head = NULL;
  const size_t large_total = PHASE_BYTES - HUGE_1 - HUGE_2;
  size_t total = 0;
  bool huge1 = false, huge2 = false;
  while (total < large_total) {
    // log-uniform in [LARGE_MIN, LARGE_MAX]
    const unsigned k = 18 + (unsigned)(rnd() % 5);                     // 256 KiB .. 4 MiB
    size_t size = ((size_t)1 << k) + (size_t)(rnd() % ((uint64_t)1 << k));
    if (size > LARGE_MAX) size = LARGE_MAX;
    head = push_block(head, size);
    total += size;
    // interleave the huge ones so they sit between large blocks
    if (!huge1 && total >= large_total / 3) { head = push_block(head, HUGE_1); huge1 = true; }
    if (!huge2 && total >= 2 * large_total / 3) { head = push_block(head, HUGE_2); huge2 = true; }
  }
  if (!huge1) head = push_block(head, HUGE_1);
  if (!huge2) head = push_block(head, HUGE_2);
  return head;
}

// Free every other block first, then the rest, so pages go through "partly free".
static void free_chain(block_t* head) {
  for (block_t* b = head; b != NULL && b->next != NULL; b = b->next) {
    block_t* victim = b->next;
    b->next = victim->next;
    mi_free(victim);
  }
  while (head != NULL) {
    block_t* next = head->next;
    mi_free(head);
    head = next;
  }
}

// ---------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------

typedef struct figures_s {
  size_t peak;         // right before the frees
  size_t after_free;   // after the frees, before mi_collect(true)
  size_t after_collect;
  size_t after_delay;  // after DELAY_MS and a second collect (0 if no delay)
} figures_t;

static size_t delay_ms;

static void collect_and_measure(figures_t* f) {
  mi_collect(true);
  f->after_collect = rss_now();
  if (delay_ms > 0) {
    struct timespec ts = { (time_t)(delay_ms / 1000), (long)(delay_ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) { }
    mi_collect(true);
    f->after_delay = rss_now();
  }
}

static void phase_small(figures_t* f) {
  block_t* chain = alloc_small();
  f->peak = rss_now();
  free_chain(chain);
  f->after_free = rss_now();
  collect_and_measure(f);
}

static void phase_large(figures_t* f) {
  block_t* chain = alloc_large();
  f->peak = rss_now();
  free_chain(chain);
  f->after_free = rss_now();
  collect_and_measure(f);
}

// Phase C: the whole of phase A in a thread that exits holding nothing.
static void* thread_small_all(void* arg) {
  figures_t* f = (figures_t*)arg;
  block_t* chain = alloc_small();
  f->peak = rss_now();
  free_chain(chain);
  f->after_free = rss_now();
  return NULL;
}

// Phase D: a thread that exits holding everything it allocated.
static void* thread_small_keep(void* arg) {
  figures_t* f = (figures_t*)arg;
  block_t* chain = alloc_small();
  f->peak = rss_now();
  return chain;
}

static void run_thread(void* (*fn)(void*), figures_t* f, void** result) {
  pthread_t t;
  int err = pthread_create(&t, NULL, fn, f);
  if (err == 0) err = pthread_join(t, result);
  if (err != 0) {
    fprintf(stderr, "mimalloc-test-memreturn: pthread: %s\n", strerror(err));
    exit(1);
  }
}

static void phase_thread_frees(figures_t* f) {
  run_thread(&thread_small_all, f, NULL);
  collect_and_measure(f);
}

static void phase_main_frees_orphans(figures_t* f) {
  void* chain = NULL;
  run_thread(&thread_small_keep, f, &chain);
  free_chain((block_t*)chain);
  f->after_free = rss_now();
  collect_and_measure(f);
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

static bool report(const char* name, const char* what, size_t start, size_t slack, const figures_t* f) {
  const size_t final = (delay_ms > 0 ? f->after_delay : f->after_collect);
  const bool grew = (f->peak >= start + (PHASE_BYTES / 4) * 3);
  const bool ok = grew && (final <= start + slack);
  printf("phase %s %-44s start %7.1f  peak %7.1f  after free %7.1f  after collect %7.1f",
         name, what, mib(start), mib(f->peak), mib(f->after_free), mib(f->after_collect));
  if (delay_ms > 0) printf("  after %zu ms %7.1f", delay_ms, mib(f->after_delay));
  printf("  MiB: %s\n", (ok ? "ok" : "FAILED"));
  if (!grew) {
    printf("  error: RSS grew by only %.1f MiB while %.0f MiB were allocated and touched; is the resident size (statm.h) reliable?\n",
           mib(f->peak > start ? f->peak - start : 0), mib(PHASE_BYTES));
  }
  else if (!ok) {
    printf("  error: %.1f MiB still resident above the start after freeing everything and mi_collect(true); "
           "the bound is start + %zu MiB\n", mib(final - start), slack / MiB);
  }
  fflush(stdout);
  return ok;
}

static void usage(const char* prog) {
  fprintf(stderr, "usage: %s [SLACK_MIB] [DELAY_MS]\n"
          "  SLACK_MIB  allowed RSS above the start after each phase (default %d)\n"
          "  DELAY_MS   wait this long after mi_collect(true), then collect again before measuring (default 0)\n",
          prog, DEFAULT_SLACK_MIB);
  exit(2);
}

int main(int argc, char** argv) {
  size_t slack_mib = DEFAULT_SLACK_MIB;
  char* end;
  if (argc > 3) usage(argv[0]);
  if (argc > 1) {
    errno = 0; slack_mib = (size_t)strtoul(argv[1], &end, 10);
    if (errno != 0 || *end != 0 || slack_mib > 4096) usage(argv[0]);
  }
  if (argc > 2) {
    errno = 0; delay_ms = (size_t)strtoul(argv[2], &end, 10);
    if (errno != 0 || *end != 0 || delay_ms > 600000) usage(argv[0]);
  }
  size_t dummy;
  if (!rss_read(&dummy)) {
    printf("mimalloc-test-memreturn: skipped: the resident size is not available (statm.h)\n");
    return EXIT_SKIP;
  }

  // Warm up: initialise the allocator and the C library's output before the baseline.
  void* warm = mi_malloc(100);
  memset(warm, 1, 100);
  printf("mimalloc-test-memreturn: mimalloc version %d, %zu MiB per phase, bound start + %zu MiB%s\n",
         mi_version(), PHASE_BYTES / MiB, slack_mib, (delay_ms > 0 ? " (after a delay)" : ""));
  fflush(stdout);
  mi_collect(true);
  const size_t start = rss_now();
  const size_t slack = slack_mib * MiB;

  bool ok = true;
  figures_t f;
  memset(&f, 0, sizeof(f)); phase_small(&f);
  ok = report("A", "small blocks, main thread:", start, slack, &f) && ok;
  memset(&f, 0, sizeof(f)); phase_large(&f);
  ok = report("B", "large + huge blocks, main thread:", start, slack, &f) && ok;
  memset(&f, 0, sizeof(f)); phase_thread_frees(&f);
  ok = report("C", "small blocks, thread frees and exits:", start, slack, &f) && ok;
  memset(&f, 0, sizeof(f)); phase_main_frees_orphans(&f);
  ok = report("D", "small blocks, thread exits, main frees:", start, slack, &f) && ok;

  mi_free(warm);
  printf("mimalloc-test-memreturn: %s\n", (ok ? "OK" : "FAILED"));
  return (ok ? 0 : 1);
}
