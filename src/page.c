/* ----------------------------------------------------------------------------
  page.c -- pages: free-list extension and collection, retirement, and the
  generic (slow) allocation path.

  A page has three free lists (see mimalloc-types.h): `free` is popped by
  malloc, `local_free` receives the owner's frees, `thread_free` the other
  threads' frees. Because owner frees never go to `free`, the free list runs
  empty after a bounded number of allocations, and then the generic path
  runs: it processes the heap's delayed frees, calls the deferred-free hook,
  collects the page's other lists, and moves on to another page when needed.
  That bound is what makes the hook's heartbeat deterministic.

  Free lists are extended lazily, one OS page worth of blocks at a time, so
  resident memory follows use. A page whose last block is freed is *retired*
  for a few slow-path events when it is the only page of its size class, to
  avoid thrashing in "free all, allocate again" loops.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

// ---------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------

#if (MI_DEBUG >= 3)
static size_t mi_page_list_count(mi_page_t* page, mi_block_t* head) {
  size_t count = 0;
  while (head != NULL) {
    mi_assert_internal(page == _mi_ptr_page_of(head));
    count++;
    head = mi_block_next(page, head);
  }
  return count;
}

static bool mi_page_list_is_valid(mi_page_t* page, mi_block_t* p) {
  size_t psize;
  uint8_t* page_area = _mi_page_start(_mi_page_segment(page), page, &psize);
  mi_block_t* start = (mi_block_t*)page_area;
  mi_block_t* end = (mi_block_t*)(page_area + psize);
  while (p != NULL) {
    if (p < start || p >= end) return false;
    p = mi_block_next(page, p);
  }
  return true;
}

static bool mi_page_is_valid_init(mi_page_t* page) {
  mi_assert_internal(page->xblock_size > 0);
  mi_assert_internal(page->used <= page->capacity);
  mi_assert_internal(page->capacity <= page->reserved);
  mi_segment_t* segment = _mi_page_segment(page);
  uint8_t* start = _mi_page_start(segment, page, NULL);
  mi_assert_internal(start == _mi_segment_page_start(segment, page, page->xblock_size, NULL, NULL));
  mi_assert_internal(mi_page_list_is_valid(page, page->free));
  mi_assert_internal(mi_page_list_is_valid(page, page->local_free));
  mi_block_t* tfree = mi_page_thread_free(page);
  mi_assert_internal(mi_page_list_is_valid(page, tfree));
  size_t free_count = mi_page_list_count(page, page->free) + mi_page_list_count(page, page->local_free);
  mi_assert_internal(page->used + free_count == page->capacity);
  return true;
}

static bool mi_page_is_valid(mi_page_t* page) {
  mi_assert_internal(mi_page_is_valid_init(page));
  if (mi_page_heap(page) != NULL) {
    mi_segment_t* segment = _mi_page_segment(page);
    mi_assert_internal(!_mi_process_is_initialized || segment->thread_id == mi_page_heap(page)->thread_id || segment->thread_id == 0 || segment->shared);
  }
  return true;
}
#endif

// ---------------------------------------------------------------------------
// The delayed-free state
// ---------------------------------------------------------------------------

void _mi_page_use_delayed_free(mi_page_t* page, mi_delayed_t delay, bool override_never) {
  while (!_mi_page_try_use_delayed_free(page, delay, override_never)) {
    mi_atomic_yield();
  }
}

bool _mi_page_try_use_delayed_free(mi_page_t* page, mi_delayed_t delay, bool override_never) {
  mi_thread_free_t tfreex;
  mi_delayed_t old_delay;
  // acquire: whatever a remote freer did before leaving DELAYED_FREEING is
  // visible before the owner goes on to change (or clear) the page
  mi_thread_free_t tfree = mi_atomic_load_acquire(&page->xthread_free);
  size_t yield_count = 0;
  do {
    tfreex = mi_tf_set_delayed(tfree, delay);
    old_delay = mi_tf_delayed(tfree);
    if (mi_unlikely(old_delay == MI_DELAYED_FREEING)) {
      if (yield_count >= 4) return false;   // give up after a few spins; caller retries
      yield_count++;
      mi_atomic_yield();
      tfree = mi_atomic_load_acquire(&page->xthread_free);
      continue;
    }
    if (delay == old_delay) break;                                  // nothing to do
    if (!override_never && old_delay == MI_NEVER_DELAYED_FREE) break; // leave sticky state
  } while ((old_delay == MI_DELAYED_FREEING) ||
           !mi_atomic_cas_weak_acq_rel(&page->xthread_free, &tfree, tfreex));
  return true;
}

// ---------------------------------------------------------------------------
// Collecting the free lists
// ---------------------------------------------------------------------------

// Start a page whose blocks are all free over: no lists, nothing threaded
// (the next allocation extends it again, in address order).
static void mi_page_restart(mi_page_t* page) {
  mi_assert_internal(mi_page_all_free(page));
  mi_heap_t* const heap = mi_page_heap(page);   // NULL: abandoned
  mi_stat_touched_update((heap != NULL ? &heap->tld->stats : NULL),
                         -(int64_t)((size_t)page->capacity * mi_page_block_size(page)));
  page->free = NULL;
  page->local_free = NULL;
  page->capacity = 0;
  page->is_zero = false;
  page->is_zero_init = false;
}

#if MI_SECURE_RANDOM
// Secure builds never hand out the block freed last as the next one: the
// owner's freed blocks become the (empty) allocation list without their
// first block, the one freed last, which stays on local_free alone and comes
// out after the others. (One load: swapping the list's first two blocks took
// three, each a cache miss where other threads freed them.) False for a lone
// block (it waits while the page can still be extended).
static bool mi_page_take_local_free_held(mi_page_t* page) {
  mi_assert_internal(page->free == NULL && page->local_free != NULL);
  mi_block_t* const first = page->local_free;
  mi_block_t* const second = mi_block_next(page, first);
  if (second == NULL) return false;
  mi_block_set_next(page, first, NULL);
  page->free = second;
  page->is_zero = false;
  return true;
}

// The owner's freed blocks become the (empty) allocation list, but for the
// one freed last; a lone one only when the page has no room to grow (else it
// waits). True when the allocation list has blocks now.
static bool mi_page_recycle_local_free(mi_page_t* page) {
  if (mi_page_take_local_free_held(page)) return true;
  if (page->capacity < page->reserved) return false;
  _mi_page_take_local_free(page);
  return true;
}
#endif

// Move the blocks other threads freed into local_free. Not forced, a list
// that could only be appended by walking it (both of the owner's lists hold
// blocks) stays where it is unless it frees the whole page: the page has
// room anyway, and the walk would miss the cache on every block.
static void mi_page_thread_free_collect(mi_page_t* page, bool force) {
  mi_block_t* head;
  mi_thread_free_t tfreex;
  mi_thread_free_t tfree = mi_atomic_load_relaxed(&page->xthread_free);
  const size_t max_count = page->capacity;
  const bool both_lists = (page->free != NULL && page->local_free != NULL);
  if (!force && both_lists) {
    const size_t pending = mi_tf_count(tfree);
    if (pending > 0 && pending < page->used) return;
  }
  do {
    head = mi_tf_block(tfree);
    tfreex = mi_tf_clear(tfree);
  } while (!mi_atomic_cas_weak_acq_rel(&page->xthread_free, &tfree, tfreex));
  if (head == NULL) return;
  size_t count = mi_tf_count(tfree);

  // (not in secure builds: their emptied pages keep their random order)
  if (!MI_SECURE_RANDOM && count > 0 && count <= max_count && both_lists && count == page->used) {
    // every block is free again: start over instead of joining the lists
    #if (MI_DEBUG >= 3)
    if (mi_page_list_count(page, head) != count) {
      _mi_misuse_message(EFAULT, "corrupted thread-free list\n");
      return;
    }
    #endif
    page->used = 0;
    mi_page_restart(page);
    return;
  }

  #if (MI_DEBUG == 0)
  // the count came with the list: no walk when one of the owner's lists is
  // empty (the usual case: the allocation list ran out). Secure builds keep
  // the block freed last from being the next one out: the list becomes
  // local_free (taken as mi_page_take_local_free_held takes it), or, when
  // the allocation list is empty and local_free is not, local_free becomes
  // the allocation list without its first block, and the list waits behind
  // that block. (Their links are checked as they are popped, as the walk
  // would have.)
  if (count > 0 && count <= max_count && !both_lists) {
    bool taken = true;
    #if MI_SECURE_RANDOM
    if (page->local_free == NULL) {
      page->local_free = head;
    }
    else {
      mi_block_t* const held = page->local_free;
      taken = mi_page_take_local_free_held(page);   // (a lone block: walked, below)
      if (taken) mi_block_set_next(page, held, head);
    }
    #else
    if (page->free == NULL) { page->free = head; page->is_zero = false; }
    else page->local_free = head;
    #endif
    if (taken) {
      page->used -= (uint32_t)count;
      return;
    }
  }
  #endif

  // find the tail, counting; a list longer than the capacity (or than its
  // recorded count) is corrupt
  const size_t max_walk = (count > 0 && count <= max_count ? count : max_count);
  size_t n = 1;
  mi_block_t* tail = head;
  mi_block_t* next;
  while ((next = mi_block_next(page, tail)) != NULL && n <= max_walk) {
    n++;
    tail = next;
  }
  if (n > max_walk || (count > 0 && n != count)) {
    _mi_misuse_message(EFAULT, "corrupted thread-free list\n");
    return;   // the list is dropped: leaking beats corrupting
  }
  mi_block_set_next(page, tail, page->local_free);
  page->local_free = head;
  page->used -= (uint32_t)n;
}

void _mi_page_free_collect(mi_page_t* page, bool force) {
  mi_assert_internal(page != NULL);
  if (force || mi_page_has_thread_free(page)) {
    mi_page_thread_free_collect(page, force);
  }
  if (page->local_free != NULL) {
    #if MI_SECURE_RANDOM
    if (page->free == NULL && !force) {
      mi_page_recycle_local_free(page);
      return;
    }
    #endif
    if (mi_likely(page->free == NULL)) {
      _mi_page_take_local_free(page);   // the usual case: recycle local_free as the allocation list
    }
    else if (force) {
      // append local_free to free (only when forced: a linear walk)
      mi_block_t* tail = page->local_free;
      mi_block_t* next;
      while ((next = mi_block_next(page, tail)) != NULL) tail = next;
      mi_block_set_next(page, tail, page->free);
      page->free = page->local_free;
      page->local_free = NULL;
      page->is_zero = false;
    }
  }
  mi_assert_internal(!force || page->local_free == NULL);
}

// ---------------------------------------------------------------------------
// Reclaim, abandon and free of whole pages
// ---------------------------------------------------------------------------

// A page of an abandoned segment joins `heap` (its heap is already set).
void _mi_page_reclaim(mi_heap_t* heap, mi_page_t* page) {
  mi_assert_expensive(mi_page_is_valid_init(page));
  mi_assert_internal(mi_page_heap(page) == heap);
  mi_assert_internal(mi_tf_delayed(mi_atomic_load_relaxed(&page->xthread_free)) != MI_NEVER_DELAYED_FREE);
  mi_page_set_in_full(page, false);   // reclaimed pages start in their bin queue
  mi_page_queue_t* pq = _mi_heap_page_queue_of(heap, page);
  pq->taken++;
  _mi_page_queue_push(heap, pq, page);
}

static inline size_t mi_page_retire_size(const mi_page_t* page) {
  const mi_segment_t* segment = _mi_page_segment(page);
  if (segment->page_kind == MI_PAGE_SLICES) return mi_page_block_size(page) * page->reserved;   // (a run of slices: about its blocks)
  return ((size_t)1 << segment->page_shift);
}

// A retired page is used again (or freed): it no longer counts.
void _mi_page_unretire(mi_heap_t* heap, mi_page_t* page) {
  page->retire_expire = 0;
  if (mi_unlikely(page->retire_counted)) {
    page->retire_counted = false;
    mi_assert_internal(heap->page_retired_size >= mi_page_retire_size(page));
    heap->page_retired_size -= mi_page_retire_size(page);
  }
}

// Take a page out of its heap for good: it becomes abandoned.
void _mi_page_abandon(mi_page_t* page, mi_page_queue_t* pq) {
  mi_assert_internal(page != NULL);
  mi_assert_expensive(mi_page_is_valid(page));
  mi_heap_t* pheap = mi_page_heap(page);
  mi_segments_tld_t* segments_tld = &pheap->tld->segments;
  _mi_page_unretire(pheap, page);
  _mi_page_queue_remove(pq, page);
  // remote frees from now on go straight to thread_free
  mi_assert_internal(mi_tf_delayed(mi_atomic_load_relaxed(&page->xthread_free)) == MI_NEVER_DELAYED_FREE);
  _mi_segment_page_abandon(page, segments_tld);   // (the page has no heap from here on)
}

// Give an empty page back to its segment.
void _mi_page_free(mi_page_t* page, mi_page_queue_t* pq, bool force) {
  mi_assert_internal(page != NULL);
  mi_assert_expensive(mi_page_is_valid(page));
  mi_assert_internal(pq == _mi_heap_page_queue_of(mi_page_heap(page), page));
  mi_assert_internal(mi_page_thread_free_flag_ok(page));
  mi_page_set_flag(page, MI_PAGE_HAS_ALIGNED | MI_PAGE_HAS_SAMPLED, false);   // no live block: none is aligned or sampled
  mi_heap_t* heap = mi_page_heap(page);
  mi_segments_tld_t* segments_tld = &heap->tld->segments;
  _mi_page_unretire(heap, page);
  _mi_page_queue_remove(pq, page);
  mi_page_set_heap(page, NULL);
  _mi_segment_page_free(page, force, segments_tld);
}

// Were the blocks of an empty page freed in (or against) address order?
// Looks at the first links of local_free only: the blocks are in the cache.
static bool mi_page_free_list_is_ordered(const mi_page_t* page) {
  const intptr_t bsize = (intptr_t)mi_page_block_size(page);
  const mi_block_t* block = page->local_free;
  size_t steps = 0, adjacent = 0;
  while (block != NULL && steps < 16) {
    const mi_block_t* next = mi_block_next(page, block);
    if (next == NULL) break;
    const intptr_t d = (intptr_t)((uintptr_t)next - (uintptr_t)block);
    if (d == bsize || d == -bsize) adjacent++;
    steps++;
    block = next;
  }
  return (adjacent * 4 >= steps * 3);   // 3 of 4 links go to a neighbour
}

// The last block of a page was freed. Keep the page in its queue for a while
// (not huge ones): at the front, so the next allocations of its size reuse
// it, its blocks already threaded, instead of a page that must be claimed
// from the segment and set up again. That is what "allocate a batch, free it
// all, again" needs (1.6 kept only the last page of a size class, so every
// other page the batch emptied was given back and re-initialised: glibc-simple
// spent 13% of its instructions in mi_page_extend_free). Retired pages that
// stay unused are freed after a few fresh-page requests of the heap
// (_mi_heap_collect_retired), at most MI_RETIRE_MAX_SIZE of them per heap.
void _mi_page_retire(mi_page_t* page) mi_attr_noexcept {
  mi_assert_internal(page != NULL);
  mi_assert_expensive(mi_page_is_valid(page));
  mi_assert_internal(mi_page_all_free(page));
  mi_page_set_flag(page, MI_PAGE_HAS_ALIGNED | MI_PAGE_HAS_SAMPLED, false);   // no live block: none is aligned or sampled
  mi_heap_t* heap = mi_page_heap(page);
  mi_page_queue_t* pq = _mi_heap_page_queue_of(heap, page);
  if (mi_unlikely(page->xblock_size > MI_LARGE_OBJ_SIZE_MAX)) {
    _mi_page_free(page, pq, false);
    return;
  }
  if (mi_unlikely(mi_page_is_in_full(page))) {
    // a page of one block (large), emptied by the free of its block: it is
    // retired in its bin queue like any other
    _mi_page_unfull(page);
    pq = _mi_heap_page_queue_of(heap, page);
  }
  if (pq->first != page || pq->last != page) {
    // not the only page of its size: within the heap's bound, at the front
    if (!page->retire_counted) {
      const size_t psize = mi_page_retire_size(page);
      if (heap->page_retired_size + psize > MI_RETIRE_MAX_SIZE) {
        _mi_page_free(page, pq, false);
        return;
      }
      heap->page_retired_size += psize;
      page->retire_counted = true;
    }
    if (pq->first != page) {
      _mi_page_queue_remove(pq, page);
      _mi_page_queue_push(heap, pq, page);
    }
  }
  if (!MI_SECURE_RANDOM && page->free == NULL && !mi_page_free_list_is_ordered(page)) {   // (else `free` serves first)
    // start again with a free list in address order, threaded lazily: the
    // blocks came back in random order, and handing them out in that order
    // would scatter the next batch over the page (bench batch: 0.6 s with
    // this, 0.8-1.1 s without). Not in secure builds: their order is random
    // by design, and the block freed last must not be the next one out.
    mi_page_restart(page);
  }
  page->retire_expire = (pq->retire_long ? MI_RETIRE_CYCLES_LONG : page->xblock_size <= MI_SMALL_OBJ_SIZE_MAX ? MI_RETIRE_CYCLES_SMALL : MI_RETIRE_CYCLES_LARGE);
  const size_t index = (size_t)(pq - heap->pages);
  if (index < heap->page_retired_min) heap->page_retired_min = index;
  if (index > heap->page_retired_max) heap->page_retired_max = index;
  mi_heap_stat_counter_increase(heap, pages_retired, 1);   // debug statistics only: a hot path
}

// Count down the retired pages at the front of each queue that has some;
// free them when expired (or all now; `purge_now`: their memory too). Called
// on every fresh-page request of the heap (and collections): the count of
// those is the heap's retire clock.
void _mi_heap_collect_retired(mi_heap_t* heap, bool all, bool purge_now) {
  if (!all) heap->retire_clock++;
  size_t min = MI_BIN_FULL;
  size_t max = 0;
  for (size_t bin = heap->page_retired_min; bin <= heap->page_retired_max; bin++) {
    mi_page_queue_t* pq = &heap->pages[bin];
    mi_page_t* page = pq->first;
    while (page != NULL && page->retire_expire != 0) {
      mi_page_t* next = page->next;
      if (mi_page_all_free(page)) {
        page->retire_expire--;
        if (all || page->retire_expire == 0) {
          if (!all) {
            pq->expired = heap->retire_clock;   // (mi_page_fresh: does the size come back soon?)
            pq->retire_long = false;            // (a long retirement that expired: the size does not come back soon)
          }
          _mi_page_free(page, pq, purge_now);   // (takes it off the count)
        }
        else {
          if (bin < min) min = bin;
          if (bin > max) max = bin;
        }
      }
      else {
        _mi_page_unretire(heap, page);
      }
      page = next;
    }
  }
  heap->page_retired_min = min;
  heap->page_retired_max = max;
}

// ---------------------------------------------------------------------------
// Delayed frees from other threads
// ---------------------------------------------------------------------------

void _mi_heap_delayed_free(mi_heap_t* heap) {
  // take the whole list
  mi_block_t* block = mi_atomic_load_relaxed(&heap->thread_delayed_free);
  while (block != NULL && !mi_atomic_cas_weak_acq_rel(&heap->thread_delayed_free, &block, NULL)) { /* retry */ }
  // and free each block; one whose page is busy goes back on the list
  while (block != NULL) {
    mi_block_t* next = mi_block_nextx(heap, block, heap->keys);
    #if defined(MI_TRAILER_LINK)
    block->next = 0;   // the delayed link goes: the block reads zero again (its page link is in its trailer)
    #endif
    if (!_mi_free_delayed_block(block)) {
      mi_block_t* dfree = mi_atomic_load_relaxed(&heap->thread_delayed_free);
      do {
        mi_block_set_nextx(heap, block, dfree, heap->keys);
      } while (!mi_atomic_cas_weak_release(&heap->thread_delayed_free, &dfree, block));
    }
    block = next;
  }
}

