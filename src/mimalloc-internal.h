/* ----------------------------------------------------------------------------
  mimalloc-internal.h -- cross-file prototypes, grouped under the file that
  defines them, followed by the hot `static inline` helpers (pointer to
  segment/page, free-list links, thread id, the default heap).
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MIMALLOC_INTERNAL_H
#define MIMALLOC_INTERNAL_H

#include "mimalloc.h"
#include "mimalloc-types.h"
#include <string.h>   // memset, memcpy
#include <errno.h>
#if defined(_MSC_VER)
#include <intrin.h>   // __readgsqword
#endif

#if defined(_MSC_VER)
#define mi_decl_noinline        __declspec(noinline)
#define mi_decl_forceinline     __forceinline
#elif defined(__GNUC__)
#define mi_decl_noinline        __attribute__((noinline))
#define mi_decl_forceinline     inline __attribute__((always_inline))
#else
#define mi_decl_noinline
#define mi_decl_forceinline     inline
#endif

// Thread-local variables are defined with `mi_decl_thread` and read and
// written through `mi_tls(name)`, everywhere. With gcc, clang and MSVC on
// ELF systems and MSVC on Windows that is the plain variable in the
// compiler's native thread-local storage: one load relative to the thread
// pointer (initial-exec model). gcc for Windows (mingw-w64) has no native
// thread-local storage: its `__thread` is emulated by a call into libgcc
// that allocates each thread's copy with malloc (recursion in an allocator
// that is malloc). There the variable goes into the image's TLS template
// (section `.tls$MI`, sorted before the C runtime's end marker `.tls$ZZZ`),
// which the Windows loader copies for every thread, and `mi_tls` reads the
// thread's copy as MSVC's code does: the TEB's TLS array (gs:0x58), the
// image's slot in it (`_tls_index`), the variable's offset in the template
// (a section-relative relocation): four instructions, no call.
#if defined(_WIN32) && defined(__GNUC__) && !defined(__clang__)
#if !defined(__x86_64__)
#error "the thread-local storage of mingw-w64 gcc builds is written for x86-64"
#endif
#define mi_decl_thread          __attribute__((section(".tls$MI")))
#define mi_tls_address(name)    __extension__ ({ \
    uint8_t* _mi_tls_p; uintptr_t _mi_tls_i; \
    __asm__("movq %%gs:0x58, %0\n\t" \
            "movl _tls_index(%%rip), %k1\n\t" \
            "movq (%0,%1,8), %0\n\t" \
            "leaq %c2@SECREL32(%0), %0" \
            : "=&r" (_mi_tls_p), "=&r" (_mi_tls_i) : "i" (&(name))); \
    (__typeof__(name)*)_mi_tls_p; })
#define mi_tls(name)            (*mi_tls_address(name))
// (a pointer variable read in the same four instructions, the last one the
// load itself: the default heap on the fast paths)
#define mi_tls_pointer(name)    __extension__ ({ \
    _Static_assert(sizeof(name) == sizeof(void*), "mi_tls_pointer reads a pointer"); \
    __typeof__(name) _mi_tls_v; uintptr_t _mi_tls_i; \
    __asm__("movq %%gs:0x58, %0\n\t" \
            "movl _tls_index(%%rip), %k1\n\t" \
            "movq (%0,%1,8), %0\n\t" \
            "movq %c2@SECREL32(%0), %0" \
            : "=&r" (_mi_tls_v), "=&r" (_mi_tls_i) : "i" (&(name))); \
    _mi_tls_v; })
#elif defined(_MSC_VER)
#define mi_decl_thread          __declspec(thread)
#define mi_tls(name)            (name)
#define mi_tls_pointer(name)    (name)
#else
#define mi_decl_thread          __thread
#define mi_tls(name)            (name)
#define mi_tls_pointer(name)    (name)
#endif

// A function whose reads of other threads' plain fields are benign races on
// purpose: ThreadSanitizer does not instrument it (segment-walk.c, usage figures).
#if defined(MI_TSAN)
#define mi_decl_no_tsan    __attribute__((no_sanitize("thread")))
#else
#define mi_decl_no_tsan
#endif

#if defined(__GNUC__)
#define mi_unlikely(x)     __builtin_expect(!!(x), 0)
#define mi_likely(x)       __builtin_expect(!!(x), 1)
#define mi_decl_cold       __attribute__((cold))
#if defined(__MINGW32__)   // (mingw-w64's C99 printf: static.c asks for it)
#define mi_attr_printf(fmt_index, args_index)  __attribute__((format(gnu_printf, fmt_index, args_index)))
#else
#define mi_attr_printf(fmt_index, args_index)  __attribute__((format(printf, fmt_index, args_index)))
#endif
#else
#define mi_unlikely(x)     (x)
#define mi_likely(x)       (x)
#define mi_decl_cold
#define mi_attr_printf(fmt_index, args_index)
#endif

// options.c
void   _mi_options_init(void);
void   _mi_fputs(mi_output_fun* out, void* arg, const char* prefix, const char* message);
void   _mi_verbose_message(const char* fmt, ...);
void   _mi_warning_message(const char* fmt, ...);
void   _mi_error_message(int err, const char* fmt, ...);
void   _mi_misuse_message(int err, const char* fmt, ...);   // heap misuse: fatal in secure builds
void   _mi_errors_print_at_exit(void);
int64_t _mi_purge_delay(void);   // option reset_delay, capped (ms)
const char* _mi_option_text(mi_option_text_t option);   // "" when not set
size_t _mi_option_path(mi_option_text_t option, char* buf, size_t size);   // a file name option, %p expanded: its length (as snprintf)
mi_decl_cold void _mi_assert_fail(const char* assertion, const char* fname, unsigned int line, const char* func);

// alloc-override-win.c (the Windows override DLL)
#if defined(MI_WIN_REDIRECT)
void   _mi_redirect_init(void);   // patch the C runtime DLLs (at load)
bool   _mi_is_redirected(void);   // they were patched
#endif

// init.c
extern mi_decl_thread mi_heap_t* _mi_heap_default;  // the thread's default heap
extern const mi_heap_t _mi_heap_empty;              // read-only empty heap (all queues empty)
extern const mi_page_t _mi_page_empty;              // read-only empty page (free list NULL)
extern mi_heap_t       _mi_heap_main;               // the main thread's backing heap
extern bool            _mi_process_is_initialized;
uintptr_t  _mi_random_shuffle(uintptr_t x);
size_t     _mi_thread_live_count(void);      // threads with an initialised heap now
bool       _mi_housekeeping_enter(void);     // a section that holds region blocks or abandoned segments for a moment (false: a fork is under way, skip it)
void       _mi_housekeeping_leave(void);
bool       _mi_housekeeping_await(void);     // wait for other threads' sections; true if it waited
void       _mi_orphans_collect(bool force);  // abandon the orphan heaps that waited their delay (all: forced)
void       _mi_heap_set_default_direct(mi_heap_t* heap);

// stats.c
extern mi_stats_t _mi_stats_main;
void       _mi_stat_update(mi_stats_t* local, mi_stat_count_t* stat, int64_t amount);
void       _mi_stat_counter_add(mi_stats_t* local, mi_stat_counter_t* stat, int64_t amount);
void       _mi_stat_touched_update(mi_stats_t* local, int64_t amount);
void       _mi_stat_local_update(mi_stat_count_t* stat, int64_t amount);
void       _mi_stat_counter_local_add(mi_stat_counter_t* stat, int64_t amount);
void       _mi_stats_done(mi_stats_t* stats);
void       _mi_stats_print_at_exit(void);
void       _mi_stats_interval_tick(void);                   // JSON snapshot to stats_file when due
void       _mi_stats_process_init(void);                    // start the snapshot writer thread if asked for
size_t     _mi_stats_json_of(const mi_stats_snapshot_t* st, char* buf, size_t size);   // the JSON: its length (as snprintf)
int64_t    _mi_clock_start(void);
int64_t    _mi_stats_released(void);   // bytes purged or unmapped so far (grows when memory goes back)

// prof.c
#define MI_PROF_UNARMED  (INT64_MIN / 2)   // prof_countdown of a new heap: the first allocation arms it
void*      _mi_prof_malloc_sampled(mi_heap_t* heap, mi_page_t* page, void* block, size_t size);  // prof_countdown ran out; returns block
void       _mi_prof_free(mi_page_t* page, const void* block);   // a block of a page with MI_PAGE_HAS_SAMPLED is freed
void       _mi_prof_forget_page(mi_page_t* page);           // the page is freed with its blocks (heap destroy)
void       _mi_prof_process_init(void);
void       _mi_prof_fork_child(void);
void       _mi_prof_dump_at_exit(void);
size_t     _mi_prof_live_samples(void);

// Update a counter in the thread's block `stats` (may be NULL) and the process block.
#define mi_stat_increase(stats, stat, amount)  _mi_stat_update((stats), &_mi_stats_main.stat, (int64_t)(amount))
#define mi_stat_decrease(stats, stat, amount)  _mi_stat_update((stats), &_mi_stats_main.stat, -(int64_t)(amount))
// the `touched` row of a thread: exact in the thread's block, added to the process block in batches
#define mi_stat_touched_update(stats, amount)  _mi_stat_touched_update((stats), (int64_t)(amount))
#define mi_stat_counter_increase(stats, stat, amount)  _mi_stat_counter_add((stats), &_mi_stats_main.stat, (int64_t)(amount))

// Per-allocation counters (MI_STAT > 1): the thread's block only.
#if (MI_STAT > 1)
#define mi_heap_stat_increase(heap, stat, amount)  _mi_stat_local_update(&(heap)->tld->stats.stat, (int64_t)(amount))
#define mi_heap_stat_decrease(heap, stat, amount)  _mi_stat_local_update(&(heap)->tld->stats.stat, -(int64_t)(amount))
#define mi_heap_stat_counter_increase(heap, stat, amount)  _mi_stat_counter_local_add(&(heap)->tld->stats.stat, (int64_t)(amount))
#else
#define mi_heap_stat_increase(heap, stat, amount)  ((void)0)
#define mi_heap_stat_decrease(heap, stat, amount)  ((void)0)
#define mi_heap_stat_counter_increase(heap, stat, amount)  ((void)0)
#endif

// random.c
void       _mi_random_init(mi_random_ctx_t* ctx);
void       _mi_random_init_seed(mi_random_ctx_t* ctx, const uint64_t seed[4]);
void       _mi_chacha20_block(const uint32_t input[16], uint32_t output[16]);
void       _mi_random_split(mi_random_ctx_t* ctx, mi_random_ctx_t* new_ctx);
uintptr_t  _mi_heap_random_next(mi_heap_t* heap);
#if MI_SECURE_RANDOM_EXTEND
bool       _mi_heap_random_coin(mi_heap_t* heap);
#endif
uintptr_t  _mi_os_random_weak(uintptr_t extra_seed);

// os.c
void       _mi_os_init(void);
bool       _mi_os_has_overcommit(void);
void       _mi_os_init_hint(uintptr_t random);   // process start: the random start of the hint area
size_t     _mi_os_page_size(void);
size_t     _mi_os_cpu_count(void);   // processors online at start (>= 1)
size_t     _mi_os_good_alloc_size(size_t size);
void*      _mi_os_alloc(size_t size);                       // committed, for metadata
void       _mi_os_free(void* p, size_t size);
void       _mi_os_free_ex(void* p, size_t size, size_t committed);
void*      _mi_os_alloc_aligned_at(size_t size, size_t alignment, size_t align_offset,
                                   bool commit, bool allow_large, bool* is_pinned, bool* is_zero);
bool       _mi_os_commit(void* p, size_t size, bool* is_zero);
bool       _mi_os_decommit(void* p, size_t size);
bool       _mi_os_purge(void* p, size_t size);             // drop pages, keep access, reads zeros
size_t     _mi_os_inward_size(void* p, size_t size);       // what a purge of the range covers
bool       _mi_os_can_populate(void);
bool       _mi_os_populate(void* p, size_t size);          // fault in for writing, one call
size_t     _mi_os_resident(void* p, size_t size);          // resident bytes (SIZE_MAX: unknown)
size_t     _mi_os_numa_node_count(void);                   // option use_numa_nodes, else detected
size_t     _mi_os_numa_node(void);                         // the calling thread's node
bool       _mi_os_numa_prefer(void* p, size_t size, size_t node);
void*      _mi_os_alloc_huge_os_page(int numa_node, size_t* page_size, int* err);   // one GiB, pinned
bool       _mi_os_protect(void* p, size_t size);
bool       _mi_os_unprotect(void* p, size_t size);

// region.c
void*      _mi_region_alloc(size_t size, bool commit, bool allow_pinned, bool* is_committed,
                            bool* is_pinned, bool* is_zero, uint64_t* word, mi_memid_t* memid, mi_segments_tld_t* tld);   // *word: what the blocks' last users left (or-ed)
void       _mi_region_free(void* p, size_t size, mi_memid_t memid, bool fully_committed, bool purge_now, uint64_t word);   // word: left for the block's next user (region blocks only)
bool       _mi_regions_check_claims(void);   // (tests) every claimed block belongs to a segment
bool       _mi_region_collect(bool force, bool free_unused);   // false: skipped (a fork is under way)
void       _mi_region_try_purge(void);
void       _mi_regions_usage(size_t* free_resident, size_t* releasable);   // freed blocks that may be resident (bytes), and those a purge returns

// segment-map.c
bool       _mi_segment_map_allocated_at(const mi_segment_t* segment);   // false: above the covered range
void       _mi_segment_map_freed_at(const mi_segment_t* segment);
bool       _mi_segment_map_contains(const void* segment);
void       _mi_segment_map_visit(void (*fn)(mi_segment_t* segment, void* arg), void* arg);        // (nothing may free segments meanwhile)
void       _mi_segment_map_visit_held(void (*fn)(mi_segment_t* segment, void* arg), void* arg);   // while other threads run: each segment held during its call
void       _mi_segment_map_fork_child(void);
mi_page_t* _mi_ptr_page_of(const void* p);
mi_page_t* _mi_ptr_page(const void* p, mi_segment_t** psegment);
mi_segment_t* _mi_segment_of_unit_aligned(const void* p);

// segment.c
#define _mi_segments_tld_stats(tld)  (((mi_tld_t*)((uint8_t*)(tld) - offsetof(mi_tld_t, segments)))->stats)
mi_page_t* _mi_segment_page_alloc(mi_heap_t* heap, size_t block_size, size_t page_alignment, size_t align_offset, mi_segments_tld_t* tld);
void       _mi_segment_page_free(mi_page_t* page, bool force, mi_segments_tld_t* tld);
void       _mi_segment_page_abandon(mi_page_t* page, mi_segments_tld_t* tld);
uint8_t*   _mi_segment_page_start(const mi_segment_t* segment, const mi_page_t* page, size_t block_size, size_t* page_size, size_t* pre_size);
void       _mi_segments_try_purge(void);     // the pending huge purges, the abandoned sweep and the shared segments' purges, when due
void       _mi_segments_collect(bool force, mi_segments_tld_t* tld);
size_t     _mi_segment_big_aligned_ofs(size_t align_offset);   // 0: no place for such a pointer
void       _mi_segment_free_remote(mi_segment_t* segment, mi_page_t* page, mi_block_t* block, uintptr_t owner);   // free.c's remote frees
void       _mi_segments_fork_child(void);
void       _mi_segments_fork_prepare(void);
void       _mi_segments_fork_parent(void);
void       _mi_regions_fork_child(void);
bool       _mi_region_resident_free_above(size_t size);
void       _mi_segment_set_owner(mi_segment_t* segment, uintptr_t owner);
void       _mi_segment_huge_release_at(size_t min_size);   // huge blocks of at least this size go back at once when freed

// segment-walk.c
size_t     _mi_segments_trim(void);          // purge the free pages of every thread's segments: the bytes purged
void       _mi_segments_usage(mi_usage_t* usage);   // the mallinfo figures

// purge-thread.c: the due table (when each process-wide purge falls due) and
// the background thread that runs them
typedef enum mi_due_e {
  MI_DUE_REGION,      // freed segments' memory in the regions (region.c)
  MI_DUE_HUGE,        // huge blocks other threads freed (segment.c, "Huge blocks freed by another thread")
  MI_DUE_SWEEP,       // the sweep of the abandoned pages whose blocks all came back (segment.c)
  MI_DUE_SHARED,      // the shared segments' page purges (segment.c)
  MI_DUE_ORPHANS,     // the orphan heaps (init.c)
  MI_DUE_COUNT
} mi_due_t;
#define MI_DUE_SEGMENTS  ((1u << MI_DUE_HUGE) | (1u << MI_DUE_SWEEP) | (1u << MI_DUE_SHARED))   // what _mi_segments_try_purge runs
extern _Atomic(int64_t) _mi_due_times[MI_DUE_COUNT];   // read inline by _mi_due_at
void       _mi_due_note(mi_due_t kind, int64_t expire);   // `kind` is due at `expire` (ms) at the latest; wakes the purge thread
int64_t    _mi_due_claim(mi_due_t kind, int64_t now, bool force);   // take the due time if it passed (any pending one if forced): the taker does the work; 0: not due, or taken by another thread
bool       _mi_due_enter(mi_due_t kind, int64_t now);   // claim, inside a housekeeping section (put back while a fork is under way)
void       _mi_due_leave(mi_due_t kind);              // end of that section; the purge thread is noted if `kind` is pending again
void       _mi_due_fork_child(mi_due_t kind);         // in a forked child: nothing of `kind` is pending
extern _Atomic(uintptr_t) _mi_purger_state;
void       _mi_purger_start(void);          // (through _mi_purger_poll)
void       _mi_purger_fork_child(void);
void       _mi_purger_threads_changed(void);  // the count of threads with a heap changed

// page-queue.c
size_t     _mi_bin_size(uint8_t bin);
mi_page_queue_t* _mi_page_queue(const mi_heap_t* heap, size_t size);
void       _mi_page_queue_push(mi_heap_t* heap, mi_page_queue_t* queue, mi_page_t* page);
void       _mi_page_queue_remove(mi_page_queue_t* queue, mi_page_t* page);
void       _mi_page_queue_enqueue_from(mi_page_queue_t* to, mi_page_queue_t* from, mi_page_t* page);
size_t     _mi_page_queue_append(mi_heap_t* heap, mi_page_queue_t* pq, mi_page_queue_t* append);

// page.c
void*      _mi_malloc_generic(mi_heap_t* heap, size_t size) mi_attr_noexcept;
void       _mi_page_extend_free(mi_page_t* page);
void       _mi_page_unretire(mi_heap_t* heap, mi_page_t* page);
#if MI_SECURE_RANDOM
bool       _mi_page_refill_random(mi_heap_t* heap, mi_page_t* page);
#endif

// The blocks the owner freed become the allocation list (the list is empty).
static inline void _mi_page_take_local_free(mi_page_t* page) {
  page->free = page->local_free;
  page->local_free = NULL;
  page->is_zero = false;
}

void       _mi_page_free_collect(mi_page_t* page, bool force);
void       _mi_page_reclaim(mi_heap_t* heap, mi_page_t* page);
void       _mi_page_retire(mi_page_t* page) mi_attr_noexcept;
void       _mi_page_unfull(mi_page_t* page);
void       _mi_page_free(mi_page_t* page, mi_page_queue_t* pq, bool force);
void       _mi_page_abandon(mi_page_t* page, mi_page_queue_t* pq);
void       _mi_page_use_delayed_free(mi_page_t* page, mi_delayed_t delay, bool override_never);
bool       _mi_page_try_use_delayed_free(mi_page_t* page, mi_delayed_t delay, bool override_never);
void       _mi_heap_delayed_free(mi_heap_t* heap);
void       _mi_heap_collect_retired(mi_heap_t* heap, bool all, bool purge_now);
void       _mi_deferred_free(mi_heap_t* heap, bool force);
mi_page_t* _mi_huge_page_alloc(mi_heap_t* heap, size_t size, size_t page_alignment, size_t align_offset);

// heap.c
void       _mi_heap_collect_abandon(mi_heap_t* heap);
void       _mi_heap_set_owner(mi_heap_t* heap, uintptr_t owner);

// alloc.c
void*      _mi_page_malloc(mi_heap_t* heap, mi_page_t* page, size_t size) mi_attr_noexcept;
void*      _mi_page_malloc_any(mi_heap_t* heap, mi_page_t* page, size_t size) mi_attr_noexcept;
void*      _mi_heap_malloc_zero(mi_heap_t* heap, size_t size, bool zero) mi_attr_noexcept;
void*      _mi_heap_realloc_zero(mi_heap_t* heap, void* p, size_t newsize, bool zero) mi_attr_noexcept;
void       _mi_realloc_move(void* newp, void* p, size_t size, size_t newsize, bool zero);
void       _mi_block_zero_init(const mi_page_t* page, void* p, size_t size);
mi_block_t* _mi_page_ptr_unalign(const mi_segment_t* segment, const mi_page_t* page, const void* p);
bool       _mi_free_delayed_block(mi_block_t* block);
bool       _mi_free_block_mt(mi_page_t* page, mi_block_t* block, bool await_abandon);   // a remote free: push on the page's thread_free (false: the page is being abandoned and `await_abandon`)
#if (MI_PADDING > 0)
void*      _mi_new_array_mark(void* p);
void       _mi_free_delete(void* p, size_t size, bool array) mi_attr_noexcept;
void       _mi_block_set_size(void* p, size_t newsize);
#endif
// The library's own writes into blocks (fills, zeroing) use the C library's
// memset: the secure library's exported memset checks that its destination
// is a live block written within its size, which these writes need not be.
#if defined(MI_CHECKED_MEMCPY)
void       _mi_memset(void* p, int c, size_t n);   // alloc-override.c
#else
static inline void _mi_memset(void* p, int c, size_t n) { memset(p, c, n); }
#endif
static inline void _mi_memzero(void* p, size_t n) { _mi_memset(p, 0, n); }
#if defined(MI_ZERO_AREA)
void*      _mi_zero_alloc(void);
bool       _mi_zero_area_contains(const void* p);
#endif

// ------------------------------------------------------
// Assertions (graded: see MI_DEBUG in mimalloc-types.h). Disabled level 1
// and 2 asserts still type-check their expression (never evaluated); level 3
// asserts call validators that only exist at level 3. A failing assert never
// allocates.
// ------------------------------------------------------

#define mi_assert_always(expr)  ((expr) ? (void)0 : _mi_assert_fail(#expr, __FILE__, __LINE__, __func__))

#if (MI_DEBUG >= 1)
#define mi_assert(x)          mi_assert_always(x)
#else
#define mi_assert(x)          ((void)(0 && (x)))
#endif
#if (MI_DEBUG >= 2)
#define mi_assert_internal(x) mi_assert_always(x)
#else
#define mi_assert_internal(x) ((void)(0 && (x)))
#endif
#if (MI_DEBUG >= 3)
#define mi_assert_expensive(x) mi_assert_always(x)
#else
#define mi_assert_expensive(x) ((void)0)
#endif

// ------------------------------------------------------
// Arithmetic
// ------------------------------------------------------

#define MI_INIT4(x)   x(),x(),x(),x()
#define MI_INIT8(x)   MI_INIT4(x),MI_INIT4(x)
#define MI_INIT16(x)  MI_INIT8(x),MI_INIT8(x)
#define MI_INIT32(x)  MI_INIT16(x),MI_INIT16(x)
#define MI_INIT64(x)  MI_INIT32(x),MI_INIT32(x)
#define MI_INIT128(x) MI_INIT64(x),MI_INIT64(x)

static inline bool _mi_is_power_of_two(uintptr_t x) {
  return ((x & (x - 1)) == 0);
}

static inline uintptr_t _mi_align_up(uintptr_t sz, size_t alignment) {
  mi_assert_internal(alignment != 0);
  uintptr_t mask = alignment - 1;
  if ((alignment & mask) == 0) return ((sz + mask) & ~mask);
  return (((sz + mask) / alignment) * alignment);
}

static inline uintptr_t _mi_align_down(uintptr_t sz, size_t alignment) {
  uintptr_t mask = alignment - 1;
  if ((alignment & mask) == 0) return (sz & ~mask);
  return ((sz / alignment) * alignment);
}

static inline size_t _mi_divide_up(size_t size, size_t divider) {
  return (divider == 0 ? size : ((size + divider - 1) / divider));
}

static inline size_t _mi_wsize_from_size(size_t size) {
  mi_assert_internal(size <= SIZE_MAX - sizeof(uintptr_t));
  return (size + sizeof(uintptr_t) - 1) / sizeof(uintptr_t);
}

// Overflow-checked multiply.
static inline bool mi_mul_overflow(size_t count, size_t size, size_t* total) {
  return __builtin_mul_overflow(count, size, total);
}

// Overflow-checked count*size for the allocation API: reports EOVERFLOW.
static inline bool mi_count_size_overflow(size_t count, size_t size, size_t* total) {
  if (count == 1) { *total = size; return false; }
  if (mi_unlikely(mi_mul_overflow(count, size, total))) {
    _mi_error_message(EOVERFLOW, "allocation request is too large (%zu * %zu bytes)\n", count, size);
    *total = SIZE_MAX;
    return true;
  }
  return false;
}

// The standard names (malloc, calloc, realloc, ...) fail with ENOMEM, as
// POSIX, glibc and the Windows C runtime say, also for a size no allocation
// can have, where the mi_ names keep 1.6's EOVERFLOW: the result of a failed
// call gets the one for the other (alloc-override.c, alloc-override-win.c).
static inline void* mi_std_result(void* p) {
  if (mi_unlikely(p == NULL) && errno == EOVERFLOW) errno = ENOMEM;
  return p;
}

static inline size_t mi_clz(uintptr_t x) {
  return (x == 0 ? MI_INTPTR_BITS : (size_t)__builtin_clzll(x));   // (ll: long is 32 bits on Windows)
}
static inline size_t mi_ctz(uintptr_t x) {
  return (x == 0 ? MI_INTPTR_BITS : (size_t)__builtin_ctzll(x));
}
static inline size_t mi_popcount(uintptr_t x) {
  return (size_t)__builtin_popcountll(x);
}
// `count` (> 0) set bits starting at bit `idx`
static inline uintptr_t mi_bit_mask(size_t count, size_t idx) {
  mi_assert_internal(count + idx <= MI_INTPTR_BITS && count > 0);
  if (count >= MI_INTPTR_BITS) return ~(uintptr_t)0;
  return (((uintptr_t)1 << count) - 1) << idx;
}
// The run of set bits of x (x != 0) that starts at its lowest set bit: its
// start in *idx, its length returned.
static inline size_t mi_bit_run(uintptr_t x, size_t* idx) {
  const size_t i = mi_ctz(x);
  size_t n = mi_ctz(~(x >> i));   // MI_INTPTR_BITS when the run reaches the top bit
  if (i + n > MI_INTPTR_BITS) n = MI_INTPTR_BITS - i;
  *idx = i;
  return n;
}
// Lower an expiry time (ms, 0 = none) to `expire` if that is earlier.
static inline void mi_atomic_expire_lower(_Atomic(int64_t)* p, int64_t expire) {
  int64_t cur = mi_atomic_load_relaxed(p);
  while ((cur == 0 || expire < cur) && !mi_atomic_cas_weak_acq_rel(p, &cur, expire)) { /* retry */ }
}
// When `kind` falls due next (ms; 0: nothing of it is pending).
static inline int64_t _mi_due_at(mi_due_t kind) {
  return mi_atomic_load_relaxed(&_mi_due_times[kind]);
}
// Is any of `kinds` (a mask of 1 << kind) pending? (Inline: with a constant
// mask it is a load and a test per kind.)
static inline bool _mi_due_any(unsigned kinds) {
  for (size_t kind = 0; kind < MI_DUE_COUNT; kind++) {
    if ((kinds & (1u << kind)) != 0 && _mi_due_at((mi_due_t)kind) != 0) return true;
  }
  return false;
}
// At a safe point of the allocator (no operation under way on this thread):
// start the background purge thread if a pending purge asked for it.
static inline void _mi_purger_poll(void) {
  if (mi_unlikely(mi_atomic_load_relaxed(&_mi_purger_state) == 1 /* MI_PURGER_WANTED */)) _mi_purger_start();
}
// index of the highest set bit (x != 0)
static inline size_t mi_bsr(uintptr_t x) {
  return (MI_INTPTR_BITS - 1 - mi_clz(x));
}

