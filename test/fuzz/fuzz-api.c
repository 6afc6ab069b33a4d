/* ----------------------------------------------------------------------------
  fuzz-api.c -- a libFuzzer target: the whole API against a reference model.

  Each input is decoded into a sequence of operations (one opcode byte, then
  the operands the opcode needs; a short input simply ends the sequence):
  allocation through every entry point (the malloc family, the aligned and
  aligned-at variants, zalloc/calloc, strdup/strndup, the posix and C++
  names, and the mi_heap_ forms of each), every kind of free, the realloc
  family (realloc/reallocn/reallocf, rezalloc/recalloc, the aligned ones,
  expand, reallocarray), heaps (new, delete, destroy, set_default), visiting,
  collection, ownership queries, parameters that must be refused, and
  allocations and frees done by a second thread (which may also exit with
  live blocks, leaving them to be freed across threads).

  The model keeps, for every live block: the pointer, the requested size,
  mi_usable_size as first seen, the alignment asked for (at an offset), the
  seed of the byte pattern written over the requested size, from where on it
  is known to be zero (zero-initialising calls), and which heap owns it.
  After every operation every live block is checked: its alignment, its
  usable size (unchanged, and at least the requested size), and its contents
  (a sample of each block; the whole block when it is freed or reallocated,
  and for the block the operation touched). Heap visits must report exactly
  the model's blocks of that heap; destroy must take exactly them. Any
  mismatch, and any error message from the allocator that the operation did
  not provoke on purpose, aborts (a crash for libFuzzer).

  Bounds: at most MAX_OPS operations and MAX_LIVE bytes live; sizes are mostly
  small, sometimes up to a few MiB and rarely huge (up to 40 MiB).

  Without libFuzzer (fuzz-main.c) the same target replays files, so the seed
  corpus runs as an ordinary test in every build variant.
-----------------------------------------------------------------------------*/
#include <mimalloc.h>

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define MiB (KiB*KiB)

#define SLOTS      64            // live blocks at most
#define HEAPS      4             // user heaps at most
#define MAX_OPS    2048          // operations per input
#define MAX_LIVE   (256*MiB)     // live requested bytes at most
#define SAMPLE_MAX (4*KiB)       // blocks up to this size are checked in full after every step
#define PENDING    (MAX_OPS)     // blocks freed by the other thread (may still look live to a visit)

// ---------------------------------------------------------------------------
// Failure
// ---------------------------------------------------------------------------

static unsigned op_index;      // operation number within the input (for messages)
static const char* op_name = "";

#if defined(__MINGW32__)
#define FUZZ_PRINTF  gnu_printf   // (mingw-w64's C99 printf: __USE_MINGW_ANSI_STDIO)
#else
#define FUZZ_PRINTF  printf
#endif
static void fail(const char* fmt, ...) __attribute__((noreturn, format(FUZZ_PRINTF, 1, 2)));
static void fail(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fprintf(stderr, "mimalloc-fuzz: FAILED at operation %u (%s): ", op_index, op_name);
  vfprintf(stderr, fmt, args);
  fputc('\n', stderr);
  va_end(args);
  abort();
}

// Errors the allocator reports: an operation that provokes one on purpose
// sets `expected_err`; anything else (a detected corruption, a double free,
// an invalid pointer) is a failure.
static int expected_err;
static int reported_err;

// Messages go to stderr, except those of errors provoked on purpose.
static void on_output(const char* msg, void* arg) {
  (void)arg;
  if (expected_err == 0) fputs(msg, stderr);
}
static void on_error(int err, void* arg) {
  (void)arg;
  if (err != expected_err) fail("the allocator reported error %d (%s)", err, strerror(err));
  reported_err = err;
}

// ---------------------------------------------------------------------------
// Input decoding
// ---------------------------------------------------------------------------

typedef struct input_s {
  const uint8_t* p;
  size_t left;
} input_t;

static uint8_t in_u8(input_t* in) {
  if (in->left == 0) return 0;
  in->left--;
  return *in->p++;
}

static size_t in_u16(input_t* in) {
  const size_t lo = in_u8(in);
  return lo | ((size_t)in_u8(in) << 8);
}

// A request size: mostly small, some medium and large, rarely huge.
static size_t in_size(input_t* in) {
  const uint8_t cls = in_u8(in);
  const size_t x = in_u16(in);
  switch (cls % 16) {
    case 0:  return x % 9;                          // 0..8
    case 1: case 2: case 3: case 4: case 5:
             return x % 129;                        // small
    case 6: case 7: case 8: case 9:
             return x % (1025);                     // small, up to MI_SMALL_SIZE_MAX
    case 10: case 11:
             return x % (16*KiB + 1);               // small and medium pages
    case 12: return (x << 3) % (512*KiB + 1);       // medium and large
    case 13: return (x << 6) % (4*MiB + 1);         // large and huge
    case 14: return (cls >= 240 ? (x << 10) % (40*MiB) : x % 65); // rarely huge
    default: return x % 33;
  }
}

// A big alignment (above 2 MiB: a dedicated segment) at an offset that puts
// the pointer in the first bytes of a 4 MiB unit, where the segment header
// lies: the library refuses it with EINVAL (segment.c,
// _mi_segment_big_aligned_ofs; 64 KiB bounds every build's header). The
// realloc forms without an offset keep p's own offset from the alignment, so
// a block near the end of a unit asks for exactly that.
static bool offset_has_no_place(size_t align, size_t off) {
  if (align <= 2 * MiB) return false;
  const size_t ptr_ofs = (size_t)(0 - off) & (4 * MiB - 1);
  return (ptr_ofs != 0 && ptr_ofs < 64 * KiB);
}