// ---------------------------------------------------------------------------
// Full pages
// ---------------------------------------------------------------------------

// A page in the full queue got a free block back: move it to its bin queue.
void _mi_page_unfull(mi_page_t* page) {
  mi_assert_internal(page != NULL);
  mi_assert_internal(mi_page_is_in_full(page));
  if (!mi_page_is_in_full(page)) return;
  mi_heap_t* heap = mi_page_heap(page);
  mi_page_queue_t* pqfull = &heap->pages[MI_BIN_FULL];
  mi_page_set_in_full(page, false);   // to get the right queue
  mi_page_queue_t* pq = _mi_heap_page_queue_of(heap, page);
  mi_page_set_in_full(page, true);
  _mi_page_queue_enqueue_from(pq, pqfull, page);
  // the page stays in MI_USE_DELAYED_FREE: at most one later remote free
  // takes the delayed list, which leaves it in MI_NO_DELAYED_FREE (cheaper
  // than a CAS on every local unfull of a single-threaded program)
}

static void mi_page_to_full(mi_page_t* page, mi_page_queue_t* pq) {
  mi_assert_internal(pq == _mi_heap_page_queue_of(mi_page_heap(page), page));
  mi_assert_internal(!mi_page_immediate_available(page));
  mi_assert_internal(!mi_page_is_in_full(page));
  if (mi_page_is_in_full(page)) return;
  _mi_page_queue_enqueue_from(&mi_page_heap(page)->pages[MI_BIN_FULL], pq, page);
  // from now on the first remote free tells the owner through its heap's
  // delayed list (pages outside the full queue are found by the owner's scan)
  _mi_page_use_delayed_free(page, MI_USE_DELAYED_FREE, false);
  _mi_page_free_collect(page, false);   // a remote free may have raced the move
}

