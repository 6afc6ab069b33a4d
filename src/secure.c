/* ----------------------------------------------------------------------------
  secure.c -- the checks of the debug and secure builds.

  Everything here exists only in builds that check (debug builds, and the
  secure profiles ON and FULL: the feature macros of mimalloc-types.h say
  which part); a release build compiles it to nothing. The core calls it
  through a few hooks, each a constant in a release build:

  - on free (free.c): mi_free_check_segment before anything is read at a
    freed pointer's segment address; mi_free_check_fast in the owner's fast
    path (silent: a free it does not pass goes to the generic path);
    mi_free_check_ptr and mi_free_check in the generic path (they report);
    mi_zero_free for a pointer outside every segment (the malloc(0) area);
  - on allocate (alloc.c): mi_block_on_alloc (freed memory still zero, the
    trailer), _mi_zero_alloc (malloc(0)), mi_page_usable_size_of (the exact
    size asked for);
  - on page extend (page.c): mi_page_on_extend (zeroing, trailers, the
    random order);
  - for C++ and the checked memcpy: _mi_new_array_mark, _mi_free_delete,
    mi_check_writex, and _mi_block_set_size for in-place reallocations.

  The trailer itself (the word at the end of every block that holds its
  state) is read and written through mimalloc-internal.h, whose free-list
  links may live in it (MI_TRAILER_LINK).
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"

#if defined(MI_FREE_CHECK_PTR)
// Whether p is the start of one of the page's blocks (below its capacity).
static inline bool mi_page_is_block_start(const mi_page_t* page, const void* p) {
  const size_t bsize = mi_page_block_size(page);
  const size_t ofs = (size_t)((const uint8_t*)p - page->page_start);
  return ((const uint8_t*)p >= page->page_start && ofs % bsize == 0 && ofs / bsize < mi_page_capacity_shared(page));
}
#endif

#if defined(MI_FREE_CHECK_PTR) && (MI_PADDING == 0)
// The same without a division, for an offset in the page's block area (at
// most block_last, below 2^32): divisible by the block size exactly when the
// product with the page's block_divisor (2^64 / size, rounded up) wraps to
// less than it (Lemire, Kaser and Kurz, "Faster remainder by direct
// computation", 2019).
static inline bool mi_page_ofs_is_block_start(const mi_page_t* page, size_t ofs) {
  mi_assert_internal(ofs <= UINT32_MAX);
  return ((uint64_t)ofs * page->block_divisor < page->block_divisor);
}
#endif

// ---------------------------------------------------------------------------
// Encoded free lists, links in trailers
// ---------------------------------------------------------------------------

#if defined(MI_TRAILER_LINK)
// The trailer of a huge block (one block per page).
uint8_t* _mi_block_trailer_huge(const mi_page_t* page, const mi_block_t* block) {
  return mi_trailer_of(block, mi_page_usable_block_size(page));
}
#endif

void _mi_block_next_corrupt(const mi_page_t* page, const mi_block_t* block, const mi_block_t* next) {
  _mi_misuse_message(EFAULT, "corrupted free list entry of size %zub at %p: value 0x%zx\n",
                    mi_page_block_size(page), (void*)block, (size_t)(uintptr_t)next);
}

// ---------------------------------------------------------------------------
// Zero on free: a reused block must still read zero (FULL)
// ---------------------------------------------------------------------------

#if defined(MI_ZERO_ON_FREE)
// A block handed out again does not read zero: something
// wrote into it while it was free. Report, and zero it (when going on).
static mi_decl_noinline mi_decl_cold void mi_block_written_after_free(const mi_page_t* page, mi_block_t* block, size_t ofs) {
  const size_t usable = mi_page_usable_block_size(page);
  _mi_misuse_message(EFAULT, "write after free in heap block %p of size %zu: byte %zu was written after the block was freed\n",
                    (void*)block, usable, ofs);
  mi_block_zero(block, usable);
}
#endif

#if defined(MI_ZERO_ON_FREE)
// The offset of the first non-zero word found (`usable`: none) where a block
// handed out again must still read zero: blocks of up to
// MI_ZERO_CHECK_WHOLE bytes, and those zeroed whole (`whole`), whole; the
// others in their first MI_ZERO_CHECK_HEAD bytes and their last word, the
// parts zeroed when they were freed (mi_block_zero_freed). (Until
// 2026-11-29 larger blocks were zeroed whole on every free and checked whole
// one reuse in about 8: docs/secure-costs.md, "Zero on reuse, measured".)
static inline size_t mi_block_zero_check(const mi_block_t* block, size_t usable, bool whole) {
  if (whole || usable <= MI_ZERO_CHECK_WHOLE) return mi_block_nonzero_offset(block, usable);
  const size_t ofs = mi_block_nonzero_offset(block, MI_ZERO_CHECK_HEAD);
  if (mi_unlikely(ofs < MI_ZERO_CHECK_HEAD)) return ofs;
  return (mi_load8((const uint8_t*)block + usable - 8) == 0 ? usable : usable - 8);
}

// A free of a block over MI_ZERO_CHECK_WHOLE bytes by its owner, `heap`:
// is it the one in about MI_ZERO_CHECK_EVERY that zeroes it whole? (FULL's
// fast path leaves it to this, when the countdown has run out.)
static bool mi_free_zeroes_whole(mi_heap_t* heap, size_t usable) {
  if (usable <= MI_ZERO_CHECK_WHOLE) return false;
  if (--heap->zero_check_countdown >= 0) return false;
  heap->zero_check_countdown = (int64_t)(_mi_heap_random_next(heap) % (2 * MI_ZERO_CHECK_EVERY - 1));
  return true;
}
#endif

// ---------------------------------------------------------------------------
// The hook on page extend (page.c)
// ---------------------------------------------------------------------------

#if MI_SECURE_RANDOM
// Secure builds thread new blocks in random order, keeping neighbours close:
// the blocks are cut into runs of MI_SHUFFLE_RUN consecutive blocks (at most
// 64 runs), the runs are threaded in a random order, and inside a run every
// other block first (from a random parity), then the others. Consecutive
// allocations inside a run are two blocks apart, so an overflow out of a
// block lands on one allocated later, not on the one allocated just before,
// and the list jumps to a random run every 64 blocks. (Until 2026-11-26
// the list jumped between 64 slices at random at every block: Python with
// every object through malloc ran 2.1x the release build's time; with runs
// of 32 blocks 1.23x, of 64 1.09x, of 128 1.10x: docs/secure.md. An
// extension of 4 KiB of blocks of 64 bytes or more is one run.)
#if !defined(MI_SHUFFLE_RUN)
#define MI_SHUFFLE_RUN       (64)    // blocks a run (measuring: -DMI_SHUFFLE_RUN=n)
#endif
#define MI_SHUFFLE_RUNS_MAX  (64)
static void mi_page_free_list_extend_random(mi_page_t* page, size_t bsize, size_t extend) {
  uint8_t* const area = _mi_page_start(_mi_page_segment(page), page, NULL) + (page->capacity * bsize);
  size_t runs = _mi_divide_up(extend, MI_SHUFFLE_RUN);
  if (runs > MI_SHUFFLE_RUNS_MAX) runs = MI_SHUFFLE_RUNS_MAX;
  const size_t per_run = extend / runs;   // (the last run takes the remainder)
  uint8_t order[MI_SHUFFLE_RUNS_MAX];
  for (size_t i = 0; i < runs; i++) order[i] = (uint8_t)i;
  uintptr_t rnd = _mi_heap_random_next(mi_page_heap(page));
  size_t bits = MI_INTPTR_BITS;
  for (size_t i = runs - 1; i > 0; i--) {   // Fisher-Yates, 6 random bits a step (a slight bias: fine here)
    if (bits < 7) { rnd = _mi_random_shuffle(rnd); bits = MI_INTPTR_BITS; }
    const size_t j = (rnd & 63) % (i + 1);
    rnd >>= 6; bits -= 6;
    const uint8_t t = order[i]; order[i] = order[j]; order[j] = t;
  }
  mi_block_t* head = NULL;
  mi_block_t* prev = NULL;
  #if defined(MI_ENCODE_FREELIST) && !defined(MI_TRAILER_LINK)
  // (the keys copied: the stores through the blocks would make the compiler
  // load them again for every block)
  const uintptr_t keys[2] = { page->keys[0], page->keys[1] };
  #define mi_extend_link(prev, block)  ((prev)->next = mi_rotl((uintptr_t)(block) ^ keys[1], keys[0]) + keys[0])   // (mi_ptr_encode of a block that is not NULL)
  #else
  #define mi_extend_link(prev, block)  mi_block_set_next_fresh(page, prev, block)
  #endif
  for (size_t r = 0; r < runs; r++) {
    const size_t first = order[r] * per_run;
    const size_t n = (order[r] == runs - 1 ? extend - first : per_run);
    if (bits < 2) { rnd = _mi_random_shuffle(rnd); bits = MI_INTPTR_BITS; }
    const size_t parity = (n >= 2 ? (rnd & 1) : 0);
    rnd >>= 1; bits--;
    uint8_t* const run = area + first * bsize;
    uint8_t* const end = run + n * bsize;
    for (size_t pass = 0; pass < 2; pass++) {
      for (uint8_t* p = run + (pass == 0 ? parity : 1 - parity) * bsize; p < end; p += 2 * bsize) {
        mi_block_t* const block = (mi_block_t*)p;
        if (prev == NULL) head = block;
        else mi_extend_link(prev, block);
        prev = block;
      }
    }
  }
  #undef mi_extend_link
  mi_block_set_next_fresh(page, prev, page->free);
  page->free = head;
}
#endif

// `extend` fresh blocks of the page, from its capacity on, before they join
// its free list: zeroed (FULL: free blocks read zero past their link), their
// trailers free (so that the canary below any block of the page can be
// checked when that block is freed, and a free of a block never handed out
// reads as the double free it is; with the link in the trailer,
// MI_TRAILER_LINK, the threading writes it so; never in blocks too small for
// both a link and a trailer: there a free block's link is its trailer), and
// in secure builds threaded in random order. True: threaded; false: the
// caller threads them in address order (always, in a release build).
static inline bool mi_page_on_extend(mi_page_t* page, size_t bsize, size_t extend) {
  (void)page; (void)bsize; (void)extend;
  #if defined(MI_ZERO_ON_FREE)
  if (!page->is_zero_init && mi_page_zeroes_on_free(page)) {
    // (as mi_block_zero_freed: whole, or the head and last word of larger blocks)
    uint8_t* const area = _mi_page_start(_mi_page_segment(page), page, NULL) + page->capacity * bsize;
    if (bsize - MI_PADDING_SIZE <= MI_ZERO_CHECK_WHOLE) {
      _mi_memzero(area, extend * bsize);
    }
    else {
      for (size_t i = 0; i < extend; i++) mi_block_zero_freed((mi_block_t*)(area + i * bsize), bsize - MI_PADDING_SIZE, false);
    }
  }
  #endif
  #if (MI_PADDING > 0) && !defined(MI_TRAILER_LINK)
  if (bsize >= MI_PADDING_SIZE + sizeof(mi_block_t)) {
    uint8_t* const area = _mi_page_start(_mi_page_segment(page), page, NULL);
    for (size_t i = page->capacity; i < (size_t)page->capacity + extend; i++) {
      mi_trailer_set_free(page, (mi_block_t*)(area + i * bsize), bsize - MI_PADDING_SIZE);
    }
  }
  #endif
  #if MI_SECURE_RANDOM
  if (extend >= 2) {
    mi_page_free_list_extend_random(page, bsize, extend);
    return true;
  }
  #endif
  return false;
}

// ---------------------------------------------------------------------------
// The hook on allocate (alloc.c); nothing in a release build
// ---------------------------------------------------------------------------

// A block just taken off its page's free list, to be handed out for `size`
// bytes (the padding included): freed memory must still read zero (FULL),
// a debug build fills it, the link word is cleared (ON), and the trailer
// says live, with the distance from the end of the user data. `trailer` and
// `key`: the block's trailer and its key where the caller has them at hand
// (MI_TRAILER_LINK: it read the link there), else NULL and 0.
static mi_decl_forceinline void mi_block_on_alloc(mi_heap_t* heap, const mi_page_t* page, mi_block_t* block, size_t size,
                                                  uint8_t* trailer, uint64_t key, bool checked) {
  (void)heap; (void)page; (void)block; (void)size; (void)trailer; (void)key; (void)checked;
  #if defined(MI_ZERO_ON_FREE)
  // the block was zeroed when it was freed (or added), in part above
  // MI_ZERO_CHECK_WHOLE unless its trailer says whole: that part must still
  // be (FULL's fast path checked before it took the block: mi_page_pop, and
  // never takes one zeroed whole)
  #if defined(MI_FULL_FAST_PATH)
  if (checked && mi_page_zeroes_on_free(page)) {
  #else
  if (mi_page_zeroes_on_free(page)) {
  #endif
    mi_assert_internal(trailer != NULL);
    const size_t usable = (size_t)page->xblock_size - MI_PADDING_SIZE;   // (never a huge page)
    const bool whole = (((mi_trailer_load(trailer) ^ key) & MI_TRAILER_WHOLE) != 0);
    const size_t ofs = mi_block_zero_check(block, usable, whole);
    if (mi_unlikely(ofs < usable)) mi_block_written_after_free(page, block, ofs);
  }
  #endif
  #if (MI_DEBUG > 0)
  _mi_memset(block, MI_DEBUG_UNINIT, mi_page_usable_block_size(page));   // recognisable fresh memory
  #elif MI_SECURE_CLEAR_LINK && !defined(MI_TRAILER_LINK)
  block->next = 0;   // no encoded link reaches the program (else the trailer held it)
  #endif
  #if (MI_PADDING > 0)
  #if defined(MI_CHECKED_FAST_PATHS) || defined(MI_FULL_FAST_PATH)
  // (the unchecked fast path never meets a huge page nor blocks with no
  // room for a trailer: _mi_page_malloc_any)
  mi_assert_internal(checked || (page->xblock_size < MI_HUGE_BLOCK_SIZE && page->xblock_size >= MI_PADDING_SIZE + sizeof(mi_block_t)));
  const size_t usable = (checked ? mi_page_usable_block_size(page) : (size_t)page->xblock_size - MI_PADDING_SIZE);
  if (mi_likely(!checked || usable >= sizeof(mi_block_t))) {
  #else
  const size_t usable = mi_page_usable_block_size(page);
  if (mi_likely(usable >= sizeof(mi_block_t))) {
  #endif
    const size_t delta = usable - (size - MI_PADDING_SIZE);
    #if defined(MI_TRAILER_LINK)
    mi_assert_internal(delta <= usable && trailer == mi_trailer_of(block, usable));
    mi_trailer_set_live_at(trailer, key, delta);
    #else
    mi_assert_internal(delta <= usable);
    mi_trailer_set_live(page, block, usable, delta);
    #endif
  }
  #endif
}

#if defined(MI_ZERO_AREA)
// ---------------------------------------------------------------------------
// malloc(0) in secure builds: a unique address in a reserved area of no
// access, 16 bytes apart (MI_ZERO_SLOTS of them), one bit per address saying
// it is handed out. Reserved at the first malloc(0); the bits are committed
// as they are touched. free finds such a pointer on its cold path, where the
// segment map has said it is not in a segment.
// ---------------------------------------------------------------------------
#define MI_ZERO_SLOT       (16)
#define MI_ZERO_SLOTS      ((size_t)4 * 1024 * 1024)   // 64 MiB of address space, 512 KiB of bits
static _Atomic(uintptr_t) mi_zero_area;                // the area's start, 0 until the first malloc(0)
static _Atomic(uintptr_t) mi_zero_bits;                // MI_ZERO_SLOTS bits
static _Atomic(size_t)    mi_zero_cursor;

static bool mi_zero_area_init(void) {
  if (mi_atomic_load_acquire(&mi_zero_area) != 0) return true;
  bool is_pinned = false, is_zero = false;
  const size_t area_size = MI_ZERO_SLOTS * MI_ZERO_SLOT;
  void* area = _mi_os_alloc_aligned_at(area_size, MI_SEGMENT_SIZE, 0, false /* no access */, false, &is_pinned, &is_zero);
  void* bits = _mi_os_alloc(MI_ZERO_SLOTS / 8);
  if (area == NULL || bits == NULL) {
    _mi_os_free_ex(area, area_size, 0);
    _mi_os_free(bits, MI_ZERO_SLOTS / 8);
    return false;
  }
  uintptr_t expected = 0;
  if (!mi_atomic_cas_strong_acq_rel(&mi_zero_bits, &expected, (uintptr_t)bits)) {
    _mi_os_free(bits, MI_ZERO_SLOTS / 8);   // another thread was first
    _mi_os_free_ex(area, area_size, 0);
    while (mi_atomic_load_acquire(&mi_zero_area) == 0) { }   // it publishes the area next
    return true;
  }
  mi_atomic_store_release(&mi_zero_area, (uintptr_t)area);
  return true;
}

void* _mi_zero_alloc(void) {
  if (!mi_zero_area_init()) { errno = ENOMEM; return NULL; }
  _Atomic(uintptr_t)* const bits = (_Atomic(uintptr_t)*)mi_atomic_load_relaxed(&mi_zero_bits);
  for (size_t tries = 0; tries < MI_ZERO_SLOTS; tries++) {
    const size_t i = mi_atomic_add_relaxed(&mi_zero_cursor, 1) % MI_ZERO_SLOTS;
    if (i == 0) continue;   // (never the area's start: free tells those apart)
    const uintptr_t bit = (uintptr_t)1 << (i % MI_INTPTR_BITS);
    if ((mi_atomic_or_acq_rel(&bits[i / MI_INTPTR_BITS], bit) & bit) == 0) {
      return (void*)(mi_atomic_load_relaxed(&mi_zero_area) + i * MI_ZERO_SLOT);
    }
  }
  _mi_error_message(ENOMEM, "unable to allocate memory (0 bytes: every zero-size address is in use)\n");
  errno = ENOMEM;
  return NULL;
}

bool _mi_zero_area_contains(const void* p) {
  const uintptr_t area = mi_atomic_load_acquire(&mi_zero_area);
  return (area != 0 && (uintptr_t)p - area < MI_ZERO_SLOTS * MI_ZERO_SLOT);
}

