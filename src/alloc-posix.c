/* ----------------------------------------------------------------------------
  alloc-posix.c -- `mi_`-prefixed versions of the POSIX, BSD and Windows
  allocation functions, so an override layer can forward to them directly.

  POSIX details we keep: posix_memalign never touches *p on error and
  returns EINVAL for an alignment that is 0, not a power of two or not a
  multiple of sizeof(void*); aligned_alloc insists (as C11 did) that the size
  be a multiple of the alignment; valloc/pvalloc use the OS page size.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"   // _mi_prim_wgetenv

#include <stdlib.h>   // getenv

// Checked free: only frees pointers into our own segments.
void mi_cfree(void* p) mi_attr_noexcept {
  if (mi_is_in_heap_region(p)) mi_free(p);
}

size_t mi_malloc_size(const void* p) mi_attr_noexcept {
  return mi_usable_size(p);
}

size_t mi_malloc_usable_size(const void* p) mi_attr_noexcept {
  return mi_usable_size(p);
}

void* mi__expand(void* p, size_t newsize) mi_attr_noexcept {
  void* res = mi_expand(p, newsize);
  if (res == NULL) errno = ENOMEM;
  return res;
}

int mi_posix_memalign(void** p, size_t alignment, size_t size) mi_attr_noexcept {
  if (p == NULL) return EINVAL;
  if (alignment == 0 || alignment % sizeof(void*) != 0) return EINVAL;
  if (!_mi_is_power_of_two(alignment)) return EINVAL;
  // the natural alignment of the size classes is enough here
  void* q = (alignment == sizeof(void*) || (alignment == MI_MAX_ALIGN_SIZE && size > MI_MAX_ALIGN_SIZE / 2)
             ? mi_malloc(size) : mi_malloc_aligned(size, alignment));
  if (q == NULL && size != 0) return ENOMEM;
  *p = q;
  return 0;
}

mi_decl_restrict void* mi_memalign(size_t alignment, size_t size) mi_attr_noexcept {
  if (alignment == 0 || !_mi_is_power_of_two(alignment)) { errno = EINVAL; return NULL; }
  return mi_malloc_aligned(size, alignment);
}

mi_decl_restrict void* mi_valloc(size_t size) mi_attr_noexcept {
  return mi_malloc_aligned(size, _mi_os_page_size());
}

mi_decl_restrict void* mi_pvalloc(size_t size) mi_attr_noexcept {
  const size_t psize = _mi_os_page_size();
  if (size >= SIZE_MAX - psize) { errno = ENOMEM; return NULL; }   // overflow
  const size_t asize = _mi_align_up(size, psize);
  return mi_malloc_aligned(asize, psize);
}

mi_decl_restrict void* mi_aligned_alloc(size_t alignment, size_t size) mi_attr_noexcept {
  if (alignment == 0 || !_mi_is_power_of_two(alignment)) { errno = EINVAL; return NULL; }
  if ((size & (alignment - 1)) != 0) { errno = EINVAL; return NULL; }   // C11: size must be a multiple
  return mi_malloc_aligned(size, alignment);
}

void* mi_reallocarray(void* p, size_t count, size_t size) mi_attr_noexcept {
  void* newp = mi_reallocn(p, count, size);
  if (newp == NULL) errno = ENOMEM;
  return newp;
}

void* mi_aligned_recalloc(void* p, size_t newcount, size_t size, size_t alignment) mi_attr_noexcept {
  return mi_recalloc_aligned(p, newcount, size, alignment);
}

void* mi_aligned_offset_recalloc(void* p, size_t newcount, size_t size, size_t alignment, size_t offset) mi_attr_noexcept {
  return mi_recalloc_aligned_at(p, newcount, size, alignment, offset);
}

mi_decl_restrict unsigned short* mi_wcsdup(const unsigned short* s) mi_attr_noexcept {
  if (s == NULL) return NULL;
  size_t len = 0;
  while (s[len] != 0) len++;
  const size_t size = (len + 1) * sizeof(unsigned short);
  unsigned short* p = (unsigned short*)mi_malloc(size);
  if (p != NULL) memcpy(p, s, size);
  return p;
}

mi_decl_restrict unsigned char* mi_mbsdup(const unsigned char* s) mi_attr_noexcept {
  return (unsigned char*)mi_strdup((const char*)s);
}

int mi_dupenv_s(char** buf, size_t* size, const char* name) mi_attr_noexcept {
  if (buf == NULL || name == NULL) return EINVAL;
  if (size != NULL) *size = 0;
  const char* p = getenv(name);
  if (p == NULL) {
    *buf = NULL;
  }
  else {
    *buf = mi_strdup(p);
    if (*buf == NULL) return ENOMEM;
    if (size != NULL) *size = strlen(p);
  }
  return 0;
}

int mi_wdupenv_s(unsigned short** buf, size_t* size, const unsigned short* name) mi_attr_noexcept {
  if (buf == NULL || name == NULL) return EINVAL;
  if (size != NULL) *size = 0;
  *buf = NULL;
  const unsigned short* p;
  const int err = _mi_prim_wgetenv(name, &p);   // (wide environment strings exist only on Windows: EINVAL elsewhere)
  if (err != 0) return err;
  if (p != NULL) {
    *buf = mi_wcsdup(p);
    if (*buf == NULL) return ENOMEM;
    if (size != NULL) { size_t n = 0; while (p[n] != 0) n++; *size = n; }
  }
  return 0;
}

void mi_free_size(void* p, size_t size) mi_attr_noexcept {
  // (an invalid p is reported by mi_usable_size and mi_free, which returns 0 here)
  mi_assert(p == NULL || mi_usable_size(p) == 0 || size <= mi_usable_size(p));
  (void)size;
  mi_free(p);
}

void mi_free_size_aligned(void* p, size_t size, size_t alignment) mi_attr_noexcept {
  mi_assert(((uintptr_t)p % alignment) == 0);
  mi_free_size(p, size);
}

void mi_free_aligned(void* p, size_t alignment) mi_attr_noexcept {
  mi_assert(((uintptr_t)p % alignment) == 0);
  (void)alignment;
  mi_free(p);
}
