/* ----------------------------------------------------------------------------
  segment-huge.c -- what is particular to huge segments (one block each, as
  big as the block needs, owned by the heap that allocated it).

  It owns: the block freed by another thread while its owner lives (purged
  after the purge delay through a process-wide table of pending purges, so
  that the memory goes back without the owner, which may be blocked), the
  block of an abandoned huge segment freed by any thread, the size from
  which a freed huge block goes back to the OS at once (mallopt's
  M_MMAP_THRESHOLD), and whether fresh huge blocks are populated at once
  (measured on probes).

  It calls the segment core (segment.c: claim and free of a whole segment,
  through segment-internal.h), the OS layer, and the due table
  (purge-thread.c). segment.c calls it when a huge segment is made, freed,
  and on the process-wide purges; free.c calls it for a huge block another
  thread frees.
-----------------------------------------------------------------------------*/
#include "segment-internal.h"
#include "prim/prim.h"

// ---------------------------------------------------------------------------
// Release at once, and the abandoned huge block
// ---------------------------------------------------------------------------

// Huge segments of at least this many bytes give their memory back as soon
// as their block is freed, not after the purge delay (glibc's mallopt
// M_MMAP_THRESHOLD: alloc-glibc.c); SIZE_MAX, the default: none.
static _Atomic(size_t) mi_huge_release_min = SIZE_MAX;

void _mi_segment_huge_release_at(size_t min_size) {
  mi_atomic_store_relaxed(&mi_huge_release_min, min_size);
}

// Does a huge segment go back to the OS at once when freed (mallopt's
// M_MMAP_THRESHOLD), not after the purge delay?
bool _mi_segment_huge_release_now(const mi_segment_t* segment) {
  return (segment->segment_size >= mi_atomic_load_relaxed(&mi_huge_release_min));
}

// Free the single block of an abandoned huge segment: claim it and give the
// memory back. Needs no heap: the segment is not counted by any thread.
void _mi_segment_huge_page_free(mi_segment_t* segment, mi_page_t* page, mi_block_t* block) {
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE);
  (void)block;
  if (!_mi_segment_claim(segment)) {
    _mi_misuse_message(EAGAIN, "double free detected of huge block %p\n", block);
    return;
  }
  mi_assert_internal(page->used == 1);
  mi_stat_decrease(NULL, segments_abandoned, 1);
  mi_stat_decrease(NULL, pages_abandoned, 1);
  mi_stat_decrease(NULL, pages, 1);
  page->used = 0;
  page->segment_in_use = false;
  segment->free_mask = 1;
  segment->used = 0;
  segment->abandoned = 0;
  _mi_segment_huge_fresh_free(segment);   // a probe freed by another thread counts too
  _mi_segment_os_free(segment, false, NULL);
}

// ---------------------------------------------------------------------------
// Huge blocks freed by another thread
//
// A huge block freed by another thread while its owner lives goes back to the
// owner through the owner heap's delayed list, and the owner gives the
// segment back at its next slow path, which may be far off (a thread blocked
// in a read). So its memory must go back without the owner, but, like any
// freed memory, only after the purge delay (purged at once, it was faulted in
// again whenever the program allocated a huge block soon after). The freeing
// thread enters the block in a process-wide table of pending huge purges, and
// whoever runs the due purges (the background purge thread, or any thread's
// allocator calls) purges it when due. The table's slot is the hand-over
// between the purger and the owner, which may free the segment meanwhile:
// the purger marks a due slot PURGING before it touches the segment, and the
// owner, before it frees a segment with a slot, takes the slot back while it
// is still PENDING (the memory then goes back with the segment, after its
// own delay) or waits until the purger is done. The purger never reads a
// segment outside its PURGING window. With no free slot (64 huge blocks
// pending at once) the freeing thread purges at once, as before. (1.6
// abandoned huge segments at allocation, so that any thread freed them at
// once; ours stay owned by their heap, so that heap visiting, mi_heap_destroy
// and mi_heap_contains_block see them.)
// ---------------------------------------------------------------------------

#define MI_HUGE_PENDING_SLOTS  64
#define MI_HUGE_PENDING        ((uintptr_t)1)   // low bits of a slot: waits for its expiry
#define MI_HUGE_PURGING        ((uintptr_t)2)   // a purger holds the segment: the owner waits
#define MI_HUGE_SLOT_STATE     ((uintptr_t)3)

typedef struct mi_huge_pending_s {
  _Atomic(uintptr_t) segment;   // the segment | its state, or 0
  _Atomic(int64_t)   expire;
} mi_huge_pending_t;