// Is p in the zero area? (then free it: true; a hook of free.c)
static bool mi_zero_free(const void* p) {
  if (!_mi_zero_area_contains(p)) return false;
  const size_t ofs = (size_t)((uintptr_t)p - mi_atomic_load_relaxed(&mi_zero_area));
  const size_t i = ofs / MI_ZERO_SLOT;
  const uintptr_t bit = (uintptr_t)1 << (i % MI_INTPTR_BITS);
  _Atomic(uintptr_t)* const bits = (_Atomic(uintptr_t)*)mi_atomic_load_relaxed(&mi_zero_bits);
  if (ofs % MI_ZERO_SLOT != 0) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not the start of a block): %p\n", p);
  }
  else if ((mi_atomic_and_acq_rel(&bits[i / MI_INTPTR_BITS], ~bit) & bit) == 0) {
    _mi_misuse_message(EAGAIN, "double free detected of block %p with size 0\n", p);
  }
  return true;
}
#endif

// ---------------------------------------------------------------------------
// Checks on free
// ---------------------------------------------------------------------------

#if (MI_PADDING > 0)
// The exact size the user asked for (0 for a block that is not handed out).
static size_t mi_page_usable_size_of(const mi_page_t* page, const mi_block_t* block) {
  const size_t usable = mi_page_usable_block_size(page);
  if (usable < sizeof(mi_block_t)) return usable;
  if (((uintptr_t)block % MI_INTPTR_SIZE) != 0) return 0;   // not a block (trailers are aligned words)
  const uint64_t state = mi_trailer_state(page, block, usable);
  return (mi_trailer_state_is_live(state, usable) ? usable - (size_t)(state >> 32) : 0);
}

