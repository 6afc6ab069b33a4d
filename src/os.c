/* ----------------------------------------------------------------------------
  os.c -- OS memory policy on top of the primitives of prim/prim.h.

  What this layer adds to the raw primitives:
  - aligned reservations: first try a plain mapping at a *hint* address taken
    from an atomic bump pointer in [4 TiB, 30 TiB) that starts at a random
    multiple of 4 MiB; consecutive requests are then contiguous and aligned,
    so the over-allocate-and-trim fallback is rarely needed;
  - page rounding: commit rounds outward, decommit/purge round inward;
  - reporting: every failing OS call is a warning, never a crash;
  - huge OS pages for reservations: one GiB at a time at addresses of their
    own (from 32 TiB), 1 GiB pages or else 2 MiB pages, bound to a NUMA node
    and faulted in at once (region.c turns them into pinned regions);
  - purge = MADV_DONTNEED (the range stays accessible and reads zeros);
    whether a page purge decommits instead is decided by the segment layer.

  Words, in the code: to *purge* a range is to give its physical memory back
  (its contents become zero), whichever way; to *decommit* is the way that
  also makes it inaccessible (option reset_decommits). The 1.6 option names
  (page_reset, reset_delay, ...) and the statistics row `reset` keep 1.6's
  word for purging.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

static size_t os_page_size = 4096;
static size_t os_large_page_size = 2 * MiB;
static bool   os_has_overcommit = true;
static _Atomic(size_t) os_cpu_count;   // (0: not read yet)
static _Atomic(size_t) mi_os_populate_unsupported;   // 1: the OS cannot populate (ENOSYS)

void _mi_os_init(void) {
  mi_prim_config_t config;
  _mi_prim_init(&config);
  os_page_size = config.page_size;
  os_large_page_size = config.large_page_size;
  os_has_overcommit = config.has_overcommit;
  mi_atomic_store_relaxed(&os_cpu_count, (config.cpu_count > 0 ? config.cpu_count : 1));
  if (!config.has_populate) mi_atomic_store_relaxed(&mi_os_populate_unsupported, 1);
}

// Committed memory costs nothing until it is touched (Linux); where the OS
// charges commit (Windows), regions are not committed whole by default.
bool _mi_os_has_overcommit(void) {
  return os_has_overcommit;
}

size_t _mi_os_page_size(void) {
  return os_page_size;
}

// The processors this process may run on, read at start (at least 1; asked
// of the OS here when called before _mi_os_init).
size_t _mi_os_cpu_count(void) {
  size_t n = mi_atomic_load_relaxed(&os_cpu_count);
  if (mi_unlikely(n == 0)) {
    mi_prim_config_t config;
    _mi_prim_init(&config);
    n = (config.cpu_count > 0 ? config.cpu_count : 1);
    mi_atomic_store_relaxed(&os_cpu_count, n);
  }
  return n;
}

// Round huge sizes so that waste is bounded (~12.5%) and sizes repeat.
size_t _mi_os_good_alloc_size(size_t size) {
  size_t align_size;
  if (size < 512 * KiB) align_size = _mi_os_page_size();
  else if (size < 2 * MiB) align_size = 64 * KiB;
  else if (size < 8 * MiB) align_size = 256 * KiB;
  else if (size < 32 * MiB) align_size = 1 * MiB;
  else align_size = 4 * MiB;
  if (mi_unlikely(size >= (SIZE_MAX - align_size))) return size;  // possible overflow
  return _mi_align_up(size, align_size);
}

// ---------------------------------------------------------------------------
// Raw allocation
// ---------------------------------------------------------------------------

// Large OS pages: after the OS refused fixed large pages, the next
// MI_LARGE_BACKOFF requests do not ask again (they get normal pages advised
// as transparent huge pages), as mimalloc does.
#define MI_LARGE_BACKOFF  (10)
static _Atomic(size_t) mi_large_backoff;

static void* mi_os_mem_alloc(void* hint, size_t size, bool commit, bool allow_large, bool* is_pinned, bool* is_zero) {
  void* p = NULL;
  bool large = false, zero = false;
  bool try_large = (allow_large && commit && (size % os_large_page_size) == 0);
  bool backing_off = false;
  if (try_large) {
    size_t backoff = mi_atomic_load_relaxed(&mi_large_backoff);
    while (backoff > 0 && !mi_atomic_cas_weak_acq_rel(&mi_large_backoff, &backoff, backoff - 1)) { }
    backing_off = (backoff > 0);
  }
  int err = _mi_prim_alloc(hint, size, commit, try_large && !backing_off, &p, &large, &zero);
  if (err == 0 && try_large) {
    if (backing_off) {
      const int aerr = _mi_prim_advise_huge(p, size);
      _mi_verbose_message("large OS pages: 0x%zx bytes at %p: transparent huge pages%s (fixed large pages refused recently: not asked)\n",
                          size, p, (aerr == 0 ? "" : " refused too"));
    }
    else if (large) {
      _mi_verbose_message("large OS pages: 0x%zx bytes at %p: fixed %zu KiB pages\n", size, p, os_large_page_size / KiB);
    }
    else {
      mi_atomic_store_relaxed(&mi_large_backoff, MI_LARGE_BACKOFF);
      _mi_verbose_message("large OS pages: 0x%zx bytes at %p: fixed large pages refused; normal pages instead (advised as transparent huge pages where the OS has them), next %d requests do not ask\n",
                          size, p, MI_LARGE_BACKOFF);
    }
  }
  mi_stat_counter_increase(NULL, mmap_calls, 1);
  if (err == 0) {
    mi_stat_increase(NULL, reserved, size);
    if (commit) mi_stat_increase(NULL, committed, size);
  }
  if (err != 0) {
    _mi_warning_message("unable to allocate OS memory (error: %d (0x%x), size: 0x%zx bytes, address: %p, allow large: %d)\n",
                        err, err, size, hint, allow_large);
    return NULL;
  }
  if (is_pinned != NULL) *is_pinned = large;
  if (is_zero != NULL) *is_zero = zero;
  return p;
}

// `committed` bytes of the range were committed (for the statistics)
static void mi_os_mem_free(void* p, size_t size, size_t committed) {
  if (p == NULL || size == 0) return;
  mi_stat_decrease(NULL, reserved, size);
  if (committed > 0) mi_stat_decrease(NULL, committed, committed);
  int err = _mi_prim_free(p, size);
  if (err != 0) {
    _mi_warning_message("unable to free OS memory (error: %d (0x%x), size: 0x%zx bytes, address: %p)\n", err, err, size, p);
  }
}

void* _mi_os_alloc(size_t size) {
  if (size == 0) return NULL;
  size = _mi_align_up(size, _mi_os_page_size());
  return mi_os_mem_alloc(NULL, size, true, false, NULL, NULL);
}

void _mi_os_free(void* p, size_t size) {
  if (p == NULL) return;
  size = _mi_align_up(size, _mi_os_page_size());
  mi_os_mem_free(p, size, size);
}

void _mi_os_free_ex(void* p, size_t size, size_t committed) {
  if (p == NULL) return;
  size = _mi_align_up(size, _mi_os_page_size());
  mi_os_mem_free(p, size, committed);
}

// ---------------------------------------------------------------------------
// Aligned allocation with the address hint
// ---------------------------------------------------------------------------

static void mi_os_init_huge_hint(uintptr_t random);

#if (MI_INTPTR_SIZE >= 8)
#define MI_HINT_BASE  ((uintptr_t)4 << 40)   // 4 TiB
#define MI_HINT_AREA  ((uintptr_t)4 << 40)   // random start within the first 4 TiB above the base
#define MI_HINT_MAX   ((uintptr_t)30 << 40)  // wrap after 30 TiB
static _Atomic(uintptr_t) aligned_base;
static _Atomic(uintptr_t) aligned_start;   // where the bump pointer starts (and wraps to); 0: the base

// At process start (one thread): the hint area starts at the base plus a
// random multiple of the segment size (not in debug builds, which stay
// repeatable). The random word comes from the caller, so that this layer
// never touches a heap's generator (which belongs to its thread).
void _mi_os_init_hint(uintptr_t random) {
  uintptr_t start = MI_HINT_BASE;
  #if (MI_DEBUG == 0)
  start += (MI_SEGMENT_SIZE * ((random >> 17) & 0xFFFFF)) % MI_HINT_AREA;
  #else
  (void)random;
  #endif
  mi_atomic_store_release(&aligned_start, start);
  mi_os_init_huge_hint(random);
}

// A hint address for a `size` bytes segment-aligned reservation, or NULL.
static void* mi_os_get_aligned_hint(size_t try_alignment, size_t size) {
  if (try_alignment == 0 || try_alignment > MI_SEGMENT_SIZE) return NULL;
  if ((size % MI_SEGMENT_SIZE) != 0) return NULL;
  if (size > 1 * GiB) return NULL;   // keep the hint area for segments and regions
  uintptr_t hint = mi_atomic_add_acq_rel(&aligned_base, size);
  if (hint == 0 || hint > MI_HINT_MAX) {
    // initialise (or wrap) at the start
    uintptr_t init = mi_atomic_load_acquire(&aligned_start);
    if (init == 0) init = MI_HINT_BASE;
    uintptr_t expected = hint + size;
    mi_atomic_cas_strong_acq_rel(&aligned_base, &expected, init);
    hint = mi_atomic_add_acq_rel(&aligned_base, size);
  }
  if (hint % try_alignment != 0) return NULL;
  return (void*)hint;
}
#else
void _mi_os_init_hint(uintptr_t random) { mi_os_init_huge_hint(random); }
static void* mi_os_get_aligned_hint(size_t try_alignment, size_t size) {
  (void)try_alignment; (void)size; return NULL;
}
#endif

// Allocate `size` bytes such that `(p + align_offset) % alignment == 0`.
// `size`, `alignment` and `align_offset` must be multiples of the page size.
void* _mi_os_alloc_aligned_at(size_t size, size_t alignment, size_t align_offset,
                              bool commit, bool allow_large, bool* is_pinned, bool* is_zero) {
  mi_assert_internal(_mi_is_power_of_two(alignment));
  mi_assert_internal(align_offset % _mi_os_page_size() == 0);
  if (size == 0) return NULL;
  size = _mi_align_up(size, _mi_os_page_size());
  alignment = _mi_align_up(alignment, _mi_os_page_size());
  bool large = false, zero = false;
  if (is_pinned == NULL) is_pinned = &large;
  if (is_zero == NULL) is_zero = &zero;

  // 1. try a plain mapping, at a hint if the request is a whole number of segments
  void* hint = (align_offset == 0 ? mi_os_get_aligned_hint(alignment, size) : NULL);
  void* p = mi_os_mem_alloc(hint, size, commit, allow_large, is_pinned, is_zero);
  if (p == NULL) return NULL;
  if (((uintptr_t)p + align_offset) % alignment == 0) return p;

  // 2. over-allocate and trim the unaligned head and tail. Fixed large pages
  //    are unmapped in whole large pages: where the first mapping had them
  //    and the alignment is a multiple of them, the trims are too, so it asks
  //    for them again (else a region meant for them got normal pages whenever
  //    the first mapping was not aligned: under AddressSanitizer, whose
  //    shadow refuses the address hint, half the time)
  const bool pinned_again = (*is_pinned && allow_large && (alignment % os_large_page_size) == 0 &&
                             (align_offset % os_large_page_size) == 0);
  mi_os_mem_free(p, size, (commit ? size : 0));
  //    Where the OS releases only whole mappings (Windows), it places the
  //    aligned mapping itself (normal pages).
  int err = _mi_prim_alloc_aligned(size, alignment, align_offset, commit, &p, is_zero);
  if (err != ENOSYS) {
    mi_stat_counter_increase(NULL, mmap_calls, 1);
    if (err != 0) {
      _mi_warning_message("unable to allocate aligned OS memory (error: %d (0x%x), size: 0x%zx bytes, alignment: 0x%zx, offset: 0x%zx)\n",
                          err, err, size, alignment, align_offset);
      return NULL;
    }
    *is_pinned = false;
    mi_stat_increase(NULL, reserved, size);
    if (commit) mi_stat_increase(NULL, committed, size);
    return p;
  }
  if (size >= SIZE_MAX - alignment) return NULL;
  const size_t over_size = size + alignment;
  void* base = mi_os_mem_alloc(NULL, over_size, commit, pinned_again, is_pinned, is_zero);
  if (base == NULL) return NULL;
  uintptr_t aligned = _mi_align_up((uintptr_t)base + align_offset, alignment) - align_offset;
  if (aligned < (uintptr_t)base) aligned += alignment;
  const size_t pre_size = aligned - (uintptr_t)base;
  const size_t post_size = over_size - pre_size - size;
  if (pre_size > 0) mi_os_mem_free(base, pre_size, (commit ? pre_size : 0));
  if (post_size > 0) mi_os_mem_free((uint8_t*)aligned + size, post_size, (commit ? post_size : 0));
  // large OS pages were allowed but these are normal ones: advised as
  // transparent huge pages, as step 1's would have been (where the hint is
  // refused, as under ThreadSanitizer, regions came here without the advice
  // half the time)
  if (allow_large && commit && !*is_pinned && (size % os_large_page_size) == 0) (void)_mi_prim_advise_huge((void*)aligned, size);
  return (void*)aligned;
}

// ---------------------------------------------------------------------------
// Commit, decommit, purge, protect
// ---------------------------------------------------------------------------

// Round a range to whole OS pages: outward (`conservative == false`) or inward.
static void* mi_os_page_align_area(void* addr, size_t size, bool conservative, size_t* newsize) {
  *newsize = 0;
  if (addr == NULL || size == 0) return NULL;
  uintptr_t start = (conservative ? _mi_align_up((uintptr_t)addr, _mi_os_page_size())
                                  : _mi_align_down((uintptr_t)addr, _mi_os_page_size()));
  uintptr_t end = (conservative ? _mi_align_down((uintptr_t)addr + size, _mi_os_page_size())
                                : _mi_align_up((uintptr_t)addr + size, _mi_os_page_size()));
  if (end <= start) return NULL;
  *newsize = end - start;
  return (void*)start;
}

bool _mi_os_commit(void* addr, size_t size, bool* is_zero) {
  if (is_zero != NULL) *is_zero = false;
  size_t csize;
  void* start = mi_os_page_align_area(addr, size, false, &csize);
  if (csize == 0) return true;
  bool zero = false;
  mi_stat_counter_increase(NULL, commit_calls, 1);
  int err = _mi_prim_commit(start, csize, &zero);
  if (err == 0) mi_stat_increase(NULL, committed, csize);
  if (err != 0) {
    _mi_warning_message("cannot commit OS memory (error: %d (0x%x), address: %p, size: 0x%zx bytes)\n", err, err, start, csize);
    return false;
  }
  if (is_zero != NULL) *is_zero = zero;
  return true;
}

bool _mi_os_decommit(void* addr, size_t size) {
  size_t csize;
  void* start = mi_os_page_align_area(addr, size, true, &csize);
  if (csize == 0) return true;
  int err = _mi_prim_decommit(start, csize);
  if (err == 0) {
    mi_stat_decrease(NULL, committed, csize);
    mi_stat_counter_increase(NULL, commit_calls, 1);
  }
  if (err != 0) {
    _mi_warning_message("cannot decommit OS memory (error: %d (0x%x), address: %p, size: 0x%zx bytes)\n", err, err, start, csize);
    return false;
  }
  return true;
}

// Give the physical memory of a range back but keep it accessible: the next
// touch reads zeros. Returns true on success.
bool _mi_os_purge(void* addr, size_t size) {
  size_t csize;
  void* start = mi_os_page_align_area(addr, size, true, &csize);
  if (csize == 0) return false;
  int err = _mi_prim_purge(start, csize);
  if (err == 0) mi_stat_increase(NULL, reset, csize);
  if (err != 0) {
    _mi_warning_message("cannot purge OS memory (error: %d (0x%x), address: %p, size: 0x%zx bytes)\n", err, err, start, csize);
    return false;
  }
  return true;
}

static bool mi_os_protectx(void* addr, size_t size, bool protect) {
  size_t csize;
  void* start = mi_os_page_align_area(addr, size, true, &csize);
  if (csize == 0) return false;
  int err = _mi_prim_protect(start, csize, protect);
  if (err != 0) {
    _mi_warning_message("cannot %s OS memory (error: %d (0x%x), address: %p, size: 0x%zx bytes)\n",
                        (protect ? "protect" : "unprotect"), err, err, start, csize);
    return false;
  }
  return true;
}

bool _mi_os_protect(void* addr, size_t size)   { return mi_os_protectx(addr, size, true); }
bool _mi_os_unprotect(void* addr, size_t size) { return mi_os_protectx(addr, size, false); }

// Fault in the whole OS pages of a range for writing, in one call (best
// effort: false if the OS cannot, and then not tried again). errno is kept:
// this runs inside malloc and free.
bool _mi_os_populate(void* addr, size_t size) {
  if (mi_atomic_load_relaxed(&mi_os_populate_unsupported) != 0) return false;
  size_t csize;
  void* start = mi_os_page_align_area(addr, size, true, &csize);
  if (csize == 0) return false;
  const int saved = errno;
  const int err = _mi_prim_populate(start, csize);
  errno = saved;
  if (err == ENOSYS) mi_atomic_store_relaxed(&mi_os_populate_unsupported, 1);
  return (err == 0);
}

// Can _mi_os_populate work? (false where the OS has no way, or once it said so)
bool _mi_os_can_populate(void) {
  return (mi_atomic_load_relaxed(&mi_os_populate_unsupported) == 0);
}

// Bytes of the whole OS pages of a range that are resident; SIZE_MAX if the
// OS cannot tell. errno is kept.
size_t _mi_os_resident(void* addr, size_t size) {
  size_t csize, resident = 0;
  void* start = mi_os_page_align_area(addr, size, true, &csize);
  if (csize == 0) return 0;
  const int saved = errno;
  const int err = _mi_prim_resident(start, csize, &resident);
  errno = saved;
  return (err == 0 ? resident : SIZE_MAX);
}

// Bytes of [addr, addr+size) that a purge or decommit really covers (whole
// OS pages inside the range): what the statistics count for it.
size_t _mi_os_inward_size(void* addr, size_t size) {
  size_t csize;
  mi_os_page_align_area(addr, size, true, &csize);
  return csize;
}

// ---------------------------------------------------------------------------
// Huge OS pages (reserved once, pinned)
// ---------------------------------------------------------------------------

// Reserved GiBs are mapped at addresses of their own, from 32 TiB up (plus a
// random multiple of 1 GiB, up to 4095 GiB, outside non-secure debug builds,
// as 1.6), far from the segment hint area [4 TiB, 30 TiB).
#if (MI_INTPTR_SIZE >= 8)
#define MI_HUGE_HINT_BASE  ((uintptr_t)32 << 40)   // 32 TiB
static _Atomic(uintptr_t) huge_hint;

static void mi_os_init_huge_hint(uintptr_t random) {
  uintptr_t start = MI_HUGE_HINT_BASE;
  #if (MI_DEBUG == 0 || MI_SECURE_RANDOM)
  start += MI_HUGE_OS_PAGE_SIZE * ((random >> 40) & 0xFFF);
  #else
  (void)random;
  #endif
  mi_atomic_store_release(&huge_hint, start);
}

static void* mi_os_huge_hint(void) {
  uintptr_t expected = 0;
  mi_atomic_cas_strong_acq_rel(&huge_hint, &expected, MI_HUGE_HINT_BASE);   // not initialised yet
  return (void*)mi_atomic_add_acq_rel(&huge_hint, MI_HUGE_OS_PAGE_SIZE);
}
#else
static void mi_os_init_huge_hint(uintptr_t random) { (void)random; }
static void* mi_os_huge_hint(void) { return NULL; }
#endif

// Once the OS refused 1 GiB pages, the following GiBs ask for 2 MiB pages only.
static _Atomic(size_t) mi_huge_1gib_refused;

// Map one GiB of fixed huge OS pages: one 1 GiB page, or else 512 pages of
// 2 MiB. With `numa_node` >= 0 its pages prefer that node. It is faulted in
// before it is returned (zeroed and placed now, not on first use). Returns
// NULL with *err set (ENOMEM: no pool has free pages; ENOSYS: the OS has no
// huge pages), else the start (segment aligned) and the page size used.
void* _mi_os_alloc_huge_os_page(int numa_node, size_t* page_size, int* err) {
  void* p = NULL;
  void* hint = mi_os_huge_hint();
  *page_size = 0;
  *err = ENOMEM;
  if (mi_atomic_load_relaxed(&mi_huge_1gib_refused) == 0) {
    *err = _mi_prim_alloc_huge_os_pages(hint, MI_HUGE_OS_PAGE_SIZE, MI_HUGE_OS_PAGE_SIZE, false, &p);
    if (*err == 0) *page_size = MI_HUGE_OS_PAGE_SIZE;
    else mi_atomic_store_relaxed(&mi_huge_1gib_refused, 1);
  }
  if (p == NULL) {
    *err = _mi_prim_alloc_huge_os_pages(hint, MI_HUGE_OS_PAGE_SIZE, os_large_page_size, false, &p);
    if (*err == 0) *page_size = os_large_page_size;
  }
  mi_stat_counter_increase(NULL, mmap_calls, 1);
  if (p == NULL) return NULL;
  if (((uintptr_t)p % MI_SEGMENT_SIZE) != 0) {
    // 2 MiB pages away from the hint (taken, or the address space is laid
    // out otherwise, as under ThreadSanitizer) and off the segment alignment
    // that regions need: map them again over segment-aligned address space
    // (the aligned allocation's over-allocate-and-trim, without memory)
    _mi_prim_free(p, MI_HUGE_OS_PAGE_SIZE);
    p = NULL;
    void* const space = _mi_os_alloc_aligned_at(MI_HUGE_OS_PAGE_SIZE, MI_SEGMENT_SIZE, 0, false, false, NULL, NULL);
    if (space == NULL) { *err = ENOMEM; return NULL; }
    *err = _mi_prim_alloc_huge_os_pages(space, MI_HUGE_OS_PAGE_SIZE, *page_size, true, &p);
    if (*err != 0) { _mi_os_free_ex(space, MI_HUGE_OS_PAGE_SIZE, 0); return NULL; }
    mi_stat_decrease(NULL, reserved, MI_HUGE_OS_PAGE_SIZE);   // (counted again below, as huge pages)
  }
  mi_stat_increase(NULL, reserved, MI_HUGE_OS_PAGE_SIZE);
  mi_stat_increase(NULL, committed, MI_HUGE_OS_PAGE_SIZE);
  if (numa_node >= 0) _mi_os_numa_prefer(p, MI_HUGE_OS_PAGE_SIZE, (size_t)numa_node);
  _mi_os_populate(p, MI_HUGE_OS_PAGE_SIZE);
  return p;
}

// ---------------------------------------------------------------------------
// NUMA
// ---------------------------------------------------------------------------

static _Atomic(size_t) mi_numa_detected;   // nodes the OS reports (0: not asked yet)

// Nodes in use: option use_numa_nodes if set, else what the OS reports (sysfs,
// read once).
size_t _mi_os_numa_node_count(void) {
  const long option = mi_option_get(mi_option_use_numa_nodes);
  if (option > 0) return (size_t)option;
  size_t count = mi_atomic_load_relaxed(&mi_numa_detected);
  if (count == 0) {
    count = _mi_prim_numa_node_count();
    if (count == 0) count = 1;
    mi_atomic_store_relaxed(&mi_numa_detected, count);
    _mi_verbose_message("numa nodes: %zu (detected)\n", count);
  }
  return count;
}

// The node of the calling thread's CPU, below the node count; 0 without a
// system call on a one-node machine.
size_t _mi_os_numa_node(void) {
  const size_t count = _mi_os_numa_node_count();
  if (count <= 1) return 0;
  return _mi_prim_numa_node() % count;
}

// Prefer `node` for the future pages of a range (best effort).
bool _mi_os_numa_prefer(void* addr, size_t size, size_t node) {
  const int err = _mi_prim_numa_prefer(addr, size, node);
  if (err != 0 && err != ENOSYS) {
    _mi_warning_message("cannot prefer NUMA node %zu for OS memory (error %d, address %p, size 0x%zx)\n", node, err, addr, size);
  }
  return (err == 0);
}