// ---------------------------------------------------------------------------
// Extending the free list
// ---------------------------------------------------------------------------

static void mi_page_free_list_extend(mi_page_t* page, uint8_t* page_area, size_t bsize, size_t extend) {
  mi_block_t* const start = (mi_block_t*)(page_area + (page->capacity * bsize));
  // thread the new blocks in address order
  mi_block_t* const last = (mi_block_t*)((uint8_t*)start + ((extend - 1) * bsize));
  mi_block_t* block = start;
  while (block <= last) {
    mi_block_t* next = (mi_block_t*)((uint8_t*)block + bsize);
    mi_block_set_next_fresh(page, block, next);
    block = next;
  }
  mi_block_set_next_fresh(page, last, page->free);
  page->free = start;
}


// Add up to one OS page worth of blocks (at least MI_MIN_EXTEND) to the free list.
void _mi_page_extend_free(mi_page_t* page) {
  mi_assert_expensive(mi_page_is_valid_init(page));
  if (page->free != NULL) return;
  if (page->capacity >= page->reserved) return;
  const mi_segment_t* const segment = _mi_page_segment(page);
  size_t bsize = page->xblock_size;
  uint8_t* page_area;
  if (mi_likely(bsize < MI_HUGE_BLOCK_SIZE)) page_area = _mi_page_start(segment, page, NULL);
  else page_area = _mi_page_start(segment, page, &bsize);   // (one block: the page area)
  size_t extend = page->reserved - page->capacity;
  size_t max_extend = (bsize >= MI_MAX_EXTEND_SIZE ? MI_MIN_EXTEND : MI_MAX_EXTEND_SIZE / (uint32_t)bsize);
  if (max_extend < MI_MIN_EXTEND) max_extend = MI_MIN_EXTEND;
  if (extend > max_extend) extend = max_extend;
  mi_assert_internal(extend > 0 && extend + page->capacity <= page->reserved);
  // checked builds prepare the new blocks, and secure ones thread them
  // themselves (secure.c; nothing in a release build)
  if (!mi_page_on_extend(page, bsize, extend)) mi_page_free_list_extend(page, page_area, bsize, extend);
  __atomic_store_n(&page->capacity, (uint16_t)(page->capacity + extend), __ATOMIC_RELAXED);   // (mi_page_capacity_shared)
  mi_stat_touched_update(&mi_page_heap(page)->tld->stats, extend * bsize);
  mi_heap_stat_counter_increase(mi_page_heap(page), pages_extended, 1);
  if (!page->is_zero_init) page->is_zero = false;
  mi_assert_expensive(mi_page_is_valid_init(page));
}

