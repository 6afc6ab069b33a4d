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

#include "prim/unix.c"
#include "options.c"
#include "stats.c"
#include "prof.c"
#include "random.c"
#include "os.c"
#include "segment-map.c"
#include "region.c"
#include "abandoned.c"
#include "segment.c"
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
#include "alloc-override.c"
#if defined(__GLIBC__)
#include "alloc-glibc.c"     // mallinfo2, malloc_trim, malloc_stats, malloc_info, mallopt
#endif
#endif