static mi_huge_pending_t mi_huge_pending[MI_HUGE_PENDING_SLOTS];   // (the due table's MI_DUE_HUGE: the earliest expiry)

// Purge the block of a huge segment (its owner does not free it meanwhile),
// but for its first and last OS page: the block may sit on its owner heap's
// delayed list, whose link is in its first word (or, in secure builds, in its
// trailer at the end, with the state that tells a second free).
static void mi_segment_huge_purge_now(mi_segment_t* segment) {
  size_t psize;
  uint8_t* start = _mi_segment_page_start(segment, &segment->pages[0], 0, &psize, NULL);
  const size_t os_page = _mi_os_page_size();
  if (psize <= 2 * os_page) return;
  start += os_page;
  psize -= 2 * os_page;
  if (_mi_os_purge(start, psize)) segment->huge_purged = _mi_os_inward_size(start, psize);
}

void _mi_segment_huge_page_purge(mi_segment_t* segment, mi_page_t* page, mi_block_t* block) {
  mi_assert_internal(segment->page_kind == MI_PAGE_HUGE && page == &segment->pages[0]);
  mi_assert_internal(segment->huge_pending == 0);
  (void)page; (void)block;
  if (segment->mem_is_pinned) return;
  _mi_segment_huge_fresh_free(segment);   // a probe is measured before its memory goes
  segment->huge_fresh = MI_HUGE_REUSED;
  const int64_t delay = _mi_purge_delay();
  if (delay > 0 && segment->segment_size < mi_atomic_load_relaxed(&mi_huge_release_min)) {
    const int64_t expire = _mi_prim_clock_now() + delay;
    for (size_t i = 0; i < MI_HUGE_PENDING_SLOTS; i++) {
      uintptr_t expected = 0;
      if (mi_atomic_load_relaxed(&mi_huge_pending[i].segment) != 0) continue;
      mi_atomic_store_relaxed(&mi_huge_pending[i].expire, expire);   // (read only once the slot holds us)
      segment->huge_pending = (uint8_t)(i + 1);
      if (mi_atomic_cas_strong_acq_rel(&mi_huge_pending[i].segment, &expected, (uintptr_t)segment | MI_HUGE_PENDING)) {
        _mi_due_note(MI_DUE_HUGE, expire);
        return;
      }
      segment->huge_pending = 0;
    }
  }
  mi_segment_huge_purge_now(segment);   // no delay, or no free slot
}

// The owner frees a huge segment that another thread entered in the table:
// take the slot back (or wait for the purger that holds it).
void _mi_segment_huge_pending_take(mi_segment_t* segment) {
  if (segment->huge_pending == 0) return;
  mi_huge_pending_t* const slot = &mi_huge_pending[segment->huge_pending - 1];
  for (;;) {
    uintptr_t v = mi_atomic_load_acquire(&slot->segment);
    if ((v & ~MI_HUGE_SLOT_STATE) != (uintptr_t)segment) break;   // purged (the slot may serve another one now)
    if ((v & MI_HUGE_SLOT_STATE) == MI_HUGE_PENDING && mi_atomic_cas_strong_acq_rel(&slot->segment, &v, 0)) break;
    mi_atomic_yield();   // a purger holds it
  }
  segment->huge_pending = 0;
}

// Purge the pending huge blocks that are due (a housekeeping section: a fork
// waits for it).
void _mi_segments_try_purge_huge(int64_t now) {
  if (!_mi_due_enter(MI_DUE_HUGE, now)) return;   // not due, another thread does it, or a fork is under way
  for (size_t i = 0; i < MI_HUGE_PENDING_SLOTS; i++) {
    mi_huge_pending_t* const slot = &mi_huge_pending[i];
    uintptr_t v = mi_atomic_load_acquire(&slot->segment);
    if ((v & MI_HUGE_SLOT_STATE) != MI_HUGE_PENDING) continue;
    const int64_t expire = mi_atomic_load_relaxed(&slot->expire);
    if (expire > now) {
      _mi_due_note(MI_DUE_HUGE, expire);
      continue;
    }
    if (!mi_atomic_cas_strong_acq_rel(&slot->segment, &v, (v & ~MI_HUGE_SLOT_STATE) | MI_HUGE_PURGING)) continue;   // taken back
    mi_segment_huge_purge_now((mi_segment_t*)(v & ~MI_HUGE_SLOT_STATE));
    mi_atomic_store_release(&slot->segment, 0);
  }
  _mi_due_leave(MI_DUE_HUGE);
}