// An alignment (a power of two): mostly small, rarely above half a segment.
static size_t in_alignment(input_t* in) {
  const uint8_t b = in_u8(in);
  unsigned shift;
  if (b < 160)      shift = 3 + (b % 5);     // 8 .. 128
  else if (b < 230) shift = 3 + (b % 10);    // .. 4 KiB
  else if (b < 250) shift = 12 + (b % 10);   // .. 2 MiB
  else              shift = 22 + (b % 2);    // 4 and 8 MiB: dedicated segments
  return (size_t)1 << shift;
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

enum {
  OWNER_BACKING = -1,   // the main thread's backing heap
  OWNER_WORKER  = -2,   // the running worker thread
  OWNER_ORPHAN  = -3,   // a worker thread that has exited
};

typedef struct block_s {
  uint8_t* p;          // NULL: the slot is empty
  size_t   size;       // requested size
  size_t   usable;     // mi_usable_size when it was allocated
  size_t   alignment;  // (p + offset) % alignment == 0 (alignment 1: only the natural one)
  size_t   offset;
  uint64_t seed;       // the pattern over [0, size)
  size_t   zero_from;  // [zero_from, usable) is zero (SIZE_MAX: nothing known)
  int      owner;      // heap slot (>= 0) or OWNER_*
} block_t;

// Secure builds (both profiles, MI_FUZZ_ZERO_AREA from CMake) serve 0-byte blocks
// from an area of no access that belongs to no heap: heaps neither visit
// nor contain them.
static bool in_a_heap(const block_t* b) {
#if defined(MI_FUZZ_ZERO_AREA)
  return (b->size > 0);
#else
  (void)b;
  return true;
#endif
}

static block_t  blocks[SLOTS];
static size_t   live_bytes;
static uint64_t seed_counter;
static mi_heap_t* heaps[HEAPS];
static int      default_owner = OWNER_BACKING;   // the main thread's default heap
static void*    pending[PENDING];                // freed by the worker, perhaps not yet collected
static size_t   pending_count;

static uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
  return x ^ (x >> 31);
}

// The pattern: word i (at byte 8*i, possibly unaligned) is seed + i*K.
#define PATTERN_K UINT64_C(0x9E3779B97F4A7C15)

// Write the pattern over [from, to) of `p` (`write`), or compare with it:
// the first offset that does not hold it, or SIZE_MAX.
static size_t pattern_apply(uint8_t* p, size_t from, size_t to, uint64_t seed, bool write) {
  size_t i = from / 8;
  for (size_t pos = i * 8; pos < to; pos += 8, i++) {
    const uint64_t w = seed + (uint64_t)i * PATTERN_K;
    uint8_t bytes[8];
    memcpy(bytes, &w, 8);
    const size_t lo = (pos < from ? from - pos : 0);
    const size_t hi = (to - pos < 8 ? to - pos : 8);
    if (write) memcpy(p + pos + lo, bytes + lo, hi - lo);
    else if (memcmp(p + pos + lo, bytes + lo, hi - lo) != 0) {
      for (size_t j = lo; j < hi; j++) if (p[pos + j] != bytes[j]) return pos + j;
    }
  }
  return SIZE_MAX;
}

static void pattern_write(uint8_t* p, size_t from, size_t to, uint64_t seed) {
  pattern_apply(p, from, to, seed, true);
}

static size_t pattern_find_damage(const uint8_t* p, size_t from, size_t to, uint64_t seed) {
  return pattern_apply((uint8_t*)p, from, to, seed, false);
}

static size_t find_nonzero(const uint8_t* p, size_t from, size_t to) {
  size_t i = from;
  for (; i < to && (i % 8) != 0; i++) if (p[i] != 0) return i;
  for (; i + 8 <= to; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    if (w != 0) break;
  }
  for (; i < to; i++) if (p[i] != 0) return i;
  return SIZE_MAX;
}

static void check_contents_range(const block_t* b, int slot, size_t from, size_t to) {
  if (to > b->size) to = b->size;
  if (from >= to) return;
  const size_t bad = pattern_find_damage(b->p, from, to, b->seed);
  if (bad != SIZE_MAX) {
    fail("block %d (%p, size %zu): byte %zu is 0x%02x, not the pattern's: overwritten, freed early or handed out twice",
         slot, (void*)b->p, b->size, bad, b->p[bad]);
  }
}

// Alignment and usable size.
static void check_shape(const block_t* b, int slot) {
  const uintptr_t natural = (b->size <= 8 ? 8 : 16);
  if (b->alignment <= 1 && ((uintptr_t)b->p % natural) != 0) {
    fail("block %d (%p, size %zu) is not aligned to %zu", slot, (void*)b->p, b->size, (size_t)natural);
  }
  if ((((uintptr_t)b->p + b->offset) % b->alignment) != 0) {
    fail("block %d (%p, size %zu): p + %zu is not aligned to %zu", slot, (void*)b->p, b->size, b->offset, b->alignment);
  }
  const size_t usable = mi_usable_size(b->p);
  if (usable != b->usable || usable < b->size) {
    fail("block %d (%p, size %zu): mi_usable_size is %zu, was %zu", slot, (void*)b->p, b->size, usable, b->usable);
  }
}

// Over [from, to): all of it when `full` or small, else the first and last
// 64 bytes and 64 bytes of every 4 KiB (enough to see another block or a
// free-list link where this block should be).
#define FULL_CHECK_MAX (256*KiB)
typedef void (range_check_fun)(const block_t* b, int slot, size_t from, size_t to);

static void check_ranges(const block_t* b, int slot, size_t from, size_t to, bool full, range_check_fun* check) {
  if (from >= to) return;
  if (to - from <= (full ? FULL_CHECK_MAX : SAMPLE_MAX)) { check(b, slot, from, to); return; }
  check(b, slot, from, from + 64);
  for (size_t at = ((from + 64 + 4*KiB - 1) & ~(4*KiB - 1)); at + 64 < to; at += 4*KiB) check(b, slot, at, at + 64);
  check(b, slot, to - 64, to);
}

static void check_zero_range(const block_t* b, int slot, size_t from, size_t to) {
  const size_t nz = find_nonzero(b->p, from, to);
  if (nz != SIZE_MAX) fail("block %d (%p, size %zu, usable %zu): byte %zu is not zero", slot, (void*)b->p, b->size, b->usable, nz);
}

