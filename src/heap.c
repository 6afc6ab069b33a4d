/* ----------------------------------------------------------------------------
  heap.c -- first-class heaps: creation, deletion, destruction, collection,
  ownership checks and visiting.

  A heap is a set of page queues. Every thread has a *backing* heap that
  lives until the thread ends; `mi_heap_new` adds user heaps, allocated from
  the backing heap and sharing its thread data. Deleting a user heap moves
  its pages (and so its live blocks) to the backing heap; destroying it frees
  all its pages at once, whatever they hold. Huge blocks belong to their heap
  like any other block (queue MI_BIN_HUGE), so destroy and visiting cover them.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

// ---------------------------------------------------------------------------
// Visiting the pages of a heap
// ---------------------------------------------------------------------------

typedef bool (heap_page_visitor_fun)(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_t* page, void* arg1, void* arg2);

// Visit every page of every queue; the visitor may free the page.
static bool mi_heap_visit_pages(mi_heap_t* heap, heap_page_visitor_fun* fn, void* arg1, void* arg2) {
  if (heap == NULL || heap->page_count == 0) return true;
  for (size_t i = 0; i <= MI_BIN_FULL; i++) {
    mi_page_queue_t* pq = &heap->pages[i];
    mi_page_t* page = pq->first;
    while (page != NULL) {
      mi_page_t* next = page->next;   // read first: the visitor may free the page
      if (!fn(heap, pq, page, arg1, arg2)) return false;
      page = next;
    }
  }
  return true;
}

#if (MI_DEBUG >= 3)
static bool mi_heap_page_is_valid(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_t* page, void* arg1, void* arg2) {
  (void)arg1; (void)arg2; (void)pq;
  mi_assert_internal(mi_page_heap(page) == heap);
  mi_segment_t* segment = _mi_page_segment(page);
  mi_assert_internal(segment->thread_id == heap->thread_id || segment->shared);
  return true;
}

static bool mi_heap_is_valid(mi_heap_t* heap) {
  mi_assert_internal(heap != NULL);
  mi_heap_visit_pages(heap, &mi_heap_page_is_valid, NULL, NULL);
  return true;
}
#endif

// ---------------------------------------------------------------------------
// Collection
// ---------------------------------------------------------------------------

typedef enum mi_collect_e {
  MI_NORMAL,   // free empty pages, process delayed work
  MI_FORCE,    // also flush everything pending, and sweep the abandoned pages
  MI_ABANDON   // thread exit: abandon the pages that still hold blocks
} mi_collect_t;

static bool mi_heap_page_collect(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_t* page, void* arg_collect, void* arg2) {
  (void)arg2; (void)heap;
  mi_collect_t collect = *((mi_collect_t*)arg_collect);
  // not forced: other threads' frees are always taken; appending local_free
  // to a non-empty free list (a walk over cold blocks) buys nothing here
  _mi_page_free_collect(page, false);
  if (mi_page_all_free(page)) {
    _mi_page_free(page, pq, collect == MI_FORCE);
  }
  else if (collect == MI_ABANDON) {
    _mi_page_abandon(page, pq);
  }
  return true;
}

static bool mi_heap_page_never_delayed_free(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_t* page, void* arg1, void* arg2) {
  (void)arg1; (void)arg2; (void)heap; (void)pq;
  _mi_page_use_delayed_free(page, MI_NEVER_DELAYED_FREE, false);
  return true;
}

static void mi_heap_collect_ex(mi_heap_t* heap, mi_collect_t collect) {
  if (heap == NULL || !mi_heap_is_initialized(heap)) return;
  _mi_deferred_free(heap, collect >= MI_FORCE);
  // the heaps of ended threads that no thread took over (all, when forced:
  // abandoned, so that their empty pages go back with the sweep below)
  if (collect != MI_ABANDON) _mi_orphans_collect(collect == MI_FORCE);

  // when abandoning, no remote thread may push on this heap's delayed list
  // anymore; the segments the thread empties from here on go back to the
  // regions like any others (their memory waits for its delay: the threads
  // that follow take it up) while the regions hold less than the exit budget
  // of freed resident memory (docs/design.md, "Thread exit")
  if (collect == MI_ABANDON) {
    mi_heap_visit_pages(heap, &mi_heap_page_never_delayed_free, NULL, NULL);
    heap->tld->segments.ending = true;
  }
  _mi_heap_delayed_free(heap);
  _mi_heap_collect_retired(heap, collect >= MI_FORCE, collect == MI_FORCE);
  mi_heap_visit_pages(heap, &mi_heap_page_collect, &collect, NULL);
  mi_assert_internal(collect != MI_ABANDON || mi_atomic_load_acquire(&heap->thread_delayed_free) == NULL);

  // pending page purges, and pending region purges; forced: also the free
  // pages of every other thread's segments (a trim) and the cache of empty
  // shared segments. A thread that ends leaves its free pages to wait for
  // their delay like any others (purged now only with the option
  // abandoned_page_reset); the segment cache is the process's, and stays
  _mi_segments_collect(collect >= MI_FORCE, &heap->tld->segments);
  if (collect == MI_FORCE) _mi_segments_trim();
  _mi_region_collect(collect == MI_FORCE, collect == MI_FORCE);
  // (a purge of the background thread held some blocks meanwhile: again, once it is done)
  if (collect == MI_FORCE && _mi_housekeeping_await()) _mi_region_collect(true, true);
  heap->tld->segments.ending = false;
}

static bool mi_heap_page_set_owner(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_t* page, void* arg1, void* arg2) {
  (void)heap; (void)pq; (void)arg2;
  _mi_segment_set_owner(_mi_page_segment(page), *(const uintptr_t*)arg1);
  return true;
}

// The backing heap of a thread that ends (or another thread taking it over):
// it and the segments it owns (those of its huge blocks: every other page is
// in a shared segment, which has no owner) get owner id `owner` (an orphan
// heap's, or the new thread's).
void _mi_heap_set_owner(mi_heap_t* heap, uintptr_t owner) {
  mi_assert_internal(mi_heap_is_backing(heap) && heap->tld->heaps == heap);
  heap->thread_id = owner;
  mi_heap_visit_pages(heap, &mi_heap_page_set_owner, &owner, NULL);
}

void _mi_heap_collect_abandon(mi_heap_t* heap) {
  mi_heap_collect_ex(heap, MI_ABANDON);
}

void mi_heap_collect(mi_heap_t* heap, bool force) mi_attr_noexcept {
  mi_heap_collect_ex(heap, (force ? MI_FORCE : MI_NORMAL));
  _mi_purger_poll();
}

void mi_collect(bool force) mi_attr_noexcept {
  mi_heap_collect(mi_get_default_heap(), force);
}

// ---------------------------------------------------------------------------
// Heap creation
// ---------------------------------------------------------------------------

mi_heap_t* mi_heap_get_default(void) {
  mi_thread_init();
  return mi_get_default_heap();
}

mi_heap_t* mi_heap_get_backing(void) {
  mi_heap_t* heap = mi_heap_get_default();
  mi_heap_t* bheap = heap->tld->heap_backing;
  mi_assert_internal(bheap != NULL && bheap->thread_id == _mi_thread_id());
  return bheap;
}

// Initialise a heap struct for the thread of `tld`, with randomness split
// from `parent`.
static void mi_heap_init_from(mi_heap_t* heap, mi_tld_t* tld, mi_heap_t* parent) {
  memcpy((void*)heap, &_mi_heap_empty, sizeof(mi_heap_t));
  heap->tld = tld;
  heap->thread_id = _mi_thread_id();
  _mi_random_split(&parent->random, &heap->random);
  heap->cookie = _mi_heap_random_next(heap) | 1;
  heap->keys[0] = _mi_heap_random_next(heap);
  heap->keys[1] = _mi_heap_random_next(heap);
}

mi_heap_t* mi_heap_new(void) {
  mi_heap_t* bheap = mi_heap_get_backing();
  mi_heap_t* heap = mi_heap_malloc_tp(bheap, mi_heap_t);
  if (heap == NULL) return NULL;
  mi_heap_init_from(heap, bheap->tld, bheap);
  heap->no_reclaim = true;   // never receives reclaimed pages (see segment.c)
  heap->next = heap->tld->heaps;
  heap->tld->heaps = heap;
  return heap;
}

// Forget all pages of a heap (they were moved or freed).
static void mi_heap_reset_pages(mi_heap_t* heap) {
  mi_assert_internal(mi_heap_is_initialized(heap));
  memcpy(&heap->pages_free_direct, &_mi_heap_empty.pages_free_direct, sizeof(heap->pages_free_direct));
  memcpy(&heap->pages, &_mi_heap_empty.pages, sizeof(heap->pages));
  heap->thread_delayed_free = NULL;
  heap->page_count = 0;
  heap->page_retired_min = MI_BIN_FULL;
  heap->page_retired_max = 0;
  heap->page_retired_size = 0;
}

// Release the heap struct itself (never the backing heap).
static void mi_heap_free(mi_heap_t* heap) {
  mi_assert_internal(mi_heap_is_initialized(heap));
  if (mi_heap_is_backing(heap)) return;
  if (heap == mi_get_default_heap()) {
    _mi_heap_set_default_direct(heap->tld->heap_backing);
  }
  // unlink from the thread's heap list
  mi_heap_t* prev = NULL;
  mi_heap_t* curr = heap->tld->heaps;
  while (curr != heap && curr != NULL) {
    prev = curr;
    curr = curr->next;
  }
  mi_assert_internal(curr == heap);
  if (curr == heap) {
    if (prev != NULL) prev->next = heap->next;
    else heap->tld->heaps = heap->next;
  }
  mi_free(heap);
}

// ---------------------------------------------------------------------------
// Destroy: free all pages at once
// ---------------------------------------------------------------------------

static bool mi_heap_page_destroy(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_t* page, void* arg1, void* arg2) {
  (void)arg1; (void)arg2; (void)pq;
  // no more remote frees to this heap's delayed list
  _mi_page_use_delayed_free(page, MI_NEVER_DELAYED_FREE, false);
  _mi_prof_forget_page(page);   // its sampled blocks go with it
  page->used = 0;
  page->next = NULL;
  page->prev = NULL;
  _mi_segment_page_free(page, false, &heap->tld->segments);
  return true;
}

static void mi_heap_destroy_pages(mi_heap_t* heap) {
  mi_heap_visit_pages(heap, &mi_heap_page_destroy, NULL, NULL);
  mi_heap_reset_pages(heap);
}

void mi_heap_destroy(mi_heap_t* heap) {
  mi_assert(heap != NULL);
  mi_assert(mi_heap_is_initialized(heap));
  mi_assert(heap->no_reclaim);
  mi_assert_expensive(mi_heap_is_valid(heap));
  if (heap == NULL || !mi_heap_is_initialized(heap)) return;
  if (!heap->no_reclaim) {
    mi_heap_delete(heap);   // the backing heap cannot be destroyed
  }
  else {
    mi_heap_destroy_pages(heap);
    mi_heap_free(heap);
  }
}

// ---------------------------------------------------------------------------
// Delete: move the pages to the backing heap, keep the blocks valid
// ---------------------------------------------------------------------------

static void mi_heap_absorb(mi_heap_t* heap, mi_heap_t* from) {
  mi_assert_internal(heap != NULL);
  if (from == NULL || from->page_count == 0) return;
  // blocks on `from`'s delayed list are freed first (their pages still belong to it)
  _mi_heap_delayed_free(from);
  for (size_t i = 0; i <= MI_BIN_FULL; i++) {
    mi_page_queue_t* pq = &heap->pages[i];
    mi_page_queue_t* append = &from->pages[i];
    size_t pcount = _mi_page_queue_append(heap, pq, append);
    heap->page_count += pcount;
    from->page_count -= pcount;
  }
  mi_assert_internal(from->page_count == 0);
  // a remote free may have pushed on `from`'s list while we moved the pages
  _mi_heap_delayed_free(from);
  mi_assert_internal(from->thread_delayed_free == NULL);
  // retired pages keep counting down in their new heap
  if (from->page_retired_min < heap->page_retired_min) heap->page_retired_min = from->page_retired_min;
  if (from->page_retired_max > heap->page_retired_max) heap->page_retired_max = from->page_retired_max;
  heap->page_retired_size += from->page_retired_size;
  mi_heap_reset_pages(from);
}

void mi_heap_delete(mi_heap_t* heap) {
  mi_assert(heap != NULL);
  mi_assert(mi_heap_is_initialized(heap));
  mi_assert_expensive(mi_heap_is_valid(heap));
  if (heap == NULL || !mi_heap_is_initialized(heap)) return;
  if (!mi_heap_is_backing(heap)) {
    mi_heap_absorb(heap->tld->heap_backing, heap);
  }
  else {
    _mi_heap_collect_abandon(heap);   // the backing heap: abandon its pages
  }
  mi_assert_internal(heap->page_count == 0);
  mi_heap_free(heap);
}

mi_heap_t* mi_heap_set_default(mi_heap_t* heap) {
  mi_assert(heap != NULL && mi_heap_is_initialized(heap));
  if (heap == NULL || !mi_heap_is_initialized(heap)) return NULL;
  mi_heap_t* old = mi_get_default_heap();
  _mi_heap_set_default_direct(heap);
  return old;
}

// ---------------------------------------------------------------------------
// Ownership
// ---------------------------------------------------------------------------

bool mi_heap_contains_block(mi_heap_t* heap, const void* p) {
  mi_assert(heap != NULL);
  if (heap == NULL || !mi_heap_is_initialized(heap) || p == NULL) return false;
  #if defined(MI_ZERO_AREA)
  if (_mi_zero_area_contains(p)) return false;   // malloc(0) in secure builds: in no heap
  #endif
  mi_page_t* page = _mi_ptr_page_of(p);
  return (page != NULL && mi_page_heap(page) == heap);
}

// Safe for any pointer: the segment map says whether p is in one of our
// segments before we read any header (constant time).
bool mi_heap_check_owned(mi_heap_t* heap, const void* p) {
  mi_assert(heap != NULL);
  if (heap == NULL || !mi_heap_is_initialized(heap)) return false;
  if (p == NULL || ((uintptr_t)p & (MI_INTPTR_SIZE - 1)) != 0) return false;   // only aligned pointers
  mi_segment_t* segment = _mi_ptr_segment(p);
  mi_page_t* page;
  if ((const void*)segment == p) {
    segment = _mi_segment_of_unit_aligned(p);
    if (segment == NULL) return false;
    page = &segment->pages[0];
  }
  else {
    if (!_mi_segment_holds(segment, p)) return false;
    page = _mi_segment_page_of(segment, p);
  }
  if (!page->segment_in_use || mi_page_heap(page) != heap) return false;
  size_t psize;
  uint8_t* start = _mi_page_start(segment, page, &psize);
  const size_t bsize = mi_page_block_size(page);
  uint8_t* end = start + (page->capacity * bsize);
  return ((const uint8_t*)p >= start && (const uint8_t*)p < end);
}

bool mi_check_owned(const void* p) {
  return mi_heap_check_owned(mi_get_default_heap(), p);
}

// ---------------------------------------------------------------------------
// Visiting blocks
// ---------------------------------------------------------------------------

typedef struct mi_heap_area_ex_s {
  mi_heap_area_t area;
  mi_page_t*     page;
} mi_heap_area_ex_t;

#define MI_MAX_BLOCKS_PER_PAGE  (MI_SMALL_PAGE_SIZE / sizeof(void*))   // 8192

// Visit the allocated blocks of one page, in address order.
static bool mi_heap_area_visit_blocks(const mi_heap_area_ex_t* xarea, mi_block_visit_fun* visitor, void* arg) {
  if (xarea == NULL) return true;
  const mi_heap_area_t* area = &xarea->area;
  mi_page_t* page = xarea->page;
  if (page == NULL) return true;
  _mi_page_free_collect(page, true);
  mi_assert_internal(page->local_free == NULL);
  if (page->used == 0) return true;

  const size_t bsize = mi_page_block_size(page);
  size_t psize;
  uint8_t* pstart = _mi_page_start(_mi_page_segment(page), page, &psize);
  if (page->capacity == 1) {
    // a single block (large or huge)
    mi_assert_internal(page->used == 1 && page->free == NULL);
    return visitor(mi_page_heap(page), area, pstart, bsize, arg);
  }

  // mark the free blocks in a bitmap, then visit the others
  uintptr_t free_map[MI_MAX_BLOCKS_PER_PAGE / MI_INTPTR_BITS];
  memset(free_map, 0, sizeof(free_map));
  size_t free_count = 0;
  for (mi_block_t* block = page->free; block != NULL; block = mi_block_next(page, block)) {
    free_count++;
    mi_assert_internal((uint8_t*)block >= pstart && (uint8_t*)block < (pstart + psize));
    const size_t bitidx = (size_t)((uint8_t*)block - pstart) / bsize;
    free_map[bitidx / MI_INTPTR_BITS] |= ((uintptr_t)1 << (bitidx % MI_INTPTR_BITS));
  }
  mi_assert_internal(page->capacity == (free_count + page->used));

  size_t used_count = 0;
  for (size_t i = 0; i < page->capacity; i++) {
    const size_t bitidx = (i % MI_INTPTR_BITS);
    const uintptr_t m = free_map[i / MI_INTPTR_BITS];
    if (bitidx == 0 && m == UINTPTR_MAX) {
      i += (MI_INTPTR_BITS - 1);   // skip a word of free blocks
    }
    else if ((m & ((uintptr_t)1 << bitidx)) == 0) {
      used_count++;
      uint8_t* block = pstart + (i * bsize);
      if (!visitor(mi_page_heap(page), area, block, bsize, arg)) return false;
    }
  }
  mi_assert_internal(page->used == used_count);
  return true;
}

typedef bool (mi_heap_area_visit_fun)(const mi_heap_t* heap, const mi_heap_area_ex_t* area, void* arg);

static bool mi_heap_visit_areas_page(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_t* page, void* vfun, void* arg) {
  (void)heap; (void)pq;
  mi_heap_area_visit_fun* fun = (mi_heap_area_visit_fun*)vfun;
  mi_heap_area_ex_t xarea;
  const size_t bsize = mi_page_block_size(page);
  size_t psize;
  xarea.page = page;
  xarea.area.blocks = _mi_page_start(_mi_page_segment(page), page, &psize);
  xarea.area.reserved = page->reserved * bsize;
  xarea.area.committed = page->capacity * bsize;
  xarea.area.used = page->used;
  xarea.area.block_size = bsize;
  return fun(heap, &xarea, arg);
}

typedef struct mi_visit_blocks_args_s {
  bool visit_blocks;
  mi_block_visit_fun* visitor;
  void* arg;
} mi_visit_blocks_args_t;

static bool mi_heap_area_visitor(const mi_heap_t* heap, const mi_heap_area_ex_t* xarea, void* arg) {
  mi_visit_blocks_args_t* args = (mi_visit_blocks_args_t*)arg;
  if (!args->visitor(heap, &xarea->area, NULL, xarea->area.block_size, args->arg)) return false;
  if (args->visit_blocks) {
    return mi_heap_area_visit_blocks(xarea, args->visitor, args->arg);
  }
  return true;
}

// Visit all pages (areas) of a heap, and with `visit_blocks` every block in use.
bool mi_heap_visit_blocks(const mi_heap_t* heap, bool visit_blocks, mi_block_visit_fun* visitor, void* arg) {
  if (heap == NULL || visitor == NULL || !mi_heap_is_initialized(heap)) return false;
  mi_visit_blocks_args_t args = { visit_blocks, visitor, arg };
  return mi_heap_visit_pages((mi_heap_t*)heap, &mi_heap_visit_areas_page, (void*)&mi_heap_area_visitor, &args);
}
