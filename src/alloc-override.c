/* ----------------------------------------------------------------------------
  alloc-override.c -- the standard allocation interface, served by mimalloc.

  Included last by static.c when MI_MALLOC_OVERRIDE is set (CMake MI_OVERRIDE,
  on by default). A standard name is an ELF *alias* of the `mi_` function it
  maps to (`free` *is* `mi_free`: no forwarding jump) or, where its prototype
  or its errno differs, a small function with that `mi_` function inlined
  (`malloc` is `mi_malloc`'s code, with ENOMEM where `mi_malloc` says
  EOVERFLOW). Both need the target in the same translation unit, which is
  why the library is compiled as one unit.

  With the shared library preloaded (LD_PRELOAD) these definitions come
  before the C library's, so the whole program, the C library and the C++
  runtime included, allocates here.

  The C++ operators are *weak* definitions: a program that defines its own
  (with mimalloc-new-delete.h, say) and links the static library or the
  object file gets its own, where strong definitions here would clash with
  them ("multiple definition of operator delete"). A weak definition in the
  executable still wins over libstdc++'s, and the dynamic loader treats weak
  and strong alike, so preloading is unchanged.
-----------------------------------------------------------------------------*/
#if !defined(MI_MALLOC_OVERRIDE)
#error "alloc-override.c is only compiled (through static.c) when overriding"
#endif

#if !defined(__GNUC__) || defined(__APPLE__) || defined(_WIN32)
#error "the override layer supports ELF platforms with GCC or Clang"
#endif

#include <stdlib.h>
#include <malloc.h>

#define MI_FORWARD(fun)   __attribute__((alias(#fun), used, visibility("default")))
#define MI_FORWARD_WEAK(fun) __attribute__((alias(#fun), used, visibility("default"), weak))
#define MI_DECL_WEAK      __attribute__((visibility("default"), weak))

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-attributes"   // an alias need not repeat malloc/alloc_size
#endif

// ---------------------------------------------------------------------------
// C and POSIX
// ---------------------------------------------------------------------------

_Static_assert(sizeof(size_t) == 8, "the C++ operator names below assume a 64-bit size_t");

// The standard names fail with ENOMEM where the mi_ names say EOVERFLOW
// (mi_std_result).
#define MI_DECL_STD  __attribute__((visibility("default")))

// (malloc: mi_malloc's one EOVERFLOW is a size over PTRDIFF_MAX, tested
// apart so that mi_malloc's fast path stays as it is, instruction for
// instruction)
static mi_decl_noinline void* mi_malloc_too_large(size_t size) {
  return mi_std_result(mi_malloc(size));
}
MI_DECL_STD void* malloc(size_t size) {
  if (mi_likely(size <= MI_SMALL_SIZE_MAX)) return mi_malloc(size);   // (the same test as mi_malloc's own: one)
  if (mi_unlikely(size > PTRDIFF_MAX)) return mi_malloc_too_large(size);
  return mi_malloc(size);
}
MI_DECL_STD void* calloc(size_t count, size_t size)  { return mi_std_result(mi_calloc(count, size)); }
MI_DECL_STD void* realloc(void* p, size_t newsize)   { return mi_std_result(mi_realloc(p, newsize)); }
MI_DECL_STD void* reallocf(void* p, size_t newsize)  { return mi_std_result(mi_reallocf(p, newsize)); }
MI_DECL_STD void* valloc(size_t size)                { return mi_std_result(mi_valloc(size)); }
MI_DECL_STD void* pvalloc(size_t size)               { return mi_std_result(mi_pvalloc(size)); }
MI_DECL_STD void* memalign(size_t alignment, size_t size) { return mi_std_result(mi_memalign(alignment, size)); }
MI_DECL_STD void* _aligned_malloc(size_t alignment, size_t size) { return mi_std_result(mi_aligned_alloc(alignment, size)); }
void  free(void* p)                                  MI_FORWARD(mi_free);
void  cfree(void* p)                                 MI_FORWARD(mi_free);
void* reallocarray(void* p, size_t count, size_t size) MI_FORWARD(mi_reallocarray);   // (ENOMEM already)
int   posix_memalign(void** p, size_t alignment, size_t size) MI_FORWARD(mi_posix_memalign);   // (returns ENOMEM)
size_t malloc_size(const void* p)                    MI_FORWARD(mi_usable_size);

