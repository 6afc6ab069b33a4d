/* ----------------------------------------------------------------------------
  region.c -- the process-wide memory layer under segments.

  Segments are not mapped one by one: they are carved from *regions* of
  256 MiB, each described by a few 64-bit atomic bitmaps with one bit per
  4 MiB block. Freeing and re-using a segment then costs no system call.
  Requests of more than 16 blocks (64 MiB), and segments whose block must be
  aligned beyond the segment size, are mapped directly from the OS instead
  (memid.region_idx == 0) and unmapped on free.

  Per region:
    state      : unused -> setting up -> live -> dead (freed) -> setting up ...
    start      : base address (read only after claiming bits, see below)
    in_use     : block belongs to a segment, or is being purged right now
    dirty      : block may hold non-zero data (else it reads as zeros)
    commit     : block is committed (made accessible once, never decommitted)
    purge      : block is free and its delayed purge is due at purge_expire
    purge_young: block is free and was freed after purge_expire was set; it
                 moves to `purge` at that expiry (so every block waits between
                 one and two delays, never less)
    purged     : block was purged since its last use (for the statistics)
    purge_expire: when the pending purges are due (ms; 0 = nothing pending)
  and beside them one opaque word per block that a block's user leaves for
  its next one (the region never reads it).

  Delayed purge (what 1.6 lacked): a freed segment is marked purge-pending
  with an expiry `reset_delay` ms ahead. Re-using it before then clears the
  mark (no system call); expired blocks are purged (MADV_DONTNEED) by later
  segment allocations and collections, which first claim the blocks' in_use
  bits so nobody can take them meanwhile. Purged blocks are clean: the next
  segment built on them knows its memory is zero.

  Reserved huge OS pages (option reserve_huge_os_pages and the
  mi_reserve_huge_os_pages_* functions): each reserved GiB (one 1 GiB page,
  or 512 of 2 MiB) becomes four regions flagged is_pinned and is_reserved:
  committed, zero, never purged and never unmapped. Segments that may live in
  pinned memory take their blocks there first (their thread's NUMA node
  first), before any other region or OS memory. 1.6 put 32 MiB-block arenas
  under its regions for this; four ready regions need no second bitmap layer.

  Alternative rejected: a global free-segment list with a lock (a lock on
  the segment path).

  Known limits: at most 1024 regions (256 GiB) are tracked at once; beyond
  that segments come straight from the OS and work.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

#include <stdio.h>    // snprintf

#define MI_REGION_SETUP     (1)
#define MI_REGION_LIVE      (2)
#define MI_REGION_DEAD      (3)

#define MI_BITMAP_FULL      (~(uintptr_t)0)

typedef struct mem_region_s {
  _Atomic(uintptr_t) state;
  _Atomic(uintptr_t) start;
  _Atomic(uintptr_t) is_pinned;     // pinned: fixed large or huge OS pages (never purged or protected)
  _Atomic(uintptr_t) large_wanted;  // created for large OS pages (fixed, or transparent)
  _Atomic(uintptr_t) is_reserved;   // part of a reserved huge OS page: pinned, never unmapped
  _Atomic(uintptr_t) numa_node;     // node preferred for its pages (MI_NUMA_ANY: none)
  _Atomic(uintptr_t) in_use;
  _Atomic(uintptr_t) commit;        // block is committed (accessible)
  _Atomic(uintptr_t) dirty;
  _Atomic(uintptr_t) purge;         // freed, purge pending: due at purge_expire
  _Atomic(uintptr_t) purge_young;   // freed since the last expiry: due one expiry later
  _Atomic(uintptr_t) purged;        // block was purged and not used since (statistics)
  _Atomic(int64_t)   purge_expire;
  uint8_t padding[128 - 13*sizeof(uintptr_t)];   // keep regions on separate cache lines
} mem_region_t;

#define MI_NUMA_ANY         (SIZE_MAX)   // a reserved huge page given no node

static mem_region_t regions[MI_REGION_MAX];
static _Atomic(size_t) regions_count;      // slots handed out so far (only grows)

// One word per block that the user of a block leaves for its next user (the
// region does not read it: secure builds note there which guard pages the
// freed segment left in place). Written by the freeing thread before it
// clears the block's in_use bit, handed to (and cleared for) the next
// claimer after it set the bit, so the in_use bitmap orders both; cleared
// when a region is set up. 512 KiB of .bss, touched only for regions in use.
static uint64_t region_words[MI_REGION_MAX][MI_REGION_BLOCKS];
static _Atomic(size_t) regions_reserved;   // regions of reserved huge OS pages (only grows)
static _Atomic(uintptr_t) region_creating; // 1 while a thread sets up a region for a segment
static mi_decl_thread bool region_creating_here;   // ... this one (a signal handler's request must not wait for it)

// ---------------------------------------------------------------------------
// Bitmap helpers
// ---------------------------------------------------------------------------


// Claim a run of `count` zero bits in `field`; returns the bit index or false.
static bool mi_bitmap_try_claim(_Atomic(uintptr_t)* field, size_t count, size_t* bitidx) {
  uintptr_t map = mi_atomic_load_relaxed(field);
  if (map == MI_BITMAP_FULL) return false;
  size_t idx = mi_ctz(~map);
  while (idx + count <= MI_INTPTR_BITS) {
    const uintptr_t m = mi_bit_mask(count, idx);
    if ((map & m) == 0) {
      if (mi_atomic_cas_weak_acq_rel(field, &map, map | m)) { *bitidx = idx; return true; }
      continue;   // `map` was refreshed: try the same position again
    }
    // jump past the highest conflicting bit
    idx = mi_bsr(map & m) + 1;
  }
  return false;
}

// Claim exactly the bits `m` if they are all zero.
static bool mi_bitmap_try_claim_mask(_Atomic(uintptr_t)* field, uintptr_t m) {
  uintptr_t map = mi_atomic_load_relaxed(field);
  do {
    if ((map & m) != 0) return false;
  } while (!mi_atomic_cas_weak_acq_rel(field, &map, map | m));
  return true;
}


// Make the regions' earliest expiry (the due table's MI_DUE_REGION) no later
// than `expire`.
static void mi_region_note_expire(int64_t expire) {
  _mi_due_note(MI_DUE_REGION, expire);
}

// ---------------------------------------------------------------------------
// Region set-up and tear-down
// ---------------------------------------------------------------------------

// Claim a dead or a new slot for a region being set up; SIZE_MAX if none is left.
static size_t mi_region_slot_claim(void) {
  // reuse a dead slot first, else take a new one
  const size_t count = mi_atomic_load_acquire(&regions_count);
  for (size_t i = 0; i < count; i++) {
    uintptr_t expected = MI_REGION_DEAD;
    if (mi_atomic_cas_strong_acq_rel(&regions[i].state, &expected, MI_REGION_SETUP)) return i;
  }
  const size_t idx = mi_atomic_add_acq_rel(&regions_count, 1);
  if (idx >= MI_REGION_MAX) {
    mi_atomic_sub_acq_rel(&regions_count, 1);
    _mi_warning_message("maximum regions used: %zu GiB (perhaps recompile with a larger setting)\n",
                        (MI_REGION_MAX * MI_REGION_SIZE) / GiB);
    return SIZE_MAX;
  }
  mi_atomic_store_release(&regions[idx].state, MI_REGION_SETUP);
  return idx;
}

// Give back a slot that was claimed but not published.
static void mi_region_slot_release(size_t idx) {
  mi_atomic_store_release(&regions[idx].in_use, MI_BITMAP_FULL);
  mi_atomic_store_release(&regions[idx].state, MI_REGION_DEAD);
}

// Fill in a claimed slot for the memory at `start` and make it live.
static void mi_region_publish(size_t idx, void* start, bool committed, bool is_pinned, bool large_wanted,
                              bool is_reserved, size_t node, bool is_zero) {
  mem_region_t* region = &regions[idx];
  mi_atomic_store_relaxed(&region->start, (uintptr_t)start);
  mi_atomic_store_relaxed(&region->is_pinned, is_pinned ? 1 : 0);
  mi_atomic_store_relaxed(&region->large_wanted, large_wanted ? 1 : 0);
  mi_atomic_store_relaxed(&region->is_reserved, is_reserved ? 1 : 0);
  mi_atomic_store_relaxed(&region->numa_node, node);
  mi_atomic_store_relaxed(&region->commit, committed ? MI_BITMAP_FULL : 0);
  mi_atomic_store_relaxed(&region->dirty, is_zero ? 0 : MI_BITMAP_FULL);
  mi_atomic_store_relaxed(&region->purge, 0);
  mi_atomic_store_relaxed(&region->purge_young, 0);
  mi_atomic_store_relaxed(&region->purged, 0);
  mi_atomic_store_relaxed(&region->purge_expire, 0);
  memset(&region_words[idx], 0, sizeof(region_words[idx]));   // fresh memory: nothing left there
  mi_atomic_store_release(&region->in_use, 0);
  mi_atomic_store_release(&region->state, MI_REGION_LIVE);   // publish last
}

// Set up a fresh region in a new or dead slot; returns its index or SIZE_MAX.
static size_t mi_region_create(bool want_large) {
  const size_t idx = mi_region_slot_claim();
  if (idx == SIZE_MAX) return SIZE_MAX;
  // accessible memory that is never touched costs nothing on an overcommitting OS:
  // with eager_region_commit the region is committed whatever this first request wants,
  // so that later segments carved from it need no commit call
  const bool eager = (mi_option_get(mi_option_eager_region_commit) != 0);
  bool is_pinned = false, is_zero = false;
  void* start = _mi_os_alloc_aligned_at(MI_REGION_SIZE, MI_SEGMENT_SIZE, 0, eager, want_large, &is_pinned, &is_zero);
  if (start == NULL) {
    mi_region_slot_release(idx);
    return SIZE_MAX;
  }
  // with more than one NUMA node, the region prefers the creating thread's
  // node for its pages, and segment requests look in their node's regions first
  const size_t node = _mi_os_numa_node();
  if (_mi_os_numa_node_count() > 1 && !is_pinned) _mi_os_numa_prefer(start, MI_REGION_SIZE, node);
  mi_region_publish(idx, start, eager, is_pinned, want_large, false, node, is_zero);
  return idx;
}

// Do the regions hold more than `size` bytes of freed blocks that are still
// resident (purge pending)? (Pinned memory is never purged: not counted.)
bool _mi_region_resident_free_above(size_t size) {
  size_t free_resident = 0;
  const size_t count = mi_atomic_load_acquire(&regions_count);
  for (size_t i = 0; i < count; i++) {
    const mem_region_t* region = &regions[i];
    if (mi_atomic_load_acquire(&region->state) != MI_REGION_LIVE || mi_atomic_load_relaxed(&region->is_pinned) != 0) continue;
    const uintptr_t in_use = mi_atomic_load_relaxed(&region->in_use);
    free_resident += mi_popcount(mi_atomic_load_relaxed(&region->dirty) & ~in_use) * MI_SEGMENT_SIZE;
    if (free_resident > size) return true;
  }
  return false;
}

// In a forked child: a region that another thread was setting up stays in
// its slot, unused (its memory is mapped or not); the gate opens again.
void _mi_regions_fork_child(void) {
  mi_tls(region_creating_here) = false;
  mi_atomic_store_release(&region_creating, 0);
}

// Release regions that hold no segment at all (forced collection).
static void mi_regions_free_unused(void) {
  const size_t count = mi_atomic_load_acquire(&regions_count);
  for (size_t i = 0; i < count; i++) {
    mem_region_t* region = &regions[i];
    if (mi_atomic_load_acquire(&region->state) != MI_REGION_LIVE) continue;
    if (mi_atomic_load_relaxed(&region->is_reserved) != 0) continue;   // pinned until the process ends
    uintptr_t expected = 0;
    if (!mi_atomic_cas_strong_acq_rel(&region->in_use, &expected, MI_BITMAP_FULL)) continue;
    // nobody can claim blocks now: retire the slot and unmap
    void* start = (void*)mi_atomic_load_acquire(&region->start);
    mi_atomic_store_release(&region->state, MI_REGION_DEAD);
    mi_atomic_store_relaxed(&region->purge, 0);
    mi_atomic_store_relaxed(&region->purge_young, 0);
    const uintptr_t purged = mi_atomic_exchange_acq_rel(&region->purged, 0);
    mi_atomic_store_relaxed(&region->purge_expire, 0);
    if (purged != 0) mi_stat_decrease(NULL, reset, mi_popcount(purged) * MI_SEGMENT_SIZE);
    const size_t committed = mi_popcount(mi_atomic_load_relaxed(&region->commit)) * MI_SEGMENT_SIZE;
    _mi_os_free_ex(start, MI_REGION_SIZE, committed);
  }
}

// ---------------------------------------------------------------------------
// Allocation and free
// ---------------------------------------------------------------------------

// The smallest run of free blocks that are all dirty (freed, not purged yet)
// and can hold `count` blocks: its start and length, or false. Reusing
// resident memory costs no page faults (a zeroed allocation clears it instead,
// several times cheaper than faulting it in) and keeps the resident set from
// growing while freed memory waits for its purge; the best fit keeps the
// larger resident runs for larger requests.
static bool mi_region_best_resident(const mem_region_t* region, size_t count, size_t* bitidx, size_t* len) {
  const uintptr_t in_use = mi_atomic_load_relaxed(&region->in_use);
  uintptr_t resident = mi_atomic_load_relaxed(&region->dirty) & ~in_use;
  bool found = false;
  while (resident != 0) {
    size_t idx;
    const size_t n = mi_bit_run(resident, &idx);
    if (n >= count && (!found || n < *len)) {
      *bitidx = idx; *len = n; found = true;
      if (n == count) break;
    }
    resident &= ~mi_bit_mask(n, idx);
  }
  return found;
}

static void* mi_region_claimed(size_t idx, size_t bitidx, size_t blocks, bool commit,
                               bool* is_committed, bool* is_pinned, bool* is_zero, uint64_t* word, mi_memid_t* memid) {
  mem_region_t* region = &regions[idx];
  const uintptr_t m = mi_bit_mask(blocks, bitidx);
  uint8_t* start = (uint8_t*)mi_atomic_load_acquire(&region->start);
  void* p = start + (bitidx * MI_SEGMENT_SIZE);
  const uintptr_t committed = mi_atomic_load_relaxed(&region->commit) & m;
  *is_committed = (committed == m);
  if (commit && !*is_committed) {
    // commit the whole range once (some blocks may be committed already; the
    // statistics count only the new ones); on failure nothing has changed
    // but the claim, which we let go (the blocks keep their pending purges)
    bool commit_zero = false;
    if (!_mi_os_commit(p, blocks * MI_SEGMENT_SIZE, &commit_zero)) {
      mi_atomic_and_acq_rel(&region->in_use, ~m);
      return NULL;
    }
    if (committed != 0) mi_stat_decrease(NULL, committed, mi_popcount(committed) * MI_SEGMENT_SIZE);
    mi_atomic_or_acq_rel(&region->commit, m);
    *is_committed = true;
  }
  // re-use before expiry cancels a pending purge: no system call
  mi_atomic_and_acq_rel(&region->purge, ~m);
  mi_atomic_and_acq_rel(&region->purge_young, ~m);
  const uintptr_t purged = mi_atomic_and_acq_rel(&region->purged, ~m) & m;
  if (purged != 0) mi_stat_decrease(NULL, reset, mi_popcount(purged) * MI_SEGMENT_SIZE);
  const uintptr_t was_dirty = mi_atomic_or_acq_rel(&region->dirty, m) & m;
  *is_zero = (was_dirty == 0);
  *is_pinned = (mi_atomic_load_relaxed(&region->is_pinned) != 0);
  // the words the blocks' last users left, now the claimer's
  *word = 0;
  for (size_t i = bitidx; i < bitidx + blocks; i++) {
    *word |= region_words[idx][i];
    region_words[idx][i] = 0;
  }
  memid->region_idx = (uint32_t)(idx + 1);
  memid->block_idx = (uint32_t)bitidx;
  return p;
}

// Whether a live region that is not reserved may serve a request.
static bool mi_region_serves(const mem_region_t* region, bool want_large, size_t node) {
  if (mi_atomic_load_acquire(&region->state) != MI_REGION_LIVE) return false;
  if (mi_atomic_load_relaxed(&region->is_reserved) != 0) return false;
  if (mi_atomic_load_relaxed(&region->large_wanted) != (want_large ? 1u : 0u)) return false;
  return (node == SIZE_MAX || mi_atomic_load_relaxed(&region->numa_node) == node);
}

// Claim a run of `blocks` in a region of reserved huge OS pages: those of the
// calling thread's node (or of no node) first, then any. Returns the region
// index or SIZE_MAX.
static size_t mi_region_claim_reserved(size_t blocks, size_t* bitidx) {
  if (mi_atomic_load_relaxed(&regions_reserved) == 0) return SIZE_MAX;
  const size_t node = _mi_os_numa_node();
  const size_t count = mi_atomic_load_acquire(&regions_count);
  for (int pass = 0; pass < 2; pass++) {
    for (size_t idx = 0; idx < count; idx++) {
      mem_region_t* region = &regions[idx];
      if (mi_atomic_load_acquire(&region->state) != MI_REGION_LIVE) continue;
      if (mi_atomic_load_relaxed(&region->is_reserved) == 0) continue;
      const size_t rnode = mi_atomic_load_relaxed(&region->numa_node);
      if (pass == 0 && rnode != node && rnode != MI_NUMA_ANY) continue;
      if (mi_bitmap_try_claim(&region->in_use, blocks, bitidx)) return idx;
    }
  }
  return SIZE_MAX;
}

// Claim `blocks` free blocks in an existing region that serves the request:
// 1. the best fit among free blocks that are still resident (freed, purge
//    pending): no page faults, and their pending purge is cancelled;
// 2. else the first room, starting at region `cursor` (where the thread last
//    found some). Returns the region index or SIZE_MAX.
static size_t mi_region_find(size_t blocks, bool want_large, size_t node, size_t cursor, size_t* bitidx) {
  const size_t count = mi_atomic_load_acquire(&regions_count);
  const size_t start = (count == 0 ? 0 : cursor % count);
  size_t best_region = SIZE_MAX, best_idx = 0, best_len = 0;
  for (size_t n = 0; n < count; n++) {
    const size_t idx = (start + n) % count;
    const mem_region_t* region = &regions[idx];
    if (!mi_region_serves(region, want_large, node)) continue;
    size_t len = 0, at = 0;
    if (mi_region_best_resident(region, blocks, &at, &len) && (best_region == SIZE_MAX || len < best_len)) {
      best_region = idx; best_idx = at; best_len = len;
      if (len == blocks) break;
    }
  }
  if (best_region != SIZE_MAX && mi_bitmap_try_claim_mask(&regions[best_region].in_use, mi_bit_mask(blocks, best_idx))) {
    *bitidx = best_idx;
    return best_region;
  }
  for (size_t n = 0; n < count; n++) {
    const size_t idx = (start + n) % count;
    mem_region_t* region = &regions[idx];
    if (!mi_region_serves(region, want_large, node)) continue;
    if (mi_bitmap_try_claim(&region->in_use, blocks, bitidx)) return idx;
  }
  return SIZE_MAX;
}

// `allow_pinned`: the segment may live in pinned memory (fixed large or huge OS pages).
void* _mi_region_alloc(size_t size, bool commit, bool allow_pinned, bool* is_committed,
                       bool* is_pinned, bool* is_zero, uint64_t* word, mi_memid_t* memid, mi_segments_tld_t* tld) {
  mi_assert_internal(size > 0 && (size % MI_SEGMENT_SIZE) == 0);
  *word = 0;
  memid->region_idx = 0;
  memid->block_idx = 0;
  const size_t blocks = size / MI_SEGMENT_SIZE;
  // with large OS pages, segments that may use them (eagerly committed ones)
  // and those that may not (a thread's first, lazily committed segments, which
  // would fault in whole large pages) live in different regions: otherwise the
  // first segment's region, created without them, would serve all the others
  const bool want_large = (allow_pinned && mi_option_get(mi_option_large_os_pages) != 0 &&
                           mi_option_get(mi_option_eager_region_commit) != 0);
  // with more than one NUMA node, only regions of the calling thread's node (as 1.6)
  const size_t node = (_mi_os_numa_node_count() > 1 ? _mi_os_numa_node() : SIZE_MAX);
  if (blocks <= MI_REGION_MAX_OBJ_BLOCKS) {
    // 0. reserved huge OS pages come before any other memory
    size_t bitidx;
    if (allow_pinned) {
      const size_t idx = mi_region_claim_reserved(blocks, &bitidx);
      if (idx != SIZE_MAX) {
        tld->region_cursor = idx;
        return mi_region_claimed(idx, bitidx, blocks, commit, is_committed, is_pinned, is_zero, word, memid);
      }
    }
    for (;;) {
      size_t idx = mi_region_find(blocks, want_large, node, tld->region_cursor, &bitidx);
      if (idx == SIZE_MAX) {
        // 3. a new region, set up by one thread at a time: the others wait
        //    for it and look again (when many threads found the regions full
        //    at once, each set up a region of its own: xstress with 32
        //    threads reserved 3.7 GiB for what fits in 768 MiB, and built
        //    segments on fresh memory while resident blocks waited). A signal
        //    handler that interrupts a set-up does not wait for it.
        uintptr_t expected = 0;
        const bool gate = !mi_tls(region_creating_here);
        if (gate && !mi_atomic_cas_strong_acq_rel(&region_creating, &expected, 1)) {
          while (mi_atomic_load_acquire(&region_creating) != 0) mi_atomic_yield();
          continue;
        }
        mi_tls(region_creating_here) = true;
        // look again behind the gate: a region that another thread set up
        // between our look and the gate has room (without this second look,
        // 32 threads taking 4 MiB blocks at once set up 13-18 regions for
        // 12 regions of blocks, each one 256 MiB committed)
        idx = mi_region_find(blocks, want_large, node, tld->region_cursor, &bitidx);
        if (idx == SIZE_MAX) {
          idx = mi_region_create(want_large);
          if (idx != SIZE_MAX && !mi_bitmap_try_claim(&regions[idx].in_use, blocks, &bitidx)) idx = SIZE_MAX;   // (taken meanwhile)
        }
        if (gate) {
          mi_tls(region_creating_here) = false;
          mi_atomic_store_release(&region_creating, 0);
        }
        if (idx == SIZE_MAX) break;
      }
      tld->region_cursor = idx;
      return mi_region_claimed(idx, bitidx, blocks, commit, is_committed, is_pinned, is_zero, word, memid);
    }
    _mi_warning_message("unable to allocate from region: size %zu\n", size);
  }
  // 4. straight from the OS
  *is_zero = false;
  *is_pinned = false;
  void* p = _mi_os_alloc_aligned_at(size, MI_SEGMENT_SIZE, 0, commit, false, is_pinned, is_zero);
  *is_committed = commit;
  return p;
}


void _mi_region_free(void* p, size_t size, mi_memid_t memid, bool fully_committed, bool purge_now, uint64_t word) {
  if (p == NULL) return;
  if (memid.region_idx == 0) {
    _mi_os_free_ex(p, size, (fully_committed ? size : 0));
    return;
  }
  mem_region_t* region = &regions[memid.region_idx - 1];
  region_words[memid.region_idx - 1][memid.block_idx] = word;   // (before the in_use bits are cleared)
  const size_t blocks = _mi_divide_up(size, MI_SEGMENT_SIZE);
  const uintptr_t m = mi_bit_mask(blocks, memid.block_idx);
  mi_assert_internal((mi_atomic_load_relaxed(&region->in_use) & m) == m);
  if (fully_committed) mi_atomic_or_acq_rel(&region->commit, m);
  const bool pinned = (mi_atomic_load_relaxed(&region->is_pinned) != 0);
  if (!pinned) {
    if (purge_now || _mi_purge_delay() == 0) {
      if (_mi_os_purge(p, blocks * MI_SEGMENT_SIZE)) {
        mi_atomic_and_acq_rel(&region->dirty, ~m);
        mi_atomic_or_acq_rel(&region->purged, m);
      }
    }
    else {
      // mark pending before releasing, so a claimer always sees (and cancels)
      // it; a region with nothing pending starts its expiry now, otherwise
      // the block waits in the young generation for the next one
      if (mi_atomic_load_relaxed(&region->purge_expire) == 0) mi_atomic_or_acq_rel(&region->purge, m);
      else mi_atomic_or_acq_rel(&region->purge_young, m);
      // arm the expiry if nothing is pending (also when a purge pass just
      // ended without re-arming it while we marked the young generation)
      int64_t expected = 0;
      const int64_t expire = _mi_prim_clock_now() + _mi_purge_delay();
      if (mi_atomic_cas_strong_acq_rel(&region->purge_expire, &expected, expire)) mi_region_note_expire(expire);
    }
  }
  mi_atomic_and_acq_rel(&region->in_use, ~m);
}

// Purge the runs of `pending` blocks that nobody uses (we claim their in_use
// bits meanwhile) and that are still marked in `field`.
static void mi_region_purge_blocks(mem_region_t* region, _Atomic(uintptr_t)* field, uintptr_t pending) {
  while (pending != 0) {
    // the run of pending blocks starting at the lowest one
    size_t idx;
    const size_t count = mi_bit_run(pending, &idx);
    uintptr_t m = mi_bit_mask(count, idx);
    if (!mi_bitmap_try_claim_mask(&region->in_use, m)) {
      m = mi_bit_mask(1, idx);   // part of the run is in use: do one block
      if (!mi_bitmap_try_claim_mask(&region->in_use, m)) { pending &= ~m; continue; }
    }
    // we own the blocks: purge only those still pending (a claimer may have raced us)
    const uintptr_t still = mi_atomic_and_acq_rel(field, ~m) & m;
    uint8_t* start = (uint8_t*)mi_atomic_load_acquire(&region->start);
    for (uintptr_t s = still; s != 0; ) {
      size_t i;
      const size_t n = mi_bit_run(s, &i);
      const uintptr_t sm = mi_bit_mask(n, i);
      if (_mi_os_purge(start + i * MI_SEGMENT_SIZE, n * MI_SEGMENT_SIZE)) {
        mi_atomic_and_acq_rel(&region->dirty, ~sm);
        mi_atomic_or_acq_rel(&region->purged, sm);
      }
      s &= ~sm;
    }
    mi_atomic_and_acq_rel(&region->in_use, ~m);
    pending &= ~m;
  }
}

// Move the young generation to the due one, block by block (each claimed
// meanwhile, so a block in use never gets a stale mark).
static void mi_region_promote_young(mem_region_t* region) {
  uintptr_t young = mi_atomic_load_acquire(&region->purge_young);
  while (young != 0) {
    const uintptr_t b = (uintptr_t)1 << mi_ctz(young);
    young &= ~b;
    if (!mi_bitmap_try_claim_mask(&region->in_use, b)) continue;   // in use, or being freed: stays young
    if ((mi_atomic_and_acq_rel(&region->purge_young, ~b) & b) != 0) mi_atomic_or_acq_rel(&region->purge, b);
    mi_atomic_and_acq_rel(&region->in_use, ~b);
  }
}

// At the region's expiry: purge the due generation and make the young one
// due at the next expiry (or purge both now: forced, or when the expiry
// passed a delay ago, as when no allocator call came in between).
static void mi_region_purge(mem_region_t* region, int64_t now, bool force) {
  int64_t expire = mi_atomic_load_relaxed(&region->purge_expire);
  if (expire == 0) return;
  if (!force && now < expire) {
    mi_region_note_expire(expire);   // not yet: keep it registered as a future purge
    return;
  }
  mi_atomic_store_relaxed(&region->purge_expire, 0);
  // the young generation was freed before the expiry: a delay past it, it is due too
  if (force || now >= expire + _mi_purge_delay()) {
    mi_region_purge_blocks(region, &region->purge_young, mi_atomic_load_acquire(&region->purge_young));
  }
  mi_region_purge_blocks(region, &region->purge, mi_atomic_load_acquire(&region->purge));
  mi_region_promote_young(region);
  // what is pending now (the promoted generation, or blocks we raced) is due one delay later
  if (mi_atomic_load_relaxed(&region->purge) != 0 || mi_atomic_load_relaxed(&region->purge_young) != 0) {
    int64_t zero = 0;
    const int64_t next = now + _mi_purge_delay();
    if (mi_atomic_cas_strong_acq_rel(&region->purge_expire, &zero, next)) mi_region_note_expire(next);
  }
}

// Purge what has expired, if anything has: called on every segment
// allocation and free, so freed segments go back to the OS without the
// program calling mi_collect. Costs one clock read when nothing is due.
void _mi_region_try_purge(void) {
  if (_mi_due_at(MI_DUE_REGION) == 0) return;
  const int64_t next = _mi_due_claim(MI_DUE_REGION, _mi_prim_clock_now(), false);
  if (next == 0) return;   // not yet, or another thread does it
  if (!_mi_region_collect(false, false)) mi_region_note_expire(next);   // (a fork: later)
}

// Purge what is due (everything if forced), and unmap regions nothing uses.
// Purges hold region blocks for a moment: a housekeeping section (init.c),
// skipped while a fork is under way (false). A forced collect of another
// thread skips the blocks we hold, and waits for us to be done.
bool _mi_region_collect(bool force, bool free_unused) {
  if (!_mi_housekeeping_enter()) return false;
  const size_t count = mi_atomic_load_acquire(&regions_count);
  const int64_t now = _mi_prim_clock_now();
  for (size_t i = 0; i < count; i++) {
    if (mi_atomic_load_acquire(&regions[i].state) != MI_REGION_LIVE) continue;
    mi_region_purge(&regions[i], now, force);
  }
  if (free_unused) mi_regions_free_unused();
  _mi_housekeeping_leave();
  return true;
}

// Whole-structure check, for tests: does every block claimed in a live region
// belong to a segment the segment map knows? (A block a purge or a claimer
// holds for a moment does not.) Only meaningful while no other thread runs
// allocator code: in a forked child, or a quiescent process.
static uintptr_t regions_covered[MI_REGION_MAX];

static void mi_region_cover(mi_segment_t* segment, void* arg) {
  (void)arg;
  if (segment->memid.region_idx == 0) return;
  const size_t blocks = _mi_divide_up(segment->mem_size, MI_SEGMENT_SIZE);
  regions_covered[segment->memid.region_idx - 1] |= mi_bit_mask(blocks, segment->memid.block_idx);
}

bool _mi_regions_check_claims(void) {
  memset(regions_covered, 0, sizeof(regions_covered));
  _mi_segment_map_visit(&mi_region_cover, NULL);
  const size_t count = mi_atomic_load_acquire(&regions_count);
  bool ok = true;
  for (size_t i = 0; i < count; i++) {
    if (mi_atomic_load_acquire(&regions[i].state) != MI_REGION_LIVE) continue;
    const uintptr_t stray = mi_atomic_load_relaxed(&regions[i].in_use) & ~regions_covered[i];
    if (stray != 0) {
      _mi_warning_message("region %zu: blocks 0x%zx are claimed by no segment\n", i, (size_t)stray);
      ok = false;
    }
  }
  return ok;
}

// ---------------------------------------------------------------------------
// Reserved huge OS pages
// ---------------------------------------------------------------------------

#define MI_HUGE_REGIONS  (MI_HUGE_OS_PAGE_SIZE / MI_REGION_SIZE)   // regions per reserved GiB

// Make the reserved GiB at `start` into regions of the table; false (and the
// GiB unmapped) if the table has no room left for them.
static bool mi_region_add_reserved(void* start, size_t node) {
  size_t idx[MI_HUGE_REGIONS];
  for (size_t i = 0; i < MI_HUGE_REGIONS; i++) {
    idx[i] = mi_region_slot_claim();
    if (idx[i] == SIZE_MAX) {
      while (i > 0) mi_region_slot_release(idx[--i]);
      _mi_os_free_ex(start, MI_HUGE_OS_PAGE_SIZE, MI_HUGE_OS_PAGE_SIZE);
      return false;
    }
  }
  for (size_t i = 0; i < MI_HUGE_REGIONS; i++) {
    mi_region_publish(idx[i], (uint8_t*)start + i * MI_REGION_SIZE, true, true, true, true, node, true);
  }
  mi_atomic_add_acq_rel(&regions_reserved, MI_HUGE_REGIONS);
  return true;
}

// Reserve `pages` GiB of huge OS pages for `numa_node` (-1: none), in at most
// about `timeout_msecs` (0: no limit); *reserved counts the GiBs obtained.
static int mi_reserve_huge_at(size_t pages, int numa_node, size_t timeout_msecs, size_t* reserved) {
  *reserved = 0;
  if (pages == 0) return 0;
  char where[32] = "";
  if (numa_node >= 0) snprintf(where, sizeof(where), " on node %d", numa_node);
  if (MI_SECURE_GUARDS || MI_INTPTR_SIZE < 8) {
    // (secure: segments in pinned memory could have no guard pages, and would never get any)
    _mi_warning_message("huge OS pages: none reserved of %zu GiB requested%s: not in %s\n",
                        pages, where, (MI_SECURE_GUARDS ? "secure builds" : "32-bit builds"));
    return ENOMEM;
  }
  const size_t node = (numa_node < 0 ? MI_NUMA_ANY : (size_t)numa_node);
  const int64_t start = _mi_prim_clock_now();
  size_t gib_1g = 0, gib_2m = 0;
  int err = 0;
  for (size_t i = 0; i < pages; i++) {
    const int64_t elapsed = _mi_prim_clock_now() - start;
    if (i > 0 && timeout_msecs > 0) {
      // stop at the limit, or when the pages so far project beyond twice the limit (as 1.6)
      const int64_t projected = (elapsed / (int64_t)i) * (int64_t)pages;
      if (elapsed >= (int64_t)timeout_msecs || projected > 2 * (int64_t)timeout_msecs) { err = ETIMEDOUT; break; }
    }
    size_t page_size = 0;
    int oserr = 0;
    void* p = _mi_os_alloc_huge_os_page(numa_node, &page_size, &oserr);
    if (p == NULL) {
      _mi_warning_message("huge OS pages: GiB %zu of %zu%s: the OS gives no free huge pages of 1 GiB or 2 MiB (error %d%s)\n",
                          i + 1, pages, where, oserr,
                          (oserr == EPERM ? ": the process may not lock pages in memory (Windows: the account needs the privilege \"Lock pages in memory\")" : ""));
      err = ENOMEM;
      break;
    }
    if (!mi_region_add_reserved(p, node)) { err = ENOMEM; break; }
    if (page_size == MI_HUGE_OS_PAGE_SIZE) gib_1g++; else gib_2m++;
    *reserved += 1;
    _mi_verbose_message("huge OS pages: 1 GiB at %p%s: %s (%zu ms)\n", p, where,
                        (page_size == MI_HUGE_OS_PAGE_SIZE ? "one 1 GiB page" : "512 pages of 2 MiB (no 1 GiB page free)"),
                        (size_t)(_mi_prim_clock_now() - start - elapsed));
  }
  const size_t msecs = (size_t)(_mi_prim_clock_now() - start);
  if (*reserved == 0) {
    _mi_warning_message("huge OS pages: none reserved of %zu GiB requested%s (%zu ms)%s\n", pages, where, msecs,
                        (err == ETIMEDOUT ? ": time limit reached" : ""));
    return err;
  }
  _mi_verbose_message("huge OS pages: reserved %zu GiB of %zu requested%s: %zu page%s of 1 GiB, %zu pages of 2 MiB, in %zu ms%s\n",
                      *reserved, pages, where, gib_1g, (gib_1g == 1 ? "" : "s"), gib_2m * (MI_HUGE_OS_PAGE_SIZE / (2 * MiB)), msecs,
                      (err == ETIMEDOUT ? " (stopped at the time limit)" : ""));
  return (err == ETIMEDOUT ? ETIMEDOUT : 0);
}

int mi_reserve_huge_os_pages_at(size_t pages, int numa_node, size_t timeout_msecs) mi_attr_noexcept {
  if (numa_node < -1) numa_node = -1;
  if (numa_node >= 0) numa_node = (int)((size_t)numa_node % _mi_os_numa_node_count());
  size_t reserved;
  return mi_reserve_huge_at(pages, numa_node, timeout_msecs, &reserved);
}

// `pages / nodes` GiB per node (the remainder to the lowest nodes), each node
// `timeout / nodes + 50` ms; stops at the first node that fails.
static int mi_reserve_huge_interleave(size_t pages, size_t numa_nodes, size_t timeout_msecs, size_t* reserved) {
  *reserved = 0;
  if (pages == 0) return 0;
  const size_t nodes = (numa_nodes > 0 ? numa_nodes : _mi_os_numa_node_count());
  const size_t timeout_per = (timeout_msecs == 0 ? 0 : (timeout_msecs / nodes) + 50);
  for (size_t node = 0; node < nodes; node++) {
    const size_t node_pages = (pages / nodes) + (node < (pages % nodes) ? 1 : 0);
    if (node_pages == 0) break;
    size_t got = 0;
    const int err = mi_reserve_huge_at(node_pages, (int)(node % _mi_os_numa_node_count()), timeout_per, &got);
    *reserved += got;
    if (err != 0) return err;
  }
  return 0;
}

int mi_reserve_huge_os_pages_interleave(size_t pages, size_t numa_nodes, size_t timeout_msecs) mi_attr_noexcept {
  size_t reserved;
  return mi_reserve_huge_interleave(pages, numa_nodes, timeout_msecs, &reserved);
}

int mi_reserve_huge_os_pages(size_t pages, double max_secs, size_t* pages_reserved) mi_attr_noexcept {
  _mi_warning_message("mi_reserve_huge_os_pages is deprecated: use mi_reserve_huge_os_pages_interleave/at instead\n");
  size_t reserved = 0;
  const size_t timeout = (max_secs > 0 && max_secs < 1e9 ? (size_t)(max_secs * 1000.0) : 0);   // (0: no limit)
  const int err = mi_reserve_huge_interleave(pages, 0, timeout, &reserved);
  if (pages_reserved != NULL) *pages_reserved = reserved;
  return err;
}

// ---------------------------------------------------------------------------
// Usage (mallinfo: segment.c)
// ---------------------------------------------------------------------------

// Bytes of freed region blocks that may still be resident (dirty: used and
// not purged since), and the part of them a purge gives back (not in fixed
// large or huge OS pages, which are never purged).
void _mi_regions_usage(size_t* free_resident, size_t* releasable) {
  *free_resident = 0;
  *releasable = 0;
  const size_t count = mi_atomic_load_acquire(&regions_count);
  for (size_t i = 0; i < count; i++) {
    const mem_region_t* region = &regions[i];
    if (mi_atomic_load_acquire(&region->state) != MI_REGION_LIVE) continue;
    const uintptr_t free_dirty = mi_atomic_load_relaxed(&region->dirty) & ~mi_atomic_load_relaxed(&region->in_use);
    const size_t bytes = mi_popcount(free_dirty) * MI_SEGMENT_SIZE;
    *free_resident += bytes;
    if (mi_atomic_load_relaxed(&region->is_pinned) == 0) *releasable += bytes;
  }
}
