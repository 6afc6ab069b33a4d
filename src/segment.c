/* ----------------------------------------------------------------------------
  segment.c -- segments: 4 MiB aligned containers of pages.

  A segment is 64 slices of 64 KiB (16 KiB in a lean segment), or one huge
  page (then the segment is as big as the block needs). The segments of
  slices are shared by all threads (segment-shared.c): a page is a run of
  free slices, one slice for small blocks, a few for medium ones, as many as
  its block needs for a large one ("Large pages" below); a page request
  takes the fitting run that is cheapest to claim (the most resident slices;
  in secure builds also the fewest guard system calls). A thread owns
  segments of its own only for the huge blocks. (A signal handler that
  interrupts the shared lock's holder and needs a new page gets none:
  malloc is not async-signal-safe; docs/design.md, "Signal handlers".)

  Owns: what every segment does. Its memory (a region block, a cached shared
  segment, or a mapping of its own for a big alignment) and header; the
  guard pages of secure builds, and those a segment leaves in its region
  block for the next one; the page layout and the runs of slices; claiming
  and clearing a page; the delayed purge of free pages ("Page purge"); the
  trim lock; the exit budget; and the layer's entry points (page allocation,
  page free, abandonment, remote frees), which hand each kind of segment to
  its file: segment-shared.c, segment-huge.c.
  May call: the regions (region.c), the OS layer (os.c), the segment map,
  the due table (purge-thread.c), and the other segment files through
  segment-internal.h.

  Pages given back to a segment wait for a *delayed purge*: after
  `reset_delay` ms their memory is purged, unless they are claimed again
  before that (which is what makes "free all, allocate again" cheap). The
  pending pages of a segment are a bit mask, purged together in runs of
  adjacent pages (see "Page purge" below). An alternative rejected: one timer
  per page in a per-thread queue (one madvise per page).

  When a thread ends, its pages of small and medium blocks in use wait on a
  list of their size class for a thread that adopts them (segment-shared.c),
  and a large page for whoever frees its block. A huge segment whose block
  is still in use is *abandoned*: owner id 0, and the thread that frees the
  block claims it by a CAS of the owner id from 0 and frees it
  (segment-huge.c).

  Big alignments (> 2 MiB): a huge segment whose block holds the pointer
  handed out in its first unit, past the header, or exactly one unit after
  the segment start (_mi_segment_big_aligned_ofs); see docs/design.md.

  Trim (malloc_trim, mi_collect(true)): any thread purges the free pages of
  every segment, those of threads that block and never call the allocator
  again included. Claims, clears and purges of pages take the segment's
  trim lock (once per page, never on the malloc/free fast paths), and the
  trim purges a segment's free pages while it holds that lock; see "The trim
  lock" below, segment-walk.c (the trim itself) and docs/design.md. The
  mallinfo figures walk the page descriptors of every segment the same way
  (segment-walk.c).
-----------------------------------------------------------------------------*/
#include "segment-internal.h"
#include "prim/prim.h"
#include "segment-internal.h"
#include "prim/prim.h"

// ---------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------

static size_t mi_segment_page_size(const mi_segment_t* segment);
static size_t mi_segment_guard_size(void);
static bool mi_page_is_continuation(const mi_page_t* page);

#if (MI_DEBUG >= 3)
static bool mi_segment_is_valid(const mi_segment_t* segment, mi_segments_tld_t* tld) {
  mi_assert_internal(segment != NULL);
  mi_assert_internal(mi_segment_is_valid_cookie(segment));
  mi_assert_internal(segment->used <= segment->capacity);
  mi_assert_internal(segment->abandoned <= segment->used);
  size_t nfree = 0, nslices = 0;
  for (size_t i = 0; i < segment->capacity; i++) {
    const mi_page_t* page = &segment->pages[i];
    mi_assert_internal(page->segment_idx == i);
    if (!page->segment_in_use) nfree++;
    else if (mi_page_is_continuation(page)) nslices++;
    mi_assert_internal(((segment->free_mask >> i) & 1) == (page->segment_in_use ? 0u : 1u));
  }
  mi_assert_internal(nfree + nslices + segment->used == segment->capacity);
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE ||
                     (mi_segment_page_size(segment) * segment->capacity == segment->segment_size));
  (void)tld;
  return true;
}
#endif

// ---------------------------------------------------------------------------
// Page layout
// ---------------------------------------------------------------------------

static size_t mi_segment_page_size(const mi_segment_t* segment) {
  if (segment->capacity > 1) {
    mi_assert_internal(segment->page_kind <= MI_PAGE_SLICES);
    return ((size_t)1 << segment->page_shift);
  }
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE);
  return segment->segment_size;
}

// ---------------------------------------------------------------------------
// Large pages: a segment of slices is 64 slices of 64 KiB, and a page is a
// run of adjacent slices: one for small blocks, enough for four (or more)
// medium blocks, or as many as a large block needs. The run's
// first descriptor is the page; the others are continuations: in use (their
// bits in free_mask are clear), MI_PAGE_CONTINUATION in their flags, and the
// distance back to the first in their `capacity` (_mi_slice_page). Free
// slices are free pages like any other: purged after the delay, adjacent
// ones together, trimmed, committed when claimed. See docs/design.md,
// "Large blocks".
// ---------------------------------------------------------------------------

// The area of a page of slices for blocks of `block_size`: one large block,
// or `blocks` medium ones (and more where the last slice has room for them).
static size_t mi_slice_page_area(size_t block_size, size_t blocks) {
  return (block_size > MI_MEDIUM_OBJ_SIZE_MAX ? block_size : blocks * block_size);
}

// Where the first medium block of a page of slices starts: a multiple of the
// largest power of two that divides the block size (aligned allocations of
// such sizes rely on it; slices are 64 KiB aligned, so only the blocks of
// 128 KiB and the header's slice 0 ever move).
static size_t mi_slice_page_align(size_t block_size) {
  return (block_size & (~block_size + 1));
}

// The slices a page of slices from slice `idx` takes for `blocks` blocks of
// `block_size` (one if they are large; small blocks: one slice, in a lean
// segment one block's worth): the first slice's area starts after the header,
// the first medium block where it is aligned, and secure builds keep room for
// a guard page at the end. A page in use finds its length again from its
// continuations (mi_segment_page_slices).
size_t _mi_segment_run_slices(const mi_segment_t* segment, size_t idx, size_t block_size, size_t blocks) {
  const size_t slice_size = mi_segment_page_size(segment);   // (16 KiB in a lean segment)
  const size_t run_start = idx * slice_size;
  size_t start = (idx == 0 ? segment->segment_info_size : run_start);   // (offsets in the segment)
  if (block_size <= MI_SMALL_OBJ_SIZE_MAX) {
    if (!_mi_segment_is_lean(segment)) return 1;
    // a lean page of small blocks: one slice, or two where one block does not
    // fit one (slice 0: its first block's address is a multiple of the block
    // size, as _mi_segment_page_start places it)
    if (idx == 0) start += (block_size - (((uintptr_t)segment + start) % block_size)) % block_size;
    blocks = 1;
  }
  else if (block_size <= MI_MEDIUM_OBJ_SIZE_MAX) {
    start = _mi_align_up(start, mi_slice_page_align(block_size));
  }
  return _mi_divide_up(start - run_start + mi_slice_page_area(block_size, blocks) + mi_segment_guard_size(), slice_size);
}

// What claiming the run of `n` free slices from `first` costs:
// MI_SLICE_FAULT_COST for each slice that faults in (not resident: purged,
// or never touched) and, where pages end in guards (secure builds), one for
// each guard system call it makes: a guard to lift inside it, one to install
// at its end. A slice that faults in outweighs every guard call a run can
// make: the most resident run wins, and among those the one with the fewest
// guard calls. Runs of several slices and one-slice pages take turns on the
// same slices, and a search by residency alone made a secure `threadchurn 2
// 200 2 20000` install and lift 37,800 guards, a system call each (9,500
// since). (A slice weighed as two guard calls cut them further, but a run
// then faults in fresh slices to save guard calls while resident ones wait
// for their purge.)

