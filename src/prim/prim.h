/* ----------------------------------------------------------------------------
  prim.h -- the contract between the allocator and an operating system.

  Everything the core needs from the OS is declared here; one file per OS
  implements it (src/prim/unix.c for Linux and other Unix systems,
  src/prim/windows.c for Windows). No other
  file uses an OS call or an OS `#if`. To port the allocator, implement these
  functions and nothing else.

  Conventions: sizes and addresses passed in are multiples of the OS page size
  (`_mi_prim_page_size`). Functions returning int return 0 on success or an
  errno value, and leave `errno` itself as they found it (they run inside
  free, which must keep it); they never print (the caller decides what to
  report).
-----------------------------------------------------------------------------*/
#pragma once
#ifndef MIMALLOC_PRIM_H
#define MIMALLOC_PRIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

// What the OS is like, filled by _mi_prim_init.
typedef struct mi_prim_config_s {
  size_t page_size;         // the OS page size
  size_t large_page_size;   // the size of a large OS page (2 MiB on x86-64)
  bool   has_overcommit;    // committed memory costs nothing until touched (Linux:
                            // MAP_NORESERVE); Windows charges every committed
                            // byte against the system's commit limit
  bool   has_populate;      // _mi_prim_populate can fault a range in (else ENOSYS)
  size_t cpu_count;         // the processors the process may run on, at start (1 where unknown)
} mi_prim_config_t;

// Called once at process start (it may be called again: it only reads).
void _mi_prim_init(mi_prim_config_t* config);

// Map `size` fresh bytes of anonymous, private memory. With `commit` the memory
// is readable and writable, else inaccessible (reserved). `hint` is a preferred
// address (not forced; may be NULL). `try_large`: try large OS pages first
// (Linux: MAP_HUGETLB 2 MiB pages, which are fixed: never purged or
// protected); if the OS refuses, map normal pages and advise transparent huge
// pages (_mi_prim_advise_huge). On success *addr is set and *is_zero tells if
// the memory is known zero; *is_pinned if fixed large OS pages were used
// (pinned: never purged or protected).
int _mi_prim_alloc(void* hint, size_t size, bool commit, bool try_large,
                   void** addr, bool* is_pinned, bool* is_zero);

// Map `size` bytes (as _mi_prim_alloc, without large pages) at an address
// `a` with `(a + align_offset) % alignment == 0` (`alignment` a power of
// two). ENOSYS where the OS has no such call and unmaps parts of a mapping
// (_mi_prim_free): the caller then maps more than it needs and trims the
// ends. Windows, which releases only whole reservations, implements it.
int _mi_prim_alloc_aligned(size_t size, size_t alignment, size_t align_offset, bool commit,
                           void** addr, bool* is_zero);

// Map `size` bytes of fixed huge OS pages of `page_size` bytes each (a power
// of two; `size` a multiple of it; Linux: MAP_HUGETLB with the page size
// encoded, as MAP_HUGE_1GB and MAP_HUGE_2MB), readable, writable and zero,
// taken from the OS's pool of such pages at once (no MAP_NORESERVE: a later
// touch cannot fail). `hint` is the wanted address, not forced: the mapping
// may land elsewhere (aligned to `page_size`); with `fixed` it is mapped
// exactly at `hint`, over address space the caller holds there. ENOMEM when
// the pool has too few free pages of that size; ENOSYS where the OS has no
// such pages.
int _mi_prim_alloc_huge_os_pages(void* hint, size_t size, size_t page_size, bool fixed, void** addr);

// Ask the OS to back a range with large pages where it can, transparently
// (Linux: madvise MADV_HUGEPAGE). ENOSYS where there is no such advice.
int _mi_prim_advise_huge(void* addr, size_t size);

// Unmap a range obtained from `_mi_prim_alloc`, `_mi_prim_alloc_aligned` or
// `_mi_prim_alloc_huge_os_pages`: the whole of it (a part only where
// _mi_prim_alloc_aligned says ENOSYS: Windows releases whole reservations).
int _mi_prim_free(void* addr, size_t size);

// Make reserved memory accessible. *is_zero is set if the memory is known zero.
int _mi_prim_commit(void* addr, size_t size, bool* is_zero);

// Make memory inaccessible and give its physical pages and commit charge back.
int _mi_prim_decommit(void* addr, size_t size);

// Give the physical pages back but keep the range accessible; the next touch
// reads zeros. Returns 0 on success.
int _mi_prim_purge(void* addr, size_t size);

// Protect (no access) or unprotect (read/write) a range: used for guard pages.
int _mi_prim_protect(void* addr, size_t size, bool protect);

// Fault in a range of accessible memory for writing in one call, as if every
// page had been written (fresh pages read as zero). ENOSYS where the OS has no
// such call (the caller then leaves the pages to fault on first touch).
int _mi_prim_populate(void* addr, size_t size);

// Set *resident to the bytes of the range that are backed by physical pages.
int _mi_prim_resident(void* addr, size_t size, size_t* resident);

// A cheap, unique, non-zero id of the calling thread: the address of its
// thread control block (Linux: the thread pointer; Windows: the TEB), the
// value the inline fast version in mimalloc-internal.h reads in one load.
uintptr_t _mi_prim_thread_id(void);

// Monotonic milliseconds.
int64_t _mi_prim_clock_now(void);

// Fill `buf` with `len` bytes of OS randomness. Returns false if unavailable.
bool _mi_prim_random_buf(void* buf, size_t len);

// Register `fn` to run with `value` when the calling thread exits (once per
// thread; the value is set with _mi_prim_thread_set_exit_value).
void _mi_prim_thread_init_auto_done(void (*fn)(void*));
void _mi_prim_thread_set_exit_value(void* value);

// Run `prepare` before every fork() in the forking thread, then `parent` in
// the parent and `child` in the child after it (pthread_atfork).
void _mi_prim_fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void));

// Write a message to the standard error stream, without allocating.
void _mi_prim_out_stderr(const char* msg);

// Keep a duplicate of the standard error stream as it is now (not inherited
// across exec) and write the messages of _mi_prim_out_stderr through it from
// now on, so that they reach the stream the program started with even after
// the program closed or reassigned its stderr. Best effort: without the
// duplicate, or once the program closed or replaced it, messages go to the
// current stderr.
void _mi_prim_out_stderr_keep(void);

// The process environment: a NULL-terminated array of "NAME=value" entries,
// readable without allocating, or NULL while it is not available yet.
const char* const* _mi_prim_environ(void);

// The value of the wide-character environment variable `name` in *value
// (NULL if it is not set), as the C runtime keeps it. Returns 0, or EINVAL
// where the OS has no wide environment (all but Windows).
int _mi_prim_wgetenv(const unsigned short* name, const unsigned short** value);

// What the OS knows of the process (0 where it cannot tell): CPU time in
// user and system mode, the resident set size now and at its peak (never
// below the current one), and the page faults that needed I/O.
typedef struct mi_prim_process_info_s {
  size_t user_msecs;
  size_t system_msecs;
  size_t current_rss;
  size_t peak_rss;
  size_t page_faults;
} mi_prim_process_info_t;
void _mi_prim_process_info(mi_prim_process_info_t* info);

// The process id.
long _mi_prim_process_id(void);

// Start a detached thread that runs fn(arg), with all signals blocked (it
// never runs a signal handler and does not keep the process alive). At most a
// few starts may be under way at once (EAGAIN beyond). May allocate through
// malloc (the C library's thread set-up): call it where malloc is allowed.
// Returns 0 or an errno value. Sleep the calling thread for `msecs`.
int  _mi_prim_thread_start(void (*fn)(void*), void* arg);
void _mi_prim_sleep(int64_t msecs);

// Block every signal of the calling thread (no handler runs on it), keeping
// the mask it had in `saved`; `restore` puts that mask back.
typedef struct mi_prim_sigmask_s { uint64_t words[16]; } mi_prim_sigmask_t;
void _mi_prim_thread_signals_block(mi_prim_sigmask_t* saved);
void _mi_prim_thread_signals_restore(const mi_prim_sigmask_t* saved);

// One process-wide wake-up event for the background purge thread: `wait`
// blocks until the event is signalled (then clears it) or `msecs` pass
// (msecs < 0: no time limit); `signal` sets it and wakes the waiter. Neither
// allocates, and `signal` takes no lock: it is async-signal-safe (it runs
// inside free, which a signal handler may call while the interrupted code of
// the same thread is inside `signal`). `reset` re-initialises it (in a forked
// child).
void _mi_prim_event_wait(int64_t msecs);
void _mi_prim_event_signal(void);
void _mi_prim_event_reset(void);

// Sleep while the 32-bit word at `addr` still reads `expected` (it may return
// early: callers look again), and wake every sleeper on `addr`. Neither
// allocates or takes a lock (async-signal-safe). Linux: a futex; other
// systems: a yield.
void _mi_prim_word_wait(const uint32_t* addr, uint32_t expected);
void _mi_prim_word_wake(const uint32_t* addr);

// Write `size` bytes to the file `path`: created or truncated, or appended to
// with `append`. Returns 0 or an errno value.
int _mi_prim_file_write(const char* path, const void* data, size_t size, bool append);

// The return addresses of the calling thread's stack, innermost first, at
// most `max`; returns how many. Does not allocate once
// _mi_prim_backtrace_init ran (which may: call it where malloc is allowed).
void   _mi_prim_backtrace_init(void);
size_t _mi_prim_backtrace(void** frames, size_t max);

// Visit the file-backed executable mappings of the process (Linux:
// /proc/self/maps) without allocating: start and end address, the offset in
// the file, the file's path. The visitor returns false to stop. Returns 0 or
// an errno value (ENOSYS where the OS cannot tell).
typedef bool (mi_prim_mapping_fun)(uintptr_t start, uintptr_t end, uintptr_t offset, const char* path, void* arg);
int _mi_prim_visit_mappings(mi_prim_mapping_fun* visit, void* arg);

// The absolute path of the existing file `fname`, with no symbolic link,
// "." or ".." in it (POSIX realpath), into `buf` of `size` bytes. Returns 0 or
// an errno value (ENOENT: no such file; ENAMETOOLONG: `buf` is too small).
int _mi_prim_realpath(const char* fname, char* buf, size_t size);

// The path of the program's executable file into `buf`; false if unknown.
bool _mi_prim_executable_path(char* buf, size_t size);

// The name of the function whose code contains `addr`, from the dynamic
// symbol tables of the loaded objects (exported functions only); false if
// there is none. Takes the dynamic loader's lock: not for use inside malloc.
bool _mi_prim_symbol_name(const void* addr, char* buf, size_t size);

// Number of NUMA nodes the OS reports (1 where it cannot tell).
size_t _mi_prim_numa_node_count(void);

// The NUMA node of the CPU the calling thread runs on (0 where unknown).
size_t _mi_prim_numa_node(void);

// Make `node` the preferred node of a range's future pages (Linux: mbind
// MPOL_PREFERRED). Returns 0 or an errno value (ENOSYS where unsupported).
int _mi_prim_numa_prefer(void* addr, size_t size, size_t node);

#endif
