/* ----------------------------------------------------------------------------
  abandoned.c -- the set of abandoned segments that live in regions.

  A segment whose pages all belong to no heap (its thread ended) is
  *abandoned*: nobody owns it until a thread claims it, to reclaim it into
  its own heap (segment.c: reclaim on allocation) or to look after it for a
  moment (segment.c: the abandoned sweep). The set is a bitmap with one word
  per region slot and one bit per 4 MiB block of the region, the same shape
  as the region bitmaps: a segment is in the set iff the bit of its first
  block is set, and clearing that bit with an atomic AND is the claim token,
  so exactly one thread gets each segment, and a specific segment can be
  claimed as well as "the next one".

  Since every page of small, medium and large blocks lives in the shared
  segments (which are never abandoned: their pages are, one by one), the
  segments here are the few of slices a thread still owns: those of the
  pages a signal handler took while its thread held the shared lock.

  Only segments in regions are in the set (mi_segment_in_abandoned_set):
  huge segments and segments mapped straight from the OS are claimed by a
  CAS of their owner id from 0 by the thread that frees into them.

  A region that holds an abandoned segment is never freed (the segment keeps
  its blocks in use), so a bit found set always names live memory.

  Alternative rejected: 1.6's tagged lock-free stack plus a "visited" list
  (needs ABA tags and a reader count, cannot claim one specific segment, and
  the sweep could not visit them all).
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

static _Atomic(uintptr_t) mi_abandoned[MI_REGION_MAX];   // per region slot: blocks that start an abandoned segment
static _Atomic(size_t) mi_abandoned_total;               // bits set in all words

static _Atomic(uintptr_t)* mi_abandoned_word(const mi_segment_t* segment, uintptr_t* bit) {
  mi_assert_internal(mi_segment_in_abandoned_set(segment));
  *bit = (uintptr_t)1 << segment->memid.block_idx;
  return &mi_abandoned[segment->memid.region_idx - 1];
}

void _mi_abandoned_push(mi_segment_t* segment) {
  uintptr_t bit;
  _Atomic(uintptr_t)* word = mi_abandoned_word(segment, &bit);
  mi_atomic_add_relaxed(&mi_abandoned_total, 1);
  mi_atomic_or_acq_rel(word, bit);
}

// Take `bit` of region slot `idx` out of the set; true if we did.
static bool mi_abandoned_take(size_t idx, uintptr_t bit) {
  if ((mi_atomic_and_acq_rel(&mi_abandoned[idx], ~bit) & bit) == 0) return false;
  mi_atomic_sub_relaxed(&mi_abandoned_total, 1);
  return true;
}

static mi_segment_t* mi_abandoned_segment_at(size_t idx, size_t bitidx) {
  return (mi_segment_t*)(_mi_region_start(idx) + bitidx * MI_SEGMENT_SIZE);
}

bool _mi_abandoned_claim(mi_segment_t* segment) {
  uintptr_t bit;
  mi_abandoned_word(segment, &bit);
  return mi_abandoned_take(segment->memid.region_idx - 1, bit);
}

// Is the segment in the set now (not claimed)?
bool _mi_abandoned_contains(const mi_segment_t* segment) {
  uintptr_t bit;
  _Atomic(uintptr_t)* word = mi_abandoned_word(segment, &bit);
  return ((mi_atomic_load_acquire(word) & bit) != 0);
}

size_t _mi_abandoned_count(void) {
  return mi_atomic_load_relaxed(&mi_abandoned_total);
}

// Claim the next abandoned segment at or after `*cursor` (wrapping once).
mi_segment_t* _mi_abandoned_next(size_t* cursor) {
  if (mi_atomic_load_relaxed(&mi_abandoned_total) == 0) return NULL;
  const size_t count = _mi_region_slots();
  if (count == 0) return NULL;
  const size_t total = count * MI_INTPTR_BITS;
  size_t pos = *cursor % total;
  for (size_t visited = 0; visited <= total; ) {
    const size_t idx = pos / MI_INTPTR_BITS;
    const size_t bitidx = pos % MI_INTPTR_BITS;
    const uintptr_t map = mi_atomic_load_relaxed(&mi_abandoned[idx]) >> bitidx;
    if (map == 0) {
      const size_t skip = MI_INTPTR_BITS - bitidx;
      visited += skip; pos = (pos + skip) % total;
      continue;
    }
    const size_t i = bitidx + mi_ctz(map);
    if (mi_abandoned_take(idx, (uintptr_t)1 << i)) {
      *cursor = idx * MI_INTPTR_BITS + i + 1;
      return mi_abandoned_segment_at(idx, i);
    }
    // someone else took it: look again from the same place
  }
  return NULL;
}

// Claim every segment that is abandoned now, one at a time, and call `fn` on
// it; `fn` owns the segment and must abandon it again (or keep it). Segments
// abandoned while the visit runs may or may not be visited.
void _mi_abandoned_visit(void (*fn)(mi_segment_t* segment, void* arg), void* arg) {
  if (mi_atomic_load_relaxed(&mi_abandoned_total) == 0) return;
  const size_t count = _mi_region_slots();
  for (size_t idx = 0; idx < count; idx++) {
    uintptr_t map = mi_atomic_load_relaxed(&mi_abandoned[idx]);
    while (map != 0) {
      const size_t i = mi_ctz(map);
      map &= map - 1;
      if (!mi_abandoned_take(idx, (uintptr_t)1 << i)) continue;   // taken meanwhile
      fn(mi_abandoned_segment_at(idx, i), arg);
    }
  }
}
