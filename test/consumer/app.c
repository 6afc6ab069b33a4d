/* ----------------------------------------------------------------------------
  app.c -- a consumer of the installed library (test/consumer/run.sh): uses
  the API, and checks that the library it runs with is this one and that the
  program's own malloc is served by it (linking with the library overrides
  malloc for the program). Prints key=value lines, then "ok" or "FAILED".
-----------------------------------------------------------------------------*/
#include <mimalloc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int cond, const char* what) {
  if (!cond) { printf("check failed: %s\n", what); failures++; }
}

int main(void) {
  printf("version=%d\n", mi_version());
  check(mi_version() / 10 == 16, "mi_version is 1.6.x");

  void* p = mi_malloc(100);
  check(p != NULL && mi_is_in_heap_region(p), "mi_malloc");
  mi_free(p);

  mi_heap_t* heap = mi_heap_new();
  char* s = mi_heap_strdup(heap, "hello");
  check(s != NULL && strcmp(s, "hello") == 0 && mi_heap_contains_block(heap, s), "mi_heap_strdup");
  mi_heap_delete(heap);
  mi_free(s);

  char* m = (char*)malloc(64);
  printf("malloc_is_ours=%d\n", mi_is_in_heap_region(m) ? 1 : 0);
  check(mi_is_in_heap_region(m), "malloc is served by mimalloc");
  free(m);

  void* q = mi_malloc(1);
  printf("debug=%d\n", mi_usable_size(q) == 1 ? 1 : 0);   // exact usable size: a debug build
  mi_free(q);

  puts(failures == 0 ? "ok" : "FAILED");
  return (failures == 0 ? 0 : 1);
}
