/* ----------------------------------------------------------------------------
  segment-internal.h -- what the files of the segment layer share among
  themselves, and nothing else includes.

  The segment layer is segment.c (what every segment does: its memory and
  header, guard pages, runs of slices, page claim and clear, the delayed page
  purge, the trim lock; and the layer's entry points, which hand each kind
  to its file), segment-shared.c (the shared segments every page of small,
  medium and large blocks comes from: their lock, abandoned pages, stash,
  cache), segment-huge.c (what is particular to huge segments: remote frees
  and their pending purges, populate), segment-walk.c (the walks over every
  segment: trim, usage figures, the fork child) and segment-map.c (which
  addresses are segments, and the pointer lookups). The rest of the library
  sees the layer through mimalloc-internal.h.
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MI_SEGMENT_INTERNAL_H
#define MI_SEGMENT_INTERNAL_H

#include "mimalloc-internal.h"

// A continuation: a slice inside a page of slices, not its first
// (segment.c, "Large pages").
static inline bool mi_page_is_continuation(const mi_page_t* page) {
  return ((mi_page_flags(page) & MI_PAGE_CONTINUATION) != 0);
}

// A page in use (not a continuation of one): what the loops over a segment's
// pages in use look at.
static inline bool mi_page_is_used_page(const mi_page_t* page) {
  return (page->segment_in_use && !mi_page_is_continuation(page));
}

// Take a segment's trim lock under `id` (a thread id, or a trim's id),
// trying at most `tries` times (0: until it is had); false: not had.
static inline bool mi_segment_trim_lock_acquire(mi_segment_t* segment, uintptr_t id, size_t tries) {
  for (size_t i = 0; tries == 0 || i < tries; i++) {
    uintptr_t expected = 0;
    if (mi_atomic_cas_strong_acq_rel(&segment->trim_lock, &expected, id)) return true;
    mi_atomic_yield();
  }
  return false;
}

// The page's bit in the segment's page masks (free_mask, purge_mask, ...).
static inline uint64_t mi_segment_page_bit(const mi_page_t* page) {
  return ((uint64_t)1 << page->segment_idx);
}

// What a run of free slices costs to claim: this much for each slice that
// faults in (segment.c, _mi_segment_find_run_cost); a cost below it: nothing does.
#define MI_SLICE_FAULT_COST  (MI_SLICES_PER_SEGMENT + 1)

// segment.c
mi_segment_t* _mi_segment_alloc(size_t required, mi_page_kind_t page_kind, size_t page_shift, size_t page_alignment,
                                size_t align_offset, bool shared, bool commit_delayed, mi_segments_tld_t* tld);   // a new segment (NULL: out of memory)
void   _mi_segment_os_free(mi_segment_t* segment, bool purge_now, mi_stats_t* stats);   // give a segment's memory back (it is counted by no thread)
bool   _mi_segment_exit_over_budget(const mi_segments_tld_t* tld);   // an ending thread, and the regions hold more freed resident memory than the exit budget
bool   _mi_segment_find_run_cost(const mi_segment_t* segment, size_t block_size, size_t blocks, size_t* first, size_t* cost);   // the cheapest run of free slices for `blocks` blocks
size_t _mi_segment_run_slices(const mi_segment_t* segment, size_t idx, size_t block_size, size_t blocks);   // the slices a page from `idx` takes
bool   _mi_segment_page_claim(mi_segment_t* segment, mi_page_t* page, size_t n, mi_segments_tld_t* tld);   // claim `n` free slices from `page` (false: commit failed)
void   _mi_segment_run_guard(mi_segment_t* segment, size_t first, size_t n);   // secure builds: the guard at a claimed run's end (outside the shared lock)
void   _mi_segment_page_clear(mi_segment_t* segment, mi_page_t* page, mi_segments_tld_t* tld, int64_t now);   // a page's slices are free again, their purge pending (`now`: the clock, or 0)
void   _mi_segment_page_uncount(mi_segment_t* segment, mi_page_t* page, mi_stats_t* stats);   // the statistics of an emptied page's blocks go
void   _mi_segment_page_reset(mi_page_t* page);   // a fresh descriptor (the segment-level fields kept)
void   _mi_segment_page_unpurge_stat(mi_segment_t* segment, mi_page_t* page);   // a purged page counts as resident again
uint64_t _mi_segment_purge_begin(mi_segment_t* segment, int64_t now, bool force);   // under the shared lock: the due pages (all if forced) that hold memory, into `purging`
uint64_t _mi_segment_purge_run(const mi_segment_t* segment, uint64_t mask, bool decommit, size_t* bytes);   // no lock: purge them; returns those purged (`*bytes`: how much, if not NULL)
void     _mi_segment_purge_end(mi_segment_t* segment, uint64_t done, bool decommit);   // under the shared lock: mark them, `purging` empty again
void   _mi_segment_purge_clear(mi_segment_t* segment);   // drop every pending purge (the segment is freed)
bool   _mi_segment_trim_lock(mi_segment_t* segment);   // false: this thread held it already (then unlock does nothing)
void   _mi_segment_trim_unlock(mi_segment_t* segment, bool locked);
bool   _mi_segment_claim(mi_segment_t* segment);   // take ownership of an abandoned huge segment (false: another thread has it)

// segment-shared.c
mi_page_t* _mi_shared_page_alloc(mi_heap_t* heap, size_t block_size, mi_segments_tld_t* tld);   // a page of slices (NULL: none, or an adopted page went into the heap's queue)
void   _mi_shared_page_free(mi_page_t* page, bool force, mi_segments_tld_t* tld);   // an emptied page: into the stash, or back to its segment
void   _mi_shared_page_abandon(mi_page_t* page, mi_segments_tld_t* tld);   // its heap lets go of it for good
void   _mi_shared_free_remote(mi_page_t* page, mi_block_t* block);   // a block of a page another heap holds, or none
void   _mi_shared_stash_flush(mi_segments_tld_t* tld, bool force);   // the stash back to the shared segments (when due, or all)
mi_segment_t* _mi_shared_cache_pop(void);   // a cached empty segment of the pool whose lock this thread holds, or NULL

// segment-huge.c
void   _mi_segment_huge_page_free(mi_segment_t* segment, mi_page_t* page, mi_block_t* block);   // the block of an abandoned huge segment: the segment goes
void   _mi_segment_huge_page_purge(mi_segment_t* segment, mi_page_t* page, mi_block_t* block);   // another thread frees a live owner's huge block: purge it after the delay
bool   _mi_segment_huge_release_now(const mi_segment_t* segment);   // freed, does it go back to the OS at once (M_MMAP_THRESHOLD)?
void   _mi_segment_huge_pending_take(mi_segment_t* segment);   // before a huge segment is freed: its pending purge is dropped (or waited for)
void   _mi_segments_try_purge_huge(int64_t now);   // the pending huge purges that are due
void   _mi_segment_huge_fresh_alloc(mi_segment_t* segment, mi_page_t* page, size_t size);   // a new huge block: populate it, or let it be a probe
void   _mi_segment_huge_fresh_free(mi_segment_t* segment);   // a huge block is freed or purged: what its probe measured

// segment-walk.c
void   _mi_segments_fork_child_owners(void);   // in the fork child: the vanished threads' segments get the vanished owner id

#endif