// The bin (size class) of a block size: always inline, as every allocation
// slow path and page retire need it.
static mi_decl_forceinline uint8_t _mi_bin(size_t size) {
  size_t wsize = _mi_wsize_from_size(size);
  uint8_t bin;
  if (wsize <= 1) {
    bin = 1;
  }
  else if (wsize <= 8) {
    bin = (uint8_t)((wsize + 1) & ~1);   // round to an even number of words
  }
  else if (wsize > MI_LARGE_OBJ_WSIZE_MAX) {
    bin = MI_BIN_HUGE;
  }
  else {
    // four bins per power of two: the top 3 bits of wsize-1 select the bin
    wsize--;
    const uint8_t b = (uint8_t)mi_bsr(wsize);
    bin = (uint8_t)(((b << 2) + (uint8_t)((wsize >> (b - 2)) & 0x03)) - 3);
    mi_assert_internal(bin < MI_BIN_HUGE);
  }
  mi_assert_internal(bin > 0 && bin <= MI_BIN_HUGE);
  return bin;
}

// The size-class table: the block size (in words) of each of the 73 bins that
// _mi_bin maps sizes to, then the huge and full queues. Every heap's queues
// start from it (init.c); _mi_bin_size reads it back.
#define QNULL(sz)  { NULL, NULL, (sz)*sizeof(uintptr_t), 0, 0, false }
#define MI_PAGE_QUEUES_EMPTY \
  { QNULL(     1), QNULL(     1), QNULL(     2), QNULL(     3), QNULL(     4), QNULL(     5), \
    QNULL(     6), QNULL(     7), QNULL(     8), QNULL(    10), QNULL(    12), QNULL(    14), \
    QNULL(    16), QNULL(    20), QNULL(    24), QNULL(    28), QNULL(    32), QNULL(    40), \
    QNULL(    48), QNULL(    56), QNULL(    64), QNULL(    80), QNULL(    96), QNULL(   112), \
    QNULL(   128), QNULL(   160), QNULL(   192), QNULL(   224), QNULL(   256), QNULL(   320), \
    QNULL(   384), QNULL(   448), QNULL(   512), QNULL(   640), QNULL(   768), QNULL(   896), \
    QNULL(  1024), QNULL(  1280), QNULL(  1536), QNULL(  1792), QNULL(  2048), QNULL(  2560), \
    QNULL(  3072), QNULL(  3584), QNULL(  4096), QNULL(  5120), QNULL(  6144), QNULL(  7168), \
    QNULL(  8192), QNULL( 10240), QNULL( 12288), QNULL( 14336), QNULL( 16384), QNULL( 20480), \
    QNULL( 24576), QNULL( 28672), QNULL( 32768), QNULL( 40960), QNULL( 49152), QNULL( 57344), \
    QNULL( 65536), QNULL( 81920), QNULL( 98304), QNULL(114688), QNULL(131072), QNULL(163840), \
    QNULL(196608), QNULL(229376), QNULL(262144), QNULL(327680), QNULL(393216), QNULL(458752), \
    QNULL(524288), \
    QNULL(MI_LARGE_OBJ_WSIZE_MAX + 1  /* 73: huge */), \
    QNULL(MI_LARGE_OBJ_WSIZE_MAX + 2  /* 74: full */) }

