/* ----------------------------------------------------------------------------
  test-exchange.c -- threads exchanging blocks while another thread collects:
  the shape in which the owner of a page and the threads freeing its blocks
  touch the page's descriptor at the same time. Built for ThreadSanitizer (CI
  runs it in the checked builds with TSan: a report fails the run) and run in
  every other build as a test of its own.

  Usage: mimalloc-test-exchange [THREADS] [MILLISECONDS]   (default 8, 2000)

  THREADS workers share an array of slots. Each step a worker allocates a
  block of a mixed size (random_size), stamps it,
  and swaps it into a random slot; the block it takes out (most likely made by
  another thread) is checked and then reallocated (a quarter of them, and
  checked again) or freed. A worker ends after 200 to 2,200 steps, with
  its blocks still in the slots (its pages are abandoned while others free
  into them), and a new one takes its place. One more thread calls
  mi_collect(true) every millisecond, so pages are retired, reclaimed and
  unretired all the time.
  At the end every slot is emptied (each block checked).
-----------------------------------------------------------------------------*/
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <mimalloc.h>

#define SLOTS       (4096)
#define MAX_THREADS (64)

static _Atomic(uint8_t*) slots[SLOTS];
static atomic_bool stop;
static atomic_long failures;

// the block's first and last bytes say its size (a stamp checked on take-out)
typedef struct stamp_s { size_t size; uintptr_t check; } stamp_t;

static void stamp(uint8_t* p, size_t size) {
  stamp_t s = { size, (uintptr_t)p ^ size ^ 0x5A5A5A5Au };
  memcpy(p, &s, sizeof(s));
  memset(p + sizeof(s), (int)(size & 0xFF), size - sizeof(s));
}

static size_t check(const uint8_t* p) {
  stamp_t s;
  memcpy(&s, p, sizeof(s));
  if (s.check != ((uintptr_t)p ^ s.size ^ 0x5A5A5A5Au) || p[s.size - 1] != (uint8_t)(s.size & 0xFF)) {
    fprintf(stderr, "exchange: block %p damaged\n", (const void*)p);
    atomic_fetch_add(&failures, 1);
    return 0;
  }
  return s.size;
}

static uint64_t next_random(uint64_t* x) {   // xorshift64*
  *x ^= *x >> 12; *x ^= *x << 25; *x ^= *x >> 27;
  return *x * 0x2545F4914F6CDD1DULL;
}

// Three in four of a few sizes (so that each has several pages, which
// retire and come back), the others spread over 17 B .. 64 KiB (one in 64 of
// those up to 1 MiB).
static size_t random_size(uint64_t* rnd) {
  static const size_t common[8] = { 24, 48, 64, 200, 1000, 3000, 9000, 40000 };
  const uint64_t r = next_random(rnd);
  if ((r & 3) != 0) return common[(r >> 2) & 7];
  const size_t max = ((r & 63) == 0 ? 1024 * 1024 : 64 * 1024);
  return sizeof(stamp_t) + 1 + (size_t)((r >> 8) % (max >> (1 + (r >> 40) % 12)));
}

typedef struct worker_s {
  pthread_t   handle;
  uint64_t    seed;
  atomic_bool done;
} worker_t;

static void* worker(void* arg) {
  worker_t* const w = (worker_t*)arg;
  uint64_t rnd = w->seed;
  long ops = 200 + (long)(next_random(&rnd) % 2000);   // then the thread ends, its blocks live on
  while (ops-- > 0 && !atomic_load_explicit(&stop, memory_order_relaxed)) {
    const size_t size = random_size(&rnd);
    uint8_t* p = (uint8_t*)mi_malloc(size);
    if (p == NULL) { atomic_fetch_add(&failures, 1); break; }
    stamp(p, size);
    uint8_t* old = atomic_exchange(&slots[next_random(&rnd) % SLOTS], p);
    if (old == NULL) continue;
    const size_t oldsize = check(old);
    if (oldsize != 0 && next_random(&rnd) % 4 == 0) {
      const size_t newsize = random_size(&rnd);
      uint8_t* q = (uint8_t*)mi_realloc(old, newsize);
      if (q == NULL) { atomic_fetch_add(&failures, 1); break; }
      // the kept prefix is the old block's (its size word and fill bytes)
      const size_t kept = (oldsize < newsize ? oldsize : newsize);
      stamp_t s;
      memcpy(&s, q, sizeof(s));
      bool same = (s.size == oldsize);
      for (size_t i = sizeof(s); same && i < kept; i++) same = (q[i] == (uint8_t)(oldsize & 0xFF));
      if (!same) { fprintf(stderr, "exchange: realloc lost the content of %p\n", (void*)q); atomic_fetch_add(&failures, 1); }
      stamp(q, newsize);
      old = q;
    }
    mi_free(old);
  }
  atomic_store(&w->done, true);
  return NULL;
}

