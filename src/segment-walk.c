/* ----------------------------------------------------------------------------
  segment-walk.c -- the walks over every segment of the process.

  Three jobs read or change segments that other threads own, each by
  visiting every segment through the segment map (segment-map.c): the trim
  (malloc_trim, mi_collect(true): the free pages of every thread's segments
  are purged now), the usage figures behind mallinfo (a walk of the page
  descriptors), and the fork child's side (the segments of the threads the
  child does not have get an owner id no thread can have). A walk holds each
  segment while it reads it (_mi_segment_map_visit_held), so that its owner
  cannot free it meanwhile; the trim also takes the segment's trim lock
  (segment.c, "The trim lock").

  It may call: the segment map, the OS layer's purge, the regions' usage
  figures, and the page layout of segment.c (segment-internal.h). Nothing
  here runs on an allocation or a free.
-----------------------------------------------------------------------------*/
#include "segment-internal.h"
#include "prim/prim.h"

// ---------------------------------------------------------------------------
// Trim: the free pages of every thread's segments go back now
//
// malloc_trim and mi_collect(true), from any thread. The pending purges
// (the shared segments' pages, regions, the sweep of abandoned pages, huge
// blocks) are forced by the collect; this reaches what they cannot: free
// pages that are on no list at all (the option page_reset off, pages of
// reused memory a new segment never claimed) and the segments in the segment
// cache. Each segment of slices (huge segments have no free page while they
// live) is held through the segment map, so that it is not freed meanwhile,
// and its trim lock is taken unless a thread holds it for a while (then the
// segment is skipped: best effort); its free pages that hold memory are
// purged, one system call per run of adjacent pages, but for those a shared
// purge pass holds (its `purging` pages). Retired pages (empty pages a heap keeps for a few slow-path
// events, at most MI_RETIRE_MAX_SIZE per heap) are in use and stay; their
// free lists live in their memory. A housekeeping section (init.c): a fork
// waits for it, so no child has a lock held by a thread it does not have.
// ---------------------------------------------------------------------------

#define MI_TRIM_LOCK_TRIES  (64)   // a lock its owner holds is tried this often, then the segment is skipped

typedef struct mi_trim_s {
  uintptr_t id;       // the trim's lock id: the thread id + 2, never a thread id
  size_t    purged;   // bytes purged
  size_t    skipped;  // segments whose owner held the lock
} mi_trim_t;

// A held segment: purge its free pages that hold memory (committed, not
// purged, and used since their memory was fresh).
static void mi_segment_trim_visit(mi_segment_t* segment, void* arg) {
  mi_trim_t* const trim = (mi_trim_t*)arg;
  // (the kind and the layout do not change while the segment lives)
  if (segment->page_kind == MI_PAGE_HUGE || segment->mem_is_pinned) return;
  if (mi_atomic_load_relaxed(&segment->thread_id) == MI_THREAD_ID_VANISHED) return;   // (forked child: never touched)
  if (!mi_segment_trim_lock_acquire(segment, trim->id, MI_TRIM_LOCK_TRIES)) {
    trim->skipped++;
    return;
  }
  mi_assert_internal(mi_segment_is_valid_cookie(segment));
  uint64_t resident = 0;
  for (uint64_t m = segment->free_mask & ~segment->trim_purged & ~segment->purging; m != 0; m &= m - 1) {   // (pages a shared purge pass holds: its own)
    const mi_page_t* page = &segment->pages[mi_ctz(m)];
    if (page->is_committed && !page->is_purged && !page->is_zero_init) resident |= mi_segment_page_bit(page);
  }
  // (the trim writes no descriptor: the owner marks them at its next lock)
  size_t bytes;
  segment->trim_purged |= _mi_segment_purge_run(segment, resident, false, &bytes);   // (counted in the `reset` row, as any purge)
  trim->purged += bytes;
  mi_atomic_store_release(&segment->trim_lock, 0);
}

// Purge the free pages of every thread's segments; returns the bytes purged.
size_t _mi_segments_trim(void) {
  if (!_mi_housekeeping_enter()) return 0;   // a fork is under way: nothing now
  mi_trim_t trim = { _mi_thread_id() + 2, 0, 0 };
  mi_prim_sigmask_t saved;
  _mi_prim_thread_signals_block(&saved);   // (no handler of ours may need a lock we hold)
  _mi_segment_map_visit_held(&mi_segment_trim_visit, &trim);
  _mi_prim_thread_signals_restore(&saved);
  _mi_housekeeping_leave();
  return trim.purged;
}

// ---------------------------------------------------------------------------
// Usage figures (mallinfo: alloc-glibc.c)
//
// A walk of the page descriptors, not of blocks: O(pages), a few loads per
// page (64 per 4 MiB segment of small blocks), every segment held through the
// segment map while it is read. The counts it reads (a page's used blocks,
// the free state of its pages) are the owners' plain fields, which they
// update on every malloc and free without synchronisation: a count read while
// it changes is off by what changes, so the figures are a moment's
// approximation. The walk is built without ThreadSanitizer's instrumentation
// (mi_decl_no_tsan): making the counts atomic would cost the fast paths, and
// the walk only reads them (the remote-free count is read atomically).
// ---------------------------------------------------------------------------

