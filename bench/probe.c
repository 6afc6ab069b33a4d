/* ----------------------------------------------------------------------------
  probe.c -- which library serves malloc in this process?

  The runner (bench/run.py) runs this once under each allocator before
  measuring anything: it prints the file of the shared object that defines
  the `malloc` the program calls, and that `malloc` and `free` work. A preload
  that silently failed (a wrong path, a library that does not override
  malloc) shows up here as libc.so.6 instead of the allocator's library.

  usage: probe
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  void* sym = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info;
  if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL) {
    printf("probe: malloc not found\n");
    return 1;
  }
  void* p = malloc(100);
  if (p == NULL) return 1;
  free(p);
  printf("probe: malloc from %s\n", info.dli_fname);
  return 0;
}
