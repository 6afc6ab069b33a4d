/* ----------------------------------------------------------------------------
  alloc.c -- the allocation API: malloc, free, realloc and their relatives.

  The two fast paths live here and each fits on one screen:
  - malloc (size <= 1 KiB): index the heap's direct-page array by word size
    and pop the page's free list; any miss goes to `_mi_malloc_generic`;
  - free: mask the pointer to its segment; if the segment is owned by this
    thread and the page's flags byte is zero, push on the page's local_free.
    Everything else goes to one out-of-line `mi_free_generic`.
  The heap profiler adds one countdown decrement to malloc and nothing to
  free: a page holding a sampled block has a flag that sends its frees to
  the generic path (prof.c).

  A pointer at offset 0 of a segment unit is never an ordinary block (the
  header lives there), so the single test `segment == p` routes both NULL
  and the rare big-alignment block to a slow routine.
-----------------------------------------------------------------------------*/
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE   // realpath
#endif
#include "mimalloc-internal.h"

#include <stdlib.h>   // realpath
#include <limits.h>   // PATH_MAX

// The secure profile ON (the trailer, without the neighbour checks and the
// link in the trailer) has fast paths that make no call on the way, only
// tail calls to a checked version for whatever is out of the ordinary: no
// registers to save and restore on every malloc and free.
#if (MI_PADDING > 0) && !MI_CHECK_NEIGHBOURS && !defined(MI_TRAILER_LINK) && (MI_DEBUG == 0)
#define MI_CHECKED_FAST_PATHS 1
#endif

#if (MI_PADDING > 0)
// Whether p is the start of one of the page's blocks (below its capacity).
static inline bool mi_page_is_block_start(const mi_page_t* page, const void* p) {
  const size_t bsize = mi_page_block_size(page);
  const size_t ofs = (size_t)((const uint8_t*)p - page->page_start);
  return ((const uint8_t*)p >= page->page_start && ofs % bsize == 0 && ofs / bsize < mi_page_capacity_shared(page));
}
#endif

// ---------------------------------------------------------------------------
// Allocation fast path
// ---------------------------------------------------------------------------

#if defined(MI_ZERO_ON_FREE)
// A block handed out again does not read zero: something
// wrote into it while it was free. Report, and zero it (when going on).
mi_decl_noinline mi_decl_cold void _mi_block_written_after_free(const mi_page_t* page, mi_block_t* block, size_t ofs) {
  const size_t usable = mi_page_usable_block_size(page);
  _mi_misuse_message(EFAULT, "write after free in heap block %p of size %zu: byte %zu was written after the block was freed\n",
                    (void*)block, usable, ofs);
  mi_block_zero(block, usable);
}
#endif

#if defined(MI_ZERO_ON_FREE)
// How much of a reused block is checked to still read zero: blocks of up to
// MI_ZERO_CHECK_WHOLE bytes whole; larger ones in their first
// MI_ZERO_CHECK_HEAD bytes and their last word (where object
// headers, vtable pointers, counts and links live), and whole once in
// about every MI_ZERO_CHECK_EVERY reuses, at random (a heap countdown). A
// whole check of every block read each large block twice per use (zeroed on
// free, read back on reuse): the cost of the check, not of the zeroing, was
// most of the secure build's time on allocation benchmarks.
#define MI_ZERO_CHECK_WHOLE  (256)
#define MI_ZERO_CHECK_HEAD   (64)
#define MI_ZERO_CHECK_EVERY  (8)

static mi_decl_noinline size_t mi_block_zero_check_whole(mi_heap_t* heap, const mi_block_t* block, size_t usable) {
  heap->zero_check_countdown = 1 + (int64_t)(_mi_heap_random_next(heap) % (2 * MI_ZERO_CHECK_EVERY - 1));
  return mi_block_nonzero_offset(block, usable);
}

// The offset of the first non-zero word found (`usable`: none).
static inline size_t mi_block_zero_check(mi_heap_t* heap, const mi_block_t* block, size_t usable) {
  if (usable <= MI_ZERO_CHECK_WHOLE) return mi_block_nonzero_offset(block, usable);
  if (mi_unlikely(--heap->zero_check_countdown < 0)) return mi_block_zero_check_whole(heap, block, usable);
  const size_t ofs = mi_block_nonzero_offset(block, MI_ZERO_CHECK_HEAD);
  if (mi_unlikely(ofs < MI_ZERO_CHECK_HEAD)) return ofs;
  return (mi_load8((const uint8_t*)block + usable - 8) == 0 ? usable : usable - 8);
}
#endif

#if defined(MI_CHECKED_FAST_PATHS)
static mi_decl_noinline void* mi_page_malloc_checked(mi_heap_t* heap, mi_page_t* page, size_t size);
#endif

