/* ----------------------------------------------------------------------------
  mimalloc-types.h -- every core structure, with its invariants next to its
  fields, and every build variant derived in one place.

  Reading order: build variants, constants, blocks, pages, segments, queues,
  heaps, thread-local data. The numbers are those of mimalloc 1.6; see
  docs/design.md for where and why we deviate.
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MIMALLOC_TYPES_H
#define MIMALLOC_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "mimalloc-atomic.h"

// ------------------------------------------------------
// Build variants (derived here and nowhere else)
// ------------------------------------------------------

// MI_DEBUG: 0 = release (no checks, a few always-on safety tests);
//           1 = cheap assertions (argument/result sanity);         cost ~ a few %
//           2 = internal assertions (default for Debug builds);     cost ~ 2x
//           3 = whole-structure validators (page/segment/heap);     cost ~ 10x+, used in CI
#if !defined(MI_DEBUG)
  #if !defined(NDEBUG) || defined(_DEBUG)
    #define MI_DEBUG 2
  #else
    #define MI_DEBUG 0
  #endif
#endif

// MI_SECURE: the secure build's profile (docs/secure.md), set by CMake:
//   0 = off;
//   1 = ON, the secure mode with a small penalty (aim: 1.10x release): guard
//       pages, encoded free lists checked on use, random allocation order,
//       no immediate reuse, every freed pointer checked (the segment map, a
//       block's start), double frees caught by the link probe, memcpy/
//       memmove/memset bounded by the block, malloc(0) of no access; no
//       per-block trailer; the process stops at a detected misuse;
//   2 = FULL, all of ON and every check we have: the trailer word (a block's
//       state and exact size: its canary checked on free, any double free),
//       freed memory zeroed and checked on reuse, the neighbours' canaries
//       checked on every free, C++ delete/delete[] and sized-delete checks
//       (aim: 1.50x release).
// Every secure feature below is derived from it here, and only the feature
// macros are tested in the code (0/1 values: usable in `if` as in `#if`).
#if !defined(MI_SECURE)
  #define MI_SECURE 0
#endif
#if (MI_SECURE < 0) || (MI_SECURE > 2)
  #error "MI_SECURE must be 0 (off), 1 (ON) or 2 (FULL)"
#endif
#define MI_SECURE_FULL    (MI_SECURE >= 2)
#if (MI_SECURE > 0)
  #define MI_SECURE_NAME  (MI_SECURE_FULL ? "FULL" : "ON")   // MIMALLOC_VERBOSE prints it
#endif

// The features below that cost the most can be switched off one by one to
// measure what each costs (e.g. CMAKE_C_FLAGS=-DMI_SECURE_RANDOM=0 in a
// secure build; docs/secure.md has the figures). Such builds are for
// measuring only: CI builds and tests the two profiles as derived here.

// MI_SECURE_GUARDS: a guard page (no access) after the segment header and at
// the end of the segment; headers rounded to whole OS pages; no pinned
// (large OS page) memory for segments. MI_SECURE_PAGE_GUARDS: a guard at the
// end of every page of a segment too. Cost: an OS page per guarded page, an
// mprotect per page claimed in a segment's life.
#if !defined(MI_SECURE_GUARDS)
  #define MI_SECURE_GUARDS  (MI_SECURE > 0)
#endif
#if !defined(MI_SECURE_PAGE_GUARDS)
  #define MI_SECURE_PAGE_GUARDS  (MI_SECURE > 0)
#endif

// MI_SECURE_RANDOM: fresh blocks threaded in random order (a page extended by
// at least MI_SECURE_MIN_EXTEND blocks, so that there is something to
// shuffle), the block freed last never the next one out, emptied pages keep
// their order, ChaCha20 as the generator. Cost: locality of allocation order
// (real programs pay most of it, docs/secure.md) and memory touched sooner.
#if !defined(MI_SECURE_RANDOM)
  #define MI_SECURE_RANDOM  (MI_SECURE > 0)
#endif
#if !defined(MI_SECURE_MIN_EXTEND)
  #define MI_SECURE_MIN_EXTEND  (32)
#endif

// MI_SECURE_RANDOM_EXTEND: when a page has both freed blocks and room to
// grow, a coin decides whether it grows first: whether the next block is a
// recycled one cannot be predicted. Cost: a random bit per refill of a
// page's free list (63 of them per draw of the generator), pages grown to
// their full size sooner.
#if !defined(MI_SECURE_RANDOM_EXTEND)
  #define MI_SECURE_RANDOM_EXTEND  MI_SECURE_RANDOM
#endif

// MI_SECURE_CLEAR_LINK: a block's (encoded) free-list link word is cleared
// before the block is handed out: no link (and so nothing of the page's keys)
// reaches the program (where the link is not in the trailer).
#define MI_SECURE_CLEAR_LINK  (MI_SECURE > 0)

// MI_SECURE_STOP: a detected heap misuse stops the process (abort) unless
// MIMALLOC_SECURE_CONTINUE is set or an error handler is registered.
#define MI_SECURE_STOP    (MI_SECURE > 0)

// MI_PADDING: every block gets an 8-byte trailer (its state: live with the
// distance to the user data's end, or free; canary fill after the user
// data) checked on free: double frees, pointers that are not a block's
// start, byte-precise overflows; mi_usable_size is exact. On in debug
// builds and FULL (CMake MI_PADDING; FULL without it is a configure error);
// not in ON, whose budget it does not fit (a cache line the program never
// touched read on every free: 1.24-1.37x release with it). Cost: 8 bytes
// per block, a store on malloc, a load and compare on free.
#if !defined(MI_PADDING)
  #if (MI_DEBUG >= 1) || MI_SECURE_FULL
    #define MI_PADDING 1
  #else
    #define MI_PADDING 0
  #endif
#endif
#if MI_SECURE_FULL && (MI_PADDING == 0)
  #error "the secure profile FULL needs MI_PADDING (its trailer): build with MI_PADDING on"
#endif

// MI_FREE_CHECK_PTR: a freed pointer is checked against the segment map before
// anything is read at it, and to lie on a block start in its page's blocks
// (secure builds, and debug builds with trailers). The page keeps its block
// area's start and the offset of its last block for it (and, without the
// trailer, a divisibility constant for the block-start test: one multiply).
#if (MI_PADDING > 0) || (MI_SECURE > 0)
  #define MI_FREE_CHECK_PTR 1
#endif

// MI_CHECK_NEIGHBOURS: the free of a block also checks the canaries of the
// blocks below and above it (an overflow into a neighbour's slack, an
// underflow) (FULL and debug builds). Cost: two trailer loads and fill
// compares per free (within the quick suite's spread in FULL; docs/secure-costs.md).
// MI_CHECK_NEIGHBOURS=0 leaves them out (for measuring).
#if !defined(MI_CHECK_NEIGHBOURS)
  #define MI_CHECK_NEIGHBOURS  (MI_SECURE_FULL || (MI_DEBUG > 0 && MI_PADDING > 0))
#endif

// MI_CHECK_DELETE: C++ new[] marks its blocks, so that delete of a new[]
// block, delete[] of a new block and a sized delete with the wrong size are
// reported (FULL and debug builds; not ON: delete of a new[] block of a
// trivially destructible type is common in real programs).
#define MI_CHECK_DELETE   (MI_SECURE_FULL || (MI_SECURE == 0 && MI_PADDING > 0))

// MI_ZERO_AREA: malloc(0) returns a unique address in an area of no access
// (a read or write through it faults), freed as usual (secure builds,
// whose free checks the segment map before it reads anything at a pointer).
#if (MI_SECURE > 0)
  #define MI_ZERO_AREA 1
#endif

// MI_CHECKED_MEMCPY: the overriding secure library exports memcpy, memmove
// and memset that check a destination inside one of our blocks (glibc:
// they copy through its checking entry points). MI_SECURE_MEMCPY=0 leaves
// them out (for measuring).
#if !defined(MI_SECURE_MEMCPY)
  #define MI_SECURE_MEMCPY  (MI_SECURE > 0)
#endif
#if MI_SECURE_MEMCPY && defined(MI_ZERO_AREA) && defined(MI_MALLOC_OVERRIDE) && defined(__GLIBC__)
  #define MI_CHECKED_MEMCPY 1
#endif

// MI_WIN_REDIRECT: the override DLL on Windows patches the C runtime DLLs'
// malloc family to jump to ours (alloc-override-win.c).
#if defined(_WIN32) && defined(MI_SHARED_LIB) && defined(MI_MALLOC_OVERRIDE)
  #define MI_WIN_REDIRECT 1
#endif

// MI_ZERO_ON_FREE: a freed block is zeroed and, when it is handed out again,
// checked to still read zero (its link is in its trailer): freed memory reads as zero,
// and a write after free is caught when the block is reused (blocks over
// 256 bytes: zeroed and checked in their head and last word, and whole one
// free in about 8; secure.h mi_block_zero_freed)
// (FULL; small and medium blocks, up to
// MI_MEDIUM_OBJ_SIZE_MAX; calloc then needs no memset for those of up to 256 bytes).
// MI_SECURE_ZERO=0 leaves it out of FULL (for measuring).
#if !defined(MI_SECURE_ZERO)
  #define MI_SECURE_ZERO  MI_SECURE_FULL
#endif
#if MI_SECURE_ZERO && MI_SECURE_FULL
  #define MI_ZERO_ON_FREE 1
#endif

// MI_TRAILER_LINK: a free block's free-list link is kept in its trailer (the
// free state, with the link in its high half), not in its first word, so
// that all of a freed block can read zero (MI_ZERO_ON_FREE; debug builds and
// ON, whose trailers have no such need, keep the link in the first word,
// where a write after free damages it and the list walk reports it).
#if defined(MI_ZERO_ON_FREE)
  #define MI_TRAILER_LINK 1
#endif

// MI_CHECKED_FAST_PATHS: the secure profile ON (without the neighbour
// checks and the link in the trailer) has malloc and free fast paths that
// make no call on the way, only tail calls to a checked version for
// whatever is out of the ordinary: no registers to save and restore on
// every malloc and free (alloc.c, secure.c).
#if ((MI_PADDING > 0) || (MI_SECURE > 0)) && !MI_CHECK_NEIGHBOURS && !defined(MI_TRAILER_LINK) && (MI_DEBUG == 0)
  #define MI_CHECKED_FAST_PATHS 1
#endif

// MI_TSAN: built with ThreadSanitizer (CMake MI_DEBUG_TSAN). The checks that
// read a neighbour block's fill while another thread may free (and fill or
// zero) it are left out: benign races, on purpose, that the sanitizer reports.
#if defined(__SANITIZE_THREAD__)
  #define MI_TSAN 1
#elif defined(__has_feature)
  #if __has_feature(thread_sanitizer)
    #define MI_TSAN 1
  #endif
#endif

// MI_FULL_FAST_PATH: the owner's free in FULL checks everything it checks
// elsewhere (its own trailer and fill, both neighbours) in one leaf function
// that changes nothing until every check passed and makes no call but the
// zeroing of blocks above 32 bytes; whatever fails goes to the generic path,
// which checks again and reports (secure.c, mi_free_fast_full; not in debug
// builds, whose free fills freed blocks, nor under ThreadSanitizer, whose
// build skips the neighbours' fill).
#if MI_SECURE_FULL && (MI_DEBUG == 0) && defined(MI_TRAILER_LINK) && !defined(MI_TSAN)
  #define MI_FULL_FAST_PATH 1
#endif

// MI_ENCODE_FREELIST: free-list links are stored encoded with per-page keys
// and checked on decode (corruption detection; the trailer's key is made of
// the same keys). On in debug and secure builds (with the trailer).
// Cost: a few instructions per malloc and free, 16 bytes per page descriptor.
#if (MI_SECURE > 0) || (MI_DEBUG >= 1) || (MI_PADDING > 0)
  #define MI_ENCODE_FREELIST 1
#endif

// MI_DOUBLE_FREE_PROBE: builds with encoded lists and no trailer (ON, debug
// builds without padding): a freed block whose first word decodes as a link
// of its page (a free block's always does; live data next to never) is looked
// up in the page's lists, and found there is a double free (secure.c).
#if defined(MI_ENCODE_FREELIST) && (MI_PADDING == 0) && ((MI_SECURE > 0) || (MI_DEBUG > 0))
  #define MI_DOUBLE_FREE_PROBE 1
#endif

// Debug fill patterns: fresh (uninitialised) memory, freed memory, padding.
#define MI_DEBUG_UNINIT     (0xD0)
#define MI_DEBUG_FREED      (0xDF)
#define MI_DEBUG_PADDING    (0xDE)

// MI_STAT: 1 = the slow-path counters (always on); 2 = also per size class and
// per allocation (debug builds; every malloc/free updates thread-local counters).
#if !defined(MI_STAT)
  #if (MI_DEBUG > 0)
    #define MI_STAT 2
  #else
    #define MI_STAT 1
  #endif
#endif


// MI_INTPTR_SIZE: the word size; every block size is a multiple of it.
#if INTPTR_MAX == INT64_MAX
  #define MI_INTPTR_SHIFT (3)
#elif INTPTR_MAX == INT32_MAX
  #define MI_INTPTR_SHIFT (2)
#else
  #error platform must be 32 or 64 bits
#endif
#define MI_INTPTR_SIZE  (1 << MI_INTPTR_SHIFT)
#define MI_INTPTR_BITS  (MI_INTPTR_SIZE * 8)

#define KiB     ((size_t)1024)
#define MiB     (KiB*KiB)
#define GiB     (MiB*KiB)

// A structure that starts a cache line (and fills whole ones).
#define MI_CACHE_LINE  (64)
#if defined(_MSC_VER)
  #define mi_decl_cache_aligned  __declspec(align(64))
#else
  #define mi_decl_cache_aligned  __attribute__((aligned(MI_CACHE_LINE)))
#endif

// ------------------------------------------------------
// Main constants
// ------------------------------------------------------

#define MI_SMALL_PAGE_SHIFT               (13 + MI_INTPTR_SHIFT)      // 64 KiB
#define MI_MEDIUM_PAGE_SHIFT              ( 3 + MI_SMALL_PAGE_SHIFT)  // 512 KiB (the medium size classes end at a quarter of it)
#define MI_SEGMENT_SHIFT                  ( 3 + MI_MEDIUM_PAGE_SHIFT) // 4 MiB
#define MI_SLICE_SHIFT                    ( MI_SMALL_PAGE_SHIFT)      // 64 KiB: pages of medium and large blocks are runs of slices

#define MI_SEGMENT_SIZE                   ((size_t)1 << MI_SEGMENT_SHIFT)
#define MI_SEGMENT_MASK                   ((uintptr_t)MI_SEGMENT_SIZE - 1)

#define MI_SMALL_PAGE_SIZE                ((size_t)1 << MI_SMALL_PAGE_SHIFT)
#define MI_MEDIUM_PAGE_SIZE               ((size_t)1 << MI_MEDIUM_PAGE_SHIFT)
#define MI_SLICE_SIZE                     ((size_t)1 << MI_SLICE_SHIFT)
#define MI_SLICE_PAGE_BLOCKS              (4)         // medium blocks a page of slices is sized for (more where the last slice has room)

#define MI_SMALL_PAGES_PER_SEGMENT        (MI_SEGMENT_SIZE/MI_SMALL_PAGE_SIZE)   // 64
#define MI_SLICES_PER_SEGMENT             (MI_SEGMENT_SIZE/MI_SLICE_SIZE)        // 64

// Lean pages (segment.c, "Lean pages"): a heap's first page of a small size
// (blocks up to 16 KiB) is a slice of 16 KiB (two where one block does not
// fit), in a shared *lean segment* of 64 such slices (1 MiB at the start of a
// 4 MiB unit). Not in builds with guard pages, where a page's guard would
// take a quarter of it.
#define MI_LEAN_PAGE_SHIFT                (14)        // 16 KiB
#if !defined(MI_LEAN_PAGES)
#define MI_LEAN_PAGES                     (!MI_SECURE_GUARDS)
#endif

#define MI_SMALL_OBJ_SIZE_MAX             (MI_SMALL_PAGE_SIZE/4)   // 16 KiB
#define MI_MEDIUM_OBJ_SIZE_MAX            (MI_MEDIUM_PAGE_SIZE/4)  // 128 KiB
#define MI_LARGE_OBJ_SIZE_MAX             (MI_SEGMENT_SIZE/2)      // 2 MiB
#define MI_LARGE_OBJ_WSIZE_MAX            (MI_LARGE_OBJ_SIZE_MAX/MI_INTPTR_SIZE)
#define MI_HUGE_OBJ_SIZE_MAX              (2*MI_INTPTR_SIZE*MI_SEGMENT_SIZE)  // 64 MiB: huge vs giant

#define MI_HUGE_SEGMENT_ROUND             (256*KiB)   // huge segments are rounded to this
#define MI_MAX_ALIGN_SIZE                 16          // every block > 8 bytes is 16-aligned
#define MI_ALIGNMENT_MAX_IN_SEGMENT       (MI_SEGMENT_SIZE/2)  // larger alignments get their own segment

#define MI_BIN_HUGE                       (73U)   // queue of pages holding one huge block
#define MI_BIN_FULL                       (MI_BIN_HUGE+1)  // queue of pages without free blocks

#define MI_SMALL_WSIZE_MAX                (128)
#define MI_SMALL_SIZE_MAX                 (MI_SMALL_WSIZE_MAX*sizeof(void*))

// The padding trailer of a block (MI_PADDING): one word, the block's encoded
// address xor its state (see mi_trailer_* in mimalloc-internal.h).
typedef struct mi_padding_s {
  uint64_t word;
} mi_padding_t;
#if (MI_PADDING > 0)
  #define MI_PADDING_SIZE   (sizeof(mi_padding_t))
  #define MI_PADDING_WSIZE  ((MI_PADDING_SIZE + MI_INTPTR_SIZE - 1) / MI_INTPTR_SIZE)
#else
  #define MI_PADDING_SIZE   (0)
  #define MI_PADDING_WSIZE  (0)
#endif
#define MI_PAGES_DIRECT                   (MI_SMALL_WSIZE_MAX + MI_PADDING_WSIZE + 1)

// Stored as the page's (32-bit) block size for huge blocks of 64 MiB or more
// and for big-aligned blocks: their size is then derived from the segment.
#define MI_HUGE_BLOCK_SIZE                ((uint32_t)MI_HUGE_OBJ_SIZE_MAX)

#define MI_MAX_EXTEND_SIZE                (4*KiB)   // extend a free list by one OS page worth at most
#define MI_MIN_EXTEND                     (MI_SECURE_RANDOM ? MI_SECURE_MIN_EXTEND : 1)   // (secure builds: something to shuffle)

#define MI_RETIRE_CYCLES_SMALL            (8)       // retire delay (fresh-page requests of the heap) for blocks <= 16 KiB
#define MI_RETIRE_CYCLES_LARGE            (2)       // and for larger blocks
#define MI_RETIRE_CYCLES_LONG             (64)      // for small and medium sizes that came back soon after their retired page expired
#define MI_RECYCLES                       (64)      // free lists refilled without the generic path's housekeeping between its runs (_mi_page_refill)
#define MI_RETIRE_MAX_SIZE                (512*KiB) // page area a heap keeps retired at most (the last page of a size class always may be); 1 MiB raised bench batch peak RSS by a segment

#define MI_PURGE_DELAY_MAX                ((int64_t)24 * 3600 * 1000)  // ms (a day): the range of reset_delay, and the cap of a value set at run time
#define MI_ABANDON_AWAIT_MAX              (4096)    // yields a remote free of a large block waits for the owner thread abandoning its page (free.c)

// Regions: the process-wide memory layer.
#define MI_REGION_BLOCKS                  (MI_INTPTR_BITS)                 // 64 segment blocks each
#define MI_REGION_SIZE                    (MI_SEGMENT_SIZE * MI_REGION_BLOCKS)  // 256 MiB
#define MI_REGION_MAX                     (1024)                           // 256 GiB of region memory
#define MI_REGION_MAX_OBJ_BLOCKS          (MI_REGION_BLOCKS/4)             // 16 blocks = 64 MiB
#define MI_HUGE_OS_PAGE_SIZE              ((size_t)1 << 30)                // 1 GiB: the unit of huge page reservations

// The user address space: x86-64 hands out addresses below 2^47 and arm64
// below 2^48 (unless asked for more with an address hint, which we never do).
// The segment map covers it (one bit per segment unit), a segment mapped
// above it is refused, and so every block address fits in these bits.
#if (MI_INTPTR_SIZE == 8)
#define MI_ADDRESS_BITS                   (48)
#else
#define MI_ADDRESS_BITS                   (32)
#endif
#define MI_SEGMENT_MAP_BITS               ((size_t)1 << (MI_ADDRESS_BITS - MI_SEGMENT_SHIFT))

// The owner id of segments of threads that vanished in a fork (a thread id is
// a thread control block address: never 1).
#define MI_THREAD_ID_VANISHED             ((uintptr_t)1)

// The owner id of the heap and segments of a thread that ended and left them
// for the next thread that starts (init.c, "Orphan heaps"; never a thread id).
#define MI_THREAD_ID_ORPHAN               ((uintptr_t)2)

// The owner id of the shared segments, whose pages belong to the heaps that
// hold them (segment-shared.c; never a thread id).
#define MI_THREAD_ID_SHARED               ((uintptr_t)3)

// Thread metadata blocks kept for reuse by new threads, and orphan heaps.
#define MI_TD_CACHE_SIZE                  (32)
#define MI_ORPHAN_MAX                     (32)


// ------------------------------------------------------
// Blocks and the delayed-free state
// ------------------------------------------------------

// A free block: its first word links to the next free block.
typedef struct mi_block_s {
  uintptr_t next;   // read and written only through mi_block_next / mi_block_set_next
} mi_block_t;

// Delayed-free state in the low 2 bits of page->xthread_free (architecture §8).
typedef enum mi_delayed_e {
  MI_USE_DELAYED_FREE   = 0, // the owner does not scan the page (full queue, or one block): the next remote free goes to the owner heap's delayed list
  MI_DELAYED_FREEING    = 1, // transient: a remote thread is pushing on the heap's delayed list
  MI_NO_DELAYED_FREE    = 2, // push to thread_free (the page is not full, or a block of it is on the delayed list)
  MI_NEVER_DELAYED_FREE = 3  // sticky: the owner heap is going away; always push to thread_free
} mi_delayed_t;

typedef uintptr_t mi_thread_free_t;   // block pointer | delayed state

// The flags byte tested as a whole by `free`: non-zero sends it to the generic
// path. Written only by the owner (whole-byte stores), except that the heap
// profiler may clear HAS_SAMPLED from any thread (atomic and, under its lock);
// read by any thread (relaxed atomic byte: the bit a remote reader needs,
// has_aligned, cannot change while it holds a live block of the page).
#define MI_PAGE_IN_FULL      (0x01)   // the page sits in the full queue
#define MI_PAGE_HAS_ALIGNED  (0x02)   // some block was handed out as an aligned interior pointer
#define MI_PAGE_HAS_SAMPLED  (0x04)   // some block is tracked by the heap profiler (prof.c): its free must tell it
#define MI_PAGE_CONTINUATION (0x08)   // a slice of a large page after its first (its `capacity`: the distance back to the first)
#define MI_PAGE_CHECK_SLOW   (0x10)   // checked fast paths (MI_CHECKED_FAST_PATHS, MI_FULL_FAST_PATH): blocks those paths cannot check (huge, or no room for a trailer)
typedef _Atomic(uint8_t) mi_page_flags_t;

// ------------------------------------------------------
// Pages
// ------------------------------------------------------

// A page: a run of equal-sized blocks inside a segment. 64 bytes on 64-bit in
// release builds; 88 with the block area's start and the free-list keys
// (secure and debug builds), padded to 128. Aligned to a cache line: the
// pages of one segment belong to different threads (segments are shared),
// and each thread writes its page's descriptor on every malloc and free;
// descriptors that shared a line made two threads' fast paths fight over it
// (`sh6bench 2` took 3x as long, `larson 2` 2.5x).
// Invariants (owner thread's view, after collecting thread_free):
//   used + |free| + |local_free| == capacity <= reserved;
//   used counts blocks handed out (including those sitting in thread_free);
//   used == 0 means every block is free (only reliable after a collect).
// Only the owner touches free, local_free, used, capacity and the queue links;
// other threads only CAS xthread_free and read xheap / xblock_size.
typedef struct mi_decl_cache_aligned mi_page_s {
  // segment-level state
  uint8_t  segment_idx;         // index of this page in segment->pages
  uint8_t  segment_in_use:1;    // claimed by a heap (else available in its segment)
  uint8_t  is_purged:1;         // memory was purged; contents are zero
  uint8_t  is_committed:1;      // memory is accessible
  uint8_t  is_zero_init:1;      // memory was known zero when the page was initialised
  uint8_t  retire_counted:1;    // retired, and counted in its heap's page_retired_size (owner only)
  uint16_t capacity;            // blocks threaded into free lists at least once
  uint16_t reserved;            // blocks that fit in the page area
  mi_page_flags_t xflags;       // MI_PAGE_IN_FULL | MI_PAGE_HAS_ALIGNED | MI_PAGE_HAS_SAMPLED | MI_PAGE_CONTINUATION | MI_PAGE_CHECK_SLOW
  uint8_t  is_zero:1;           // blocks on `free` are zero except their link word
  uint8_t  retire_expire:7;     // retire countdown (0 = not retired)

  mi_block_t* free;             // allocation list (owner only)
  #if defined(MI_ENCODE_FREELIST)
  uintptr_t keys[2];            // per-page keys of the encoded free lists
  #endif
  uint32_t used;                // blocks in use
  uint32_t xblock_size;         // block size, or MI_HUGE_BLOCK_SIZE (then derive from the segment)
  mi_block_t* local_free;       // blocks freed by the owner (owner only)
  _Atomic(mi_thread_free_t) xthread_free;  // blocks freed by other threads | delayed state
  _Atomic(uintptr_t) xheap;     // owning heap, or 0 when abandoned

  union {
    struct {
      struct mi_page_s* next;   // heap queue links (a page in use)
      struct mi_page_s* prev;
    };
    int64_t purge_expire;       // an unused page whose purge is pending: when it is due (ms)
  };
  #if defined(MI_FREE_CHECK_PTR)
  uint8_t* page_start;          // the block area (checked builds check every freed pointer against it)
  uint32_t block_last;          // the offset of its last block, (reserved - 1) x block size (the free fast path's range test)
  #endif
  #if (MI_PADDING > 0)
  bool     has_front_canary;    // the word before the first block is a canary (read by other threads' frees:
                                // a byte of its own, apart from the owner's bitfields above)
  #elif defined(MI_FREE_CHECK_PTR)
  uint64_t block_divisor;       // 2^64 / block size, rounded up: an offset below 2^32 is a block's start
                                // when offset * block_divisor (mod 2^64) < block_divisor (one multiply)
  #endif
} mi_page_t;

typedef enum mi_page_kind_e {
  MI_PAGE_SLICES = 1,  // pages of slices (segment.c): 64 KiB slices (one slice of blocks <= 16 KiB, four or more blocks of 16-128 KiB, or one block of 128 KiB-2 MiB), or in a lean segment 16 KiB ones (a heap's first page of a small size)
  MI_PAGE_HUGE        // one page of any size holding one block
} mi_page_kind_t;

// ------------------------------------------------------
// Segments
// ------------------------------------------------------

// What a huge block's memory tells about how the program uses its huge
// blocks (segment.c, "Fresh huge blocks").
typedef enum mi_huge_fresh_e {
  MI_HUGE_REUSED,           // not fresh memory: nothing to learn
  MI_HUGE_PROBE,            // fresh, left to fault on touch: measured whole when freed
  MI_HUGE_POPULATED,        // fresh, populated whole: nothing to measure
  MI_HUGE_HEAD_POPULATED    // fresh, its head populated: the rest is measured when freed
} mi_huge_fresh_t;

// Where a segment's memory came from (for freeing it).
typedef struct mi_memid_s {
  uint32_t region_idx;          // region index + 1, or 0 when mapped straight from the OS
  uint32_t block_idx;           // first 4 MiB block inside the region
} mi_memid_t;

// A segment: 4 MiB aligned, header + page descriptors at the start.
// Invariants: used <= capacity; abandoned <= used; thread_id == 0 iff abandoned;
// free_mask has bit i iff !pages[i].segment_in_use.
// The header is only touched by the owner, except thread_id (atomic, CAS by
// the thread that frees an abandoned huge block), the fields read-only after creation (kind, shift, sizes, memid),
// and the page-level state a trimmer may purge (segment-walk.c, the trim): free_mask,
// the committed and purged bits of free pages, and trim_purged are read and
// written only while holding trim_lock (the owner takes it around claims,
// clears and purges of pages; any thread's trim around its purge).
// (Packed so that a huge segment's header stays within 256 bytes in release
// builds, its page descriptor included: the big-alignment offsets depend on
// it. The descriptors start at a cache line: 192 bytes in.)
typedef struct mi_segment_s {
  mi_memid_t memid;             // where the memory came from
  size_t     mem_size;          // bytes mapped (>= segment_size for big-aligned segments)
  bool       mem_is_pinned;     // pinned memory (fixed large or huge OS pages): never purged or protected
  bool       mem_is_committed;  // the whole segment is accessible
  uint8_t    huge_fresh;        // huge: a mi_huge_fresh_t
  uint8_t    huge_pending;      // huge: 1 + the slot of its pending purge (another thread freed the block; written before it hands the block back), 0: none
  bool       guarded;           // secure builds: the header's and the segment end's guards are installed
  uint8_t    shared;            // a shared segment of slices: 1 + the index of its pool (0: not shared); owner id MI_THREAD_ID_SHARED, its pages owned by their heaps (segment-shared.c)
  uint8_t    page_kind;         // a mi_page_kind_t
  uint8_t    page_shift;        // log2 of the page size: 16 (slices), 14 (lean pages) or 22 (huge)
  size_t     huge_purged;       // bytes purged outside its pages, counted in `reset` until the segment goes: huge, its block's while in use (another thread freed it; set by the thread that purges, before the owner may free the segment); lean, the rest of its 4 MiB unit
  _Atomic(uint64_t) guard_mask; // MI_SECURE_PAGE_GUARDS: pages (slices) whose end guard is installed (bit i: pages[i]); atomic and/or: a shared segment's runs set theirs outside its lock

  struct mi_segment_s* next;    // shared segments: their pool's list of their kind, or its segment cache (under the pool's lock)
  struct mi_segment_s* prev;

  size_t     abandoned;         // pages abandoned (no heap) among the used ones
  uint32_t   capacity;          // number of pages
  size_t     used;              // pages in use
  size_t     segment_size;      // segment bytes (4 MiB, or more for huge)
  size_t     segment_info_size; // header bytes before page 0's area
  uintptr_t  cookie;            // segment address ^ process key, checked in debug builds
  uint8_t*   aligned_block;     // big-alignment huge segment: the block start (else NULL)

  uint64_t   purge_mask;        // unused pages whose delayed purge is pending (bit i: pages[i])
  int64_t    purge_expire;      // earliest expiry among them (ms); 0 iff purge_mask == 0
  uint64_t   purging;           // unused pages a purge pass has taken and purges outside the shared lock (written under its pool's lock and the trim lock: read under either)
  uint64_t   purging_done;      // those of them the pass purged (the pass's own)
  struct mi_segment_s* purging_next;  // the pass's list of segments with pages in `purging`
  _Atomic(uintptr_t) thread_id; // owner thread, 0 when abandoned
  _Atomic(uintptr_t) trim_lock; // the thread id of whoever changes or purges page-level state now, 0: nobody
  uint64_t   free_mask;         // pages not in use (bit i: pages[i]; under trim_lock)
  uint64_t   trim_purged;       // free pages a trim purged, not yet marked is_purged by the owner (under trim_lock)
  mi_page_t  pages[1];          // `capacity` descriptors (the first one inline)
} mi_segment_t;

// The process's memory as glibc's mallinfo tells it (segment-walk.c,
// _mi_segments_usage; alloc-glibc.c maps it to the struct). Bytes.
typedef struct mi_usage_s {
  size_t arena;        // small-object memory: segments of small, medium and large pages, and freed region blocks still resident
  size_t in_use;       // bytes of the blocks in use in them
  size_t free_chunks;  // pages with room: free pages, and pages in use with free blocks
  size_t releasable;   // free memory in them that a trim gives back (resident free pages and freed blocks)
  size_t huge_count;   // huge blocks (over 2 MiB, a segment each)
  size_t huge;         // their bytes
} mi_usage_t;

// ------------------------------------------------------
// Heaps
// ------------------------------------------------------

// A queue of pages of the same block size.
typedef struct mi_page_queue_s {
  mi_page_t* first;
  mi_page_t* last;
  size_t     block_size;
  size_t     taken;     // pages of the size the heap took, fresh or adopted (its first medium pages are smaller: segment.c)
  size_t     expired;   // the heap's retire clock when a retired page of the size last expired (0: never)
  bool       retire_long;  // the size came back soon after its retired page expired: retire its pages longer
} mi_page_queue_t;

// Random generator state (see random.c): xoshiro256** in release builds,
// ChaCha20 (a cipher's key stream) in secure builds.
#if MI_SECURE_RANDOM
typedef struct mi_random_ctx_s {
  uint32_t input[16];      // constants, 256-bit key, 64-bit block counter, 64-bit nonce
  uint32_t output[16];     // the current key-stream block
  int      output_available;
} mi_random_ctx_t;
#else
typedef struct mi_random_ctx_s {
  uint64_t s[4];
} mi_random_ctx_t;
#endif

typedef struct mi_tld_s mi_tld_t;

// A heap: the page queues one thread allocates from.
// Invariant: pages_free_direct[w] points at the first page of the queue for
// word size w (or at the empty page), for every w <= MI_SMALL_WSIZE_MAX.
struct mi_heap_s {
  mi_tld_t*        tld;
  int64_t          prof_countdown;                      // bytes to allocate until the next profiler sample (prof.c)
  int64_t          recycle_countdown;                   // free lists that may still be refilled before the generic path does its housekeeping (_mi_page_refill)
  #if defined(MI_ZERO_ON_FREE)
  int64_t          zero_check_countdown;                // frees of blocks over 256 bytes until the next that zeroes whole (secure.c)
  #endif
  mi_page_t*       pages_free_direct[MI_PAGES_DIRECT];  // fast-path entry per word size
  mi_page_queue_t  pages[MI_BIN_FULL + 1];              // queues per bin, + huge + full
  _Atomic(mi_block_t*) thread_delayed_free;             // remote first-frees into full pages
  uintptr_t        thread_id;                           // owner thread
  uintptr_t        cookie;                              // random, odd
  uintptr_t        keys[2];                             // for encoding the delayed list
  mi_random_ctx_t  random;
  #if MI_SECURE_RANDOM_EXTEND
  uint64_t         coins;                               // random bits for _mi_heap_random_coin, above a marker bit (0: none left)
  #endif
  size_t           page_count;                          // pages in all queues
  size_t           page_retired_min;                    // bins that may hold a retired page
  size_t           page_retired_max;
  size_t           page_retired_size;                   // bytes of the pages retired now (bounded by MI_RETIRE_MAX_SIZE)
  size_t           retire_clock;                        // fresh-page requests so far (_mi_heap_collect_retired)
  struct mi_heap_s* next;                               // next heap of this thread
  bool             no_reclaim;                          // user heap: never receives reclaimed pages
};
typedef struct mi_heap_s mi_heap_t;

// ------------------------------------------------------
// Statistics (stats.c). A thread's block is updated with plain arithmetic by
// its thread; the process block (_mi_stats_main) with relaxed atomics.
// Invariants of a count in the process block: current == allocated - freed,
// 0 <= current <= peak.
// ------------------------------------------------------

// Options with a text value (options.c), read from the environment only.
typedef enum mi_option_text_e {
  mi_option_prof_file,     // MIMALLOC_PROF_FILE: heap profile written at exit
  mi_option_stats_file,    // MIMALLOC_STATS_FILE: JSON snapshots appended every stats_interval ms
  _mi_option_text_last
} mi_option_text_t;

typedef struct mi_stat_count_s {
  _Atomic(int64_t) allocated;
  _Atomic(int64_t) freed;
  _Atomic(int64_t) peak;
  _Atomic(int64_t) current;
} mi_stat_count_t;

typedef struct mi_stat_counter_s {
  _Atomic(int64_t) total;
  _Atomic(int64_t) count;
} mi_stat_counter_t;

typedef struct mi_stats_s {
  mi_stat_count_t segments;
  mi_stat_count_t pages;
  mi_stat_count_t reserved;
  mi_stat_count_t committed;
  mi_stat_count_t reset;
  mi_stat_count_t touched;           // bytes of page area threaded into free lists
  mi_stat_count_t segments_abandoned;
  mi_stat_count_t pages_abandoned;
  mi_stat_count_t segments_cached;   // segments in threads' segment caches
  mi_stat_count_t threads;
  mi_stat_count_t huge;              // huge blocks up to 64 MiB (bytes)
  mi_stat_count_t giant;             // larger blocks (bytes)
  mi_stat_count_t normal;            // MI_STAT > 1: blocks up to 2 MiB (bytes)
  mi_stat_count_t malloc;            // MI_STAT > 1: bytes requested
  mi_stat_counter_t pages_extended;  // MI_STAT > 1
  mi_stat_counter_t mmap_calls;
  mi_stat_counter_t commit_calls;
  mi_stat_counter_t pages_retired;  // MI_STAT > 1
  mi_stat_counter_t searches;        // MI_STAT > 1
  mi_stat_counter_t normal_count;    // MI_STAT > 1
  mi_stat_counter_t huge_count;
  mi_stat_counter_t giant_count;
  mi_stat_count_t normal_bins[MI_BIN_HUGE + 1];   // MI_STAT > 1: blocks per size class
  // thread blocks only: bytes of the `touched` row not yet added to the
  // process block (added in batches: no shared atomics per free-list extension)
  int64_t touched_pending_allocated;
  int64_t touched_pending_freed;
} mi_stats_t;

// ------------------------------------------------------
// Thread-local data
// ------------------------------------------------------

typedef struct mi_segments_tld_s {
  size_t count;                        // segments owned (huge ones)
  size_t peak_count;
  size_t current_size;                 // bytes of segments owned
  size_t peak_size;
  mi_page_t* stash;                    // empty small pages of shared segments kept for this thread's next pages (links next)
  mi_page_t* abandoned;                // pages of shared segments the ending thread abandons, put on their lists together (links next)
  size_t stash_count;
  int64_t stash_expire;                // when the stash goes back to the shared segments (ms; 0: empty)
  size_t region_cursor;                // where this thread last found region space
  size_t shared_pool;                  // the pool of shared segments this thread claims its pages in: 1 + its index (0: not chosen yet)
  bool   ending;                       // the thread is ending: the segments it empties go to the region under the exit budget
} mi_segments_tld_t;

// Per-thread data shared by all heaps of a thread.
struct mi_tld_s {
  unsigned long long heartbeat;        // slow-path events so far
  int64_t            orphan_expire;    // an orphan heap: when it is abandoned if no thread took it over (ms)
  bool               recurse;          // inside the deferred-free hook
  mi_heap_t*         heap_backing;     // the thread's first heap; lives until thread exit
  mi_heap_t*         heaps;            // all heaps of this thread
  mi_segments_tld_t  segments;
  mi_stats_t         stats;            // this thread's statistics
};

#endif
