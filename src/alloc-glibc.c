/* ----------------------------------------------------------------------------
  alloc-glibc.c -- glibc's malloc extensions, answered for our heap.

  Programs written for glibc call more than malloc and free: servers call
  malloc_trim(0) after a burst to give memory back, monitoring code reads
  mallinfo2(), diagnostics print malloc_stats() or malloc_info(). With malloc
  overridden but not these, they would answer for glibc's own heap, which is
  empty. Included by static.c after alloc-override.c, in overriding builds
  on glibc (the preloaded library, the object file, the static library).

  The figures come from the layers that own them: segment-walk.c walks the
  page descriptors of every segment (not the blocks: O(pages)) and reads the
  huge blocks' bytes from the statistics; region.c adds the freed blocks
  that are still resident; the trim is mi_collect(true), which reaches the
  free pages of every thread (segment-walk.c). Only the glibc names and
  their mapping live here; the README has the table of what each does.

  mallinfo2 fields, as glibc splits them (arena is small-object memory,
  hblkhd the huge blocks; in use = uordblks + hblkhd, arena = uordblks +
  fordblks, as in glibc):
    arena     bytes of the segments of small pages and of slices (blocks
              up to 2 MiB), free or not, and of freed segments whose memory
              is still resident
    ordblks   pages with room: free pages, and pages in use with free blocks
    smblks, fsmblks   0 (no fastbins)
    hblks     huge blocks (over 2 MiB: a segment each)
    hblkhd    their bytes (the `huge` and `giant` statistics rows)
    usmblks   0 (unused in glibc too)
    uordblks  bytes of the blocks in use in arena (used blocks x block size,
              less the blocks other threads freed that the owner has not
              collected yet)
    fordblks  arena - uordblks: free blocks, free pages, freed segments (and
              the segment headers, 0.1%)
    keepcost  what malloc_trim(0) would give back now: free pages and freed
              segments that are resident
  mallinfo: the same, each field saturating at INT_MAX instead of wrapping.
-----------------------------------------------------------------------------*/
#if !defined(MI_MALLOC_OVERRIDE)
#error "alloc-glibc.c is only compiled (through static.c) when overriding"
#endif

#include <malloc.h>
#include <stdio.h>
#include <limits.h>

#define MI_GLIBC_EXPORT  __attribute__((visibility("default")))

// ---------------------------------------------------------------------------
// mallinfo2, mallinfo
// ---------------------------------------------------------------------------

typedef struct mi_glibc_info_s {
  size_t arena, ordblks, hblks, hblkhd, uordblks, fordblks, keepcost;
} mi_glibc_info_t;

static void mi_glibc_info(mi_glibc_info_t* info) {
  mi_usage_t usage;
  _mi_segments_usage(&usage);
  info->arena = usage.arena;
  info->ordblks = usage.free_chunks;
  info->hblks = usage.huge_count;
  info->hblkhd = usage.huge;
  info->uordblks = (usage.in_use < usage.arena ? usage.in_use : usage.arena);
  info->fordblks = usage.arena - info->uordblks;
  info->keepcost = usage.releasable;
}

#if __GLIBC_PREREQ(2, 33)
MI_GLIBC_EXPORT struct mallinfo2 mallinfo2(void) {
  mi_glibc_info_t info;
  mi_glibc_info(&info);
  struct mallinfo2 m;
  memset(&m, 0, sizeof(m));
  m.arena = info.arena;
  m.ordblks = info.ordblks;
  m.hblks = info.hblks;
  m.hblkhd = info.hblkhd;
  m.uordblks = info.uordblks;
  m.fordblks = info.fordblks;
  m.keepcost = info.keepcost;
  return m;
}
#endif

static int mi_glibc_saturate(size_t n) {
  return (n > (size_t)INT_MAX ? INT_MAX : (int)n);
}

MI_GLIBC_EXPORT struct mallinfo mallinfo(void) {
  mi_glibc_info_t info;
  mi_glibc_info(&info);
  struct mallinfo m;
  memset(&m, 0, sizeof(m));
  m.arena = mi_glibc_saturate(info.arena);
  m.ordblks = mi_glibc_saturate(info.ordblks);
  m.hblks = mi_glibc_saturate(info.hblks);
  m.hblkhd = mi_glibc_saturate(info.hblkhd);
  m.uordblks = mi_glibc_saturate(info.uordblks);
  m.fordblks = mi_glibc_saturate(info.fordblks);
  m.keepcost = mi_glibc_saturate(info.keepcost);
  return m;
}

// ---------------------------------------------------------------------------
// malloc_trim: mi_collect(true) from this thread, which purges the free pages
// of every thread (segment-walk.c), freed segments, pending huge purges,
// and unmaps regions nothing uses. `pad`: glibc keeps that much at the top of
// its main heap and gives back every other free page whatever it says; we
// have no top, so everything free goes back. 1 if memory went back to the OS
// during the call (purged or unmapped: the statistics' `reset` and `reserved`
// rows tell), else 0.
// ---------------------------------------------------------------------------

MI_GLIBC_EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  const int64_t before = _mi_stats_released();
  mi_heap_collect(mi_heap_get_default(), true);   // (sets up a thread that never allocated)
  return (_mi_stats_released() > before ? 1 : 0);
}

