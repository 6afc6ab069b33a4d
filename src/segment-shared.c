/* ----------------------------------------------------------------------------
  segment-shared.c -- the shared segments: where every page of small, medium
  and large blocks comes from.

  Owns: the pools of shared segments (one per processor), each with its
  segments of slices and lean ones (two lists), the lock they change under,
  the pages their ending threads abandon (a list per size class, adopted by
  threads that need a page of the size, given back by the sweep once every
  block came back) and its cache of empty segments; which pool a thread
  claims in; each thread's stash of empty small pages, where a page of
  slices goes (lean or not, how many medium blocks), the fork handlers of
  the locks, and the layer's collection (_mi_segments_collect) and
  process-wide purge dispatch (_mi_segments_try_purge).
  May call: segment.c for what every segment does (allocate and free one,
  find, claim and clear a run of slices, its delayed purges, its trim lock),
  segment-huge.c for the due huge purges, the due table (purge-thread.c),
  free.c's push of a remote free, page.c's adoption of a page into a heap.
  Why shared segments, the lock's scaling and the stash's measurements:
  docs/design.md ("Shared large segments", "Small pages in the shared
  segments", "Medium blocks in the shared segments, and abandoned pages any
  thread adopts", "Lean pages", "The shared lock: how often, how long, and at
  16 and 64 cores").
-----------------------------------------------------------------------------*/
#include "segment-internal.h"
#include "prim/prim.h"

// (defined below)
static bool mi_segment_cache_push(mi_segment_t* segment);
static void mi_shared_abandoned_free_note(void);

// ---------------------------------------------------------------------------
// Shared segments, in pools
//
// Pages of small, medium and large blocks (runs of 64 KiB slices) come from
// segments that no thread owns: any thread claims a run in any of them, and
// the slices of a page given back are free for every thread and every size
// at once (resident until their purge delay ends). Segments of their own
// left a thread's free pages where only that thread could use them: a thread
// that ended left them to be purged, and the threads that followed faulted
// in pages of their own (docs/design.md, "Shared large segments" and "Small
// pages in the shared segments").
// The shared segments are kept in pools, one per processor (up to
// MI_SHARED_POOLS_MAX): each pool has its segments, its lock, its abandoned
// pages and its cache. A thread claims its pages in its own pool (chosen
// round-robin when it first needs one), and in another pool's free slices
// before it makes a new segment, so no free slice waits while a segment is
// made; a page goes back to its segment's pool. So the threads of a process
// spread their claims and give-backs over as many locks as it has
// processors, where one lock for all would be busy more than a third of the
// time at 16 cores for some programs (docs/design.md, "The shared lock").
// The slices of a pool's segments change under its lock (a claim or release
// per 64 KiB page at least, and threads keep a stash of empty small pages);
// the segments' own trim locks are taken inside it as in any segment. A
// thread holds one pool's lock at a time (a fork holds all). A page in a
// shared segment belongs to the heap that holds it, like every page: its
// heap's thread allocates from it, retires, frees and abandons it, and
// `free`'s fast path compares the page's heap with the thread's default heap.
// The segment's owner id is MI_THREAD_ID_SHARED, which no thread has: a free
// into a page of another of the thread's heaps is local on the generic path,
// any other goes to the page's thread_free (or its heap's delayed list) as a
// remote free, and a large page abandoned by a thread that ended (no heap) is
// given back by whoever frees its block. A signal handler that interrupts a
// thread inside a pool's lock: a new page it needs is refused (NULL: malloc
// is not async-signal-safe), a page it gives back waits on a lock-free list
// for the next thread that lets go of a lock.
// ---------------------------------------------------------------------------

#define MI_SHARED_POOLS_MAX  (64)

typedef struct mi_page_list_s { mi_page_t* first; mi_page_t* last; } mi_page_list_t;

// The pools' lists of segments and of abandoned pages: doubly linked
// (links next/prev), with their tails; for both kinds of node.
#define mi_list_append(first, last, node) do {                                  \
    (node)->next = NULL; (node)->prev = (last);                                 \
    if ((last) != NULL) (last)->next = (node); else (first) = (node);           \
    (last) = (node);                                                            \
  } while (0)
#define mi_list_unlink(first, last, node) do {                                  \
    if ((node)->prev != NULL) (node)->prev->next = (node)->next; else (first) = (node)->next; \
    if ((node)->next != NULL) (node)->next->prev = (node)->prev; else (last) = (node)->prev;  \
    (node)->next = (node)->prev = NULL;                                         \
  } while (0)

typedef struct mi_decl_cache_aligned mi_shared_pool_s {
  _Atomic(uintptr_t) lock;           // the holder's thread id, 0: free
  _Atomic(uint32_t) wake;            // bumped by a release that has sleepers to wake (they sleep on it)
  _Atomic(uint32_t) sleepers;        // threads asleep (or about to be) on `wake`
  mi_segment_t* first[2];            // its segments: of slices, lean, oldest first (links next/prev; under the lock)
  mi_segment_t* last[2];             // their newest
  _Atomic(size_t) segments;          // segments in the lists (written under the lock, read as a hint)
  _Atomic(size_t) resident;          // 1: a page went back since a look found no resident run (a hint)
  mi_segment_t* cache;               // its cached empty segments (links next; under the lock)
  mi_page_list_t abandoned[MI_BIN_HUGE];            // abandoned pages per size class (bin), oldest first (links next/prev; under the lock)
  _Atomic(size_t) abandoned_count[MI_BIN_HUGE];     // their lengths (written under the lock, read as hints)
} mi_shared_pool_t;

static mi_shared_pool_t mi_shared_pools[MI_SHARED_POOLS_MAX];
static _Atomic(size_t) mi_shared_pool_count;       // pools in use: the processors (at most MI_SHARED_POOLS_MAX), set on first use
static _Atomic(size_t) mi_shared_pool_next;        // the pool the next thread that needs one takes (round-robin)
static _Atomic(size_t) mi_shared_count;            // shared segments in use now, lean ones and cached ones not counted
static _Atomic(size_t) mi_shared_peak;             // the most in use at once (the cache keeps 1 + peak/8)
static _Atomic(size_t) mi_shared_made[2];          // shared segments ever made, of slices and lean ones (eager_commit_delay counts each kind)
static _Atomic(size_t) mi_shared_abandoned_total[MI_BIN_HUGE];   // abandoned pages per size class in all pools (a hint)
static _Atomic(uintptr_t) mi_shared_deferred;      // pages given back while their thread was inside a lock (links: page->next)
static mi_decl_thread mi_shared_pool_t* mi_shared_held;   // the pool this thread is in (or entering, or leaving); NULL: none
static mi_decl_thread uint64_t mi_shared_forking;  // the pools whose locks this thread took for a fork (bit i: mi_shared_pools[i])
static mi_decl_thread mi_shared_pool_t* mi_shared_fork_held;   // this thread's mi_shared_held when the fork began
static mi_decl_thread size_t mi_shared_spill;      // the pool other than its own where this thread last found a free run (its index)
static mi_decl_thread mi_segment_t* mi_shared_unused[2];   // emptied under a lock, back to their regions when it is let go of (links next; [1]: purged at once)