// A free whose trailer is not live and intact: say what is wrong. False
// means "do not free" (not a block, or a double free).
static mi_decl_noinline mi_decl_cold bool mi_free_trailer_failed(const mi_page_t* page, const mi_block_t* block,
                                                                  size_t usable, uint64_t state) {
  const size_t bsize = usable + MI_PADDING_SIZE;
  if (!mi_page_has_aligned(page) && !mi_page_is_block_start(page, block)) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not the start of a block): %p\n", (const void*)block);
    return false;
  }
  if (mi_trailer_state_is_free(page, state)) {
    _mi_misuse_message(EAGAIN, "double free detected of block %p with size %zu\n", (const void*)block, bsize);
    return false;
  }
  if (mi_trailer_state_is_live(state, usable)) {
    // the canary is intact: the fill after the user data is not
    const size_t size = usable - (size_t)(state >> 32);
    const uint8_t* const fill = (const uint8_t*)block + size;
    size_t i = 0;
    while (i + 1 < usable - size && fill[i] == MI_DEBUG_PADDING) i++;
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: write after %zu bytes\n",
                      (const void*)block, size, size + i);
  }
  else if ((state >> 32) <= usable) {
    // the canary half is damaged, the size half reads true (a short write past the end)
    const size_t size = usable - (size_t)(state >> 32);
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: write after %zu bytes (its canary is damaged)\n",
                      (const void*)block, size, size);
  }
  else {
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: its trailer (canary) is damaged\n",
                      (const void*)block, usable);
  }
  return true;   // (when the process goes on) the block itself is fine to free
}

// A neighbour of a freed block has a damaged canary (trailer or fill): an
// underflow of the freed block or an overflow of the block below (for the
// block below), an overflow of the block above or an underflow of the one
// after it (for the block above). A neighbour that another thread freed
// while it was read (its trailer changed: it zeroes the block after marking
// it free) is not damage.
static mi_decl_noinline mi_decl_cold void mi_free_neighbour_damaged(const mi_page_t* page, const mi_block_t* block,
                                                                    const mi_block_t* neighbour, size_t usable, uint64_t state) {
  atomic_thread_fence(mi_memory_order(acquire));
  if (mi_trailer_state(page, neighbour, usable) != state) return;   // freed (or linked) meanwhile
  if (neighbour < block) {
    _mi_misuse_message(EFAULT, "buffer underflow in heap block %p of size %zu: the canary below it is damaged (a write before its start, or past the end of the block below)\n",
                      (const void*)block, usable);
  }
  else {
    _mi_misuse_message(EFAULT, "buffer overflow in heap block %p of size %zu: its canary is damaged (found on the free of the block %p below it; a write past its end, or before the start of the block above it)\n",
                      (const void*)neighbour, usable, (const void*)block);
  }
}

// A neighbour of a block being freed: its trailer must read live (with its
// fill intact, when `fill`) or free (with whatever link).
static inline void mi_free_check_neighbour(const mi_page_t* page, const mi_block_t* block, const mi_block_t* neighbour,
                                           size_t usable, bool fill) {
  const uint64_t state = mi_trailer_state(page, neighbour, usable);
  if (mi_trailer_state_is_live(state, usable)) {
    if (fill && mi_unlikely(!mi_trailer_fill_intact(neighbour, usable, (size_t)(state >> 32)))) {
      mi_free_neighbour_damaged(page, block, neighbour, usable, state);
    }
  }
  else if (mi_unlikely(!mi_trailer_state_is_free(page, state))) {
    mi_free_neighbour_damaged(page, block, neighbour, usable, state);
  }
}