// glibc's prototype takes a non-const pointer
__attribute__((visibility("default"))) size_t malloc_usable_size(void* p) {
  return mi_usable_size(p);
}

// C17 (and glibc) accept any size; 1.6's mi_aligned_alloc keeps the C11 rule
__attribute__((visibility("default"))) void* aligned_alloc(size_t alignment, size_t size) {
  if (alignment == 0 || !_mi_is_power_of_two(alignment)) { errno = EINVAL; return NULL; }
  return mi_std_result(mi_malloc_aligned(size, alignment));
}

// ---------------------------------------------------------------------------
// glibc's internal names (used by parts of glibc and by some programs)
// ---------------------------------------------------------------------------

void* __libc_malloc(size_t size)                     MI_FORWARD(malloc);
void* __libc_calloc(size_t count, size_t size)       MI_FORWARD(calloc);
void* __libc_realloc(void* p, size_t size)           MI_FORWARD(realloc);
void  __libc_free(void* p)                           MI_FORWARD(mi_free);
void  __libc_cfree(void* p)                          MI_FORWARD(mi_free);
void* __libc_valloc(size_t size)                     MI_FORWARD(valloc);
void* __libc_pvalloc(size_t size)                    MI_FORWARD(pvalloc);
void* __libc_memalign(size_t alignment, size_t size) MI_FORWARD(memalign);
int   __posix_memalign(void** p, size_t alignment, size_t size) MI_FORWARD(mi_posix_memalign);

// ---------------------------------------------------------------------------
// C++ operators (Itanium ABI names, 64-bit size_t), defined from C, weak
// ---------------------------------------------------------------------------

#if !MI_CHECK_DELETE
void* _Znwm(size_t n)                                MI_FORWARD_WEAK(mi_new);                  // new
void* _Znam(size_t n)                                MI_FORWARD_WEAK(mi_new);                  // new[]
void* _ZnwmSt11align_val_t(size_t n, size_t al)      MI_FORWARD_WEAK(mi_new_aligned);
void* _ZnamSt11align_val_t(size_t n, size_t al)      MI_FORWARD_WEAK(mi_new_aligned);
void  _ZdlPv(void* p)                                MI_FORWARD_WEAK(mi_free);                 // delete
void  _ZdaPv(void* p)                                MI_FORWARD_WEAK(mi_free);                 // delete[]
void  _ZdlPvm(void* p, size_t n)                     MI_FORWARD_WEAK(mi_free_size);
void  _ZdaPvm(void* p, size_t n)                     MI_FORWARD_WEAK(mi_free_size);
void  _ZdlPvSt11align_val_t(void* p, size_t al)      MI_FORWARD_WEAK(mi_free_aligned);
void  _ZdaPvSt11align_val_t(void* p, size_t al)      MI_FORWARD_WEAK(mi_free_aligned);
void  _ZdlPvmSt11align_val_t(void* p, size_t n, size_t al) MI_FORWARD_WEAK(mi_free_size_aligned);
void  _ZdaPvmSt11align_val_t(void* p, size_t n, size_t al) MI_FORWARD_WEAK(mi_free_size_aligned);

