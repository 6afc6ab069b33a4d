/* ----------------------------------------------------------------------------
  static.c -- the whole library as one translation unit.

  Every library target (shared, static, and the `mimalloc.o` object) is built
  from this file: the override layer can then define `malloc` as an alias of
  `mi_malloc` (aliases need their target in the same unit), and the compiler
  inlines across layers. This is the one deliberate place where .c files
  include other .c files; the order is the layer order, bottom to top.
-----------------------------------------------------------------------------*/
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#if defined(__MINGW32__) && !defined(__USE_MINGW_ANSI_STDIO)
#define __USE_MINGW_ANSI_STDIO 1   // snprintf with C99's %zu and %lld (msvcrt's has neither)
#endif

#if defined(_WIN32)
#include "prim/windows.c"
#else
#include "prim/unix.c"
#endif
#include "options.c"
#include "stats.c"
#include "prof.c"
#include "random.c"
#include "os.c"
#include "segment-map.c"
#include "region.c"
#include "segment.c"
#include "segment-shared.c"
#include "segment-huge.c"
#include "segment-walk.c"
#include "purge-thread.c"
#include "page-queue.c"
#include "secure.c"
#include "page.c"
#include "heap.c"
#include "alloc.c"
#include "free.c"
#include "alloc-aligned.c"
#include "alloc-posix.c"
#include "alloc-new.c"
#include "init.c"

#if defined(MI_MALLOC_OVERRIDE)
#if defined(_WIN32) && defined(MI_SHARED_LIB)
#include "alloc-override-win.c"   // the override DLL: patches the C runtime DLLs' malloc family
#elif !defined(_WIN32)
#include "alloc-override.c"       // the standard names as aliases (ELF)
#endif                            // (Windows' static library: the C++ operators are alloc-override-cxx.c, an object of their own)
#if defined(__GLIBC__)
#include "alloc-glibc.c"     // mallinfo2, malloc_trim, malloc_stats, malloc_info, mallopt
#endif
#endif