static size_t mi_segment_run_cost(const mi_segment_t* segment, size_t first, size_t n) {
  const uint64_t run = mi_bit_mask(n, first);
  size_t cost = MI_SLICE_FAULT_COST * (n - mi_popcount(segment->purge_mask & run));
  #if MI_SECURE_PAGE_GUARDS
  if (!segment->mem_is_pinned) {
    const uint64_t guards = mi_atomic_load_relaxed(&segment->guard_mask);
    const uint64_t last = (uint64_t)1 << (first + n - 1);
    cost += mi_popcount(guards & run & ~last) + ((guards & last) == 0 ? 1 : 0);
  }
  #endif
  return cost;
}

// The run of free slices of a segment of slices that fits `blocks` blocks of
// `block_size` (_mi_segment_run_slices; from slice 0 it takes more: the
// header) that costs least to claim (mi_segment_run_cost), the lowest of
// those; `*cost`: its cost.
bool _mi_segment_find_run_cost(const mi_segment_t* segment, size_t block_size, size_t blocks, size_t* first, size_t* cost) {
  mi_assert_internal(segment->page_kind == MI_PAGE_SLICES);
  const uint64_t free = segment->free_mask & ~segment->purging;   // (pages being purged outside the lock are nobody's to claim)
  const size_t n = _mi_segment_run_slices(segment, 1, block_size, blocks);
  if (n == 1 && _mi_segment_run_slices(segment, 0, block_size, blocks) == 1) {
    // one slice (small blocks): resident with its guard in place, resident,
    // guarded, any; the lowest
    if (free == 0) return false;
    const uint64_t pending = free & segment->purge_mask;
    #if MI_SECURE_PAGE_GUARDS
    const uint64_t guarded = (segment->mem_is_pinned ? free : free & mi_atomic_load_relaxed(&segment->guard_mask));
    #else
    const uint64_t guarded = free;
    #endif
    const uint64_t pick = ((pending & guarded) != 0 ? pending & guarded : (pending != 0 ? pending : (guarded != 0 ? guarded : free)));
    *first = mi_ctz(pick);
    *cost = mi_segment_run_cost(segment, *first, 1);
    return true;
  }
  uint64_t starts = free;   // bit i: slices i .. i+n-1 are free
  for (size_t k = 1; k < n && starts != 0; k++) starts &= (free >> k);
  if ((starts & 1) != 0) {
    const uint64_t run0 = mi_bit_mask(_mi_segment_run_slices(segment, 0, block_size, blocks), 0);
    if ((free & run0) != run0) starts &= ~(uint64_t)1;
  }
  if (starts == 0) return false;
  *first = mi_ctz(starts);
  *cost = mi_segment_run_cost(segment, *first, _mi_segment_run_slices(segment, *first, block_size, blocks));
  if (!MI_SECURE_PAGE_GUARDS && segment->purge_mask == 0) return true;   // (every run costs its length)
  for (uint64_t m = starts & (starts - 1); m != 0 && *cost > 0; m &= m - 1) {
    const size_t i = mi_ctz(m);
    const size_t c = mi_segment_run_cost(segment, i, _mi_segment_run_slices(segment, i, block_size, blocks));
    if (c < *cost) { *cost = c; *first = i; }
  }
  return true;
}

// The slices of a page: more than one only for a large page in use, whose
// continuations follow it (a page's first medium blocks may have a shorter
// run than the next ones: mi_segment_medium_blocks). The descriptor after the
// run belongs to a free slice or another page, which other threads change
// meanwhile: its flags byte is only ever written atomically, and it never
// reads as a continuation of this run.
static size_t mi_segment_page_slices(const mi_segment_t* segment, const mi_page_t* page) {
  if (segment->page_kind != MI_PAGE_SLICES || !page->segment_in_use) return 1;
  size_t n = 1;
  while (page->segment_idx + n < segment->capacity && mi_page_is_continuation(page + n)) n++;
  return n;
}

// ---------------------------------------------------------------------------
// Guard pages (secure builds, docs/secure.md): one OS page of no access after
// the header (counted in the header size), and one at the end of the last
// page (MI_SECURE_GUARDS) or of every page (MI_SECURE_PAGE_GUARDS). A page's block area excludes its
// guard, so commit, purge and decommit of a page never touch it.
// ---------------------------------------------------------------------------

static size_t mi_segment_guard_size(void) {
  return (MI_SECURE_GUARDS ? _mi_os_page_size() : 0);
}

// Does the page (or slice) `idx` end in a guard?
static bool mi_segment_page_guarded(const mi_segment_t* segment, size_t idx) {
  return (MI_SECURE_PAGE_GUARDS || (MI_SECURE_GUARDS && idx + 1 == segment->capacity));
}

// The block area of a page. Page 0 starts after the header; in small and
// medium segments its start is moved up to a multiple of the block size so
// that blocks of power-of-two sizes are naturally aligned (aligned malloc).
// A large page with `block_size` > 0 is the run of slices its block takes;
// with 0, the one slice (purges, commits, trims: what free slices are).
uint8_t* _mi_segment_page_start(const mi_segment_t* segment, const mi_page_t* page, size_t block_size, size_t* page_size, size_t* pre_size) {
  const size_t slice_size = mi_segment_page_size(segment);
  uint8_t* p = (uint8_t*)segment + page->segment_idx * slice_size;
  size_t psize = slice_size;
  size_t last = page->segment_idx;   // the page's last slice
  if (segment->page_kind == MI_PAGE_SLICES && block_size > 0) {
    const size_t n = mi_segment_page_slices(segment, page);
    psize = n * slice_size;
    last += n - 1;
  }
  if (pre_size != NULL) *pre_size = 0;
  if (mi_unlikely(segment->aligned_block != NULL)) {
    // big-alignment huge segment: the block area starts at the aligned block
    p = segment->aligned_block;
    psize = segment->segment_size - (size_t)(segment->aligned_block - (uint8_t*)segment);
  }
  else {
    if (page->segment_idx == 0) {
      p += segment->segment_info_size;
      psize -= segment->segment_info_size;
    }
    // the first block's alignment: a multiple of the block size in a page of
    // small blocks (slice 0 only: the others are), of its largest power of two
    // in a page of medium blocks
    size_t align = 0;
    if (block_size > 0 && segment->page_kind == MI_PAGE_SLICES) {
      if (block_size <= MI_SMALL_OBJ_SIZE_MAX) align = (page->segment_idx == 0 ? block_size : 0);
      else if (block_size <= MI_MEDIUM_OBJ_SIZE_MAX) align = mi_slice_page_align(block_size);
    }
    if (align > 0) {
      const size_t adjust = (align - ((uintptr_t)p % align)) % align;
      p += adjust;
      psize -= adjust;
      if (pre_size != NULL) *pre_size = adjust;
    }
  }
  if (MI_SECURE_GUARDS && mi_segment_page_guarded(segment, last)) psize -= mi_segment_guard_size();
  if (page_size != NULL) *page_size = psize;
  mi_assert_internal(_mi_ptr_segment(p) == segment || segment->aligned_block != NULL);
  return p;
}