// Pop a block from a page known to have free blocks; else take the slow path.
// (`checked`: MI_CHECKED_FAST_PATHS' checked version; else a constant false.)
static mi_decl_forceinline void* mi_page_malloc_take(mi_heap_t* heap, mi_page_t* page, size_t size, bool checked) {
  (void)checked;
  mi_block_t* const block = page->free;
  if (mi_unlikely(block == NULL)) {
    return _mi_malloc_generic(heap, size);
  }
  #if defined(MI_TRAILER_LINK)
  // the trailer holds the link now, and the block's state from here on
  uint8_t* const trailer = mi_block_trailer(page, block);
  const uint64_t key = mi_trailer_key(page, block);
  page->free = mi_block_next_at(page, block, trailer, key);
  #elif defined(MI_CHECKED_FAST_PATHS)
  if (checked) {
    page->free = mi_block_next(page, block);   // (reports a damaged link)
  }
  else {
    // a damaged link, or a huge page (whose size is a call away): the checked version
    mi_block_t* const next = mi_block_nextx(page, block, page->keys);
    if (mi_unlikely((next != NULL && !mi_is_in_same_page(block, next)) || page->xblock_size >= MI_HUGE_BLOCK_SIZE)) {
      return mi_page_malloc_checked(heap, page, size);
    }
    page->free = next;
  }
  #else
  page->free = mi_block_next(page, block);
  #endif
  page->used++;
  #if defined(MI_ZERO_ON_FREE)
  // the block was zeroed when it was freed (or added): it must still be
  if (mi_page_zeroes_on_free(page)) {
    const size_t usable = mi_page_usable_block_size(page);
    const size_t ofs = mi_block_zero_check(heap, block, usable);
    if (mi_unlikely(ofs < usable)) _mi_block_written_after_free(page, block, ofs);
  }
  #endif
  #if (MI_DEBUG > 0)
  _mi_memset(block, MI_DEBUG_UNINIT, mi_page_usable_block_size(page));   // recognisable fresh memory
  #elif MI_SECURE_CLEAR_LINK && !defined(MI_TRAILER_LINK)
  block->next = 0;   // no encoded link reaches the program (else the trailer held it)
  #endif
  #if (MI_PADDING > 0)
  // the trailer: live, with the distance from the end of the user data
  const size_t usable = mi_page_usable_block_size(page);
  if (mi_likely(usable >= sizeof(mi_block_t))) {
    const size_t delta = usable - (size - MI_PADDING_SIZE);
    #if defined(MI_TRAILER_LINK)
    mi_assert_internal(delta <= usable && trailer == mi_trailer_of(block, usable));
    mi_trailer_set_live_at(trailer, key, delta);
    #else
    mi_assert_internal(delta <= usable);
    mi_trailer_set_live(page, block, usable, delta);
    #endif
  }
  #endif
  #if (MI_STAT > 1)
  const size_t bsize = mi_page_block_size(page);
  if (bsize <= MI_LARGE_OBJ_SIZE_MAX) {
    mi_heap_stat_increase(heap, normal, bsize);
    mi_heap_stat_increase(heap, normal_bins[_mi_bin(bsize)], 1);
    mi_heap_stat_counter_increase(heap, normal_count, 1);
  }
  mi_heap_stat_increase(heap, malloc, size - MI_PADDING_SIZE);
  #endif
  mi_assert_internal(page->free == NULL || _mi_ptr_segment(page->free) == _mi_page_segment(page) ||
                     _mi_page_segment(page)->aligned_block != NULL);
  // the heap profiler's countdown: all an unsampled allocation pays (prof.c)
  if (mi_unlikely((heap->prof_countdown -= (int64_t)size) < 0)) {
    return _mi_prof_malloc_sampled(heap, page, block, size);   // (a tail call: nothing kept across it)
  }
  return block;
}

#if defined(MI_CHECKED_FAST_PATHS)
static mi_decl_noinline void* mi_page_malloc_checked(mi_heap_t* heap, mi_page_t* page, size_t size) {
  return mi_page_malloc_take(heap, page, size, true);
}
#endif

void* _mi_page_malloc(mi_heap_t* heap, mi_page_t* page, size_t size) mi_attr_noexcept {
  return mi_page_malloc_take(heap, page, size, false);
}

static inline void* mi_heap_malloc_small_inline(mi_heap_t* heap, size_t size) {
  mi_assert(heap != NULL);
  mi_assert(heap->thread_id == 0 || heap->thread_id == _mi_thread_id());  // allocate only on the owner thread
  mi_assert(size <= MI_SMALL_SIZE_MAX);
  mi_page_t* page = heap->pages_free_direct[_mi_wsize_from_size(size + MI_PADDING_SIZE)];
  return _mi_page_malloc(heap, page, size + MI_PADDING_SIZE);
}

mi_decl_restrict void* mi_heap_malloc_small(mi_heap_t* heap, size_t size) mi_attr_noexcept {
  return mi_heap_malloc_small_inline(heap, size);
}

mi_decl_restrict void* mi_malloc_small(size_t size) mi_attr_noexcept {
  return mi_heap_malloc_small_inline(mi_get_default_heap(), size);
}

static inline void* mi_heap_malloc_inline(mi_heap_t* heap, size_t size) {
  if (mi_likely(size <= MI_SMALL_SIZE_MAX)) {
    return mi_heap_malloc_small_inline(heap, size);
  }
  return _mi_malloc_generic(heap, (size <= PTRDIFF_MAX ? size + MI_PADDING_SIZE : size));
}

mi_decl_restrict void* mi_heap_malloc(mi_heap_t* heap, size_t size) mi_attr_noexcept {
  return mi_heap_malloc_inline(heap, size);
}

mi_decl_restrict void* mi_malloc(size_t size) mi_attr_noexcept {
  return mi_heap_malloc_inline(mi_get_default_heap(), size);
}

// ---------------------------------------------------------------------------
// Zeroed allocation
// ---------------------------------------------------------------------------

// Zero a fresh block: the whole usable size, or (when the page's free blocks
// are known zero) only the link word, if the link was kept there.
void _mi_block_zero_init(const mi_page_t* page, void* p, size_t size) {
  mi_assert_internal(p != NULL);
  mi_assert_internal(mi_usable_size(p) >= size);
  if ((page->is_zero || mi_page_zeroes_on_free(page)) && size > sizeof(mi_block_t) && MI_DEBUG == 0) {   // debug builds filled the block
    #if !defined(MI_TRAILER_LINK)
    ((mi_block_t*)p)->next = 0;
    #endif
  }
  else {
    _mi_memzero(p, mi_usable_size(p));
  }
}

// Whether a block of `size` has bytes (and a page): secure builds serve
// malloc(0) from the zero area, other builds with a block like any other.
#if defined(MI_ZERO_AREA)
#define mi_block_has_bytes(size)  ((size) > 0)
#else
#define mi_block_has_bytes(size)  (true)
#endif

void* _mi_heap_malloc_zero(mi_heap_t* heap, size_t size, bool zero) mi_attr_noexcept {
  void* p = mi_heap_malloc(heap, size);
  if (zero && p != NULL && mi_block_has_bytes(size)) {
    _mi_block_zero_init(_mi_ptr_page_of(p), p, size);
  }
  return p;
}

mi_decl_restrict void* mi_heap_zalloc(mi_heap_t* heap, size_t size) mi_attr_noexcept {
  return _mi_heap_malloc_zero(heap, size, true);
}

mi_decl_restrict void* mi_zalloc(size_t size) mi_attr_noexcept {
  return mi_heap_zalloc(mi_get_default_heap(), size);
}

mi_decl_restrict void* mi_zalloc_small(size_t size) mi_attr_noexcept {
  void* p = mi_malloc_small(size);
  if (p != NULL && mi_block_has_bytes(size)) _mi_block_zero_init(_mi_ptr_page_of(p), p, size);
  return p;
}

mi_decl_restrict void* mi_heap_calloc(mi_heap_t* heap, size_t count, size_t size) mi_attr_noexcept {
  size_t total;
  if (mi_count_size_overflow(count, size, &total)) return NULL;
  return mi_heap_zalloc(heap, total);
}

mi_decl_restrict void* mi_calloc(size_t count, size_t size) mi_attr_noexcept {
  return mi_heap_calloc(mi_get_default_heap(), count, size);
}

