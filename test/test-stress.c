/* ----------------------------------------------------------------------------
  test-stress.c -- a repeatable multi-threaded stress test.

  Usage: mimalloc-test-stress [THREADS] [SECONDS] [SEED]
         (defaults: 8 threads, 5 seconds, seed 0x5eed; SECONDS may be fractional)

  The run is a sequence of rounds of ROUND_MS each. Every round starts THREADS
  fresh threads; each thread works on its own array of live objects and on one
  shared transfer array, then exits. What the allocator must survive:

  * Mixed sizes and entry points: mostly small blocks (8 B .. 1 KiB, 94%),
    some medium (1 .. 128 KiB, 5.8%), rare large (128 KiB .. 4 MiB, 0.2%),
    very rare huge (4 .. 72 MiB, 1 in 100000, so both sides of the 64 MiB
    region limit of 1.6), obtained through mi_malloc, mi_malloc_small,
    mi_zalloc, mi_calloc, mi_malloc_aligned (8 B .. 1 MiB alignment),
    mi_zalloc_aligned, mi_realloc and mi_rezalloc.
  * Cross-thread free: objects are handed over by an atomic exchange of a
    transfer slot; whoever takes one out frees, reallocates or passes it on.
  * Thread exit with live objects (abandonment, reclaim): the per-thread object
    arrays belong to the thread *index*, not to the thread, so the next round's
    thread with that index inherits -- and eventually frees -- everything its
    predecessor left, and objects in the transfer array outlive whole rounds.
    About a quarter of the threads end with an explicit mi_thread_done().
  * Heaps (mi_heap_new): every thread keeps one of its own heaps and serves
    about one allocation in eight from it (and, for a while, every plain
    one, after mi_heap_set_default); those blocks travel like any other.
    Every few thousand operations the thread deletes the heap -- while
    other threads may be freeing its blocks -- and starts a new one; the
    blocks live on in the backing heap. A scratch heap whose blocks are never
    shared is filled, thinned out, verified and destroyed (mi_heap_destroy),
    and the thread's other blocks must be untouched. Threads end with their
    heap deleted, or still live (thread exit deletes it).

  Content checks. Every block is stamped over its whole size with a pattern
  derived from (pointer, size, allocation id): word 0 is a header encoding
  size and id, every later word and the tail bytes follow from a hash of the
  triple. Blocks larger than FULL_FILL_MAX are stamped on word 0, every eighth
  word (one per 64 bytes) and the last word. The pattern is verified on every
  free, before and after every realloc (the preserved prefix), and when an
  object is taken out of the transfer array. Because the owner keeps the
  triple out of band (its object array, or a tag packed next to the pointer in
  the transfer slot), a block handed out twice is caught at the next check by
  whichever owner was overwritten (by the other's stamp or by a free-list
  link). Every fresh block is checked for its alignment (16 bytes above 8,
  or the requested one) and for mi_usable_size >= size; zeroed allocations
  must be zero over their whole usable size, as the API promises, and
  mi_rezalloc must zero the grown tail. Any failure prints what was found and
  where, and aborts (SIGABRT, non-zero exit).

  Repeatability: each thread draws from a splitmix64 stream seeded from SEED,
  the round and the thread index, so the sequence of operations of every
  thread is fixed by SEED; only the interleaving and how many operations fit
  in a round depend on scheduling.

  Bounds: the wall clock is read every CLOCK_CHECK operations; live bytes in
  blocks larger than 1 KiB are capped at LIVE_BUDGET (a request that would
  exceed it is turned into a small one), so the whole test stays within a few
  hundred MiB whatever the thread count.

  At the end the main thread frees (and verifies) every remaining object,
  calls mi_collect(true), prints one summary line and exits 0.
-----------------------------------------------------------------------------*/
#define _POSIX_C_SOURCE 200809L   // clock_gettime

#include <mimalloc.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------

#define KiB ((size_t)1024)
#define MiB (KiB*KiB)

#define DEFAULT_THREADS   8
#define DEFAULT_SECONDS   5.0
#define DEFAULT_SEED      UINT64_C(0x5eed)
#define MAX_THREADS       1024

#define LOCAL_SLOTS       1024          // live objects per thread index (survive the thread)
#define TRANSFER_SLOTS    2048          // shared hand-over slots (survive rounds)
#define ROUND_MS          100           // lifetime of one generation of threads
#define CLOCK_CHECK       256           // operations between clock reads

#define FULL_FILL_MAX     (16*KiB)      // larger blocks are stamped once per 64 bytes
#define UNCOUNTED_MAX     KiB           // blocks up to this size are not charged to the budget
#define LIVE_BUDGET       ((int64_t)(256*MiB))  // cap on live bytes of blocks > UNCOUNTED_MAX
#define MAX_OBJ_SIZE      (72*MiB)      // largest request the test makes