// Install (on) or remove the guards of a segment; idempotent. With page guards the
// guards of small pages are installed when a page is first
// claimed (mi_segment_page_guard): a segment pays for the pages it uses. One
// call removes them all (the segment's memory is then plainly accessible,
// as the region and the segment cache expect it).
static void mi_segment_guards(mi_segment_t* segment, bool on) {
  #if MI_SECURE_GUARDS
  if (segment->guarded == on || segment->mem_is_pinned) return;
  const size_t guard = mi_segment_guard_size();
  if (on) {
    _mi_os_protect((uint8_t*)segment + segment->segment_info_size - guard, guard);
    for (size_t i = 0; i < segment->capacity; i++) {
      mi_page_t* page = &segment->pages[i];
      if (!mi_segment_page_guarded(segment, i)) continue;
      if (MI_SECURE_PAGE_GUARDS && segment->page_kind != MI_PAGE_HUGE && i + 1 < segment->capacity) continue;   // at claim
      size_t psize;
      uint8_t* start = _mi_segment_page_start(segment, page, 0, &psize, NULL);
      _mi_os_protect(start + psize, guard);
    }
  }
  else {
    _mi_os_unprotect(segment, segment->segment_size);
    mi_atomic_store_relaxed(&segment->guard_mask, 0);
  }
  segment->guarded = on;
  #else
  (void)segment; (void)on;
  #endif
}

// Page guards: the guard at the end of a small page, or of a run of `n`
// slices from `first` (a page of medium or large blocks), installed the first time a page
// ends there in this segment's life. A run also lifts the guards its slices
// ended in before (they are inside its block now).
void _mi_segment_run_guard(mi_segment_t* segment, size_t first, size_t n) {
  #if MI_SECURE_PAGE_GUARDS
  if (segment->page_kind == MI_PAGE_HUGE || segment->mem_is_pinned) return;
  const size_t guard = mi_segment_guard_size();
  for (size_t i = first; i + 1 < first + n; i++) {
    const uint64_t bit = (uint64_t)1 << i;
    if ((mi_atomic_load_relaxed(&segment->guard_mask) & bit) == 0) continue;
    size_t psize;
    uint8_t* start = _mi_segment_page_start(segment, &segment->pages[i], 0, &psize, NULL);
    _mi_os_unprotect(start + psize, guard);
    _mi_memzero(start + psize, guard);   // (it kept what an earlier block wrote there: the slices may count as zero)
    mi_atomic_and_acq_rel(&segment->guard_mask, ~bit);
  }
  const size_t last = first + n - 1;
  const uint64_t bit = (uint64_t)1 << last;
  if ((mi_atomic_load_relaxed(&segment->guard_mask) & bit) != 0) return;
  if (last + 1 < segment->capacity) {   // (the last one came with the segment)
    size_t psize;
    uint8_t* start = _mi_segment_page_start(segment, &segment->pages[last], 0, &psize, NULL);
    _mi_os_protect(start + psize, guard);
  }
  mi_atomic_or_acq_rel(&segment->guard_mask, bit);
  #else
  (void)segment; (void)first; (void)n;
  #endif
}

// A slice inside a run (not its last) whose memory was not committed: the
// place of its guard is inside the run's block area, and must be committed
// too unless a guard sits there (then the run lifts it). (A lazily committed
// segment, or a decommitting purge, left that OS page inaccessible: a run of
// slices then had a hole where a block's tail went.)
static bool mi_segment_guard_place_commit(mi_segment_t* segment, size_t idx) {
  #if MI_SECURE_PAGE_GUARDS
  if (segment->mem_is_pinned || (mi_atomic_load_relaxed(&segment->guard_mask) & ((uint64_t)1 << idx)) != 0) return true;
  size_t psize;
  uint8_t* start = _mi_segment_page_start(segment, &segment->pages[idx], 0, &psize, NULL);
  bool is_zero = false;
  return _mi_os_commit(start + psize, mi_segment_guard_size(), &is_zero);
  #else
  (void)segment; (void)idx;
  return true;
  #endif
}

// Bytes of header + page descriptors (+ guard), and the total segment size.
static size_t mi_segment_size(size_t capacity, size_t required, size_t* info_size) {
  const size_t minsize = offsetof(mi_segment_t, pages) + (capacity * sizeof(mi_page_t));
  const size_t guard = mi_segment_guard_size();
  const size_t isize = (guard > 0 ? _mi_align_up(minsize, guard) + guard : _mi_align_up(minsize, 16 * MI_MAX_ALIGN_SIZE));
  if (info_size != NULL) *info_size = isize;
  if (required == 0) return MI_SEGMENT_SIZE;
  // huge: secure builds put the end guard right after the block (OS pages)
  return (guard > 0 ? _mi_align_up(required + isize + guard, guard) : _mi_align_up(required + isize, MI_HUGE_SEGMENT_ROUND));
}

// ---------------------------------------------------------------------------
// Thread accounting
// ---------------------------------------------------------------------------

static void mi_segments_track_size(int64_t segment_size, mi_segments_tld_t* tld) {
  if (segment_size >= 0) tld->count++;
  else tld->count--;
  if (tld->count > tld->peak_count) tld->peak_count = tld->count;
  tld->current_size += (size_t)segment_size;
  if (tld->current_size > tld->peak_size) tld->peak_size = tld->current_size;
}

// ---------------------------------------------------------------------------
// The trim lock
//
// A trim (_mi_segments_trim, segment-walk.c) purges the free pages of segments that
// other threads own. The owner's lists are lock-free, but which pages of a
// segment are free, and whether a free page is committed and purged, change
// only when a page is claimed, cleared or purged: once per page, never on the
// malloc/free fast paths. Those operations take the segment's trim lock (one
// CAS from 0 to the thread id, and a store of 0 after), and a trim purges a
// segment's free pages only while it holds it. The trim writes no page
// descriptor: it notes the pages it purged in `trim_purged`, which the owner
// folds into their is_purged bits the next time it takes the lock, so the
// owner's unlocked reads of its own descriptors race with nothing. The lock
// is re-entrant for the thread that holds it: a signal handler that
// frees while its thread is inside such an operation goes on instead of
// waiting for itself (a trim holds locks under another id and with its
// signals blocked). Rejected: a request the owner honours at its next call
// (a blocked thread never makes one), and atomic page states (the fast paths
// would pay for them).
// ---------------------------------------------------------------------------

// The owner takes in the purges a trim made while it did not hold the lock.
static void mi_segment_trim_fold(mi_segment_t* segment) {
  for (uint64_t m = segment->trim_purged; m != 0; m &= m - 1) {
    mi_page_t* page = &segment->pages[mi_ctz(m)];
    mi_assert_internal(!page->segment_in_use && page->is_committed);
    page->is_purged = true;
  }
  segment->trim_purged = 0;
}

// Take the trim lock of a segment (waiting while a trim holds it); false if
// this thread held it already, and then the matching unlock does nothing.
bool _mi_segment_trim_lock(mi_segment_t* segment) {
  const uintptr_t self = _mi_thread_id();
  if (mi_atomic_load_relaxed(&segment->trim_lock) == self) return false;   // (only this thread stores its own id there)
  mi_segment_trim_lock_acquire(segment, self, 0);
  if (mi_unlikely(segment->trim_purged != 0)) mi_segment_trim_fold(segment);
  return true;
}

void _mi_segment_trim_unlock(mi_segment_t* segment, bool locked) {
  if (locked) mi_atomic_store_release(&segment->trim_lock, 0);
}

// (for assertions)
static inline bool mi_segment_is_locked(const mi_segment_t* segment) {
  return (mi_atomic_load_relaxed(&((mi_segment_t*)segment)->trim_lock) == _mi_thread_id());
}

// ---------------------------------------------------------------------------
// Page purge and its delay
// ---------------------------------------------------------------------------
//
// An unused page (or slice) of a segment is not purged at once: its bit
// is set in the segment's purge_mask with an expiry `reset_delay` ms ahead
// (kept in the unused page's descriptor), and the segment's time is noted in
// the due table (MI_DUE_SHARED; huge segments have no page purges). Claiming the page before then clears the bit: no system
// call. When a segment's earliest expiry has passed, every pending page of it
// that is due (or due within a quarter of the delay) is purged, one system
// call per run of adjacent pages, so a segment whose pages emptied together
// costs one madvise instead of one per page. A thread that ends purges
// nothing itself: the pages it gave back wait for their delay like any
// others, for the threads that follow.

