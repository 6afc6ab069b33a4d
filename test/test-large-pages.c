/* ----------------------------------------------------------------------------
  test-large-pages.c -- MIMALLOC_LARGE_OS_PAGES=1 is visible in smaps.

  A small program with otherwise default options allocates 20 MiB (64 KiB
  blocks), touches it, and sums over /proc/self/smaps the AnonHugePages
  (transparent huge pages) and the size of mappings whose KernelPageSize is
  2048 kB (MAP_HUGETLB). With the option on (run with the environment set)
  the sum must be > 0. Skipped (77) when the kernel has neither transparent
  huge pages (enabled: never) nor a hugetlb pool, or without /proc.
-----------------------------------------------------------------------------*/
#define _POSIX_C_SOURCE 200809L

#include <mimalloc.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfile.h"

static char buf[4 << 20];   // smaps, read without stdio (which would allocate)

static size_t read_file(const char* path) { return proc_read_file(path, buf, sizeof(buf)); }

int main(void) {
  void* head = NULL;
  for (size_t done = 0; done < (20u << 20); done += 64 * 1024) {
    void** p = (void**)mi_malloc(64 * 1024);
    memset(p, 1, 64 * 1024);
    p[0] = head;
    head = p;
  }
  if (read_file("/proc/self/smaps") == 0) return 77;
  size_t thp_kib = 0, hugetlb_kib = 0, size_kib = 0;
  for (char* line = buf; line != NULL && *line != 0; ) {
    char* nl = strchr(line, '\n');
    if (nl != NULL) *nl = 0;
    if (strncmp(line, "Size:", 5) == 0) size_kib = strtoul(line + 5, NULL, 10);
    else if (strncmp(line, "AnonHugePages:", 14) == 0) thp_kib += strtoul(line + 14, NULL, 10);
    else if (strncmp(line, "KernelPageSize:", 15) == 0 && strtoul(line + 15, NULL, 10) == 2048) hugetlb_kib += size_kib;
    line = (nl != NULL ? nl + 1 : NULL);
  }
  printf("large-pages: AnonHugePages %zu KiB, 2 MiB hugetlb mappings %zu KiB\n", thp_kib, hugetlb_kib);
  while (head != NULL) { void* next = *(void**)head; mi_free(head); head = next; }
  if (thp_kib + hugetlb_kib > 0) return 0;
  // nothing: is that the kernel's doing?
  const bool thp_never = (read_file("/sys/kernel/mm/transparent_hugepage/enabled") == 0 || strstr(buf, "[never]") != NULL);
  const bool no_pool = (read_file("/proc/sys/vm/nr_hugepages") == 0 || atol(buf) == 0);
  if (thp_never && no_pool) { printf("large-pages: the kernel offers no huge pages: skipped\n"); return 77; }
  return 1;
}
