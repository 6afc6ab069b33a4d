/* ----------------------------------------------------------------------------
  segment-internal.h -- what the files of the segment layer share among
  themselves, and nothing else includes.

  The segment layer is segment.c (segments, their pages, purges, the shared
  segments and their abandoned pages), segment-huge.c (what is particular to huge
  segments: remote frees and their pending purges, populate), segment-walk.c
  (the walks over every segment: trim, usage figures, the fork child) and
  segment-map.c (which addresses are segments, and the pointer lookups). The rest of the library
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

// The page's bit in the segment's page masks (free_mask, purge_mask, ...).
static inline uint64_t mi_segment_page_bit(const mi_page_t* page) {
  return ((uint64_t)1 << page->segment_idx);
}

// segment.c
size_t _mi_segment_pages_range(const mi_segment_t* segment, size_t first, size_t n, uint8_t** start);   // the memory of `n` adjacent pages from `first`
bool   _mi_segment_claim(mi_segment_t* segment);   // take ownership of an abandoned segment (false: another thread has it)
void   _mi_segment_os_free(mi_segment_t* segment, bool purge_now, mi_stats_t* stats);   // give a segment's memory back (it is counted by no thread)

// segment-huge.c
bool   _mi_segment_huge_release_now(const mi_segment_t* segment);   // freed, does it go back to the OS at once (M_MMAP_THRESHOLD)?
void   _mi_segment_huge_pending_take(mi_segment_t* segment);   // before a huge segment is freed: its pending purge is dropped (or waited for)
void   _mi_segments_try_purge_huge(int64_t now);   // the pending huge purges that are due
void   _mi_segment_huge_fresh_alloc(mi_segment_t* segment, mi_page_t* page, size_t size);   // a new huge block: populate it, or let it be a probe
void   _mi_segment_huge_fresh_free(mi_segment_t* segment);   // a huge block is freed or purged: what its probe measured

// segment-walk.c
void   _mi_segments_fork_child_owners(void);   // in the fork child: the vanished threads' segments get the vanished owner id

#endif
