/* ----------------------------------------------------------------------------
  test-huge-remote.c -- huge blocks freed by a thread that did not allocate
  them go back to the OS after the purge delay, whatever their owner thread
  is doing.

    sleeping owner  A thread allocates huge blocks (a 256 MiB one mapped
                    straight from the OS, a 24 MiB one from a region, an
                    8 MiB one aligned to 8 MiB), touches every byte, hands
                    them over and blocks on a condition variable. Another
                    thread frees them: right after those frees the memory
                    is still resident (a purge at once was faulted in again
                    by any program that allocated a huge block soon after),
                    and within two purge delays (plus 300 ms of slack for
                    a loaded machine) the resident set must have dropped
                    by at least 3/4 of their size, though the owner runs
                    no allocator code until the check is done.
    exiting owner   A thread allocates a 96 MiB and an 8 MiB-aligned block,
                    touches them, hands them over and exits at the moment
                    the other thread starts to free them (the free reads the
                    owner id while the owner is still alive, then the owner
                    abandons the block's page). Eight rounds; afterwards the
                    address space the blocks took must be unmapped again: a
                    block left on a list that nobody collects keeps its
                    segment mapped until the process exits.

  Real threads, real OS memory; figures from statm.h (Linux: /proc/self/statm;
  Windows: the working set and the reserved and committed address space).
  Exits 0 when both pass, 1 when one fails, 77 (the CTest "skipped"
  convention) where the figures cannot be read.
-----------------------------------------------------------------------------*/
#define _POSIX_C_SOURCE 200809L

#include <mimalloc.h>
#include "statm.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <time.h>

#define KiB ((size_t)1024)
#define MiB (KiB*KiB)
#define EXIT_SKIP 77

// ---------------------------------------------------------------------------
// Resident and virtual size
// ---------------------------------------------------------------------------

static size_t rss_now(void) {
  size_t v, r;
  if (!statm_read(&v, &r)) abort();
  return r;
}

static size_t vsize_now(void) {
  size_t v, r;
  if (!statm_read(&v, &r)) abort();
  return v;
}

static double mib(size_t bytes) { return (double)bytes / (double)MiB; }

static long ms_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

// ---------------------------------------------------------------------------
// Sleeping owner
// ---------------------------------------------------------------------------

#define SLEEP_BLOCKS 3
static const size_t sleep_sizes[SLEEP_BLOCKS] = { 256*MiB, 24*MiB, 8*MiB };

static void* sleep_blocks[SLEEP_BLOCKS];
static atomic_int owner_ready;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;   // the owner blocks on wake_cond
static pthread_cond_t wake_cond = PTHREAD_COND_INITIALIZER;
static bool owner_may_exit;

static void* sleeping_owner(void* arg) {
  (void)arg;
  for (int i = 0; i < SLEEP_BLOCKS; i++) {
    sleep_blocks[i] = (i == SLEEP_BLOCKS - 1 ? mi_malloc_aligned(sleep_sizes[i], 8*MiB) : mi_malloc(sleep_sizes[i]));
    if (sleep_blocks[i] == NULL) abort();
    memset(sleep_blocks[i], 0x5A, sleep_sizes[i]);
  }
  atomic_store(&owner_ready, 1);
  pthread_mutex_lock(&wake_lock);   // no allocator calls meanwhile
  while (!owner_may_exit) pthread_cond_wait(&wake_cond, &wake_lock);
  pthread_mutex_unlock(&wake_lock);
  return NULL;
}