#define SERIAL_MOD        65535u        // thread serials are 1..SERIAL_MOD; 0 is the main thread

// ---------------------------------------------------------------------------
// Hashing and the per-thread random stream
// ---------------------------------------------------------------------------

static uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
  return x ^ (x >> 31);
}

static uint64_t splitmix64(uint64_t* state) {
  *state += UINT64_C(0x9E3779B97F4A7C15);
  return mix64(*state);
}

// ---------------------------------------------------------------------------
// Objects and their content pattern
// ---------------------------------------------------------------------------

// An object as its owner knows it; the triple (p, size, id) fixes its contents.
typedef struct obj_s {
  uint8_t* p;         // NULL = empty slot
  uint32_t size;      // requested size, >= 8
  uint32_t id;        // (serial of the allocating thread << 16) | per-thread counter
  bool     zero_tail; // bytes [size, usable) are known to be zero (zalloc/calloc lineage)
} obj_t;

static uint32_t id_serial(uint32_t id) { return id >> 16; }

static uint64_t obj_header(const void* p, size_t size, uint32_t id) {
  return ((((uint64_t)id) << 32) | (uint64_t)size) ^ mix64((uint64_t)(uintptr_t)p);
}

static uint64_t obj_base(const void* p, size_t size, uint32_t id) {
  return mix64((uint64_t)(uintptr_t)p ^ ((uint64_t)size << 29) ^ ((uint64_t)id * UINT64_C(0xD6E8FEB86659FD93)));
}

static uint64_t pattern_word(uint64_t base, size_t i) {
  return base ^ ((uint64_t)i * UINT64_C(0x9E3779B97F4A7C15));
}

static uint8_t pattern_byte(uint64_t base, size_t j) {
  return (uint8_t)((base >> ((j & 7) * 8)) ^ (uint64_t)j);
}

static uint64_t expected_word(const void* p, size_t size, uint32_t id, uint64_t base, size_t i) {
  return (i == 0 ? obj_header(p, size, id) : pattern_word(base, i));
}

// The byte at `offset` of the object (p, size, id), for stamped offsets.
static uint8_t expected_byte(const void* p, size_t size, uint32_t id, size_t offset) {
  const uint64_t base = obj_base(p, size, id);
  if (offset >= (size / 8) * 8) return pattern_byte(base, offset);
  const uint64_t e = expected_word(p, size, id, base, offset / 8);
  uint8_t bytes[8];
  memcpy(bytes, &e, sizeof(bytes));
  return bytes[offset % 8];
}

static size_t fill_stride(size_t size) {
  return (size <= FULL_FILL_MAX ? 1 : 8);
}

// Stamp the pattern of (p, size, id) into p.
static void obj_stamp(uint8_t* p, size_t size, uint32_t id) {
  const uint64_t base   = obj_base(p, size, id);
  const size_t   nwords = size / 8;
  const size_t   stride = fill_stride(size);
  uint64_t* w = (uint64_t*)(void*)p;
  w[0] = obj_header(p, size, id);
  for (size_t i = stride; i < nwords; i += stride) w[i] = pattern_word(base, i);
  if (nwords > 1) w[nwords - 1] = pattern_word(base, nwords - 1);
  for (size_t j = nwords * 8; j < size; j++) p[j] = pattern_byte(base, j);
}

// Check the first `n` bytes at `q` against the pattern of the object (p, size, id)
// (q != p after a moving realloc). Returns the offset of the first bad byte or SIZE_MAX.
static size_t obj_find_damage(const uint8_t* q, size_t n, const void* p, size_t size, uint32_t id) {
  const uint64_t base   = obj_base(p, size, id);
  const size_t   nwords = size / 8;
  const size_t   stride = fill_stride(size);
  if (n > size) n = size;
  const size_t   whole  = n / 8;   // words entirely inside [0, n)
  const uint64_t* w = (const uint64_t*)(const void*)q;
  if (whole > 0 && w[0] != obj_header(p, size, id)) return 0;
  for (size_t i = stride; i < whole && i < nwords; i += stride) {
    if (w[i] != pattern_word(base, i)) return i * 8;
  }
  if (nwords > 1 && nwords - 1 < whole && w[nwords - 1] != pattern_word(base, nwords - 1)) {
    return (nwords - 1) * 8;
  }
  // a word cut by `n` (realloc shrink): compare its stamped bytes
  const size_t cut = whole;
  if ((n % 8) != 0 && cut < nwords && (cut == 0 || (cut % stride) == 0 || cut == nwords - 1)) {
    const uint64_t e = expected_word(p, size, id, base, cut);
    const uint8_t* eb = (const uint8_t*)&e;
    for (size_t k = 0; k < n % 8; k++) {
      if (q[cut * 8 + k] != eb[k]) return cut * 8 + k;
    }
  }
  for (size_t j = nwords * 8; j < n; j++) {
    if (q[j] != pattern_byte(base, j)) return j;
  }
  return SIZE_MAX;
}

