/* ----------------------------------------------------------------------------
  test-reserve-huge.c -- reserved huge OS pages serve the allocations.

  Usage: mimalloc-test-reserve-huge MODE KIB
    MODE env : the reservation comes from MIMALLOC_RESERVE_HUGE_OS_PAGES=1
    MODE api : mi_reserve_huge_os_pages_at(2, 0, 1 ms) reserves one GiB and
               stops at the time limit (ETIMEDOUT); then the edge cases of
               the three functions
    KIB      : the page size (KiB) the reservation must have (1048576 or
               2048), or 0 when no huge page can be had (the clean fallback:
               ENOMEM, and the program works on ordinary memory)

  It allocates 16 MiB in 64 KiB blocks and looks each block up in
  /proc/self/smaps: with a reservation, most of them (all but the thread's
  first, lazily committed segment) must lie in a hugetlb mapping ("ht" in
  VmFlags) of that page size. Mode env then allocates 1.25 GiB in 1 MiB
  blocks, more than the reservation: the rest must come from ordinary
  memory; after freeing everything and mi_collect(true) the reserved mapping
  must still be there and serve again. Mode api also requires that the
  reserved mapping prefers node 0 in /proc/self/numa_maps (where the kernel
  has NUMA). Prints one line per check; exits 0 when all hold.
-----------------------------------------------------------------------------*/
#define _POSIX_C_SOURCE 200809L

#include <mimalloc.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfile.h"

static char buf[8 << 20];   // smaps or numa_maps

static size_t read_file(const char* path) { return proc_read_file(path, buf, sizeof(buf)); }

// The mappings of /proc/self/smaps that are hugetlb ("ht" in VmFlags).
typedef struct huge_map_s { uintptr_t start, end; size_t kpage_kib; } huge_map_t;
static huge_map_t maps[256];
static size_t maps_count;

static bool read_huge_maps(void) {
  maps_count = 0;
  if (read_file("/proc/self/smaps") == 0) return false;
  uintptr_t start = 0, end = 0;
  size_t kpage = 0;
  for (char* line = buf; line != NULL && *line != 0; ) {
    char* nl = strchr(line, '\n');
    if (nl != NULL) *nl = 0;
    unsigned long s, e;
    if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, ':') != NULL && line[0] != 'V') {
      start = s; end = e; kpage = 0;
    }
    else if (strncmp(line, "KernelPageSize:", 15) == 0) kpage = strtoul(line + 15, NULL, 10);
    else if (strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " ht") != NULL && maps_count < 256) {
      maps[maps_count++] = (huge_map_t){ start, end, kpage };
    }
    line = (nl != NULL ? nl + 1 : NULL);
  }
  return true;
}

// The page size (KiB) of the hugetlb mapping holding p, or 0.
static size_t huge_kib_at(const void* p) {
  for (size_t i = 0; i < maps_count; i++) {
    if ((uintptr_t)p >= maps[i].start && (uintptr_t)p < maps[i].end) return maps[i].kpage_kib;
  }
  return 0;
}

static int failures;
static void check(bool ok, const char* what) {
  printf("reserve-huge: %s: %s\n", (ok ? "ok" : "FAIL"), what);
  if (!ok) failures++;
}

#define BLOCKS  (256)   // of 64 KiB: 16 MiB

// Allocate 16 MiB, count the blocks in hugetlb mappings of `kib` pages.
static void check_blocks(size_t kib, const char* when) {
  static void* blocks[BLOCKS];
  for (size_t i = 0; i < BLOCKS; i++) { blocks[i] = mi_malloc(64 * 1024); memset(blocks[i], 1, 64 * 1024); }
  size_t in_huge = 0, in_other = 0;
  if (!read_huge_maps()) { printf("reserve-huge: no /proc/self/smaps\n"); exit(77); }
  for (size_t i = 0; i < BLOCKS; i++) {
    const size_t k = huge_kib_at(blocks[i]);
    if (k == 0) continue;
    if (k == kib) in_huge++; else in_other++;
  }
  printf("reserve-huge: %s: %zu of %d blocks of 64 KiB in hugetlb mappings of %zu KiB pages (%zu in others); %zu hugetlb mappings\n",
         when, in_huge, BLOCKS, kib, in_other, maps_count);
  char what[128];
  if (kib > 0) {
    snprintf(what, sizeof(what), "%s: most blocks in reserved %zu KiB pages", when, kib);
    check(in_huge >= BLOCKS / 2 && in_other == 0, what);
  }
  else {
    snprintf(what, sizeof(what), "%s: no block in a hugetlb mapping (nothing reserved)", when);
    check(in_huge + in_other == 0, what);
  }
  for (size_t i = 0; i < BLOCKS; i++) mi_free(blocks[i]);
}