// Set up a freshly claimed page for blocks of `block_size`.
static void mi_page_init(mi_heap_t* heap, mi_page_t* page, size_t block_size) {
  mi_assert_internal(page != NULL);
  mi_segment_t* segment = _mi_page_segment(page);
  mi_assert_internal(segment != NULL);
  mi_assert_internal(block_size > 0);
  mi_page_set_heap(page, heap);
  size_t page_size;
  // big-alignment blocks live in huge segments but may be small: mark them huge
  const bool sentinel = (block_size >= MI_HUGE_BLOCK_SIZE || segment->aligned_block != NULL);
  page->xblock_size = (sentinel ? MI_HUGE_BLOCK_SIZE : (uint32_t)block_size);
  size_t pre_size;
  uint8_t* const page_start = _mi_segment_page_start(segment, page, page->xblock_size, &page_size, &pre_size);
  #if defined(MI_FREE_CHECK_PTR)
  page->page_start = page_start;
  #else
  (void)page_start;
  #endif
  const size_t bsize = (sentinel ? page_size : block_size);
  page->reserved = (uint16_t)(page_size / bsize);
  #if defined(MI_FREE_CHECK_PTR)
  page->block_last = (uint32_t)((page->reserved - 1) * bsize);
  #if (MI_PADDING == 0)
  page->block_divisor = UINT64_MAX / bsize + 1;
  #endif
  #endif
  #if defined(MI_CHECKED_FAST_PATHS) || defined(MI_FULL_FAST_PATH)
  // (the free fast path then checks neither: such a page's frees take the generic path)
  if (sentinel || bsize < MI_PADDING_SIZE + sizeof(mi_block_t)) mi_page_set_flag(page, MI_PAGE_CHECK_SLOW, true);
  #endif
  // not in the full queue yet; no block of the page exists yet, so nobody
  // else can touch the word: a plain store
  mi_atomic_store_release(&page->xthread_free, (mi_thread_free_t)mi_page_delayed_state(page, false));
  #if defined(MI_ENCODE_FREELIST)
  page->keys[0] = _mi_heap_random_next(heap) | 1;   // (odd: the trailer key multiplies by it)
  page->keys[1] = _mi_heap_random_next(heap);
  #endif
  #if (MI_PADDING > 0)
  // the first block of page 0 may start a little after the segment header
  // (blocks are aligned to their size): the last word of that gap reads as
  // the trailer of a free block below the first, so an underflow of the
  // first block is caught like any other (later pages start at a guard page
  // or at the end of the page below)
  page->has_front_canary = false;
  if (!sentinel && pre_size >= MI_PADDING_SIZE && bsize >= MI_PADDING_SIZE + sizeof(mi_block_t)) {
    mi_trailer_set_free(page, (mi_block_t*)(page_start - bsize), bsize - MI_PADDING_SIZE);
    page->has_front_canary = true;
  }
  #else
  (void)pre_size;
  #endif
  page->is_zero = page->is_zero_init;
  mi_assert_internal(page->capacity == 0);
  mi_assert_internal(page->free == NULL);
  mi_assert_internal(page->used == 0);
  mi_assert_internal(page->next == NULL && page->prev == NULL);
  mi_assert_internal(page->retire_expire == 0);
  mi_assert_internal(!mi_page_has_aligned(page));
  mi_assert_internal(page->reserved > 0);
  _mi_page_extend_free(page);
  mi_assert_internal(mi_page_immediate_available(page));
}