// ---------------------------------------------------------------------------
// Fresh huge blocks: populated at once where programs use them densely
//
// A huge block on fresh memory faults in page by page as the program touches
// it: one trap per 4 KiB page, two when the program reads a page before it
// writes it (the zero page first, then a private copy). When the program
// touches its huge blocks densely, faulting the block in with one system call
// (MADV_POPULATE_WRITE) is much cheaper; when it uses them sparsely (a calloc'd
// table with a few live entries), populating would make resident memory the
// program never touches. So the process watches: every fourth fresh huge
// block, and every one while the last measured block was sparse, is left to
// fault on touch and is a probe; when a probe is freed, its resident share
// (mincore) says whether the program touched it densely (3/4 or more). While
// the last measurement was dense, the other fresh huge blocks are populated,
// but never more than MI_HUGE_POPULATE_MAX of one block: one decision can make
// at most that much resident that the program may never touch (a sparse
// 8 GiB table after dense buffers was populated in full: 8 GiB resident and
// 8.8 s inside calloc). The rest of a bigger block faults on touch and is
// measured when the block is freed, so every big block is a probe of its own
// tail and a program that turns sparse is found out by the next one.
// ---------------------------------------------------------------------------

#define MI_HUGE_PROBE_EVERY     4
#define MI_HUGE_POPULATE_MAX    (64 * MiB)   // populated at most of one block
#define MI_HUGE_MEASURE_WINDOW  (4 * MiB)    // a long range is measured in windows ...
#define MI_HUGE_MEASURE_WINDOWS 16           // ... this many, spread evenly

static _Atomic(size_t) mi_huge_dense;   // 1: the last measured block was dense
static _Atomic(size_t) mi_huge_fresh;   // fresh huge blocks allocated so far

void _mi_segment_huge_fresh_alloc(mi_segment_t* segment, mi_page_t* page, size_t size) {
  segment->huge_fresh = MI_HUGE_REUSED;
  if (!page->is_zero_init || segment->mem_is_pinned) return;   // reused memory, or large OS pages
  if (!_mi_os_can_populate()) return;   // (no probes: what they measure decides only populating)
  segment->huge_fresh = MI_HUGE_PROBE;
  const size_t n = mi_atomic_add_relaxed(&mi_huge_fresh, 1);
  if (mi_atomic_load_relaxed(&mi_huge_dense) == 0 || (n % MI_HUGE_PROBE_EVERY) == 0) return;
  size_t psize;
  uint8_t* start = _mi_segment_page_start(segment, page, 0, &psize, NULL);
  const size_t want = (size < psize ? size : psize);
  if (want > MI_HUGE_POPULATE_MAX) {
    if (_mi_os_populate(start, MI_HUGE_POPULATE_MAX)) segment->huge_fresh = MI_HUGE_HEAD_POPULATED;
  }
  else if (_mi_os_populate(start, want)) {
    segment->huge_fresh = MI_HUGE_POPULATED;
  }
}

// Is 3/4 or more of a range resident? A long range is judged by evenly spread
// windows (a bounded cost for a block of many GiB); false if the OS cannot tell.
static bool mi_huge_range_dense(uint8_t* start, size_t size) {
  size_t measured = 0, resident = 0;
  if (size <= MI_HUGE_MEASURE_WINDOW * MI_HUGE_MEASURE_WINDOWS) {
    measured = size;
    resident = _mi_os_resident(start, size);
    if (resident == SIZE_MAX) return false;
  }
  else {
    const size_t stride = (size - MI_HUGE_MEASURE_WINDOW) / (MI_HUGE_MEASURE_WINDOWS - 1);
    for (size_t i = 0; i < MI_HUGE_MEASURE_WINDOWS; i++) {
      const size_t r = _mi_os_resident(start + i * stride, MI_HUGE_MEASURE_WINDOW);
      if (r == SIZE_MAX) return false;
      resident += r;
      measured += MI_HUGE_MEASURE_WINDOW;
    }
  }
  return (resident >= measured / 4 * 3);
}

// A fresh huge block is freed (or purged by another thread): what it tells.
void _mi_segment_huge_fresh_free(mi_segment_t* segment) {
  const uint8_t state = segment->huge_fresh;
  if (state != MI_HUGE_PROBE && state != MI_HUGE_HEAD_POPULATED) return;
  size_t psize;
  uint8_t* start = _mi_segment_page_start(segment, &segment->pages[0], 0, &psize, NULL);
  if (state == MI_HUGE_HEAD_POPULATED) {   // the populated head says nothing: measure the tail
    start += MI_HUGE_POPULATE_MAX;
    psize -= MI_HUGE_POPULATE_MAX;
  }
  mi_atomic_store_relaxed(&mi_huge_dense, (mi_huge_range_dense(start, psize) ? 1 : 0));
}
