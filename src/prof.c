/* ----------------------------------------------------------------------------
  prof.c -- the sampled heap profiler: which call sites hold the memory.

  Sampling. With MIMALLOC_PROF_SAMPLE=<bytes> (mi_option_prof_sample), every
  heap counts down the bytes it hands out (`prof_countdown`, decremented in
  `_mi_page_malloc`, which every allocation passes once); when the count
  runs out, the allocation that crossed zero is sampled and a new count is
  drawn from an exponential distribution with the option as its mean. So an
  allocation of `size` bytes is sampled with probability
  p = 1 - exp(-size/mean), independently of the others, and 1/p unsampled
  allocations of that size are estimated from each sample (the estimates
  that pprof expects in a heap profile; tcmalloc and jemalloc sample the
  same way). That decrement is all an unsampled allocation pays; when the
  option is 0 the count is reset to MI_PROF_RECHECK bytes whenever it runs
  out, so an option set at run time is noticed within that many bytes.

  Recording. A sampled allocation records its stack with the OS's unwinder
  (glibc's backtrace, which reads the unwind tables: no frame pointers
  needed; warmed up once at start-up, because its first call allocates),
  looks the stack up in the stack table and enters the block in the block
  table. Both tables live in memory from the OS layer (_mi_os_alloc), never
  from malloc, and are guarded by one spin lock: samples are rare. The
  sampled block's page gets the flag MI_PAGE_HAS_SAMPLED, which is part of
  the flags byte that `free` already tests on its fast path, so frees of
  other pages pay nothing and a free from a flagged page takes the generic
  path, which removes the block from the table before the block is reused.
  A table of flagged pages counts their sampled blocks: the free of the last
  one clears the flag (and an empty page never has it).

  Dumping. `mi_prof_dump(path)`, and MIMALLOC_PROF_FILE at exit, write
  pprof's profile.proto: four sample types (alloc_objects, alloc_space,
  inuse_objects, inuse_space; the last is pprof's default), one sample per
  stack, locations by address, and the executable mappings of
  /proc/self/maps, so pprof symbolises with the binaries on disk. Addresses
  in exported functions also get the function's name (dladdr1), for
  binaries without debug information. The stacks are copied out of the
  tables first and encoded without the lock: naming takes the dynamic
  loader's lock, which a thread may hold while it allocates. The
  allocator's own innermost frames are left out when it is a shared object;
  a static copy is part of the program's binary, and pprof cuts its frames
  by the profile's `drop_frames` (a regular expression of our entry points)
  once it has names for them. The protobuf encoder and the gzip container
  are written here (a deflate stream of stored blocks: no compression, so
  no zlib dependency; a profile is small). `mi_heap_destroy` forgets the
  sampled blocks of the pages it frees.

  Known limits: a block that grows in place with realloc keeps the size it
  was sampled with; stacks deeper than MI_PROF_DEPTH frames lose their
  outermost frames; without glibc's backtrace, stacks are empty.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

#define MI_PROF_DEPTH     64                    // frames kept per stack
#define MI_PROF_RECHECK   ((int64_t)256 * MiB)  // bytes between looks at the option while it is off

// ---------------------------------------------------------------------------
// Arithmetic without libm (the library does not link it)
// ---------------------------------------------------------------------------

typedef union mi_double_bits_u { double d; uint64_t u; } mi_double_bits_t;

// ln(x) for x > 0: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), and
// ln(m) = 2 atanh((m-1)/(m+1)) by its series (|t| < 0.172: 10 terms).
static double mi_prof_log(double x) {
  mi_double_bits_t b = { x };
  int e = (int)((b.u >> 52) & 0x7FF) - 1023;
  b.u = (b.u & ~(0x7FFULL << 52)) | (1023ULL << 52);
  double m = b.d;
  if (m > 1.4142135623730951) { m *= 0.5; e++; }
  const double t = (m - 1.0) / (m + 1.0);
  const double t2 = t * t;
  double term = t, sum = 0.0;
  for (int k = 1; k <= 21; k += 2) { sum += term / k; term *= t2; }
  return 2.0 * sum + e * 0.6931471805599453;
}

// 1 - exp(-x) for x >= 0, precise for small x too.
static double mi_prof_one_minus_exp_neg(double x) {
  if (x < 0.5) {   // x - x^2/2! + x^3/3! - ...
    double term = x, sum = 0.0;
    for (int k = 1; k <= 14; k++) { sum += term; term *= -x / (k + 1); }
    return sum;
  }
  if (x > 700.0) return 1.0;
  const int k = (int)(x / 0.6931471805599453);
  const double r = x - k * 0.6931471805599453;   // exp(-x) = exp(-r) * 2^-k
  double term = 1.0, e = 0.0;
  for (int i = 1; i <= 20; i++) { e += term; term *= -r / i; }
  mi_double_bits_t scale;
  scale.u = (uint64_t)(1023 - k) << 52;          // 2^-k (k <= 1010)
  return 1.0 - e * scale.d;
}

// The next interval: exponential with mean `mean` bytes, at least 1.
static int64_t mi_prof_next_interval(mi_heap_t* heap, long mean) {
  const uint64_t r = (uint64_t)_mi_heap_random_next(heap);
  const double u = (double)((r >> 11) + 1) * (1.0 / 9007199254740992.0);   // (0,1]
  const double x = -mi_prof_log(u) * (double)mean;
  if (x >= 4.0e18) return INT64_MAX / 2;
  return (x < 1.0 ? 1 : (int64_t)x);
}

// ---------------------------------------------------------------------------
// The tables: stacks (append-only, with a hash index) and sampled blocks
// (open addressing by address). All under `mi_prof_lock`.
// ---------------------------------------------------------------------------

typedef struct mi_prof_stack_s {
  uint64_t hash;
  size_t   depth;
  double   alloc_objects, alloc_space;   // estimates of everything allocated here
  double   inuse_objects, inuse_space;   // estimates of what is live
  void*    frames[MI_PROF_DEPTH];        // return addresses, innermost first
} mi_prof_stack_t;

// An entry of an address-keyed table: a sampled block, or a page holding
// sampled blocks (then `size` counts them).
typedef struct mi_prof_entry_s {
  uintptr_t key;          // the address; 0: an empty slot
  size_t    stack;        // (blocks) index in the stack table
  size_t    size;         // (blocks) bytes requested; (pages) sampled blocks live in it
  double    objects;      // (blocks) 1/p: the allocations it stands for
} mi_prof_entry_t;

typedef struct mi_prof_map_s {
  mi_prof_entry_t* slots;   // [cap], open addressing with linear probing
  size_t           count;
  size_t           cap;
} mi_prof_map_t;

typedef struct mi_prof_tables_s {
  mi_prof_stack_t* stacks;       // [stack_cap]
  size_t           stack_count;
  size_t           stack_cap;
  uint32_t*        stack_index;  // [2*stack_cap]: stack number + 1, or 0
  mi_prof_map_t    blocks;       // sampled blocks not yet freed
  mi_prof_map_t    pages;        // pages with MI_PAGE_HAS_SAMPLED, and how many such blocks each holds
} mi_prof_tables_t;

static mi_prof_tables_t mi_prof;
static _Atomic(uintptr_t) mi_prof_lock;
static _Atomic(size_t) mi_prof_live;              // sampled blocks not yet freed
static mi_decl_thread bool mi_prof_busy;          // this thread is inside the profiler
static bool mi_prof_unwinder_ready;

static mi_decl_thread volatile bool mi_prof_holding;   // this thread holds the lock, or is taking it

// Take the lock; false if this thread holds it already (or is taking it): a
// signal handler interrupted the profiler and allocates or frees. Waiting
// would never end, so the caller does without the tables (a sampled block
// freed there stays counted as live until its address is sampled again or
// freed again). The flag is set before the lock is taken and cleared after it
// is let go, so a handler can never find the lock held by its own thread
// without the flag.
static bool mi_prof_acquire(void) {
  if (mi_tls(mi_prof_holding)) return false;
  mi_tls(mi_prof_holding) = true;
  mi_atomic_signal_fence();
  uintptr_t expected = 0;
  while (!mi_atomic_cas_strong_acq_rel(&mi_prof_lock, &expected, 1)) {
    expected = 0;
    mi_atomic_yield();
  }
  return true;
}

static void mi_prof_release(void) {
  mi_atomic_store_release(&mi_prof_lock, 0);
  mi_atomic_signal_fence();
  mi_tls(mi_prof_holding) = false;
}

static size_t mi_prof_slot(uintptr_t key, size_t cap) {
  const uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
  return (size_t)(h >> 20) & (cap - 1);
}

static bool mi_prof_map_grow(mi_prof_map_t* m) {
  const size_t cap = (m->cap == 0 ? 1024 : 2 * m->cap);
  mi_prof_entry_t* slots = (mi_prof_entry_t*)_mi_os_alloc(cap * sizeof(mi_prof_entry_t));
  if (slots == NULL) return false;
  for (size_t i = 0; i < m->cap; i++) {
    const mi_prof_entry_t* e = &m->slots[i];
    if (e->key == 0) continue;
    size_t j = mi_prof_slot(e->key, cap);
    while (slots[j].key != 0) j = (j + 1) & (cap - 1);
    slots[j] = *e;
  }
  if (m->slots != NULL) _mi_os_free(m->slots, m->cap * sizeof(mi_prof_entry_t));
  m->slots = slots;
  m->cap = cap;
  return true;
}

static mi_prof_entry_t* mi_prof_map_find(mi_prof_map_t* m, uintptr_t key) {
  if (m->cap == 0) return NULL;
  for (size_t j = mi_prof_slot(key, m->cap); m->slots[j].key != 0; j = (j + 1) & (m->cap - 1)) {
    if (m->slots[j].key == key) return &m->slots[j];
  }
  return NULL;
}

// A new entry for `key` (not in the table), zeroed; NULL when out of memory.
static mi_prof_entry_t* mi_prof_map_insert(mi_prof_map_t* m, uintptr_t key) {
  if (2 * (m->count + 1) > m->cap && !mi_prof_map_grow(m)) return NULL;
  size_t j = mi_prof_slot(key, m->cap);
  while (m->slots[j].key != 0) j = (j + 1) & (m->cap - 1);
  mi_prof_entry_t* e = &m->slots[j];
  memset(e, 0, sizeof(*e));
  e->key = key;
  m->count++;
  return e;
}

// Remove an entry and close the gap: entries after it that would no longer
// be found from their home slot move back.
static void mi_prof_map_remove(mi_prof_map_t* m, mi_prof_entry_t* e) {
  const size_t mask = m->cap - 1;
  size_t i = (size_t)(e - m->slots);
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (m->slots[j].key == 0) break;
    const size_t home = mi_prof_slot(m->slots[j].key, m->cap);
    const bool stays = (i <= j ? (i < home && home <= j) : (i < home || home <= j));   // home in (i, j]
    if (!stays) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].key = 0;
  m->count--;
}

static uint64_t mi_prof_stack_hash(void* const* frames, size_t depth) {
  uint64_t h = 0xCBF29CE484222325ULL ^ depth;
  for (size_t i = 0; i < depth; i++) {
    h = (h ^ (uint64_t)(uintptr_t)frames[i]) * 0x100000001B3ULL;
    h ^= h >> 29;
  }
  return (h == 0 ? 1 : h);
}

static bool mi_prof_stacks_grow(void) {
  const size_t cap = (mi_prof.stack_cap == 0 ? 64 : 2 * mi_prof.stack_cap);
  mi_prof_stack_t* stacks = (mi_prof_stack_t*)_mi_os_alloc(cap * sizeof(mi_prof_stack_t));
  uint32_t* index = (uint32_t*)_mi_os_alloc(2 * cap * sizeof(uint32_t));
  if (stacks == NULL || index == NULL || cap >= UINT32_MAX / 2) {
    if (stacks != NULL) _mi_os_free(stacks, cap * sizeof(mi_prof_stack_t));
    if (index != NULL) _mi_os_free(index, 2 * cap * sizeof(uint32_t));
    return false;
  }
  if (mi_prof.stack_count > 0) memcpy(stacks, mi_prof.stacks, mi_prof.stack_count * sizeof(mi_prof_stack_t));
  for (size_t s = 0; s < mi_prof.stack_count; s++) {
    size_t j = (size_t)stacks[s].hash & (2 * cap - 1);
    while (index[j] != 0) j = (j + 1) & (2 * cap - 1);
    index[j] = (uint32_t)(s + 1);
  }
  if (mi_prof.stacks != NULL) {
    _mi_os_free(mi_prof.stacks, mi_prof.stack_cap * sizeof(mi_prof_stack_t));
    _mi_os_free(mi_prof.stack_index, 2 * mi_prof.stack_cap * sizeof(uint32_t));
  }
  mi_prof.stacks = stacks;
  mi_prof.stack_index = index;
  mi_prof.stack_cap = cap;
  return true;
}

// The stack's number, entered if new; SIZE_MAX when out of memory.
static size_t mi_prof_stack_find(void* const* frames, size_t depth) {
  const uint64_t hash = mi_prof_stack_hash(frames, depth);
  if (mi_prof.stack_count >= mi_prof.stack_cap && !mi_prof_stacks_grow()) return SIZE_MAX;
  const size_t mask = 2 * mi_prof.stack_cap - 1;
  size_t j = (size_t)hash & mask;
  for (; mi_prof.stack_index[j] != 0; j = (j + 1) & mask) {
    const size_t s = mi_prof.stack_index[j] - 1;
    const mi_prof_stack_t* st = &mi_prof.stacks[s];
    if (st->hash == hash && st->depth == depth && memcmp(st->frames, frames, depth * sizeof(void*)) == 0) return s;
  }
  const size_t s = mi_prof.stack_count++;
  mi_prof_stack_t* st = &mi_prof.stacks[s];
  memset(st, 0, sizeof(*st));
  st->hash = hash;
  st->depth = depth;
  memcpy(st->frames, frames, depth * sizeof(void*));
  mi_prof.stack_index[j] = (uint32_t)(s + 1);
  return s;
}

// ---------------------------------------------------------------------------
// Sampling and freeing
// ---------------------------------------------------------------------------

void _mi_prof_process_init(void) {
  if (mi_option_get(mi_option_prof_sample) > 0 && !mi_prof_unwinder_ready) {
    mi_tls(mi_prof_busy) = true;   // allocations of the unwinder's set-up are not sampled
    _mi_prim_backtrace_init();
    mi_tls(mi_prof_busy) = false;
    mi_prof_unwinder_ready = true;
  }
}

static void mi_prof_forget(mi_page_t* page, const void* block);

// `size` bytes were asked for and `charged` counted down (with the padding of
// debug builds): the sampling probability is that of `charged`.
static void mi_prof_record(mi_page_t* page, void* block, size_t size, size_t charged, long mean) {
  void* frames[MI_PROF_DEPTH];
  const size_t depth = _mi_prim_backtrace(frames, MI_PROF_DEPTH);
  const double p = mi_prof_one_minus_exp_neg((double)charged / (double)mean);
  const double objects = (p > 0.0 ? 1.0 / p : 1.0);
  if (!mi_prof_acquire()) return;
  mi_prof_forget(page, block);   // an entry left at this address, whose free was not seen (see mi_prof_acquire)
  const size_t s = mi_prof_stack_find(frames, depth);
  mi_prof_entry_t* pg = mi_prof_map_find(&mi_prof.pages, (uintptr_t)page);
  if (pg == NULL && s != SIZE_MAX) pg = mi_prof_map_insert(&mi_prof.pages, (uintptr_t)page);
  mi_prof_entry_t* b = (pg != NULL ? mi_prof_map_insert(&mi_prof.blocks, (uintptr_t)block) : NULL);
  if (b != NULL) {
    mi_prof_stack_t* st = &mi_prof.stacks[s];
    st->alloc_objects += objects;
    st->alloc_space += objects * (double)size;
    st->inuse_objects += objects;
    st->inuse_space += objects * (double)size;
    b->stack = s;
    b->size = size;
    b->objects = objects;
    pg->size++;
    mi_atomic_add_relaxed(&mi_prof_live, 1);
    mi_page_set_has_sampled(page, true);   // before the block reaches the program
  }
  else if (pg != NULL && pg->size == 0) {
    mi_prof_map_remove(&mi_prof.pages, pg);   // (out of memory)
  }
  mi_prof_release();
}

// `_mi_page_malloc` took `size` bytes off heap->prof_countdown and it went
// negative: arm a new heap, or sample this block. Returns the block.
void* _mi_prof_malloc_sampled(mi_heap_t* heap, mi_page_t* page, void* block, size_t size) {
  const long mean = mi_option_get(mi_option_prof_sample);
  if (mean <= 0) {
    heap->prof_countdown = MI_PROF_RECHECK;
    return block;
  }
  if (heap->prof_countdown < MI_PROF_UNARMED / 2) {
    // first count of this heap: drawn as if before this allocation
    heap->prof_countdown = mi_prof_next_interval(heap, mean) - (int64_t)size;
    if (heap->prof_countdown >= 0) return block;
  }
  heap->prof_countdown = mi_prof_next_interval(heap, mean);
  if (mi_tls(mi_prof_busy)) return block;   // an allocation of the profiler's own calls
  mi_tls(mi_prof_busy) = true;
  if (!mi_prof_unwinder_ready) {
    // enabled at run time: warm the unwinder up now (its allocations are not sampled)
    _mi_prim_backtrace_init();
    mi_prof_unwinder_ready = true;
  }
  mi_prof_record(page, block, size - MI_PADDING_SIZE, size, mean);
  mi_tls(mi_prof_busy) = false;
  return block;
}

// Forget a sampled block (under the lock). When it was the last one of its
// page, the page's flag goes too, so its other frees take the fast path
// again; any thread may clear it: the flag is only set and cleared under
// the lock, and the owner's own writes of the flags byte are whole-byte
// stores, so a clear it overwrites at worst leaves the flag set (frees of
// that page then look here for nothing until it is empty).
static void mi_prof_forget(mi_page_t* page, const void* block) {
  mi_prof_entry_t* b = mi_prof_map_find(&mi_prof.blocks, (uintptr_t)block);
  if (b == NULL) return;   // an unsampled block of a flagged page
  mi_prof_stack_t* st = &mi_prof.stacks[b->stack];
  st->inuse_objects -= b->objects;
  st->inuse_space -= b->objects * (double)b->size;
  mi_prof_map_remove(&mi_prof.blocks, b);
  mi_atomic_sub_relaxed(&mi_prof_live, 1);
  mi_prof_entry_t* pg = mi_prof_map_find(&mi_prof.pages, (uintptr_t)page);
  mi_assert_internal(pg != NULL && pg->size > 0);
  if (pg != NULL && --pg->size == 0) {
    mi_prof_map_remove(&mi_prof.pages, pg);
    mi_atomic_and_acq_rel(&page->xflags, (uint8_t)~MI_PAGE_HAS_SAMPLED);
  }
}

void _mi_prof_free(mi_page_t* page, const void* block) {
  if (!mi_prof_acquire()) return;
  mi_prof_forget(page, block);
  mi_prof_release();
}

void _mi_prof_forget_page(mi_page_t* page) {
  if (!mi_page_has_sampled(page)) return;
  size_t psize;
  const uint8_t* const start = _mi_page_start(_mi_page_segment(page), page, &psize);
  const size_t bsize = mi_page_block_size(page);
  if (!mi_prof_acquire()) return;
  for (uintptr_t p = (uintptr_t)start; p < (uintptr_t)start + psize && mi_page_has_sampled(page); p += bsize) {
    mi_prof_forget(page, (const void*)p);
  }
  mi_prof_release();
}

// In a forked child only the forking thread exists: a lock another thread
// held at the fork is free (what that thread was changing may be lost).
void _mi_prof_fork_child(void) {
  mi_atomic_store_release(&mi_prof_lock, 0);
}

size_t _mi_prof_live_samples(void) {
  return mi_atomic_load_relaxed(&mi_prof_live);
}

// ---------------------------------------------------------------------------
// A growable byte buffer in OS memory, and protobuf encoding
// ---------------------------------------------------------------------------

typedef struct mi_pbuf_s {
  uint8_t* data;
  size_t   len;
  size_t   cap;
  bool     failed;   // out of memory: the content is incomplete
} mi_pbuf_t;

static bool mi_pbuf_reserve(mi_pbuf_t* b, size_t extra) {
  if (b->failed) return false;
  if (b->len + extra <= b->cap) return true;
  size_t cap = (b->cap == 0 ? 64 * KiB : b->cap);
  while (cap < b->len + extra) cap *= 2;
  uint8_t* data = (uint8_t*)_mi_os_alloc(cap);
  if (data == NULL) { b->failed = true; return false; }
  if (b->len > 0) memcpy(data, b->data, b->len);
  if (b->data != NULL) _mi_os_free(b->data, b->cap);
  b->data = data;
  b->cap = cap;
  return true;
}

static void mi_pbuf_bytes(mi_pbuf_t* b, const void* p, size_t n) {
  if (n == 0 || !mi_pbuf_reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void mi_pbuf_free(mi_pbuf_t* b) {
  if (b->data != NULL) _mi_os_free(b->data, b->cap);
  memset(b, 0, sizeof(*b));
}

static void mi_pb_varint(mi_pbuf_t* b, uint64_t x) {
  uint8_t buf[10];
  size_t n = 0;
  do {
    buf[n++] = (uint8_t)((x & 0x7F) | (x > 0x7F ? 0x80 : 0));
    x >>= 7;
  } while (x != 0);
  mi_pbuf_bytes(b, buf, n);
}

static size_t mi_pb_varint_size(uint64_t x) {
  size_t n = 1;
  while (x > 0x7F) { x >>= 7; n++; }
  return n;
}

#define MI_PB_VARINT  0
#define MI_PB_LEN     2

static void mi_pb_tag(mi_pbuf_t* b, unsigned field, unsigned wire) {
  mi_pb_varint(b, ((uint64_t)field << 3) | wire);
}

static void mi_pb_uint(mi_pbuf_t* b, unsigned field, uint64_t x) {
  if (x == 0) return;   // the default is not written
  mi_pb_tag(b, field, MI_PB_VARINT);
  mi_pb_varint(b, x);
}

// A length-delimited field whose content is in `sub`.
static void mi_pb_message(mi_pbuf_t* b, unsigned field, const mi_pbuf_t* sub) {
  mi_pb_tag(b, field, MI_PB_LEN);
  mi_pb_varint(b, sub->len);
  mi_pbuf_bytes(b, sub->data, sub->len);
  if (sub->failed) b->failed = true;
}

static void mi_pb_packed(mi_pbuf_t* b, unsigned field, const uint64_t* xs, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += mi_pb_varint_size(xs[i]);
  mi_pb_tag(b, field, MI_PB_LEN);
  mi_pb_varint(b, len);
  for (size_t i = 0; i < n; i++) mi_pb_varint(b, xs[i]);
}

// ---------------------------------------------------------------------------
// gzip (RFC 1952) around a deflate stream (RFC 1951) of stored blocks
// ---------------------------------------------------------------------------

static uint32_t mi_crc32(uint32_t crc, const uint8_t* p, size_t n) {
  static uint32_t table[256];
  static _Atomic(uintptr_t) table_ready;
  if (mi_atomic_load_acquire(&table_ready) == 0) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1 ? 0xEDB88320U ^ (c >> 1) : c >> 1);
      table[i] = c;
    }
    mi_atomic_store_release(&table_ready, 1);
  }
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

static void mi_le32(uint8_t* p, uint32_t x) {
  p[0] = (uint8_t)x; p[1] = (uint8_t)(x >> 8); p[2] = (uint8_t)(x >> 16); p[3] = (uint8_t)(x >> 24);
}

static void mi_gzip(mi_pbuf_t* out, const uint8_t* data, size_t len) {
  static const uint8_t header[10] = { 0x1F, 0x8B, 8 /* deflate */, 0, 0, 0, 0, 0, 0, 3 /* Unix */ };
  mi_pbuf_bytes(out, header, sizeof(header));
  size_t pos = 0;
  do {
    const size_t n = (len - pos > 65535 ? 65535 : len - pos);
    const bool last = (pos + n == len);
    uint8_t block[5] = { (uint8_t)(last ? 1 : 0), (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)~n, (uint8_t)(~n >> 8) };
    mi_pbuf_bytes(out, block, sizeof(block));   // BFINAL, BTYPE 00 (stored), LEN, NLEN
    mi_pbuf_bytes(out, data + pos, n);
    pos += n;
  } while (pos < len);
  uint8_t trailer[8];
  mi_le32(trailer, mi_crc32(0, data, len));
  mi_le32(trailer + 4, (uint32_t)len);
  mi_pbuf_bytes(out, trailer, sizeof(trailer));
}

