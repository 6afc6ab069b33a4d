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

#if (MI_SECURE > 0)
#define MI_RANDOM_EMPTY  { { 0 }, { 0 }, 0 }
#else
#define MI_RANDOM_EMPTY  { { 0, 0, 0, 0 } }
#endif

const mi_heap_t _mi_heap_empty = {
  NULL,                       // tld
  MI_PROF_UNARMED,            // prof_countdown
  #if defined(MI_ZERO_ON_FREE)
  0,                          // zero_check_countdown
  #endif
  MI_SMALL_PAGES_EMPTY,       // pages_free_direct
  MI_PAGE_QUEUES_EMPTY,       // pages
  NULL,                       // thread_delayed_free
  0,                          // thread_id
  0,                          // cookie
  { 0, 0 },                   // keys
  MI_RANDOM_EMPTY,            // random
  0,                          // page_count
  MI_BIN_FULL, 0, 0,          // page_retired_min/max/size
  NULL,                       // next
  false                       // no_reclaim
};

// The thread's default heap; starts as the empty heap (initial-exec TLS model).
mi_decl_thread mi_heap_t* _mi_heap_default = (mi_heap_t*)&_mi_heap_empty;

// ---------------------------------------------------------------------------
// The main thread's heap and thread data (static: usable before any mmap)
// ---------------------------------------------------------------------------

static mi_tld_t tld_main;

mi_heap_t _mi_heap_main = {
  &tld_main,
  MI_PROF_UNARMED,
  #if defined(MI_ZERO_ON_FREE)
  0,
  #endif
  MI_SMALL_PAGES_EMPTY,
  MI_PAGE_QUEUES_EMPTY,
  NULL,
  0,                          // thread_id: set at init
  0,                          // cookie: set at init
  { 0, 0 },
  MI_RANDOM_EMPTY,
  0,
  MI_BIN_FULL, 0, 0,
  NULL,
  false
};

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

bool _mi_is_main_thread(void) {
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
  if (mi_thread_is_live == live) return;
  mi_thread_is_live = live;
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
  if (_mi_is_main_thread()) {
    mi_heap_main_init();
    _mi_heap_set_default_direct(&_mi_heap_main);
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
  _mi_heap_set_default_direct(_mi_is_main_thread() ? &_mi_heap_main : (mi_heap_t*)&_mi_heap_empty);
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
  else {
    _mi_heap_collect_abandon(heap);
    _mi_stats_done(&heap->tld->stats);   // merge the per-allocation counters
    mi_thread_data_free((mi_thread_data_t*)heap);
  }
  return true;
}

void mi_thread_init(void) mi_attr_noexcept {
  mi_process_init();
  if (mi_heap_init()) {
    if (!_mi_is_main_thread()) {
      mi_stat_increase(&mi_get_default_heap()->tld->stats, threads, 1);
    }
  }
}

static void mi_thread_done_heap(mi_heap_t* heap) {
  if (heap == NULL || heap->thread_id != _mi_thread_id()) return;   // not ours (or the empty heap)
  const bool main_thread = _mi_is_main_thread();
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
  _mi_heap_default = heap;
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
// The process-wide housekeeping (region purges, the abandoned sweep, the
// reclaim scans; the trim, which holds segments and their trim locks) claims
// region blocks and abandoned segments for a moment,
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
  if (mi_housekeeping_depth == 0 && mi_atomic_load_relaxed(&mi_fork_preparing) != 0) {
    mi_atomic_sub_acq_rel(&mi_housekeeping, 1);
    return false;
  }
  mi_housekeeping_depth++;
  return true;
}

void _mi_housekeeping_leave(void) {
  mi_assert_internal(mi_housekeeping_depth > 0);
  mi_housekeeping_depth--;
  mi_atomic_sub_acq_rel(&mi_housekeeping, 1);
}

// Wait until no other thread is inside a section; true if it had to wait.
bool _mi_housekeeping_await(void) {
  bool waited = false;
  while (mi_atomic_load_acquire(&mi_housekeeping) > mi_housekeeping_depth) {
    waited = true;
    mi_atomic_yield();
  }
  return waited;
}

static void mi_fork_prepare(void) {
  mi_atomic_store_relaxed(&mi_fork_preparing, 1);
  mi_atomic_fence_seq_cst();
  _mi_housekeeping_await();
}

static void mi_fork_parent(void) {
  mi_atomic_store_release(&mi_fork_preparing, 0);
}

// In a forked child only the forking thread exists.
static void mi_fork_child(void) {
  mi_atomic_store_relaxed(&mi_housekeeping, mi_housekeeping_depth);
  mi_atomic_store_release(&mi_fork_preparing, 0);
  _mi_segments_fork_child();
  mi_atomic_store_relaxed(&mi_live_threads, mi_thread_is_live ? 1 : 0);
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
  #if (MI_SECURE > 0)
  _mi_verbose_message("secure level: %d\n", MI_SECURE);
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
  _mi_options_init();
  atexit(&mi_process_done);
  mi_process_init();
  mi_process_reserve_huge();
  _mi_prof_process_init();   // after the options: the environment is readable now
  _mi_stats_process_init();
}

int mi_version(void) mi_attr_noexcept {
  return MI_MALLOC_VERSION;
}