static size_t mi_shared_pools_n(void) {
  size_t n = mi_atomic_load_relaxed(&mi_shared_pool_count);
  if (mi_unlikely(n == 0)) {
    n = _mi_os_cpu_count();
    if (n > MI_SHARED_POOLS_MAX) n = MI_SHARED_POOLS_MAX;
    if (n == 0) n = 1;
    size_t expected = 0;   // (set once: the first to set it decides)
    if (!mi_atomic_cas_strong_acq_rel(&mi_shared_pool_count, &expected, n)) n = expected;
  }
  return n;
}

// The pool of a shared segment.
static mi_shared_pool_t* mi_shared_pool_of(const mi_segment_t* segment) {
  mi_assert_internal(segment->shared != 0 && segment->shared <= MI_SHARED_POOLS_MAX);
  return &mi_shared_pools[segment->shared - 1];
}

// This thread's pool (chosen round-robin when it first needs one).
static mi_shared_pool_t* mi_shared_pool_own(mi_segments_tld_t* tld) {
  if (mi_unlikely(tld->shared_pool == 0)) {
    tld->shared_pool = 1 + (mi_atomic_add_relaxed(&mi_shared_pool_next, 1) % mi_shared_pools_n());
  }
  return &mi_shared_pools[tld->shared_pool - 1];
}

static void mi_shared_note_expire(int64_t expire) {
  _mi_due_note(MI_DUE_SHARED, expire);
}

// A pool's lock. A few yields, then sleep until a release: the holder may be
// in a system call (a guard page's mprotect, a new segment), and waiters that
// only yielded kept the cores busy for it (`xstress 32 20 5` under the secure
// profile ON: 2.2 s of user time for 0.25 s of work). The lock word holds the
// holder's id; the sleepers wait on a separate word that a release bumps. (A
// sleeper counts itself before it looks at the lock a last time, and a
// release looks at the count after it let go: one of them sees the other: a
// sequentially consistent fence on both sides.)
#define MI_SHARED_SPINS  (16)

static void mi_shared_lock_take(mi_shared_pool_t* pool) {
  const uintptr_t tid = _mi_thread_id();
  for (size_t round = 0; ; round++) {
    uintptr_t expected = 0;
    if (mi_atomic_cas_strong_acq_rel(&pool->lock, &expected, tid)) break;
    if (round < MI_SHARED_SPINS) { mi_atomic_yield(); continue; }
    const uint32_t seen = mi_atomic_load_acquire(&pool->wake);
    mi_atomic_add_acq_rel(&pool->sleepers, 1);
    mi_atomic_fence_seq_cst();
    if (mi_atomic_load_relaxed(&pool->lock) != 0) _mi_prim_word_wait((const uint32_t*)&pool->wake, seen);
    mi_atomic_sub_acq_rel(&pool->sleepers, 1);
  }
}

static void mi_shared_lock_let_go(mi_shared_pool_t* pool) {
  mi_atomic_store_release(&pool->lock, 0);
  mi_atomic_fence_seq_cst();
  if (mi_atomic_load_relaxed(&pool->sleepers) != 0) {
    mi_atomic_add_acq_rel(&pool->wake, 1);
    _mi_prim_word_wake((const uint32_t*)&pool->wake);
  }
}

// Enter a pool (take its lock); false if this thread is inside a pool
// already, or on its way in or out (a signal handler interrupted it there), or
// holds the lock for a fork. The pool is noted as this thread's before the
// lock is tried and until after it is let go of, so a signal handler never
// finds its thread holding a lock it does not know of.
static bool mi_shared_enter(mi_shared_pool_t* pool) {
  if (mi_tls(mi_shared_held) != NULL || mi_atomic_load_relaxed(&pool->lock) == _mi_thread_id()) return false;
  mi_tls(mi_shared_held) = pool;
  mi_atomic_signal_fence();
  mi_shared_lock_take(pool);
  return true;
}

static void mi_shared_release(mi_shared_pool_t* pool) {
  mi_shared_lock_let_go(pool);
  mi_atomic_signal_fence();
  mi_tls(mi_shared_held) = NULL;
}

// An empty shared segment leaves its pool's list (under the lock): into the
// pool's cache (option segment_cache), else back to its region, where it
// waits for its delay, unless a thread that ends empties it while the
// regions hold more than the exit budget of freed resident memory (then it
// is purged now).
static void mi_shared_segment_free(mi_segment_t* segment, mi_segments_tld_t* tld) {
  mi_assert_internal(segment->used == 0 && segment->shared);
  if (segment->purging != 0) return;   // (a purge pass holds some of its pages: it frees the segment when done, if still empty)
  mi_shared_pool_t* const pool = mi_shared_pool_of(segment);
  const bool lean = _mi_segment_is_lean(segment);
  mi_list_unlink(pool->first[lean], pool->last[lean], segment);
  mi_atomic_sub_relaxed(&pool->segments, 1);
  _mi_segment_purge_clear(segment);
  if (!lean) mi_atomic_sub_relaxed(&mi_shared_count, 1);
  const bool purge_now = (tld != NULL && _mi_segment_exit_over_budget(tld));
  if (!purge_now && mi_segment_cache_push(segment)) return;
  // back to its region when the lock is let go of (mi_shared_leave)
  segment->next = mi_tls(mi_shared_unused)[purge_now];
  mi_tls(mi_shared_unused)[purge_now] = segment;
}

// Give a page's slices back (under its pool's lock); an empty segment goes
// back to its region (where it stays resident for the purge delay).
static void mi_shared_page_clear(mi_page_t* page, mi_segments_tld_t* tld, int64_t now) {
  mi_segment_t* const segment = _mi_page_segment(page);
  _mi_segment_page_clear(segment, page, tld, now);
  if (segment->purge_expire != 0) {
    mi_shared_note_expire(segment->purge_expire);
    mi_shared_pool_t* const pool = mi_shared_pool_of(segment);
    if (mi_atomic_load_relaxed(&pool->resident) == 0) mi_atomic_store_relaxed(&pool->resident, 1);
  }
  if (segment->used == 0) mi_shared_segment_free(segment, tld);
}

static void mi_shared_page_free(mi_page_t* page, mi_segments_tld_t* tld);

static void mi_shared_leave(mi_shared_pool_t* pool) {
  // the segments emptied meanwhile go back to their regions with the lock
  // free (taken off this thread's lists first: a signal handler of ours that
  // takes a lock after the release has lists of its own then)
  mi_segment_t* unused[2] = { mi_tls(mi_shared_unused)[0], mi_tls(mi_shared_unused)[1] };
  mi_tls(mi_shared_unused)[0] = mi_tls(mi_shared_unused)[1] = NULL;
  mi_shared_release(pool);
  for (size_t purge_now = 0; purge_now < 2; purge_now++) {
    mi_segment_t* segment = unused[purge_now];
    while (segment != NULL) {
      mi_segment_t* const next = segment->next;
      segment->next = NULL;
      _mi_segment_os_free(segment, purge_now != 0, NULL);
      segment = next;
    }
  }
  // the pages a signal handler gave back while its thread was inside a lock
  // (each under its own pool's lock)
  if (mi_atomic_load_relaxed(&mi_shared_deferred) != 0) {
    mi_page_t* page = (mi_page_t*)mi_atomic_exchange_acq_rel(&mi_shared_deferred, 0);
    while (page != NULL) {
      mi_page_t* const next = page->next;
      page->next = NULL;
      mi_shared_page_free(page, NULL);
      page = next;
    }
  }
}

// The cached shared segments go back to their regions (a forced collection).
static void mi_shared_cache_flush(void) {
  for (size_t i = 0; i < mi_shared_pools_n(); i++) {
    mi_shared_pool_t* const pool = &mi_shared_pools[i];
    if (!mi_shared_enter(pool)) return;
    mi_segment_t* segment;
    while ((segment = _mi_shared_cache_pop()) != NULL) _mi_segment_os_free(segment, false, NULL);
    mi_shared_leave(pool);
  }
}

// A page of a shared segment is given back (by its heap's thread, or by
// whoever frees the block of an abandoned page; `tld` NULL then).
static void mi_shared_page_free(mi_page_t* page, mi_segments_tld_t* tld) {
  const int64_t now = _mi_prim_clock_now();   // (read before the lock is taken)
  mi_shared_pool_t* const pool = mi_shared_pool_of(_mi_page_segment(page));
  if (!mi_shared_enter(pool)) {
    // a signal handler of a thread inside a lock: whoever lets go of one next gives it back
    uintptr_t head = mi_atomic_load_relaxed(&mi_shared_deferred);
    do {
      page->next = (mi_page_t*)head;
    } while (!mi_atomic_cas_weak_acq_rel(&mi_shared_deferred, &head, (uintptr_t)page));
    return;
  }
  mi_shared_page_clear(page, tld, now);
  mi_shared_leave(pool);
}

// An abandoned page whose every block came back is empty: it is no longer
// counted as abandoned, and holds no block of any kind (it goes back next).
static void mi_shared_abandoned_emptied(mi_page_t* page) {
  mi_assert_internal(_mi_page_segment(page)->shared && mi_page_heap(page) == NULL);
  mi_stat_decrease(NULL, pages_abandoned, 1);
  mi_page_set_flag(page, MI_PAGE_HAS_ALIGNED | MI_PAGE_HAS_SAMPLED | MI_PAGE_IN_FULL, false);
  page->used = 0;
}

// The block of an abandoned page of a shared segment is freed: the page is
// empty (a large page holds one block), and goes back.
static void mi_shared_free_abandoned(mi_page_t* page) {
  mi_shared_abandoned_emptied(page);
  mi_shared_page_free(page, NULL);
}

// ---------------------------------------------------------------------------
// The cache of empty shared segments (option segment_cache, default 0 = off):
// an emptied shared segment of slices is kept, whole and committed, under its
// pool's lock, and the next shared segment the pool builds takes it without
// going to the region. At most min(segment_cache, 1 + peak shared segments /
// 8) are kept, in all pools together; a forced collection gives them back (a
// thread that ends does not: the cache is the process's).
// ---------------------------------------------------------------------------

static _Atomic(size_t) mi_shared_cache_count;   // segments cached, all pools

static bool mi_segment_cache_push(mi_segment_t* segment) {
  mi_assert_internal(segment->shared && segment->used == 0);
  if (segment->mem_is_pinned || _mi_segment_is_lean(segment)) return false;
  const size_t option = (size_t)mi_option_get(mi_option_segment_cache);
  if (option == 0) return false;
  const size_t max = 1 + (mi_atomic_load_relaxed(&mi_shared_peak) / 8);
  const size_t count = mi_atomic_load_relaxed(&mi_shared_cache_count);
  if (count >= option || count >= max) return false;   // (other pools' pushes race with this: a few more at most)
  if (!segment->mem_is_committed) return false;
  const bool locked = _mi_segment_trim_lock(segment);   // (a trim may purge it while it waits here)
  for (size_t i = 0; i < segment->capacity; i++) {
    mi_page_t* page = &segment->pages[i];
    if (!page->is_committed) {   // only whole segments are kept
      _mi_segment_trim_unlock(segment, locked);
      return false;
    }
  }
  for (size_t i = 0; i < segment->capacity; i++) {
    mi_page_t* page = &segment->pages[i];
    if (page->is_purged) { _mi_segment_page_unpurge_stat(segment, page); page->is_purged = false; }
  }
  _mi_segment_trim_unlock(segment, locked);
  mi_shared_pool_t* const pool = mi_shared_pool_of(segment);
  segment->next = pool->cache;
  segment->prev = NULL;
  pool->cache = segment;
  mi_atomic_add_relaxed(&mi_shared_cache_count, 1);
  mi_stat_increase(NULL, segments_cached, 1);
  return true;
}

// (under the lock of the pool this thread holds)
mi_segment_t* _mi_shared_cache_pop(void) {
  mi_shared_pool_t* const pool = mi_tls(mi_shared_held);
  mi_assert_internal(pool != NULL);
  if (pool == NULL) return NULL;
  mi_segment_t* segment = pool->cache;
  if (segment == NULL) return NULL;
  pool->cache = segment->next;
  mi_atomic_sub_relaxed(&mi_shared_cache_count, 1);
  segment->next = NULL;
  mi_stat_decrease(NULL, segments_cached, 1);
  return segment;
}

// ---------------------------------------------------------------------------
// Abandoned pages (docs/design.md, "Medium blocks in the shared segments, and
// abandoned pages any thread adopts").
// A page of small or medium blocks whose thread ended with blocks
// in it waits on the list of its size class in its segment's pool (under the
// pool's lock, links next/prev) with no heap. A free into it only pushes the block on its
// thread_free (free.c) and never touches it again; the lock's holders decide
// the rest: a thread that needs a page of that size adopts one with room,
// and one whose every block came back (thread_free count == used) is given
// back by whoever finds it, an adopter or the sweep (scheduled by the first
// free into an abandoned page after a sweep, like the abandoned segments').
// ---------------------------------------------------------------------------

// Blocks on the page's thread_free (other threads' frees since its last collect).
static size_t mi_page_thread_free_count(const mi_page_t* page) {
  const mi_thread_free_t tf = mi_atomic_load_acquire(&page->xthread_free);
  #if MI_TF_COUNTED
  return mi_tf_count(tf);
  #else
  size_t n = 0;
  for (const mi_block_t* block = mi_tf_block(tf); block != NULL; block = mi_block_next(page, block)) n++;
  return n;
  #endif
}

// (under the lock of the page's pool)
static void mi_shared_abandoned_unlink(mi_page_t* page) {
  mi_shared_pool_t* const pool = mi_shared_pool_of(_mi_page_segment(page));
  const size_t bin = _mi_bin(page->xblock_size);
  mi_page_list_t* const list = &pool->abandoned[bin];
  mi_atomic_store_relaxed(&pool->abandoned_count[bin], mi_atomic_load_relaxed(&pool->abandoned_count[bin]) - 1);
  mi_atomic_sub_relaxed(&mi_shared_abandoned_total[bin], 1);
  mi_list_unlink(list->first, list->last, page);
}