static bool mi_page_is_purgeable(const mi_segment_t* segment, const mi_page_t* page) {
  return (!segment->mem_is_pinned && page->is_committed && !page->is_purged);
}

// The memory of `n` adjacent pages from `first`: from the first one's block
// area to the end of the last one's (not its guard; guards inside the run stay
// no-access under a purge or a decommit of the range). A slice whose guard
// place holds no guard (lifted when a run took the slice in) has that OS page
// in the range too: a block may have written it, and the slice counts as
// zero once purged.
static size_t mi_segment_pages_range(const mi_segment_t* segment, size_t first, size_t n, uint8_t** start) {
  *start = _mi_segment_page_start(segment, &segment->pages[first], 0, NULL, NULL);
  size_t last_size;
  uint8_t* last = _mi_segment_page_start(segment, &segment->pages[first + n - 1], 0, &last_size, NULL);
  size_t size = (size_t)(last + last_size - *start);
  #if MI_SECURE_PAGE_GUARDS
  const size_t lastidx = first + n - 1;
  if (segment->page_kind == MI_PAGE_SLICES && lastidx + 1 < segment->capacity &&
      (mi_atomic_load_relaxed(&segment->guard_mask) & ((uint64_t)1 << lastidx)) == 0) {
    size += mi_segment_guard_size();
  }
  #endif
  return size;
}

// The pages of `mask` whose memory a purge gives back (committed, not
// purged; under the trim lock, which folded a trim's purges in).
static uint64_t mi_segment_purgeable(const mi_segment_t* segment, uint64_t mask) {
  for (uint64_t m = mask; m != 0; m &= m - 1) {
    if (!mi_page_is_purgeable(segment, &segment->pages[mi_ctz(m)])) mask &= ~((uint64_t)1 << mi_ctz(m));
  }
  return mask;
}

// Purge (or decommit) the free pages of `mask`: one system call per run of
// adjacent pages. Writes no descriptor: nobody else may claim or purge these
// pages meanwhile (the caller holds the trim lock, or they are the segment's
// `purging` ones, or a trim's). Returns the pages whose call succeeded;
// `*bytes` (if not NULL): the memory they gave back.
uint64_t _mi_segment_purge_run(const mi_segment_t* segment, uint64_t mask, bool decommit, size_t* bytes) {
  mi_assert_internal(segment->page_kind != MI_PAGE_HUGE && segment->aligned_block == NULL);
  uint64_t done = 0;
  if (bytes != NULL) *bytes = 0;
  while (mask != 0) {
    size_t first;
    const size_t n = mi_bit_run(mask, &first);
    const uint64_t run = mi_bit_mask(n, first);
    uint8_t* start;
    const size_t size = mi_segment_pages_range(segment, first, n, &start);
    bool ok;
    if (decommit) {
      ok = _mi_os_decommit(start, size);
      if (ok) mi_stat_increase(NULL, reset, _mi_os_inward_size(start, size));
    }
    else {
      ok = _mi_os_purge(start, size);   // (counts itself)
    }
    if (ok) {
      done |= run;
      if (bytes != NULL) *bytes += _mi_os_inward_size(start, size);
    }
    mask &= ~run;
  }
  return done;
}

// The purged pages of `done` say so (under the trim lock).
static void mi_segment_purge_mark(mi_segment_t* segment, uint64_t done, bool decommit) {
  mi_assert_internal(mi_segment_is_locked(segment));
  for (uint64_t m = done; m != 0; m &= m - 1) {
    mi_page_t* page = &segment->pages[mi_ctz(m)];
    mi_assert_internal(!page->segment_in_use && mi_page_is_purgeable(segment, page));
    page->is_purged = true;
    if (decommit) page->is_committed = false;
  }
}

// Purge the unused pages of `mask` now (those that hold memory). Under the
// trim lock.
static void mi_segment_purge_pages(mi_segment_t* segment, uint64_t mask) {
  mi_assert_internal(mi_segment_is_locked(segment));
  const bool decommit = mi_option_is_enabled(mi_option_reset_decommits);
  mi_segment_purge_mark(segment, _mi_segment_purge_run(segment, mi_segment_purgeable(segment, mask), decommit, NULL), decommit);
}

// Take the pending pages that are due at `now` (all if forced) out of the
// segment's purge_mask, and recompute its expiry from those that wait on.
static uint64_t mi_segment_purge_take_due(mi_segment_t* segment, int64_t now, bool force) {
  if (segment->purge_mask == 0) return 0;
  if (!force && now < segment->purge_expire) return 0;
  // pages due within a quarter of the delay go along: fewer, longer runs
  const int64_t horizon = now + _mi_purge_delay() / 4;
  uint64_t due = 0;
  int64_t next = 0;
  for (uint64_t m = segment->purge_mask; m != 0; m &= m - 1) {
    mi_page_t* page = &segment->pages[mi_ctz(m)];
    if (force || page->purge_expire <= horizon) {
      due |= mi_segment_page_bit(page);
      page->purge_expire = 0;
    }
    else if (next == 0 || page->purge_expire < next) {
      next = page->purge_expire;
    }
  }
  segment->purge_mask &= ~due;
  segment->purge_expire = next;
  return due;
}

// A purge in three steps, so that its system calls run outside the lock the
// segment's page claims take (the shared lock; segment-shared.c): begin
// (under that lock) takes the due pages that hold memory into `purging`,
// where no claim (_mi_segment_find_run_cost) and no trim touches them, and
// the segment is not freed (segment-shared.c defers it); the calls run with
// no lock (_mi_segment_purge_run); end (under the lock again) marks what
// they purged and lets the pages go. One purge at a time per segment.
uint64_t _mi_segment_purge_begin(mi_segment_t* segment, int64_t now, bool force) {
  mi_assert_internal(segment->purging == 0);
  const uint64_t due = mi_segment_purge_take_due(segment, now, force);
  if (due == 0) return 0;
  const bool locked = _mi_segment_trim_lock(segment);
  segment->purging = mi_segment_purgeable(segment, due);
  _mi_segment_trim_unlock(segment, locked);
  return segment->purging;
}

void _mi_segment_purge_end(mi_segment_t* segment, uint64_t done, bool decommit) {
  const bool locked = _mi_segment_trim_lock(segment);
  mi_segment_purge_mark(segment, done & segment->purging, decommit);
  segment->purging = 0;
  _mi_segment_trim_unlock(segment, locked);
}

// Unused pages (or the slices of a large page): purge them after the delay,
// unless they are claimed before. `now`: the clock, read by the caller before
// it took the shared lock (0: read it here; a clock read was half of the time
// the lock is held to give a small page back).
static void mi_segment_purge_add(mi_segment_t* segment, uint64_t mask, int64_t now) {
  if (!mi_option_is_enabled(mi_option_page_reset)) return;
  if (segment->page_kind == MI_PAGE_HUGE) return;
  for (uint64_t m = mask; m != 0; m &= m - 1) {
    const mi_page_t* page = &segment->pages[mi_ctz(m)];
    mi_assert_internal(!page->segment_in_use && page->used == 0 && page->purge_expire == 0);
    if (!mi_page_is_purgeable(segment, page)) mask &= ~mi_segment_page_bit(page);
  }
  if (mask == 0) return;
  const int64_t delay = _mi_purge_delay();
  if (delay == 0) {
    mi_segment_purge_pages(segment, mask);
    return;
  }
  const int64_t expire = (now != 0 ? now : _mi_prim_clock_now()) + delay;
  for (uint64_t m = mask; m != 0; m &= m - 1) segment->pages[mi_ctz(m)].purge_expire = expire;
  segment->purge_mask |= mask;
  if (segment->purge_expire == 0 || expire < segment->purge_expire) segment->purge_expire = expire;   // (earlier: the delay was shortened meanwhile)
}