mi_decl_restrict void* mi_heap_mallocn(mi_heap_t* heap, size_t count, size_t size) mi_attr_noexcept {
  size_t total;
  if (mi_count_size_overflow(count, size, &total)) return NULL;
  return mi_heap_malloc(heap, total);
}

mi_decl_restrict void* mi_mallocn(size_t count, size_t size) mi_attr_noexcept {
  return mi_heap_mallocn(mi_get_default_heap(), count, size);
}

// ---------------------------------------------------------------------------
// Free
// ---------------------------------------------------------------------------

// The block start of an aligned (interior) pointer.
mi_block_t* _mi_page_ptr_unalign(const mi_segment_t* segment, const mi_page_t* page, const void* p) {
  mi_assert_internal(page != NULL && p != NULL);
  size_t diff = (uint8_t*)p - _mi_page_start(segment, page, NULL);
  size_t adjust = diff % mi_page_block_size(page);
  return (mi_block_t*)((uintptr_t)p - adjust);
}

// ---------------------------------------------------------------------------
// Checks on free (debug and secure builds: the trailer, double-free detection)
// ---------------------------------------------------------------------------

#if defined(MI_TRAILER_LINK)
// The trailer of a huge block (one block per page).
uint8_t* _mi_block_trailer_huge(const mi_page_t* page, const mi_block_t* block) {
  return mi_trailer_of(block, mi_page_usable_block_size(page));
}
#endif

void _mi_block_next_corrupt(const mi_page_t* page, const mi_block_t* block, const mi_block_t* next) {
  _mi_misuse_message(EFAULT, "corrupted free list entry of size %zub at %p: value 0x%zx\n",
                    mi_page_block_size(page), (void*)block, (size_t)(uintptr_t)next);
}

#if (MI_PADDING > 0)
// The exact size the user asked for (0 for a block that is not handed out).
static size_t mi_page_usable_size_of(const mi_page_t* page, const mi_block_t* block) {
  const size_t usable = mi_page_usable_block_size(page);
  if (usable < sizeof(mi_block_t)) return usable;
  if (((uintptr_t)block % MI_INTPTR_SIZE) != 0) return 0;   // not a block (trailers are aligned words)
  const uint64_t state = mi_trailer_state(page, block, usable);
  return (mi_trailer_state_is_live(state, usable) ? usable - (size_t)(state >> 32) : 0);
}

// A free whose trailer is not live and intact: say what is wrong. False
// means "do not free" (not a block, or a double free).
static mi_decl_noinline mi_decl_cold bool mi_free_trailer_failed(const mi_page_t* page, const mi_block_t* block,
                                                                  size_t usable, uint64_t state) {
  const size_t bsize = usable + MI_PADDING_SIZE;
  if (!mi_page_has_aligned(page) && !mi_page_is_block_start(page, block)) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not the start of a block): %p\n", (const void*)block);
    return false;
  }
  if (mi_trailer_state_is_free(page, state)) {
    _mi_misuse_message(EAGAIN, "double free detected of block %p with size %zu\n", (const void*)block, bsize);
    return false;
  }
  if (mi_trailer_state_is_live(state, usable)) {
    // the canary is intact: the fill after the user data is not
    const size_t size = usable - (size_t)(state >> 32);
    const uint8_t* const fill = (const uint8_t*)block + size;
    size_t i = 0;
    while (i + 1 < usable - size && fill[i] == MI_DEBUG_PADDING) i++;
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: write after %zu bytes\n",
                      (const void*)block, size, size + i);
  }
  else if ((state >> 32) <= usable) {
    // the canary half is damaged, the size half reads true (a short write past the end)
    const size_t size = usable - (size_t)(state >> 32);
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: write after %zu bytes (its canary is damaged)\n",
                      (const void*)block, size, size);
  }
  else {
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: its trailer (canary) is damaged\n",
                      (const void*)block, usable);
  }
  return true;   // (when the process goes on) the block itself is fine to free
}

// A neighbour of a freed block has a damaged canary (trailer or fill): an
// underflow of the freed block or an overflow of the block below (for the
// block below), an overflow of the block above or an underflow of the one
// after it (for the block above). A neighbour that another thread freed
// while it was read (its trailer changed: it zeroes the block after marking
// it free) is not damage.
static mi_decl_noinline mi_decl_cold void mi_free_neighbour_damaged(const mi_page_t* page, const mi_block_t* block,
                                                                    const mi_block_t* neighbour, size_t usable, uint64_t state) {
  atomic_thread_fence(mi_memory_order(acquire));
  if (mi_trailer_state(page, neighbour, usable) != state) return;   // freed (or linked) meanwhile
  if (neighbour < block) {
    _mi_misuse_message(EFAULT, "buffer underflow in heap block %p of size %zu: the canary below it is damaged (a write before its start, or past the end of the block below)\n",
                      (const void*)block, usable);
  }
  else {
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: its canary is damaged (found on the free of the block %p below it; a write past its end, or before the start of the block above it)\n",
                      (const void*)neighbour, usable, (const void*)block);
  }
}

// A neighbour of a block being freed: its trailer must read live (with its
// fill intact, when `fill`) or free (with whatever link).
static inline void mi_free_check_neighbour(const mi_page_t* page, const mi_block_t* block, const mi_block_t* neighbour,
                                           size_t usable, bool fill) {
  const uint64_t state = mi_trailer_state(page, neighbour, usable);
  if (mi_trailer_state_is_live(state, usable)) {
    if (fill && mi_unlikely(!mi_trailer_fill_intact(neighbour, usable, (size_t)(state >> 32)))) {
      mi_free_neighbour_damaged(page, block, neighbour, usable, state);
    }
  }
  else if (mi_unlikely(!mi_trailer_state_is_free(page, state))) {
    mi_free_neighbour_damaged(page, block, neighbour, usable, state);
  }
}