// ------------------------------------------------------
// Thread id and the default heap
// ------------------------------------------------------

// The thread control block address: unique per live thread, one instruction.
static inline uintptr_t _mi_thread_id(void) mi_attr_noexcept {
#if defined(__x86_64__) && defined(__linux__)
  uintptr_t tid;
  __asm__("movq %%fs:0, %0" : "=r" (tid) : : );
  return tid;
#elif defined(_WIN32) && defined(__x86_64__) && defined(__GNUC__)
  uintptr_t tid;   // the TEB's own address (NtCurrentTeb)
  __asm__("movq %%gs:0x30, %0" : "=r" (tid) : : );
  return tid;
#elif defined(_MSC_VER) && defined(_M_X64)
  return (uintptr_t)__readgsqword(0x30);   // (intrin.h) the TEB's own address
#elif defined(__aarch64__)
  uintptr_t tid;
  __asm__ volatile ("mrs %0, tpidr_el0" : "=r" (tid));
  return tid;
#else
  uintptr_t _mi_prim_thread_id(void);   // (prim/prim.h) where no register holds the thread pointer
  return _mi_prim_thread_id();
#endif
}

static inline mi_heap_t* mi_get_default_heap(void) {
  return mi_tls_pointer(_mi_heap_default);
}

static inline bool mi_heap_is_initialized(const mi_heap_t* heap) {
  mi_assert_internal(heap != NULL);
  return (heap != &_mi_heap_empty);
}