// Pending pages (or slices) are claimed again: no purge.
static void mi_segment_purge_cancel(mi_segment_t* segment, uint64_t mask) {
  mask &= segment->purge_mask;
  if (mask == 0) return;
  segment->purge_mask &= ~mask;
  for (uint64_t m = mask; m != 0; m &= m - 1) segment->pages[mi_ctz(m)].purge_expire = 0;
  if (segment->purge_mask == 0) segment->purge_expire = 0;
  // else purge_expire may be early: mi_segment_purge_take_due recomputes it
}

// Drop all pending purges of a segment (it is freed, and its memory goes back
// to the region, which purges it after its own delay).
void _mi_segment_purge_clear(mi_segment_t* segment) {
  for (uint64_t m = segment->purge_mask; m != 0; m &= m - 1) segment->pages[mi_ctz(m)].purge_expire = 0;
  segment->purge_mask = 0;
  segment->purge_expire = 0;
}

// The statistics of a purged page that is used again (or goes back with its segment).
void _mi_segment_page_unpurge_stat(mi_segment_t* segment, mi_page_t* page) {
  size_t psize;
  uint8_t* start = _mi_segment_page_start(segment, page, 0, &psize, NULL);
  mi_stat_decrease(NULL, reset, _mi_os_inward_size(start, psize));
}

// Make a claimed page usable again after a purge; false if commit failed.
static bool mi_page_unpurge(mi_segment_t* segment, mi_page_t* page) {
  if (!page->is_committed) {
    size_t psize;
    uint8_t* start = _mi_segment_page_start(segment, page, 0, &psize, NULL);
    bool is_zero = false;
    if (!_mi_os_commit(start, psize, &is_zero)) return false;
    page->is_committed = true;
  }
  if (page->is_purged) {
    _mi_segment_page_unpurge_stat(segment, page);
    page->is_purged = false;
    // a purged page reads as zeros if its whole area was purged (not page 0,
    // whose area shares an OS page with the header)
    page->is_zero_init = (page->segment_idx > 0 || segment->aligned_block != NULL);
  }
  return true;
}

// ---------------------------------------------------------------------------
// Guards left in a region block (secure builds): a segment freed whole into
// its region block leaves its guard pages in place and says so in the
// block's word (region.c keeps one word per block for its next user): the
// next segment of slices there keeps them (no mprotect; thread churn built
// and freed segments, and their guards, all the time), a huge one removes
// them in one call. The word: bit 63, with bits 0..62 for the slices 0..62
// whose end guard is installed (slice 63's comes with the segment); 0: no
// guards. (Until small pages became slices, bit 63 meant a segment of small
// pages and bit 61 one of slices, which could not tell slices 61 and 62.)
// ---------------------------------------------------------------------------

#define MI_GUARD_WORD_SLICES  ((uint64_t)1 << 63)

static uint64_t mi_segment_guard_word(const mi_segment_t* segment) {
  if (!segment->guarded || segment->page_kind != MI_PAGE_SLICES) return 0;   // (huge segments span other sizes: they leave none)
  return MI_GUARD_WORD_SLICES | (mi_atomic_load_relaxed(&segment->guard_mask) & (MI_GUARD_WORD_SLICES - 1));
}

// Do the guards a word describes serve a segment of `kind`? `*mask`: its
// slices whose guard is installed (0 when they do not serve).
static bool mi_segment_guard_word_serves(uint64_t word, mi_page_kind_t kind, uint64_t* mask) {
  *mask = 0;
  if (kind != MI_PAGE_SLICES || (word & MI_GUARD_WORD_SLICES) == 0) return false;
  *mask = word & (MI_GUARD_WORD_SLICES - 1);
  return true;
}

// ---------------------------------------------------------------------------
// Thread exit: the exit budget
// ---------------------------------------------------------------------------

// A thread that ends leaves the segments it empties in the regions for the
// threads that follow (they wait for their delay like any freed segment, and
// the next segment built takes the resident ones first), as long as the
// regions hold less than MI_EXIT_RESIDENT_MAX of freed resident memory;
// beyond it they are purged at once (docs/design.md, "Thread exit").
#define MI_EXIT_RESIDENT_MAX  (8 * MI_SEGMENT_SIZE)

bool _mi_segment_exit_over_budget(const mi_segments_tld_t* tld) {
  return (tld->ending && _mi_region_resident_free_above(MI_EXIT_RESIDENT_MAX));
}

// ---------------------------------------------------------------------------
// Segment allocation: the memory, then the header
// ---------------------------------------------------------------------------

// Memory for a segment, and what is known of it.
typedef struct mi_segment_mem_s {
  uint8_t*   start;
  size_t     size;          // bytes obtained (at least the segment size)
  mi_memid_t memid;
  bool       committed;
  bool       pinned;        // fixed large or huge OS pages: never purged or protected
  bool       zero;
  bool       guarded;       // secure builds: the guards of a segment of this kind are in place ...
  uint64_t   guard_mask;    // ... with those of these pages
} mi_segment_mem_t;

// Step 1: memory for a segment of `segment_size` bytes: a cached shared
// segment, a mapping straight from the OS for a big alignment (`os_offset`:
// where in it the alignment falls), or a region block. Guards an earlier
// segment left there are kept when they serve this page kind, else removed.
// At least the header (`info_size`) is committed.
static bool mi_segment_mem_alloc(size_t segment_size, size_t info_size, mi_page_kind_t page_kind, bool commit, bool allow_pinned, bool shared,
                                 size_t page_alignment, size_t os_offset, mi_segment_mem_t* mem, mi_segments_tld_t* tld) {
  memset(mem, 0, sizeof(*mem));
  uint64_t word = 0;
  mi_segment_t* cached;
  if (shared && segment_size == MI_SEGMENT_SIZE && (cached = _mi_shared_cache_pop()) != NULL) {
    // a cached shared segment (under the shared lock): committed, not known zero
    word = mi_segment_guard_word(cached);
    mem->start = (uint8_t*)cached;
    mem->memid = cached->memid;
    mem->size = cached->mem_size;
    mem->committed = true;
    mi_stat_decrease(NULL, segments, 1);   // counted again in mi_segment_init
    _mi_segment_map_freed_at(cached);   // (waits for a trim that holds it: then it is ours alone)
    for (uint64_t m = cached->trim_purged; m != 0; m &= m - 1) _mi_segment_page_unpurge_stat(cached, &cached->pages[mi_ctz(m)]);
  }
  else if (page_alignment > MI_ALIGNMENT_MAX_IN_SEGMENT) {
    mem->size = segment_size;
    mem->start = (uint8_t*)_mi_os_alloc_aligned_at(mem->size, page_alignment, os_offset, true, false, &mem->pinned, &mem->zero);
    mem->committed = true;
  }
  else {
    mem->size = _mi_align_up(segment_size, MI_SEGMENT_SIZE);
    mem->start = (uint8_t*)_mi_region_alloc(mem->size, commit, allow_pinned, &mem->committed, &mem->pinned, &mem->zero, &word, &mem->memid, tld);
  }
  if (mem->start == NULL) return false;
  mi_assert_internal(((uintptr_t)mem->start & MI_SEGMENT_MASK) == 0);
  if (word != 0) {
    if (mi_segment_guard_word_serves(word, page_kind, &mem->guard_mask)) mem->guarded = true;
    else _mi_os_unprotect(mem->start, mem->size);
  }
  if (!mem->committed) {
    // commit the header at least; pages are committed when claimed
    bool commit_zero = false;
    if (!_mi_os_commit(mem->start, info_size, &commit_zero)) {
      if (mem->guarded) _mi_os_unprotect(mem->start, mem->size);
      _mi_region_free(mem->start, mem->size, mem->memid, false, false, 0);
      return false;
    }
  }
  return true;
}

