/* ----------------------------------------------------------------------------
  page-queue.c -- size classes (bins) and the per-heap page queues.

  Sizes are handled in words. Up to 8 words the bins go in steps of two
  words (16 bytes: every block larger than 8 bytes is 16-aligned), one word
  for the first; above that there are four bins per power of two, so a block
  wastes at most about 20% of its size. Bin 73 holds pages with one huge
  block, bin 74 the full pages. The table (MI_PAGE_QUEUES_EMPTY, next to
  the inline _mi_bin in mimalloc-internal.h, since every heap's queues are
  initialised from it) is exactly the 1.6 table: users compare
  mi_good_size/mi_usable_size results.

  Each heap keeps `pages_free_direct`, one entry per word size up to 128
  words, pointing at the first page of the queue serving that size; it is
  updated whenever a queue's first page changes, so small mallocs need one
  index operation to find their page.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

// ---------------------------------------------------------------------------
// Bins
// ---------------------------------------------------------------------------

size_t _mi_bin_size(uint8_t bin) {
  return _mi_heap_empty.pages[bin].block_size;
}

// Good size for allocation: the block size of the bin, or page-rounded when huge.
size_t mi_good_size(size_t size) mi_attr_noexcept {
  if (size <= MI_LARGE_OBJ_SIZE_MAX) {
    return _mi_bin_size(_mi_bin(size));
  }
  return _mi_align_up(size, _mi_os_page_size());
}

// ---------------------------------------------------------------------------
// Queue queries
// ---------------------------------------------------------------------------

static bool mi_page_queue_is_full(const mi_page_queue_t* pq) {
  return (pq->block_size == (MI_LARGE_OBJ_SIZE_MAX + (2 * sizeof(uintptr_t))));
}

static bool mi_page_queue_is_special(const mi_page_queue_t* pq) {
  return (pq->block_size > MI_LARGE_OBJ_SIZE_MAX);
}

mi_page_queue_t* _mi_page_queue(const mi_heap_t* heap, size_t size) {
  return (mi_page_queue_t*)&heap->pages[_mi_bin(size)];
}


#if (MI_DEBUG >= 3)
static bool mi_page_queue_contains(mi_page_queue_t* queue, const mi_page_t* page) {
  for (mi_page_t* list = queue->first; list != NULL; list = list->next) {
    if (list == page) return true;
  }
  return false;
}
#endif

// ---------------------------------------------------------------------------
// The direct-page array
// ---------------------------------------------------------------------------

// The first page of `pq` changed: point every direct entry it serves at it.
static void mi_heap_queue_first_update(mi_heap_t* heap, const mi_page_queue_t* pq) {
  mi_assert_internal(mi_heap_is_initialized(heap));
  const size_t size = pq->block_size;
  if (size > MI_SMALL_SIZE_MAX) return;
  mi_page_t* page = pq->first;
  if (page == NULL) page = (mi_page_t*)&_mi_page_empty;
  const size_t idx = _mi_wsize_from_size(size);
  #if defined(MI_ZERO_AREA)
  // malloc(0)'s entry (the padding alone) stays with the empty page: malloc(0)
  // always takes the generic path (to the zero area)
  const size_t first = MI_PADDING_WSIZE + 1;
  if (idx < first) return;
  #else
  const size_t first = 0;
  #endif
  mi_page_t** pages_free = heap->pages_free_direct;
  if (pages_free[idx] == page) return;   // already set
  size_t start;
  if (idx <= 1) {
    start = first;
  }
  else {
    // the entries above the previous distinct bin's size (skip the unused
    // odd bins that map to the same bin as this one)
    const uint8_t bin = _mi_bin(size);
    const mi_page_queue_t* prev = pq - 1;
    while (bin == _mi_bin(prev->block_size) && prev > &heap->pages[0]) prev--;
    start = 1 + _mi_wsize_from_size(prev->block_size);
    if (start > idx) start = idx;
  }
  for (size_t sz = start; sz <= idx; sz++) pages_free[sz] = page;
}

// ---------------------------------------------------------------------------
// Queue operations
// ---------------------------------------------------------------------------

void _mi_page_queue_remove(mi_page_queue_t* queue, mi_page_t* page) {
  mi_assert_internal(page != NULL);
  mi_assert_expensive(mi_page_queue_contains(queue, page));
  mi_heap_t* heap = mi_page_heap(page);
  if (page->prev != NULL) page->prev->next = page->next;
  if (page->next != NULL) page->next->prev = page->prev;
  if (page == queue->last) queue->last = page->prev;
  if (page == queue->first) {
    queue->first = page->next;
    mi_heap_queue_first_update(heap, queue);
  }
  heap->page_count--;
  page->next = NULL;
  page->prev = NULL;
  mi_page_set_in_full(page, false);
}

void _mi_page_queue_push(mi_heap_t* heap, mi_page_queue_t* queue, mi_page_t* page) {
  mi_assert_internal(mi_page_heap(page) == heap);
  mi_assert_expensive(!mi_page_queue_contains(queue, page));
  mi_page_set_in_full(page, mi_page_queue_is_full(queue));
  page->next = queue->first;
  page->prev = NULL;
  if (queue->first != NULL) {
    queue->first->prev = page;
    queue->first = page;
  }
  else {
    queue->first = queue->last = page;
  }
  mi_heap_queue_first_update(heap, queue);
  heap->page_count++;
}

// Move a page from one queue to the back of another (full <-> bin).
void _mi_page_queue_enqueue_from(mi_page_queue_t* to, mi_page_queue_t* from, mi_page_t* page) {
  mi_assert_expensive(mi_page_queue_contains(from, page));
  mi_assert_expensive(!mi_page_queue_contains(to, page));
  mi_assert_internal((page->xblock_size == to->block_size && page->xblock_size == from->block_size) ||
                     (page->xblock_size == to->block_size && mi_page_queue_is_special(from)) ||
                     (page->xblock_size == from->block_size && mi_page_queue_is_special(to)) ||
                     (mi_page_queue_is_special(to) && mi_page_queue_is_special(from)) ||
                     (mi_page_is_huge(page)));
  mi_heap_t* heap = mi_page_heap(page);
  if (page->prev != NULL) page->prev->next = page->next;
  if (page->next != NULL) page->next->prev = page->prev;
  if (page == from->last) from->last = page->prev;
  if (page == from->first) {
    from->first = page->next;
    mi_heap_queue_first_update(heap, from);
  }
  page->prev = to->last;
  page->next = NULL;
  if (to->last != NULL) {
    to->last->next = page;
    to->last = page;
  }
  else {
    to->first = page;
    to->last = page;
    mi_heap_queue_first_update(heap, to);
  }
  mi_page_set_in_full(page, mi_page_queue_is_full(to));
}

// Append all pages of `append` (another heap's queue) to `pq`; returns the count.
size_t _mi_page_queue_append(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_queue_t* append) {
  if (append->first == NULL) return 0;
  size_t count = 0;
  for (mi_page_t* page = append->first; page != NULL; page = page->next) {
    // the page may still be reached by remote frees through its old heap's
    // delayed list: switch heap only when no such push is in flight
    mi_atomic_store_release(&page->xheap, (uintptr_t)heap);
    _mi_page_use_delayed_free(page, mi_page_delayed_state(page, mi_page_queue_is_full(pq)), false);
    count++;
  }
  if (pq->last == NULL) {
    pq->first = append->first;
    pq->last = append->last;
    mi_heap_queue_first_update(heap, pq);
  }
  else {
    pq->last->next = append->first;
    append->first->prev = pq->last;
    pq->last = append->last;
  }
  return count;
}