// ---------------------------------------------------------------------------
// malloc_stats, malloc_info
// ---------------------------------------------------------------------------

static void mi_glibc_out_stderr(const char* msg, void* arg) {
  (void)arg;
  fputs(msg, stderr);
}

// The statistics table of mi_stats_print, on stderr (as glibc prints its own).
MI_GLIBC_EXPORT void malloc_stats(void) {
  mi_stats_print_out(&mi_glibc_out_stderr, NULL);
}

// glibc's XML document: one heap (ours is process-wide), its totals, and the
// process totals. "rest": pages with room and their free bytes; "mmap": the
// huge blocks; system current: arena; system max: the peak of committed
// memory; aspace total: the address space we reserved; aspace mprotect: the
// part committed. <sizes> stays empty (we count no free chunks per size).
// options != 0: EINVAL, as glibc.
MI_GLIBC_EXPORT int malloc_info(int options, FILE* fp) {
  if (options != 0 || fp == NULL) {
    errno = EINVAL;
    return -1;
  }
  mi_glibc_info_t info;
  mi_glibc_info(&info);
  const int64_t committed_peak = mi_atomic_load_relaxed(&_mi_stats_main.committed.peak);
  const int64_t committed = mi_atomic_load_relaxed(&_mi_stats_main.committed.current);
  const int64_t reserved = mi_atomic_load_relaxed(&_mi_stats_main.reserved.current);
  const size_t max = (committed_peak > (int64_t)info.arena ? (size_t)committed_peak : info.arena);
  const size_t aspace = (reserved > 0 ? (size_t)reserved : 0);
  const size_t mprotect = (committed > 0 ? (size_t)committed : 0);
  // the one heap and the totals carry the same figures (glibc: per arena, then summed)
  fprintf(fp, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n</sizes>\n");
  for (int totals = 0; totals <= 1; totals++) {
    fprintf(fp, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n");
    fprintf(fp, "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n", info.ordblks, info.fordblks);
    if (totals) fprintf(fp, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", info.hblks, info.hblkhd);
    fprintf(fp, "<system type=\"current\" size=\"%zu\"/>\n", info.arena);
    fprintf(fp, "<system type=\"max\" size=\"%zu\"/>\n", max);
    fprintf(fp, "<aspace type=\"total\" size=\"%zu\"/>\n", aspace);
    fprintf(fp, "<aspace type=\"mprotect\" size=\"%zu\"/>\n", mprotect);
    fprintf(fp, (totals ? "</malloc>\n" : "</heap>\n"));
  }
  return 0;
}

// ---------------------------------------------------------------------------
// mallopt answers as glibc's does: 1 for every parameter, known or not,
// except M_MXFAST above glibc's largest fast size (160 bytes; a negative value
// too), which is 0. Mapped:
//   M_TRIM_THRESHOLD  when free memory goes back: a negative value (glibc:
//                     never trim) sets reset_delay to its maximum, a day, so
//                     that memory goes back on malloc_trim or mi_collect(true);
//                     0 (trim at once) sets it to 0; a positive value puts
//                     back the delay in force before the first such call.
//   M_MMAP_THRESHOLD  huge blocks (over 2 MiB, their own segment) of at least
//                     this size give their memory back as soon as they are
//                     freed, as glibc's munmap of an mmapped chunk does,
//                     instead of after reset_delay (a negative value: none,
//                     the default).
// The others have no meaning here (no arenas, fastbins, top pad or check
// actions: M_ARENA_MAX, M_ARENA_TEST, M_MXFAST, M_NLBLKS, M_GRAIN, M_KEEP,
// M_TOP_PAD, M_MMAP_MAX, M_CHECK_ACTION, M_PERTURB): accepted, no effect.
// ---------------------------------------------------------------------------

#define MI_GLIBC_DELAY_MAX  (86400000L)   // reset_delay's maximum (a day)
#define MI_GLIBC_MXFAST_MAX (160)         // glibc's largest fast size on 64-bit systems (80 * sizeof(size_t) / 4)

static _Atomic(long) mi_glibc_delay_before = -1;   // reset_delay before the first M_TRIM_THRESHOLD (-1: none yet)

MI_GLIBC_EXPORT int mallopt(int param, int value) {
  switch (param) {
    case M_TRIM_THRESHOLD: {
      long before = -1;
      mi_atomic_cas_strong_acq_rel(&mi_glibc_delay_before, &before, mi_option_get(mi_option_reset_delay));
      if (value < 0) mi_option_set(mi_option_reset_delay, MI_GLIBC_DELAY_MAX);
      else if (value == 0) mi_option_set(mi_option_reset_delay, 0);
      else mi_option_set(mi_option_reset_delay, mi_atomic_load_relaxed(&mi_glibc_delay_before));
      return 1;
    }
    case M_MMAP_THRESHOLD:
      _mi_segment_huge_release_at(value < 0 ? SIZE_MAX : (size_t)value);
      return 1;
    case M_MXFAST:
      return ((size_t)(long)value <= MI_GLIBC_MXFAST_MAX ? 1 : 0);
    default:
      return 1;
  }
}