static void check_zero_tail(const block_t* b, int slot) {
  if (b->zero_from == SIZE_MAX) return;
  const size_t z = (b->zero_from > b->size ? b->zero_from : b->size);
  check_ranges(b, slot, z, b->usable, true, &check_zero_range);
}

// Alignment, usable size, and the contents (see check_ranges).
static void check_block(const block_t* b, int slot, bool full) {
  if (b->p == NULL) return;
  check_shape(b, slot);
  check_ranges(b, slot, 0, b->size, full, &check_contents_range);
  if (full || b->usable <= SAMPLE_MAX) check_zero_tail(b, slot);
}

static void check_all(void) {
  for (int i = 0; i < SLOTS; i++) check_block(&blocks[i], i, false);
}

// Record a fresh block, check it and write its pattern.
static void block_set(int slot, void* p, size_t size, size_t alignment, size_t offset, bool zeroed, int owner) {
  block_t* b = &blocks[slot];
  b->p = (uint8_t*)p;
  b->size = size;
  b->usable = mi_usable_size(p);
  b->alignment = (alignment == 0 ? 1 : alignment);
  b->offset = offset;
  b->seed = mix64(++seed_counter);
  b->zero_from = SIZE_MAX;
  b->owner = owner;
  live_bytes += size;
  check_shape(b, slot);
  if (zeroed) check_ranges(b, slot, 0, b->usable, true, &check_zero_range);
  pattern_write(b->p, 0, size, b->seed);
  if (zeroed) b->zero_from = size;
}

static void block_forget(int slot) {
  live_bytes -= blocks[slot].size;
  memset(&blocks[slot], 0, sizeof(blocks[slot]));
}

// ---------------------------------------------------------------------------
// The second thread: allocates and frees on request, exits on request
// ---------------------------------------------------------------------------

typedef enum { W_IDLE, W_ALLOC, W_FREE, W_EXIT } worker_op_t;

typedef struct worker_s {
  pthread_t       thread;
  pthread_mutex_t lock;
  pthread_cond_t  cond;
  worker_op_t     op;        // W_IDLE when done
  size_t          size;
  size_t          alignment; // 0: mi_malloc, 1: mi_zalloc, else mi_malloc_aligned
  void*           p;         // in: the block to free; out: the block allocated
  bool            running;
} worker_t;

static worker_t worker = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void* worker_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&worker.lock);
  for (;;) {
    while (worker.op == W_IDLE) pthread_cond_wait(&worker.cond, &worker.lock);
    const worker_op_t op = worker.op;
    if (op == W_ALLOC) {
      if (worker.alignment == 0)      worker.p = mi_malloc(worker.size);
      else if (worker.alignment == 1) worker.p = mi_zalloc(worker.size);
      else                            worker.p = mi_malloc_aligned(worker.size, worker.alignment);
    }
    else if (op == W_FREE) {
      mi_free(worker.p);
    }
    worker.op = W_IDLE;
    pthread_cond_broadcast(&worker.cond);
    if (op == W_EXIT) break;
  }
  pthread_mutex_unlock(&worker.lock);
  return NULL;
}

static void worker_call(worker_op_t op) {
  if (!worker.running) {
    if (pthread_create(&worker.thread, NULL, &worker_main, NULL) != 0) fail("pthread_create failed");
    worker.running = true;
  }
  pthread_mutex_lock(&worker.lock);
  worker.op = op;
  pthread_cond_broadcast(&worker.cond);
  while (worker.op != W_IDLE) pthread_cond_wait(&worker.cond, &worker.lock);
  pthread_mutex_unlock(&worker.lock);
  if (op == W_EXIT) {
    pthread_join(worker.thread, NULL);
    worker.running = false;
  }
}

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

static int in_slot(input_t* in) { return in_u8(in) % SLOTS; }

static mi_heap_t* owner_heap(int owner) {
  return (owner >= 0 ? heaps[owner] : mi_heap_get_backing());
}

// A block freed by a thread that does not own it may still look live to a
// visit of its heap until the owner collects it.
static void note_remote_free(const block_t* b, bool by_worker) {
  const bool owner_is_worker = (b->owner == OWNER_WORKER);
  if (by_worker != owner_is_worker && pending_count < PENDING) pending[pending_count++] = b->p;
}

static void free_checked(int slot, input_t* in) {
  block_t* b = &blocks[slot];
  if (b->p == NULL) return;
  check_block(b, slot, true);
  const size_t alignment = (b->offset == 0 ? b->alignment : 1);   // what free_aligned may assert
  switch (in_u8(in) % 6) {
    case 0:  op_name = "mi_cfree"; mi_cfree(b->p); break;
    case 1:  op_name = "mi_free_size"; mi_free_size(b->p, b->size); break;
    case 2:  op_name = "mi_free_aligned"; mi_free_aligned(b->p, alignment); break;
    case 3:  op_name = "mi_free_size_aligned"; mi_free_size_aligned(b->p, b->size, alignment); break;
    default: op_name = "mi_free"; mi_free(b->p); break;
  }
  note_remote_free(b, false);
  block_forget(slot);
}

static bool budget_ok(size_t size) { return live_bytes + size <= MAX_LIVE; }

// The operands of an allocation or a reallocation.
typedef struct operands_s {
  int        slot;
  uint8_t    how;         // which entry point
  mi_heap_t* heap;        // one of the user heaps, or NULL: the plain API (the default heap)
  int        owner;       // of a block allocated through it
  size_t     size;
  size_t     alignment;
  size_t     offset_in;   // an offset, before reduction modulo the size
} operands_t;

static operands_t in_operands(input_t* in) {
  operands_t o;
  o.slot = in_slot(in);
  o.how = in_u8(in);
  const int hslot = in_u8(in) % (HEAPS + 1);
  o.heap = (hslot < HEAPS ? heaps[hslot] : NULL);
  o.owner = (o.heap != NULL ? hslot : default_owner);
  o.size = in_size(in);
  o.alignment = in_alignment(in);
  o.offset_in = in_u16(in);
  return o;
}