static void mi_shared_abandoned_append(mi_page_t* page) {
  mi_shared_pool_t* const pool = mi_shared_pool_of(_mi_page_segment(page));
  const size_t bin = _mi_bin(page->xblock_size);
  mi_page_list_t* const list = &pool->abandoned[bin];
  mi_atomic_store_relaxed(&pool->abandoned_count[bin], mi_atomic_load_relaxed(&pool->abandoned_count[bin]) + 1);
  mi_atomic_add_relaxed(&mi_shared_abandoned_total[bin], 1);
  mi_list_append(list->first, list->last, page);
}

// An abandoned page all of whose blocks came back goes back (under the lock,
// out of the lists).
static void mi_shared_abandoned_give_back(mi_page_t* page, mi_segments_tld_t* tld) {
  mi_shared_abandoned_emptied(page);
  mi_shared_page_clear(page, tld, 0);
}

// Are pages of this size waiting for an adopter, in any pool? (a hint: read
// without the lock)
static bool mi_shared_abandoned_waiting(size_t block_size) {
  return (mi_atomic_load_relaxed(&mi_shared_abandoned_total[_mi_bin(block_size)]) != 0);
}

// The thread of a page of small or medium blocks in a shared segment ends
// (its heap's abandonment: remote frees go to thread_free already): the page
// waits for an adopter on its size class's list, or goes back if it is
// empty. The pages of a thread go there together, under one lock, when its
// collection is done (mi_shared_abandoned_flush): one lock per page made an
// ending thread of `churn 32` take it about 30 times.
// A large page: whoever frees its block gives it back, maybe right after
// the store of its heap (the page is not touched after it).
void _mi_shared_page_abandon(mi_page_t* page, mi_segments_tld_t* tld) {
  mi_assert_internal(_mi_page_segment(page)->shared);
  if (page->xblock_size > MI_MEDIUM_OBJ_SIZE_MAX) {
    mi_page_set_heap(page, NULL);
    return;
  }
  mi_page_set_heap(page, NULL);
  page->next = tld->abandoned;
  tld->abandoned = page;
}

// A thread's list of pages (links next) gives up those of `pool`, which it
// returns (links next); the others stay in `*list`, `*left` of them. The
// lists a thread gives back (its abandoned pages, its stash) go back a pool
// at a time, under one acquisition of each pool's lock.
static mi_page_t* mi_shared_pages_split(mi_page_t** list, const mi_shared_pool_t* pool, size_t* left) {
  mi_page_t* taken = NULL;
  mi_page_t** taken_end = &taken;   // (both lists keep the pages' order)
  mi_page_t** link = list;
  *left = 0;
  while (*link != NULL) {
    mi_page_t* const page = *link;
    if (mi_shared_pool_of(_mi_page_segment(page)) == pool) {
      *link = page->next;
      page->next = NULL;
      *taken_end = page;
      taken_end = &page->next;
    }
    else {
      link = &page->next;
      (*left)++;
    }
  }
  return taken;
}

// The ending thread's abandoned pages go on their lists.
static void mi_shared_abandoned_flush(mi_segments_tld_t* tld) {
  while (tld->abandoned != NULL) {
    mi_shared_pool_t* const pool = mi_shared_pool_of(_mi_page_segment(tld->abandoned));
    if (!mi_shared_enter(pool)) {
      // (an ending thread inside a lock: a signal handler's pthread_exit;
      // the pages stay out of the lists, their memory with them)
      tld->abandoned = NULL;
      return;
    }
    size_t left;
    mi_page_t* page = mi_shared_pages_split(&tld->abandoned, pool, &left);
    while (page != NULL) {
      mi_page_t* const next = page->next;
      page->next = page->prev = NULL;
      if (mi_page_thread_free_count(page) == page->used) mi_shared_abandoned_give_back(page, NULL);
      else mi_shared_abandoned_append(page);
      page = next;
    }
    mi_shared_leave(pool);
  }
}

// Free a block of a page of a shared segment that is not our default heap's.
// A large page whose thread ended has no heap: its block was its last, so
// the page goes back now. A page whose thread is abandoning it (NEVER_DELAYED)
// would not be looked at again: wait until it has no heap, then the same
// (after a while the block goes on its thread_free: a heap deleted by a
// thread that goes on keeps its pages, and collects them later).
void _mi_shared_free_remote(mi_page_t* page, mi_block_t* block) {
  if (page->xblock_size <= MI_MEDIUM_OBJ_SIZE_MAX) {
    // a page of medium blocks: one being abandoned, or abandoned (no heap),
    // is NEVER_DELAYED, so the block goes on its thread_free; an abandoned
    // page is adopted or given back under the shared lock by others, who
    // read that list's count: the push is the last this thread does with it
    const bool abandoned = (mi_atomic_load_acquire(&page->xheap) == 0);
    _mi_free_block_mt(page, block, false);
    if (abandoned) mi_shared_abandoned_free_note();
    return;
  }
  for (size_t spins = 0; ; spins++) {
    if (mi_atomic_load_acquire(&page->xheap) == 0) {
      mi_shared_free_abandoned(page);
      return;
    }
    if (_mi_free_block_mt(page, block, spins < MI_ABANDON_AWAIT_MAX)) return;
    mi_atomic_yield();
  }
}

// Under the pool's lock: an abandoned page of `block_size` with room, now `heap`'s
// (the caller makes it usable outside the lock), the one abandoned longest
// ago first (most of its blocks had time to come back); the empty ones met
// on the way go back, full ones go to the end of the list. Looks at a few
// pages at most. (Adopting up to 8 pages at once, so that the frees of a
// thread into its predecessor's pages of the size stop being remote ones
// sooner: `churn 32` peaked at 173 MiB instead of 96, `larson 1` no faster.)
#define MI_SHARED_ADOPT_VISITS  (8)

static mi_page_t* mi_shared_adopt(mi_shared_pool_t* pool, mi_heap_t* heap, size_t block_size, mi_segments_tld_t* tld) {
  mi_page_list_t* const list = &pool->abandoned[_mi_bin(block_size)];
  for (size_t visits = 0; list->first != NULL && visits < MI_SHARED_ADOPT_VISITS; visits++) {
    mi_page_t* const page = list->first;
    mi_assert_internal(page->xblock_size == block_size && mi_page_heap(page) == NULL);
    mi_shared_abandoned_unlink(page);
    const size_t freed = mi_page_thread_free_count(page);
    if (freed == page->used) {
      mi_shared_abandoned_give_back(page, tld);
    }
    else if (freed > 0 || page->used < page->reserved) {
      mi_stat_decrease(NULL, pages_abandoned, 1);
      mi_page_set_heap(page, heap);
      return page;
    }
    else {
      mi_shared_abandoned_append(page);
    }
  }
  return NULL;
}

// Under the pool's lock: every abandoned page of the pool whose blocks all
// came back goes back.
static void mi_shared_sweep(mi_shared_pool_t* pool) {
  for (size_t bin = 0; bin < MI_BIN_HUGE; bin++) {
    mi_page_t* page = pool->abandoned[bin].first;
    while (page != NULL) {
      mi_page_t* const next = page->next;
      if (mi_page_thread_free_count(page) == page->used) {
        mi_shared_abandoned_unlink(page);
        mi_shared_abandoned_give_back(page, NULL);
      }
      page = next;
    }
  }
}