// ---------------------------------------------------------------------------
// The profile (profile.proto of github.com/google/pprof)
// ---------------------------------------------------------------------------

// Profile fields
#define MI_PROFILE_SAMPLE_TYPE   1
#define MI_PROFILE_SAMPLE        2
#define MI_PROFILE_MAPPING       3
#define MI_PROFILE_LOCATION      4
#define MI_PROFILE_FUNCTION      5
#define MI_PROFILE_STRING_TABLE  6
#define MI_PROFILE_DROP_FRAMES   7
#define MI_PROFILE_PERIOD_TYPE   11
#define MI_PROFILE_PERIOD        12

// The allocator's own frames (pprof cuts them and everything they call).
#define MI_PROF_DROP_FRAMES \
  "_?mi_[a-z0-9_]*|malloc|calloc|realloc|reallocarray|reallocf|free|cfree|posix_memalign|aligned_alloc|" \
  "memalign|valloc|pvalloc|operator new.*|operator delete.*"

typedef struct mi_prof_writer_s {
  mi_pbuf_t  out;        // the Profile message
  mi_pbuf_t  sub;        // one sub-message being built
  int64_t    strings;    // entries in the string table so far
  uint64_t   functions;  // functions so far (their ids are 1..functions: pprof adds its own after them)
} mi_prof_writer_t;