static void op_alloc(input_t* in) {
  const operands_t o = in_operands(in);
  const int slot = o.slot;
  const uint8_t how = o.how;
  mi_heap_t* const heap = o.heap;
  size_t size = o.size;
  const size_t alignment = o.alignment;
  const size_t offset = o.offset_in % (size + 1);
  free_checked(slot, in);
  if (!budget_ok(size)) size = 64;
  void* p = NULL;
  size_t align = 0, off = 0;
  errno = 0;
  bool zeroed = false;
  const size_t n = (size > 0 && (how & 0x80) ? size / 8 : 0);   // a count for the n-forms, if it divides
  const size_t count = (n > 0 && size % 8 == 0 ? 8 : 1);
  const size_t elem = size / count;
  if (heap != NULL) {
    switch (how % 14) {
      case 0:  op_name = "mi_heap_malloc"; p = mi_heap_malloc(heap, size); break;
      case 1:  op_name = "mi_heap_zalloc"; p = mi_heap_zalloc(heap, size); zeroed = true; break;
      case 2:  op_name = "mi_heap_calloc"; p = mi_heap_calloc(heap, count, elem); zeroed = true; break;
      case 3:  op_name = "mi_heap_mallocn"; p = mi_heap_mallocn(heap, count, elem); break;
      case 4:  op_name = "mi_heap_malloc_small"; size %= (MI_SMALL_SIZE_MAX + 1); p = mi_heap_malloc_small(heap, size); break;
      case 5:  op_name = "mi_heap_malloc_aligned"; align = alignment; p = mi_heap_malloc_aligned(heap, size, align); break;
      case 6:  op_name = "mi_heap_malloc_aligned_at"; align = alignment; off = offset; p = mi_heap_malloc_aligned_at(heap, size, align, off); break;
      case 7:  op_name = "mi_heap_zalloc_aligned"; align = alignment; zeroed = true; p = mi_heap_zalloc_aligned(heap, size, align); break;
      case 8:  op_name = "mi_heap_zalloc_aligned_at"; align = alignment; off = offset; zeroed = true; p = mi_heap_zalloc_aligned_at(heap, size, align, off); break;
      case 9:  op_name = "mi_heap_calloc_aligned"; align = alignment; zeroed = true; p = mi_heap_calloc_aligned(heap, count, elem, align); break;
      case 10: op_name = "mi_heap_calloc_aligned_at"; align = alignment; off = offset; zeroed = true; p = mi_heap_calloc_aligned_at(heap, count, elem, align, off); break;
      case 11: {
        op_name = "mi_heap_strdup";
        char buf[256];
        size %= sizeof(buf);
        memset(buf, 'a' + (how % 26), size);
        buf[size] = 0;
        p = mi_heap_strdup(heap, buf);
        if (p == NULL || memcmp(p, buf, size + 1) != 0) fail("mi_heap_strdup: wrong copy");
        size += 1;
        break;
      }
      case 12: {
        op_name = "mi_heap_strndup";
        char buf[256];
        size %= sizeof(buf);
        memset(buf, 'A' + (how % 26), size);
        buf[size] = 0;
        const size_t limit = offset % (size + 2);
        p = mi_heap_strndup(heap, buf, limit);
        const size_t len = (limit < size ? limit : size);
        if (p == NULL || memcmp(p, buf, len) != 0 || ((char*)p)[len] != 0) fail("mi_heap_strndup: wrong copy");
        size = len + 1;
        break;
      }
      default: op_name = "mi_heap_reallocf(NULL)"; p = mi_heap_reallocf(heap, NULL, size); break;
    }
  }
  else {
    switch (how % 24) {
      case 0:  op_name = "mi_malloc"; p = mi_malloc(size); break;
      case 1:  op_name = "mi_zalloc"; p = mi_zalloc(size); zeroed = true; break;
      case 2:  op_name = "mi_calloc"; p = mi_calloc(count, elem); zeroed = true; break;
      case 3:  op_name = "mi_mallocn"; p = mi_mallocn(count, elem); break;
      case 4:  op_name = "mi_malloc_small"; size %= (MI_SMALL_SIZE_MAX + 1); p = mi_malloc_small(size); break;
      case 5:  op_name = "mi_zalloc_small"; size %= (MI_SMALL_SIZE_MAX + 1); p = mi_zalloc_small(size); zeroed = true; break;
      case 6:  op_name = "mi_malloc_aligned"; align = alignment; p = mi_malloc_aligned(size, align); break;
      case 7:  op_name = "mi_malloc_aligned_at"; align = alignment; off = offset; p = mi_malloc_aligned_at(size, align, off); break;
      case 8:  op_name = "mi_zalloc_aligned"; align = alignment; zeroed = true; p = mi_zalloc_aligned(size, align); break;
      case 9:  op_name = "mi_zalloc_aligned_at"; align = alignment; off = offset; zeroed = true; p = mi_zalloc_aligned_at(size, align, off); break;
      case 10: op_name = "mi_calloc_aligned"; align = alignment; zeroed = true; p = mi_calloc_aligned(count, elem, align); break;
      case 11: op_name = "mi_calloc_aligned_at"; align = alignment; off = offset; zeroed = true; p = mi_calloc_aligned_at(count, elem, align, off); break;
      case 12: {
        op_name = "mi_posix_memalign";
        align = alignment;
        const int err = mi_posix_memalign(&p, align, size);
        if (err != 0) fail("mi_posix_memalign(%zu, %zu) returned %d", align, size, err);
        break;
      }
      case 13: op_name = "mi_memalign"; align = alignment; p = mi_memalign(align, size); break;
      case 14: op_name = "mi_aligned_alloc"; align = alignment; size = (size + align - 1) & ~(align - 1);
               if (!budget_ok(size)) { size = align; }
               p = mi_aligned_alloc(align, size); break;
      case 15: op_name = "mi_valloc"; align = 4096; p = mi_valloc(size); break;
      case 16: op_name = "mi_pvalloc"; align = 4096; size = (size + 4095) & ~(size_t)4095;
               if (!budget_ok(size)) { size = 4096; }
               p = mi_pvalloc(size); break;
      case 17: op_name = "mi_new"; p = mi_new(size); break;
      case 18: op_name = "mi_new_aligned"; align = alignment; p = mi_new_aligned(size, align); break;
      case 19: op_name = "mi_new_nothrow"; p = mi_new_nothrow(size); break;
      case 20: op_name = "mi_new_n"; p = mi_new_n(count, elem); break;
      case 21: {
        op_name = "mi_strdup";
        char buf[256];
        size %= sizeof(buf);
        memset(buf, 'a' + (how % 26), size);
        buf[size] = 0;
        p = mi_strdup(buf);
        if (p == NULL || memcmp(p, buf, size + 1) != 0) fail("mi_strdup: wrong copy");
        size += 1;
        break;
      }
      case 22: op_name = "mi_realloc(NULL)"; p = mi_realloc(NULL, size); break;
      default: op_name = "mi_new_aligned_nothrow"; align = alignment; p = mi_new_aligned_nothrow(size, align); break;
    }
  }
  if (p == NULL && errno == EINVAL && offset_has_no_place(align, off)) return;   // (refused: nothing allocated)
  if (p == NULL) fail("returned NULL for %zu bytes (alignment %zu)", size, align);
  block_set(slot, p, size, align, off, zeroed, o.owner);
}