// The trailer checks of a free: this block's trailer must be live with its
// fill intact, the trailer below it (its front canary) live or free; then it
// reads free (`to_local_free`: already linked to the page's local_free
// list, which the caller then points at the block: MI_TRAILER_LINK, the
// owner's fast path). False: do not free (`report`: said why; else nothing
// has changed, and the caller takes the reporting path).
static inline bool mi_free_check_trailers(const mi_page_t* page, mi_block_t* block, bool local, bool to_local_free, bool report) {
  const size_t usable = mi_page_usable_block_size(page);
  if (mi_unlikely(usable < sizeof(mi_block_t))) {   // 8-byte blocks: no room for checks
    #if defined(MI_TRAILER_LINK)
    if (to_local_free) mi_block_set_next(page, block, page->local_free);
    #endif
    return true;
  }
  uint8_t* const trailer = mi_trailer_of(block, usable);
  const uint64_t key = mi_trailer_key(page, block);   // (once: for the check and for the free state)
  const uint64_t state = mi_trailer_load(trailer) ^ key;
  if (mi_unlikely(!mi_trailer_state_is_live(state, usable) ||
                  !mi_trailer_fill_intact(block, usable, (size_t)(state >> 32)))) {
    if (!report || !mi_free_trailer_failed(page, block, usable, state)) return false;
  }
  // free from here on (the trailer first: another thread that checks this
  // block as a neighbour and sees its fill zeroed then sees it free; the
  // link replaces the state when the block goes on a list)
  #if defined(MI_ZERO_ON_FREE)
  // (a free by another thread is never the one that zeroes whole: a link
  // written into its trailer later, when it goes on the page's list, would
  // drop the mark; the owner's frees count for it)
  const bool whole = (local && mi_page_zeroes_on_free(page) && mi_free_zeroes_whole(mi_page_heap(page), usable));
  #else
  const bool whole = false;
  #endif
  #if defined(MI_TRAILER_LINK)
  mi_trailer_store(trailer, key ^ ((to_local_free ? mi_trailer_free_state(page, page->local_free) : MI_TRAILER_FREE) |
                                   (whole ? MI_TRAILER_WHOLE : 0)));
  #else
  (void)to_local_free;
  mi_trailer_store(trailer, key ^ MI_TRAILER_FREE);
  #endif
  if (mi_page_zeroes_on_free(page)) mi_block_zero_freed(block, usable, whole);   // freed memory reads zero
  // (MI_CHECK_NEIGHBOURS) the neighbours: the trailer below this block (its front canary: the
  // block below's trailer, or the page's front canary) must be intact; the
  // owner thread, the only one that allocates in the page, also checks the
  // fill of a live block below and the trailer and fill of the block above
  // (an overflow of either neighbour)
  #if defined(MI_TSAN)
  local = false;
  #endif
  if (MI_CHECK_NEIGHBOURS) {
    const size_t bsize = usable + MI_PADDING_SIZE;
    if ((const uint8_t*)block >= page->page_start + bsize || page->has_front_canary) {
      mi_free_check_neighbour(page, block, (const mi_block_t*)((const uint8_t*)block - bsize), usable, local);
    }
    const mi_block_t* const above = (const mi_block_t*)((const uint8_t*)block + bsize);
    if (local && (const uint8_t*)above < page->page_start + (size_t)page->capacity * bsize) {
      mi_free_check_neighbour(page, block, above, usable, true);
    }
  }
  return true;
}
#endif

#if defined(MI_DOUBLE_FREE_PROBE)
// Builds with encoded lists but no trailers (ON): a free whose block's first
// word decodes as a link of its page (every free block's does: to a block of
// the page, or to the page itself for none; live data next to never) is
// looked up in the page's lists. The owner looks in all three; another
// thread only in the list it pushes on, thread_free (the others are the
// owner's), walked without reports and at most `capacity` steps (the owner
// may take it meanwhile): a double free by two other threads is caught until
// the owner collects, one by the owner and then another thread is not (FULL's
// trailer catches both).
static inline bool mi_link_is_plausible(const mi_page_t* page, const mi_block_t* block) {
  const uintptr_t next = mi_ptr_decode_raw(block->next, page->keys);
  return (((next ^ (uintptr_t)block) >> MI_SEGMENT_SHIFT) == 0 && (next % MI_INTPTR_SIZE) == 0);
}

static bool mi_list_contains(const mi_page_t* page, const mi_block_t* list, const mi_block_t* elem) {
  while (list != NULL) {
    if (elem == list) return true;
    list = mi_block_next(page, list);
  }
  return false;
}

static bool mi_list_contains_quiet(const mi_page_t* page, const mi_block_t* list, const mi_block_t* elem) {
  for (size_t n = mi_page_capacity_shared(page) + 1; list != NULL && n > 0; n--) {
    if (elem == list) return true;
    if (!mi_link_is_plausible(page, list)) return false;
    list = mi_block_nextx(page, list, page->keys);
  }
  return false;
}

static mi_decl_noinline bool mi_check_is_double_freex(const mi_page_t* page, const mi_block_t* block, bool local, bool report) {
  const bool found = (local ? (mi_list_contains(page, page->free, block) ||
                               mi_list_contains(page, page->local_free, block) ||
                               mi_list_contains(page, mi_page_thread_free(page), block))
                            : mi_list_contains_quiet(page, mi_page_thread_free(page), block));
  if (found && report) {
    _mi_misuse_message(EAGAIN, "double free detected of block %p with size %zu\n", (void*)block, mi_page_block_size(page));
  }
  return found;
}

static inline bool mi_check_is_double_free(const mi_page_t* page, const mi_block_t* block, bool local, bool report) {
  if (mi_likely(!mi_link_is_plausible(page, block))) return false;
  return mi_check_is_double_freex(page, block, local, report);
}
#else
#define mi_check_is_double_free(page, block, local, report)  (false)
#endif

// All checks of a free, before the block goes on a list: false means
// "do not free" (a detected double free). `to_local_free` and `report`: see
// mi_free_check_trailers.
static inline bool mi_free_checks(const mi_page_t* page, mi_block_t* block, bool local, bool to_local_free, bool report) {
  (void)page; (void)block; (void)local; (void)to_local_free; (void)report;
  #if (MI_PADDING > 0)
  if (!mi_free_check_trailers(page, block, local, to_local_free, report)) return false;
  #else
  if (mi_unlikely(mi_check_is_double_free(page, block, local, report))) return false;
  #endif
  #if (MI_DEBUG > 0)
  if (!mi_page_zeroes_on_free(page)) _mi_memset(block, MI_DEBUG_FREED, mi_page_usable_block_size(page));
  #endif
  return true;
}