// ---------------------------------------------------------------------------
// Finding a page with free blocks
// ---------------------------------------------------------------------------

// A fresh page from the segment layer, pushed at the front of `pq`.
static mi_page_t* mi_page_fresh_alloc(mi_heap_t* heap, mi_page_queue_t* pq, size_t block_size, size_t page_alignment, size_t align_offset) {
  _mi_stats_interval_tick();   // a snapshot to stats_file if one is due and its thread cannot write it
  mi_page_t* page = _mi_segment_page_alloc(heap, block_size, page_alignment, align_offset, &heap->tld->segments);
  if (page == NULL) return NULL;   // out of memory, or an adopted page went into the queue
  mi_page_init(heap, page, block_size);
  pq->taken++;
  _mi_page_queue_push(heap, pq, page);
  return page;
}

// A fresh page of the queue's size. A size whose retired page expired within
// the last MI_RETIRE_CYCLES_LONG fresh-page requests came back too soon: its
// pages are retired longer from now on (until such a retirement expires).
// A thread that goes round many sizes with a few blocks in use (a request
// handler: `server 1`) otherwise expired each page before its size came
// round again, and set up 14 pages per 100 requests, half its time.
static mi_page_t* mi_page_fresh(mi_heap_t* heap, mi_page_queue_t* pq) {
  if (pq->expired != 0 && heap->retire_clock - pq->expired <= MI_RETIRE_CYCLES_LONG && pq->block_size <= MI_MEDIUM_OBJ_SIZE_MAX) {
    pq->retire_long = true;
  }
  return mi_page_fresh_alloc(heap, pq, pq->block_size, 0, 0);
}