// Append a string to the table (any order of fields is valid protobuf).
static int64_t mi_prof_string(mi_prof_writer_t* w, const char* s) {
  const size_t n = strlen(s);
  mi_pb_tag(&w->out, MI_PROFILE_STRING_TABLE, MI_PB_LEN);
  mi_pb_varint(&w->out, n);
  mi_pbuf_bytes(&w->out, s, n);
  return w->strings++;
}

static void mi_prof_value_type(mi_prof_writer_t* w, unsigned field, const char* type, const char* unit) {
  const int64_t t = mi_prof_string(w, type);
  const int64_t u = mi_prof_string(w, unit);
  w->sub.len = 0;
  mi_pb_uint(&w->sub, 1, (uint64_t)t);
  mi_pb_uint(&w->sub, 2, (uint64_t)u);
  mi_pb_message(&w->out, field, &w->sub);
}

typedef struct mi_prof_mapping_s { uintptr_t start, end; } mi_prof_mapping_t;
#define MI_PROF_MAPPINGS_MAX 4096
#define MI_PROF_NAME_MAX     1024

typedef struct mi_prof_maps_s {
  mi_prof_writer_t*  w;
  mi_prof_mapping_t* maps;       // [MI_PROF_MAPPINGS_MAX]; mapping id = index + 1
  size_t             count;
  const char*        exe;        // the executable's path
  uintptr_t          own_start;  // the allocator's own code, when it is a shared object
  uintptr_t          own_end;
} mi_prof_maps_t;

