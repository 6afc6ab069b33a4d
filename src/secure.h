/* ----------------------------------------------------------------------------
  secure.h -- the inline parts of the checks of secure and debug builds
  (secure.c has the rest; docs/secure.md): zero-on-free (FULL) and the block
  trailer (builds with MI_PADDING: debug builds and both secure profiles),
  with the free-list link kept in the trailer (FULL, MI_TRAILER_LINK).
  Included by mimalloc-internal.h where the free-list links are defined; of
  it a release build compiles only mi_page_zeroes_on_free (always false).
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MI_SECURE_H
#define MI_SECURE_H

// Blocks of up to MI_ZERO_CHECK_WHOLE usable bytes are zeroed whole when
// freed, and checked whole to read zero when handed out again; larger ones
// are zeroed and checked in their first MI_ZERO_CHECK_HEAD bytes and their
// last word (where object headers, vtable pointers, counts and links live;
// secure.c, mi_block_zero_check), and one free in about MI_ZERO_CHECK_EVERY
// of such a block by its owner (a heap countdown drawn at random) zeroes it
// whole and marks its trailer MI_TRAILER_WHOLE: it is checked whole when
// handed out, so a write after free anywhere in it is caught. (Zeroing every
// larger block whole, on free or on reuse, wrote lines the program may never
// touch: docs/secure-costs.md, "Zero on reuse, measured".)
#define MI_ZERO_CHECK_WHOLE  (256)
#define MI_ZERO_CHECK_HEAD   (64)
#define MI_ZERO_CHECK_EVERY  (8)

// FULL zeroes the freed small and medium blocks (up to 128 KiB)
// (MI_ZERO_ON_FREE): a block of up to MI_ZERO_CHECK_WHOLE (256) usable bytes
// whole; a larger one in its first MI_ZERO_CHECK_HEAD bytes and its last
// word, and whole one free in about 8 (mi_block_zero_freed).
static inline bool mi_page_zeroes_on_free(const mi_page_t* page) {
  #if defined(MI_ZERO_ON_FREE)
  return (page->xblock_size <= MI_MEDIUM_OBJ_SIZE_MAX);
  #else
  (void)page;
  return false;
  #endif
}
// Do the page's free blocks read zero whole (calloc needs no memset)?
static inline bool mi_page_frees_zero_whole(const mi_page_t* page) {
  #if defined(MI_ZERO_ON_FREE)
  return (page->xblock_size <= MI_ZERO_CHECK_WHOLE + MI_PADDING_SIZE);
  #else
  (void)page;
  return false;
  #endif
}

#if (MI_PADDING > 0)
// A block's trailer: the last word of every block, the block's encoded
// address xor its state. While the block is handed out the state is
// MI_TRAILER_LIVE in the low half and, in the high half, the distance from
// the end of the user data to the trailer (whose first bytes, up to 8, or all
// in debug builds, hold MI_DEBUG_PADDING) (a block from C++ new[] reads live
// with the MI_TRAILER_ARRAY bit, so delete and delete[] can tell). While it is
// free the state is MI_TRAILER_FREE in the low half and, in the high half,
// the block's free-list link (MI_TRAILER_LINK: 0 for none, else 1 + the
// next block's offset in the page's block area, with MI_TRAILER_WHOLE when
// the free zeroed the block whole; a block on a heap's delayed
// list reads free with no link; other builds: 0). A free checks the
// state is live and makes it free, which catches a second free of the
// block; any other value is damage (an overflow of this block, or an
// underflow of the block above), or a pointer that is not the start of a
// block. The low halves of the two states differ in one bit. (Blocks of 8
// bytes have no room for user data: their trailer is the whole block, and
// they get no trailer checks.)
#define MI_TRAILER_LIVE   ((uint64_t)0x9E3779B9u)
#define MI_TRAILER_FREE   (MI_TRAILER_LIVE ^ 0x100u)
#define MI_TRAILER_ARRAY  ((uint64_t)0x200u)   // live, and allocated by C++ new[]
// free, and zeroed whole (MI_ZERO_ON_FREE: mi_block_zero_freed): a bit of
// the link half, whose links (1 + an offset that is a multiple of 8) never
// have it set (mi_trailer_link), so that the free state's low half is one
// value and the test for it stays one compare
#define MI_TRAILER_WHOLE  ((uint64_t)2 << 32)
#define MI_TRAILER_PATTERN (0x0101010101010101ULL * MI_DEBUG_PADDING)

// The key: the block's address xor one page key, times the other (odd: a
// bijection of the address: two instructions where the link encoding's
// rotate-and-add takes six). Its top bit is always set: a state's is clear (its high half, a
// link or the slack after the user data, is below 2 GiB), so the stored
// word's last byte is 0x80 or more, and a write of a NUL or ASCII byte over
// it (a one-byte underflow of the block above, a string's terminator) always
// reads as damage; any other byte does but for 1 in 128 (with a random top
// byte 1 in 256 went unnoticed: misuse case underflow-1, 1 run in ~600).
static inline uint64_t mi_trailer_key(const mi_page_t* page, const mi_block_t* block) {
  mi_assert_internal((page->keys[0] & 1) != 0);
  return ((uint64_t)(((uintptr_t)block ^ page->keys[1]) * page->keys[0]) | ((uint64_t)1 << 63));
}
static inline uint8_t* mi_trailer_of(const mi_block_t* block, size_t usable) {
  return ((uint8_t*)block + usable);
}
// Trailers are 8-aligned words (blocks start 8-aligned; a freed pointer is
// checked to be before its trailer is read), accessed as relaxed atomics
// (plain moves on x86-64): the free of a block reads its neighbours'
// trailers while other threads may free those neighbours. Fill bytes and
// block contents go through mi_load8/mi_store8 (any alignment).
static inline uint64_t mi_trailer_load(const uint8_t* trailer) {
  return __atomic_load_n((const uint64_t*)(const void*)trailer, __ATOMIC_RELAXED);
}
static inline void mi_trailer_store(uint8_t* trailer, uint64_t w) {
  __atomic_store_n((uint64_t*)(void*)trailer, w, __ATOMIC_RELAXED);
}
static inline uint64_t mi_load8(const uint8_t* p) { uint64_t x; memcpy(&x, p, 8); return x; }
static inline void mi_store8(uint8_t* p, uint64_t x) { memcpy(p, &x, 8); }
// The trailer's state: MI_TRAILER_LIVE | delta << 32, MI_TRAILER_FREE | link << 32, or damage.
static inline uint64_t mi_trailer_state(const mi_page_t* page, const mi_block_t* block, size_t usable) {
  return (mi_trailer_load(mi_trailer_of(block, usable)) ^ mi_trailer_key(page, block));
}
static inline bool mi_trailer_state_is_live(uint64_t state, size_t usable) {
  // (only builds that check C++ deletes mark new[] blocks: MI_CHECK_DELETE)
  const uint32_t array = (MI_CHECK_DELETE ? (uint32_t)MI_TRAILER_ARRAY : 0);
  return (((uint32_t)state | array) == ((uint32_t)MI_TRAILER_LIVE | array) && (state >> 32) <= usable);
}
// free, with no link or one into the page's block area (and maybe the mark
// MI_TRAILER_WHOLE, which stays below that bound)
static inline bool mi_trailer_state_is_free(const mi_page_t* page, uint64_t state) {
  return ((uint32_t)state == (uint32_t)MI_TRAILER_FREE && (size_t)(state >> 32) <= (size_t)page->reserved * page->xblock_size);
}
// The link of a free state: 0 for none, else 1 + the next block's offset.
static inline size_t mi_trailer_link(uint64_t state) {
  return ((size_t)(state >> 32) & ~(size_t)(MI_TRAILER_WHOLE >> 32));
}

#if defined(MI_TRAILER_LINK)
// The free-list link in a free block's trailer.
mi_decl_noinline uint8_t* _mi_block_trailer_huge(const mi_page_t* page, const mi_block_t* block);
static inline uint8_t* mi_block_trailer(const mi_page_t* page, const mi_block_t* block) {
  const size_t bsize = page->xblock_size;
  if (mi_unlikely(bsize >= MI_HUGE_BLOCK_SIZE)) return _mi_block_trailer_huge(page, block);
  return mi_trailer_of(block, bsize - MI_PADDING_SIZE);
}
// The link of a free block whose trailer and key the caller has at hand
// (the allocation fast path: it overwrites that trailer next). A trailer
// that does not read free with a link inside the page's block area is a
// damaged list: reported, and the list is cut there.
static mi_decl_forceinline mi_block_t* mi_block_next_at(const mi_page_t* page, const mi_block_t* block,
                                                        const uint8_t* trailer, uint64_t key) {
  const uint64_t state = mi_trailer_load(trailer) ^ key;
  if (mi_likely(mi_trailer_state_is_free(page, state))) {
    const size_t link = mi_trailer_link(state);
    return (link == 0 ? NULL : (mi_block_t*)(page->page_start + link - 1));
  }
  _mi_block_next_corrupt(page, block, (const mi_block_t*)(uintptr_t)state);
  return NULL;
}
static mi_decl_forceinline mi_block_t* mi_block_next(const mi_page_t* page, const mi_block_t* block) {
  return mi_block_next_at(page, block, mi_block_trailer(page, block), mi_trailer_key(page, block));
}
// The free state with a link to `next`.
static inline uint64_t mi_trailer_free_state(const mi_page_t* page, const mi_block_t* next) {
  const uint64_t link = (next == NULL ? 0 : (uint64_t)((const uint8_t*)next - page->page_start) + 1);
  mi_assert_internal(((link << 32) & MI_TRAILER_WHOLE) == 0);
  return (MI_TRAILER_FREE | (link << 32));
}
// The link of a block being added to its page (its trailer holds nothing yet).
static mi_decl_forceinline void mi_block_set_next_fresh(const mi_page_t* page, mi_block_t* block, const mi_block_t* next) {
  mi_trailer_store(mi_block_trailer(page, block), mi_trailer_key(page, block) ^ mi_trailer_free_state(page, next));
}
// The link of a free block: it keeps its MI_TRAILER_WHOLE mark (MI_ZERO_ON_FREE).
static mi_decl_forceinline void mi_block_set_next(const mi_page_t* page, mi_block_t* block, const mi_block_t* next) {
  uint8_t* const trailer = mi_block_trailer(page, block);
  const uint64_t key = mi_trailer_key(page, block);
  #if defined(MI_ZERO_ON_FREE)
  const uint64_t whole = ((mi_trailer_load(trailer) ^ key) & MI_TRAILER_WHOLE);
  #else
  const uint64_t whole = 0;
  #endif
  mi_trailer_store(trailer, key ^ (mi_trailer_free_state(page, next) | whole));
}
#endif

// Zero-on-free helpers: sizes are multiples of 8 and at least 8; short
// lengths use overlapping 8-byte stores and loads (no loop, no call).
static inline void mi_store8_zero(uint8_t* p) { mi_store8(p, 0); }

// Zero a block's `usable` bytes.
static inline void mi_block_zero(mi_block_t* block, size_t usable) {
  uint8_t* const p = (uint8_t*)block;
  if (usable <= 16) {
    mi_store8_zero(p); mi_store8_zero(p + usable - 8);
  }
  else if (usable <= 32) {
    mi_store8_zero(p); mi_store8_zero(p + 8); mi_store8_zero(p + usable - 16); mi_store8_zero(p + usable - 8);
  }
  else {
    _mi_memzero(p, usable);
  }
}

// Zero a freed block of `usable` bytes: whole (`whole`, or up to
// MI_ZERO_CHECK_WHOLE), or its head and last word.
static inline void mi_block_zero_freed(mi_block_t* block, size_t usable, bool whole) {
  if (whole || usable <= MI_ZERO_CHECK_WHOLE) {
    mi_block_zero(block, usable);
  }
  else {
    _mi_memzero(block, MI_ZERO_CHECK_HEAD);
    mi_store8_zero((uint8_t*)block + usable - 8);
  }
}
// The offset of the first word of a block's `usable` bytes that is not zero
// (`usable` if there is none): a block taken from a free list of a page that
// zeroes on free (its link is in its trailer, after those bytes).
static inline size_t mi_block_nonzero_offset(const mi_block_t* block, size_t usable) {
  const uint8_t* const p = (const uint8_t*)block;
  const size_t m = usable;
  uint64_t any;
  if (m <= 16) {
    any = (m == 0 ? 0 : mi_load8(p) | mi_load8(p + m - 8));
  }
  else {
    // (64 bytes a round into four words the compiler keeps in vector
    // registers, then the rest)
    const uint64_t* const w = (const uint64_t*)p;
    const size_t n = m / 8;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      a0 |= w[i] | w[i + 4];
      a1 |= w[i + 1] | w[i + 5];
      a2 |= w[i + 2] | w[i + 6];
      a3 |= w[i + 3] | w[i + 7];
    }
    for (; i < n; i++) a0 |= w[i];
    any = a0 | a1 | a2 | a3;
  }
  if (mi_likely(any == 0)) return usable;
  size_t ofs = 0;
  while (mi_load8((const uint8_t*)block + ofs) == 0) ofs += 8;
  return ofs;
}
// Does a block's `usable` bytes read zero? (One accumulator: few registers,
// for FULL's malloc fast path, which then saves none.)
static inline bool mi_block_reads_zero(const mi_block_t* block, size_t usable) {
  const uint8_t* const p = (const uint8_t*)block;
  uint64_t any = mi_load8(p) | mi_load8(p + usable - 8);
  for (size_t ofs = 8; ofs + 8 < usable; ofs += 8) any |= mi_load8(p + ofs);
  return (any == 0);
}
// Free, with no link.
static inline void mi_trailer_set_free(const mi_page_t* page, mi_block_t* block, size_t usable) {
  mi_trailer_store(mi_trailer_of(block, usable), mi_trailer_key(page, block) ^ MI_TRAILER_FREE);
}
// Hand a block out for `delta` bytes less than its usable size (usable >= 8);
// `end` is its trailer, `key` the trailer key.
static inline void mi_trailer_set_live_at(uint8_t* end, uint64_t key, size_t delta) {
  #if (MI_DEBUG > 0)
  _mi_memset(end - delta, MI_DEBUG_PADDING, delta);   // debug builds: all of the fill
  #elif !MI_CHECK_NEIGHBOURS
  // one unaligned store of the first min(delta, 8) fill bytes; what it
  // writes past them is the trailer's place, stored next (without neighbour
  // checks no other thread reads the trailer of a block being handed out)
  mi_store8(end - delta, MI_TRAILER_PATTERN);
  #else
  if (delta >= 8) {
    mi_store8(end - delta, MI_TRAILER_PATTERN);   // the first 8 fill bytes
  }
  else if (delta != 0) {
    // the word before the trailer: its low bytes are user data (maybe known
    // zero), its high `delta` bytes the fill
    const uint64_t keep = ((uint64_t)1 << (8 * (8 - delta))) - 1;
    const uint64_t w = mi_load8(end - 8);
    mi_store8(end - 8, (w & keep) | (MI_TRAILER_PATTERN & ~keep));
  }
  #endif
  // (the trailer last: an owner thread that checks this block as the
  // neighbour of one it frees, while another thread reallocates it in place,
  // sees a live trailer only with its fill)
  mi_trailer_store(end, key ^ (MI_TRAILER_LIVE | ((uint64_t)delta << 32)));
}
static inline void mi_trailer_set_live(const mi_page_t* page, mi_block_t* block, size_t usable, size_t delta) {
  mi_trailer_set_live_at(mi_trailer_of(block, usable), mi_trailer_key(page, block), delta);
}
// Are the fill bytes after the user data intact? (usable >= 8)
static inline bool mi_trailer_fill_intact(const mi_block_t* block, size_t usable, size_t delta) {
  if (delta == 0) return true;
  #if (MI_DEBUG > 0)
  // debug builds: all of the fill
  const uint8_t* const fill = mi_trailer_of(block, usable) - delta;
  for (size_t i = 0; i < delta; i++) {
    if (fill[i] != MI_DEBUG_PADDING) return false;
  }
  return true;
  #else
  const uint64_t w = mi_load8(mi_trailer_of(block, usable) - (delta >= 8 ? delta : 8)) ^ MI_TRAILER_PATTERN;
  return ((delta >= 8 ? w : w >> (8 * (8 - delta))) == 0);
  #endif
}
#endif

// The allocation fast path takes `block`, the first of `page`'s free list,
// off the list here. False: the unchecked fast path of a checked build
// (MI_CHECKED_FAST_PATHS, `checked` false, which never sees a huge page:
// _mi_page_malloc_any) found a link to look at closer; nothing is taken, and
// the caller goes to its checked version (`checked` true: a damaged link is reported and
// the list cut). `*trailer` and `*key`: the block's trailer and its key where
// the link is kept in the trailer (MI_TRAILER_LINK), else NULL and 0. A
// release build: the plain pop.
static mi_decl_forceinline bool mi_page_pop(mi_heap_t* heap, mi_page_t* page, mi_block_t* block, bool checked, uint8_t** trailer, uint64_t* key) {
  (void)heap; (void)checked;
  #if defined(MI_TRAILER_LINK)
  #if defined(MI_FULL_FAST_PATH)
  if (!checked) {
    // FULL's fast path, before anything changes: the block's trailer reads
    // free with a link into the page's blocks, and the block still reads
    // zero as mi_block_zero_check checks it (whole up to
    // MI_ZERO_CHECK_WHOLE; above, its head and last word, unless it was
    // zeroed whole: then, and when anything fails, the checked version takes
    // it, which reports). (Never a huge
    // page, nor one of 8-byte blocks: their pages are MI_PAGE_CHECK_SLOW,
    // and _mi_page_malloc_any takes them.)
    mi_assert_internal(page->xblock_size < MI_HUGE_BLOCK_SIZE && page->xblock_size >= MI_PADDING_SIZE + sizeof(mi_block_t));
    const size_t usable = (size_t)page->xblock_size - MI_PADDING_SIZE;
    *trailer = mi_trailer_of(block, usable);
    *key = mi_trailer_key(page, block);
    const uint64_t state = mi_trailer_load(*trailer) ^ *key;
    if (mi_unlikely(!mi_trailer_state_is_free(page, state))) return false;
    if (mi_page_zeroes_on_free(page)) {
      if (usable <= MI_ZERO_CHECK_WHOLE) {
        if (mi_unlikely(!mi_block_reads_zero(block, usable))) return false;
      }
      else {
        if ((state & MI_TRAILER_WHOLE) != 0) return false;   // (the checked version checks it whole)
        if (mi_unlikely(!mi_block_reads_zero(block, MI_ZERO_CHECK_HEAD) || mi_load8((const uint8_t*)block + usable - 8) != 0)) return false;
      }
    }
    const size_t link = mi_trailer_link(state);
    page->free = (link == 0 ? NULL : (mi_block_t*)(page->page_start + link - 1));
    return true;
  }
  #endif
  *trailer = mi_block_trailer(page, block);
  *key = mi_trailer_key(page, block);
  page->free = mi_block_next_at(page, block, *trailer, *key);
  #else
  *trailer = NULL;   // (found by mi_block_on_alloc where it needs it)
  *key = 0;
  #if defined(MI_CHECKED_FAST_PATHS)
  if (!checked) {
    // the link decoded, with the page's address for "none" (in the segment
    // header): anything outside the block's segment goes to the checked
    // version, which checks for the same page
    const uintptr_t next = mi_ptr_decode_raw(block->next, page->keys);
    mi_assert_internal(page->xblock_size < MI_HUGE_BLOCK_SIZE);   // (huge pages: _mi_page_malloc_any)
    if (mi_unlikely(((next ^ (uintptr_t)block) >> MI_SEGMENT_SHIFT) != 0)) return false;
    page->free = (next == (uintptr_t)page ? NULL : (mi_block_t*)next);
    return true;
  }
  #endif
  page->free = mi_block_next(page, block);
  #endif
  return true;
}

#endif