static inline bool mi_heap_is_backing(const mi_heap_t* heap) {
  return (heap->tld->heap_backing == heap);
}

static inline uintptr_t _mi_ptr_cookie(const void* p) {
  extern mi_heap_t _mi_heap_main;
  mi_assert_internal(_mi_heap_main.cookie != 0);
  return ((uintptr_t)p ^ _mi_heap_main.cookie);
}

// ------------------------------------------------------
// Pointers to segments and pages
// ------------------------------------------------------

// The segment unit containing p (for NULL: NULL).
static inline mi_segment_t* _mi_ptr_segment(const void* p) {
  return (mi_segment_t*)((uintptr_t)p & ~MI_SEGMENT_MASK);
}

static inline size_t mi_segment_page_index(const mi_segment_t* segment, const void* p) {
  ptrdiff_t diff = (const uint8_t*)p - (const uint8_t*)segment;
  mi_assert_internal(diff >= 0 && (size_t)diff < MI_SEGMENT_SIZE);
  size_t idx = (size_t)diff >> segment->page_shift;
  mi_assert_internal(idx < segment->capacity);
  return idx;
}

// The descriptor of the page or slice a pointer inside the segment's first
// 4 MiB falls in: `free`'s fast path, which sends a slice that continues a
// large page (its flags byte is never zero) to the generic path.
static inline mi_page_t* _mi_segment_slice_of(const mi_segment_t* segment, const void* p) {
  mi_page_t* page = (mi_page_t*)&segment->pages[mi_segment_page_index(segment, p)];
  #if defined(__GNUC__)
  __asm__("" : "+r"(page));   // one address for every field of the page: gcc otherwise folds the descriptors' offset (3 lines) into the index for some fields and not others (2 more instructions in free)
  #endif
  return page;
}