// Next fit: walk the queue, collecting pages; full ones go to the full queue.
static mi_page_t* mi_page_queue_find_free_ex(mi_heap_t* heap, mi_page_queue_t* pq, bool first_try) {
  #if (MI_STAT > 1)
  size_t count = 0;
  #endif
  mi_page_t* page = pq->first;
  while (page != NULL) {
    mi_page_t* next = page->next;
    #if (MI_STAT > 1)
    count++;
    #endif
    _mi_page_free_collect(page, false);
    if (mi_page_immediate_available(page)) break;
    if (page->capacity < page->reserved) {
      _mi_page_extend_free(page);
      mi_assert_internal(mi_page_immediate_available(page));
      break;
    }
    mi_page_to_full(page, pq);
    page = next;
  }
  mi_heap_stat_counter_increase(heap, searches, count);
  if (page == NULL) {
    _mi_heap_collect_retired(heap, false, false);
    page = mi_page_fresh(heap, pq);
    if (page == NULL && first_try) {
      // an adopted page may have been pushed on the queue: search again
      page = mi_page_queue_find_free_ex(heap, pq, false);
    }
  }
  else {
    _mi_page_unretire(heap, page);
  }
  return page;
}

#if MI_SECURE_RANDOM
// _mi_page_refill in builds with a random free order: a page whose free list
// ran out is refilled as the generic path refills its queue's first page
// (mi_find_free_page: the coin for fresh blocks first, then the freed blocks
// with the last one not first, then fresh ones), without the generic path's
// housekeeping; not when other threads freed blocks into it or into the
// heap's full pages (the generic path collects those first).
bool _mi_page_refill_random(mi_heap_t* heap, mi_page_t* page) {
  mi_assert_internal(page->free == NULL);
  const bool room = (page->capacity < page->reserved);
  if ((!room && page->local_free == NULL) || mi_page_has_thread_free(page) ||   // (the empty page: neither)
      mi_atomic_load_relaxed(&heap->thread_delayed_free) != NULL) return false;
  if (--heap->recycle_countdown <= 0) return false;
  #if MI_SECURE_RANDOM_EXTEND
  if (room && _mi_heap_random_coin(heap)) {
    _mi_page_extend_free(page);
    return true;
  }
  #endif
  if (page->local_free != NULL && mi_page_recycle_local_free(page)) return true;
  _mi_page_extend_free(page);   // (a lone freed block waits)
  return true;
}
#endif