static mi_decl_no_tsan void mi_segment_usage_visit(mi_segment_t* segment, void* arg) {
  mi_usage_t* const usage = (mi_usage_t*)arg;
  if (segment->page_kind == MI_PAGE_HUGE) {   // (bytes: the `huge` and `giant` statistics rows)
    usage->huge_count++;
    return;
  }
  usage->arena += segment->segment_size;
  const uint64_t trim_purged = segment->trim_purged;
  for (size_t i = 0; i < segment->capacity; i++) {
    const mi_page_t* page = &segment->pages[i];
    if (!page->segment_in_use) {
      usage->free_chunks++;
      if (!segment->mem_is_pinned && page->is_committed && !page->is_purged && !page->is_zero_init && ((trim_purged >> i) & 1) == 0) {
        size_t psize;
        _mi_segment_page_start(segment, page, 0, &psize, NULL);
        usage->releasable += psize;
      }
      continue;
    }
    // (under ThreadSanitizer the atomic fields are read plainly: an atomic
    // read would still be instrumented, and it races with the owner's memset
    // of a descriptor it clears, a plain write)
    #if defined(MI_TSAN)
    const uint8_t flags = *(const volatile uint8_t*)&page->xflags;
    #else
    const uint8_t flags = mi_page_flags(page);
    #endif
    if ((flags & MI_PAGE_CONTINUATION) != 0) continue;
    const size_t bsize = page->xblock_size;
    const size_t reserved = page->reserved;
    size_t live = page->used;
    #if MI_TF_COUNTED
    #if defined(MI_TSAN)
    const uintptr_t tf = *(const volatile uintptr_t*)&page->xthread_free;
    #else
    const uintptr_t tf = mi_atomic_load_relaxed(&((mi_page_t*)page)->xthread_free);
    #endif
    const size_t remote = (size_t)(tf >> MI_TF_COUNT_SHIFT);
    live = (live > remote ? live - remote : 0);   // freed by other threads, not collected yet
    #endif
    if (live > reserved) live = reserved;          // (read while it changed)
    if (bsize < MI_HUGE_BLOCK_SIZE) usage->in_use += live * bsize;
    if (live < reserved) usage->free_chunks++;
  }
}

// The figures of the whole process: the walk, the regions' freed blocks that
// are still resident, and the huge blocks' bytes from the statistics.
void _mi_segments_usage(mi_usage_t* usage) {
  memset(usage, 0, sizeof(*usage));
  mi_prim_sigmask_t saved;
  _mi_prim_thread_signals_block(&saved);   // (a handler that freed a held segment would wait for itself)
  _mi_segment_map_visit_held(&mi_segment_usage_visit, usage);   // (no housekeeping section: it takes no lock, and a forked child lets go of what it held)
  _mi_prim_thread_signals_restore(&saved);
  size_t region_free = 0, region_releasable = 0;
  _mi_regions_usage(&region_free, &region_releasable);
  usage->arena += region_free;
  usage->releasable += region_releasable;
  const int64_t huge = mi_atomic_load_relaxed(&_mi_stats_main.huge.current) + mi_atomic_load_relaxed(&_mi_stats_main.giant.current);
  usage->huge = (huge > 0 ? (size_t)huge : 0);
}

// ---------------------------------------------------------------------------
// After fork: only the forking thread exists in the child
// ---------------------------------------------------------------------------

// Every segment is visited (through the segment map: those in regions, huge
// ones and those mapped straight from the OS alike). A segment of a thread
// that does not exist in the child may be half-way through an update (that
// thread was running when fork() copied memory), so the child must never
// reuse it: it gets an owner id no thread can have, so a new thread that
// inherits the vanished thread's stack (and so its thread id) cannot mistake
// it for its own. Frees into it are remote frees that are never collected:
// the child leaks that memory, which 1.6 did too. (Only huge segments have
// an owner thread: the shared ones have MI_THREAD_ID_SHARED.) An abandoned
// huge segment stays abandoned, for the thread that frees its block: it is
// claimed by a CAS of its owner id from 0, which no vanished thread
// completed if the id is still 0. Nothing is written
// but the owner id (few copy-on-write faults). A page of the forking thread
// that a vanished thread left in DELAYED_FREEING goes back to USE_DELAYED_FREE.
static void mi_segment_fork_child(mi_segment_t* segment, void* arg) {
  (void)arg;
  const uintptr_t owner = mi_atomic_load_relaxed(&segment->thread_id);
  if (owner == _mi_thread_id() || owner == MI_THREAD_ID_SHARED) {
    for (size_t i = 0; i < segment->capacity; i++) {
      mi_page_t* page = &segment->pages[i];
      if (!mi_page_is_used_page(page)) continue;
      mi_thread_free_t tf = mi_atomic_load_relaxed(&page->xthread_free);
      if (mi_tf_delayed(tf) == MI_DELAYED_FREEING) {
        mi_atomic_store_relaxed(&page->xthread_free, mi_tf_set_delayed(tf, MI_USE_DELAYED_FREE));
      }
    }
  }
  else if (owner != MI_THREAD_ID_VANISHED && owner != 0) {
    mi_atomic_store_release(&segment->thread_id, MI_THREAD_ID_VANISHED);
  }
}

void _mi_segments_fork_child_owners(void) {
  _mi_segment_map_fork_child();   // (a visit of a thread the child does not have holds nothing there)
  _mi_segment_map_visit(&mi_segment_fork_child, NULL);
}