// the std::nothrow_t forms take one more (ignored) argument: small functions
#define MI_NOTHROW_TAG   const void* tag   // const std::nothrow_t&
MI_DECL_WEAK void* _ZnwmRKSt9nothrow_t(size_t n, MI_NOTHROW_TAG) { (void)tag; return mi_new_nothrow(n); }
MI_DECL_WEAK void* _ZnamRKSt9nothrow_t(size_t n, MI_NOTHROW_TAG) { (void)tag; return mi_new_nothrow(n); }
MI_DECL_WEAK void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, MI_NOTHROW_TAG) { (void)tag; return mi_new_aligned_nothrow(n, al); }
MI_DECL_WEAK void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, MI_NOTHROW_TAG) { (void)tag; return mi_new_aligned_nothrow(n, al); }
MI_DECL_WEAK void  _ZdlPvRKSt9nothrow_t(void* p, MI_NOTHROW_TAG) { (void)tag; mi_free(p); }
MI_DECL_WEAK void  _ZdaPvRKSt9nothrow_t(void* p, MI_NOTHROW_TAG) { (void)tag; mi_free(p); }
MI_DECL_WEAK void  _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, MI_NOTHROW_TAG) { (void)tag; mi_free_aligned(p, al); }
MI_DECL_WEAK void  _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, MI_NOTHROW_TAG) { (void)tag; mi_free_aligned(p, al); }
#else
// Checked builds (MI_CHECK_DELETE: FULL and debug builds): blocks from new[] are marked in
// their trailer, and every delete checks that its form (delete or delete[])
// matches and that a sized delete gives the size asked for (alloc.c).
#define MI_NOTHROW_TAG   const void* tag   // const std::nothrow_t&
void* _Znwm(size_t n)                                MI_FORWARD_WEAK(mi_new);                  // new
void* _ZnwmSt11align_val_t(size_t n, size_t al)      MI_FORWARD_WEAK(mi_new_aligned);
MI_DECL_WEAK void* _ZnwmRKSt9nothrow_t(size_t n, MI_NOTHROW_TAG) { (void)tag; return mi_new_nothrow(n); }
MI_DECL_WEAK void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, MI_NOTHROW_TAG) { (void)tag; return mi_new_aligned_nothrow(n, al); }
MI_DECL_WEAK void* _Znam(size_t n)                   { return _mi_new_array_mark(mi_new(n)); }                // new[]
MI_DECL_WEAK void* _ZnamSt11align_val_t(size_t n, size_t al) { return _mi_new_array_mark(mi_new_aligned(n, al)); }
MI_DECL_WEAK void* _ZnamRKSt9nothrow_t(size_t n, MI_NOTHROW_TAG) { (void)tag; return _mi_new_array_mark(mi_new_nothrow(n)); }
MI_DECL_WEAK void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, MI_NOTHROW_TAG) { (void)tag; return _mi_new_array_mark(mi_new_aligned_nothrow(n, al)); }
MI_DECL_WEAK void  _ZdlPv(void* p)                   { _mi_free_delete(p, SIZE_MAX, false); }                 // delete
MI_DECL_WEAK void  _ZdaPv(void* p)                   { _mi_free_delete(p, SIZE_MAX, true); }                  // delete[]
MI_DECL_WEAK void  _ZdlPvm(void* p, size_t n)        { _mi_free_delete(p, n, false); }
MI_DECL_WEAK void  _ZdaPvm(void* p, size_t n)        { _mi_free_delete(p, n, true); }
MI_DECL_WEAK void  _ZdlPvSt11align_val_t(void* p, size_t al) { (void)al; _mi_free_delete(p, SIZE_MAX, false); }
MI_DECL_WEAK void  _ZdaPvSt11align_val_t(void* p, size_t al) { (void)al; _mi_free_delete(p, SIZE_MAX, true); }
MI_DECL_WEAK void  _ZdlPvmSt11align_val_t(void* p, size_t n, size_t al) { (void)al; _mi_free_delete(p, n, false); }
MI_DECL_WEAK void  _ZdaPvmSt11align_val_t(void* p, size_t n, size_t al) { (void)al; _mi_free_delete(p, n, true); }
MI_DECL_WEAK void  _ZdlPvRKSt9nothrow_t(void* p, MI_NOTHROW_TAG) { (void)tag; _mi_free_delete(p, SIZE_MAX, false); }
MI_DECL_WEAK void  _ZdaPvRKSt9nothrow_t(void* p, MI_NOTHROW_TAG) { (void)tag; _mi_free_delete(p, SIZE_MAX, true); }
MI_DECL_WEAK void  _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, MI_NOTHROW_TAG) { (void)tag; (void)al; _mi_free_delete(p, SIZE_MAX, false); }
MI_DECL_WEAK void  _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, MI_NOTHROW_TAG) { (void)tag; (void)al; _mi_free_delete(p, SIZE_MAX, true); }
#endif