// Offset of the first non-zero byte in p[from, to), or SIZE_MAX.
static size_t find_nonzero(const uint8_t* p, size_t from, size_t to) {
  size_t j = from;
  for (; j < to && (j % 8) != 0; j++) {
    if (p[j] != 0) return j;
  }
  for (; j + 8 <= to; j += 8) {
    uint64_t w;
    memcpy(&w, p + j, sizeof(w));
    if (w != 0) break;
  }
  for (; j < to; j++) {
    if (p[j] != 0) return j;
  }
  return SIZE_MAX;
}

// ---------------------------------------------------------------------------
// Threads and shared state
// ---------------------------------------------------------------------------

typedef struct counters_s {
  uint64_t allocs;         // new blocks (including moved reallocs)
  uint64_t reallocs;       // realloc/rezalloc calls
  uint64_t frees;          // blocks given back (mi_free or a moving realloc)
  uint64_t xthread_frees;  // ... of blocks allocated by another thread
  uint64_t orphan_frees;   // ... of blocks allocated by a thread of an earlier round
  uint64_t transfers;      // exchanges with the transfer array
  uint64_t heap_deletes;   // mi_heap_delete of a heap whose blocks live on
  uint64_t heap_destroys;  // mi_heap_destroy of a scratch heap
} counters_t;

typedef struct thread_s {
  obj_t      local[LOCAL_SLOTS]; // persists across rounds for this thread index
  pthread_t  handle;
  unsigned   index;
  unsigned   round;
  uint32_t   serial;             // 1..SERIAL_MOD (0 = main thread)
  uint32_t   counter;            // low half of allocation ids
  uint64_t   rng;
  uint64_t   deadline_ns;
  bool       call_thread_done;
  mi_heap_t* heap;               // this thread's own heap (mi_heap_new), or NULL
  counters_t c;
} thread_t;

static _Atomic(uint64_t) transfer[TRANSFER_SLOTS];   // packed (tag << 48 | pointer), 0 = empty
static _Atomic(int64_t)  live_counted;               // live bytes of blocks > UNCOUNTED_MAX
static _Atomic(int64_t)  live_counted_peak;
static unsigned          nthreads;
static uint32_t          round_first_serial;         // serial of index 0 in the running round

static uint64_t rnd(thread_t* t) { return splitmix64(&t->rng); }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static uint32_t serial_of(unsigned round, unsigned index) {
  return (uint32_t)((((uint64_t)round * nthreads) + index) % SERIAL_MOD) + 1;
}

// Was `serial` a thread of the running round? (serials wrap after SERIAL_MOD threads)
static bool serial_in_round(uint32_t serial) {
  if (serial == 0 || round_first_serial == 0) return false;   // main thread / no round running
  return ((serial + SERIAL_MOD - round_first_serial) % SERIAL_MOD) < nthreads;
}

// ---------------------------------------------------------------------------
// Failure reports
// ---------------------------------------------------------------------------

static void fail(const thread_t* t, const char* what, const obj_t* o, size_t offset, const uint8_t* at) {
  if (t->serial == 0) {
    fprintf(stderr, "\nmimalloc-test-stress: FAILED (main thread, teardown after %u rounds): %s\n", t->round, what);
  }
  else {
    fprintf(stderr, "\nmimalloc-test-stress: FAILED (thread %u, serial %" PRIu32 ", round %u): %s\n",
            t->index, t->serial, t->round, what);
  }
  if (o != NULL) {
    fprintf(stderr, "  object %p, size %" PRIu32 ", id 0x%08" PRIx32 " (allocated by serial %" PRIu32 ")\n",
            (void*)o->p, o->size, o->id, id_serial(o->id));
    if (o->p != NULL && offset != SIZE_MAX) {
      const uint8_t* q = (at != NULL ? at : o->p);
      fprintf(stderr, "  first bad byte at offset %zu of block %p: found 0x%02x, expected 0x%02x\n",
              offset, (const void*)q, q[offset], expected_byte(o->p, o->size, o->id, offset));
    }
  }
  fflush(stderr);
  abort();
}

static void verify(const thread_t* t, const obj_t* o, const char* when) {
  const size_t usable = mi_usable_size(o->p);
  if (usable < o->size) {
    char msg[160];
    snprintf(msg, sizeof(msg), "mi_usable_size %zu is below the requested size (%s)", usable, when);
    fail(t, msg, o, SIZE_MAX, NULL);
  }
  const size_t bad = obj_find_damage(o->p, o->size, o->p, o->size, o->id);
  if (bad != SIZE_MAX) {
    char msg[160];
    snprintf(msg, sizeof(msg), "block contents damaged (%s): freed early or handed out twice?", when);
    fail(t, msg, o, bad, NULL);
  }
}