// The page of a slice descriptor: itself, or for a continuation of a large
// page (segment.c, "Large pages") the run's first slice.
static inline mi_page_t* _mi_slice_page(mi_page_t* slice) {
  if (mi_unlikely((mi_atomic_load_relaxed(&slice->xflags) & MI_PAGE_CONTINUATION) != 0)) return slice - slice->capacity;
  return slice;
}

// Is `p` inside one of our segments (a segment of the map, and not in the
// unused rest of a lean segment's 4 MiB unit: segment.c, "Lean pages")?
static inline bool _mi_segment_holds(const mi_segment_t* segment, const void* p) {
  return (_mi_segment_map_contains(segment) && (size_t)((const uint8_t*)p - (const uint8_t*)segment) < segment->segment_size);
}

// The page descriptor of a pointer inside the segment's first 4 MiB.
static inline mi_page_t* _mi_segment_page_of(const mi_segment_t* segment, const void* p) {
  return _mi_slice_page(_mi_segment_slice_of(segment, p));
}

static inline mi_segment_t* _mi_page_segment(const mi_page_t* page) {
  mi_segment_t* segment = _mi_ptr_segment(page);
  mi_assert_internal(segment == NULL || page == &segment->pages[page->segment_idx]);
  return segment;
}

// Full size of a block, including huge blocks.
static inline size_t mi_page_block_size(const mi_page_t* page) {
  const size_t bsize = page->xblock_size;
  mi_assert_internal(bsize > 0);
  if (mi_likely(bsize < MI_HUGE_BLOCK_SIZE)) return bsize;
  size_t psize;
  _mi_segment_page_start(_mi_page_segment(page), page, bsize, &psize, NULL);
  return psize;
}

