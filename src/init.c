/* ----------------------------------------------------------------------------
  init.c -- process and thread life cycle.

  Every thread starts with its default-heap TLS slot pointing at a constant
  *empty heap* whose direct-page entries all point at a constant empty page.
  The first malloc of a thread therefore misses on the fast path and reaches
  the generic path, which initialises the thread here. No fast path ever
  asks "am I initialised?".

  The main thread uses a static heap and thread data; other threads take a
  metadata block (heap + tld, ~6 KiB) from a small process-wide cache of
  blocks left by ended threads, or from the OS. Thread exit runs through a
  pthread key destructor: user heaps are deleted, the backing heap's pages
  are abandoned (see segment.c), and the metadata block goes back to the
  cache. The thread's random state is split from a process-wide seed, so a
  new thread costs neither an mmap nor a getrandom call in the common case.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

#include <stdlib.h>   // atexit

// ---------------------------------------------------------------------------
// The empty page and heap
// ---------------------------------------------------------------------------

const mi_page_t _mi_page_empty = { 0 };

#define MI_PAGE_EMPTY() ((mi_page_t*)&_mi_page_empty)
#if (MI_PADDING > 0)
#define MI_SMALL_PAGES_EMPTY  { MI_INIT128(MI_PAGE_EMPTY), MI_PAGE_EMPTY(), MI_PAGE_EMPTY() }
#else
#define MI_SMALL_PAGES_EMPTY  { MI_INIT128(MI_PAGE_EMPTY), MI_PAGE_EMPTY() }
#endif

#if MI_SECURE_RANDOM
#define MI_RANDOM_EMPTY  { { 0 }, { 0 }, 0 }
#else
#define MI_RANDOM_EMPTY  { { 0, 0, 0, 0 } }
#endif

// An empty heap: no pages, the empty page in every direct entry, not
// initialised (cookie 0); what is not named is zero.
#define MI_HEAP_EMPTY(tld_) { \
  .tld = (tld_), \
  .prof_countdown = MI_PROF_UNARMED, \
  .recycle_countdown = MI_RECYCLES, \
  .pages_free_direct = MI_SMALL_PAGES_EMPTY, \
  .pages = MI_PAGE_QUEUES_EMPTY, \
  .random = MI_RANDOM_EMPTY, \
  .page_retired_min = MI_BIN_FULL, \
}

const mi_heap_t _mi_heap_empty = MI_HEAP_EMPTY(NULL);

// The thread's default heap; starts as the empty heap (initial-exec TLS model).
mi_decl_thread mi_heap_t* _mi_heap_default = (mi_heap_t*)&_mi_heap_empty;

// ---------------------------------------------------------------------------
// The main thread's heap and thread data (static: usable before any mmap)
// ---------------------------------------------------------------------------

static mi_tld_t tld_main;

mi_heap_t _mi_heap_main = MI_HEAP_EMPTY(&tld_main);   // (thread_id, cookie and keys: set at init)

static mi_tld_t tld_main = {
  .heap_backing = &_mi_heap_main,
  .heaps = &_mi_heap_main,
};

bool _mi_process_is_initialized = false;   // set once mi_process_init ran
static _Atomic(uintptr_t) thread_seed;      // split into each new thread's generator

static void mi_heap_main_init(void) {
  if (_mi_heap_main.cookie == 0) {
    _mi_heap_main.thread_id = _mi_thread_id();
    _mi_heap_main.cookie = _mi_os_random_weak((uintptr_t)&mi_heap_main_init) | 1;
    _mi_random_init(&_mi_heap_main.random);
    _mi_heap_main.cookie = _mi_heap_random_next(&_mi_heap_main) | 1;
    _mi_heap_main.keys[0] = _mi_heap_random_next(&_mi_heap_main);
    _mi_heap_main.keys[1] = _mi_heap_random_next(&_mi_heap_main);
    mi_atomic_store_release(&thread_seed, _mi_heap_random_next(&_mi_heap_main));
    _mi_os_init_hint(_mi_heap_random_next(&_mi_heap_main));
  }
}

static bool mi_is_main_thread(void) {
  return (_mi_heap_main.thread_id == 0 || _mi_heap_main.thread_id == _mi_thread_id());
}

// ---------------------------------------------------------------------------
// Thread metadata: heap + tld, cached across threads
// ---------------------------------------------------------------------------

typedef struct mi_thread_data_s {
  mi_heap_t heap;   // must come first: the pthread key value is the heap
  mi_tld_t  tld;
} mi_thread_data_t;

static _Atomic(mi_thread_data_t*) td_cache[MI_TD_CACHE_SIZE];

static mi_thread_data_t* mi_thread_data_alloc(void) {
  // a block left by an ended thread
  for (int i = 0; i < MI_TD_CACHE_SIZE; i++) {
    mi_thread_data_t* td = mi_atomic_load_relaxed(&td_cache[i]);
    if (td != NULL) {
      td = mi_atomic_exchange_acq_rel(&td_cache[i], NULL);
      if (td != NULL) {
        memset(td, 0, sizeof(*td));
        return td;
      }
    }
  }
  // or fresh from the OS (zeroed), retried once
  mi_thread_data_t* td = (mi_thread_data_t*)_mi_os_alloc(sizeof(mi_thread_data_t));
  if (td == NULL) td = (mi_thread_data_t*)_mi_os_alloc(sizeof(mi_thread_data_t));
  if (td == NULL) {
    _mi_error_message(ENOMEM, "unable to allocate thread local heap metadata (%zu bytes)\n", sizeof(mi_thread_data_t));
  }
  return td;
}

static void mi_thread_data_free(mi_thread_data_t* tdfree) {
  for (int i = 0; i < MI_TD_CACHE_SIZE; i++) {
    mi_thread_data_t* td = mi_atomic_load_relaxed(&td_cache[i]);
    if (td == NULL) {
      mi_thread_data_t* expected = NULL;
      if (mi_atomic_cas_strong_acq_rel(&td_cache[i], &expected, tdfree)) return;
    }
  }
  _mi_os_free(tdfree, sizeof(mi_thread_data_t));
}

// ---------------------------------------------------------------------------
// Orphan heaps (option orphan_heaps, off by default)
//
// A thread that ends leaves its backing heap as it is, pages, free lists and
// segments included, for the next thread that starts, which takes it over
// whole: its memory goes on being used where it lies, without a purge and a
// refault, and without the next thread spreading its blocks over other
// memory. (Without it, the ending thread gives its empty pages and segments
// back and purges them at once, and abandons the rest: a program whose
// threads come and go faults the same memory in again for every new thread.
// With it: 32x fewer page faults and a quarter of the time for two threads
// replaced round after round, but a larger resident set, 46 -> 84 MiB there:
// see docs/design.md, "Thread exit", for why, and why it is not the
// default.) While
// it waits, an orphan heap and its segments have the owner id
// MI_THREAD_ID_ORPHAN: no thread frees into them locally, frees from other
// threads go to the pages' thread-free lists (and full pages' blocks to the
// heap's delayed list) as for any other thread's pages. An orphan that no
// thread takes within the purge delay is abandoned as an ending thread's heap
// used to be (by the background purge thread, a forced collect, or a thread
// that starts or ends), so its memory goes back after the delay; at most
// MI_ORPHAN_MAX wait at once (further threads abandon at once). Taking an
// orphan or abandoning it claims its slot with one exchange: exactly one
// thread gets it.
// ---------------------------------------------------------------------------

static _Atomic(mi_thread_data_t*) mi_orphans[MI_ORPHAN_MAX];
static _Atomic(int64_t) mi_orphans_expire[MI_ORPHAN_MAX];   // the expiry of the orphan in each slot (read without claiming it)

// Abandon the heap of an ended thread (its own, or an orphan this thread
// claimed), and recycle its metadata.
static void mi_heap_abandon_done(mi_heap_t* heap) {
  _mi_heap_collect_abandon(heap);
  _mi_stats_done(&heap->tld->stats);   // merge the per-allocation counters
  mi_thread_data_free((mi_thread_data_t*)heap);
}

// The backing heap of a thread that ends waits for the next thread; false if
// it cannot (no purge delay, or every slot taken).
static bool mi_heap_orphan(mi_heap_t* heap) {
  if (!mi_option_is_enabled(mi_option_orphan_heaps)) return false;
  const int64_t delay = _mi_purge_delay();
  if (delay == 0 || heap->tld->heaps != heap) return false;
  const int64_t expire = _mi_prim_clock_now() + delay;
  heap->tld->orphan_expire = expire;
  _mi_heap_set_owner(heap, MI_THREAD_ID_ORPHAN);
  for (size_t i = 0; i < MI_ORPHAN_MAX; i++) {
    mi_thread_data_t* expected = NULL;
    if (mi_atomic_load_relaxed(&mi_orphans[i]) != NULL) continue;
    mi_atomic_store_relaxed(&mi_orphans_expire[i], expire);   // (a taker reads it after the slot: the CAS below publishes it)
    if (mi_atomic_cas_strong_acq_rel(&mi_orphans[i], &expected, (mi_thread_data_t*)heap)) {
      _mi_due_note(MI_DUE_ORPHANS, expire);
      return true;
    }
  }
  _mi_heap_set_owner(heap, _mi_thread_id());   // (no room: the caller abandons it)
  return false;
}

// An orphan heap for a thread that starts (the one that waited least), or NULL.
static mi_thread_data_t* mi_orphan_take(void) {
  if (_mi_due_at(MI_DUE_ORPHANS) == 0) return NULL;
  bool found = false;
  int64_t best = 0;
  size_t best_idx = 0;
  for (size_t i = 0; i < MI_ORPHAN_MAX; i++) {
    if (mi_atomic_load_acquire(&mi_orphans[i]) == NULL) continue;
    const int64_t expire = mi_atomic_load_relaxed(&mi_orphans_expire[i]);
    if (!found || expire > best) { found = true; best = expire; best_idx = i; }
  }
  if (!found) return NULL;
  return mi_atomic_exchange_acq_rel(&mi_orphans[best_idx], NULL);   // (another one, or none, if it was taken meanwhile)
}

// Abandon the orphans that waited their delay (all, when forced); called
// where allocator code may run: the purge thread, collections, thread start
// and end.
void _mi_orphans_collect(bool force) {
  if (_mi_due_at(MI_DUE_ORPHANS) == 0) return;
  const int64_t now = _mi_prim_clock_now();
  if (_mi_due_claim(MI_DUE_ORPHANS, now, force) == 0) return;   // not yet, or another thread does it
  for (size_t i = 0; i < MI_ORPHAN_MAX; i++) {
    if (mi_atomic_load_acquire(&mi_orphans[i]) == NULL) continue;
    const int64_t expire = mi_atomic_load_relaxed(&mi_orphans_expire[i]);
    if (!force && expire > now) {
      _mi_due_note(MI_DUE_ORPHANS, expire);
      continue;
    }
    mi_thread_data_t* td = mi_atomic_exchange_acq_rel(&mi_orphans[i], NULL);
    if (td == NULL) continue;   // taken over meanwhile
    if (!force && td->tld.orphan_expire > now) {   // (another orphan took the slot meanwhile)
      mi_thread_data_t* none = NULL;
      mi_atomic_store_relaxed(&mi_orphans_expire[i], td->tld.orphan_expire);
      if (mi_atomic_cas_strong_acq_rel(&mi_orphans[i], &none, td)) {
        _mi_due_note(MI_DUE_ORPHANS, td->tld.orphan_expire);
        continue;
      }
    }
    // this thread acts as the ended thread's last call (but for the program's
    // deferred-free hook, which is not called on another thread's behalf:
    // this may be the purge thread, which must not allocate)
    _mi_heap_set_owner(&td->heap, _mi_thread_id());
    td->tld.recurse = true;
    mi_heap_abandon_done(&td->heap);
  }
}

// In a forked child: the orphans' segments belong to vanished threads
// (_mi_segments_fork_child gave them that id); their metadata is left.
static void mi_orphans_fork_child(void) {
  for (size_t i = 0; i < MI_ORPHAN_MAX; i++) mi_atomic_store_relaxed(&mi_orphans[i], NULL);
  _mi_due_fork_child(MI_DUE_ORPHANS);
}

static void mi_thread_data_collect(void) {
  for (int i = 0; i < MI_TD_CACHE_SIZE; i++) {
    mi_thread_data_t* td = mi_atomic_exchange_acq_rel(&td_cache[i], NULL);
    if (td != NULL) _mi_os_free(td, sizeof(mi_thread_data_t));
  }
}

// ---------------------------------------------------------------------------
// Thread init and done
// ---------------------------------------------------------------------------

// Threads whose backing heap is set up and not torn down yet. The background
// purge thread runs only while the program has threads of its own (two with a
// heap, by default), and ends when the last one ends (a process whose main
// thread left with pthread_exit, or a child forked from another thread when
// that thread ends), so that it never keeps the process alive.
static _Atomic(size_t) mi_live_threads;
static mi_decl_thread bool mi_thread_is_live;   // counted in mi_live_threads (the main heap stays
                                                // initialised after its thread is done: count once)

static void mi_thread_live(bool live) {
  if (mi_tls(mi_thread_is_live) == live) return;
  mi_tls(mi_thread_is_live) = live;
  if (live) mi_atomic_add_acq_rel(&mi_live_threads, 1);
  else mi_atomic_sub_acq_rel(&mi_live_threads, 1);
  _mi_purger_threads_changed();
}

size_t _mi_thread_live_count(void) {
  return mi_atomic_load_relaxed(&mi_live_threads);
}

// Set up the calling thread's backing heap; false if it was already set up.
static bool mi_heap_init(void) {
  if (mi_heap_is_initialized(mi_get_default_heap())) return false;
  if (mi_is_main_thread()) {
    mi_heap_main_init();
    _mi_heap_set_default_direct(&_mi_heap_main);
    mi_thread_live(true);
    return true;
  }
  _mi_orphans_collect(false);
  mi_thread_data_t* orphan = mi_orphan_take();
  if (orphan != NULL) {
    // the heap of an ended thread, taken over whole
    _mi_heap_set_owner(&orphan->heap, _mi_thread_id());
    _mi_heap_set_default_direct(&orphan->heap);
    mi_thread_live(true);
    return true;
  }
  mi_thread_data_t* td = mi_thread_data_alloc();
  if (td == NULL) return false;
  mi_tld_t* tld = &td->tld;
  mi_heap_t* heap = &td->heap;
  memcpy((void*)heap, &_mi_heap_empty, sizeof(*heap));
  heap->thread_id = _mi_thread_id();
  // seed from the process seed: no getrandom per thread
  uint64_t seed[4];
  seed[0] = mi_atomic_add_acq_rel(&thread_seed, 0x9E3779B97F4A7C15ULL);
  seed[1] = (uint64_t)heap->thread_id;
  seed[2] = (uint64_t)(uintptr_t)td ^ _mi_heap_main.keys[0];
  seed[3] = _mi_heap_main.keys[1] | 1;
  _mi_random_init_seed(&heap->random, seed);
  heap->cookie = _mi_heap_random_next(heap) | 1;
  heap->keys[0] = _mi_heap_random_next(heap);
  heap->keys[1] = _mi_heap_random_next(heap);
  heap->tld = tld;
  tld->heap_backing = heap;
  tld->heaps = heap;
  _mi_heap_set_default_direct(heap);
  mi_thread_live(true);
  return true;
}

// Tear down the thread's heaps; false if there was nothing to do.
static bool mi_heap_done(mi_heap_t* heap) {
  if (!mi_heap_is_initialized(heap)) return false;
  mi_thread_live(false);
  // from now on this thread allocates from the empty heap (main: the main heap)
  _mi_heap_set_default_direct(mi_is_main_thread() ? &_mi_heap_main : (mi_heap_t*)&_mi_heap_empty);
  heap = heap->tld->heap_backing;
  if (!mi_heap_is_initialized(heap)) return false;
  // delete all other heaps of this thread (their blocks move to the backing heap)
  mi_heap_t* curr = heap->tld->heaps;
  while (curr != NULL) {
    mi_heap_t* next = curr->next;
    if (curr != heap) mi_heap_delete(curr);
    curr = next;
  }
  if (heap == &_mi_heap_main) {
    // the main heap stays: frees after exit must keep working
    mi_heap_collect(heap, false);
  }
  else if (!mi_heap_orphan(heap)) {
    mi_heap_abandon_done(heap);
  }
  _mi_orphans_collect(false);
  return true;
}

void mi_thread_init(void) mi_attr_noexcept {
  mi_process_init();
  if (mi_heap_init()) {
    if (!mi_is_main_thread()) {
      mi_stat_increase(&mi_get_default_heap()->tld->stats, threads, 1);
    }
  }
}

static void mi_thread_done_heap(mi_heap_t* heap) {
  if (heap == NULL || heap->thread_id != _mi_thread_id()) return;   // not ours (or the empty heap)
  const bool main_thread = mi_is_main_thread();
  if (!main_thread && mi_heap_is_initialized(heap)) {
    mi_stat_decrease(&heap->tld->stats, threads, 1);   // before the thread data is recycled
  }
  mi_heap_done(heap);
}

void mi_thread_done(void) mi_attr_noexcept {
  mi_thread_done_heap(mi_get_default_heap());
}

// pthread key destructor: the value is the thread's default heap
static void mi_thread_done_auto(void* value) {
  mi_heap_t* heap = (mi_heap_t*)value;
  if (heap != NULL && mi_heap_is_initialized(heap)) {
    mi_thread_done_heap(heap->tld->heap_backing);
  }
}

void _mi_heap_set_default_direct(mi_heap_t* heap) {
  mi_assert_internal(heap != NULL);
  mi_tls(_mi_heap_default) = heap;
  // the key value makes the destructor run at thread exit (NULL: not at all)
  _mi_prim_thread_set_exit_value(mi_heap_is_initialized(heap) ? heap : NULL);
}

// ---------------------------------------------------------------------------
// Process init and done
// ---------------------------------------------------------------------------

static void mi_process_done(void) {
  static bool process_done = false;
  if (!_mi_process_is_initialized || process_done) return;
  process_done = true;
  #if (MI_DEBUG != 0) || !defined(MI_SHARED_LIB)
  // a statically linked copy (say in a plugin loaded many times) gives its memory back
  mi_collect(true);
  #endif
  mi_thread_data_collect();
  _mi_prof_dump_at_exit();
  _mi_stats_print_at_exit();
  _mi_errors_print_at_exit();
  _mi_verbose_message("process done: 0x%zx\n", _mi_heap_main.thread_id);
}

// ---------------------------------------------------------------------------
// Housekeeping and fork
//
// The process-wide housekeeping (region purges; the trim, which holds
// segments and their trim locks) claims region blocks and segments for a
// moment,
// and gives them back when done. If the process forked meanwhile, the child
// would have them claimed for good by a thread it does not have (memory it
// could never reuse or return). So these sections pass a gate: a fork waits
// (prepare handler) until the sections under way are done, and none starts
// until the fork is over (one that finds the gate closed is skipped: its
// work stays pending). A thread's own sections may nest, and a fork from
// inside one (a signal handler) does not wait for itself. The same count
// lets a forced collect wait until what other threads hold is back.
// ---------------------------------------------------------------------------

static _Atomic(size_t) mi_housekeeping;              // sections under way, in all threads
static _Atomic(uintptr_t) mi_fork_preparing;         // 1 between the fork's prepare and parent/child handlers
static mi_decl_thread size_t mi_housekeeping_depth;  // sections of this thread under way

bool _mi_housekeeping_enter(void) {
  mi_atomic_add_acq_rel(&mi_housekeeping, 1);
  mi_atomic_fence_seq_cst();   // pairs with the fence in mi_fork_prepare
  if (mi_tls(mi_housekeeping_depth) == 0 && mi_atomic_load_relaxed(&mi_fork_preparing) != 0) {
    mi_atomic_sub_acq_rel(&mi_housekeeping, 1);
    return false;
  }
  mi_tls(mi_housekeeping_depth)++;
  return true;
}

void _mi_housekeeping_leave(void) {
  mi_assert_internal(mi_tls(mi_housekeeping_depth) > 0);
  mi_tls(mi_housekeeping_depth)--;
  mi_atomic_sub_acq_rel(&mi_housekeeping, 1);
}

// Wait until no other thread is inside a section; true if it had to wait.
bool _mi_housekeeping_await(void) {
  bool waited = false;
  while (mi_atomic_load_acquire(&mi_housekeeping) > mi_tls(mi_housekeeping_depth)) {
    waited = true;
    mi_atomic_yield();
  }
  return waited;
}

static void mi_fork_prepare(void) {
  mi_atomic_store_relaxed(&mi_fork_preparing, 1);
  mi_atomic_fence_seq_cst();
  _mi_housekeeping_await();
  _mi_segments_fork_prepare();
}

static void mi_fork_parent(void) {
  _mi_segments_fork_parent();
  mi_atomic_store_release(&mi_fork_preparing, 0);
}

// In a forked child only the forking thread exists.
static void mi_fork_child(void) {
  mi_atomic_store_relaxed(&mi_housekeeping, mi_tls(mi_housekeeping_depth));
  mi_atomic_store_release(&mi_fork_preparing, 0);
  _mi_regions_fork_child();
  _mi_segments_fork_child();
  mi_orphans_fork_child();
  mi_atomic_store_relaxed(&mi_live_threads, mi_tls(mi_thread_is_live) ? 1 : 0);
  _mi_purger_fork_child();
  _mi_prof_fork_child();
}

void mi_process_init(void) mi_attr_noexcept {
  if (_mi_process_is_initialized) return;
  mi_heap_main_init();
  _mi_process_is_initialized = true;
  _mi_os_init();
  _mi_prim_thread_init_auto_done(&mi_thread_done_auto);
  _mi_prim_fork_handlers(&mi_fork_prepare, &mi_fork_parent, &mi_fork_child);
  _mi_clock_start();
  _mi_verbose_message("process init: 0x%zx\n", _mi_heap_main.thread_id);
  #if (MI_DEBUG > 0)
  _mi_verbose_message("debug level : %d\n", MI_DEBUG);
  #endif
  #if defined(MI_SECURE_NAME)
  _mi_verbose_message("secure profile: %s\n", MI_SECURE_NAME);
  #endif
  mi_thread_init();
}

// MIMALLOC_RESERVE_HUGE_OS_PAGES=N: N GiB over the NUMA nodes, in N x 500 ms
// at most. At load, not in mi_process_init: that may run before the
// environment is readable (an allocation during preloading).
static void mi_process_reserve_huge(void) {
  const long pages = mi_option_get(mi_option_reserve_huge_os_pages);
  if (pages > 0) mi_reserve_huge_os_pages_interleave((size_t)pages, 0, (size_t)pages * 500);
}

// Runs when the library is loaded, before main.
static void __attribute__((constructor)) mi_process_load(void) {
  mi_heap_main_init();
  _mi_os_init();        // (what the OS is like decides some option defaults)
  _mi_options_init();
  atexit(&mi_process_done);
  mi_process_init();
  #if defined(MI_WIN_REDIRECT)
  _mi_redirect_init();   // the override DLL: the C runtime allocates here from now on
  #endif
  mi_process_reserve_huge();
  _mi_prof_process_init();   // after the options: the environment is readable now
  _mi_stats_process_init();
}

int mi_version(void) mi_attr_noexcept {
  return MI_MALLOC_VERSION;
}
