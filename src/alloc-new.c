/* ----------------------------------------------------------------------------
  alloc-new.c -- the `mi_new` family: allocation with C++ `operator new`
  semantics, written in C.

  On failure, call the installed `std::new_handler` and retry; with no
  handler, throw `std::bad_alloc` (or, for the nothrow forms, return NULL).
  The C++ runtime is reached through weak references: in a C++ program
  `std::get_new_handler` and `std::__throw_bad_alloc` resolve to libstdc++
  (or libc++'s equivalents exported under the same names), and the exception
  unwinds through our frames (compiled with -fexceptions); in a C program
  they are absent, and a throwing form aborts with a message instead. The
  library therefore never needs libstdc++ itself.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

#include <stdlib.h>   // abort

typedef void (*mi_std_new_handler_t)(void);

// std::get_new_handler() and std::__throw_bad_alloc(), if the program has a C++ runtime
extern mi_std_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

// Returns true if a handler ran (so the caller retries); false for nothrow
// without a handler. Throws std::bad_alloc (or aborts) otherwise.
static bool mi_try_new_handler(bool nothrow) {
  mi_std_new_handler_t handler = (_ZSt15get_new_handlerv != NULL ? _ZSt15get_new_handlerv() : NULL);
  if (handler != NULL) {
    handler();   // may throw, or free memory and return
    return true;
  }
  if (nothrow) return false;
  if (_ZSt17__throw_bad_allocv != NULL) _ZSt17__throw_bad_allocv();
  _mi_fputs(NULL, NULL, "mimalloc: error: ", "out of memory in 'new' and no C++ runtime to throw std::bad_alloc\n");
  abort();
}

static mi_decl_noinline void* mi_try_new(size_t size, bool nothrow) {
  void* p = NULL;
  while (p == NULL && mi_try_new_handler(nothrow)) {
    p = mi_malloc(size);
  }
  return p;
}

void* mi_new(size_t size) {
  void* p = mi_malloc(size);
  if (mi_unlikely(p == NULL)) return mi_try_new(size, false);
  return p;
}

void* mi_new_nothrow(size_t size) mi_attr_noexcept {
  void* p = mi_malloc(size);
  if (mi_unlikely(p == NULL)) return mi_try_new(size, true);
  return p;
}

void* mi_new_aligned(size_t size, size_t alignment) {
  void* p;
  do {
    p = mi_malloc_aligned(size, alignment);
  } while (p == NULL && mi_try_new_handler(false));
  return p;
}

void* mi_new_aligned_nothrow(size_t size, size_t alignment) mi_attr_noexcept {
  void* p;
  do {
    p = mi_malloc_aligned(size, alignment);
  } while (p == NULL && mi_try_new_handler(true));
  return p;
}

void* mi_new_n(size_t count, size_t size) {
  size_t total;
  if (mi_unlikely(mi_count_size_overflow(count, size, &total))) {
    mi_try_new_handler(false);   // on overflow, throws (or aborts) without a handler
    return NULL;
  }
  return mi_new(total);
}

void* mi_new_realloc(void* p, size_t newsize) {
  void* q;
  do {
    q = mi_realloc(p, newsize);
  } while (q == NULL && mi_try_new_handler(false));
  return q;
}

void* mi_new_reallocn(void* p, size_t newcount, size_t size) {
  size_t total;
  if (mi_unlikely(mi_count_size_overflow(newcount, size, &total))) {
    mi_try_new_handler(false);
    return NULL;
  }
  return mi_new_realloc(p, total);
}

bool mi_is_redirected(void) mi_attr_noexcept {
  #if defined(MI_WIN_REDIRECT)
  return _mi_is_redirected();   // the Windows override DLL patched the C runtime
  #else
  return false;   // only the Windows override DLL redirects the C runtime
  #endif
}
