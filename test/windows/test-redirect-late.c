/* ----------------------------------------------------------------------------
  test-redirect-late.c -- the override DLL loaded while the program runs
  (LoadLibrary), after the C runtime has handed out blocks of its own.

  Usage: mimalloc-test-redirect-late redirect|disabled DLL

    redirect  blocks of every kind are allocated by the runtime first; then
              mimalloc-override.dll is loaded: from then on new blocks are
              mimalloc's, and the runtime's old blocks are still freed,
              sized, resized and realigned right (through the runtime's heap)
    disabled  the same, run with MIMALLOC_DISABLE_REDIRECT=1: the runtime is
              left alone, its blocks stay its own

  DLL is the override DLL's file name (mimalloc-override.dll, or
  mimalloc-override-debug.dll, ...), found beside the program. The program
  does not link it: it takes mi_is_redirected and
  mi_is_in_heap_region from it with GetProcAddress. Exits 0 when every check
  holds, 1 with a message otherwise.
-----------------------------------------------------------------------------*/
#include <windows.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

typedef bool (*is_in_heap_fun)(const void*);
typedef bool (*is_redirected_fun)(void);

static bool filled(const unsigned char* p, size_t n, unsigned char c) {
  for (size_t i = 0; i < n; i++) if (p[i] != c) return false;
  return true;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mimalloc-test-redirect-late redirect|disabled DLL\n");
    return 1;
  }
  const bool disabled = (strcmp(argv[1], "disabled") == 0);
  const char* dll = argv[2];

  // the runtime's own blocks, before mimalloc is in the process
  unsigned char* plain = (unsigned char*)malloc(1000);
  unsigned char* grown = (unsigned char*)malloc(300);
  unsigned char* zeroed = (unsigned char*)calloc(100, 4);
  char* dup = _strdup("made by the runtime before the override");
  unsigned char* al = (unsigned char*)_aligned_malloc(500, 256);
  unsigned char* al_grown = (unsigned char*)_aligned_malloc(500, 4096);
  CHECK(plain != NULL && grown != NULL && zeroed != NULL && dup != NULL && al != NULL && al_grown != NULL);
  memset(plain, 1, 1000);
  memset(grown, 2, 300);
  memset(zeroed, 3, 400);
  memset(al, 4, 500);
  memset(al_grown, 5, 500);

  HMODULE mod = LoadLibraryA(dll);
  if (mod == NULL) {
    fprintf(stderr, "cannot load %s (error %lu)\n", dll, GetLastError());
    return 1;
  }
  is_in_heap_fun is_in_heap = (is_in_heap_fun)(void*)GetProcAddress(mod, "mi_is_in_heap_region");
  is_redirected_fun is_redirected = (is_redirected_fun)(void*)GetProcAddress(mod, "mi_is_redirected");
  CHECK(is_in_heap != NULL && is_redirected != NULL);
  if (is_in_heap == NULL || is_redirected == NULL) return 1;

  CHECK(is_redirected() == !disabled);
  void* fresh = malloc(64);
  CHECK(is_in_heap(fresh) == !disabled);
  free(fresh);

  // the old blocks are the runtime's, and every call still treats them right
  CHECK(!is_in_heap(plain) && !is_in_heap(dup) && !is_in_heap(al));
  CHECK(_msize(plain) >= 1000);
  CHECK(filled(plain, 1000, 1));
  free(plain);
  free(dup);

  grown = (unsigned char*)realloc(grown, 100000);   // moves into one of ours
  CHECK(grown != NULL && is_in_heap(grown) == !disabled);
  CHECK(grown != NULL && filled(grown, 300, 2));
  free(grown);

  CHECK(filled(zeroed, 400, 3));
  free(zeroed);

  CHECK(filled(al, 500, 4));
  _aligned_free(al);
  al_grown = (unsigned char*)_aligned_realloc(al_grown, 20000, 4096);
  CHECK(al_grown != NULL && ((uintptr_t)al_grown % 4096) == 0 && filled(al_grown, 500, 5));
  CHECK(is_in_heap(al_grown) == !disabled);
  _aligned_free(al_grown);

  // and new blocks of every kind are ours
  char* s = _strdup("made after");
  void* a = _aligned_malloc(100, 64);
  CHECK(is_in_heap(s) == !disabled && is_in_heap(a) == !disabled);
  free(s);
  _aligned_free(a);

  if (failures == 0) printf("mimalloc-test-redirect-late: OK (%s)\n", (disabled ? "disabled" : "redirected"));
  return (failures == 0 ? 0 : 1);
}