// Checks common to every fresh block.
static void check_fresh(const thread_t* t, const obj_t* o, size_t alignment, bool zeroed, const char* api) {
  char msg[160];
  const size_t natural = (o->size <= 8 ? 8 : 16);
  if (((uintptr_t)o->p % natural) != 0) {
    snprintf(msg, sizeof(msg), "%s returned a block not aligned to %zu", api, natural);
    fail(t, msg, o, SIZE_MAX, NULL);
  }
  if (alignment != 0 && ((uintptr_t)o->p % alignment) != 0) {
    snprintf(msg, sizeof(msg), "%s returned a block not aligned to %zu", api, alignment);
    fail(t, msg, o, SIZE_MAX, NULL);
  }
  const size_t usable = mi_usable_size(o->p);
  if (usable < o->size) {
    snprintf(msg, sizeof(msg), "%s: mi_usable_size %zu is below the requested size", api, usable);
    fail(t, msg, o, SIZE_MAX, NULL);
  }
  if (zeroed) {
    const size_t bad = find_nonzero(o->p, 0, usable);
    if (bad != SIZE_MAX) {
      snprintf(msg, sizeof(msg), "%s returned a block that is not zero at offset %zu (usable %zu)", api, bad, usable);
      fail(t, msg, o, SIZE_MAX, NULL);
    }
  }
}

// ---------------------------------------------------------------------------
// The live-bytes budget
// ---------------------------------------------------------------------------

static bool budget_take(size_t size) {
  if (size <= UNCOUNTED_MAX) return true;
  const int64_t now = atomic_fetch_add_explicit(&live_counted, (int64_t)size, memory_order_relaxed) + (int64_t)size;
  if (now > LIVE_BUDGET) {
    atomic_fetch_sub_explicit(&live_counted, (int64_t)size, memory_order_relaxed);
    return false;
  }
  int64_t peak = atomic_load_explicit(&live_counted_peak, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(&live_counted_peak, &peak, now,
                                                              memory_order_relaxed, memory_order_relaxed)) { }
  return true;
}

static void budget_return(size_t size) {
  if (size <= UNCOUNTED_MAX) return;
  atomic_fetch_sub_explicit(&live_counted, (int64_t)size, memory_order_relaxed);
}

// ---------------------------------------------------------------------------
// Choosing sizes
// ---------------------------------------------------------------------------

// Log-uniform in [2^lo, 2^(hi+1)).
static size_t log_uniform(thread_t* t, unsigned lo, unsigned hi) {
  const uint64_t r = rnd(t);
  const unsigned k = lo + (unsigned)(r % (hi - lo + 1));
  return ((size_t)1 << k) + (size_t)((r >> 8) % ((uint64_t)1 << k));
}

static size_t pick_small(thread_t* t) {
  return log_uniform(t, 3, 9);   // 8 .. 1023
}

// Mostly small, some medium, rare large, very rare huge; within the live budget.
static size_t pick_size(thread_t* t) {
  const unsigned x = (unsigned)(rnd(t) % 1000000);
  size_t size;
  if (x < 940000)      return pick_small(t);            // 94%    8 B .. 1 KiB
  else if (x < 998000) size = log_uniform(t, 10, 16);    // 5.8%   1 KiB .. 128 KiB
  else if (x < 999990) size = log_uniform(t, 17, 21);    // 0.2%   128 KiB .. 4 MiB
  else if ((rnd(t) & 7) != 0) size = log_uniform(t, 22, 25);  // 4 .. 64 MiB
  else size = 64*MiB + (size_t)(rnd(t) % (8*MiB));       // 64 .. 72 MiB (past the region limit)
  if (size > MAX_OBJ_SIZE) size = MAX_OBJ_SIZE;
  if (size < 8) size = 8;
  return (budget_take(size) ? size : pick_small(t));
}

// ---------------------------------------------------------------------------
// Operations on one object slot
// ---------------------------------------------------------------------------

static void note_free(thread_t* t, uint32_t id) {
  const uint32_t serial = id_serial(id);
  t->c.frees++;
  if (serial != t->serial) {
    t->c.xthread_frees++;
    if (!serial_in_round(serial)) t->c.orphan_frees++;
  }
}

static uint32_t next_id(thread_t* t) {
  t->counter++;
  return (t->serial << 16) | (t->counter & 0xFFFF);
}