static void op_free(input_t* in) {
  free_checked(in_slot(in), in);
}

// The realloc family on one block.
static void op_realloc(input_t* in) {
  const operands_t o = in_operands(in);
  const int slot = o.slot;
  const uint8_t how = o.how;
  mi_heap_t* const heap = o.heap;
  size_t newsize = o.size;
  const size_t alignment = o.alignment;
  const size_t offset_in = o.offset_in;
  block_t* b = &blocks[slot];
  if (b->p == NULL) return;
  if (!budget_ok(newsize)) newsize = b->size;
  check_block(b, slot, true);
  const int new_owner = o.owner;
  const size_t count = (newsize % 8 == 0 && newsize > 0 ? 8 : 1);
  const size_t elem = newsize / count;
  size_t align = 0, off = 0;
  bool zero = false;          // the rezalloc family: the grown part must be zero
  bool may_fail = false;      // expand: NULL when it does not fit
  bool frees_on_fail = false;
  bool at_form = false;       // an explicit offset
  void* q;
  uint8_t* const p = b->p;
  errno = 0;
  if (heap != NULL) {
    switch (how % 8) {
      case 0:  op_name = "mi_heap_realloc"; q = mi_heap_realloc(heap, p, newsize); break;
      case 1:  op_name = "mi_heap_reallocn"; q = mi_heap_reallocn(heap, p, count, elem); break;
      case 2:  op_name = "mi_heap_reallocf"; q = mi_heap_reallocf(heap, p, newsize); frees_on_fail = true; break;
      case 3:  op_name = "mi_heap_rezalloc"; zero = true; q = mi_heap_rezalloc(heap, p, newsize); break;
      case 4:  op_name = "mi_heap_recalloc"; zero = true; q = mi_heap_recalloc(heap, p, count, elem); break;
      case 5:  op_name = "mi_heap_realloc_aligned"; align = alignment; q = mi_heap_realloc_aligned(heap, p, newsize, align); break;
      case 6:  op_name = "mi_heap_realloc_aligned_at"; align = alignment; off = offset_in % (newsize + 1); at_form = true;
               q = mi_heap_realloc_aligned_at(heap, p, newsize, align, off); break;
      default: op_name = "mi_heap_rezalloc_aligned"; align = alignment; zero = true; q = mi_heap_rezalloc_aligned(heap, p, newsize, align); break;
    }
  }
  else {
    switch (how % 18) {
      case 0:  op_name = "mi_realloc"; q = mi_realloc(p, newsize); break;
      case 1:  op_name = "mi_reallocn"; q = mi_reallocn(p, count, elem); break;
      case 2:  op_name = "mi_reallocf"; q = mi_reallocf(p, newsize); frees_on_fail = true; break;
      case 3:  op_name = "mi_rezalloc"; zero = true; q = mi_rezalloc(p, newsize); break;
      case 4:  op_name = "mi_recalloc"; zero = true; q = mi_recalloc(p, count, elem); break;
      case 5:  op_name = "mi_realloc_aligned"; align = alignment; q = mi_realloc_aligned(p, newsize, align); break;
      case 6:  op_name = "mi_realloc_aligned_at"; align = alignment; off = offset_in % (newsize + 1); at_form = true;
               q = mi_realloc_aligned_at(p, newsize, align, off); break;
      case 7:  op_name = "mi_rezalloc_aligned"; align = alignment; zero = true; q = mi_rezalloc_aligned(p, newsize, align); break;
      case 8:  op_name = "mi_rezalloc_aligned_at"; align = alignment; off = offset_in % (newsize + 1); at_form = true; zero = true;
               q = mi_rezalloc_aligned_at(p, newsize, align, off); break;
      case 9:  op_name = "mi_recalloc_aligned"; align = alignment; zero = true; q = mi_recalloc_aligned(p, count, elem, align); break;
      case 10: op_name = "mi_recalloc_aligned_at"; align = alignment; off = offset_in % (newsize + 1); at_form = true; zero = true;
               q = mi_recalloc_aligned_at(p, count, elem, align, off); break;
      case 11: op_name = "mi_expand"; may_fail = true; q = mi_expand(p, newsize); break;
      case 12: op_name = "mi__expand"; may_fail = true; q = mi__expand(p, newsize); break;
      case 13: op_name = "mi_reallocarray"; q = mi_reallocarray(p, count, elem); break;
      case 14: op_name = "mi_aligned_recalloc"; align = alignment; zero = true; q = mi_aligned_recalloc(p, count, elem, align); break;
      case 15: op_name = "mi_aligned_offset_recalloc"; align = alignment; off = offset_in % (newsize + 1); at_form = true; zero = true;
               q = mi_aligned_offset_recalloc(p, count, elem, align, off); break;
      case 16: op_name = "mi_new_realloc"; q = mi_new_realloc(p, newsize); break;
      default: op_name = "mi_new_reallocn"; q = mi_new_reallocn(p, count, elem); break;
    }
  }
  if (q == NULL) {
    const int err = errno;
    if (may_fail && newsize > b->usable) { check_block(b, slot, true); return; }   // did not fit: unchanged
    if (!frees_on_fail && err == EINVAL && offset_has_no_place(align, (at_form ? off : (uintptr_t)p % (align == 0 ? 1 : align)))) {
      check_block(b, slot, true);   // refused: the block is unchanged
      return;
    }
    if (frees_on_fail) fail("returned NULL for %zu bytes (and freed the block)", newsize);
    fail("returned NULL for %zu bytes", newsize);
  }
  if (may_fail && q != p) fail("moved the block");
  const size_t oldsize = b->size;
  // the kept prefix
  const size_t kept = (newsize < oldsize ? newsize : oldsize);
  const size_t bad = pattern_find_damage((uint8_t*)q, 0, kept, b->seed);
  if (bad != SIZE_MAX) fail("did not keep byte %zu of %zu (%zu -> %zu bytes, %s)", bad, kept, oldsize, newsize, (q == p ? "in place" : "moved"));
  const size_t usable = mi_usable_size(q);
  if (usable < newsize) fail("mi_usable_size %zu is below the new size %zu", usable, newsize);
  // (in place, the usable size may change: checked builds report the size
  // asked for, which a realloc in place rewrites)
  // A block known to be zero past some offset: in place that stays true; a
  // moved block keeps it when the rezalloc family grew it beyond the old
  // usable size (the rest is cleared), not otherwise. The grown part reads
  // zero after a rezalloc in any case.
  size_t zero_from = SIZE_MAX;
  if (b->zero_from != SIZE_MAX) {
    const size_t z = (b->zero_from > oldsize ? b->zero_from : oldsize);
    if (zero) {
      const size_t nz = find_nonzero((uint8_t*)q, z, newsize);
      if (nz != SIZE_MAX) fail("the grown part is not zero at byte %zu (%zu -> %zu bytes)", nz, oldsize, newsize);
    }
    if (q == p || (zero && newsize > b->usable)) zero_from = z;
  }
  // The alignment promised: the _at forms state an offset; the others keep
  // p's offset from the alignment (as 1.6: (q + p % alignment) % alignment
  // == 0); alignments up to 8 promise only the natural one.
  size_t promise_align = 1, promise_off = 0;
  if (align > sizeof(void*)) {
    promise_align = align;
    promise_off = (at_form ? off : (uintptr_t)p % align);
    if ((((uintptr_t)q + promise_off) % promise_align) != 0) {
      fail("q + %zu is not aligned to %zu (p %p, q %p)", promise_off, promise_align, (void*)p, q);
    }
  }
  // the new block: in place, the same owner and promises; moved, a fresh block of `heap`
  const block_t old = *b;
  if (q != p) note_remote_free(&old, false);
  block_forget(slot);
  block_t* nb = &blocks[slot];
  nb->p = (uint8_t*)q;
  nb->size = newsize;
  nb->usable = usable;
  nb->alignment = (q == p ? old.alignment : promise_align);
  nb->offset = (q == p ? old.offset : promise_off);
  nb->seed = old.seed;
  nb->zero_from = zero_from;
  nb->owner = (q == p ? old.owner : new_owner);
  live_bytes += newsize;
  check_shape(nb, slot);
  check_zero_tail(nb, slot);
  // a fresh pattern over the new size (a zero tail stays beyond it)
  nb->seed = mix64(++seed_counter);
  pattern_write(nb->p, 0, newsize, nb->seed);
  if (nb->zero_from != SIZE_MAX && nb->zero_from < newsize) nb->zero_from = newsize;
}