// The trailer checks of a free: this block's trailer must be live with its
// fill intact, the trailer below it (its front canary) live or free; then it
// reads free (`to_local_free`: already linked to the page's local_free
// list, which the caller then points at the block: MI_TRAILER_LINK, the
// owner's fast path). False: do not free.
static inline bool mi_free_check_trailers(const mi_page_t* page, mi_block_t* block, bool local, bool to_local_free) {
  const size_t usable = mi_page_usable_block_size(page);
  if (mi_unlikely(usable < sizeof(mi_block_t))) {   // 8-byte blocks: no room for checks
    #if defined(MI_TRAILER_LINK)
    if (to_local_free) mi_block_set_next(page, block, page->local_free);
    #endif
    return true;
  }
  uint8_t* const trailer = mi_trailer_of(block, usable);
  const uint64_t key = mi_trailer_key(page, block);   // (once: for the check and for the free state)
  const uint64_t state = mi_trailer_load(trailer) ^ key;
  if (mi_unlikely(!mi_trailer_state_is_live(state, usable) ||
                  !mi_trailer_fill_intact(block, usable, (size_t)(state >> 32)))) {
    if (!mi_free_trailer_failed(page, block, usable, state)) return false;
  }
  // free from here on (the trailer first: another thread that checks this
  // block as a neighbour and sees its fill zeroed then sees it free; the
  // link replaces the state when the block goes on a list)
  #if defined(MI_TRAILER_LINK)
  mi_trailer_store(trailer, key ^ (to_local_free ? mi_trailer_free_state(page, page->local_free) : MI_TRAILER_FREE));
  #else
  (void)to_local_free;
  mi_trailer_store(trailer, key ^ MI_TRAILER_FREE);
  #endif
  if (mi_page_zeroes_on_free(page)) mi_block_zero(block, usable);   // freed memory reads zero
  // (MI_CHECK_NEIGHBOURS) the neighbours: the trailer below this block (its front canary: the
  // block below's trailer, or the page's front canary) must be intact; the
  // owner thread, the only one that allocates in the page, also checks the
  // fill of a live block below and the trailer and fill of the block above
  // (an overflow of either neighbour)
  #if defined(MI_TSAN)
  local = false;
  #endif
  if (MI_CHECK_NEIGHBOURS) {
    const size_t bsize = usable + MI_PADDING_SIZE;
    if ((const uint8_t*)block >= page->page_start + bsize || page->has_front_canary) {
      mi_free_check_neighbour(page, block, (const mi_block_t*)((const uint8_t*)block - bsize), usable, local);
    }
    const mi_block_t* const above = (const mi_block_t*)((const uint8_t*)block + bsize);
    if (local && (const uint8_t*)above < page->page_start + (size_t)page->capacity * bsize) {
      mi_free_check_neighbour(page, block, above, usable, true);
    }
  }
  return true;
}
#endif

#if defined(MI_ENCODE_FREELIST) && (MI_DEBUG > 0) && (MI_PADDING == 0)
// Builds with encoded lists but no trailers: a local free whose block's
// first word decodes like a link of its page is looked up in the page's
// lists (live user data rarely does).
static bool mi_list_contains(const mi_page_t* page, const mi_block_t* list, const mi_block_t* elem) {
  while (list != NULL) {
    if (elem == list) return true;
    list = mi_block_next(page, list);
  }
  return false;
}

static mi_decl_noinline bool mi_check_is_double_freex(const mi_page_t* page, const mi_block_t* block) {
  if (mi_list_contains(page, page->free, block) ||
      mi_list_contains(page, page->local_free, block) ||
      mi_list_contains(page, mi_page_thread_free(page), block)) {
    _mi_misuse_message(EAGAIN, "double free detected of block %p with size %zu\n", (void*)block, mi_page_block_size(page));
    return true;
  }
  return false;
}

static inline bool mi_check_is_double_free(const mi_page_t* page, const mi_block_t* block) {
  mi_block_t* n = mi_block_nextx(page, block, page->keys);
  if (((uintptr_t)n & (MI_INTPTR_SIZE - 1)) == 0 && (n == NULL || mi_is_in_same_page(block, n))) {
    return mi_check_is_double_freex(page, block);
  }
  return false;
}
#else
#define mi_check_is_double_free(page, block)  (false)
#endif

#if (MI_STAT > 1)
// Debug statistics of a free, counted by the freeing thread.
static void mi_stat_free(const mi_page_t* page, const mi_block_t* block) {
  mi_heap_t* heap = mi_get_default_heap();
  if (!mi_heap_is_initialized(heap)) return;
  const size_t bsize = mi_page_block_size(page);
  if (bsize <= MI_LARGE_OBJ_SIZE_MAX) {
    mi_heap_stat_decrease(heap, normal, bsize);
    mi_heap_stat_decrease(heap, normal_bins[_mi_bin(bsize)], 1);
  }
  #if (MI_PADDING > 0)
  mi_heap_stat_decrease(heap, malloc, mi_page_usable_size_of(page, block));
  #else
  (void)block;
  mi_heap_stat_decrease(heap, malloc, bsize);
  #endif
}
#else
#define mi_stat_free(page, block)  ((void)0)
#endif

// All checks of a free, before the block goes on a list: false means
// "do not free" (a detected double free). `to_local_free`: see
// mi_free_check_trailers.
static inline bool mi_free_checks(const mi_page_t* page, mi_block_t* block, bool local, bool to_local_free) {
  (void)page; (void)block; (void)local; (void)to_local_free;
  #if (MI_PADDING > 0)
  if (!mi_free_check_trailers(page, block, local, to_local_free)) return false;
  #else
  if (local && mi_unlikely(mi_check_is_double_free(page, block))) return false;
  #endif
  #if (MI_DEBUG > 0)
  if (!mi_page_zeroes_on_free(page)) _mi_memset(block, MI_DEBUG_FREED, mi_page_usable_block_size(page));
  #endif
  return true;
}