// Start of the page's block area.
static inline uint8_t* _mi_page_start(const mi_segment_t* segment, const mi_page_t* page, size_t* page_size) {
  const size_t bsize = page->xblock_size;
  // a page of small blocks after slice 0 starts where its slice does (a
  // free-list extension's case; mi_page_is_valid_init checks it)
  if (page_size == NULL && page->segment_idx != 0 && bsize <= MI_SMALL_OBJ_SIZE_MAX) {
    return (uint8_t*)segment + ((size_t)page->segment_idx << segment->page_shift);
  }
  return _mi_segment_page_start(segment, page, bsize, page_size, NULL);
}

// A lean segment: 16 KiB slices; its pages are lean pages (segment.c, "Lean pages").
static inline bool _mi_segment_is_lean(const mi_segment_t* segment) {
  return (MI_LEAN_PAGES && segment->page_shift == MI_LEAN_PAGE_SHIFT);
}

static inline mi_heap_t* mi_page_heap(const mi_page_t* page) {
  return (mi_heap_t*)mi_atomic_load_relaxed(&((mi_page_t*)page)->xheap);
}


// ------------------------------------------------------
// Page state
// ------------------------------------------------------

// The thread_free word: the head of the list of blocks other threads freed,
// the delayed-free state in its two low bits and, on 64-bit targets, the
// number of blocks on the list in its top 16 bits (user addresses fit in 48
// bits, and a page holds at most 8192 blocks), so that the owner takes the
// list over without walking it: a walk that misses the cache on every block,
// since the blocks were last written by other threads.
#if (MI_INTPTR_SIZE == 8)
#define MI_TF_COUNTED     1
#define MI_TF_COUNT_SHIFT MI_ADDRESS_BITS
#define MI_TF_PTR_MASK    ((((uintptr_t)1 << MI_TF_COUNT_SHIFT) - 1) & ~(uintptr_t)0x03)
#else
#define MI_TF_COUNTED     0
#define MI_TF_PTR_MASK    (~(uintptr_t)0x03)
#endif