// ---------------------------------------------------------------------------
// Heaps
// ---------------------------------------------------------------------------

static void op_heap_new(input_t* in) {
  const int h = in_u8(in) % HEAPS;
  if (heaps[h] != NULL) return;
  op_name = "mi_heap_new";
  heaps[h] = mi_heap_new();
  if (heaps[h] == NULL) fail("mi_heap_new returned NULL");
}

// After a heap is gone, the default is the backing heap again if it was the default.
static void heap_gone(int h) {
  heaps[h] = NULL;
  if (default_owner == h) {
    default_owner = OWNER_BACKING;
    if (mi_heap_get_default() != mi_heap_get_backing()) fail("the default heap is not the backing heap after its heap was deleted");
  }
}

// Delete: the blocks stay valid and move to the backing heap.
static void op_heap_delete(input_t* in) {
  const int h = in_u8(in) % HEAPS;
  if (heaps[h] == NULL) return;
  op_name = "mi_heap_delete";
  mi_heap_delete(heaps[h]);
  for (int i = 0; i < SLOTS; i++) {
    if (blocks[i].p != NULL && blocks[i].owner == h) blocks[i].owner = OWNER_BACKING;
  }
  heap_gone(h);
}

// Destroy: every block of the heap is freed at once (the model's blocks of
// that heap, checked first, are forgotten).
static void op_heap_destroy(input_t* in) {
  const int h = in_u8(in) % HEAPS;
  if (heaps[h] == NULL) return;
  op_name = "mi_heap_destroy";
  for (int i = 0; i < SLOTS; i++) {
    if (blocks[i].p != NULL && blocks[i].owner == h) {
      check_block(&blocks[i], i, true);
      if (in_a_heap(&blocks[i]) && !mi_heap_contains_block(heaps[h], blocks[i].p)) fail("block %d is not in its heap before destroy", i);
    }
  }
  mi_heap_destroy(heaps[h]);
  for (int i = 0; i < SLOTS; i++) {
    if (blocks[i].p != NULL && blocks[i].owner == h) block_forget(i);
  }
  heap_gone(h);
}