// Free a block of a page owned by another thread (or abandoned): push it on
// the page's thread_free with one CAS or, as the first free into a page its
// owner does not scan, on the owner heap's delayed list so that the owner
// notices the page. Returns false, having done nothing, when `await_abandon`
// and the page's heap is going away (see _mi_segment_await_abandon).
static mi_decl_noinline bool mi_free_block_mt(mi_page_t* page, mi_block_t* block, bool await_abandon) {
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

// A local free goes into a page of a heap this thread owns (the segment's
// owner id is this thread's; a fork child never reuses a vanished thread's
// id): one of its own, or an orphan heap it abandons on the ended thread's
// behalf (init.c).
#define mi_assert_local_page(page) \
  mi_assert_internal(mi_page_heap(page) == NULL || mi_page_heap(page)->thread_id == _mi_thread_id())

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


#if defined(MI_ZERO_AREA)
// ---------------------------------------------------------------------------
// malloc(0) in secure builds: a unique address in a reserved area of no
// access, 16 bytes apart (MI_ZERO_SLOTS of them), one bit per address saying
// it is handed out. Reserved at the first malloc(0); the bits are committed
// as they are touched. free finds such a pointer on its cold path, where the
// segment map has said it is not in a segment.
// ---------------------------------------------------------------------------
#define MI_ZERO_SLOT       (16)
#define MI_ZERO_SLOTS      ((size_t)4 * 1024 * 1024)   // 64 MiB of address space, 512 KiB of bits
static _Atomic(uintptr_t) mi_zero_area;                // the area's start, 0 until the first malloc(0)
static _Atomic(uintptr_t) mi_zero_bits;                // MI_ZERO_SLOTS bits
static _Atomic(size_t)    mi_zero_cursor;

static bool mi_zero_area_init(void) {
  if (mi_atomic_load_acquire(&mi_zero_area) != 0) return true;
  bool is_pinned = false, is_zero = false;
  const size_t area_size = MI_ZERO_SLOTS * MI_ZERO_SLOT;
  void* area = _mi_os_alloc_aligned_at(area_size, MI_SEGMENT_SIZE, 0, false /* no access */, false, &is_pinned, &is_zero);
  void* bits = _mi_os_alloc(MI_ZERO_SLOTS / 8);
  if (area == NULL || bits == NULL) {
    _mi_os_free_ex(area, area_size, 0);
    _mi_os_free(bits, MI_ZERO_SLOTS / 8);
    return false;
  }
  uintptr_t expected = 0;
  if (!mi_atomic_cas_strong_acq_rel(&mi_zero_bits, &expected, (uintptr_t)bits)) {
    _mi_os_free(bits, MI_ZERO_SLOTS / 8);   // another thread was first
    _mi_os_free_ex(area, area_size, 0);
    while (mi_atomic_load_acquire(&mi_zero_area) == 0) { }   // it publishes the area next
    return true;
  }
  mi_atomic_store_release(&mi_zero_area, (uintptr_t)area);
  return true;
}

void* _mi_zero_alloc(void) {
  if (!mi_zero_area_init()) { errno = ENOMEM; return NULL; }
  _Atomic(uintptr_t)* const bits = (_Atomic(uintptr_t)*)mi_atomic_load_relaxed(&mi_zero_bits);
  for (size_t tries = 0; tries < MI_ZERO_SLOTS; tries++) {
    const size_t i = mi_atomic_add_relaxed(&mi_zero_cursor, 1) % MI_ZERO_SLOTS;
    if (i == 0) continue;   // (never the area's start: free tells those apart)
    const uintptr_t bit = (uintptr_t)1 << (i % MI_INTPTR_BITS);
    if ((mi_atomic_or_acq_rel(&bits[i / MI_INTPTR_BITS], bit) & bit) == 0) {
      return (void*)(mi_atomic_load_relaxed(&mi_zero_area) + i * MI_ZERO_SLOT);
    }
  }
  _mi_error_message(ENOMEM, "unable to allocate memory (0 bytes: every zero-size address is in use)\n");
  errno = ENOMEM;
  return NULL;
}

bool _mi_zero_area_contains(const void* p) {
  const uintptr_t area = mi_atomic_load_acquire(&mi_zero_area);
  return (area != 0 && (uintptr_t)p - area < MI_ZERO_SLOTS * MI_ZERO_SLOT);
}

// Is p in the zero area? (then free it: true)
static bool mi_zero_free(const void* p) {
  if (!_mi_zero_area_contains(p)) return false;
  const size_t ofs = (size_t)((uintptr_t)p - mi_atomic_load_relaxed(&mi_zero_area));
  const size_t i = ofs / MI_ZERO_SLOT;
  const uintptr_t bit = (uintptr_t)1 << (i % MI_INTPTR_BITS);
  _Atomic(uintptr_t)* const bits = (_Atomic(uintptr_t)*)mi_atomic_load_relaxed(&mi_zero_bits);
  if (ofs % MI_ZERO_SLOT != 0) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not the start of a block): %p\n", p);
  }
  else if ((mi_atomic_and_acq_rel(&bits[i / MI_INTPTR_BITS], ~bit) & bit) == 0) {
    _mi_misuse_message(EAGAIN, "double free detected of block %p with size 0\n", p);
  }
  return true;
}
#endif

// A pointer whose segment unit holds no segment of ours: report, free nothing.
static mi_decl_noinline mi_decl_cold void mi_free_invalid(const void* p) {
  #if defined(MI_ZERO_AREA)
  if (mi_zero_free(p)) return;   // malloc(0)
  #endif
  _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not allocated by mimalloc): %p\n", p);
}

#if defined(MI_FREE_CHECK_PTR)
// Checked builds (secure and debug builds, which have trailers): a
// freed pointer must be aligned and lie in its page's extended blocks with
// room for a whole block after it, so that its trailer can be read; whether
// it is a block's start then shows in that trailer (mi_free_check_trailers
// reports the exact reason when it does not read live). Pages of aligned
// blocks (any address inside a block finds it) and every pointer outside that
// range take the slow check here, which reports.
static mi_decl_noinline bool mi_free_ptr_check_slow(const mi_page_t* page, const void* p) {
  if (!page->segment_in_use || page->xblock_size == 0) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (in an unused page): %p\n", p);
    return false;
  }
  if (mi_page_has_aligned(page)) return true;
  if (((uintptr_t)p % MI_INTPTR_SIZE) != 0) {
    _mi_misuse_message(EINVAL, "mi_free: invalid (unaligned) pointer: %p\n", p);
    return false;
  }
  if (!mi_page_is_block_start(page, p)) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not the start of a block): %p\n", p);
    return false;
  }
  return true;
}

// The range test alone (the slow check reports what fails it).
static inline bool mi_free_ptr_in_range(const mi_page_t* page, const void* p) {
  const size_t ofs = (size_t)((const uint8_t*)p - page->page_start);   // huge below the start
  const size_t bsize = page->xblock_size;   // (a huge page: the sentinel, and only its start passes)
  return (ofs + bsize - 1 < mi_page_capacity_shared(page) * bsize && (ofs % MI_INTPTR_SIZE) == 0);
}

static inline bool mi_free_ptr_check(const mi_page_t* page, const void* p) {
  if (mi_likely(mi_free_ptr_in_range(page, p))) return true;
  return mi_free_ptr_check_slow(page, p);
}
#endif

