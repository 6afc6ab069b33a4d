/* ----------------------------------------------------------------------------
  free.c -- free, top-down.

  mi_free masks the pointer to its segment. The fast path: the page belongs
  to this thread's default heap (its owner is a word of the page descriptor,
  so the segment's owner id is not read; a page another thread holds, or
  none, never has our default heap: a heap's pages lose it when its thread
  abandons them) and the page's flags byte is zero (not full, no aligned or
  sampled blocks, not a later slice of a large block; checked builds: not a
  page of blocks their fast path cannot check): push the block on the
  page's local_free; the page is retired when its last block comes back.
  Everything else goes to one out-of-line mi_free_generic:
  - a pointer at offset 0 of a segment unit: NULL, or a big-alignment block
    (mi_free_unit_aligned; the segment header lives at every other unit start);
  - a pointer into no segment of ours: reported (mi_free_invalid);
  - a local free of any other kind (mi_free_block_local): the page leaves the
    full queue, or is retired;
  - a remote free: into a page another heap holds, or an abandoned one; the
    segment layer decides what its kind needs (_mi_segment_free_remote), and
    in the end the block is pushed on the page's thread_free with one CAS, or
    on the owner heap's delayed list (_mi_free_block_mt, here).
  The checks of debug and secure builds are hooks into secure.c (constants
  in a release build): mi_free_check_segment, mi_free_check_fast,
  mi_free_check_ptr, mi_free_check, mi_zero_free.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

static mi_decl_noinline void mi_free_unit_aligned(void* p) mi_attr_noexcept;
static mi_decl_noinline void mi_free_generic(mi_segment_t* segment, mi_page_t* page, void* p) mi_attr_noexcept;
static mi_decl_noinline void mi_free_page_emptied(mi_page_t* page) mi_attr_noexcept;
static mi_decl_noinline mi_decl_cold void mi_free_invalid(const void* p);
static inline void mi_free_block_local(mi_page_t* page, mi_block_t* block);

// A local free goes into a page of a heap this thread owns (the page's heap
// is one of ours, or the segment's owner id is this thread's; a fork child
// never reuses a vanished thread's id or heap): one of its own, or an orphan
// heap it abandons on the ended thread's behalf (init.c).
#define mi_assert_local_page(page) \
  mi_assert_internal(mi_page_heap(page) == NULL || mi_page_heap(page)->thread_id == _mi_thread_id())

#if (MI_STAT > 1)
// The bytes the program asked for of a block being freed (read from its
// trailer, so before the checks of a free mark the trailer freed).
static size_t mi_stat_requested(const mi_page_t* page, const mi_block_t* block) {
  #if (MI_PADDING > 0)
  return mi_page_usable_size_of(page, block);
  #else
  (void)block;
  return mi_page_block_size(page);
  #endif
}

// Debug statistics of a free, counted by the freeing thread (merged into the
// process's figures later); straight into the process's figures (atomically)
// when that thread never allocated and has no heap.
static void mi_stat_free_requested(const mi_page_t* page, size_t requested) {
  mi_heap_t* heap = mi_get_default_heap();
  const size_t bsize = mi_page_block_size(page);
  const bool normal = (bsize <= MI_LARGE_OBJ_SIZE_MAX);
  if (mi_heap_is_initialized(heap)) {
    if (normal) {
      mi_heap_stat_decrease(heap, normal, bsize);
      mi_heap_stat_decrease(heap, normal_bins[_mi_bin(bsize)], 1);
    }
    mi_heap_stat_decrease(heap, malloc, requested);
  }
  else {
    if (normal) {
      mi_stat_decrease(NULL, normal, bsize);
      mi_stat_decrease(NULL, normal_bins[_mi_bin(bsize)], 1);
    }
    mi_stat_decrease(NULL, malloc, requested);
  }
}
#define mi_stat_free(page, block)  mi_stat_free_requested(page, mi_stat_requested(page, block))
#else
#define mi_stat_requested(page, block)          ((size_t)0)
#define mi_stat_free_requested(page, requested) ((void)(requested))
#define mi_stat_free(page, block)               ((void)0)
#endif

// ---------------------------------------------------------------------------
// free
// ---------------------------------------------------------------------------

void mi_free(void* p) mi_attr_noexcept {
  mi_segment_t* const segment = _mi_ptr_segment(p);
  if (mi_unlikely((void*)segment == p)) {   // NULL, or a big-alignment block
    mi_free_unit_aligned(p);
    return;
  }
  if (mi_unlikely(!mi_free_check_segment(segment, p))) {   // (checked builds, before anything is read there)
    mi_free_invalid(p);
    return;
  }
  mi_page_t* const page = _mi_segment_slice_of(segment, p);   // (a large page's continuation slice: flags != 0)
  const uintptr_t heap = (uintptr_t)mi_get_default_heap();
  if (mi_likely(heap == mi_atomic_load_relaxed(&page->xheap) && mi_page_flags(page) == 0)) {
    mi_block_t* const block = (mi_block_t*)p;
    mi_assert_local_page(page);
    const size_t requested = mi_stat_requested(page, block);   // (debug statistics: before the check marks the trailer freed)
    if (mi_unlikely(!mi_free_check_fast(page, block))) {   // (checked builds; the generic path reports)
      mi_free_generic(segment, page, p);
      return;
    }
    mi_stat_free_requested(page, requested);
    #if !defined(MI_TRAILER_LINK)
    mi_block_set_next(page, block, page->local_free);
    #endif
    page->local_free = block;
    if (mi_unlikely(--page->used == 0)) {
      mi_free_page_emptied(page);
    }
  }
  else {
    mi_free_generic(segment, page, p);
  }
}

// A NULL pointer or one at offset 0 of a segment unit (big-alignment block).
static mi_decl_noinline void mi_free_unit_aligned(void* p) mi_attr_noexcept {
  if (p == NULL) return;
  mi_segment_t* segment = _mi_segment_of_unit_aligned(p);
  if (segment == NULL) {
    mi_free_invalid(p);
    return;
  }
  mi_free_generic(segment, &segment->pages[0], p);
}

// The owner's free emptied the page (a tail call from mi_free's fast path).
// (No free starts the background purge thread: glibc frees thread-local
// storage with its stack-cache lock held, and a pthread_create there waits
// for that lock forever. Allocations and collections start it: page.c.)
static mi_decl_noinline void mi_free_page_emptied(mi_page_t* page) mi_attr_noexcept {
  _mi_page_retire(page);
}

// Is `heap` one of this thread's heaps? (A page's heap is compared, never
// read: another thread's heap may be going away.)
static bool mi_heap_is_ours(uintptr_t heap) {
  mi_heap_t* const dflt = mi_get_default_heap();
  if (heap == (uintptr_t)dflt) return true;
  if (heap == 0 || !mi_heap_is_initialized(dflt)) return false;
  for (const mi_heap_t* h = dflt->tld->heaps; h != NULL; h = h->next) {
    if ((uintptr_t)h == heap) return true;
  }
  return false;
}

// Everything that is not a local free into a non-full page without aligned blocks.
static mi_decl_noinline void mi_free_generic(mi_segment_t* segment, mi_page_t* page, void* p) mi_attr_noexcept {
  if (mi_unlikely(!_mi_segment_holds(segment, p))) {
    // the fast path read a foreign page's heap here; nothing else has been touched
    mi_free_invalid(p);
    return;
  }
  page = _mi_slice_page(page);   // an interior pointer into a large block's later slice
  if (mi_unlikely(!mi_free_check_ptr(page, p))) return;   // (checked builds; the unit-aligned path comes here unchecked)
  mi_block_t* block = (mi_page_has_aligned(page) ? _mi_page_ptr_unalign(segment, page, p) : (mi_block_t*)p);
  uintptr_t owner = mi_atomic_load_relaxed(&segment->thread_id);
  if (owner == MI_THREAD_ID_SHARED && mi_heap_is_ours(mi_atomic_load_relaxed(&page->xheap))) {
    owner = _mi_thread_id();   // a large page of one of our heaps
  }
  const bool local = (owner == _mi_thread_id());
  mi_stat_free(page, block);
  if (!mi_free_check(page, block, local)) return;
  if (mi_unlikely(mi_page_has_sampled(page))) _mi_prof_free(page, block);   // before the block can be reused
  if (mi_likely(local)) mi_free_block_local(page, block);
  else _mi_segment_free_remote(segment, page, block, owner);
}

// A pointer whose segment unit holds no segment of ours: report, free nothing.
static mi_decl_noinline mi_decl_cold void mi_free_invalid(const void* p) {
  if (mi_zero_free(p)) return;   // malloc(0) (secure builds)
  _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not allocated by mimalloc): %p\n", p);
}

// ---------------------------------------------------------------------------
// Local frees
// ---------------------------------------------------------------------------

static inline void mi_free_block_local(mi_page_t* page, mi_block_t* block) {
  mi_assert_local_page(page);
  mi_block_set_next(page, block, page->local_free);
  page->local_free = block;
  page->used--;
  if (mi_unlikely(page->used == 0)) {
    _mi_page_retire(page);
  }
  else if (mi_unlikely(mi_page_is_in_full(page))) {
    _mi_page_unfull(page);
  }
}

// Used when draining the heap's delayed list: false if the page is busy.
bool _mi_free_delayed_block(mi_block_t* block) {
  // (a big-alignment block may start exactly at a segment unit: its segment
  // is the unit below, which _mi_ptr_page_of knows)
  mi_page_t* const page = _mi_ptr_page_of(block);
  // the page leaves the full queue with this block: later remote frees go
  // straight to its thread_free. Its pending remote frees are collected here
  // only when they and this block free the whole page (so that it goes back
  // at once); otherwise the page has room now, and appending them to
  // non-empty lists would be a walk over blocks other threads last wrote
  // (collected when the page's allocation list runs out instead).
  if (!_mi_page_try_use_delayed_free(page, MI_NO_DELAYED_FREE, false)) return false;
  if (mi_tf_count(mi_atomic_load_relaxed(&page->xthread_free)) + 1 == page->used) {
    _mi_page_free_collect(page, false);
  }
  mi_free_block_local(page, block);
  return true;
}

// ---------------------------------------------------------------------------
// Remote frees
// ---------------------------------------------------------------------------

// Free a block of a page owned by another thread (or abandoned): push it on
// the page's thread_free with one CAS or, as the first free into a page its
// owner does not scan, on the owner heap's delayed list so that the owner
// notices the page. Returns false, having done nothing, when `await_abandon`
// and the page's heap is going away (segment.c, _mi_segment_free_remote).
mi_decl_noinline bool _mi_free_block_mt(mi_page_t* page, mi_block_t* block, bool await_abandon) {
  mi_thread_free_t tfreex;
  bool use_delayed;
  mi_thread_free_t tfree = mi_atomic_load_relaxed(&page->xthread_free);
  do {
    if (await_abandon && mi_tf_delayed(tfree) == MI_NEVER_DELAYED_FREE) return false;
    use_delayed = (mi_tf_delayed(tfree) == MI_USE_DELAYED_FREE);
    if (mi_unlikely(use_delayed)) {
      tfreex = mi_tf_set_delayed(tfree, MI_DELAYED_FREEING);
    }
    else {
      mi_block_set_next(page, block, mi_tf_block(tfree));
      tfreex = mi_tf_push(tfree, block);
    }
    // acquire: the owner sets the page's heap (release) before it puts the
    // page in MI_USE_DELAYED_FREE with a release CAS; reading that state
    // makes the heap store visible to the load below. Release: the block's
    // link (and its contents) reach whoever takes the list.
  } while (!mi_atomic_cas_weak_acq_rel(&page->xthread_free, &tfree, tfreex));

  if (mi_unlikely(use_delayed)) {
    // the heap cannot go away while we hold DELAYED_FREEING
    mi_heap_t* const heap = (mi_heap_t*)mi_atomic_load_acquire(&page->xheap);
    if (heap != NULL) {
      mi_block_t* dfree = mi_atomic_load_relaxed(&heap->thread_delayed_free);
      do {
        mi_block_set_nextx(heap, block, dfree, heap->keys);
      } while (!mi_atomic_cas_weak_release(&heap->thread_delayed_free, &dfree, block));
    }
    // reset the state; without a heap (the ordering above rules that out)
    // the block goes on thread_free instead of on no list at all
    tfree = mi_atomic_load_relaxed(&page->xthread_free);
    do {
      mi_assert_internal(mi_tf_delayed(tfree) == MI_DELAYED_FREEING);
      tfreex = mi_tf_set_delayed(tfree, MI_NO_DELAYED_FREE);
      if (mi_unlikely(heap == NULL)) {
        mi_block_set_next(page, block, mi_tf_block(tfree));
        tfreex = mi_tf_push(tfreex, block);
      }
    } while (!mi_atomic_cas_weak_release(&page->xthread_free, &tfree, tfreex));
  }
  return true;
}

// ---------------------------------------------------------------------------
// Interior pointers
// ---------------------------------------------------------------------------

// The block start of an aligned (interior) pointer.
mi_block_t* _mi_page_ptr_unalign(const mi_segment_t* segment, const mi_page_t* page, const void* p) {
  mi_assert_internal(page != NULL && p != NULL);
  size_t diff = (uint8_t*)p - _mi_page_start(segment, page, NULL);
  size_t adjust = diff % mi_page_block_size(page);
  return (mi_block_t*)((uintptr_t)p - adjust);
}