static inline mi_block_t* mi_tf_block(mi_thread_free_t tf) {
  return (mi_block_t*)(tf & MI_TF_PTR_MASK);
}
static inline mi_delayed_t mi_tf_delayed(mi_thread_free_t tf) {
  return (mi_delayed_t)(tf & 0x03);
}
// blocks on the list (0 where the word has no count: then walk the list)
static inline size_t mi_tf_count(mi_thread_free_t tf) {
  #if MI_TF_COUNTED
  return (size_t)(tf >> MI_TF_COUNT_SHIFT);
  #else
  (void)tf; return 0;
  #endif
}
static inline mi_thread_free_t mi_tf_set_delayed(mi_thread_free_t tf, mi_delayed_t delayed) {
  return ((tf & ~(uintptr_t)0x03) | (uintptr_t)delayed);
}
// `block` (whose next link already points at the current head) pushed on the list
static inline mi_thread_free_t mi_tf_push(mi_thread_free_t tf, mi_block_t* block) {
  #if MI_TF_COUNTED
  return ((uintptr_t)block | (tf & 0x03)) + ((uintptr_t)(mi_tf_count(tf) + 1) << MI_TF_COUNT_SHIFT);
  #else
  return ((uintptr_t)block | (tf & 0x03));
  #endif
}
// the list taken away: empty, same state
static inline mi_thread_free_t mi_tf_clear(mi_thread_free_t tf) {
  return (tf & 0x03);
}

static inline void mi_page_set_heap(mi_page_t* page, mi_heap_t* heap) {
  mi_atomic_store_release(&page->xheap, (uintptr_t)heap);
}

// The head of the remote-free list, for walking it (the double-free check,
// the validators): acquire, so that the links the pushers wrote before their
// release CAS are visible. Pushers only prepend, so the chain read stays valid.
static inline mi_block_t* mi_page_thread_free(const mi_page_t* page) {
  return mi_tf_block(mi_atomic_load_acquire(&((mi_page_t*)page)->xthread_free));
}

// Other threads freed blocks into the page (the list, or its count, is not empty).
static inline bool mi_page_has_thread_free(const mi_page_t* page) {
  return ((mi_atomic_load_relaxed(&((mi_page_t*)page)->xthread_free) & ~(uintptr_t)0x03) != 0);
}

// A page whose free list ran out (a small size's page of the direct array,
// or the front page of a larger size's queue) refills it without the generic
// path's housekeeping (the deferred hook, other threads' delayed frees, the
// page's remote frees, the purge thread's start: about 100 instructions),
// MI_RECYCLES times between runs of it: with the blocks its thread freed into
// it (local_free), or else with fresh blocks when it has room and no other
// thread freed blocks into it or into the heap's full pages (those come
// first: the generic path collects them). A page threads one OS page of
// blocks at a time (4 of 1 KiB, 1 of 4 KiB), so a program that frees and
// allocates such blocks ran out every few allocations. A retired page comes
// out of its heap's retired pages, as on the generic path (refilled without
// that, `glibc-thread 2` peaked at 8.9 MiB instead of 7.0). Builds with a
// random free order refill as their generic path does (page.c,
// _mi_page_refill_random). Returns whether it did. docs/design.md, "Fast
// paths".
static inline bool _mi_page_refill(mi_heap_t* heap, mi_page_t* page) {
  if (page->free != NULL) return false;
  if (mi_unlikely(page->retire_expire != 0)) _mi_page_unretire(heap, page);   // (in use again)
  #if MI_SECURE_RANDOM
  return _mi_page_refill_random(heap, page);
  #else
  if (page->local_free != NULL) {   // (never the constant empty page: its lists are empty and it has no room)
    if (--heap->recycle_countdown <= 0) return false;
    _mi_page_take_local_free(page);
    return true;
  }
  if (page->capacity < page->reserved && !mi_page_has_thread_free(page) && mi_atomic_load_relaxed(&heap->thread_delayed_free) == NULL) {
    if (--heap->recycle_countdown <= 0) return false;
    _mi_page_extend_free(page);
    return true;
  }
  return false;
  #endif
}

// Used only in assertions: a page may change heap only while no remote
// thread is in the middle of pushing on the old heap's delayed list.
#define mi_page_thread_free_flag_ok(page) \
  (mi_tf_delayed(mi_atomic_load_relaxed(&((mi_page_t*)(page))->xthread_free)) != MI_DELAYED_FREEING)

// The delayed-free state a page of a heap should have: remote frees must tell
// the owner about a page it does not scan, one in the full queue or one that
// holds a single block (full as soon as that block is out; the huge queue is
// never scanned), so such a block goes back at the owner's next slow path.
static inline mi_delayed_t mi_page_delayed_state(const mi_page_t* page, bool in_full_queue) {
  return ((in_full_queue || page->reserved == 1) ? MI_USE_DELAYED_FREE : MI_NO_DELAYED_FREE);
}

// All blocks are free (only reliable after collecting thread_free).
static inline bool mi_page_all_free(const mi_page_t* page) {
  return (page->used == 0);
}

// There are free blocks ready to pop or to move from local_free.
static inline bool mi_page_has_any_available(const mi_page_t* page) {
  return (page->used < page->reserved || mi_page_has_thread_free(page));
}

static inline bool mi_page_immediate_available(const mi_page_t* page) {
  return (page->free != NULL);
}

static inline uint8_t mi_page_flags(const mi_page_t* page) {
  return mi_atomic_load_relaxed(&((mi_page_t*)page)->xflags);
}
// only the owner writes the flags, so a plain load-modify-store suffices
static inline void mi_page_set_flag(mi_page_t* page, uint8_t flag, bool set) {
  const uint8_t flags = mi_page_flags(page);
  mi_atomic_store_relaxed(&page->xflags, (uint8_t)(set ? (flags | flag) : (flags & ~flag)));
}
static inline bool mi_page_is_in_full(const mi_page_t* page) {
  return ((mi_page_flags(page) & MI_PAGE_IN_FULL) != 0);
}
static inline void mi_page_set_in_full(mi_page_t* page, bool in_full) {
  mi_page_set_flag(page, MI_PAGE_IN_FULL, in_full);
}
static inline bool mi_page_has_aligned(const mi_page_t* page) {
  return ((mi_page_flags(page) & MI_PAGE_HAS_ALIGNED) != 0);
}
static inline void mi_page_set_has_aligned(mi_page_t* page, bool has_aligned) {
  mi_page_set_flag(page, MI_PAGE_HAS_ALIGNED, has_aligned);
}
static inline bool mi_page_has_sampled(const mi_page_t* page) {
  return ((mi_page_flags(page) & MI_PAGE_HAS_SAMPLED) != 0);
}
static inline void mi_page_set_has_sampled(mi_page_t* page, bool has_sampled) {
  mi_page_set_flag(page, MI_PAGE_HAS_SAMPLED, has_sampled);
}

static inline bool mi_page_is_huge(const mi_page_t* page) {
  return (_mi_page_segment(page)->page_kind == MI_PAGE_HUGE);
}