static void op_heap_set_default(input_t* in) {
  const int h = in_u8(in) % (HEAPS + 1);
  op_name = "mi_heap_set_default";
  mi_heap_t* heap = (h < HEAPS ? heaps[h] : mi_heap_get_backing());
  if (heap == NULL) return;
  mi_heap_t* old = mi_heap_set_default(heap);
  if (old != owner_heap(default_owner)) fail("mi_heap_set_default returned %p, not the previous default", (void*)old);
  default_owner = (h < HEAPS ? h : OWNER_BACKING);
  if (mi_heap_get_default() != heap) fail("mi_heap_get_default is not the heap just set");
}

// ---------------------------------------------------------------------------
// Visiting: exactly the model's blocks of the heap, each once
// ---------------------------------------------------------------------------

typedef struct visit_s {
  int    owner;
  bool   seen[SLOTS];
  size_t areas;
  size_t blocks;
} visit_t;

// Is one of the pending pointers inside the visited block [block, block + size)?
// (an aligned block's pointer lies inside the block a visit reports)
static bool pending_contains(const void* block, size_t size) {
  for (size_t i = 0; i < pending_count; i++) {
    if ((const uint8_t*)pending[i] >= (const uint8_t*)block && (const uint8_t*)pending[i] < (const uint8_t*)block + size) return true;
  }
  return false;
}

static bool is_heap_struct(const void* p) {
  for (int h = 0; h < HEAPS; h++) if (heaps[h] == p) return true;
  return false;
}

static bool visitor(const mi_heap_t* heap, const mi_heap_area_t* area, void* block, size_t block_size, void* arg) {
  visit_t* v = (visit_t*)arg;
  if (heap != owner_heap(v->owner)) fail("the visitor got heap %p, not the one visited", (const void*)heap);
  if (block == NULL) {
    v->areas++;
    if (area->used * area->block_size > area->committed || area->committed > area->reserved) {
      fail("area %p: used %zu x %zu, committed %zu, reserved %zu", area->blocks, area->used, area->block_size, area->committed, area->reserved);
    }
    return true;
  }
  v->blocks++;
  if (block_size != area->block_size) fail("block size %zu differs from the area's %zu", block_size, area->block_size);
  // a model block starts in [block, block + block_size) (aligned blocks start inside theirs)
  for (int i = 0; i < SLOTS; i++) {
    const block_t* b = &blocks[i];
    if (b->p == NULL || b->p < (uint8_t*)block || b->p >= (uint8_t*)block + block_size) continue;
    if (v->seen[i]) fail("block %d visited twice", i);
    if (b->owner != v->owner && !(v->owner == OWNER_BACKING && b->owner == OWNER_ORPHAN)) {
      fail("block %d (owner %d) visited in the heap of owner %d", i, b->owner, v->owner);
    }
    if (b->p + b->size > (uint8_t*)block + block_size) fail("block %d extends past the visited block", i);
    v->seen[i] = true;
    return true;
  }
  // not a live block: a heap struct (they live in the backing heap), or a
  // block the other thread freed that is not collected yet
  if (v->owner == OWNER_BACKING && is_heap_struct(block)) return true;
  if (pending_contains(block, block_size)) return true;
  fail("visited block %p (size %zu) is not live", block, block_size);
}

static void op_visit(input_t* in) {
  const uint8_t b = in_u8(in);
  const int h = b % (HEAPS + 1);
  visit_t v;
  memset(&v, 0, sizeof(v));
  v.owner = (h < HEAPS ? h : OWNER_BACKING);
  mi_heap_t* heap = owner_heap(v.owner);
  if (heap == NULL) return;
  if (b & 0x80) {
    op_name = "mi_heap_collect + visit";
    mi_heap_collect(heap, (b & 0x40) != 0);
  }
  op_name = "mi_heap_visit_blocks";
  const bool all = (b & 0x20) == 0;
  if (!mi_heap_visit_blocks(heap, all, &visitor, &v)) fail("mi_heap_visit_blocks returned false");
  if (!all) {
    if (v.blocks != 0) fail("visited blocks without being asked to");
    return;
  }
  for (int i = 0; i < SLOTS; i++) {
    if (blocks[i].p != NULL && blocks[i].owner == v.owner && !v.seen[i] && in_a_heap(&blocks[i])) {
      fail("block %d (%p, size %zu) of the heap was not visited", i, (void*)blocks[i].p, blocks[i].size);
    }
  }
}

// ---------------------------------------------------------------------------
// The other thread
// ---------------------------------------------------------------------------

static void op_worker_alloc(input_t* in) {
  const int slot = in_slot(in);
  const uint8_t how = in_u8(in);
  size_t size = in_size(in);
  const size_t alignment = in_alignment(in);
  free_checked(slot, in);
  if (!budget_ok(size)) size = 64;
  op_name = "worker: allocate";
  worker.size = size;
  worker.alignment = (how % 3 == 2 ? alignment : how % 3);
  worker_call(W_ALLOC);
  if (worker.p == NULL) fail("the worker's allocation of %zu bytes returned NULL", size);
  block_set(slot, worker.p, size, (worker.alignment > 1 ? worker.alignment : 0), 0, worker.alignment == 1, OWNER_WORKER);
}

static void op_worker_free(input_t* in) {
  const int slot = in_slot(in);
  block_t* b = &blocks[slot];
  if (b->p == NULL) return;
  check_block(b, slot, true);
  op_name = "worker: free";
  worker.p = b->p;
  worker_call(W_FREE);
  note_remote_free(b, true);
  block_forget(slot);
}

// The worker exits with its blocks still live: they are freed later by
// whoever holds them (this thread, or the next worker).
static void op_worker_exit(void) {
  if (!worker.running) return;
  op_name = "worker: exit";
  worker_call(W_EXIT);
  for (int i = 0; i < SLOTS; i++) {
    if (blocks[i].p != NULL && blocks[i].owner == OWNER_WORKER) blocks[i].owner = OWNER_ORPHAN;
  }
}

// ---------------------------------------------------------------------------
// Queries, collection and refused parameters
// ---------------------------------------------------------------------------