static bool mi_prof_mapping_visit(uintptr_t start, uintptr_t end, uintptr_t offset, const char* path, void* arg) {
  mi_prof_maps_t* m = (mi_prof_maps_t*)arg;
  if (m->count >= MI_PROF_MAPPINGS_MAX) return false;
  const uintptr_t own = (uintptr_t)&mi_prof_mapping_visit;   // (a static function: its own address)
  if (own >= start && own < end && strcmp(path, m->exe) != 0) {
    m->own_start = start;
    m->own_end = end;
  }
  mi_prof_writer_t* w = m->w;
  const int64_t name = mi_prof_string(w, path);
  m->maps[m->count].start = start;
  m->maps[m->count].end = end;
  m->count++;
  w->sub.len = 0;
  mi_pb_uint(&w->sub, 1, m->count);         // id
  mi_pb_uint(&w->sub, 2, start);            // memory_start
  mi_pb_uint(&w->sub, 3, end);              // memory_limit
  mi_pb_uint(&w->sub, 4, offset);           // file_offset
  mi_pb_uint(&w->sub, 5, (uint64_t)name);   // filename
  mi_pb_message(&w->out, MI_PROFILE_MAPPING, &w->sub);
  return true;
}

// The address of a frame as pprof wants it: inside the call instruction
// (a return address points after it).
static uint64_t mi_prof_frame_address(void* frame) {
  return (uint64_t)(uintptr_t)frame - 1;
}