// The page to allocate `size` bytes from: the queue's first page if it has
// (or collects) free blocks, else the result of a search.
static mi_page_t* mi_find_free_page(mi_heap_t* heap, size_t size) {
  mi_page_queue_t* pq = _mi_page_queue(heap, size);
  mi_page_t* page = pq->first;
  if (page != NULL) {
    #if MI_SECURE_RANDOM_EXTEND
    // a coin decides whether fresh blocks come before freed ones: the next
    // block cannot be predicted to be a recycled one
    if (page->capacity < page->reserved && _mi_heap_random_coin(heap)) {
      _mi_page_extend_free(page);
    }
    #endif
    _mi_page_free_collect(page, false);
    if (mi_page_immediate_available(page)) {
      _mi_page_unretire(heap, page);
      return page;
    }
  }
  return mi_page_queue_find_free_ex(heap, pq, true);
}

// A page holding one huge block (or one big-alignment block).
mi_page_t* _mi_huge_page_alloc(mi_heap_t* heap, size_t size, size_t page_alignment, size_t align_offset) {
  const size_t block_size = (page_alignment > MI_ALIGNMENT_MAX_IN_SEGMENT ? size : _mi_os_good_alloc_size(size));
  mi_page_queue_t* pq = &heap->pages[MI_BIN_HUGE];
  mi_page_t* page = mi_page_fresh_alloc(heap, pq, (block_size == 0 ? 1 : block_size), page_alignment, align_offset);
  if (page != NULL) {
    // counted by the whole page area, which is what its segment frees
    const mi_segment_t* segment = _mi_page_segment(page);
    const size_t bsize = segment->segment_size - segment->segment_info_size;
    if (bsize <= MI_HUGE_OBJ_SIZE_MAX) {
      mi_stat_increase(&heap->tld->stats, huge, bsize);
      mi_stat_counter_increase(&heap->tld->stats, huge_count, 1);
    }
    else {
      mi_stat_increase(&heap->tld->stats, giant, bsize);
      mi_stat_counter_increase(&heap->tld->stats, giant_count, 1);
    }
  }
  return page;
}