// Step 2: the header (everything zero but what is set here; the guard page
// after it is not part of it), the segment map, the owner, the guards.
static mi_segment_t* mi_segment_init(const mi_segment_mem_t* mem, mi_page_kind_t page_kind, size_t page_shift, size_t capacity,
                                     size_t segment_size, size_t info_size, uint8_t* aligned_block, bool shared, mi_segments_tld_t* tld) {
  mi_segment_t* segment = (mi_segment_t*)mem->start;
  if (!mem->zero) memset((void*)segment, 0, info_size - mi_segment_guard_size());
  mi_atomic_store_relaxed(&segment->guard_mask, mem->guard_mask);
  segment->memid = mem->memid;
  segment->mem_size = mem->size;
  segment->mem_is_pinned = mem->pinned;
  segment->mem_is_committed = mem->committed;
  for (size_t i = 0; i < capacity; i++) {
    mi_page_t* page = &segment->pages[i];
    page->segment_idx = (uint8_t)i;
    page->is_purged = false;
    page->is_committed = mem->committed;
    page->is_zero_init = mem->zero;
  }
  segment->page_kind = (uint8_t)page_kind;
  segment->capacity = (uint32_t)capacity;
  segment->page_shift = (uint8_t)page_shift;
  segment->free_mask = mi_bit_mask(capacity, 0);   // (trim_lock and trim_purged are 0)
  segment->segment_size = segment_size;
  segment->segment_info_size = info_size;
  segment->aligned_block = aligned_block;
  segment->cookie = _mi_ptr_cookie(segment);
  if (!_mi_segment_map_allocated_at(segment)) {
    // above the address range the map covers (only an OS that hands out more
    // than MI_ADDRESS_BITS without being asked would): free could not find it
    _mi_error_message(ENOMEM, "segment mapped above the supported address range: %p\n", (void*)segment);
    if (mem->guarded) _mi_os_unprotect(segment, mem->size);   // (the region takes plain memory)
    _mi_region_free(segment, mem->size, mem->memid, mem->committed, false, 0);
    return NULL;
  }
  if (page_kind != MI_PAGE_HUGE && segment_size < mem->size && mem->committed && !mem->zero && !mem->pinned) {
    // a lean segment on memory an earlier segment left resident: the rest of
    // its unit is nobody's page, and would stay resident while it lives
    uint8_t* const rest = mem->start + segment_size;
    if (_mi_os_purge(rest, mem->size - segment_size)) segment->huge_purged = _mi_os_inward_size(rest, mem->size - segment_size);
  }
  segment->shared = shared;
  mi_atomic_store_release(&segment->thread_id, (shared ? MI_THREAD_ID_SHARED : _mi_thread_id()));
  if (!shared) mi_segments_track_size((int64_t)segment_size, tld);
  mi_stat_increase(&_mi_segments_tld_stats(tld), segments, 1);
  if (mem->guarded) segment->guarded = true;
  else mi_segment_guards(segment, true);
  if (page_kind != MI_PAGE_HUGE) {
    // on memory an earlier segment left resident: its unused pages go back
    // after the delay like any other free page, unless claimed before
    if (!mem->zero) mi_segment_purge_add(segment, segment->free_mask, 0);
    if (shared) _mi_due_note(MI_DUE_SHARED, segment->purge_expire);
  }
  return segment;
}

// Allocate a segment: `required` > 0 for a huge segment, `page_alignment` >
// MI_ALIGNMENT_MAX_IN_SEGMENT for a big-alignment one; `shared`, a shared
// segment of slices, which commits page by page when `commit_delayed` (the
// process's first ones of each kind: option eager_commit_delay).
mi_segment_t* _mi_segment_alloc(size_t required, mi_page_kind_t page_kind, size_t page_shift, size_t page_alignment,
                                size_t align_offset, bool shared, bool commit_delayed, mi_segments_tld_t* tld) {
  mi_assert_internal((page_kind == MI_PAGE_HUGE) == (required > 0));
  mi_assert_internal(page_kind != MI_PAGE_HUGE || page_shift == MI_SEGMENT_SHIFT);
  mi_assert_internal(page_kind == MI_PAGE_HUGE || page_shift == MI_SLICE_SHIFT || (MI_LEAN_PAGES && page_shift == MI_LEAN_PAGE_SHIFT));
  const size_t capacity = (page_kind == MI_PAGE_HUGE ? 1 : MI_SLICES_PER_SEGMENT);
  size_t info_size;
  size_t segment_size = mi_segment_size(capacity, required, &info_size);
  if (page_kind != MI_PAGE_HUGE) segment_size = capacity << page_shift;   // (a lean segment: 1 MiB of its 4 MiB unit)
  // big alignment: the pointer handed out lies `ptr_ofs` into the segment,
  // (segment + ptr_ofs + align_offset) % page_alignment == 0, and the block
  // starts at it rounded down to 16 bytes (see _mi_segment_big_aligned_ofs)
  size_t block_ofs = 0;
  size_t os_offset = 0;
  if (page_alignment > MI_ALIGNMENT_MAX_IN_SEGMENT) {
    const size_t ptr_ofs = _mi_segment_big_aligned_ofs(align_offset);
    mi_assert_internal(ptr_ofs != 0);   // (alloc-aligned.c refuses those offsets first)
    if (ptr_ofs == 0) return NULL;
    block_ofs = _mi_align_down(ptr_ofs, MI_MAX_ALIGN_SIZE);
    mi_assert_internal(block_ofs >= info_size);
    const size_t guard = mi_segment_guard_size();   // secure builds: the end guard right after the block
    segment_size = (guard > 0 ? _mi_align_up(block_ofs + required + guard, guard) : _mi_align_up(block_ofs + required, MI_HUGE_SEGMENT_ROUND));
    os_offset = (ptr_ofs + align_offset) % page_alignment;   // a multiple of the segment size (modulo 2^64: any offset)
  }
  mi_assert_internal(shared == (page_kind != MI_PAGE_HUGE));   // (huge segments are the only ones a thread owns)
  const bool eager_delayed = (shared && commit_delayed);
  const bool eager = !eager_delayed && (mi_option_get(mi_option_eager_commit) != 0);
  const bool commit = eager || (page_kind == MI_PAGE_HUGE);
  const bool allow_pinned = !MI_SECURE_GUARDS && !eager_delayed && page_shift != MI_LEAN_PAGE_SHIFT;   // pinned large/huge OS pages (secure: guards need mprotect; a lean segment would pin a whole unit for 1 MiB)
  mi_segment_mem_t mem;
  if (!mi_segment_mem_alloc(segment_size, info_size, page_kind, commit, allow_pinned, shared, page_alignment, os_offset, &mem, tld)) return NULL;
  return mi_segment_init(&mem, page_kind, page_shift, capacity, segment_size, info_size,
                         (block_ofs != 0 ? mem.start + block_ofs : NULL), shared, tld);
}