// Allocate `size` bytes through one of the entry points (chosen by `r`), from
// `heap` (its mi_heap_ form) or, if NULL, from the default heap.
static void obj_alloc_in(thread_t* t, obj_t* o, mi_heap_t* heap, size_t size, uint64_t r) {
  const unsigned api = (unsigned)(r % 100);
  size_t alignment = 0;
  bool zeroed = false;
  const char* name;
  void* p;
  if (api < 50)      { name = "mi_malloc"; p = (heap ? mi_heap_malloc(heap, size) : mi_malloc(size)); }
  else if (api < 58) { name = "mi_zalloc"; zeroed = true; p = (heap ? mi_heap_zalloc(heap, size) : mi_zalloc(size)); }
  else if (api < 66) {
    // calloc(count, elem) with count * elem == size
    static const size_t elems[] = { 1, 2, 4, 8, 16, 24, 40 };
    size_t elem = elems[(r >> 8) % (sizeof(elems) / sizeof(elems[0]))];
    if (size % elem != 0) elem = 1;
    const size_t count = ((r >> 16) & 1) ? size / elem : elem;
    name = "mi_calloc"; zeroed = true;
    p = (heap ? mi_heap_calloc(heap, count, size / count) : mi_calloc(count, size / count));
  }
  else if (api < 76) {
    alignment = (size_t)1 << (3 + (r >> 8) % 10);                  // 8 .. 4 KiB
    if (((r >> 16) % 64) == 0) alignment = (size_t)1 << (13 + (r >> 24) % 8);  // 8 KiB .. 1 MiB, rarely
    name = "mi_malloc_aligned";
    p = (heap ? mi_heap_malloc_aligned(heap, size, alignment) : mi_malloc_aligned(size, alignment));
  }
  else if (api < 80) {
    alignment = (size_t)1 << (3 + (r >> 8) % 10);
    name = "mi_zalloc_aligned"; zeroed = true;
    p = (heap ? mi_heap_zalloc_aligned(heap, size, alignment) : mi_zalloc_aligned(size, alignment));
  }
  else if (api < 90 && size <= MI_SMALL_SIZE_MAX) {
    name = "mi_malloc_small"; p = (heap ? mi_heap_malloc_small(heap, size) : mi_malloc_small(size));
  }
  else { name = "mi_realloc(NULL)"; p = (heap ? mi_heap_realloc(heap, NULL, size) : mi_realloc(NULL, size)); }

  o->p = (uint8_t*)p;
  o->size = (uint32_t)size;
  o->id = next_id(t);
  o->zero_tail = zeroed;
  if (p == NULL) {
    char msg[160];
    snprintf(msg, sizeof(msg), "%s(%zu) returned NULL (out of memory?)", name, size);
    fail(t, msg, o, SIZE_MAX, NULL);
  }
  check_fresh(t, o, alignment, zeroed, name);
  if (heap != NULL && !mi_heap_contains_block(heap, p)) fail(t, "a block is not in the heap it came from", o, SIZE_MAX, NULL);
  obj_stamp(o->p, size, o->id);
  t->c.allocs++;
}

// One allocation in eight comes from the thread's own heap (if it has one).
static void obj_alloc(thread_t* t, obj_t* o) {
  const size_t size = pick_size(t);
  const uint64_t r = rnd(t);
  obj_alloc_in(t, o, (((r >> 40) & 7) == 0 ? t->heap : NULL), size, r);
}

static void obj_free(thread_t* t, obj_t* o) {
  verify(t, o, "on free");
  budget_return(o->size);
  note_free(t, o->id);
  mi_free(o->p);
  o->p = NULL;
}

static void obj_realloc(thread_t* t, obj_t* o) {
  verify(t, o, "before realloc");
  const size_t oldsize = o->size;
  const size_t newsize = pick_size(t);
  const bool   rezalloc = (o->zero_tail && (rnd(t) & 1) != 0);
  if (rezalloc && newsize < oldsize) {
    // keep "everything past the requested size is zero" true if the block stays in place
    memset(o->p + newsize, 0, oldsize - newsize);
  }
  uint8_t* q = (uint8_t*)(rezalloc ? mi_rezalloc(o->p, newsize) : mi_realloc(o->p, newsize));
  t->c.reallocs++;
  if (q == NULL) {
    char msg[160];
    snprintf(msg, sizeof(msg), "%s(%zu) returned NULL (out of memory?)", (rezalloc ? "mi_rezalloc" : "mi_realloc"), newsize);
    fail(t, msg, o, SIZE_MAX, NULL);
  }
  const size_t kept = (newsize < oldsize ? newsize : oldsize);
  const size_t bad = obj_find_damage(q, kept, o->p, oldsize, o->id);
  if (bad != SIZE_MAX) fail(t, "realloc did not preserve the contents", o, bad, q);
  obj_t fresh = { q, (uint32_t)newsize, o->id, false };
  if (rezalloc && newsize > oldsize) {
    const size_t nz = find_nonzero(q, oldsize, newsize);
    if (nz != SIZE_MAX) {
      char msg[160];
      snprintf(msg, sizeof(msg), "mi_rezalloc(%zu -> %zu) left a non-zero byte at offset %zu of the grown tail",
               oldsize, newsize, nz);
      fail(t, msg, &fresh, SIZE_MAX, NULL);
    }
  }
  check_fresh(t, &fresh, 0, false, (rezalloc ? "mi_rezalloc" : "mi_realloc"));
  if (q != o->p) {
    note_free(t, o->id);
    t->c.allocs++;
  }
  budget_return(oldsize);
  o->zero_tail = (rezalloc && q == o->p);   // a moved block's tail past `newsize` is not cleared
  o->p = q;
  o->size = (uint32_t)newsize;
  o->id = next_id(t);
  obj_stamp(o->p, newsize, o->id);
}