#if defined(MI_FREE_CHECK_PTR)
// Checked builds (secure and debug builds, which have trailers): a
// freed pointer must be aligned and lie in its page's extended blocks with
// room for a whole block after it, so that its trailer can be read; whether
// it is a block's start then shows in that trailer (mi_free_check_trailers
// reports the exact reason when it does not read live). Pages of aligned
// blocks (any address inside a block finds it) and every pointer outside that
// range take the slow check here, which reports.
static mi_decl_noinline bool mi_free_ptr_check_slow(const mi_page_t* page, const void* p) {
  if (!page->segment_in_use || page->xblock_size == 0) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (in an unused page): %p\n", p);
    return false;
  }
  if (mi_page_has_aligned(page)) return true;
  if (((uintptr_t)p % MI_INTPTR_SIZE) != 0) {
    _mi_misuse_message(EINVAL, "mi_free: invalid (unaligned) pointer: %p\n", p);
    return false;
  }
  if (!mi_page_is_block_start(page, p)) {
    _mi_misuse_message(EINVAL, "mi_free: invalid pointer (not the start of a block): %p\n", p);
    return false;
  }
  return true;
}

// The range test alone (the slow check reports what fails it).
static inline bool mi_free_ptr_in_range(const mi_page_t* page, const void* p) {
  const size_t ofs = (size_t)((const uint8_t*)p - page->page_start);   // huge below the start
  const size_t bsize = page->xblock_size;   // (a huge page: the sentinel, and only its start passes)
  return (ofs + bsize - 1 < mi_page_capacity_shared(page) * bsize && (ofs % MI_INTPTR_SIZE) == 0);
}

// The fast paths' range test: a word-aligned pointer at or below the start
// of the page's last block (block starts and the rest are told apart by the
// trailer's key; what fails goes to the generic path, whose checks report).
static inline bool mi_free_ptr_in_area(const mi_page_t* page, const void* p) {
  const size_t ofs = (size_t)((const uint8_t*)p - page->page_start);   // huge below the start
  return (ofs <= page->block_last && (ofs % MI_INTPTR_SIZE) == 0);
}

static inline bool mi_free_ptr_check(const mi_page_t* page, const void* p) {
  #if (MI_PADDING > 0)
  if (mi_likely(mi_free_ptr_in_range(page, p))) return true;
  #else
  // (no trailer to tell a block's start: the multiply)
  if (mi_likely(mi_free_ptr_in_range(page, p) &&
                mi_page_ofs_is_block_start(page, (size_t)((const uint8_t*)p - page->page_start)))) return true;
  #endif
  return mi_free_ptr_check_slow(page, p);
}
#endif

#if (defined(MI_CHECKED_FAST_PATHS) && (MI_PADDING > 0)) || defined(MI_FULL_FAST_PATH)
// How the owner's fast paths (FULL's, and ON's built with the trailer) begin: the pointer in its
// page's blocks, the block's own trailer live with its fill intact.
// `*trailer` and `*key`: the block's trailer and key, for its free state.
// (Huge blocks, whose size is a call away, and 8-byte blocks, with no room
// for checks, never come here: their pages are MI_PAGE_CHECK_SLOW.)
static mi_decl_forceinline bool mi_free_fast_own(const mi_page_t* page, const mi_block_t* block, uint8_t** trailer, uint64_t* key) {
  if (mi_unlikely(!mi_free_ptr_in_area(page, block))) return false;
  const size_t bsize = page->xblock_size;
  mi_assert_internal(bsize < MI_HUGE_BLOCK_SIZE && bsize >= MI_PADDING_SIZE + sizeof(mi_block_t));
  const size_t usable = bsize - MI_PADDING_SIZE;
  *trailer = mi_trailer_of(block, usable);
  *key = mi_trailer_key(page, block);
  const uint64_t state = mi_trailer_load(*trailer) ^ *key;
  return (mi_likely(mi_trailer_state_is_live(state, usable) && mi_trailer_fill_intact(block, usable, (size_t)(state >> 32))));
}
#endif

#if defined(MI_CHECKED_FAST_PATHS) && (MI_PADDING > 0)
// The owner's fast path of ON built with the trailer: mi_free_fast_own's
// checks; then the trailer reads free. Anything else (not a block's start, a
// double free, an overflow) returns false, having changed nothing, and the
// caller hands the free to mi_free_generic, whose checks say what it is.
// (Only tail calls leave this path: no registers to save on the way in.)
static inline bool mi_free_fast_checked(const mi_page_t* page, mi_block_t* block) {
  uint8_t* trailer; uint64_t key;
  if (!mi_free_fast_own(page, block, &trailer, &key)) return false;
  mi_trailer_store(trailer, key ^ MI_TRAILER_FREE);
  return true;
}
#elif defined(MI_CHECKED_FAST_PATHS)
// The owner's fast path in the secure profile ON (no trailer): the pointer
// is a block's start in the page's area (a compare and a multiply), and the
// block's first word does not decode as a link of its page (a free block's
// does: the double-free probe). Anything else returns false, having changed
// nothing, and mi_free_generic checks again (the lists, for the probe) and
// reports. (Only tail calls leave this path.)
static inline bool mi_free_fast_checked(const mi_page_t* page, mi_block_t* block) {
  const size_t ofs = (size_t)((const uint8_t*)block - page->page_start);   // (huge below the start)
  if (mi_unlikely(ofs > page->block_last || !mi_page_ofs_is_block_start(page, ofs))) return false;
  return !mi_link_is_plausible(page, block);
}
#endif

#if defined(MI_FULL_FAST_PATH)
// A neighbour of a block the owner frees: live with its fill intact, or free
// with a link into the page's blocks.
static inline bool mi_free_neighbour_ok(const mi_page_t* page, const mi_block_t* neighbour, size_t usable) {
  const uint64_t state = mi_trailer_state(page, neighbour, usable);
  if (mi_trailer_state_is_live(state, usable)) return mi_trailer_fill_intact(neighbour, usable, (size_t)(state >> 32));
  return mi_trailer_state_is_free(page, state);
}