#if defined(MI_CHECKED_FAST_PATHS)
// The owner's fast path in the secure profile ON: the pointer in its page's
// blocks, the block's own trailer live with its fill intact; then the
// trailer reads free. Anything else (not a block's start, a double free, an
// overflow) returns false, having changed nothing, and the caller hands the
// free to mi_free_generic, whose checks say what it is. (Only tail calls
// leave this path: no registers to save on the way in.)
static inline bool mi_free_fast_checked(const mi_page_t* page, mi_block_t* block) {
  if (mi_unlikely(!mi_free_ptr_in_range(page, block))) return false;
  const size_t bsize = page->xblock_size;
  if (mi_unlikely(bsize >= MI_HUGE_BLOCK_SIZE)) return false;   // (its size is a call away)
  const size_t usable = bsize - MI_PADDING_SIZE;
  if (mi_unlikely(usable < sizeof(mi_block_t))) return true;   // 8-byte blocks: no room for checks
  uint8_t* const trailer = mi_trailer_of(block, usable);
  const uint64_t key = mi_trailer_key(page, block);
  const uint64_t state = mi_trailer_load(trailer) ^ key;
  if (mi_unlikely(!mi_trailer_state_is_live(state, usable) ||
                  !mi_trailer_fill_intact(block, usable, (size_t)(state >> 32)))) return false;
  mi_trailer_store(trailer, key ^ MI_TRAILER_FREE);
  return true;
}
#endif

// Free a block of another thread's (or an abandoned) segment.
static void mi_free_remote(mi_segment_t* segment, mi_page_t* page, mi_block_t* block, uintptr_t owner) {
  const bool in_set = mi_segment_in_abandoned_set(segment);
  if (owner != 0 && segment->page_kind == MI_PAGE_HUGE) {
    // the owner gives the segment back at its next slow path; the memory goes now
    _mi_segment_huge_page_purge(segment, page, block);
  }
  bool gave_up = false;
  for (;;) {
    if (owner == 0 && segment->page_kind == MI_PAGE_HUGE) {
      // abandoned huge block: its segment is freed at once
      _mi_segment_huge_page_free(segment, page, block);
      return;
    }
    if (owner == 0 && !in_set && _mi_segment_reclaim_on_free(segment, mi_get_default_heap())) {
      // an abandoned segment outside the regions: only a freeing thread finds it
      mi_free_block_local(page, block);
      return;
    }
    const bool await_abandon = (!in_set && owner != 0 && owner != MI_THREAD_ID_VANISHED && !gave_up);
    if (mi_free_block_mt(page, block, await_abandon)) break;
    owner = _mi_segment_await_abandon(segment, owner, &gave_up);
  }
  // a free into an abandoned segment is collected by the abandoned sweep
  if (owner == 0) _mi_segment_abandoned_free_note();
}

// Everything that is not a local free into a non-full page without aligned blocks.
static mi_decl_noinline void mi_free_generic(mi_segment_t* segment, mi_page_t* page, void* p) mi_attr_noexcept {
  if (mi_unlikely(!_mi_segment_map_contains(segment))) {
    // the fast path read a foreign owner id here; nothing else has been touched
    mi_free_invalid(p);
    return;
  }
  page = _mi_slice_page(page);   // an interior pointer into a large block's later slice
  #if defined(MI_FREE_CHECK_PTR)
  if (mi_unlikely(!mi_free_ptr_check(page, p))) return;   // (the unit-aligned path comes here unchecked)
  #endif
  mi_block_t* block = (mi_page_has_aligned(page) ? _mi_page_ptr_unalign(segment, page, p) : (mi_block_t*)p);
  const uintptr_t owner = mi_atomic_load_relaxed(&segment->thread_id);
  const bool local = (owner == _mi_thread_id());
  mi_stat_free(page, block);
  if (!mi_free_checks(page, block, local, false)) return;
  if (mi_unlikely(mi_page_has_sampled(page))) _mi_prof_free(page, block);   // before the block can be reused
  if (mi_likely(local)) mi_free_block_local(page, block);
  else mi_free_remote(segment, page, block, owner);
  _mi_purger_poll();
}

