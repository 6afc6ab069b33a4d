/* ----------------------------------------------------------------------------
  alloc-aligned.c -- aligned allocation: `(p + offset) % alignment == 0`.

  In order of preference:
  1. lucky: the next free block of the small size class happens to be aligned;
  2. natural: with offset 0, a size that is a multiple of the alignment (up
     to 128 KiB) gets a block aligned by construction (bin sizes are then
     multiples of the alignment and page areas start block-aligned);
  3. over-allocate `size + alignment - 1` and return an interior pointer;
     the page is marked `has_aligned` so free finds the block start;
  4. alignments above half a segment (> 2 MiB): a dedicated huge segment laid
     out so that the returned pointer lies in the segment's first unit, past
     the header, or exactly at its end (then it is the block start), where
     free finds the segment (see docs/design.md); with an offset that is not
     a multiple of 16 the block keeps its 16-byte alignment and the pointer
     lies up to 15 bytes into it (`has_aligned`). The offset fixes where the
     pointer lies in its 4 MiB unit: one that puts it 1 byte to a segment
     header's size past a unit's start (e.g. alignment - 1, or SIZE_MAX) has
     no such place and fails with EINVAL.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

// Big alignments: a dedicated segment.
static mi_decl_noinline void* mi_heap_malloc_big_aligned(mi_heap_t* heap, size_t size, size_t alignment, size_t offset, bool zero) {
  if (_mi_segment_big_aligned_ofs(offset) == 0) {
    errno = EINVAL;   // the pointer would lie just past a unit's start: free could not find its segment
    return NULL;
  }
  if (!mi_heap_is_initialized(heap)) {
    mi_thread_init();
    heap = mi_get_default_heap();
    if (!mi_heap_is_initialized(heap)) { errno = ENOMEM; return NULL; }
  }
  // The block itself starts 16-aligned, as every block (its free-list link
  // and the debug padding are written there): an offset that is not a
  // multiple of 16 is taken up inside the block, which is then an aligned
  // block like those of the over-allocating path below. The segment places
  // the pointer, not the block, where free finds it.
  const size_t adjust = (size_t)(0 - offset) % MI_MAX_ALIGN_SIZE;   // p - block
  mi_page_t* page = _mi_huge_page_alloc(heap, size + adjust + MI_PADDING_SIZE, alignment, offset);
  if (page == NULL) {
    _mi_error_message(ENOMEM, "unable to allocate aligned memory (%zu bytes, alignment %zu)\n", size, alignment);
    errno = ENOMEM;
    return NULL;
  }
  uint8_t* block = (uint8_t*)_mi_page_malloc_any(heap, page, size + adjust + MI_PADDING_SIZE);
  mi_assert_internal(((uintptr_t)block + adjust + offset) % alignment == 0);
  mi_assert_internal(_mi_ptr_page_of(block + adjust) == page);
  if (zero) _mi_block_zero_init(page, block, size + adjust);
  if (adjust != 0) mi_page_set_has_aligned(page, true);
  return block + adjust;
}

static mi_decl_noinline void* mi_heap_malloc_zero_aligned_at_fallback(mi_heap_t* heap, size_t size, size_t alignment, size_t offset, bool zero) {
  if (mi_unlikely(alignment > MI_ALIGNMENT_MAX_IN_SEGMENT)) {
    return mi_heap_malloc_big_aligned(heap, size, alignment, offset, zero);
  }
  const uintptr_t align_mask = alignment - 1;
  // natural alignment of the size classes (the block size, padding included, decides)
  const size_t padsize = size + MI_PADDING_SIZE;
  if (offset == 0 && alignment <= padsize && padsize <= MI_MEDIUM_OBJ_SIZE_MAX && (padsize & align_mask) == 0) {
    void* p = _mi_heap_malloc_zero(heap, size, zero);
    mi_assert_internal(p == NULL || ((uintptr_t)p % alignment) == 0);
    return p;
  }
  // over-allocate and return an interior pointer
  void* p = _mi_heap_malloc_zero(heap, size + alignment - 1, zero);
  if (p == NULL) return NULL;
  const uintptr_t adjust = (alignment - (((uintptr_t)p + offset) & align_mask)) & align_mask;
  void* aligned_p = (uint8_t*)p + adjust;
  if (aligned_p != p) mi_page_set_has_aligned(_mi_ptr_page_of(p), true);
  #if (MI_PADDING > 0)
  _mi_block_set_size(aligned_p, size);   // the trailer's fill starts right after the request
  #endif
  mi_assert_internal(((uintptr_t)aligned_p + offset) % alignment == 0);
  mi_assert_internal(_mi_ptr_page_of(aligned_p) == _mi_ptr_page_of(p));
  return aligned_p;
}

static void* mi_heap_malloc_zero_aligned_at(mi_heap_t* heap, size_t size, size_t alignment, size_t offset, bool zero) {
  if (mi_unlikely(alignment == 0 || !_mi_is_power_of_two(alignment))) {
    errno = EINVAL;
    return NULL;
  }
  if (mi_unlikely(size > PTRDIFF_MAX)) {
    errno = EOVERFLOW;
    return NULL;
  }
  // lucky: the next small block is already aligned
  if (mi_likely(size <= MI_SMALL_SIZE_MAX)) {
    mi_page_t* page = heap->pages_free_direct[_mi_wsize_from_size(size + MI_PADDING_SIZE)];
    const bool is_aligned = (((uintptr_t)page->free + offset) & (alignment - 1)) == 0;
    if (mi_likely(page->free != NULL && is_aligned)) {
      void* p = _mi_page_malloc(heap, page, size + MI_PADDING_SIZE);
      if (zero) _mi_block_zero_init(page, p, size);
      return p;
    }
  }
  return mi_heap_malloc_zero_aligned_at_fallback(heap, size, alignment, offset, zero);
}

// ---------------------------------------------------------------------------
// The public allocation functions
// ---------------------------------------------------------------------------

mi_decl_restrict void* mi_heap_malloc_aligned_at(mi_heap_t* heap, size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_malloc_zero_aligned_at(heap, size, alignment, offset, false);
}

mi_decl_restrict void* mi_heap_malloc_aligned(mi_heap_t* heap, size_t size, size_t alignment) mi_attr_noexcept {
  return mi_heap_malloc_aligned_at(heap, size, alignment, 0);
}

mi_decl_restrict void* mi_heap_zalloc_aligned_at(mi_heap_t* heap, size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_malloc_zero_aligned_at(heap, size, alignment, offset, true);
}

mi_decl_restrict void* mi_heap_zalloc_aligned(mi_heap_t* heap, size_t size, size_t alignment) mi_attr_noexcept {
  return mi_heap_zalloc_aligned_at(heap, size, alignment, 0);
}

mi_decl_restrict void* mi_heap_calloc_aligned_at(mi_heap_t* heap, size_t count, size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  size_t total;
  if (mi_count_size_overflow(count, size, &total)) return NULL;
  return mi_heap_zalloc_aligned_at(heap, total, alignment, offset);
}

mi_decl_restrict void* mi_heap_calloc_aligned(mi_heap_t* heap, size_t count, size_t size, size_t alignment) mi_attr_noexcept {
  return mi_heap_calloc_aligned_at(heap, count, size, alignment, 0);
}

mi_decl_restrict void* mi_malloc_aligned_at(size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_malloc_aligned_at(mi_get_default_heap(), size, alignment, offset);
}

mi_decl_restrict void* mi_malloc_aligned(size_t size, size_t alignment) mi_attr_noexcept {
  return mi_heap_malloc_aligned(mi_get_default_heap(), size, alignment);
}

mi_decl_restrict void* mi_zalloc_aligned_at(size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_zalloc_aligned_at(mi_get_default_heap(), size, alignment, offset);
}

mi_decl_restrict void* mi_zalloc_aligned(size_t size, size_t alignment) mi_attr_noexcept {
  return mi_heap_zalloc_aligned(mi_get_default_heap(), size, alignment);
}

mi_decl_restrict void* mi_calloc_aligned_at(size_t count, size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_calloc_aligned_at(mi_get_default_heap(), count, size, alignment, offset);
}

mi_decl_restrict void* mi_calloc_aligned(size_t count, size_t size, size_t alignment) mi_attr_noexcept {
  return mi_heap_calloc_aligned(mi_get_default_heap(), count, size, alignment);
}

// ---------------------------------------------------------------------------
// Aligned re-allocation
// ---------------------------------------------------------------------------

static void* mi_heap_realloc_zero_aligned_at(mi_heap_t* heap, void* p, size_t newsize, size_t alignment, size_t offset, bool zero) {
  if (alignment <= sizeof(uintptr_t)) return _mi_heap_realloc_zero(heap, p, newsize, zero);
  if (p == NULL) return mi_heap_malloc_zero_aligned_at(heap, newsize, alignment, offset, zero);
  const size_t size = mi_usable_size(p);
  if (newsize <= size && newsize >= (size - (size / 2)) && (((uintptr_t)p + offset) % alignment) == 0) {
    return p;   // still fits, is aligned and wastes at most 50%
  }
  void* newp = mi_heap_malloc_aligned_at(heap, newsize, alignment, offset);
  if (newp != NULL) {
    _mi_realloc_move(newp, p, size, newsize, zero);
  }
  return newp;
}

static void* mi_heap_realloc_zero_aligned(mi_heap_t* heap, void* p, size_t newsize, size_t alignment, bool zero) {
  if (alignment <= sizeof(uintptr_t)) return _mi_heap_realloc_zero(heap, p, newsize, zero);
  const size_t offset = ((uintptr_t)p % alignment);   // keep p's current misalignment
  return mi_heap_realloc_zero_aligned_at(heap, p, newsize, alignment, offset, zero);
}

void* mi_heap_realloc_aligned_at(mi_heap_t* heap, void* p, size_t newsize, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_realloc_zero_aligned_at(heap, p, newsize, alignment, offset, false);
}

void* mi_heap_realloc_aligned(mi_heap_t* heap, void* p, size_t newsize, size_t alignment) mi_attr_noexcept {
  return mi_heap_realloc_zero_aligned(heap, p, newsize, alignment, false);
}

void* mi_heap_rezalloc_aligned_at(mi_heap_t* heap, void* p, size_t newsize, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_realloc_zero_aligned_at(heap, p, newsize, alignment, offset, true);
}

void* mi_heap_rezalloc_aligned(mi_heap_t* heap, void* p, size_t newsize, size_t alignment) mi_attr_noexcept {
  return mi_heap_realloc_zero_aligned(heap, p, newsize, alignment, true);
}

void* mi_heap_recalloc_aligned_at(mi_heap_t* heap, void* p, size_t newcount, size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  size_t total;
  if (mi_count_size_overflow(newcount, size, &total)) return NULL;
  return mi_heap_rezalloc_aligned_at(heap, p, total, alignment, offset);
}

void* mi_heap_recalloc_aligned(mi_heap_t* heap, void* p, size_t newcount, size_t size, size_t alignment) mi_attr_noexcept {
  size_t total;
  if (mi_count_size_overflow(newcount, size, &total)) return NULL;
  return mi_heap_rezalloc_aligned(heap, p, total, alignment);
}

void* mi_realloc_aligned_at(void* p, size_t newsize, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_realloc_aligned_at(mi_get_default_heap(), p, newsize, alignment, offset);
}

void* mi_realloc_aligned(void* p, size_t newsize, size_t alignment) mi_attr_noexcept {
  return mi_heap_realloc_aligned(mi_get_default_heap(), p, newsize, alignment);
}

void* mi_rezalloc_aligned_at(void* p, size_t newsize, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_rezalloc_aligned_at(mi_get_default_heap(), p, newsize, alignment, offset);
}

void* mi_rezalloc_aligned(void* p, size_t newsize, size_t alignment) mi_attr_noexcept {
  return mi_heap_rezalloc_aligned(mi_get_default_heap(), p, newsize, alignment);
}

void* mi_recalloc_aligned_at(void* p, size_t newcount, size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_heap_recalloc_aligned_at(mi_get_default_heap(), p, newcount, size, alignment, offset);
}

void* mi_recalloc_aligned(void* p, size_t newcount, size_t size, size_t alignment) mi_attr_noexcept {
  return mi_heap_recalloc_aligned(mi_get_default_heap(), p, newcount, size, alignment);
}