// ---------------------------------------------------------------------------
// Purge passes: the shared segments' due pages, and the sweep of the abandoned pages
// ---------------------------------------------------------------------------

// The sweep of the abandoned pages, when it is due (the first free into an
// abandoned page after a sweep schedules the next, a purge delay later).
static void mi_shared_try_sweep(int64_t now) {
  const int64_t due = _mi_due_at(MI_DUE_SWEEP);
  if (due == 0 || now < due) return;
  if (mi_tls(mi_shared_held) != NULL) return;   // (a signal handler of a thread inside a lock: later)
  if (_mi_due_claim(MI_DUE_SWEEP, now, false) == 0) return;
  for (size_t i = 0; i < mi_shared_pools_n(); i++) {
    mi_shared_pool_t* const pool = &mi_shared_pools[i];
    if (!mi_shared_enter(pool)) continue;
    mi_shared_sweep(pool);
    mi_shared_leave(pool);
  }
}

// Purge the due pages of the shared segments (all pending ones when forced,
// after the abandoned pages that are empty went back).
//
// The pass makes its system calls outside the pools' locks: it takes the due
// pages of every shared segment under its pool's lock (into the segment's
// `purging`, where no claim and no trim touches them;
// _mi_segment_purge_begin), purges them with the locks free, and marks them
// under the locks again. With the calls under the lock, every page claim of
// every thread waited for them: in `xstress 32 20 5`, 46% of the time the
// lock was held went to purges, 70-345 us each (docs/design.md, "The shared
// lock"). One pass at a time (mi_shared_purge_pass): a pass that finds another
// under way leaves the work to it (it takes the due time, and the pass under
// way notes what waits when it is done, after it let the pass go: a pass
// that takes the due time after that sees it gone, and passes itself), and a
// forced one waits for it, then passes itself. A housekeeping section
// (init.c): a fork waits until the pages are let go of.
static _Atomic(size_t) mi_shared_purge_pass;   // 1 while a pass runs

static void mi_shared_try_purge(int64_t now, bool force) {
  const int64_t due = _mi_due_at(MI_DUE_SHARED);
  if (!force && (due == 0 || now < due)) return;
  if (mi_tls(mi_shared_held) != NULL) return;   // (a signal handler of a thread inside a lock: later)
  if (!_mi_housekeeping_enter()) return;   // (a fork is under way: later)
  for (;;) {
    size_t idle = 0;
    if (mi_atomic_cas_strong_acq_rel(&mi_shared_purge_pass, &idle, 1)) break;
    if (!force) {
      // the pass under way notes again what waits when it is done: the due
      // time is taken, so the purge thread does not spin on a time that has
      // passed meanwhile (unless that pass is done already: then this one passes)
      _mi_due_claim(MI_DUE_SHARED, now, false);
      mi_atomic_fence_seq_cst();
      if (mi_atomic_load_relaxed(&mi_shared_purge_pass) != 0) { _mi_housekeeping_leave(); return; }
      continue;
    }
    while (mi_atomic_load_acquire(&mi_shared_purge_pass) != 0) mi_atomic_yield();
  }
  const size_t pools = mi_shared_pools_n();
  mi_segment_t* taken = NULL;   // segments with pages in `purging` (links purging_next)
  uint64_t taken_pools = 0;     // the pools they are in (bit i: mi_shared_pools[i])
  _mi_due_claim(MI_DUE_SHARED, now, true);   // (a note meanwhile keeps its time; the loop lowers it again for what waits)
  for (size_t i = 0; i < pools; i++) {
    mi_shared_pool_t* const pool = &mi_shared_pools[i];
    if (!mi_shared_enter(pool)) continue;
    if (force) mi_shared_sweep(pool);   // (its pages' slices are purged below)
    for (size_t lean = 0; lean < 2; lean++) {
      for (mi_segment_t* segment = pool->first[lean]; segment != NULL; segment = segment->next) {
        if (_mi_segment_purge_begin(segment, now, force) != 0) {
          segment->purging_next = taken;
          taken = segment;
          taken_pools |= ((uint64_t)1 << i);
        }
        _mi_due_note(MI_DUE_SHARED, segment->purge_expire);
      }
    }
    mi_shared_leave(pool);
  }
  // the system calls, with the locks free
  const bool decommit = mi_option_is_enabled(mi_option_reset_decommits);
  for (mi_segment_t* segment = taken; segment != NULL; segment = segment->purging_next) {
    segment->purging_done = _mi_segment_purge_run(segment, segment->purging, decommit, NULL);
  }
  // marked, each under its pool's lock (this thread let go of every lock
  // itself: a handler of its own that took one meanwhile let go of it too)
  for (size_t i = 0; i < pools; i++) {
    if ((taken_pools & ((uint64_t)1 << i)) == 0) continue;
    mi_shared_pool_t* const pool = &mi_shared_pools[i];
    const bool entered = mi_shared_enter(pool);   // (the pass started outside every pool, and a handler of ours leaves what it enters)
    mi_assert_internal(entered);
    if (!entered) continue;
    mi_segment_t** link = &taken;
    while (*link != NULL) {
      mi_segment_t* const segment = *link;
      if (mi_shared_pool_of(segment) != pool) { link = &segment->purging_next; continue; }
      *link = segment->purging_next;
      segment->purging_next = NULL;
      _mi_segment_purge_end(segment, segment->purging_done, decommit);
      segment->purging_done = 0;
      if (segment->used == 0) mi_shared_segment_free(segment, NULL);   // (emptied meanwhile: its free was deferred)
    }
    mi_shared_leave(pool);
  }
  mi_atomic_store_release(&mi_shared_purge_pass, 0);
  mi_atomic_fence_seq_cst();
  // what waits now, noted again (a pass that found this one under way took the due time)
  for (size_t i = 0; i < pools; i++) {
    mi_shared_pool_t* const pool = &mi_shared_pools[i];
    if (!mi_shared_enter(pool)) continue;
    for (size_t lean = 0; lean < 2; lean++) {
      for (mi_segment_t* s = pool->first[lean]; s != NULL; s = s->next) _mi_due_note(MI_DUE_SHARED, s->purge_expire);
    }
    mi_shared_leave(pool);
  }
  _mi_housekeeping_leave();
}

// ---------------------------------------------------------------------------
// The page stash. A page of small blocks is one slice of a shared segment, and
// claiming or giving back one takes the shared lock; a program that empties
// and refills its pages all the time (`sh6bench 2`: 160 k pages in 0.6 s)
// took it for each, and its threads fought over the lock and the segment
// header's lines (1.6x the time). So a thread keeps up to MI_STASH_MAX of the
// small pages it empties, still claimed in their segments, and takes its next
// small page of any size there first, without the lock. The stash goes back
// to the shared segments (where its pages wait for their purge like any free
// page) a quarter of the purge delay after its first page came, when the
// thread ends, and on a forced collection; a trim of another thread does not
// reach it (at most 512 KiB per thread, as its heaps' retired pages). A
// thread whose stash is empty claims MI_STASH_AHEAD more single slices of
// the segment with its small page, under the same acquisition of the lock
// (slices that are resident: nothing faults in). `glibc-simple`, which
// allocates and frees batches of up to 1,600 blocks of up to 4 KiB, took the
// lock twice for every 64 KiB of a batch: 506,000 times in 0.38 s, a third
// of the lock's capacity at 16 cores by itself; 332,000 times with this
// (docs/design.md, "The shared lock").
// ---------------------------------------------------------------------------