// Locations: one per distinct address, numbered from 1 in a hash table
// (address -> id) that the samples then look up.
typedef struct mi_prof_loc_s { uint64_t address; uint64_t id; } mi_prof_loc_t;

static uint64_t mi_prof_location_id(mi_prof_loc_t* locs, size_t cap, uint64_t address, uint64_t* next_id, bool* is_new) {
  size_t j = (size_t)((address * 0x9E3779B97F4A7C15ULL) >> 17) & (cap - 1);
  while (locs[j].id != 0 && locs[j].address != address) j = (j + 1) & (cap - 1);
  *is_new = (locs[j].id == 0);
  if (*is_new) { locs[j].address = address; locs[j].id = (*next_id)++; }
  return locs[j].id;
}

static int64_t mi_prof_round(double x) {
  return (x <= 0.0 ? 0 : (int64_t)(x + 0.5));
}

// The frames of a stack that belong to the program: without the allocator's
// own innermost frames when it is a shared object (a static copy is part of
// the program; pprof's drop_frames removes its frames by name then).
static size_t mi_prof_first_frame(const mi_prof_maps_t* maps, const mi_prof_stack_t* st) {
  size_t i = 0;
  while (i < st->depth && (uintptr_t)st->frames[i] >= maps->own_start && (uintptr_t)st->frames[i] < maps->own_end) i++;
  return (i < st->depth ? i : 0);
}