// The owner's fast path in FULL: the checks of mi_free_check_trailers in one
// leaf, and nothing changes until they all passed: mi_free_fast_own's, and
// the neighbours below and above live and intact or free; then the trailer reads free with the
// link to the page's local_free, and the block is zeroed. Anything else
// returns false, and mi_free_generic checks again and reports (a damaged
// neighbour too). (Pages of huge blocks and 8-byte blocks are
// MI_PAGE_CHECK_SLOW and never come here.)
static inline bool mi_free_fast_full(const mi_page_t* page, mi_block_t* block) {
  uint8_t* trailer; uint64_t key;
  if (!mi_free_fast_own(page, block, &trailer, &key)) return false;
  const size_t bsize = page->xblock_size;
  const size_t usable = bsize - MI_PADDING_SIZE;
  if (MI_CHECK_NEIGHBOURS) {
    const mi_block_t* const below = (const mi_block_t*)((const uint8_t*)block - bsize);
    if (((const uint8_t*)block >= page->page_start + bsize || page->has_front_canary) &&
        mi_unlikely(!mi_free_neighbour_ok(page, below, usable))) return false;
    const mi_block_t* const above = (const mi_block_t*)((const uint8_t*)block + bsize);
    if ((const uint8_t*)above < page->page_start + (size_t)page->capacity * bsize &&
        mi_unlikely(!mi_free_neighbour_ok(page, above, usable))) return false;
  }
  if (mi_page_zeroes_on_free(page) && usable > MI_ZERO_CHECK_WHOLE) {
    // (the free that zeroes a larger block whole: mi_free_check_trailers)
    mi_heap_t* const heap = mi_page_heap(page);   // (the owner's: this thread's)
    if (heap->zero_check_countdown <= 0) return false;
    heap->zero_check_countdown--;
  }
  mi_trailer_store(trailer, key ^ mi_trailer_free_state(page, page->local_free));   // (before the zeroing, as mi_free_check_trailers)
  if (mi_page_zeroes_on_free(page)) mi_block_zero_freed(block, usable, false);
  return true;
}
#endif

// ---------------------------------------------------------------------------
// The hooks on free (free.c); constants in a release build
// ---------------------------------------------------------------------------

// Before anything is read at the segment address of a freed pointer: is it
// in one of our segments? (Release builds read the page's heap there
// unchecked: a foreign one sends the free to mi_free_generic, which checks.)
static mi_decl_forceinline bool mi_free_check_segment(const mi_segment_t* segment, const void* p) {
  #if defined(MI_FREE_CHECK_PTR) || (MI_DEBUG > 0)
  return (mi_segment_map_contains(segment) && (size_t)((const uint8_t*)p - (const uint8_t*)segment) < segment->segment_size);   // (segment-map.c)
  #else
  (void)segment; (void)p;
  return true;
  #endif
}

// The owner's fast path (a non-full page without aligned blocks), silent:
// true when the block passed every check and is free now (its trailer says
// so; with MI_TRAILER_LINK it links to the page's local_free already);
// false, having changed nothing, hands the free to mi_free_generic, whose
// checks say what is wrong.
static inline bool mi_free_check_fast(mi_page_t* page, mi_block_t* block) {
  #if defined(MI_CHECKED_FAST_PATHS)
  return mi_free_fast_checked(page, block);
  #elif defined(MI_FULL_FAST_PATH)
  return mi_free_fast_full(page, block);
  #elif defined(MI_FREE_CHECK_PTR)
  return (mi_free_ptr_in_area(page, block) && mi_free_checks(page, block, true, true, false));
  #else
  return mi_free_checks(page, block, true, true, false);
  #endif
}

// mi_free_generic: may a free take this pointer of this page? (Reported if not.)
static inline bool mi_free_check_ptr(const mi_page_t* page, const void* p) {
  #if defined(MI_FREE_CHECK_PTR)
  return mi_free_ptr_check(page, p);
  #else
  (void)page; (void)p;
  return true;
  #endif
}

// mi_free_generic: the checks of the block (reported); false: do not free.
static inline bool mi_free_check(mi_page_t* page, mi_block_t* block, bool local) {
  return mi_free_checks(page, block, local, false, true);
}

#if !defined(MI_ZERO_AREA)
// A pointer outside every segment is never a malloc(0) block here.
static inline bool mi_zero_free(const void* p) {
  (void)p;
  return false;
}
#endif


#if (MI_PADDING > 0)
// ---------------------------------------------------------------------------
// Checked builds: a block's trailer knows the size asked for and whether C++
// new[] allocated it, so delete and delete[] are told apart, a sized delete
// is checked against the size, and an in-place realloc moves the trailer's
// fill to the new end.
// ---------------------------------------------------------------------------

// The live block holding p, a pointer we handed out (NULL otherwise: free
// reports those), with its page, usable size and trailer state.
static mi_block_t* mi_live_block_of(const void* p, mi_page_t** ppage, size_t* usable, uint64_t* state) {
  if (p == NULL) return NULL;
  const mi_segment_t* const s = _mi_ptr_segment(p);
  if ((const void*)s != p && !_mi_segment_holds(s, p)) return NULL;
  mi_segment_t* segment;
  mi_page_t* const page = _mi_ptr_page(p, &segment);
  if (page == NULL || !page->segment_in_use || page->xblock_size == 0) return NULL;
  mi_block_t* const block = (mi_page_has_aligned(page) ? _mi_page_ptr_unalign(segment, page, p) : (mi_block_t*)p);
  if (!mi_page_is_block_start(page, block)) return NULL;
  *usable = mi_page_usable_block_size(page);
  if (*usable < sizeof(mi_block_t)) return NULL;
  *state = mi_trailer_state(page, block, *usable);
  if (!mi_trailer_state_is_live(*state, *usable)) return NULL;
  *ppage = page;
  return block;
}

// A fresh block from C++ new[]: its trailer gets the array bit.
void* _mi_new_array_mark(void* p) {
  mi_page_t* page; size_t usable; uint64_t state;
  mi_block_t* const block = mi_live_block_of(p, &page, &usable, &state);
  if (block != NULL) {
    uint8_t* const trailer = mi_trailer_of(block, usable);
    mi_trailer_store(trailer, mi_trailer_load(trailer) ^ MI_TRAILER_ARRAY);   // (the state's bit was clear)
  }
  return p;
}