static bool start(worker_t* w, uint64_t seed) {
  w->seed = seed;
  atomic_store(&w->done, false);
  const int err = pthread_create(&w->handle, NULL, &worker, w);
  if (err != 0) fprintf(stderr, "exchange: pthread_create: %s\n", strerror(err));
  return (err == 0);
}

static void* collector(void* arg) {
  (void)arg;
  const struct timespec ms = { 0, 1000000 };
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    mi_collect(true);
    nanosleep(&ms, NULL);
  }
  return NULL;
}

// ---------------------------------------------------------------------------
// A retired page handed out again: the owner empties a page that still has
// blocks on its free list (it is retired, and counted as retired, while a
// page of its size stays in the queue), takes more blocks from it on the fast
// path, and hands them to a thread that frees them all, lowest address (the
// page's first block, the one whose free reads the page's front-canary flag)
// last. With no synchronisation from that thread back (a relaxed flag), the
// owner then collects, which counts the page as no longer retired: the write
// of that count and the other thread's read of the page may not share a byte
// (ThreadSanitizer reports it if they do).
// ---------------------------------------------------------------------------

#define HANDOFF_SIZE    (1000)
#define HANDOFF_BLOCKS  (400)

static void* handoff_blocks[HANDOFF_BLOCKS];
static size_t handoff_count;
static atomic_int handoff_done;

static int by_address_down(const void* a, const void* b) {
  const uintptr_t x = *(const uintptr_t*)a, y = *(const uintptr_t*)b;
  return (x < y ? 1 : x > y ? -1 : 0);
}

static void* handoff_free(void* arg) {
  (void)arg;
  for (size_t i = 0; i < handoff_count; i++) mi_free(handoff_blocks[i]);   // (highest address first)
  atomic_store_explicit(&handoff_done, 1, memory_order_relaxed);
  return NULL;
}

// the page (area) of the heap holding a block
typedef struct area_find_s { uintptr_t block; uintptr_t start; uintptr_t end; } area_find_t;

static bool find_area(const mi_heap_t* heap, const mi_heap_area_t* area, void* block, size_t block_size, void* arg) {
  (void)heap; (void)block; (void)block_size;
  area_find_t* const f = (area_find_t*)arg;
  const uintptr_t start = (uintptr_t)area->blocks;
  if (f->block >= start && f->block < start + area->reserved) { f->start = start; f->end = start + area->reserved; return false; }
  return true;
}

static area_find_t area_of(void* p) {
  area_find_t f = { (uintptr_t)p, 0, 0 };
  mi_heap_visit_blocks(mi_heap_get_default(), false, &find_area, &f);
  return f;
}

static bool in_area(const area_find_t* a, const void* p) {
  return ((uintptr_t)p >= a->start && (uintptr_t)p < a->end);
}