// Give a segment's memory back. The segment is no longer counted by any thread.
void _mi_segment_os_free(mi_segment_t* segment, bool purge_now, mi_stats_t* stats) {
  if (segment->page_kind == MI_PAGE_HUGE) _mi_segment_huge_pending_take(segment);
  _mi_segment_map_freed_at(segment);   // (waits for a trim that holds it: then it is ours alone)
  mi_segment_trim_fold(segment);
  mi_stat_decrease(stats, segments, 1);
  if (segment->page_kind == MI_PAGE_HUGE) {
    const size_t bsize = segment->segment_size - segment->segment_info_size;
    if (bsize <= MI_HUGE_OBJ_SIZE_MAX) mi_stat_decrease(stats, huge, bsize);
    else mi_stat_decrease(stats, giant, bsize);
  }
  // purged pages go back as plain region memory (the region purges it later);
  // a segment that committed page by page is made whole, so its memory goes
  // back fully committed and the next user commits nothing
  if (segment->huge_purged != 0) {   // counted (statistics row `reset`) by the thread that purged it
    mi_stat_decrease(NULL, reset, segment->huge_purged);
    segment->huge_purged = 0;
  }
  bool whole = segment->mem_is_committed;
  for (size_t i = 0; i < segment->capacity; i++) {
    mi_page_t* page = &segment->pages[i];
    if (page->is_purged) { _mi_segment_page_unpurge_stat(segment, page); page->is_purged = false; }
    if (!page->is_committed) whole = false;
  }
  if (!whole) {
    size_t committed = segment->segment_info_size;
    for (size_t i = 0; i < segment->capacity; i++) {
      mi_page_t* page = &segment->pages[i];
      size_t psize;
      uint8_t* start = _mi_segment_page_start(segment, page, 0, &psize, NULL);
      if (page->is_committed) committed += _mi_os_inward_size(start, psize);
    }
    bool is_zero;
    mi_segment_guards(segment, false);   // (the commit below would lift them anyway)
    if (_mi_os_commit(segment, segment->mem_size, &is_zero)) {   // (a lean segment: its whole unit)
      mi_stat_decrease(NULL, committed, committed);   // those bytes were counted already
      whole = true;
    }
  }
  // the guards (secure builds): a single region block that goes back whole
  // keeps them for the next segment of this kind there (its word says so);
  // memory mapped straight from the OS is unmapped with them; anything else
  // is plain memory again for the region's next user
  uint64_t word = 0;
  if (segment->guarded) {
    if (whole && !segment->mem_is_pinned && segment->memid.region_idx != 0 && segment->mem_size == MI_SEGMENT_SIZE) word = mi_segment_guard_word(segment);
    if (word == 0 && segment->memid.region_idx != 0) mi_segment_guards(segment, false);
  }
  if (segment->page_kind == MI_PAGE_HUGE && _mi_segment_huge_release_now(segment)) purge_now = true;
  mi_atomic_store_release(&segment->thread_id, 0);
  _mi_region_free(segment, segment->mem_size, segment->memid, whole,
                  purge_now || mi_option_get(mi_option_segment_reset) != 0, word);
}

static void mi_segment_free(mi_segment_t* segment, bool force, mi_segments_tld_t* tld) {
  mi_assert_internal(segment->used == 0);
  if (segment->page_kind == MI_PAGE_HUGE) _mi_segment_huge_fresh_free(segment);
  // the unused pages' pending purges are dropped: the region purges the whole
  // segment after its own delay (or now, when forced)
  _mi_segment_purge_clear(segment);
  mi_segments_track_size(-((int64_t)segment->segment_size), tld);
  if (!force && _mi_segment_exit_over_budget(tld)) force = true;
  _mi_segment_os_free(segment, force, &_mi_segments_tld_stats(tld));
  _mi_region_try_purge();
}

// ---------------------------------------------------------------------------
// Claiming and releasing pages
// ---------------------------------------------------------------------------

// Claim a free page, or for a large page the run of `n` free slices from
// `page` (its first; the others become its continuations).
bool _mi_segment_page_claim(mi_segment_t* segment, mi_page_t* page, size_t n, mi_segments_tld_t* tld) {
  mi_assert_internal(_mi_page_segment(page) == segment);
  const size_t first = page->segment_idx;
  const uint64_t run = mi_bit_mask(n, first);
  mi_assert_internal((segment->free_mask & run) == run);
  mi_assert_internal(n == 1 || segment->page_kind == MI_PAGE_SLICES);
  mi_segment_purge_cancel(segment, run);   // claimed before their purge: no system call
  const bool locked = _mi_segment_trim_lock(segment);
  bool zero = true;
  for (size_t i = first; i < first + n; i++) {
    mi_page_t* slice = &segment->pages[i];
    const bool was_committed = slice->is_committed;
    if (!mi_page_unpurge(segment, slice) || (!was_committed && i + 1 < first + n && !mi_segment_guard_place_commit(segment, i))) {
      mi_segment_purge_add(segment, run, 0);   // (those it made resident again)
      _mi_segment_trim_unlock(segment, locked);
      return false;
    }
    zero = zero && slice->is_zero_init;
  }
  if (!segment->shared) _mi_segment_run_guard(segment, first, n);   // (a shared segment's run: by the claimer, outside the shared lock)
  for (size_t i = first + 1; i < first + n; i++) {
    mi_page_t* slice = &segment->pages[i];
    slice->segment_in_use = true;
    slice->capacity = (uint16_t)(i - first);
    mi_atomic_store_relaxed(&slice->xflags, (uint8_t)MI_PAGE_CONTINUATION);
  }
  page->is_zero_init = zero;
  page->used = 0;
  page->segment_in_use = true;
  segment->free_mask &= ~run;
  _mi_segment_trim_unlock(segment, locked);
  segment->used++;
  mi_stat_increase(&_mi_segments_tld_stats(tld), pages, 1);
  mi_assert_internal(segment->used <= segment->capacity);
  return true;
}

// The statistics of a page's blocks go (the page is emptied).
void _mi_segment_page_uncount(mi_segment_t* segment, mi_page_t* page, mi_stats_t* stats) {
  if (page->capacity > 0) {
    size_t psize;
    _mi_page_start(segment, page, &psize);
    const size_t bsize = (page->xblock_size < MI_HUGE_BLOCK_SIZE ? page->xblock_size : psize);
    const int64_t amount = (int64_t)page->capacity * (int64_t)bsize;
    if (stats != NULL) mi_stat_touched_update(stats, -amount);
    else mi_stat_decrease(NULL, touched, amount);
  }
}

// A fresh descriptor: zero but the segment-level fields before `capacity`.
// The flags byte is stored on its own, atomically: the owner of the run just
// below reads it, outside the shared lock, to find where its run ends
// (mi_segment_page_slices; it reads "not a continuation" whatever the
// descriptor's state, but a plain write would race with that read).
void _mi_segment_page_reset(mi_page_t* page) {
  page->is_zero_init = false;
  page->retire_counted = false;
  const size_t ofs = offsetof(mi_page_t, capacity);
  const size_t flags_ofs = offsetof(mi_page_t, xflags);
  memset((uint8_t*)page + ofs, 0, flags_ofs - ofs);
  mi_atomic_store_relaxed(&page->xflags, (uint8_t)0);
  memset((uint8_t*)page + flags_ofs + sizeof(page->xflags), 0, sizeof(*page) - flags_ofs - sizeof(page->xflags));
}

// Clear a page that is no longer used and queue it for a delayed purge
// (`now`: the clock, or 0: mi_segment_purge_add).
void _mi_segment_page_clear(mi_segment_t* segment, mi_page_t* page, mi_segments_tld_t* tld, int64_t now) {
  mi_assert_internal(page->segment_in_use);
  mi_assert_internal(mi_page_all_free(page));
  mi_stats_t* stats = (tld != NULL ? &_mi_segments_tld_stats(tld) : NULL);   // NULL: abandoned segment
  mi_stat_decrease(stats, pages, 1);
  _mi_segment_page_uncount(segment, page, stats);
  const size_t first = page->segment_idx;
  const size_t n = mi_segment_page_slices(segment, page);   // (a large page: its continuations go too)
  const uint64_t run = mi_bit_mask(n, first);
  const bool locked = _mi_segment_trim_lock(segment);
  for (size_t i = first; i < first + n; i++) {
    mi_page_t* slice = &segment->pages[i];
    _mi_segment_page_reset(slice);
    slice->segment_in_use = false;
  }
  segment->used--;
  segment->free_mask |= run;
  mi_segment_purge_add(segment, run, now);
  _mi_segment_trim_unlock(segment, locked);
}

