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
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MI_TEST_API_UTIL_H
#define MI_TEST_API_UTIL_H

#include <mimalloc.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

namespace mitest {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t kHugeThreshold = 2 * MiB;  // blocks above this are "huge" (own segment)

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

inline size_t os_page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

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

// The C library's own malloc/free, looked up in libc itself so that an
// overriding malloc (static library with MI_OVERRIDE, or a preloaded one) is
// bypassed. Both are NULL if the lookup fails.
struct LibcMalloc {
  void* (*malloc_fn)(size_t) = nullptr;
  void (*free_fn)(void*) = nullptr;
};
inline LibcMalloc libc_malloc() {
  LibcMalloc m;
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libc == nullptr) return m;
  void* fm = dlsym(libc, "malloc");
  void* ff = dlsym(libc, "free");
  if (fm != nullptr && ff != nullptr) {
    m.malloc_fn = reinterpret_cast<void* (*)(size_t)>(fm);
    m.free_fn = reinterpret_cast<void (*)(void*)>(ff);
  }
  dlclose(libc);
  return m;
}

}  // namespace mitest

#endif  // MI_TEST_API_UTIL_H
