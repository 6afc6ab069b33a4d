/* ----------------------------------------------------------------------------
  redirect-dll.c -- a DLL that knows nothing of mimalloc: it allocates and
  frees with the C runtime (msvcrt.dll), as any third-party DLL does. The
  override tests (test-redirect.cpp) exchange blocks with it both ways: with
  mimalloc-override.dll in the process, its calls into the runtime are
  served by mimalloc too.
-----------------------------------------------------------------------------*/
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define REDIRECT_DLL_EXPORT __declspec(dllexport)

REDIRECT_DLL_EXPORT void* redirect_dll_malloc(size_t size) {
  return malloc(size);
}

REDIRECT_DLL_EXPORT void* redirect_dll_realloc(void* p, size_t size) {
  return realloc(p, size);
}

REDIRECT_DLL_EXPORT void redirect_dll_free(void* p) {
  free(p);
}

REDIRECT_DLL_EXPORT size_t redirect_dll_msize(void* p) {
  return _msize(p);
}

REDIRECT_DLL_EXPORT char* redirect_dll_strdup(const char* s) {
  return _strdup(s);
}

REDIRECT_DLL_EXPORT void* redirect_dll_aligned_malloc(size_t size, size_t alignment) {
  return _aligned_malloc(size, alignment);
}

REDIRECT_DLL_EXPORT void redirect_dll_aligned_free(void* p) {
  _aligned_free(p);
}
