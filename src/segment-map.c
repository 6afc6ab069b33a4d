/* ----------------------------------------------------------------------------
  segment-map.c -- which segment units of the address space start a segment.

  One bit per 4 MiB segment unit of the whole 64-bit user address space
  (MI_ADDRESS_BITS = 48: x86-64 hands out addresses below 2^47 and arm64
  below 2^48 unless a program asks for more with an address hint, which we
  never do), set while a segment of ours starts there. It answers "is this a
  segment of ours?" in constant time without dereferencing the address, which
  is what lets `free` and `mi_is_in_heap_region` reject foreign pointers. It
  is 8 MiB of zero-initialised .bss, touched only where segments live.

  A summary word has one bit per line of 64 map words (16 GiB of address
  space), set when a segment starts in that line and never cleared: visiting
  every segment (after fork) reads the 2 KiB summary and the few lines it
  points at, not 8 MiB.

  A segment the OS maps above the covered range is refused
  (_mi_segment_map_allocated_at returns false and the segment layer gives the
  memory back): every block address then fits in MI_ADDRESS_BITS, which the
  page's thread_free word relies on too (it keeps a count in the bits above).

  Alternatives rejected: a linear scan of the regions (1.6: slow, and blind
  to segments mapped straight from the OS), a hash set (needs a lock or a
  lock-free table for a bit of information per 4 MiB).

  Held visits (_mi_segment_map_visit_held): a thread that reads or purges
  other threads' segments (a trim, the mallinfo figures: segment.c) must not
  touch a segment its owner frees meanwhile: a freed segment's memory goes
  back to its region (and is soon another segment, or the inside of a huge
  block) or to the OS. So the visitor announces the segment it is about to
  touch in one process-wide word, then checks that the map still has it; a
  thread that frees a segment clears the segment's bit, then waits while the
  word names it (a hazard pointer with one slot: one visit at a time). A held
  segment is therefore neither unmapped nor reused until the visitor moves
  on. It costs a segment free one fence and one load, and nothing else. (A
  region-level guard was rejected: it would not cover the segments mapped
  straight from the OS, and it needs a lock that frees of regions take.)

  The pointer lookups (from a block pointer to its segment and page, the
  big-alignment blocks that start exactly at a unit included, and
  mi_is_in_heap_region) are here too: they are what the map is for.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

#define MI_SEGMENT_MAP_WORDS  (MI_SEGMENT_MAP_BITS / MI_INTPTR_BITS)
#define MI_SEGMENT_MAP_LINE   (MI_INTPTR_BITS)   // map words per summary bit
#define MI_SEGMENT_MAP_LINES  (MI_SEGMENT_MAP_WORDS / MI_SEGMENT_MAP_LINE)

static _Atomic(uintptr_t) mi_segment_map[MI_SEGMENT_MAP_WORDS];
static _Atomic(uintptr_t) mi_segment_map_summary[(MI_SEGMENT_MAP_LINES + MI_INTPTR_BITS - 1) / MI_INTPTR_BITS];

// The map word and bit of a segment address; false above the covered range.
static bool mi_segment_map_index(const void* segment, size_t* idx, uintptr_t* bit) {
  const uintptr_t unit = (uintptr_t)segment >> MI_SEGMENT_SHIFT;
  if (unit >= MI_SEGMENT_MAP_BITS) return false;
  *idx = unit / MI_INTPTR_BITS;
  *bit = (uintptr_t)1 << (unit % MI_INTPTR_BITS);
  return true;
}

bool _mi_segment_map_allocated_at(const mi_segment_t* segment) {
  mi_assert_internal(((uintptr_t)segment & MI_SEGMENT_MASK) == 0);
  size_t idx; uintptr_t bit;
  if (!mi_segment_map_index(segment, &idx, &bit)) return false;
  const size_t line = idx / MI_SEGMENT_MAP_LINE;
  _Atomic(uintptr_t)* const summary = &mi_segment_map_summary[line / MI_INTPTR_BITS];
  const uintptr_t sbit = (uintptr_t)1 << (line % MI_INTPTR_BITS);
  if ((mi_atomic_load_relaxed(summary) & sbit) == 0) mi_atomic_or_acq_rel(summary, sbit);   // (once per line)
  mi_atomic_or_acq_rel(&mi_segment_map[idx], bit);
  return true;
}

static _Atomic(uintptr_t) mi_segment_map_held;       // the segment a held visit touches now (0: none)
static _Atomic(uintptr_t) mi_segment_map_visiting;   // 1 while a held visit is under way

// The segment is no longer ours: clear its bit, then wait until no visitor
// holds it (after that nobody else reads or writes it).
void _mi_segment_map_freed_at(const mi_segment_t* segment) {
  size_t idx; uintptr_t bit;
  if (!mi_segment_map_index(segment, &idx, &bit)) return;
  mi_atomic_and_acq_rel(&mi_segment_map[idx], ~bit);
  mi_atomic_fence_seq_cst();   // pairs with the fence in mi_segment_map_hold
  while (mi_atomic_load_acquire(&mi_segment_map_held) == (uintptr_t)segment) mi_atomic_yield();
}

// Checked builds test every freed pointer here on free's fast path, which
// uses this forced-inline version (the library is one translation unit,
// src/static.c): when FULL's free grew, gcc folded the free's hook, whose
// body was this function's, into _mi_segment_map_contains and called it.
static mi_decl_forceinline bool mi_segment_map_contains(const void* segment) {
  size_t idx; uintptr_t bit;
  if (((uintptr_t)segment & MI_SEGMENT_MASK) != 0) return false;
  if (!mi_segment_map_index(segment, &idx, &bit)) return false;
  return ((mi_atomic_load_acquire(&mi_segment_map[idx]) & bit) != 0);
}

bool _mi_segment_map_contains(const void* segment) {
  return mi_segment_map_contains(segment);
}

// Announce `segment` as held, and check that it is still ours.
static bool mi_segment_map_hold(mi_segment_t* segment) {
  mi_atomic_store_release(&mi_segment_map_held, (uintptr_t)segment);
  mi_atomic_fence_seq_cst();   // pairs with the fence in _mi_segment_map_freed_at
  return _mi_segment_map_contains(segment);
}

static void mi_segment_map_visit_all(void (*fn)(mi_segment_t* segment, void* arg), void* arg, bool held) {
  for (size_t s = 0; s < sizeof(mi_segment_map_summary) / sizeof(mi_segment_map_summary[0]); s++) {
    uintptr_t lines = mi_atomic_load_acquire(&mi_segment_map_summary[s]);
    while (lines != 0) {
      const size_t line = s * MI_INTPTR_BITS + mi_ctz(lines);
      lines &= lines - 1;
      for (size_t idx = line * MI_SEGMENT_MAP_LINE; idx < (line + 1) * MI_SEGMENT_MAP_LINE; idx++) {
        uintptr_t map = mi_atomic_load_acquire(&mi_segment_map[idx]);
        while (map != 0) {
          const uintptr_t unit = idx * MI_INTPTR_BITS + mi_ctz(map);
          map &= map - 1;
          mi_segment_t* const segment = (mi_segment_t*)(unit << MI_SEGMENT_SHIFT);
          if (held && !mi_segment_map_hold(segment)) continue;   // freed meanwhile
          fn(segment, arg);
        }
      }
    }
  }
}

// In a forked child: a held visit of a thread that does not exist there holds nothing.
void _mi_segment_map_fork_child(void) {
  mi_atomic_store_relaxed(&mi_segment_map_held, 0);
  mi_atomic_store_release(&mi_segment_map_visiting, 0);
}

// Call `fn` for every segment in the map. Only safe where no other thread can
// free segments meanwhile (the child of a fork runs it with one thread).
void _mi_segment_map_visit(void (*fn)(mi_segment_t* segment, void* arg), void* arg) {
  mi_segment_map_visit_all(fn, arg, false);
}

// Call `fn` for every segment of the map while other threads run: each
// segment is held during its call (neither freed nor reused; its owner may
// go on using it). One such visit at a time: a second one waits. The
// caller blocks this thread's signals meanwhile (a handler that freed the
// held segment would wait for itself).
void _mi_segment_map_visit_held(void (*fn)(mi_segment_t* segment, void* arg), void* arg) {
  uintptr_t expected = 0;
  while (!mi_atomic_cas_strong_acq_rel(&mi_segment_map_visiting, &expected, 1)) {
    expected = 0;
    mi_atomic_yield();
  }
  mi_segment_map_visit_all(fn, arg, true);
  mi_atomic_store_release(&mi_segment_map_held, 0);
  mi_atomic_store_release(&mi_segment_map_visiting, 0);
}

// ---------------------------------------------------------------------------
// Pointer lookups: from a pointer to its segment and page
// ---------------------------------------------------------------------------

// The segment and page of any block pointer we handed out (including the
// unit-aligned big-alignment ones); NULL for NULL.
mi_page_t* _mi_ptr_page(const void* p, mi_segment_t** psegment) {
  mi_segment_t* segment = _mi_ptr_segment(p);
  if (mi_unlikely((const void*)segment == p)) {
    segment = _mi_segment_of_unit_aligned(p);
    if (psegment != NULL) *psegment = segment;
    return (segment == NULL ? NULL : &segment->pages[0]);
  }
  if (psegment != NULL) *psegment = segment;
  return _mi_segment_page_of(segment, p);
}

mi_page_t* _mi_ptr_page_of(const void* p) {
  return _mi_ptr_page(p, NULL);
}

// The segment of a block whose address is exactly segment-unit aligned: only
// big-alignment blocks (one unit after their segment's start). NULL otherwise.
mi_segment_t* _mi_segment_of_unit_aligned(const void* p) {
  if (p == NULL) return NULL;
  mi_segment_t* segment = (mi_segment_t*)((uintptr_t)p - MI_SEGMENT_SIZE);
  if (!_mi_segment_map_contains(segment)) return NULL;
  if (segment->aligned_block != (uint8_t*)p) return NULL;
  return segment;
}

// Is p inside one of our segments? Constant time through the segment map; a
// pointer beyond the first 4 MiB of a huge block is not recognised, nor one
// in the unused rest of a lean segment's unit.
bool mi_is_in_heap_region(const void* p) mi_attr_noexcept {
  if (p == NULL) return false;
  #if defined(MI_ZERO_AREA)
  if (_mi_zero_area_contains(p)) return true;   // malloc(0) in secure builds
  #endif
  mi_segment_t* segment = _mi_ptr_segment(p);
  if ((const void*)segment == p) return (_mi_segment_of_unit_aligned(p) != NULL);
  return _mi_segment_holds(segment, p);
}