// ---------------------------------------------------------------------------
// Secure builds (both profiles, glibc): memcpy, memmove and memset check that a
// write into one of our blocks stays within the size asked for and that the
// block is live (secure.c: mi_check_writex), then copy with the C library's
// own code, reached through its checking entry points (which take the
// destination's size: here the length itself, so they only copy). Calls the
// compiler expands inline, and calls a program compiled with
// _FORTIFY_SOURCE makes to the __*_chk entry points, are not seen.
// ---------------------------------------------------------------------------
#if defined(MI_CHECKED_MEMCPY)
// (called through pointers the compiler cannot see through: it knows
// __memcpy_chk and turns a call whose two sizes are equal back into memcpy,
// which is this very function; clang does, by the symbol's name)
extern void* __memcpy_chk(void* dst, const void* src, size_t n, size_t dstlen);
extern void* __memmove_chk(void* dst, const void* src, size_t n, size_t dstlen);
extern void* __memset_chk(void* dst, int c, size_t n, size_t dstlen);
static void* (*volatile mi_libc_memcpy_chk)(void*, const void*, size_t, size_t) = &__memcpy_chk;
static void* (*volatile mi_libc_memmove_chk)(void*, const void*, size_t, size_t) = &__memmove_chk;
static void* (*volatile mi_libc_memset_chk)(void*, int, size_t, size_t) = &__memset_chk;

void _mi_memset(void* p, int c, size_t n) {
  mi_libc_memset_chk(p, c, n, n);
}

// (the check is silent and inlined; what it finds goes to a cold function
// that reports and then copies: only tail calls leave the common path)
static mi_decl_noinline mi_decl_cold void* mi_memcpy_reported(void* dst, const void* src, size_t n) {
  mi_check_write_report(dst, n, "memcpy");
  return mi_libc_memcpy_chk(dst, src, n, n);
}
static mi_decl_noinline mi_decl_cold void* mi_memmove_reported(void* dst, const void* src, size_t n) {
  mi_check_write_report(dst, n, "memmove");
  return mi_libc_memmove_chk(dst, src, n, n);
}
static mi_decl_noinline mi_decl_cold void* mi_memset_reported(void* dst, int c, size_t n) {
  mi_check_write_report(dst, n, "memset");
  return mi_libc_memset_chk(dst, c, n, n);
}

__attribute__((visibility("default"), noinline)) void* memcpy(void* dst, const void* src, size_t n) {
  if (mi_unlikely(!mi_check_writex(dst, n, NULL, false))) return mi_memcpy_reported(dst, src, n);
  return mi_libc_memcpy_chk(dst, src, n, n);
}
__attribute__((visibility("default"), noinline)) void* memmove(void* dst, const void* src, size_t n) {
  if (mi_unlikely(!mi_check_writex(dst, n, NULL, false))) return mi_memmove_reported(dst, src, n);
  return mi_libc_memmove_chk(dst, src, n, n);
}
__attribute__((visibility("default"), noinline)) void* memset(void* dst, int c, size_t n) {
  if (mi_unlikely(!mi_check_writex(dst, n, NULL, false))) return mi_memset_reported(dst, c, n);
  return mi_libc_memset_chk(dst, c, n, n);
}
#endif
