/* ----------------------------------------------------------------------------
  rptest.c -- a realistic mix of sizes and lifetimes over threads (rptest kind).

  Mattias Jansson's rpmalloc benchmark simulates an application: many threads
  allocate blocks whose sizes follow a skewed distribution (mostly small, some
  medium, a few large), keep them for a varying time, and pass some to other
  threads. Here each of `threads` threads keeps a working set of `slots`
  blocks and runs `loops` loops. A loop
  - frees whatever other threads sent to this thread's mailbox;
  - replaces a random half of the slots: the old block is freed, or, once in
    `cross` times, sent to the next thread's mailbox instead;
  - initialises every new block (its first 256 bytes at most) and tags it.
  So lifetimes are geometric (a block survives a loop with probability 1/2)
  and a fixed share of the frees happens in another thread. Sizes: 60% in
  [16, 64], 25% up to 512, 12% up to 4 KiB, 3% up to `max` (16000).

  Every block carries a tag (bench.h) checked before it is freed.

  usage: rptest [threads=ncpu] [loops=6000] [slots=2000] [cross=16] [max=16000]
  prints: replacements per second (all threads).
-----------------------------------------------------------------------------*/
#include <pthread.h>
#include "bench.h"

typedef struct item_s { void* block; size_t size; } item_t;

typedef struct mailbox_s {
  pthread_mutex_t lock;
  item_t* items;         // blocks sent here, not yet freed
  size_t count, capacity;
} mailbox_t;

static long threads, loops, cross;
static size_t slots, max_size;
static mailbox_t* mailboxes;

static size_t random_size(bench_rng_t* rng) {
  const size_t r = bench_below(rng, 100);
  if (r < 60) return bench_range(rng, 16, 64);
  if (r < 85) return bench_range(rng, 65, 512);
  if (r < 97) return bench_range(rng, 513, 4096);
  return bench_range(rng, 4097, max_size);
}

static void mailbox_send(mailbox_t* m, item_t it) {
  pthread_mutex_lock(&m->lock);
  if (m->count == m->capacity) {
    m->capacity = (m->capacity == 0 ? 256 : 2 * m->capacity);
    m->items = (item_t*)bench_realloc(m->items, m->capacity * sizeof(item_t));
  }
  m->items[m->count++] = it;
  pthread_mutex_unlock(&m->lock);
}

// free everything in the mailbox (outside the lock: take the array, leave an empty one)
static size_t mailbox_drain(mailbox_t* m) {
  pthread_mutex_lock(&m->lock);
  item_t* items = m->items;
  const size_t count = m->count;
  m->items = NULL;
  m->count = m->capacity = 0;
  pthread_mutex_unlock(&m->lock);
  for (size_t i = 0; i < count; i++) {
    bench_check(items[i].block, items[i].size, 0, "rptest (mailbox)");
    free(items[i].block);
  }
  free(items);
  return count;
}

static void* worker(void* arg) {
  const long self = (long)(uintptr_t)arg;
  mailbox_t* next = &mailboxes[(self + 1) % threads];
  bench_rng_t rng;
  bench_rng_init(&rng, (uint64_t)self + 100);
  item_t* set = (item_t*)calloc(slots, sizeof(item_t));
  if (set == NULL) bench_fail("calloc");
  for (long l = 0; l < loops; l++) {
    mailbox_drain(&mailboxes[self]);
    for (size_t k = 0; k < slots; k++) {
      if (set[k].block != NULL) {
        if (bench_below(&rng, 2) == 0) continue;   // survives this loop
        bench_check(set[k].block, set[k].size, 0, "rptest");
        if (bench_below(&rng, (size_t)cross) == 0) mailbox_send(next, set[k]);
        else free(set[k].block);
      }
      set[k].size = random_size(&rng);
      set[k].block = bench_malloc(set[k].size);
      memset(set[k].block, (int)k, set[k].size < 256 ? set[k].size : 256);   // initialise the object
      bench_mark(set[k].block, set[k].size, 0);
    }
  }
  for (size_t k = 0; k < slots; k++) {
    if (set[k].block == NULL) continue;
    bench_check(set[k].block, set[k].size, 0, "rptest");
    free(set[k].block);
  }
  free(set);
  return NULL;
}

int main(int argc, char** argv) {
  threads = bench_arg(argc, argv, 1, bench_ncpu());
  loops = bench_arg(argc, argv, 2, 6000);
  slots = (size_t)bench_arg(argc, argv, 3, 2000);
  cross = bench_arg(argc, argv, 4, 16);
  max_size = (size_t)bench_arg(argc, argv, 5, 16000);
  if (cross < 1) cross = 1;
  if (max_size < 4097) max_size = 4097;
  mailboxes = (mailbox_t*)calloc((size_t)threads, sizeof(mailbox_t));
  pthread_t* tids = (pthread_t*)bench_malloc((size_t)threads * sizeof(pthread_t));
  if (mailboxes == NULL) bench_fail("calloc");
  for (long t = 0; t < threads; t++) pthread_mutex_init(&mailboxes[t].lock, NULL);

  const double start = bench_now();
  for (long t = 0; t < threads; t++) {
    if (pthread_create(&tids[t], NULL, worker, (void*)(uintptr_t)t) != 0) bench_fail("pthread_create");
  }
  for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  const double secs = bench_now() - start;
  for (long t = 0; t < threads; t++) mailbox_drain(&mailboxes[t]);
  free(mailboxes);
  free(tids);
  // about half of the slots are replaced per loop
  printf("rptest: %ld threads x %ld loops x %zu slots, %.2f Mreplacements/s\n", threads, loops, slots,
         (double)threads * (double)loops * (double)slots / 2 / secs / 1e6);
  return 0;
}