// One round; true if a block of the retired page was handed over.
static bool retired_page_handoff(bool* ok) {
  static void* first[HANDOFF_BLOCKS];
  size_t n = 0;
  // a page of the size filled, then four blocks of the next one (its first
  // blocks, in random order in secure builds: its first block is most
  // likely still on its free list)
  void* p = mi_malloc(HANDOFF_SIZE);
  if (p == NULL) { *ok = false; return false; }
  first[n++] = p;
  const area_find_t full = area_of(p);
  area_find_t last = full;
  size_t in_last = 0;
  while (n < HANDOFF_BLOCKS && in_last < 4) {
    p = mi_malloc(HANDOFF_SIZE);
    if (p == NULL) { *ok = false; return false; }
    first[n++] = p;
    if (in_last == 0 && !in_area(&full, p)) last = area_of(p);
    if (in_last > 0 || !in_area(&full, p)) in_last++;
  }
  // a block of the full page is freed (it leaves the full queue: the last
  // page is not its size's only page), then the last page is emptied:
  // retired, with blocks still on its free list
  mi_free(first[0]);
  first[0] = NULL;
  for (size_t i = 1; i < n; i++) {
    if (in_area(&last, first[i])) { mi_free(first[i]); first[i] = NULL; }
  }
  // more blocks, from the retired page's free list on the fast path
  handoff_count = 0;
  for (size_t i = 0; i < 24; i++) {
    void* q = mi_malloc(HANDOFF_SIZE);
    if (q == NULL) { *ok = false; return false; }
    handoff_blocks[handoff_count++] = q;
  }
  const bool handed = in_area(&last, handoff_blocks[0]);
  qsort(handoff_blocks, handoff_count, sizeof(void*), &by_address_down);
  atomic_store_explicit(&handoff_done, 0, memory_order_relaxed);
  pthread_t t;
  if (pthread_create(&t, NULL, &handoff_free, NULL) != 0) { *ok = false; return false; }
  while (atomic_load_explicit(&handoff_done, memory_order_relaxed) == 0) {
    const struct timespec ms = { 0, 1000000 };
    nanosleep(&ms, NULL);
  }
  mi_collect(false);   // the retired page has live (remotely freed) blocks: no longer retired
  pthread_join(t, NULL);
  for (size_t i = 0; i < n; i++) mi_free(first[i]);
  mi_collect(true);
  return handed;
}

int main(int argc, char** argv) {
  int threads = (argc > 1 ? atoi(argv[1]) : 8);
  const long millis = (argc > 2 ? atol(argv[2]) : 2000);
  if (threads < 1 || threads > MAX_THREADS || millis <= 0) {
    fprintf(stderr, "usage: mimalloc-test-exchange [THREADS (1..%d)] [MILLISECONDS]\n", MAX_THREADS);
    return 2;
  }
  bool ok = true;
  int handed = 0;
  for (int round = 0; round < 8 && ok; round++) {
    if (retired_page_handoff(&ok)) handed++;
  }
  if (!ok) { fprintf(stderr, "exchange: out of memory\n"); return 1; }
  printf("exchange: %d of 8 rounds handed a retired page's blocks to another thread\n", handed);
  static worker_t workers[MAX_THREADS];
  pthread_t coll;
  uint64_t seeds = 0x9E3779B97F4A7C15ULL;
  long started = 0;
  for (int i = 0; i < threads; i++, started++) {
    if (!start(&workers[i], next_random(&seeds))) return 1;
  }
  if (pthread_create(&coll, NULL, &collector, NULL) != 0) { perror("pthread_create"); return 1; }
  // a worker that ended is replaced at once (its pages are abandoned, with
  // blocks other threads hold, and reclaimed by whoever allocates next)
  struct timespec now, end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += millis / 1000;
  end.tv_nsec += (millis % 1000) * 1000000;
  if (end.tv_nsec >= 1000000000) { end.tv_sec++; end.tv_nsec -= 1000000000; }
  const struct timespec tick = { 0, 200000 };
  do {
    for (int i = 0; i < threads; i++) {
      if (!atomic_load(&workers[i].done)) continue;
      pthread_join(workers[i].handle, NULL);
      if (!start(&workers[i], next_random(&seeds))) { atomic_store(&stop, true); return 1; }
      started++;
    }
    nanosleep(&tick, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
  atomic_store(&stop, true);
  for (int i = 0; i < threads; i++) pthread_join(workers[i].handle, NULL);
  pthread_join(coll, NULL);
  size_t left = 0;
  for (size_t i = 0; i < SLOTS; i++) {
    uint8_t* p = atomic_exchange(&slots[i], NULL);
    if (p == NULL) continue;
    if (check(p) != 0) left++;
    mi_free(p);
  }
  mi_collect(true);
  const long failed = atomic_load(&failures);
  printf("exchange: %d threads at a time, %ld started, %ld ms, %zu blocks left in the slots, %ld failures\n",
         threads, started, millis, left, failed);
  return (failed == 0 ? 0 : 1);
}