void _mi_segment_page_free(mi_page_t* page, bool force, mi_segments_tld_t* tld) {
  mi_segment_t* segment = _mi_page_segment(page);
  if (segment->shared) {
    _mi_shared_page_free(page, force, tld);
    return;
  }
  // a huge page: its segment goes with it
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE);
  _mi_segment_page_clear(segment, page, tld, 0);
  mi_segment_free(segment, force, tld);
}

// ---------------------------------------------------------------------------
// Abandoned pages, and remote frees
// ---------------------------------------------------------------------------

// A page leaves its heap for good (its thread ends, or deletes its backing
// heap; _mi_page_abandon took it out of its queue and made its remote frees
// NEVER_DELAYED): from here on it has no heap. A page of a shared segment
// stays with its segment: one of small or medium blocks waits for an
// adopter, a large page for whoever frees its block
// (which gives it back). A huge segment gets owner id 0, and whoever frees
// the block claims it and frees it (_mi_segment_huge_page_free). Huge
// segments are the only segments a thread owns.
void _mi_segment_page_abandon(mi_page_t* page, mi_segments_tld_t* tld) {
  mi_segment_t* segment = _mi_page_segment(page);
  mi_stat_increase(&_mi_segments_tld_stats(tld), pages_abandoned, 1);
  if (segment->shared) {
    _mi_shared_page_abandon(page, tld);
    return;
  }
  mi_page_set_heap(page, NULL);
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE && segment->used == 1);
  segment->abandoned++;
  mi_segments_track_size(-((int64_t)segment->segment_size), tld);
  mi_stat_increase(&_mi_segments_tld_stats(tld), segments_abandoned, 1);
  mi_atomic_store_release(&segment->thread_id, 0);
}

// Take ownership of an abandoned huge segment (false: another thread has it).
bool _mi_segment_claim(mi_segment_t* segment) {
  uintptr_t expected = 0;
  return mi_atomic_cas_strong_acq_rel(&segment->thread_id, &expected, _mi_thread_id());
}

// A thread frees the block of a huge segment whose owner is abandoning it
// (MI_NEVER_DELAYED_FREE: the owner thread ends, or deletes its backing
// heap). A block pushed on the page's thread_free now could land after the
// owner's last look at the page, and then nobody would ever collect it. So
// the freeing thread, which still holds its block (the segment cannot go
// away), waits until the owner lets go of the segment (as soon as its page
// is abandoned) and then frees it as an abandoned one. Returns the owner id now.
static uintptr_t mi_segment_await_abandon(const mi_segment_t* segment, uintptr_t owner) {
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE && owner != 0 && owner != MI_THREAD_ID_VANISHED);
  uintptr_t now;
  while ((now = mi_atomic_load_acquire(&((mi_segment_t*)segment)->thread_id)) == owner) mi_atomic_yield();
  return now;
}

// Free a block of a page another heap holds, or none (free.c's generic path:
// the segment's owner id is not the freeing thread's): a page of a shared
// segment (segment-shared.c), or the block of a huge segment, which the
// owner gives back at its next slow path (its memory goes after the purge
// delay, whatever the owner does: segment-huge.c), or which the freeing
// thread frees at once when its owner ended.
void _mi_segment_free_remote(mi_segment_t* segment, mi_page_t* page, mi_block_t* block, uintptr_t owner) {
  if (owner == MI_THREAD_ID_SHARED) {
    _mi_shared_free_remote(page, block);
    return;
  }
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE);
  if (owner != 0) _mi_segment_huge_page_purge(segment, page, block);
  for (;;) {
    if (owner == 0) {
      _mi_segment_huge_page_free(segment, page, block);
      return;
    }
    if (_mi_free_block_mt(page, block, owner != MI_THREAD_ID_VANISHED)) return;
    owner = mi_segment_await_abandon(segment, owner);
  }
}

// ---------------------------------------------------------------------------
// Page allocation
// ---------------------------------------------------------------------------

static mi_page_t* mi_segment_huge_page_alloc(size_t size, size_t page_alignment, size_t align_offset, mi_segments_tld_t* tld) {
  mi_segment_t* segment = _mi_segment_alloc(size, MI_PAGE_HUGE, MI_SEGMENT_SHIFT, page_alignment, align_offset, false, false, tld);
  if (segment == NULL) return NULL;
  mi_page_t* page = &segment->pages[0];
  if (!_mi_segment_page_claim(segment, page, 1, tld)) {
    mi_segment_free(segment, false, tld);
    return NULL;
  }
  _mi_segment_huge_fresh_alloc(segment, page, size);
  return page;
}

mi_page_t* _mi_segment_page_alloc(mi_heap_t* heap, size_t block_size, size_t page_alignment, size_t align_offset, mi_segments_tld_t* tld) {
  mi_page_t* page;
  if (mi_unlikely(page_alignment > MI_ALIGNMENT_MAX_IN_SEGMENT)) {
    page = mi_segment_huge_page_alloc(block_size, page_alignment, align_offset, tld);
  }
  else if (block_size <= MI_LARGE_OBJ_SIZE_MAX) {
    page = _mi_shared_page_alloc(heap, block_size, tld);
  }
  else {
    page = mi_segment_huge_page_alloc(block_size, 0, 0, tld);
  }
  // (the pages of a shared segment change under other threads: not checked)
  mi_assert_expensive(page == NULL || _mi_page_segment(page)->shared || mi_segment_is_valid(_mi_page_segment(page), tld));
  _mi_shared_stash_flush(tld, false);
  _mi_segments_try_purge();
  _mi_region_try_purge();
  return page;
}

// ---------------------------------------------------------------------------
// Big alignments
// ---------------------------------------------------------------------------

// Big alignments (> MI_ALIGNMENT_MAX_IN_SEGMENT, a multiple of the segment
// size): where in its segment the pointer handed out lies, for the offset
// asked for ((p + align_offset) % alignment == 0 fixes p's place in its 4 MiB
// unit, whatever the segment's address). free masks the pointer to find the
// segment header, so the pointer must lie in the segment's first unit past
// the header, with its block (p rounded down to 16 bytes, as every block)
// after the header too; or exactly at the unit's end, where free's
// `segment == p` test sends it to _mi_segment_of_unit_aligned (then p is the
// block start). A pointer 1 byte to a header's size into a unit has no place:
// the header free would read sits where the block is. 0 then; the aligned
// allocation refuses such an offset with EINVAL. (Until this version the
// block, not the pointer, was placed by these rules: with an offset that is
// not a multiple of 16 the pointer could lie 1 to 15 bytes past the unit's
// end, where free read the block as a header.)
size_t _mi_segment_big_aligned_ofs(size_t align_offset) {
  size_t info_size;
  mi_segment_size(1, 0, &info_size);
  const size_t ptr_ofs = (size_t)(0 - align_offset) & MI_SEGMENT_MASK;
  if (ptr_ofs == 0) return MI_SEGMENT_SIZE;
  if (_mi_align_down(ptr_ofs, MI_MAX_ALIGN_SIZE) < info_size) return 0;
  return ptr_ofs;
}

// ---------------------------------------------------------------------------
// Owner changes of a whole thread's segments (orphan heaps, init.c)
// ---------------------------------------------------------------------------

void _mi_segment_set_owner(mi_segment_t* segment, uintptr_t owner) {
  if (segment->shared) return;   // (its pages go with their heap)
  mi_atomic_store_release(&segment->thread_id, owner);
}