static bool test_sleeping_owner(void) {
  pthread_t owner;
  if (pthread_create(&owner, NULL, &sleeping_owner, NULL) != 0) abort();
  while (!atomic_load(&owner_ready)) sched_yield();
  size_t total = 0;
  for (int i = 0; i < SLEEP_BLOCKS; i++) total += sleep_sizes[i];
  const size_t before = rss_now();
  const long start = ms_now();
  for (int i = 0; i < SLEEP_BLOCKS; i++) mi_free(sleep_blocks[i]);   // this (main) thread is not the owner
  const size_t at_once = rss_now();
  const long took = ms_now() - start;
  const long delay = mi_option_get(mi_option_reset_delay);
  const long limit = 2 * delay + 300;
  long waited = 0;
  size_t after = at_once;
  while (after + total / 4 * 3 > before && waited < limit) {
    const struct timespec ten_ms = { 0, 10 * 1000 * 1000 };
    nanosleep(&ten_ms, NULL);
    waited += 10;
    after = rss_now();
  }
  // not purged at once: measurable only when the frees and the reading took
  // less than the delay (under ThreadSanitizer on a loaded machine they took
  // longer, and the purge was due before the reading)
  const bool timely = (took < delay / 2);
  const bool kept = (!timely || at_once + total / 2 > before);
  const bool dropped = (after + total / 4 * 3 <= before);
  const bool ok = kept && dropped;
  printf("sleeping owner: %.1f MiB of huge blocks freed by another thread; RSS %.1f -> %.1f MiB right after the frees (%ld ms%s), %.1f MiB after %ld ms (delay %ld ms): %s\n",
         mib(total), mib(before), mib(at_once), took, (timely ? "" : ": too slow to tell whether they were kept"), mib(after), waited, delay,
         ok ? "ok" : (!kept ? "FAILED (purged at once)" : "FAILED (still resident while the owner sleeps)"));
  pthread_mutex_lock(&wake_lock);
  owner_may_exit = true;
  pthread_cond_signal(&wake_cond);
  pthread_mutex_unlock(&wake_lock);
  pthread_join(owner, NULL);
  return ok;
}

// ---------------------------------------------------------------------------
// Exiting owner
// ---------------------------------------------------------------------------

#define EXIT_ROUNDS 8
#define EXIT_BLOCKS 2
static const size_t exit_sizes[EXIT_BLOCKS] = { 96*MiB, 8*MiB };

static _Atomic(void*) handed[EXIT_BLOCKS];
static atomic_int freeing;   // the freeing thread has started

static void* exiting_owner(void* arg) {
  (void)arg;
  for (int i = 0; i < EXIT_BLOCKS; i++) {
    void* p = (i == 1 ? mi_malloc_aligned(exit_sizes[i], 8*MiB) : mi_malloc(exit_sizes[i]));
    if (p == NULL) abort();
    memset(p, 0xA5, exit_sizes[i]);
    atomic_store(&handed[i], p);
  }
  while (!atomic_load(&freeing)) { /* spin: exit right as the frees start */ }
  return NULL;   // the thread ends: its pages are abandoned
}

static void* freeing_thread(void* arg) {
  (void)arg;
  void* p[EXIT_BLOCKS];
  for (int i = 0; i < EXIT_BLOCKS; i++) {
    while ((p[i] = atomic_load(&handed[i])) == NULL) { /* spin */ }
  }
  atomic_store(&freeing, 1);
  for (int i = 0; i < EXIT_BLOCKS; i++) mi_free(p[i]);
  return NULL;
}

static void exit_round(void) {
  for (int i = 0; i < EXIT_BLOCKS; i++) atomic_store(&handed[i], NULL);
  atomic_store(&freeing, 0);
  pthread_t owner, freer;
  if (pthread_create(&freer, NULL, &freeing_thread, NULL) != 0) abort();
  if (pthread_create(&owner, NULL, &exiting_owner, NULL) != 0) abort();
  pthread_join(owner, NULL);
  pthread_join(freer, NULL);
}

static bool test_exiting_owner(void) {
  exit_round();   // warm-up: thread stacks and metadata of the pattern exist before the baseline
  const size_t before = vsize_now();
  for (int r = 0; r < EXIT_ROUNDS; r++) exit_round();
  const size_t after = vsize_now();
  const size_t round_bytes = exit_sizes[0] + exit_sizes[1];
  // one stranded round keeps more than 96 MiB mapped; allow less than one
  const bool ok = (after <= before + round_bytes / 2);
  printf("exiting owner: %d rounds of %.1f MiB freed while the owner exits; address space %.1f -> %.1f MiB: %s\n",
         EXIT_ROUNDS, mib(round_bytes), mib(before), mib(after), ok ? "ok" : "FAILED (blocks nobody collects keep their segments mapped)");
  return ok;
}

int main(void) {
  size_t v, r;
  if (!statm_read(&v, &r)) {
    fprintf(stderr, "mimalloc-test-huge-remote: no resident or virtual size (statm.h): skipped\n");
    return EXIT_SKIP;
  }
  bool ok = test_sleeping_owner();
  ok = test_exiting_owner() && ok;
  return (ok ? 0 : 1);
}
