/* ----------------------------------------------------------------------------
  static.c -- the whole library as one translation unit: the `mimalloc.o`
  object for static linking (link it first and it overrides malloc for the
  whole program). This is the one deliberate place where .c files include
  other .c files.
-----------------------------------------------------------------------------*/
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "prim/unix.c"
#include "options.c"
#include "random.c"
#include "os.c"
#include "region.c"
#include "segment.c"
#include "page-queue.c"
#include "page.c"
#include "heap.c"
#include "alloc.c"
#include "alloc-aligned.c"
#include "alloc-posix.c"
#include "init.c"