#define MI_STASH_MAX    (8)
#define MI_STASH_AHEAD  (3)   // (less than MI_STASH_MAX)

// An empty claimed page joins the stash.
static void mi_page_stash_add(mi_page_t* page, mi_segments_tld_t* tld) {
  page->next = tld->stash;
  tld->stash = page;
  if (tld->stash_count++ == 0) tld->stash_expire = _mi_prim_clock_now() + _mi_purge_delay() / 4;
}

static bool mi_page_stash_push(mi_segment_t* segment, mi_page_t* page, mi_segments_tld_t* tld) {
  if (tld->ending || tld->stash_count >= MI_STASH_MAX) return false;
  if (!segment->shared || page->xblock_size > MI_SMALL_OBJ_SIZE_MAX || _mi_segment_is_lean(segment)) return false;
  _mi_segment_page_uncount(segment, page, &_mi_segments_tld_stats(tld));   // (still counted among the pages)
  _mi_segment_page_reset(page);
  mi_page_stash_add(page, tld);
  return true;
}

static mi_page_t* mi_page_stash_pop(mi_segments_tld_t* tld) {
  mi_page_t* const page = tld->stash;
  if (page == NULL) return NULL;
  tld->stash = page->next;
  page->next = NULL;
  if (--tld->stash_count == 0) tld->stash_expire = 0;
  return page;
}

// An empty page of a shared segment leaves its heap: into the thread's
// stash (small pages, unless `force`), else back to its segment. (Tried and
// left out: a small page that finds the stash full going in after the stash,
// or its older half, went back under one acquisition of the lock. glibc-simple
// took the lock 120,000 times instead of 332,000, but faulted 22% more,
// 2,445 -> 2,974, even when only the oldest page went back each time. So
// which page goes back matters: the one just emptied is the one to return.)
void _mi_shared_page_free(mi_page_t* page, bool force, mi_segments_tld_t* tld) {
  if (!force && mi_page_stash_push(_mi_page_segment(page), page, tld)) return;
  mi_shared_page_free(page, tld);
}

// The stash goes back to the shared segments (all of it, or when it is due),
// under one acquisition of each pool's lock its pages belong to.
void _mi_shared_stash_flush(mi_segments_tld_t* tld, bool force) {
  if (tld->stash == NULL) return;
  if (!force && _mi_prim_clock_now() < tld->stash_expire) return;
  const int64_t now = _mi_prim_clock_now();   // (read before the lock is taken)
  while (tld->stash != NULL) {
    mi_shared_pool_t* const pool = mi_shared_pool_of(_mi_page_segment(tld->stash));
    if (!mi_shared_enter(pool)) return;   // (a signal handler of a thread inside a lock: later)
    size_t left;
    mi_page_t* page = mi_shared_pages_split(&tld->stash, pool, &left);
    tld->stash_count = left;
    if (left == 0) tld->stash_expire = 0;
    while (page != NULL) {
      mi_page_t* const next = page->next;
      page->next = NULL;
      mi_shared_page_clear(page, tld, now);
      page = next;
    }
    mi_shared_leave(pool);
  }
}

// ---------------------------------------------------------------------------
// Page allocation
// ---------------------------------------------------------------------------

// A page of slices from the shared segments: for medium blocks an abandoned
// page with room first, unless `heap` may be destroyed (`*adopted`: already
// `heap`'s, not initialized again);
// else the fitting run cheapest to claim in any of them (mi_segment_run_cost;
// the first segment with a run where nothing faults in ends the search),
// else a run in a new shared segment. NULL
// and `*nested` when this thread holds the lock already.
// The fitting run cheapest to claim in a pool's segments (under its lock):
// the first segment with a run where nothing faults in ends the search.
static mi_segment_t* mi_shared_find_run(const mi_shared_pool_t* pool, size_t block_size, size_t blocks, bool lean, size_t* best_first, size_t* best_cost_out) {
  mi_segment_t* best = NULL;
  size_t best_cost = MI_SLICE_FAULT_COST;
  for (mi_segment_t* segment = pool->first[lean]; segment != NULL; segment = segment->next) {
    size_t first, cost;
    if (!_mi_segment_find_run_cost(segment, block_size, blocks, &first, &cost)) continue;
    if (best == NULL || cost < best_cost) {
      best = segment; *best_first = first; best_cost = cost;
      if (cost < MI_SLICE_FAULT_COST) break;   // (nothing faults in: the earliest such segment, which packs them)
    }
  }
  *best_cost_out = best_cost;
  return best;
}

// A new shared segment for a pool (under its lock; at the end of its list:
// the search meets the older segments' free slices first), with a fitting run.
static mi_segment_t* mi_shared_segment_new(mi_shared_pool_t* pool, size_t block_size, size_t blocks, bool lean, size_t* first, mi_segments_tld_t* tld) {
  const bool eager_delayed = (mi_atomic_load_relaxed(&mi_shared_made[lean]) < (size_t)mi_option_get(mi_option_eager_commit_delay));
  mi_segment_t* const segment = _mi_segment_alloc(0, MI_PAGE_SLICES, (lean ? MI_LEAN_PAGE_SHIFT : MI_SLICE_SHIFT), 0, 0, true, eager_delayed, tld);
  if (segment == NULL) return NULL;
  size_t cost;
  if (!_mi_segment_find_run_cost(segment, block_size, blocks, first, &cost)) {
    _mi_segment_os_free(segment, false, &_mi_segments_tld_stats(tld));
    return NULL;
  }
  segment->shared = (uint8_t)(1 + (size_t)(pool - mi_shared_pools));
  mi_atomic_add_relaxed(&mi_shared_made[lean], 1);
  if (!lean) {
    const size_t count = mi_atomic_add_relaxed(&mi_shared_count, 1) + 1;
    size_t peak = mi_atomic_load_relaxed(&mi_shared_peak);
    while (count > peak && !mi_atomic_cas_weak_acq_rel(&mi_shared_peak, &peak, count)) { }
  }
  mi_list_append(pool->first[lean], pool->last[lean], segment);
  mi_atomic_add_relaxed(&pool->segments, 1);
  return segment;
}

