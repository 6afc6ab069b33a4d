/* ----------------------------------------------------------------------------
  purge-thread.c -- the background purge thread (option background_purge).

  Freed segments wait in their regions, and free pages of abandoned segments
  in the abandoned set, for a delayed purge (region.c, segment.c). Without
  this thread those purges run only inside allocator calls, so a thread that
  frees much memory and then blocks keeps it resident. This thread performs
  the process-wide purges when they are due, and nothing else:

  - started lazily: the first note of a pending purge asks for it, and it is
    created at the next *safe point* (the end of a free that gave a page back,
    or of a collection), because creating a thread may call malloc (glibc
    allocates the thread's TLS vector) and must not do so in the middle of an
    allocator operation;
  - it sleeps until the earliest pending expiry; with nothing pending it waits
    on the OS event (prim.h) without a time limit, and a note wakes it (a note
    costs one fence and one load while the thread is busy or not started);
  - it runs only the lock-free process-wide paths that every allocating thread
    runs too (region purge, abandoned sweep), never allocates, owns no heap;
  - detached, all signals blocked: it never runs a signal handler; it ends
    when the last thread with a heap is torn down (init.c counts them), so it
    does not keep alive a process whose threads all left with pthread_exit; disabling the option sends it to sleep at its next
    wake-up and stops notes from waking it;
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

#define MI_PURGER_NONE      (0)   // not started
#define MI_PURGER_WANTED    (1)   // a purge is pending: start at the next safe point
#define MI_PURGER_STARTING  (2)
#define MI_PURGER_RUNNING   (3)
#define MI_PURGER_FAILED    (4)   // could not start: purges wait for allocator calls

_Atomic(uintptr_t) _mi_purger_state;        // read inline by _mi_purger_poll
static _Atomic(uintptr_t) mi_purger_idle;   // the thread waits without a time limit
static _Atomic(size_t) mi_purger_wakeups;   // wake-ups so far (tests and statistics)

static bool mi_purger_enabled(void) {
  return mi_option_is_enabled(mi_option_background_purge);
}

// The earliest pending expiry of the process-wide purges (0: none).
static int64_t mi_purger_next_due(void) {
  const int64_t a = _mi_region_purge_next();
  const int64_t b = _mi_segments_sweep_next();
  if (a == 0) return b;
  if (b == 0) return a;
  return (a < b ? a : b);
}

static void mi_purger_main(void* arg) {
  (void)arg;
  for (;;) {
    mi_atomic_add_relaxed(&mi_purger_wakeups, 1);
    if (_mi_thread_live_count() == 0) {
      // the program's threads are gone (pthread_exit): end, so the process can end;
      // a later note (a new thread frees) starts a new one
      mi_atomic_store_release(&_mi_purger_state, MI_PURGER_NONE);
      return;
    }
    int64_t next = 0;
    if (mi_purger_enabled()) {
      _mi_segments_try_sweep_abandoned();
      _mi_region_try_purge();
      next = mi_purger_next_due();
    }
    if (next == 0) {
      // nothing pending (or disabled): sleep until a note wakes us; the fence
      // pairs with the one in _mi_purger_note, so a purge noted after our
      // check sees us idle and signals (the event is sticky)
      mi_atomic_store_relaxed(&mi_purger_idle, 1);
      mi_atomic_fence_seq_cst();
      if (!mi_purger_enabled() || mi_purger_next_due() == 0) _mi_prim_event_wait(-1);
      mi_atomic_store_relaxed(&mi_purger_idle, 0);
      continue;
    }
    const int64_t wait = next - _mi_prim_clock_now();
    if (wait > 0) _mi_prim_event_wait(wait + 1);
  }
}

// A purge became pending in a region or in the abandoned set.
void _mi_purger_note(void) {
  const uintptr_t state = mi_atomic_load_relaxed(&_mi_purger_state);
  if (state == MI_PURGER_RUNNING) {
    mi_atomic_fence_seq_cst();
    if (mi_atomic_load_relaxed(&mi_purger_idle) != 0 && mi_purger_enabled()) _mi_prim_event_signal();
  }
  else if (state == MI_PURGER_NONE && mi_purger_enabled()) {
    uintptr_t expected = MI_PURGER_NONE;
    mi_atomic_cas_strong_acq_rel(&_mi_purger_state, &expected, MI_PURGER_WANTED);
  }
}

// At a safe point, with the state WANTED: start the thread.
void _mi_purger_start(void) {
  uintptr_t expected = MI_PURGER_WANTED;
  if (!mi_atomic_cas_strong_acq_rel(&_mi_purger_state, &expected, MI_PURGER_STARTING)) return;
  if (!mi_purger_enabled() || _mi_thread_live_count() == 0) {   // (it would end at once)
    mi_atomic_store_release(&_mi_purger_state, MI_PURGER_NONE);
    return;
  }
  mi_atomic_store_release(&_mi_purger_state, MI_PURGER_RUNNING);   // (before the thread can look)
  const int err = _mi_prim_thread_start(&mi_purger_main, NULL);
  if (err != 0) {
    mi_atomic_store_release(&_mi_purger_state, MI_PURGER_FAILED);
    _mi_warning_message("cannot start the background purge thread (error %d); freed memory is purged on allocator calls\n", err);
    return;
  }
  _mi_verbose_message("background purge thread started (purge delay %lld ms)\n", (long long)_mi_purge_delay());
}

// The last thread with a heap is ending: wake the thread, which then ends.
void _mi_purger_last_thread(void) {
  if (mi_atomic_load_relaxed(&_mi_purger_state) == MI_PURGER_RUNNING) _mi_prim_event_signal();
}

// Times the thread woke up (0: never started).
size_t _mi_purger_wakeups(void) {
  return mi_atomic_load_relaxed(&mi_purger_wakeups);
}

// In a forked child: the thread does not exist here.
void _mi_purger_fork_child(void) {
  _mi_prim_event_reset();
  mi_atomic_store_relaxed(&mi_purger_idle, 0);
  const uintptr_t state = mi_atomic_load_relaxed(&_mi_purger_state);
  if (state == MI_PURGER_RUNNING || state == MI_PURGER_STARTING) {
    mi_atomic_store_relaxed(&_mi_purger_state, MI_PURGER_WANTED);   // the child starts its own
  }
}
