/* ----------------------------------------------------------------------------
  purge-thread.c -- the process-wide purges: when each falls due (the due
  table, below), and the background purge thread (option background_purge)
  that runs them.

  Freed segments wait in their regions, and free pages in the shared
  segments, for a delayed purge (region.c, segment.c). Without
  this thread those purges run only inside allocator calls, so a thread that
  frees much memory and then blocks keeps it resident. This thread performs
  the process-wide purges when they are due, and nothing else:

  - only in a program that has threads of its own: by default it is started
    while at least two threads have a heap (init.c counts them), and never
    in a single-threaded process, where a thread the program did not create
    would break what needs a single-threaded caller (unshare(CLONE_NEWUSER),
    setns into a user namespace, a seccomp policy without clone, a program
    that counts its threads). A single-threaded program's memory goes back
    on its own allocator calls (every segment allocation and free runs the
    due purges). background_purge=2 ("always") starts it in any process;
  - started when the program has the threads it needs (its second thread
    with a heap, by default) or, when it ends, at the next pending purge; it
    is created at the next *safe point*, the end of an allocation's slow path
    or of a collection: creating a thread may call malloc (glibc allocates
    the thread's TLS vector), so not in the middle of an allocator operation,
    and never in a free: glibc frees thread-local storage with its stack-cache
    lock held (pthread_join, a detached thread's exit), and a pthread_create
    there waits for that lock forever (seen in the soak test). So frees only
    note; the thread already runs while they could need it;
  - it sleeps until the earliest pending expiry; with nothing pending it waits
    on the OS event (prim.h) without a time limit, and a note wakes it (a note
    costs one fence and one load while the thread is busy or not started);
    waking it takes no lock (the event is async-signal-safe: a free inside a
    signal handler may wake it);
  - it runs only the lock-free process-wide paths that every allocating thread
    runs too (region purge, abandoned sweep), never allocates, owns no heap;
  - detached, all signals blocked: it never runs a signal handler; it ends
    when the program is back to fewer threads than it needs and nothing is
    pending (and at once when the last thread with a heap is torn down), so it
    does not keep alive a process whose threads all left with pthread_exit,
    and a program whose threads were joined becomes single-threaded again;
    disabling the option sends it to sleep at its next wake-up and stops
    notes from waking it;
  - a failed start (EAGAIN at the thread limit, EPERM under a seccomp policy)
    is reported once; purges go on in allocator calls, and the start is tried
    again after a back-off (1 s, doubling up to about a minute);
  - after fork the child has no such thread: its state goes back to "not
    started" and the event is re-initialised.

  Rejected: a thread per heap, or purging other threads' pages from here (a
  thread's free pages inside its live segments are its own lists, touched
  without locks; purging them from outside would put a lock on page claims).
  Known issue: unloading the library (dlclose) while the thread runs is not
  supported, as for any library that starts threads.
-----------------------------------------------------------------------------*/
#include "mimalloc-internal.h"
#include "prim/prim.h"

// ---------------------------------------------------------------------------
// The due table: for each process-wide purge, when it falls due next (ms of
// _mi_prim_clock_now; 0: nothing pending). Whoever makes work pending lowers
// its time (_mi_due_note); whoever notices it passed takes it by resetting it
// to 0 (_mi_due_claim: one thread wins), does the work, and lowers it again
// for what is not due yet. Allocator calls and the purge thread run the same
// claims, so the work is done once, by whoever comes first. A fork waits for
// the work that holds region blocks or abandoned segments (_mi_due_enter: a
// housekeeping section; while a fork is under way the time is put back).
// ---------------------------------------------------------------------------

mi_decl_cache_aligned _Atomic(int64_t) _mi_due_times[MI_DUE_COUNT];

static void mi_purger_note(void);   // (the purge thread, below)

void _mi_due_note(mi_due_t kind, int64_t expire) {
  if (expire == 0) return;
  mi_atomic_expire_lower(&_mi_due_times[kind], expire);
  mi_purger_note();
}

int64_t _mi_due_claim(mi_due_t kind, int64_t now, bool force) {
  int64_t due = mi_atomic_load_relaxed(&_mi_due_times[kind]);
  if (due == 0 || (!force && now < due)) return 0;
  const int64_t claimed = due;
  if (!mi_atomic_cas_strong_acq_rel(&_mi_due_times[kind], &due, 0)) return 0;   // another thread does it
  return claimed;
}

bool _mi_due_enter(mi_due_t kind, int64_t now) {
  const int64_t claimed = _mi_due_claim(kind, now, false);
  if (claimed == 0) return false;
  if (!_mi_housekeeping_enter()) {   // a fork is under way: later
    _mi_due_note(kind, claimed);
    return false;
  }
  return true;
}

void _mi_due_leave(mi_due_t kind) {
  _mi_housekeeping_leave();
  if (_mi_due_at(kind) != 0) mi_purger_note();
}

static int64_t mi_due_next(void) {
  int64_t next = 0;
  for (size_t kind = 0; kind < MI_DUE_COUNT; kind++) {
    const int64_t due = _mi_due_at((mi_due_t)kind);
    if (due != 0 && (next == 0 || due < next)) next = due;
  }
  return next;
}

void _mi_due_fork_child(mi_due_t kind) {
  mi_atomic_store_relaxed(&_mi_due_times[kind], 0);
}

// ---------------------------------------------------------------------------
// The purge thread
// ---------------------------------------------------------------------------

#define MI_PURGER_NONE      (0)   // not started
#define MI_PURGER_WANTED    (1)   // a purge is pending: start at the next safe point
#define MI_PURGER_STARTING  (2)
#define MI_PURGER_RUNNING   (3)

#define MI_PURGER_ALWAYS    (2)   // option value: start it in single-threaded processes too
#define MI_PURGER_BACKOFF_MAX (64 * 1000)   // ms between start attempts after failures, at most

_Atomic(uintptr_t) _mi_purger_state;        // read inline by _mi_purger_poll
static _Atomic(uintptr_t) mi_purger_idle;   // the thread waits without a time limit
static _Atomic(int64_t) mi_purger_retry;    // after a failed start: no attempt before this time (ms)
static _Atomic(size_t) mi_purger_failures;  // failed starts in a row

static bool mi_purger_enabled(void) {
  return mi_option_is_enabled(mi_option_background_purge);
}

// Threads with a heap the program needs to have for the thread to run.
static size_t mi_purger_min_threads(void) {
  return (mi_option_get(mi_option_background_purge) >= MI_PURGER_ALWAYS ? 1 : 2);
}

static bool mi_purger_allowed(void) {
  return (mi_purger_enabled() && _mi_thread_live_count() >= mi_purger_min_threads());
}


static void mi_purger_main(void* arg) {
  (void)arg;
  for (;;) {
    const size_t live = _mi_thread_live_count();
    int64_t next = 0;
    if (live > 0 && mi_purger_enabled()) {
      _mi_orphans_collect(false);
      _mi_segments_try_purge();
      _mi_region_try_purge();
      next = mi_due_next();
    }
    if (live == 0 || (next == 0 && live < mi_purger_min_threads())) {
      // the program's threads are gone (pthread_exit), or it is back to one
      // thread and nothing is pending: end, so the process can end or be
      // single-threaded again; a later note starts a new one when allowed
      mi_atomic_store_release(&_mi_purger_state, MI_PURGER_NONE);
      if (mi_due_next() != 0) mi_purger_note();   // (a purge noted while we left)
      return;
    }
    if (next == 0) {
      // nothing pending (or disabled): sleep until a note wakes us; the fence
      // pairs with the one in mi_purger_note, so a purge noted after our
      // check sees us idle and signals (the event is sticky)
      mi_atomic_store_relaxed(&mi_purger_idle, 1);
      mi_atomic_fence_seq_cst();
      if (!mi_purger_enabled() || mi_due_next() == 0) _mi_prim_event_wait(-1);
      mi_atomic_store_relaxed(&mi_purger_idle, 0);
      continue;
    }
    const int64_t wait = next - _mi_prim_clock_now();
    if (wait > 0) _mi_prim_event_wait(wait + 1);
  }
}