// More than the reservation: 1.25 GiB of 1 MiB blocks, the rest from ordinary memory.
static void check_beyond(size_t kib) {
  const size_t count = 1280;
  void** blocks = (void**)mi_malloc(count * sizeof(void*));
  for (size_t i = 0; i < count; i++) {
    blocks[i] = mi_malloc(1024 * 1024);
    if (blocks[i] == NULL) { check(false, "1 MiB block allocated"); exit(1); }
    ((char*)blocks[i])[0] = 1;
  }
  read_huge_maps();
  size_t in_huge = 0;
  for (size_t i = 0; i < count; i++) if (huge_kib_at(blocks[i]) != 0) in_huge++;
  printf("reserve-huge: beyond: %zu of %zu blocks of 1 MiB in hugetlb mappings\n", in_huge, count);
  check(kib == 0 ? in_huge == 0 : (in_huge >= 256 && in_huge < count), "beyond the reservation: ordinary memory serves the rest");
  for (size_t i = 0; i < count; i++) mi_free(blocks[i]);
  mi_free(blocks);
  mi_collect(true);
  read_huge_maps();
  check(kib == 0 || maps_count > 0, "after mi_collect(true) the reserved mapping stays");
}

static void check_numa_prefer(void) {
  if (maps_count == 0 || read_file("/proc/self/numa_maps") == 0) { printf("reserve-huge: no numa_maps: preferred node not checked\n"); return; }
  char addr[32];
  snprintf(addr, sizeof(addr), "%lx ", (unsigned long)maps[0].start);
  for (char* line = buf; line != NULL && *line != 0; ) {
    char* nl = strchr(line, '\n');
    if (nl != NULL) *nl = 0;
    if (strncmp(line, addr, strlen(addr)) == 0) {
      printf("reserve-huge: numa_maps: %s\n", line);
      check(strstr(line, "prefer:0") != NULL && strstr(line, "huge") != NULL, "the reserved mapping prefers node 0 (mbind)");
      return;
    }
    line = (nl != NULL ? nl + 1 : NULL);
  }
  check(false, "the reserved mapping is in numa_maps");
}

int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: %s env|api KIB\n", argv[0]); return 2; }
  const bool api = (strcmp(argv[1], "api") == 0);
  const size_t kib = strtoul(argv[2], NULL, 10);
  if (api) {
    // one GiB (its first page is slower than 1 ms), then the time limit stops it
    const int err = mi_reserve_huge_os_pages_at(2, 0, 1);
    printf("reserve-huge: mi_reserve_huge_os_pages_at(2, 0, 1) = %d\n", err);
    check(err == (kib > 0 ? ETIMEDOUT : ENOMEM), (kib > 0 ? "ETIMEDOUT after one GiB" : "ENOMEM: nothing reserved"));
  }
  check_blocks(kib, "first");
  if (api) {
    if (kib > 0) check_numa_prefer();
    check(mi_reserve_huge_os_pages_at(0, -7, 0) == 0, "no pages: 0");
    check(mi_reserve_huge_os_pages_interleave(0, 3, 10) == 0, "interleave no pages: 0");
    size_t got = 99;
    check(mi_reserve_huge_os_pages(0, 1.0, &got) == 0 && got == 0, "deprecated, no pages: 0, none reserved");
    // the pool configured for the test is used up: nothing more
    const int err = mi_reserve_huge_os_pages_interleave(1, 1, 1000);
    printf("reserve-huge: mi_reserve_huge_os_pages_interleave(1, 1, 1000) = %d\n", err);
    check(err == ENOMEM, "interleave on an empty pool: ENOMEM");
    got = 99;
    const int derr = mi_reserve_huge_os_pages(1, 0.5, &got);
    check(derr == ENOMEM && got == 0, "deprecated on an empty pool: ENOMEM, none reserved");
  }
  else {
    check_beyond(kib);
    check_blocks(kib, "again");
  }
  printf("reserve-huge: %s\n", (failures == 0 ? "all ok" : "FAILED"));
  return (failures == 0 ? 0 : 1);
}