// The owner's free emptied the page (a tail call from mi_free's fast path).
static mi_decl_noinline void mi_free_page_emptied(mi_page_t* page) mi_attr_noexcept {
  _mi_page_retire(page);
  _mi_purger_poll();
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

void mi_free(void* p) mi_attr_noexcept {
  mi_segment_t* const segment = _mi_ptr_segment(p);
  if (mi_unlikely((void*)segment == p)) {   // NULL, or a big-alignment block
    mi_free_unit_aligned(p);
    return;
  }
  #if defined(MI_FREE_CHECK_PTR)
  // debug and secure builds validate before reading anything at the segment address
  if (mi_unlikely(!_mi_segment_map_contains(segment))) {
    mi_free_invalid(p);
    return;
  }
  #endif
  mi_page_t* const page = _mi_segment_slice_of(segment, p);   // (a large page's continuation slice: flags != 0)
  const uintptr_t tid = _mi_thread_id();
  if (mi_likely(tid == mi_atomic_load_relaxed(&segment->thread_id) && mi_page_flags(page) == 0)) {
    mi_block_t* const block = (mi_block_t*)p;
    mi_assert_local_page(page);
    #if defined(MI_CHECKED_FAST_PATHS)
    if (mi_unlikely(!mi_free_fast_checked(page, block))) {
      mi_free_generic(segment, page, p);
      return;
    }
    #else
    #if defined(MI_FREE_CHECK_PTR)
    if (mi_unlikely(!mi_free_ptr_check(page, p))) return;
    #endif
    mi_stat_free(page, block);
    if (!mi_free_checks(page, block, true, true)) return;
    #endif
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

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

// The segment and page of any block pointer we handed out (including the
// unit-aligned big-alignment ones); NULL for NULL.
static mi_page_t* mi_checked_ptr_page(const void* p, mi_segment_t** psegment) {
  mi_segment_t* segment = _mi_ptr_segment(p);
  if (mi_unlikely((const void*)segment == p)) {
    segment = _mi_segment_of_unit_aligned(p);
    if (psegment != NULL) *psegment = segment;
    return (segment == NULL ? NULL : &segment->pages[0]);
  }
  if (psegment != NULL) *psegment = segment;
  return _mi_segment_page_of(segment, p);
}

mi_page_t* _mi_ptr_page_of(const void* p) {
  return mi_checked_ptr_page(p, NULL);
}

size_t _mi_usable_size_of(const void* p) {
  #if (MI_DEBUG > 0) || defined(MI_ZERO_AREA)
  // debug and secure builds validate the pointer first, as free does
  if (p != NULL) {
    const mi_segment_t* s = _mi_ptr_segment(p);
    #if defined(MI_ZERO_AREA)
    if (_mi_zero_area_contains(p)) return 0;   // malloc(0)
    #endif
    if ((const void*)s != p && !_mi_segment_map_contains(s)) {
      _mi_misuse_message(EINVAL, "mi_usable_size: invalid pointer (not allocated by mimalloc): %p\n", p);
      return 0;
    }
  }
  #endif
  mi_segment_t* segment;
  const mi_page_t* page = mi_checked_ptr_page(p, &segment);
  if (page == NULL) return 0;
  #if (MI_DEBUG > 0)
  if (((uintptr_t)p & (MI_INTPTR_SIZE - 1)) != 0 && !mi_page_has_aligned(page)) {
    _mi_misuse_message(EINVAL, "mi_usable_size: invalid (unaligned) pointer: %p\n", p);
    return 0;
  }
  #endif
  #if (MI_PADDING > 0)
  // exact: the size the user asked for
  const mi_block_t* block = (mi_page_has_aligned(page) ? _mi_page_ptr_unalign(segment, page, p) : (const mi_block_t*)p);
  const size_t size = mi_page_usable_size_of(page, block);
  const size_t adjust = (size_t)((const uint8_t*)p - (const uint8_t*)block);
  return (size > adjust ? size - adjust : 0);
  #else
  const size_t size = mi_page_block_size(page);
  if (mi_unlikely(mi_page_has_aligned(page))) {
    uint8_t* block = (uint8_t*)_mi_page_ptr_unalign(segment, page, p);
    return size - (size_t)((uint8_t*)p - block);
  }
  return size;
  #endif
}

size_t mi_usable_size(const void* p) mi_attr_noexcept {
  return _mi_usable_size_of(p);
}

#if (MI_PADDING > 0)
// ---------------------------------------------------------------------------
// Checked builds: a block's trailer knows the size asked for and whether C++
// new[] allocated it, so delete and delete[] are told apart, a sized delete
// is checked against the size, and an in-place realloc moves the trailer's
// fill to the new end.
// ---------------------------------------------------------------------------

// The live block holding p, a pointer we handed out (NULL otherwise: free
// reports those), with its page, usable size and trailer state.
static mi_block_t* mi_live_block_of(const void* p, mi_page_t** ppage, size_t* usable, uint64_t* state) {
  if (p == NULL) return NULL;
  const mi_segment_t* const s = _mi_ptr_segment(p);
  if ((const void*)s != p && !_mi_segment_map_contains(s)) return NULL;
  mi_segment_t* segment;
  mi_page_t* const page = mi_checked_ptr_page(p, &segment);
  if (page == NULL || !page->segment_in_use || page->xblock_size == 0) return NULL;
  mi_block_t* const block = (mi_page_has_aligned(page) ? _mi_page_ptr_unalign(segment, page, p) : (mi_block_t*)p);
  if (!mi_page_is_block_start(page, block)) return NULL;
  *usable = mi_page_usable_block_size(page);
  if (*usable < sizeof(mi_block_t)) return NULL;
  *state = mi_trailer_state(page, block, *usable);
  if (!mi_trailer_state_is_live(*state, *usable)) return NULL;
  *ppage = page;
  return block;
}

// A fresh block from C++ new[]: its trailer gets the array bit.
void* _mi_new_array_mark(void* p) {
  mi_page_t* page; size_t usable; uint64_t state;
  mi_block_t* const block = mi_live_block_of(p, &page, &usable, &state);
  if (block != NULL) {
    uint8_t* const trailer = mi_trailer_of(block, usable);
    mi_trailer_store(trailer, mi_trailer_load(trailer) ^ MI_TRAILER_ARRAY);   // (the state's bit was clear)
  }
  return p;
}

// C++ delete (array: delete[]) of p; `size` is a sized delete's size, or
// SIZE_MAX. A mismatch is reported and the block is freed all the same.
void _mi_free_delete(void* p, size_t size, bool array) mi_attr_noexcept {
  mi_page_t* page; size_t usable; uint64_t state;
  const mi_block_t* const block = mi_live_block_of(p, &page, &usable, &state);
  if (block != NULL) {
    const bool is_array = ((state & MI_TRAILER_ARRAY) != 0);
    const size_t asked = usable - (size_t)(state >> 32) - (size_t)((const uint8_t*)p - (const uint8_t*)block);
    if (is_array != array) {
      _mi_misuse_message(EINVAL, (array ? "delete[] of a block not allocated by new[]: %p\n"
                                        : "delete of a block allocated by new[] (delete[] expected): %p\n"), p);
    }
    else if (size != SIZE_MAX && size != asked) {
      _mi_misuse_message(EINVAL, "sized delete of block %p with the wrong size %zu (it was allocated with %zu)\n", p, size, asked);
    }
  }
  mi_free(p);
}

// A write of n bytes at dst (memcpy, memmove, memset with the override):
// when dst is inside one of our blocks, the write must stay within the size
// asked for, and the block must be live. Reports (as a misuse) otherwise;
// `fun` names the call.
void _mi_check_write(const void* dst, size_t n, const char* fun) mi_attr_noexcept {
  if (n == 0) return;
  const mi_segment_t* const segment = _mi_ptr_segment(dst);
  if ((const void*)segment == dst || !_mi_segment_map_contains(segment)) return;   // not in a block of ours
  const mi_page_t* const page = _mi_segment_page_of(segment, dst);
  if (!page->segment_in_use || page->xblock_size == 0 || (const uint8_t*)dst < page->page_start) return;
  const size_t bsize = mi_page_block_size(page);
  const size_t idx = (size_t)((const uint8_t*)dst - page->page_start) / bsize;
  const size_t usable = bsize - MI_PADDING_SIZE;
  if (idx >= mi_page_capacity_shared(page) || usable < sizeof(mi_block_t)) return;
  const mi_block_t* const block = (const mi_block_t*)(page->page_start + idx * bsize);
  const uint64_t state = mi_trailer_state(page, block, usable);
  if (mi_trailer_state_is_free(page, state)) {
    _mi_misuse_message(EFAULT, "write after free: %s of %zu bytes at %p, in freed heap block %p\n", fun, n, dst, (const void*)block);
    return;
  }
  if (!mi_trailer_state_is_live(state, usable)) return;   // (a damaged trailer is reported when the block is freed)
  const uint8_t* const limit = (const uint8_t*)block + usable - (size_t)(state >> 32);
  if ((const uint8_t*)dst + n > limit || (const uint8_t*)dst + n < (const uint8_t*)dst) {
    _mi_misuse_message(EFAULT, "buffer overflow by %s: %zu bytes at %p run %zu bytes past the end of heap block %p of size %zu\n",
                      fun, n, dst, (size_t)((const uint8_t*)dst + n - limit), (const void*)block, (size_t)(limit - (const uint8_t*)block));
  }
}

// The trailer of the block holding p says that the user asked for `newsize`
// bytes from p on: a realloc in place, an aligned block inside a larger one.
void _mi_block_set_size(void* p, size_t newsize) {
  mi_page_t* page; size_t usable; uint64_t state;
  mi_block_t* const block = mi_live_block_of(p, &page, &usable, &state);
  if (block == NULL) return;
  const size_t adjust = (size_t)((uint8_t*)p - (uint8_t*)block);
  mi_assert_internal(newsize + adjust <= usable);
  mi_trailer_set_live(page, block, usable, usable - (newsize + adjust));
  if ((state & MI_TRAILER_ARRAY) != 0) _mi_new_array_mark(p);
}
#endif

void* mi_expand(void* p, size_t newsize) mi_attr_noexcept {
  if (p == NULL) return NULL;
  const size_t size = mi_usable_size(p);
  if (newsize > size) return NULL;
  return p;   // it fits
}

// ---------------------------------------------------------------------------
// Re-allocation
// ---------------------------------------------------------------------------

void* _mi_heap_realloc_zero(mi_heap_t* heap, void* p, size_t newsize, bool zero) mi_attr_noexcept {
  if (p == NULL) return _mi_heap_malloc_zero(heap, newsize, zero);
  const size_t size = mi_usable_size(p);
  if (newsize <= size && newsize >= (size / 2)) {
    // reallocation still fits and wastes at most 50%
    #if (MI_PADDING > 0)
    if (newsize != size) _mi_block_set_size(p, newsize);
    #endif
    return p;
  }
  void* newp = mi_heap_malloc(heap, newsize);
  if (mi_likely(newp != NULL)) {
    _mi_realloc_move(newp, p, size, newsize, zero);
  }
  return newp;
}

// Finish a moving reallocation: copy, zero (for the rezalloc family) and free
// the old block. A zeroed block is zero over its whole usable size beyond
// what the user wrote; the new block keeps that invariant, so growing it
// again never exposes old contents.
void _mi_realloc_move(void* newp, void* p, size_t size, size_t newsize, bool zero) {
  if (zero && newsize > size) {
    // from the last word of the old block (it may hold padding) to the end
    const size_t start = (size >= sizeof(intptr_t) ? size - sizeof(intptr_t) : 0);
    _mi_memzero((uint8_t*)newp + start, mi_usable_size(newp) - start);
  }
  memcpy(newp, p, (newsize > size ? size : newsize));
  mi_free(p);   // only free if successful
}

void* mi_heap_realloc(mi_heap_t* heap, void* p, size_t newsize) mi_attr_noexcept {
  return _mi_heap_realloc_zero(heap, p, newsize, false);
}

void* mi_heap_reallocn(mi_heap_t* heap, void* p, size_t count, size_t size) mi_attr_noexcept {
  size_t total;
  if (mi_count_size_overflow(count, size, &total)) return NULL;
  return mi_heap_realloc(heap, p, total);
}

// Like realloc, but frees `p` when the reallocation fails.
void* mi_heap_reallocf(mi_heap_t* heap, void* p, size_t newsize) mi_attr_noexcept {
  void* newp = mi_heap_realloc(heap, p, newsize);
  if (newp == NULL && p != NULL) mi_free(p);
  return newp;
}

void* mi_heap_rezalloc(mi_heap_t* heap, void* p, size_t newsize) mi_attr_noexcept {
  return _mi_heap_realloc_zero(heap, p, newsize, true);
}

void* mi_heap_recalloc(mi_heap_t* heap, void* p, size_t count, size_t size) mi_attr_noexcept {
  size_t total;
  if (mi_count_size_overflow(count, size, &total)) return NULL;
  return mi_heap_rezalloc(heap, p, total);
}

void* mi_realloc(void* p, size_t newsize) mi_attr_noexcept {
  return mi_heap_realloc(mi_get_default_heap(), p, newsize);
}

void* mi_reallocn(void* p, size_t count, size_t size) mi_attr_noexcept {
  return mi_heap_reallocn(mi_get_default_heap(), p, count, size);
}

void* mi_reallocf(void* p, size_t newsize) mi_attr_noexcept {
  return mi_heap_reallocf(mi_get_default_heap(), p, newsize);
}

void* mi_rezalloc(void* p, size_t newsize) mi_attr_noexcept {
  return mi_heap_rezalloc(mi_get_default_heap(), p, newsize);
}

void* mi_recalloc(void* p, size_t count, size_t size) mi_attr_noexcept {
  return mi_heap_recalloc(mi_get_default_heap(), p, count, size);
}

// ---------------------------------------------------------------------------
// Strings and paths
// ---------------------------------------------------------------------------

mi_decl_restrict char* mi_heap_strdup(mi_heap_t* heap, const char* s) mi_attr_noexcept {
  if (s == NULL) return NULL;
  const size_t n = strlen(s);
  char* t = (char*)mi_heap_malloc(heap, n + 1);
  if (t != NULL) memcpy(t, s, n + 1);
  return t;
}

mi_decl_restrict char* mi_strdup(const char* s) mi_attr_noexcept {
  return mi_heap_strdup(mi_get_default_heap(), s);
}

mi_decl_restrict char* mi_heap_strndup(mi_heap_t* heap, const char* s, size_t n) mi_attr_noexcept {
  if (s == NULL) return NULL;
  const char* end = (const char*)memchr(s, 0, n);
  const size_t m = (end != NULL ? (size_t)(end - s) : n);
  char* t = (char*)mi_heap_malloc(heap, m + 1);
  if (t == NULL) return NULL;
  memcpy(t, s, m);
  t[m] = 0;
  return t;
}

mi_decl_restrict char* mi_strndup(const char* s, size_t n) mi_attr_noexcept {
  return mi_heap_strndup(mi_get_default_heap(), s, n);
}

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

char* mi_heap_realpath(mi_heap_t* heap, const char* fname, char* resolved_name) mi_attr_noexcept {
  if (resolved_name != NULL) {
    return realpath(fname, resolved_name);
  }
  char buf[PATH_MAX + 1];
  char* rname = realpath(fname, buf);
  return mi_heap_strndup(heap, rname, PATH_MAX);   // NULL stays NULL (errno from realpath)
}

char* mi_realpath(const char* fname, char* resolved_name) mi_attr_noexcept {
  return mi_heap_realpath(mi_get_default_heap(), fname, resolved_name);
}