// A purge became pending (a region's, a segment's, a huge block's, a sweep).
static void mi_purger_note(void) {
  const uintptr_t state = mi_atomic_load_relaxed(&_mi_purger_state);
  if (state == MI_PURGER_RUNNING) {
    mi_atomic_fence_seq_cst();
    if (mi_atomic_load_relaxed(&mi_purger_idle) != 0 && mi_purger_enabled()) _mi_prim_event_signal();
  }
  else if (state == MI_PURGER_NONE && mi_purger_allowed()) {
    const int64_t retry = mi_atomic_load_relaxed(&mi_purger_retry);
    if (retry != 0 && _mi_prim_clock_now() < retry) return;   // (backing off after a failed start)
    uintptr_t expected = MI_PURGER_NONE;
    mi_atomic_cas_strong_acq_rel(&_mi_purger_state, &expected, MI_PURGER_WANTED);
  }
}

// At a safe point, with the state WANTED: start the thread.
void _mi_purger_start(void) {
  uintptr_t expected = MI_PURGER_WANTED;
  if (!mi_atomic_cas_strong_acq_rel(&_mi_purger_state, &expected, MI_PURGER_STARTING)) return;
  if (!mi_purger_allowed()) {   // (it would end at once)
    mi_atomic_store_release(&_mi_purger_state, MI_PURGER_NONE);
    return;
  }
  mi_atomic_store_release(&_mi_purger_state, MI_PURGER_RUNNING);   // (before the thread can look)
  const int err = _mi_prim_thread_start(&mi_purger_main, NULL);
  if (err != 0) {
    // purges go on in allocator calls; try again after a back-off
    const size_t failures = mi_atomic_add_relaxed(&mi_purger_failures, 1);
    const int64_t backoff = (failures >= 6 ? MI_PURGER_BACKOFF_MAX : (int64_t)1000 << failures);
    mi_atomic_store_relaxed(&mi_purger_retry, _mi_prim_clock_now() + backoff);
    mi_atomic_store_release(&_mi_purger_state, MI_PURGER_NONE);
    if (failures == 0) {
      _mi_warning_message("cannot start the background purge thread (error %d); freed memory is purged on allocator calls\n", err);
    }
    return;
  }
  mi_atomic_store_relaxed(&mi_purger_failures, 0);
  mi_atomic_store_relaxed(&mi_purger_retry, 0);
  _mi_verbose_message("background purge thread started (purge delay %lld ms)\n", (long long)_mi_purge_delay());
}

// The number of threads with a heap changed (init.c): a thread may now be
// allowed (something pending asks for it), or may have to end (woken).
void _mi_purger_threads_changed(void) {
  const uintptr_t state = mi_atomic_load_relaxed(&_mi_purger_state);
  if (state == MI_PURGER_RUNNING) {
    if (_mi_thread_live_count() < mi_purger_min_threads()) _mi_prim_event_signal();
  }
  else if (state == MI_PURGER_NONE) {
    mi_purger_note();   // (when allowed: started at the new thread's first allocation)
  }
}

// In a forked child: the thread does not exist here.
void _mi_purger_fork_child(void) {
  _mi_prim_event_reset();
  mi_atomic_store_relaxed(&mi_purger_idle, 0);
  const uintptr_t state = mi_atomic_load_relaxed(&_mi_purger_state);
  if (state == MI_PURGER_RUNNING || state == MI_PURGER_STARTING) {
    mi_atomic_store_relaxed(&_mi_purger_state, MI_PURGER_NONE);
    mi_purger_note();   // the child starts its own, when allowed
  }
}