// C++ delete (array: delete[]) of p; `size` is a sized delete's size, or
// SIZE_MAX. A mismatch is reported and the block is freed all the same.
void _mi_free_delete(void* p, size_t size, bool array) mi_attr_noexcept {
  mi_page_t* page; size_t usable; uint64_t state;
  const mi_block_t* const block = mi_live_block_of(p, &page, &usable, &state);
  if (block != NULL) {
    const bool is_array = ((state & MI_TRAILER_ARRAY) != 0);
    const size_t asked = usable - (size_t)(state >> 32) - (size_t)((const uint8_t*)p - (const uint8_t*)block);
    if (is_array != array) {
      _mi_misuse_message(EINVAL, (array ? "delete[] of a block not allocated by new[]: %p\n"
                                        : "delete of a block allocated by new[] (delete[] expected): %p\n"), p);
    }
    else if (size != SIZE_MAX && size != asked) {
      _mi_misuse_message(EINVAL, "sized delete of block %p with the wrong size %zu (it was allocated with %zu)\n", p, size, asked);
    }
  }
  mi_free(p);
}

// The trailer of the block holding p says that the user asked for `newsize`
// bytes from p on: a realloc in place, an aligned block inside a larger one.
void _mi_block_set_size(void* p, size_t newsize) {
  mi_page_t* page; size_t usable; uint64_t state;
  mi_block_t* const block = mi_live_block_of(p, &page, &usable, &state);
  if (block == NULL) return;
  const size_t adjust = (size_t)((uint8_t*)p - (uint8_t*)block);
  mi_assert_internal(newsize + adjust <= usable);
  mi_trailer_set_live(page, block, usable, usable - (newsize + adjust));
  if ((state & MI_TRAILER_ARRAY) != 0) _mi_new_array_mark(p);
}
#endif

#if defined(MI_CHECKED_MEMCPY)
// ---------------------------------------------------------------------------
// The checked memcpy, memmove and memset (alloc-override.c)
// ---------------------------------------------------------------------------

// The index of the block at `ofs` in the block area of a page that is not
// huge (an offset below 2^32), without a division where the page keeps its
// block_divisor (2^64 / size, rounded up): the high half of the product is
// the quotient.
static inline size_t mi_page_block_index(const mi_page_t* page, uint64_t ofs) {
  mi_assert_internal(ofs <= UINT32_MAX && page->xblock_size < MI_HUGE_BLOCK_SIZE);
  #if (MI_PADDING == 0) && defined(__SIZEOF_INT128__)
  return (size_t)(((unsigned __int128)ofs * (unsigned __int128)page->block_divisor) >> 64);
  #else
  return (size_t)(ofs / page->xblock_size);
  #endif
}

// The block of ours that holds dst (NULL for none), with its page and size.
// (Inlined into memcpy, memmove and memset: no call on the way. `huge`: a
// huge page's block is looked up too, whose size is a call away; else such
// a dst gives MI_BLOCK_HUGE.)
#define MI_BLOCK_HUGE  ((const uint8_t*)1)
static mi_decl_forceinline const uint8_t* mi_block_holding(const void* dst, bool huge, const mi_page_t** ppage, size_t* pbsize) {
  const mi_segment_t* const segment = _mi_ptr_segment(dst);
  if ((const void*)segment == dst || !mi_segment_map_contains(segment) ||
      (size_t)((const uint8_t*)dst - (const uint8_t*)segment) >= segment->segment_size) return NULL;   // not in a segment of ours
  const mi_page_t* const page = _mi_segment_page_of(segment, dst);
  if (!page->segment_in_use || page->xblock_size == 0 || (const uint8_t*)dst < page->page_start) return NULL;
  const size_t ofs = (uintptr_t)dst - (uintptr_t)page->page_start;
  size_t bsize, idx;
  if (mi_likely(page->xblock_size < MI_HUGE_BLOCK_SIZE)) {
    bsize = page->xblock_size;
    idx = mi_page_block_index(page, ofs);
  }
  else {
    if (!huge) return MI_BLOCK_HUGE;
    bsize = mi_page_block_size(page);
    idx = ofs / bsize;
  }
  if (idx >= mi_page_capacity_shared(page)) return NULL;
  *ppage = page;
  *pbsize = bsize;
  return (page->page_start + idx * bsize);
}

// A write of n bytes at dst: when dst is inside one of our blocks, the write
// must stay within it: FULL, within the size asked for, and the block must be
// live (its trailer); ON, which has no trailer, within the block (malloc(64)'s
// block is 64 bytes: a 65-byte copy is caught, one into malloc(60)'s slack is
// not). `report`: say what is wrong (as a misuse), naming the call `fun`;
// false when something is.
static mi_decl_forceinline bool mi_check_writex(const void* dst, size_t n, const char* fun, bool report) {
  const mi_page_t* page; size_t bsize;
  const uint8_t* const block = mi_block_holding(dst, report, &page, &bsize);
  if (block == NULL) return true;
  if (block == MI_BLOCK_HUGE) return false;   // (the reporting check looks closer)
  #if (MI_PADDING > 0)
  const size_t usable = bsize - MI_PADDING_SIZE;
  if (usable < sizeof(mi_block_t)) return true;
  const uint64_t state = mi_trailer_state(page, (const mi_block_t*)block, usable);
  if (mi_trailer_state_is_free(page, state)) {
    if (report) _mi_misuse_message(EFAULT, "write after free: %s of %zu bytes at %p, in freed heap block %p\n", fun, n, dst, (const void*)block);
    return false;
  }
  if (!mi_trailer_state_is_live(state, usable)) return true;   // (a damaged trailer is reported when the block is freed)
  const uint8_t* const limit = block + usable - (size_t)(state >> 32);
  #else
  (void)page;
  const uint8_t* const limit = block + bsize;
  #endif
  if (mi_likely(limit >= (const uint8_t*)dst && (size_t)(limit - (const uint8_t*)dst) >= n)) return true;   // (FULL: dst may be past the size asked for)
  if (report) {
    _mi_misuse_message(EFAULT, "buffer overflow by %s: %zu bytes at %p run %zu bytes past the end of heap block %p of size %zu\n",
                       fun, n, dst, (size_t)((uintptr_t)dst + n - (uintptr_t)limit), (const void*)block, (size_t)(limit - block));
  }
  return false;
}

// The report, when the silent check found something (cold).
static mi_decl_noinline mi_decl_cold void mi_check_write_report(const void* dst, size_t n, const char* fun) {
  mi_check_writex(dst, n, fun, true);
}
#endif