static mi_page_t* mi_find_page(mi_heap_t* heap, size_t size) mi_attr_noexcept {
  if (mi_unlikely(size > MI_LARGE_OBJ_SIZE_MAX)) {
    if (mi_unlikely(size > PTRDIFF_MAX)) {
      _mi_error_message(EOVERFLOW, "allocation request is too large (%zu bytes)\n", size);
      return NULL;
    }
    return _mi_huge_page_alloc(heap, size, 0, 0);
  }
  return mi_find_free_page(heap, size);
}

// ---------------------------------------------------------------------------
// Deferred free hook and the generic allocation path
// ---------------------------------------------------------------------------

static mi_deferred_free_fun* volatile deferred_free = NULL;
static void* volatile deferred_arg;

// One process-wide hook, called on allocation slow paths and collections
// (never recursively); NULL unregisters.
void mi_register_deferred_free(mi_deferred_free_fun* fn, void* arg) mi_attr_noexcept {
  deferred_free = fn;
  deferred_arg = arg;
}

void _mi_deferred_free(mi_heap_t* heap, bool force) {
  heap->tld->heartbeat++;
  if (deferred_free != NULL && !heap->tld->recurse) {
    heap->tld->recurse = true;
    deferred_free(force, heap->tld->heartbeat, deferred_arg);
    heap->tld->recurse = false;
  }
}

// The slow path of every allocation: runs whenever the fast path finds no
// free block, and for all sizes above MI_SMALL_SIZE_MAX.
void* _mi_malloc_generic(mi_heap_t* heap, size_t size) mi_attr_noexcept {
  mi_assert_internal(heap != NULL);
  // first allocation of the thread: initialise it now (no test on the fast path)
  if (mi_unlikely(!mi_heap_is_initialized(heap))) {
    mi_thread_init();
    heap = mi_get_default_heap();
    if (mi_unlikely(!mi_heap_is_initialized(heap))) { errno = ENOMEM; return NULL; }
  }
  #if defined(MI_ZERO_AREA)
  if (size == MI_PADDING_SIZE) return _mi_zero_alloc();   // malloc(0)
  #endif
  if (size <= MI_SMALL_SIZE_MAX + MI_PADDING_SIZE) {
    // a small block whose page's free list ran out: refilled, when it may
    // (_mi_page_refill)
    mi_page_t* const page = heap->pages_free_direct[_mi_wsize_from_size(size)];
    if (_mi_page_refill(heap, page)) return _mi_page_malloc_any(heap, page, size);
  }
  _mi_deferred_free(heap, false);
  if (mi_atomic_load_relaxed(&heap->thread_delayed_free) != NULL) _mi_heap_delayed_free(heap);
  heap->recycle_countdown = MI_RECYCLES;

  mi_page_t* page = mi_find_page(heap, size);
  if (mi_unlikely(page == NULL)) {
    if (size > PTRDIFF_MAX) { errno = EOVERFLOW; return NULL; }
    mi_heap_collect(heap, true);   // free what we can and try once more
    page = mi_find_page(heap, size);
  }
  if (mi_unlikely(page == NULL)) {
    _mi_error_message(ENOMEM, "unable to allocate memory (%zu bytes)\n", size);
    errno = ENOMEM;
    return NULL;
  }
  mi_assert_internal(mi_page_immediate_available(page));
  mi_assert_internal(mi_page_block_size(page) >= size);
  _mi_purger_poll();   // (a safe point: the background purge thread starts here when wanted, never in a free)
  return _mi_page_malloc_any(heap, page, size);
}