// A location, and (for an address in an exported function) its function:
// the name lets pprof show binaries it cannot symbolise (stripped ones); it
// replaces the name where it finds debug information.
static void mi_prof_location(mi_prof_writer_t* w, const mi_prof_maps_t* maps, uint64_t id, uint64_t address, char* name) {
  uint64_t mapping = 0;
  for (size_t m = 0; m < maps->count && mapping == 0; m++) {
    if (address >= maps->maps[m].start && address < maps->maps[m].end) mapping = m + 1;
  }
  const bool named = _mi_prim_symbol_name((const void*)(uintptr_t)address, name, MI_PROF_NAME_MAX);
  const uint64_t function = (named ? ++w->functions : 0);   // one per named location
  if (named) {
    const int64_t s = mi_prof_string(w, name);
    w->sub.len = 0;
    mi_pb_uint(&w->sub, 1, function);        // id
    mi_pb_uint(&w->sub, 2, (uint64_t)s);     // name
    mi_pb_uint(&w->sub, 3, (uint64_t)s);     // system_name (pprof demangles)
    mi_pb_message(&w->out, MI_PROFILE_FUNCTION, &w->sub);
  }
  w->sub.len = 0;
  mi_pb_uint(&w->sub, 1, id);                // id
  mi_pb_uint(&w->sub, 2, mapping);           // mapping_id
  mi_pb_uint(&w->sub, 3, address);           // address
  if (named) {
    mi_pb_tag(&w->sub, 4, MI_PB_LEN);        // line: a Line message ...
    mi_pb_varint(&w->sub, 1 + mi_pb_varint_size(function));
    mi_pb_tag(&w->sub, 1, MI_PB_VARINT);     // ... of one field, function_id
    mi_pb_varint(&w->sub, function);
  }
  mi_pb_message(&w->out, MI_PROFILE_LOCATION, &w->sub);
}