// Transfer slots pack a 16-bit tag of (size, id) above a 48-bit pointer, so the
// receiver can tell whether the block header still belongs to the object put in.
static uint16_t transfer_tag(size_t size, uint32_t id) {
  return (uint16_t)(mix64((((uint64_t)id) << 32) | (uint64_t)size) >> 48);
}

static uint64_t transfer_pack(const thread_t* t, const obj_t* o) {
  const uint64_t addr = (uint64_t)(uintptr_t)o->p;
  if ((addr >> 48) != 0) fail(t, "pointer does not fit in 48 bits (test limitation)", o, SIZE_MAX, NULL);
  return addr | ((uint64_t)transfer_tag(o->size, o->id) << 48);
}

static void transfer_unpack(thread_t* t, uint64_t v, obj_t* o) {
  o->p = (uint8_t*)(uintptr_t)(v & ((UINT64_C(1) << 48) - 1));
  o->zero_tail = false;
  uint64_t h;
  memcpy(&h, o->p, sizeof(h));
  h ^= mix64((uint64_t)(uintptr_t)o->p);
  o->size = (uint32_t)h;
  o->id = (uint32_t)(h >> 32);
  if (transfer_tag(o->size, o->id) != (uint16_t)(v >> 48) || o->size < 8 || o->size > MAX_OBJ_SIZE) {
    char msg[200];
    snprintf(msg, sizeof(msg), "header word 0x%016" PRIx64 " of a transferred block does not match its tag 0x%04x: "
             "freed early or handed out twice?", h ^ mix64((uint64_t)(uintptr_t)o->p), (unsigned)(v >> 48));
    fail(t, msg, o, SIZE_MAX, NULL);
  }
  verify(t, o, "when taken from the transfer array");
}

// Swap the slot's object (possibly none) with a random transfer slot.
static void obj_transfer(thread_t* t, obj_t* o) {
  const uint64_t mine = (o->p != NULL ? transfer_pack(t, o) : 0);
  const size_t k = (size_t)(rnd(t) % TRANSFER_SLOTS);
  const uint64_t got = atomic_exchange_explicit(&transfer[k], mine, memory_order_acq_rel);
  o->p = NULL;
  if (got != 0) transfer_unpack(t, got, o);
  t->c.transfers++;
}

// ---------------------------------------------------------------------------
// Heaps
// ---------------------------------------------------------------------------

#define SCRATCH_OBJS 48

// A heap whose blocks never leave this thread: filled, thinned out (freed and
// reallocated), verified, then destroyed at once with everything still in it.
static void scratch_heap_destroy(thread_t* t) {
  mi_heap_t* scratch = mi_heap_new();
  if (scratch == NULL) fail(t, "mi_heap_new returned NULL", NULL, SIZE_MAX, NULL);
  obj_t objs[SCRATCH_OBJS];
  for (size_t i = 0; i < SCRATCH_OBJS; i++) {
    const size_t size = ((i % 16) == 15 ? pick_size(t) : pick_small(t));
    obj_alloc_in(t, &objs[i], scratch, size, rnd(t));
  }
  for (size_t i = 0; i < SCRATCH_OBJS; i += 3) {
    obj_t* o = &objs[i];
    verify(t, o, "in a scratch heap");
    if ((i % 2) == 0) { obj_free(t, o); continue; }
    const size_t newsize = pick_small(t);
    uint8_t* q = (uint8_t*)mi_heap_realloc(scratch, o->p, newsize);
    if (q == NULL) fail(t, "mi_heap_realloc returned NULL", o, SIZE_MAX, NULL);
    const size_t kept = (newsize < o->size ? newsize : o->size);
    const size_t bad = obj_find_damage(q, kept, o->p, o->size, o->id);
    if (bad != SIZE_MAX) fail(t, "mi_heap_realloc did not preserve the contents", o, bad, q);
    budget_return(o->size);
    o->p = q;
    o->size = (uint32_t)newsize;
    o->id = next_id(t);
    o->zero_tail = false;
    obj_stamp(o->p, newsize, o->id);
  }
  for (size_t i = 0; i < SCRATCH_OBJS; i++) {
    obj_t* o = &objs[i];
    if (o->p == NULL) continue;
    verify(t, o, "before mi_heap_destroy");
    if (!mi_heap_contains_block(scratch, o->p)) fail(t, "a scratch block is not in its heap", o, SIZE_MAX, NULL);
    budget_return(o->size);
    note_free(t, o->id);
  }
  mi_heap_destroy(scratch);
  t->c.heap_destroys++;
  // the thread's own blocks are untouched
  for (size_t i = 0; i < LOCAL_SLOTS; i += 7) {
    if (t->local[i].p != NULL) verify(t, &t->local[i], "after a mi_heap_destroy of another heap");
  }
}

