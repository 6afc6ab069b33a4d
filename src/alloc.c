/* ----------------------------------------------------------------------------
  alloc.c -- the allocation API: malloc, calloc, realloc and their relatives
  (free is in free.c, the checks of debug and secure builds in secure.c).

  The malloc fast path fits on one screen: for size <= 1 KiB, index the
  heap's direct-page array by word size and pop the page's free list; up to
  128 KiB, the same from the front page of the size class's queue. A page
  whose free list ran out refills it, most of the time, without the generic
  path's housekeeping (_mi_page_refill); anything else goes to
  `_mi_malloc_generic`. The heap profiler adds one countdown
  decrement to it and nothing to free: a page holding a sampled block has a
  flag that sends its frees to the generic path (prof.c).
-----------------------------------------------------------------------------*/
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE   // realpath
#endif
#include "mimalloc-internal.h"
#include "prim/prim.h"   // _mi_prim_realpath


// ---------------------------------------------------------------------------
// Allocation fast path
// ---------------------------------------------------------------------------

static mi_decl_noinline void* mi_page_malloc_checked(mi_heap_t* heap, mi_page_t* page, size_t size);

// Pop a block from a page known to have free blocks; else take the slow path.
// (`checked`: the checked version of builds with MI_CHECKED_FAST_PATHS or
// MI_FULL_FAST_PATH; else a constant false.)
static mi_decl_forceinline void* mi_page_malloc_take(mi_heap_t* heap, mi_page_t* page, size_t size, bool checked) {
  mi_block_t* const block = page->free;
  if (mi_unlikely(block == NULL)) {
    return _mi_malloc_generic(heap, size);
  }
  uint8_t* trailer;
  uint64_t key;
  if (mi_unlikely(!mi_page_pop(heap, page, block, checked, &trailer, &key))) {   // (checked builds: secure.h)
    return mi_page_malloc_checked(heap, page, size);
  }
  page->used++;
  mi_block_on_alloc(heap, page, block, size, trailer, key, checked);   // (checked builds; nothing in release)
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

static mi_decl_noinline void* mi_page_malloc_checked(mi_heap_t* heap, mi_page_t* page, size_t size) {
  return mi_page_malloc_take(heap, page, size, true);
}

void* _mi_page_malloc(mi_heap_t* heap, mi_page_t* page, size_t size) mi_attr_noexcept {
  return mi_page_malloc_take(heap, page, size, false);
}

// A page of any kind, from the generic path: in builds with checked fast
// paths, a huge page (whose block size is a call away) or one of blocks with
// no room for a trailer (MI_PAGE_CHECK_SLOW) takes the checked version; the
// fast path never meets those (the direct array's pages are neither).
void* _mi_page_malloc_any(mi_heap_t* heap, mi_page_t* page, size_t size) mi_attr_noexcept {
  #if defined(MI_CHECKED_FAST_PATHS) || defined(MI_FULL_FAST_PATH)
  if (mi_unlikely((mi_page_flags(page) & MI_PAGE_CHECK_SLOW) != 0)) return mi_page_malloc_checked(heap, page, size);
  return _mi_page_malloc(heap, page, size);
  #else
  return _mi_page_malloc(heap, page, size);
  #endif
}

static inline void* mi_heap_malloc_small_inline(mi_heap_t* heap, size_t size) {
  mi_assert(heap != NULL);
  mi_assert(heap->thread_id == 0 || heap->thread_id == _mi_thread_id());  // allocate only on the owner thread
  mi_assert(size <= MI_SMALL_SIZE_MAX);
  mi_page_t* page = heap->pages_free_direct[_mi_wsize_from_size(size + MI_PADDING_SIZE)];
  return mi_page_malloc_take(heap, page, size + MI_PADDING_SIZE, false);   // (inlined whatever the compiler thinks of _mi_page_malloc)
}

mi_decl_restrict void* mi_heap_malloc_small(mi_heap_t* heap, size_t size) mi_attr_noexcept {
  return mi_heap_malloc_small_inline(heap, size);
}

mi_decl_restrict void* mi_malloc_small(size_t size) mi_attr_noexcept {
  return mi_heap_malloc_small_inline(mi_get_default_heap(), size);
}

// Blocks over 1 KiB up to the medium limit (128 KiB): the page at the front
// of the size's queue, when its free list has a block or can be refilled
// (_mi_page_refill), as the direct array serves smaller ones (the generic
// path leaves the page it allocates from at the front: the pages before it
// go to the full queue); else the generic path. (Builds with a random
// extension order toss their coin between fresh and freed blocks at each
// refill, as for the smaller sizes.) docs/design.md, "Fast paths".
static mi_decl_noinline void* mi_heap_malloc_queued(mi_heap_t* heap, size_t size) {
  if (mi_likely(size <= MI_MEDIUM_OBJ_SIZE_MAX - MI_PADDING_SIZE)) {
    const size_t bsize = size + MI_PADDING_SIZE;
    mi_page_t* const page = heap->pages[_mi_bin(bsize)].first;   // (NULL in the empty heap of a new thread)
    if (mi_likely(page != NULL) && (mi_likely(page->free != NULL) || _mi_page_refill(heap, page))) {
      return _mi_page_malloc_any(heap, page, bsize);
    }
  }
  return _mi_malloc_generic(heap, (size <= PTRDIFF_MAX ? size + MI_PADDING_SIZE : size));
}

static inline void* mi_heap_malloc_inline(mi_heap_t* heap, size_t size) {
  if (mi_likely(size <= MI_SMALL_SIZE_MAX)) {
    return mi_heap_malloc_small_inline(heap, size);
  }
  return mi_heap_malloc_queued(heap, size);
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
  if ((page->is_zero || mi_page_frees_zero_whole(page)) && size > sizeof(mi_block_t) && MI_DEBUG == 0) {   // debug builds filled the block
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
// Sizes
// ---------------------------------------------------------------------------

static size_t mi_usable_size_of(const void* p) {
  #if (MI_DEBUG > 0) || defined(MI_ZERO_AREA)
  // debug and secure builds validate the pointer first, as free does
  if (p != NULL) {
    const mi_segment_t* s = _mi_ptr_segment(p);
    #if defined(MI_ZERO_AREA)
    if (_mi_zero_area_contains(p)) return 0;   // malloc(0)
    #endif
    if ((const void*)s != p && !_mi_segment_holds(s, p)) {
      _mi_misuse_message(EINVAL, "mi_usable_size: invalid pointer (not allocated by mimalloc): %p\n", p);
      return 0;
    }
  }
  #endif
  mi_segment_t* segment;
  const mi_page_t* page = _mi_ptr_page(p, &segment);
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
  return mi_usable_size_of(p);
}

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

// A caller's buffer holds PATH_MAX bytes (as realpath(3) says).
#define MI_PATH_MAX 4096

char* mi_heap_realpath(mi_heap_t* heap, const char* fname, char* resolved_name) mi_attr_noexcept {
  char buf[MI_PATH_MAX + 1];
  char* const dest = (resolved_name != NULL ? resolved_name : buf);
  const int err = _mi_prim_realpath(fname, dest, MI_PATH_MAX);
  if (err != 0) { errno = err; return NULL; }
  if (resolved_name != NULL) return resolved_name;
  return mi_heap_strndup(heap, buf, MI_PATH_MAX);
}

char* mi_realpath(const char* fname, char* resolved_name) mi_attr_noexcept {
  return mi_heap_realpath(mi_get_default_heap(), fname, resolved_name);
}
