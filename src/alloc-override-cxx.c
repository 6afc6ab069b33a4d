/* ----------------------------------------------------------------------------
  alloc-override-cxx.c -- the C++ operators of the static library on Windows
  (mingw-w64): every `new` and `delete` of a program that links
  libmimalloc-static.a is served by mimalloc, as on Linux.

  Why a translation unit of its own, outside src/static.c: on ELF the
  operators are weak aliases in the library's one unit (alloc-override.c),
  which the program's own operators (mimalloc-new-delete.h) override. On
  PE/COFF a weak definition is a "weak external", which ld still lets a later
  archive satisfy: libstdc++.a's operators were taken instead of ours. Here
  they are strong definitions in an archive member of their own, which ld
  pulls only for an operator no object before it defined: the program's
  operators, where it has them, still win, and libstdc++'s are never pulled.
  (They are plain functions, not aliases: an alias needs its target in the
  same unit.) Names: the Itanium ABI's, with size_t (`unsigned long long`)
  mangled `y`.

  Checked builds (MI_CHECK_DELETE: FULL and debug) mark new[] blocks and
  check that a delete has the form and size the block was made with, as
  alloc-override.c does.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

#if !defined(_WIN32) || !defined(MI_MALLOC_OVERRIDE) || defined(MI_SHARED_LIB)
#error "alloc-override-cxx.c is the C++ operators of Windows' static library (CMakeLists.txt adds it there only)"
#endif

#if MI_CHECK_DELETE
#define MI_NEW_ARRAY(p)                 _mi_new_array_mark(p)
#define MI_DELETE(p, n, al, array)      ((void)(al), _mi_free_delete(p, n, array))
#else
#define MI_NEW_ARRAY(p)                 (p)
#define MI_DELETE(p, n, al, array)      ((void)(array), mi_win_delete(p, n, al))
static inline void mi_win_delete(void* p, size_t n, size_t al) {
  if (n == SIZE_MAX && al == 0) mi_free(p);
  else if (al == 0) mi_free_size(p, n);
  else if (n == SIZE_MAX) mi_free_aligned(p, al);
  else mi_free_size_aligned(p, n, al);
}
#endif
#define MI_NOTHROW_TAG   const void* tag   // const std::nothrow_t&

void* _Znwy(size_t n)                                  { return mi_new(n); }
void* _ZnwySt11align_val_t(size_t n, size_t al)        { return mi_new_aligned(n, al); }
void* _ZnwyRKSt9nothrow_t(size_t n, MI_NOTHROW_TAG)    { (void)tag; return mi_new_nothrow(n); }
void* _ZnwySt11align_val_tRKSt9nothrow_t(size_t n, size_t al, MI_NOTHROW_TAG) { (void)tag; return mi_new_aligned_nothrow(n, al); }
void* _Znay(size_t n)                                  { return MI_NEW_ARRAY(mi_new(n)); }
void* _ZnaySt11align_val_t(size_t n, size_t al)        { return MI_NEW_ARRAY(mi_new_aligned(n, al)); }
void* _ZnayRKSt9nothrow_t(size_t n, MI_NOTHROW_TAG)    { (void)tag; return MI_NEW_ARRAY(mi_new_nothrow(n)); }
void* _ZnaySt11align_val_tRKSt9nothrow_t(size_t n, size_t al, MI_NOTHROW_TAG) { (void)tag; return MI_NEW_ARRAY(mi_new_aligned_nothrow(n, al)); }

void _ZdlPv(void* p)                                   { MI_DELETE(p, SIZE_MAX, 0, false); }
void _ZdaPv(void* p)                                   { MI_DELETE(p, SIZE_MAX, 0, true); }
void _ZdlPvy(void* p, size_t n)                        { MI_DELETE(p, n, 0, false); }
void _ZdaPvy(void* p, size_t n)                        { MI_DELETE(p, n, 0, true); }
void _ZdlPvSt11align_val_t(void* p, size_t al)         { MI_DELETE(p, SIZE_MAX, al, false); }
void _ZdaPvSt11align_val_t(void* p, size_t al)         { MI_DELETE(p, SIZE_MAX, al, true); }
void _ZdlPvySt11align_val_t(void* p, size_t n, size_t al) { MI_DELETE(p, n, al, false); }
void _ZdaPvySt11align_val_t(void* p, size_t n, size_t al) { MI_DELETE(p, n, al, true); }
void _ZdlPvRKSt9nothrow_t(void* p, MI_NOTHROW_TAG)     { (void)tag; MI_DELETE(p, SIZE_MAX, 0, false); }
void _ZdaPvRKSt9nothrow_t(void* p, MI_NOTHROW_TAG)     { (void)tag; MI_DELETE(p, SIZE_MAX, 0, true); }
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, MI_NOTHROW_TAG) { (void)tag; MI_DELETE(p, SIZE_MAX, al, false); }
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, MI_NOTHROW_TAG) { (void)tag; MI_DELETE(p, SIZE_MAX, al, true); }
