/* ----------------------------------------------------------------------------
  segment-map.c -- which segment units of the address space start a segment.

  One bit per 4 MiB segment unit of the whole 64-bit user address space
  (MI_ADDRESS_BITS = 48: x86-64 hands out addresses below 2^47 and arm64
  below 2^48 unless a program asks for more with an address hint, which we
  never do), set while a segment of ours starts there. It answers "is this a
  segment of ours?" in constant time without dereferencing the address, which
  is what lets `free` and `mi_is_in_heap_region` reject foreign pointers. It
  is 8 MiB of zero-initialised .bss, touched only where segments live.

  A summary word has one bit per line of 64 map words (16 GiB of address
  space), set when a segment starts in that line and never cleared: visiting
  every segment (after fork) reads the 2 KiB summary and the few lines it
  points at, not 8 MiB.

  A segment the OS maps above the covered range is refused
  (_mi_segment_map_allocated_at returns false and the segment layer gives the
  memory back): every block address then fits in MI_ADDRESS_BITS, which the
  page's thread_free word relies on too (it keeps a count in the bits above).

  Alternatives rejected: a linear scan of the regions (1.6: slow, and blind
  to segments mapped straight from the OS), a hash set (needs a lock or a
  lock-free table for a bit of information per 4 MiB).
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

#define MI_SEGMENT_MAP_WORDS  (MI_SEGMENT_MAP_BITS / MI_INTPTR_BITS)
#define MI_SEGMENT_MAP_LINE   (MI_INTPTR_BITS)   // map words per summary bit
#define MI_SEGMENT_MAP_LINES  (MI_SEGMENT_MAP_WORDS / MI_SEGMENT_MAP_LINE)

static _Atomic(uintptr_t) mi_segment_map[MI_SEGMENT_MAP_WORDS];
static _Atomic(uintptr_t) mi_segment_map_summary[(MI_SEGMENT_MAP_LINES + MI_INTPTR_BITS - 1) / MI_INTPTR_BITS];

// The map word and bit of a segment address; false above the covered range.
static bool mi_segment_map_index(const void* segment, size_t* idx, uintptr_t* bit) {
  const uintptr_t unit = (uintptr_t)segment >> MI_SEGMENT_SHIFT;
  if (unit >= MI_SEGMENT_MAP_BITS) return false;
  *idx = unit / MI_INTPTR_BITS;
  *bit = (uintptr_t)1 << (unit % MI_INTPTR_BITS);
  return true;
}

bool _mi_segment_map_allocated_at(const mi_segment_t* segment) {
  mi_assert_internal(((uintptr_t)segment & MI_SEGMENT_MASK) == 0);
  size_t idx; uintptr_t bit;
  if (!mi_segment_map_index(segment, &idx, &bit)) return false;
  const size_t line = idx / MI_SEGMENT_MAP_LINE;
  _Atomic(uintptr_t)* const summary = &mi_segment_map_summary[line / MI_INTPTR_BITS];
  const uintptr_t sbit = (uintptr_t)1 << (line % MI_INTPTR_BITS);
  if ((mi_atomic_load_relaxed(summary) & sbit) == 0) mi_atomic_or_acq_rel(summary, sbit);   // (once per line)
  mi_atomic_or_acq_rel(&mi_segment_map[idx], bit);
  return true;
}

void _mi_segment_map_freed_at(const mi_segment_t* segment) {
  size_t idx; uintptr_t bit;
  if (mi_segment_map_index(segment, &idx, &bit)) mi_atomic_and_acq_rel(&mi_segment_map[idx], ~bit);
}

bool _mi_segment_map_contains(const void* segment) {
  size_t idx; uintptr_t bit;
  if (((uintptr_t)segment & MI_SEGMENT_MASK) != 0) return false;
  if (!mi_segment_map_index(segment, &idx, &bit)) return false;
  return ((mi_atomic_load_acquire(&mi_segment_map[idx]) & bit) != 0);
}

// Call `fn` for every segment in the map. Only safe where no other thread can
// free segments meanwhile (the child of a fork runs it with one thread).
void _mi_segment_map_visit(void (*fn)(mi_segment_t* segment, void* arg), void* arg) {
  for (size_t s = 0; s < sizeof(mi_segment_map_summary) / sizeof(mi_segment_map_summary[0]); s++) {
    uintptr_t lines = mi_atomic_load_acquire(&mi_segment_map_summary[s]);
    while (lines != 0) {
      const size_t line = s * MI_INTPTR_BITS + mi_ctz(lines);
      lines &= lines - 1;
      for (size_t idx = line * MI_SEGMENT_MAP_LINE; idx < (line + 1) * MI_SEGMENT_MAP_LINE; idx++) {
        uintptr_t map = mi_atomic_load_acquire(&mi_segment_map[idx]);
        while (map != 0) {
          const uintptr_t unit = idx * MI_INTPTR_BITS + mi_ctz(map);
          map &= map - 1;
          fn((mi_segment_t*)(unit << MI_SEGMENT_SHIFT), arg);
        }
      }
    }
  }
}