static void op_query(input_t* in) {
  const int slot = in_slot(in);
  const block_t* b = &blocks[slot];
  op_name = "mi_good_size";
  const size_t size = in_size(in);
  if (mi_good_size(size) < size) fail("mi_good_size(%zu) = %zu", size, mi_good_size(size));
  if (b->p == NULL) return;
  op_name = "ownership";
  if (!mi_is_in_heap_region(b->p)) fail("block %d is not in the heap region", slot);
  if (mi_malloc_size(b->p) != b->usable || mi_malloc_usable_size(b->p) != b->usable) fail("mi_malloc_size differs from mi_usable_size");
  if ((b->owner >= 0 || b->owner == OWNER_BACKING) && in_a_heap(b)) {
    mi_heap_t* heap = owner_heap(b->owner);
    // (mi_heap_check_owned answers for pointer-aligned addresses only, as in 1.6)
    if (((uintptr_t)b->p % sizeof(void*)) == 0 && !mi_heap_check_owned(heap, b->p)) fail("block %d is not owned by its heap (mi_heap_check_owned)", slot);
    if (b->owner >= 0 && !mi_heap_contains_block(heap, b->p)) fail("block %d is not in its heap (mi_heap_contains_block)", slot);
    for (int h = 0; h < HEAPS; h++) {
      if (h != b->owner && heaps[h] != NULL && mi_heap_contains_block(heaps[h], b->p)) fail("block %d is in heap %d too", slot, h);
    }
  }
}

static void op_collect(input_t* in) {
  const uint8_t b = in_u8(in);
  op_name = "mi_collect";
  if (b & 1) mi_collect((b & 2) != 0);
  else {
    const int h = (b >> 2) % HEAPS;
    if (heaps[h] != NULL) { op_name = "mi_heap_collect"; mi_heap_collect(heaps[h], (b & 2) != 0); }
  }
}

// Requests that must fail with NULL and the right errno, changing nothing.
static void op_refused(input_t* in) {
  const uint8_t b = in_u8(in);
  volatile size_t vx = in_u16(in);   // (so the compiler does not see the sizes are impossible)
  const size_t x = vx;
  void* p = NULL;
  int want;
  errno = 0;
  reported_err = 0;
  switch (b % 8) {
    case 0: op_name = "mi_calloc (overflow)"; expected_err = want = EOVERFLOW; p = mi_calloc(SIZE_MAX / 2 + x, 4); break;
    case 1: op_name = "mi_mallocn (overflow)"; expected_err = want = EOVERFLOW; p = mi_mallocn(4 + x, SIZE_MAX / 4); break;
    case 2: op_name = "mi_malloc (too large)"; expected_err = want = EOVERFLOW; p = mi_malloc(PTRDIFF_MAX + (size_t)1 + x); break;
    case 3: op_name = "mi_malloc_aligned (bad alignment)"; expected_err = 0; want = EINVAL; p = mi_malloc_aligned(16, 3 * ((x % 64) + 1)); break;
    case 4: op_name = "mi_aligned_alloc (bad size)"; expected_err = 0; want = EINVAL; p = mi_aligned_alloc(64, 64 * (x % 8) + 1 + (x % 63)); break;
    case 5: {
      op_name = "mi_posix_memalign (bad alignment)";
      expected_err = 0; want = 0;
      void* q = (void*)&x;
      const int err = mi_posix_memalign(&q, 4 + (x % 4), 16);
      if (err != EINVAL || q != (void*)&x) fail("returned %d and changed the result", err);
      break;
    }
    case 6: op_name = "mi_recalloc(NULL, overflow)"; expected_err = want = EOVERFLOW; p = mi_recalloc(NULL, SIZE_MAX / 8 + x, 16); break;
    default: op_name = "mi_new_nothrow (too large)"; expected_err = want = EOVERFLOW; p = mi_new_nothrow(SIZE_MAX - x); break;
  }
  expected_err = 0;
  if (p != NULL) fail("did not return NULL");
  if (want != 0 && errno != want) fail("errno is %d, not %d", errno, want);
}

// ---------------------------------------------------------------------------
// The target
// ---------------------------------------------------------------------------

static void cleanup(void) {
  input_t none = { NULL, 0 };
  op_name = "cleanup";
  for (int i = 0; i < SLOTS; i++) free_checked(i, &none);
  if (default_owner != OWNER_BACKING) mi_heap_set_default(mi_heap_get_backing());
  default_owner = OWNER_BACKING;
  for (int h = 0; h < HEAPS; h++) {
    if (heaps[h] != NULL) { mi_heap_delete(heaps[h]); heaps[h] = NULL; }
  }
  // the model forgets the blocks other threads freed; a block the worker
  // freed into a full page of the backing heap waits on that heap's delayed
  // list (and reads live to a visit) until the heap collects: now
  mi_heap_collect(mi_heap_get_backing(), false);
  pending_count = 0;
  live_bytes = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool initialized;
  if (!initialized) {
    mi_register_error(&on_error, NULL);
    mi_register_output(&on_output, NULL);
    initialized = true;
  }
  input_t in = { data, size };
  for (op_index = 0; op_index < MAX_OPS && in.left > 0; op_index++) {
    const uint8_t op = in_u8(&in);
    switch (op % 16) {
      case 0: case 1: case 2: case 3: op_alloc(&in); break;
      case 4: case 5:  op_free(&in); break;
      case 6: case 7:  op_realloc(&in); break;
      case 8:  op_heap_new(&in); break;
      case 9:  if (op & 0x10) op_heap_destroy(&in); else op_heap_delete(&in); break;
      case 10: op_heap_set_default(&in); break;
      case 11: op_visit(&in); break;
      case 12: if ((op & 0x70) == 0x70) op_worker_exit(); else op_worker_alloc(&in); break;
      case 13: op_worker_free(&in); break;
      case 14: if (op & 0x10) op_refused(&in); else op_collect(&in); break;
      default: op_query(&in); break;
    }
    check_all();
  }
  cleanup();
  return 0;
}