// Every few thousand operations: delete the thread's heap (other threads may be
// freeing its blocks right now; they live on in the backing heap) and start a
// new one, switch the default heap, and now and then destroy a scratch heap.
static void heap_churn(thread_t* t) {
  const uint64_t r = rnd(t);
  if (t->heap != NULL && (r & 1) != 0) {
    mi_heap_delete(t->heap);   // (if it was the default, the backing heap is again)
    t->heap = NULL;
    t->c.heap_deletes++;
  }
  if (t->heap == NULL) {
    t->heap = mi_heap_new();
    if (t->heap == NULL) fail(t, "mi_heap_new returned NULL", NULL, SIZE_MAX, NULL);
  }
  if (((r >> 1) & 3) == 0) mi_heap_set_default(((r >> 3) & 1) ? t->heap : mi_heap_get_backing());
  if (((r >> 4) & 3) == 0) scratch_heap_destroy(t);
}

// ---------------------------------------------------------------------------
// Worker threads
// ---------------------------------------------------------------------------

static void* worker(void* arg) {
  thread_t* t = (thread_t*)arg;
  if ((rnd(t) & 1) != 0) heap_churn(t);   // half of the threads start with a heap of their own
  for (uint64_t iter = 0; ; iter++) {
    if ((iter % CLOCK_CHECK) == 0 && now_ns() >= t->deadline_ns) break;
    const uint64_t r = rnd(t);
    obj_t* o = &t->local[r % LOCAL_SLOTS];
    const unsigned op = (unsigned)((r >> 32) % 100);
    if (o->p == NULL) {
      if (op < 85) obj_alloc(t, o);
      else obj_transfer(t, o);          // take one without giving
    }
    else if (op < 35) obj_free(t, o);
    else if (op < 50) obj_realloc(t, o);
    else if (op < 80) obj_transfer(t, o);
    else { obj_free(t, o); obj_alloc(t, o); }
    if ((r >> 47) == 0) mi_collect(((r >> 46) & 1) != 0);   // about once per 128K operations; half of them forced (a trim of every thread's free pages while they run)
    else if (((r >> 12) & 0xFFF) == 0xFFF) heap_churn(t);   // about once per 4K operations
  }
  // Leave the next generation a mix of full and thinned-out arrays.
  if ((rnd(t) % 4) == 0) {
    for (size_t i = 0; i < LOCAL_SLOTS; i += 2) {
      if (t->local[i].p != NULL) obj_free(t, &t->local[i]);
    }
  }
  // the thread's heap: deleted now, or left to the thread's exit
  if (t->heap != NULL && (rnd(t) & 1) != 0) mi_heap_delete(t->heap);
  t->heap = NULL;
  if (t->call_thread_done) mi_thread_done();   // no allocation after this point
  return NULL;
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

static void usage(const char* prog) {
  fprintf(stderr, "usage: %s [THREADS] [SECONDS] [SEED]\n"
          "  THREADS  worker threads per round, 1..%d (default %d)\n"
          "  SECONDS  wall-clock duration, may be fractional (default %.0f)\n"
          "  SEED     seed of the per-thread random streams (default 0x%" PRIx64 ")\n",
          prog, MAX_THREADS, DEFAULT_THREADS, DEFAULT_SECONDS, DEFAULT_SEED);
  exit(2);
}

static void add_counters(counters_t* sum, const counters_t* c) {
  sum->allocs        += c->allocs;
  sum->reallocs      += c->reallocs;
  sum->frees         += c->frees;
  sum->xthread_frees += c->xthread_frees;
  sum->orphan_frees  += c->orphan_frees;
  sum->transfers     += c->transfers;
  sum->heap_deletes  += c->heap_deletes;
  sum->heap_destroys += c->heap_destroys;
}

int main(int argc, char** argv) {
  unsigned long threads = DEFAULT_THREADS;
  double seconds = DEFAULT_SECONDS;
  uint64_t seed = DEFAULT_SEED;
  char* end;
  if (argc > 4) usage(argv[0]);
  if (argc > 1) {
    errno = 0; threads = strtoul(argv[1], &end, 10);
    if (errno != 0 || *end != 0 || threads < 1 || threads > MAX_THREADS) usage(argv[0]);
  }
  if (argc > 2) {
    errno = 0; seconds = strtod(argv[2], &end);
    if (errno != 0 || *end != 0 || !(seconds > 0.0) || seconds > 1e6) usage(argv[0]);
  }
  if (argc > 3) {
    errno = 0; seed = strtoull(argv[3], &end, 0);
    if (errno != 0 || *end != 0) usage(argv[0]);
  }
  nthreads = (unsigned)threads;

  // Bookkeeping comes from the allocator under test as well (it is the
  // process's malloc when the library overrides it); that is fine: a damaged
  // object array shows up as a content mismatch.
  thread_t* tds = (thread_t*)calloc(nthreads, sizeof(thread_t));
  thread_t* main_td = (thread_t*)calloc(1, sizeof(thread_t));
  if (tds == NULL || main_td == NULL) { fprintf(stderr, "mimalloc-test-stress: out of memory for bookkeeping\n"); return 1; }
  for (size_t i = 0; i < TRANSFER_SLOTS; i++) atomic_init(&transfer[i], 0);

  const uint64_t start = now_ns();
  const uint64_t stop  = start + (uint64_t)(seconds * 1e9);
  counters_t total;
  memset(&total, 0, sizeof(total));
  unsigned rounds = 0;
  do {
    const uint64_t round_end = now_ns() + (uint64_t)ROUND_MS * UINT64_C(1000000);
    round_first_serial = serial_of(rounds, 0);
    for (unsigned i = 0; i < nthreads; i++) {
      thread_t* t = &tds[i];
      t->index = i;
      t->round = rounds;
      t->serial = serial_of(rounds, i);
      t->counter = 0;
      t->rng = mix64(seed ^ mix64(((uint64_t)rounds << 20) + i + 1));
      t->deadline_ns = (round_end < stop ? round_end : stop);
      t->call_thread_done = ((rnd(t) % 4) == 0);
      memset(&t->c, 0, sizeof(t->c));
      const int err = pthread_create(&t->handle, NULL, &worker, t);
      if (err != 0) { fprintf(stderr, "mimalloc-test-stress: pthread_create: %s\n", strerror(err)); return 1; }
    }
    for (unsigned i = 0; i < nthreads; i++) {
      const int err = pthread_join(tds[i].handle, NULL);
      if (err != 0) { fprintf(stderr, "mimalloc-test-stress: pthread_join: %s\n", strerror(err)); return 1; }
      add_counters(&total, &tds[i].c);
    }
    rounds++;
  } while (now_ns() < stop);
  const double elapsed = (double)(now_ns() - start) / 1e9;

  // The main thread frees everything that is left: all of it was allocated by
  // threads that have exited.
  main_td->serial = 0;
  main_td->round = rounds;
  round_first_serial = 0;   // no round is running: every worker object is an orphan
  for (unsigned i = 0; i < nthreads; i++) {
    for (size_t j = 0; j < LOCAL_SLOTS; j++) {
      if (tds[i].local[j].p != NULL) obj_free(main_td, &tds[i].local[j]);
    }
  }
  for (size_t k = 0; k < TRANSFER_SLOTS; k++) {
    const uint64_t v = atomic_exchange_explicit(&transfer[k], 0, memory_order_acq_rel);
    if (v != 0) {
      obj_t o;
      transfer_unpack(main_td, v, &o);
      obj_free(main_td, &o);
    }
  }
  add_counters(&total, &main_td->c);
  if (atomic_load(&live_counted) != 0) {
    fprintf(stderr, "mimalloc-test-stress: FAILED: %" PRId64 " budgeted bytes still live after teardown\n",
            (int64_t)atomic_load(&live_counted));
    return 1;
  }
  mi_collect(true);

  printf("mimalloc-test-stress: OK: threads %u, seconds %.2f, seed 0x%" PRIx64 ", rounds %u, "
         "allocations %" PRIu64 ", reallocs %" PRIu64 ", frees %" PRIu64 ", cross-thread frees %" PRIu64
         " (%" PRIu64 " from exited threads), transfers %" PRIu64 ", heaps deleted %" PRIu64 ", destroyed %" PRIu64
         ", peak live >1KiB %.1f MiB\n",
         nthreads, elapsed, seed, rounds, total.allocs, total.reallocs, total.frees, total.xthread_frees,
         total.orphan_frees, total.transfers, total.heap_deletes, total.heap_destroys,
         (double)atomic_load(&live_counted_peak) / (double)MiB);
  free(main_td);
  free(tds);
  return 0;
}