// Encode the profile of `stacks` into w->out.
static void mi_prof_encode(mi_prof_writer_t* w, const mi_prof_stack_t* stacks, size_t count, long mean) {
  mi_prof_string(w, "");   // string 0 is the empty string
  mi_prof_value_type(w, MI_PROFILE_SAMPLE_TYPE, "alloc_objects", "count");
  mi_prof_value_type(w, MI_PROFILE_SAMPLE_TYPE, "alloc_space", "bytes");
  mi_prof_value_type(w, MI_PROFILE_SAMPLE_TYPE, "inuse_objects", "count");
  mi_prof_value_type(w, MI_PROFILE_SAMPLE_TYPE, "inuse_space", "bytes");
  mi_prof_value_type(w, MI_PROFILE_PERIOD_TYPE, "space", "bytes");
  mi_pb_uint(&w->out, MI_PROFILE_PERIOD, (uint64_t)(mean > 0 ? mean : 0));
  const int64_t drop = mi_prof_string(w, MI_PROF_DROP_FRAMES);
  mi_pb_uint(&w->out, MI_PROFILE_DROP_FRAMES, (uint64_t)drop);

  // mappings (and where the allocator's own code is)
  char* name = (char*)_mi_os_alloc(2 * MI_PROF_NAME_MAX);
  mi_prof_maps_t maps = { w, NULL, 0, "", 0, 0 };
  maps.maps = (mi_prof_mapping_t*)_mi_os_alloc(MI_PROF_MAPPINGS_MAX * sizeof(mi_prof_mapping_t));
  size_t frames = 0;
  for (size_t s = 0; s < count; s++) frames += stacks[s].depth;
  size_t cap = 64;
  while (cap < 2 * frames) cap *= 2;
  mi_prof_loc_t* locs = (mi_prof_loc_t*)_mi_os_alloc(cap * sizeof(mi_prof_loc_t));
  if (name == NULL || maps.maps == NULL || locs == NULL) { w->out.failed = true; goto done; }
  if (_mi_prim_executable_path(name + MI_PROF_NAME_MAX, MI_PROF_NAME_MAX)) maps.exe = name + MI_PROF_NAME_MAX;
  (void)_mi_prim_visit_mappings(&mi_prof_mapping_visit, &maps);

  // locations
  uint64_t next_id = 1;
  for (size_t s = 0; s < count; s++) {
    const mi_prof_stack_t* st = &stacks[s];
    for (size_t i = mi_prof_first_frame(&maps, st); i < st->depth; i++) {
      const uint64_t address = mi_prof_frame_address(st->frames[i]);
      bool is_new;
      const uint64_t id = mi_prof_location_id(locs, cap, address, &next_id, &is_new);
      if (is_new) mi_prof_location(w, &maps, id, address, name);
    }
  }

  // samples: one per stack
  for (size_t s = 0; s < count; s++) {
    const mi_prof_stack_t* st = &stacks[s];
    uint64_t ids[MI_PROF_DEPTH];
    const size_t first = mi_prof_first_frame(&maps, st);
    for (size_t i = first; i < st->depth; i++) {
      bool is_new;
      ids[i - first] = mi_prof_location_id(locs, cap, mi_prof_frame_address(st->frames[i]), &next_id, &is_new);
    }
    const uint64_t values[4] = {
      (uint64_t)mi_prof_round(st->alloc_objects), (uint64_t)mi_prof_round(st->alloc_space),
      (uint64_t)mi_prof_round(st->inuse_objects), (uint64_t)mi_prof_round(st->inuse_space) };
    w->sub.len = 0;
    mi_pb_packed(&w->sub, 1, ids, st->depth - first);   // location_id
    mi_pb_packed(&w->sub, 2, values, 4);                // value
    mi_pb_message(&w->out, MI_PROFILE_SAMPLE, &w->sub);
  }
done:
  if (locs != NULL) _mi_os_free(locs, cap * sizeof(mi_prof_loc_t));
  if (maps.maps != NULL) _mi_os_free(maps.maps, MI_PROF_MAPPINGS_MAX * sizeof(mi_prof_mapping_t));
  if (name != NULL) _mi_os_free(name, 2 * MI_PROF_NAME_MAX);
}

