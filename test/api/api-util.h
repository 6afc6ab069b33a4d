/* ----------------------------------------------------------------------------
  api-util.h -- helpers shared by the API tests (test/api).

  The tests check behaviour through the public interface only. Three things
  need care when doing that from C++:

  * The allocation functions carry `malloc`, `alloc_size` and `alloc_align`
    attributes. With them the compiler may fold an alignment check or a
    "two blocks are distinct" check to a constant, or bound a write to the
    requested size (fortify). Every pointer that is checked or written over
    its whole usable size therefore goes through `opaque()` first, so the
    assertions can really fail.
  * Heap walks (`mi_heap_visit_blocks`) must not allocate while they run: the
    walk records into static buffers and only builds vectors afterwards.
  * Debug builds with padding make `mi_usable_size` return the exact
    requested size instead of the size-class size; tests that check size
    classes ask `usable_size_is_size_class()` first.

  Everything that differs between Linux and Windows is declared here, under
  "The operating system", and implemented in api-util.cpp (one
  implementation for each): memory mapped from the OS directly, what the OS
  says of an address (readable, its protection, resident), paths, the
  environment, the C library's own malloc, an address-space limit, and how
  a death test's child ended (a signal on Linux, an exit code on Windows).
  The test files are the same for both; a test of something only Linux has
  skips on Windows with `GTEST_SKIP() << "Linux only: <why>"`.
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MI_TEST_API_UTIL_H
#define MI_TEST_API_UTIL_H

#include <gtest/gtest.h>
#include <mimalloc.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(_WIN32)
#include <malloc.h>   // _alloca
#else
#include <alloca.h>
#endif

namespace mitest {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t kHugeThreshold = 2 * MiB;  // blocks above this are "huge" (own segment)

// ------------------------------------------------------
// The operating system (api-util.cpp)
// ------------------------------------------------------

#if defined(_WIN32)
constexpr bool kWindows = true;
#else
constexpr bool kWindows = false;
#endif

// The OS page size (sysconf; Windows: GetSystemInfo, 4 KiB).
size_t os_page_size();

// Private read-write memory mapped from the OS directly, not through
// mimalloc (mmap; Windows: VirtualAlloc, reserved and committed); nullptr if
// that fails. os_unmap takes what os_map gave, with the same size.
void* os_map(size_t size);
void os_unmap(void* p, size_t size);

// Can the byte at `p` be read without a fault? (Linux: write(2) from it to a
// pipe fails with EFAULT instead of faulting; Windows: VirtualQuery, committed
// and neither PAGE_NOACCESS nor a PAGE_GUARD page.)
bool os_readable(const void* p);

// The permissions of the mapping that holds `p` as /proc/self/maps writes
// them ("rw-p", "---p", "r-xp"), or "" if `p` is not mapped. (Windows,
// VirtualQuery: committed memory as its protection says, reserved memory and
// PAGE_NOACCESS as "---", then 'p' for private memory and images, 's' for
// mapped sections.)
std::string os_mapping_perms(const void* p);

// How many bytes of the whole pages inside [p, p+n) are resident (mincore;
// Windows: in the working set, QueryWorkingSetEx); SIZE_MAX if the OS cannot
// say.
size_t os_resident_bytes(const void* p, size_t n);

// Can the OS fault in a range at once (Linux 5.14 and later:
// MADV_POPULATE_WRITE)? Windows has no such call: always false there.
bool os_can_populate();

// The OS's own answer to "which absolute path is `path`" (realpath(3);
// Windows: _fullpath, and the file must exist, as realpath says), written to
// `out` (PATH_MAX bytes, as realpath's and mi_realpath's buffers); false if
// the path does not exist.
bool os_realpath(const char* path, char* out);

// An existing directory, spelled with "." and ".." in it: /usr/../usr/./lib
// on Linux, the system directory (C:\windows\system32\..\system32\.) on Windows.
std::string roundabout_dir_path();

// Set and remove a variable of the process's environment (setenv and
// unsetenv; Windows: _putenv_s, which keeps the C runtime's narrow and wide
// environments alike); false on failure.
bool os_setenv(const char* name, const char* value);
bool os_unsetenv(const char* name);

// Windows keeps a wide-character environment beside the narrow one (what
// mi_wdupenv_s reads); Linux has none.
constexpr bool kWideEnvironment = kWindows;

// Limit the process's address space to what it maps now plus `headroom`
// (setrlimit RLIMIT_AS, sized from /proc/self/statm); false, with the reason
// in `error`, on failure. Linux only: Windows' counterpart, a job object's
// memory limit, is accepted but not enforced under wine, where the Windows
// tests run (test-oom.cpp skips there), so it always fails on Windows.
bool os_limit_address_space(size_t headroom, std::string* error);

// A printf-like function's attribute. mingw-w64 checks formats against
// msvcrt's printf (no %zu) unless told that the C99 one is used, as the tests
// are compiled (__USE_MINGW_ANSI_STDIO: __MINGW_PRINTF_FORMAT is gnu_printf).
#if defined(__MINGW32__)
#define MITEST_PRINTF_FORMAT(fmt, args) __attribute__((format(__MINGW_PRINTF_FORMAT, fmt, args)))
#else
#define MITEST_PRINTF_FORMAT(fmt, args) __attribute__((format(printf, fmt, args)))
#endif

// Memory on the stack, as alloca (Windows: _alloca from <malloc.h>).
#if defined(_WIN32)
#define MITEST_ALLOCA(n) _alloca(n)
#else
#define MITEST_ALLOCA(n) alloca(n)
#endif

// How a death test's child ended: stopped by abort() (a secure build's stop
// on a misuse), or by a fault (an access to memory of no access). Linux:
// killed by SIGABRT or SIGSEGV. Windows has no such signals: the C runtime's
// abort() exits with code 3, and a fault ends the process with the
// exception's code, STATUS_ACCESS_VIOLATION (api-util.cpp keeps wine's
// debugger from starting first in a death test's child).
#if defined(_WIN32)
inline testing::ExitedWithCode ended_by_abort() { return testing::ExitedWithCode(3); }
inline testing::ExitedWithCode ended_by_fault() { return testing::ExitedWithCode(static_cast<int>(0xC0000005u)); }
#else
inline testing::KilledBySignal ended_by_abort() { return testing::KilledBySignal(SIGABRT); }
inline testing::KilledBySignal ended_by_fault() { return testing::KilledBySignal(SIGSEGV); }
#endif

// ------------------------------------------------------
// Hiding values from the optimiser
// ------------------------------------------------------

// Returns `p` unchanged, but the compiler can no longer see where it came from.
template <typename T>
inline T* opaque(T* p) {
#if defined(__GNUC__)
  __asm__ volatile("" : "+r"(p));
#endif
  return p;
}

// Returns `n` through a volatile so that huge constant sizes do not trigger
// -Walloc-size-larger-than and alignments are not seen as constants.
inline size_t dyn(size_t n) {
  volatile size_t v = n;
  return v;
}

// A size above PTRDIFF_MAX: must fail with EOVERFLOW.
inline size_t too_large_size() { return dyn((size_t)PTRDIFF_MAX + 1); }

// A size below PTRDIFF_MAX that no machine can map (2^57 bytes is more than any
// 64-bit virtual address space offers): must fail with ENOMEM.
inline size_t impossible_size() {
#if SIZE_MAX > 0xFFFFFFFFu
  return dyn((size_t)1 << 57);
#else
  return dyn((size_t)PTRDIFF_MAX);
#endif
}

inline bool is_aligned(const void* p, size_t alignment) {
  return ((uintptr_t)opaque(p) % alignment) == 0;
}

inline bool same_ptr(const void* p, const void* q) { return opaque(p) == opaque(q); }

// Secure builds (both profiles) serve malloc(0) from an area of no access
// outside every heap (MI_TEST_SECURE is the build's secure profile, from CMake).
inline bool secure_zero_area() {
#if defined(MI_TEST_SECURE) && (MI_TEST_SECURE >= 1)
  return true;
#else
  return false;
#endif
}

// ------------------------------------------------------
// Memory contents
// ------------------------------------------------------

// A non-zero byte pattern depending on position and seed. It repeats every
// 255 bytes (251 = -4 mod 255, coprime to 255), which lets fill and check work
// on whole periods with memcpy/memcmp (fast also in unoptimised test builds).
constexpr size_t kPatternPeriod = 255;

inline uint8_t pattern_byte(size_t i, unsigned seed) {
  return (uint8_t)(((i * 251u) + (seed * 17u)) % 255u + 1u);
}

inline void pattern_period(uint8_t (&period)[kPatternPeriod], unsigned seed) {
  for (size_t i = 0; i < kPatternPeriod; i++) period[i] = pattern_byte(i, seed);
}

inline void fill_pattern(void* p, size_t n, unsigned seed) {
  uint8_t period[kPatternPeriod];
  pattern_period(period, seed);
  uint8_t* b = opaque((uint8_t*)p);
  for (size_t i = 0; i < n; i += kPatternPeriod) memcpy(b + i, period, std::min(kPatternPeriod, n - i));
}

inline bool has_pattern(const void* p, size_t n, unsigned seed) {
  uint8_t period[kPatternPeriod];
  pattern_period(period, seed);
  const uint8_t* b = opaque((const uint8_t*)p);
  for (size_t i = 0; i < n; i += kPatternPeriod) {
    if (memcmp(b + i, period, std::min(kPatternPeriod, n - i)) != 0) return false;
  }
  return true;
}

inline void fill_bytes(void* p, uint8_t value, size_t n) { memset(opaque(p), value, n); }

// Index of the first non-zero byte in [p, p+n), or n if all are zero.
inline size_t first_nonzero(const void* p, size_t n) {
  static const uint8_t zeros[4096] = {0};
  const uint8_t* b = opaque((const uint8_t*)p);
  size_t i = 0;
  while (i < n) {
    const size_t chunk = std::min(sizeof(zeros), n - i);
    if (memcmp(b + i, zeros, chunk) != 0) {
      for (size_t j = i; j < i + chunk; j++) {
        if (b[j] != 0) return j;
      }
    }
    i += chunk;
  }
  return n;
}

inline bool is_zero(const void* p, size_t n) { return first_nonzero(p, n) == n; }

// ------------------------------------------------------
// Build variant
// ------------------------------------------------------

// True when mi_usable_size reports the size-class block size, as release builds
// do. Debug builds with padding report the exact requested size instead (the
// padding trailer sits right after it), so size-class expectations and
// "usable > requested" expectations only hold when this returns true.
inline bool usable_size_is_size_class() {
  void* p = mi_malloc(dyn(1));
  const size_t usable = mi_usable_size(p);
  mi_free(p);
  return usable != 1;
}

// Allocate `count` blocks of `size` bytes from the default heap, fill their whole
// usable area with garbage and free them again. A zeroing allocation of the same
// size class that follows will then (mostly) get recycled dirty memory.
inline void dirty_size_class(size_t size, size_t count) {
  std::vector<void*> blocks(count, nullptr);
  for (size_t i = 0; i < count; i++) {
    blocks[i] = mi_malloc(size);
    if (blocks[i] != nullptr) fill_bytes(blocks[i], 0xA5, mi_usable_size(blocks[i]));
  }
  for (size_t i = count; i > 0; i--) mi_free(blocks[i - 1]);
}

// Number of blocks to allocate so that a size class is exercised beyond one page.
inline size_t blocks_for(size_t size) {
  const size_t n = (256 * KiB) / (size == 0 ? 1 : size);
  return std::max<size_t>(4, std::min<size_t>(n, 512));
}

// ------------------------------------------------------
// Heap walks
// ------------------------------------------------------

struct HeapWalk {
  bool result = false;              // return value of mi_heap_visit_blocks
  size_t areas = 0;                 // visitor calls with block == NULL
  size_t area_used_total = 0;       // sum of area->used over all areas
  size_t problems = 0;              // blocks outside their area, wrong block size, count != area->used
  bool overflow = false;            // more blocks than the static buffer holds
  std::vector<void*> blocks;        // visited blocks, sorted
  std::vector<size_t> block_sizes;  // block size of each entry of `blocks`
  std::vector<size_t> area_block_sizes;

  bool contains(const void* p) const { return std::binary_search(blocks.begin(), blocks.end(), const_cast<void*>(p)); }
  size_t block_size_of(const void* p) const {
    auto it = std::lower_bound(blocks.begin(), blocks.end(), const_cast<void*>(p));
    if (it == blocks.end() || *it != p) return 0;
    return block_sizes[(size_t)(it - blocks.begin())];
  }
};

namespace detail {
constexpr size_t kMaxWalkBlocks = 1 << 16;
constexpr size_t kMaxWalkAreas = 1 << 12;
struct WalkState {
  void* blocks[kMaxWalkBlocks];
  size_t sizes[kMaxWalkBlocks];
  size_t area_sizes[kMaxWalkAreas];
  size_t nblocks;
  size_t nareas;
  size_t area_used_total;
  size_t problems;
  bool overflow;
  bool have_area;
  mi_heap_area_t area;       // copy of the current area
  size_t blocks_in_area;     // blocks visited in the current area
  long stop_after;           // stop (return false) after this many block calls; < 0: never
  size_t block_calls;
};
inline WalkState& walk_state() {
  static WalkState state;  // static: the walk must not allocate
  return state;
}
inline void close_area(WalkState& s, bool all_blocks) {
  if (s.have_area && all_blocks && s.blocks_in_area != s.area.used) s.problems++;
  s.have_area = false;
}
inline bool record_visit(const mi_heap_t*, const mi_heap_area_t* area, void* block, size_t block_size, void* arg) {
  WalkState& s = walk_state();
  const bool all_blocks = (arg != nullptr);
  if (area == nullptr) {
    s.problems++;
    return true;
  }
  if (block == nullptr) {
    close_area(s, all_blocks);
    s.have_area = true;
    s.area = *area;
    s.blocks_in_area = 0;
    if (s.nareas < kMaxWalkAreas) s.area_sizes[s.nareas] = area->block_size;
    s.nareas++;
    s.area_used_total += area->used;
    return true;
  }
  s.block_calls++;
  s.blocks_in_area++;
  if (!s.have_area || block_size != area->block_size) s.problems++;
  const uint8_t* start = (const uint8_t*)area->blocks;
  const uint8_t* b = (const uint8_t*)block;
  if (b < start || b + block_size > start + area->committed) s.problems++;
  if (s.nblocks < kMaxWalkBlocks) {
    s.blocks[s.nblocks] = block;
    s.sizes[s.nblocks] = block_size;
    s.nblocks++;
  }
  else {
    s.overflow = true;
  }
  if (s.stop_after >= 0 && (long)s.block_calls >= s.stop_after) return false;
  return true;
}
}  // namespace detail

// Walk `heap` with mi_heap_visit_blocks and record what is reported. With
// `all_blocks` the per-area checks (blocks inside the area, count == area->used)
// are done too. `stop_after` >= 0 makes the visitor return false after that
// many blocks.
inline HeapWalk walk_heap(const mi_heap_t* heap, bool all_blocks = true, long stop_after = -1) {
  detail::WalkState& s = detail::walk_state();
  s.nblocks = 0;
  s.nareas = 0;
  s.area_used_total = 0;
  s.problems = 0;
  s.overflow = false;
  s.have_area = false;
  s.blocks_in_area = 0;
  s.stop_after = stop_after;
  s.block_calls = 0;
  static int marker;  // non-NULL arg means "all blocks"
  const bool result = mi_heap_visit_blocks(heap, all_blocks, &detail::record_visit, all_blocks ? (void*)&marker : nullptr);
  if (stop_after < 0) detail::close_area(s, all_blocks);
  // only now allocate
  HeapWalk walk;
  walk.result = result;
  walk.areas = s.nareas;
  walk.area_used_total = s.area_used_total;
  walk.problems = s.problems;
  walk.overflow = s.overflow;
  std::vector<std::pair<void*, size_t>> pairs;
  pairs.reserve(s.nblocks);
  for (size_t i = 0; i < s.nblocks; i++) pairs.emplace_back(s.blocks[i], s.sizes[i]);
  std::sort(pairs.begin(), pairs.end());
  for (const auto& pr : pairs) {
    walk.blocks.push_back(pr.first);
    walk.block_sizes.push_back(pr.second);
  }
  walk.area_block_sizes.assign(s.area_sizes, s.area_sizes + std::min(s.nareas, detail::kMaxWalkAreas));
  return walk;
}

inline bool is_live_in(const mi_heap_t* heap, const void* p) { return walk_heap(heap).contains(p); }

// ------------------------------------------------------
// Heaps
// ------------------------------------------------------

// A fresh heap that is the thread's default heap for the lifetime of this
// object (so mi_malloc & co. allocate from it). Deleted afterwards (its live
// blocks migrate to the backing heap and stay valid).
class ScopedDefaultHeap {
 public:
  ScopedDefaultHeap() : heap_(mi_heap_new()), prev_(nullptr) {
    if (heap_ != nullptr) prev_ = mi_heap_set_default(heap_);
  }
  ~ScopedDefaultHeap() {
    if (heap_ != nullptr) {
      mi_heap_set_default(prev_);
      mi_heap_delete(heap_);
    }
  }
  ScopedDefaultHeap(const ScopedDefaultHeap&) = delete;
  ScopedDefaultHeap& operator=(const ScopedDefaultHeap&) = delete;
  mi_heap_t* get() const { return heap_; }

 private:
  mi_heap_t* heap_;
  mi_heap_t* prev_;
};

// ------------------------------------------------------
// Foreign memory (not from this allocator)
// ------------------------------------------------------

// The C library's own malloc/free, looked up in the C library itself so that
// an overriding malloc (static library with MI_OVERRIDE, or a preloaded one)
// is bypassed: libc.so.6 (dlsym), or on Windows the C runtime DLL the
// program uses (msvcrt.dll, or ucrtbase.dll; GetProcAddress). Both are NULL
// if the lookup fails.
struct LibcMalloc {
  void* (*malloc_fn)(size_t) = nullptr;
  void (*free_fn)(void*) = nullptr;
};
LibcMalloc libc_malloc();

}  // namespace mitest

#endif  // MI_TEST_API_UTIL_H