// A page of slices from the shared segments: for small and medium blocks an
// abandoned page with room first (in the thread's pool, or in another when
// only others have one), unless `heap` may be destroyed (`*adopted`: already
// `heap`'s, not initialized again); else the fitting run
// cheapest to claim in the pool's segments (mi_shared_find_run), else in
// another pool's, else a run in a new segment of the thread's pool. NULL and
// `*nested` when this thread is inside a lock already.
static mi_page_t* mi_shared_page_alloc(mi_heap_t* heap, size_t block_size, size_t blocks, bool lean, bool* nested, bool* adopted, mi_segments_tld_t* tld) {
  *adopted = false;
  if (_mi_due_at(MI_DUE_SHARED) != 0) mi_shared_try_purge(_mi_prim_clock_now(), false);
  mi_shared_pool_t* const own = mi_shared_pool_own(tld);
  const size_t own_index = (size_t)(own - mi_shared_pools);
  const size_t pools = mi_shared_pools_n();
  const bool adopt = (block_size <= MI_MEDIUM_OBJ_SIZE_MAX && !heap->no_reclaim);   // (a heap that may be destroyed takes no other thread's blocks)
  const size_t bin = _mi_bin(block_size);
  bool entered = false;
  if (adopt && mi_atomic_load_relaxed(&mi_shared_abandoned_total[bin]) != 0) {
    // an abandoned page of the size with room: in the thread's pool first,
    // then in the others (an ending thread's pages stay as useful to the next
    // thread, whatever its pool)
    for (size_t i = 0; i < pools; i++) {
      mi_shared_pool_t* const other = &mi_shared_pools[(own_index + i) % pools];
      if (mi_atomic_load_relaxed(&other->abandoned_count[bin]) == 0) continue;   // (a hint)
      *nested = !mi_shared_enter(other);
      if (*nested) return NULL;
      mi_page_t* const page = mi_shared_adopt(other, heap, block_size, tld);
      if (page != NULL) {
        mi_shared_leave(other);
        *adopted = true;
        return page;
      }
      if (other == own && mi_atomic_load_relaxed(&mi_shared_abandoned_total[bin]) == mi_atomic_load_relaxed(&own->abandoned_count[bin])) {
        entered = true;   // (no other pool has one: the search below goes on under this acquisition)
        break;
      }
      mi_shared_leave(other);
    }
  }
  mi_shared_pool_t* pool = own;
  if (!entered) {
    *nested = !mi_shared_enter(pool);
    if (*nested) return NULL;
  }
  size_t best_first = 0, best_cost;
  mi_segment_t* best = mi_shared_find_run(pool, block_size, blocks, lean, &best_first, &best_cost);
  if (pools > 1 && (best == NULL || best_cost >= MI_SLICE_FAULT_COST)) {
    // the run faults in, or there is none: a run of another pool where
    // nothing faults in comes first (in pools where a page went back since
    // a look found none), and any free run of another pool before a new
    // segment (from the pool where this thread found one last time)
    const bool any = (best == NULL);
    mi_shared_leave(pool);
    best = NULL;
    const size_t start = mi_tls(mi_shared_spill);
    for (size_t i = 0; i < pools && best == NULL; i++) {
      const size_t index = (start + i) % pools;
      pool = &mi_shared_pools[index];
      if (index == own_index || mi_atomic_load_relaxed(&pool->segments) == 0) continue;   // (hints)
      if (!any && mi_atomic_load_relaxed(&pool->resident) == 0) continue;
      if (!mi_shared_enter(pool)) { *nested = true; return NULL; }
      best = mi_shared_find_run(pool, block_size, blocks, lean, &best_first, &best_cost);
      if (best != NULL && best_cost >= MI_SLICE_FAULT_COST) {
        mi_atomic_store_relaxed(&pool->resident, 0);   // (none resident that fits: the next page that goes back says again)
        if (!any) best = NULL;
      }
      if (best == NULL) mi_shared_leave(pool);
      else mi_tls(mi_shared_spill) = index;
    }
    if (best == NULL) {
      pool = own;
      if (!mi_shared_enter(pool)) { *nested = true; return NULL; }
      best = mi_shared_find_run(pool, block_size, blocks, lean, &best_first, &best_cost);   // (it may have changed meanwhile)
    }
  }
  if (best == NULL) {
    best = mi_shared_segment_new(pool, block_size, blocks, lean, &best_first, tld);
    if (best == NULL) {
      mi_shared_leave(pool);
      return NULL;
    }
  }
  mi_page_t* page = &best->pages[best_first];
  const size_t n = _mi_segment_run_slices(best, best_first, block_size, blocks);
  if (!_mi_segment_page_claim(best, page, n, tld)) {
    if (best->used == 0) mi_shared_segment_free(best, tld);
    page = NULL;
  }
  // a small page, and the thread's stash is empty: a few more single slices
  // of the segment for its next small pages, under this same acquisition
  mi_page_t* ahead[MI_STASH_AHEAD];
  size_t ahead_count = 0;
  if (page != NULL && n == 1 && !lean && block_size <= MI_SMALL_OBJ_SIZE_MAX && tld->stash == NULL && !tld->ending) {
    size_t first, cost;
    while (ahead_count < MI_STASH_AHEAD && _mi_segment_find_run_cost(best, block_size, 1, &first, &cost) && cost < MI_SLICE_FAULT_COST &&
           _mi_segment_run_slices(best, first, block_size, 1) == 1 && _mi_segment_page_claim(best, &best->pages[first], 1, tld)) {
      ahead[ahead_count++] = &best->pages[first];
    }
  }
  mi_shared_leave(pool);
  // the runs' guard pages (secure builds): system calls on the runs' own
  // memory, so not under the lock (the guard bits of other runs of the
  // segment change meanwhile: atomic and/or; nobody frees the segment while
  // it holds these pages)
  if (page != NULL) _mi_segment_run_guard(best, best_first, n);
  for (size_t i = 0; i < ahead_count; i++) {
    _mi_segment_run_guard(best, ahead[i]->segment_idx, 1);
    mi_page_stash_add(ahead[i], tld);
  }
  return page;
}

// The medium blocks a heap's next page of `block_size` is sized for: one for
// its first page of the size, two for the second, then MI_SLICE_PAGE_BLOCKS
// (docs/design.md, "Medium blocks"). A thread that uses a size for a block or
// two (most sizes, in programs whose threads do a short task each) does not
// keep a run for four resident; one that uses many soon takes pages of four.
static size_t mi_segment_medium_blocks(const mi_heap_t* heap, size_t block_size) {
  if (block_size <= MI_SMALL_OBJ_SIZE_MAX || block_size > MI_MEDIUM_OBJ_SIZE_MAX) return MI_SLICE_PAGE_BLOCKS;
  const size_t taken = _mi_page_queue(heap, block_size)->taken;
  return (taken >= 2 ? MI_SLICE_PAGE_BLOCKS : taken + 1);
}

// ---------------------------------------------------------------------------
// Lean pages. A thread holds a page for every size it uses, and a thread that
// uses most of its sizes for a few blocks each (threads that each do a short
// task) holds mostly free memory: 64 KiB per size, resident where earlier
// pages touched the slice. So a heap's first page of a small size (blocks up
// to 16 KiB) is a slice of 16 KiB (two where one block does not fit) of a
// *lean segment*: a shared segment of slices in all but its slice size
// (page_shift 14: `free` finds the descriptor as in any segment, and the
// masks, runs, purges, trims and adoption of slices serve it unchanged), 1 MiB
// at the start of a 4 MiB unit (pointers find their segment by masking). The
// rest of the unit is nobody's: purged when the segment is built on resident
// memory (counted in `reset` until it goes), out of what the segment holds
// (_mi_segment_holds), and committed again before the unit goes back to its
// region, which takes only whole units. Later pages of the size are slices of
// 64 KiB; lean pages do not go to the page stash, and lean segments not to
// the segment cache. Not in builds with guard pages (a guard would take a
// quarter of a lean page). See docs/design.md, "Lean pages".
// ---------------------------------------------------------------------------