int mi_prof_dump(const char* path) mi_attr_noexcept {
  if (path == NULL || path[0] == 0) {
    _mi_error_message(EINVAL, "mi_prof_dump: no file name given\n");
    errno = EINVAL;
    return EINVAL;
  }
  const bool was_busy = mi_tls(mi_prof_busy);
  mi_tls(mi_prof_busy) = true;   // nothing below samples itself
  // copy the stacks, then encode without the lock (naming functions takes
  // the loader's lock, which a thread may hold while it allocates)
  if (!mi_prof_acquire()) {   // (called by a signal handler that interrupted the profiler)
    mi_tls(mi_prof_busy) = was_busy;
    _mi_error_message(EBUSY, "mi_prof_dump: the profiler is busy on this thread\n");
    errno = EBUSY;
    return EBUSY;
  }
  const size_t count = mi_prof.stack_count;
  const size_t bytes = (count == 0 ? 1 : count) * sizeof(mi_prof_stack_t);
  mi_prof_stack_t* stacks = (mi_prof_stack_t*)_mi_os_alloc(bytes);
  if (stacks != NULL && count > 0) memcpy(stacks, mi_prof.stacks, count * sizeof(mi_prof_stack_t));
  mi_prof_release();
  mi_prof_writer_t w;
  memset(&w, 0, sizeof(w));
  if (stacks != NULL) {
    mi_prof_encode(&w, stacks, count, mi_option_get(mi_option_prof_sample));
    _mi_os_free(stacks, bytes);
  }
  else {
    w.out.failed = true;
  }
  mi_pbuf_t gz;
  memset(&gz, 0, sizeof(gz));
  if (!w.out.failed) mi_gzip(&gz, w.out.data, w.out.len);
  int err = (w.out.failed || gz.failed ? ENOMEM : 0);
  if (err == 0) err = _mi_prim_file_write(path, gz.data, gz.len, false);
  mi_pbuf_free(&gz);
  mi_pbuf_free(&w.out);
  mi_pbuf_free(&w.sub);
  mi_tls(mi_prof_busy) = was_busy;
  if (err != 0) {
    _mi_error_message(err, "mi_prof_dump: cannot write the heap profile to \"%s\" (error %d)\n", path, err);
    errno = err;
  }
  return err;
}

// MIMALLOC_PROF_FILE ("%p" in it stands for the process id; the path is
// measured first and has no length limit of ours).
void _mi_prof_dump_at_exit(void) {
  const size_t len = _mi_option_path(mi_option_prof_file, NULL, 0);
  if (len == 0) return;
  char* path = (char*)_mi_os_alloc(len + 1);
  if (path == NULL) return;
  _mi_option_path(mi_option_prof_file, path, len + 1);
  (void)mi_prof_dump(path);
  _mi_os_free(path, len + 1);
}