// The queue a page belongs to: full, huge (by segment kind: a big-alignment
// block may be small), or its bin. Always inline: page retire and free's
// slow paths need it, and gcc's inliner dropped it from _mi_page_retire as
// the library grew (10 instructions more per malloc+free of a block alone
// in its page).
static mi_decl_forceinline mi_page_queue_t* _mi_heap_page_queue_of(mi_heap_t* heap, const mi_page_t* page) {
  uint8_t bin;
  if (mi_page_is_in_full(page)) bin = MI_BIN_FULL;
  else if (mi_page_is_huge(page)) bin = MI_BIN_HUGE;
  else bin = _mi_bin(page->xblock_size);
  mi_page_queue_t* pq = &heap->pages[bin];
  mi_assert_internal(bin >= MI_BIN_HUGE || page->xblock_size == pq->block_size);
  return pq;
}

// ------------------------------------------------------
// Free-list links. Release builds store plain pointers. With
// MI_ENCODE_FREELIST a link is stored as rotl(p ^ k1, k0) + k0 with the
// page's keys (NULL replaced by a sentinel, the page address), and every
// decoded link of a page list must point into the same page, else the list
// is reported corrupt and cut.
// ------------------------------------------------------

// (written so that compilers emit one rotate instruction)
static inline uintptr_t mi_rotl(uintptr_t x, uintptr_t shift) {
  shift &= (MI_INTPTR_BITS - 1);
  return ((x << shift) | (x >> ((0 - shift) & (MI_INTPTR_BITS - 1))));
}
static inline uintptr_t mi_rotr(uintptr_t x, uintptr_t shift) {
  shift &= (MI_INTPTR_BITS - 1);
  return ((x >> shift) | (x << ((0 - shift) & (MI_INTPTR_BITS - 1))));
}

static inline uintptr_t mi_ptr_encode(const void* null, const void* p, const uintptr_t* keys) {
  const uintptr_t x = (uintptr_t)(p == NULL ? null : p);
  return mi_rotl(x ^ keys[1], keys[0]) + keys[0];
}

// A link decoded, the sentinel `null` not yet told from a block.
static inline uintptr_t mi_ptr_decode_raw(uintptr_t x, const uintptr_t* keys) {
  return (mi_rotr(x - keys[0], keys[0]) ^ keys[1]);
}

static inline void* mi_ptr_decode(const void* null, uintptr_t x, const uintptr_t* keys) {
  void* p = (void*)mi_ptr_decode_raw(x, keys);
  return (p == null ? NULL : p);
}

// A link with explicit keys and sentinel (also used for a heap's delayed list).
static inline mi_block_t* mi_block_nextx(const void* null, const mi_block_t* block, const uintptr_t* keys) {
  #if defined(MI_ENCODE_FREELIST)
  return (mi_block_t*)mi_ptr_decode(null, block->next, keys);
  #else
  (void)keys; (void)null;
  return (mi_block_t*)block->next;
  #endif
}

static inline void mi_block_set_nextx(const void* null, mi_block_t* block, const mi_block_t* next, const uintptr_t* keys) {
  #if defined(MI_ENCODE_FREELIST)
  block->next = mi_ptr_encode(null, next, keys);
  #else
  (void)keys; (void)null;
  block->next = (uintptr_t)next;
  #endif
}

// Do two addresses lie in the same page? (In the same slice, or in the same
// run of slices: a page of medium blocks spans several.)
static inline bool mi_is_in_same_page(const void* p, const void* q) {
  mi_segment_t* segment = _mi_ptr_segment(p);
  if (_mi_ptr_segment(q) != segment) return false;
  return (mi_segment_page_index(segment, p) == mi_segment_page_index(segment, q) ||
          _mi_segment_page_of(segment, p) == _mi_segment_page_of(segment, q));
}

mi_decl_cold void _mi_block_next_corrupt(const mi_page_t* page, const mi_block_t* block, const mi_block_t* next);

#if defined(MI_TRAILER_LINK)
// Secure builds of profile FULL (MI_TRAILER_LINK) keep a free block's link in its trailer, the word
// that holds the block's state while it is handed out (defined with the
// trailer, below): a free block then reads zero from its first byte to its
// trailer. (A heap's delayed list links through the first word all the
// same: alloc.c, page.c.)
static mi_decl_forceinline mi_block_t* mi_block_next(const mi_page_t* page, const mi_block_t* block);
static mi_decl_forceinline void mi_block_set_next(const mi_page_t* page, mi_block_t* block, const mi_block_t* next);
static mi_decl_forceinline void mi_block_set_next_fresh(const mi_page_t* page, mi_block_t* block, const mi_block_t* next);
#else
// Otherwise the link is a free block's first word.
static inline mi_block_t* mi_block_next(const mi_page_t* page, const mi_block_t* block) {
  #if defined(MI_ENCODE_FREELIST)
  mi_block_t* next = mi_block_nextx(page, block, page->keys);
  if (mi_unlikely(next != NULL && !mi_is_in_same_page(block, next))) {
    _mi_block_next_corrupt(page, block, next);   // reports, and the list is cut here
    next = NULL;
  }
  return next;
  #else
  (void)page;
  return (mi_block_t*)block->next;
  #endif
}

static inline void mi_block_set_next(const mi_page_t* page, mi_block_t* block, const mi_block_t* next) {
  #if defined(MI_ENCODE_FREELIST)
  mi_block_set_nextx(page, block, next, page->keys);
  #else
  (void)page;
  block->next = (uintptr_t)next;
  #endif
}
// The link of a block being added to its page (the same here; FULL's differs).
static inline void mi_block_set_next_fresh(const mi_page_t* page, mi_block_t* block, const mi_block_t* next) {
  mi_block_set_next(page, block, next);
}
#endif

// The page's capacity as another thread sees it: it grows (page extension)
// while other threads free blocks of the page and range-check them against
// it, so that pair of accesses is atomic (relaxed: a block a thread may free
// was handed out after the extension that made it, which the program's
// hand-over of the pointer orders).
static inline size_t mi_page_capacity_shared(const mi_page_t* page) {
  return __atomic_load_n(&page->capacity, __ATOMIC_RELAXED);
}

#include "secure.h"   // zero-on-free and the block trailer (secure and debug builds)

// The usable part of a page's blocks (the padding trailer excluded).
static inline size_t mi_page_usable_block_size(const mi_page_t* page) {
  return mi_page_block_size(page) - MI_PADDING_SIZE;
}

// ------------------------------------------------------
// Segment helpers
// ------------------------------------------------------

static inline bool mi_segment_is_valid_cookie(const mi_segment_t* segment) {
  return (segment->cookie == _mi_ptr_cookie(segment));
}

#endif