// Is a heap's next page of `block_size` a lean page? Its first page of a
// small size (docs/design.md, "Lean pages").
static bool mi_segment_lean_page(const mi_heap_t* heap, size_t block_size) {
  return (MI_LEAN_PAGES && block_size <= MI_SMALL_OBJ_SIZE_MAX && _mi_page_queue(heap, block_size)->taken == 0);
}

// A page of slices (a large block, or medium ones) from the shared segments.
// An abandoned page adopted there joins the heap's queue (the caller's retry
// finds it there: NULL).
mi_page_t* _mi_shared_page_alloc(mi_heap_t* heap, size_t block_size, mi_segments_tld_t* tld) {
  const bool lean = mi_segment_lean_page(heap, block_size);
  if (!lean && block_size <= MI_SMALL_OBJ_SIZE_MAX && tld->stash != NULL && (heap->no_reclaim || !mi_shared_abandoned_waiting(block_size))) {
    // (an abandoned page of the size with room comes first: it has blocks in use)
    return mi_page_stash_pop(tld);
  }
  bool nested, adopted;
  mi_page_t* const shared = mi_shared_page_alloc(heap, block_size, mi_segment_medium_blocks(heap, block_size), lean, &nested, &adopted, tld);
  if (adopted) {
    _mi_page_use_delayed_free(shared, mi_page_delayed_state(shared, false), true);
    _mi_page_free_collect(shared, false);
    _mi_page_reclaim(heap, shared);
    return NULL;
  }
  if (nested) {
    // a signal handler that interrupted this thread inside the shared lock
    // needs a new page: there is none for it (malloc is not async-signal-safe,
    // as POSIX says; docs/design.md, "Signal handlers"): the allocation
    // fails with ENOMEM
    return NULL;
  }
  return shared;
}

// ---------------------------------------------------------------------------
// Collection, and the process-wide purges the layer runs when due
// ---------------------------------------------------------------------------

// The pages an ending thread abandoned go on their lists, its stash back to
// the shared segments (also when forced, else when due); pending purges of
// this thread's segments (all now, when forced), and the process-wide ones
// that are due (all huge ones now, when forced, but not by a thread that
// ends: those blocks wait for their delay); forced: the cached segments go
// back.
void _mi_segments_collect(bool force, mi_segments_tld_t* tld) {
  mi_shared_abandoned_flush(tld);
  _mi_shared_stash_flush(tld, force || tld->ending);
  if (force && !tld->ending) {   // every pending huge purge and shared page purge, now
    _mi_segments_try_purge_huge(INT64_MAX);
    mi_shared_try_purge(_mi_prim_clock_now(), true);
  }
  else if (tld->ending && mi_option_is_enabled(mi_option_abandoned_page_reset)) {
    // the free pages of the shared segments go back now (with those the thread just gave back)
    mi_shared_try_purge(_mi_prim_clock_now(), true);
  }
  _mi_segments_try_purge();
  if (force && !tld->ending) mi_shared_cache_flush();
}

static mi_decl_thread uint32_t mi_abandoned_frees;   // frees into abandoned pages by this thread

// A block was freed into an abandoned page of a shared segment: make sure
// the sweep of the abandoned pages is scheduled (a clock read on the first
// such free after a sweep), and check whether one is due on every 64th such
// free of this thread.
static void mi_shared_abandoned_free_note(void) {
  if (_mi_due_at(MI_DUE_SWEEP) == 0) {
    _mi_due_note(MI_DUE_SWEEP, _mi_prim_clock_now() + _mi_purge_delay());
  }
  else if ((++mi_tls(mi_abandoned_frees) % 64) != 0) {
    return;
  }
  _mi_segments_try_purge();
}

// The process-wide purges of the segment layer that fall due (the due
// table's MI_DUE_SEGMENTS): the huge blocks other threads freed, the sweep of
// the abandoned pages whose blocks all came back, the shared segments'
// pages. One clock read when something is pending, none otherwise.
void _mi_segments_try_purge(void) {
  if (!_mi_due_any(MI_DUE_SEGMENTS)) return;
  const int64_t now = _mi_prim_clock_now();
  _mi_segments_try_purge_huge(now);
  mi_shared_try_sweep(now);
  mi_shared_try_purge(now, false);
}

// fork: no thread may be inside the lock while the process forks (the child
// would have it held by a thread it does not have). A fork from a signal
// handler of the holder does not wait for itself.
// The fork takes every pool's lock, in order (the only place that holds more
// than one; nobody waits for one while holding another), but the one the code
// a signal handler of this thread interrupted holds (it stays held). Until
// the fork is done, nothing of this thread enters a pool.
void _mi_segments_fork_prepare(void) {
  const uintptr_t tid = _mi_thread_id();
  uint64_t taken = 0;
  for (size_t i = 0; i < mi_shared_pools_n(); i++) {
    mi_shared_pool_t* const pool = &mi_shared_pools[i];
    if (mi_atomic_load_relaxed(&pool->lock) == tid) continue;
    mi_shared_lock_take(pool);
    taken |= ((uint64_t)1 << i);
  }
  mi_tls(mi_shared_forking) = taken;
  mi_tls(mi_shared_fork_held) = mi_tls(mi_shared_held);
  if (mi_tls(mi_shared_held) == NULL) mi_tls(mi_shared_held) = &mi_shared_pools[0];
}

void _mi_segments_fork_parent(void) {
  const uint64_t taken = mi_tls(mi_shared_forking);
  for (size_t i = 0; i < MI_SHARED_POOLS_MAX; i++) {
    if ((taken & ((uint64_t)1 << i)) != 0) mi_shared_lock_let_go(&mi_shared_pools[i]);
  }
  mi_tls(mi_shared_held) = mi_tls(mi_shared_fork_held);
  mi_tls(mi_shared_fork_held) = NULL;
  mi_tls(mi_shared_forking) = 0;
}

// In the child: the locks are free (the forking thread took them, or the
// code its signal handler interrupted holds one: that one it keeps), nobody
// sleeps on them (the child has none of the parent's other threads); then the
// owners of the segments (segment-walk.c).
void _mi_segments_fork_child(void) {
  const uintptr_t tid = _mi_thread_id();
  const uint64_t taken = mi_tls(mi_shared_forking);
  for (size_t i = 0; i < MI_SHARED_POOLS_MAX; i++) {
    mi_shared_pool_t* const pool = &mi_shared_pools[i];
    if ((taken & ((uint64_t)1 << i)) != 0 || mi_atomic_load_relaxed(&pool->lock) != tid) mi_atomic_store_release(&pool->lock, 0);
    mi_atomic_store_relaxed(&pool->sleepers, 0);
  }
  mi_tls(mi_shared_held) = mi_tls(mi_shared_fork_held);
  mi_tls(mi_shared_fork_held) = NULL;
  mi_tls(mi_shared_forking) = 0;
  _mi_segments_fork_child_owners();
}
