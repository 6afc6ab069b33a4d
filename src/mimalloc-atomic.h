/* ----------------------------------------------------------------------------
  mimalloc-atomic.h -- the named memory orders.

  Every atomic access in the allocator goes through one of these wrappers so
  that each ordering is a visible decision at the call site. We use C11
  <stdatomic.h> directly; nothing else in the tree includes it.
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MIMALLOC_ATOMIC_H
#define MIMALLOC_ATOMIC_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdbool.h>

#define mi_atomic(name)        atomic_##name##_explicit
#define mi_memory_order(name)  memory_order_##name

#define mi_atomic_load_relaxed(p)                mi_atomic(load)(p, mi_memory_order(relaxed))
#define mi_atomic_load_acquire(p)                mi_atomic(load)(p, mi_memory_order(acquire))
#define mi_atomic_store_relaxed(p,x)             mi_atomic(store)(p, x, mi_memory_order(relaxed))
#define mi_atomic_store_release(p,x)             mi_atomic(store)(p, x, mi_memory_order(release))
#define mi_atomic_exchange_acq_rel(p,x)          mi_atomic(exchange)(p, x, mi_memory_order(acq_rel))
#define mi_atomic_add_relaxed(p,x)               mi_atomic(fetch_add)(p, x, mi_memory_order(relaxed))
#define mi_atomic_sub_relaxed(p,x)               mi_atomic(fetch_sub)(p, x, mi_memory_order(relaxed))
#define mi_atomic_add_acq_rel(p,x)               mi_atomic(fetch_add)(p, x, mi_memory_order(acq_rel))
#define mi_atomic_sub_acq_rel(p,x)               mi_atomic(fetch_sub)(p, x, mi_memory_order(acq_rel))
#define mi_atomic_or_acq_rel(p,x)                mi_atomic(fetch_or)(p, x, mi_memory_order(acq_rel))
#define mi_atomic_and_acq_rel(p,x)               mi_atomic(fetch_and)(p, x, mi_memory_order(acq_rel))

// CAS: on failure `*expected` receives the current value.
#define mi_atomic_cas_weak_release(p,expected,desired) \
  mi_atomic(compare_exchange_weak)(p, expected, desired, mi_memory_order(release), mi_memory_order(relaxed))
#define mi_atomic_cas_weak_acq_rel(p,expected,desired) \
  mi_atomic(compare_exchange_weak)(p, expected, desired, mi_memory_order(acq_rel), mi_memory_order(acquire))
#define mi_atomic_cas_strong_acq_rel(p,expected,desired) \
  mi_atomic(compare_exchange_strong)(p, expected, desired, mi_memory_order(acq_rel), mi_memory_order(acquire))

// A full fence: orders a store before a later load (Dekker-style hand-offs).
#define mi_atomic_fence_seq_cst()                atomic_thread_fence(mi_memory_order(seq_cst))
#define mi_atomic_signal_fence()                 atomic_signal_fence(mi_memory_order(seq_cst))   // against a signal handler of this thread

// Spin-wait hint while another thread finishes a short transition.
static inline void mi_atomic_yield(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#else
  atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif
