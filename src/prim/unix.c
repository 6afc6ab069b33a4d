/* ----------------------------------------------------------------------------
  prim/unix.c -- the OS contract (prim.h) for Linux and other Unix systems.

  Memory: anonymous private mappings with MAP_NORESERVE (commit is just an
  access right on Linux: physical pages appear on first touch). Purging uses
  MADV_DONTNEED rather than MADV_FREE: the resident size drops at once and the
  next touch reads zeros, which the allocator records (see docs/design.md).
  Decommit re-maps the range PROT_NONE, which drops pages and commit charge.

  Threads: a pthread key whose destructor runs the allocator's thread exit.
  Randomness: getrandom(2), falling back to /dev/urandom.
  Environment: `environ` itself, so it works before libc is ready.
-----------------------------------------------------------------------------*/
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "prim.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <stdlib.h>     // realpath
#include <limits.h>     // PATH_MAX
#include <time.h>
#include <signal.h>
#include <dlfcn.h>      // dladdr1
#include <link.h>       // ElfW
#if defined(__GLIBC__)
#include <execinfo.h>   // backtrace
#endif

#if defined(__linux__)
#include <sys/random.h>
#endif

#if !defined(MAP_ANONYMOUS)
#define MAP_ANONYMOUS MAP_ANON
#endif
#if !defined(MAP_NORESERVE)
#define MAP_NORESERVE 0
#endif

extern char** environ;

// ---------------------------------------------------------------------------
// Init
// ---------------------------------------------------------------------------

void _mi_prim_init(mi_prim_config_t* config) {
  long result = sysconf(_SC_PAGESIZE);
  config->page_size = (result > 0 ? (size_t)result : 4096);
  config->large_page_size = 2 * 1024 * 1024;  // assumed, as on x86-64 and aarch64 Linux
  config->has_overcommit = true;              // (mappings are MAP_NORESERVE)
  config->has_populate = true;                // (MADV_POPULATE_WRITE; an old kernel answers ENOSYS)
  // the processors the process may run on (its affinity mask, which a
  // container's cpuset narrows too), by the system call itself: sysconf's
  // count of the online ones reads sysfs, and both bring in libc code a
  // small program would not have touched otherwise (128 KiB more resident)
  size_t cpus = 1;
  #if defined(__linux__) && defined(SYS_sched_getaffinity)
  unsigned long mask[16];   // (1024 processors)
  const long bytes = syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
  if (bytes > 0) {
    size_t n = 0;
    for (size_t i = 0; i < (size_t)bytes / sizeof(unsigned long); i++) n += (size_t)__builtin_popcountl(mask[i]);
    if (n > 0) cpus = n;
  }
  else if (errno == EINVAL) {
    cpus = 1024;   // (a mask wider than 1024 processors: many)
  }
  #endif
  config->cpu_count = cpus;
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

// The calls below leave errno as they found it (they run inside malloc and
// free, and free keeps errno); a failure is returned as the errno value.
static int unix_result(bool failed, int saved_errno) {
  const int err = (failed ? errno : 0);
  errno = saved_errno;
  return err;
}

static int unix_mmap(void* hint, size_t size, int protect, int flags, void** addr) {
  const int saved = errno;
  void* p = mmap(hint, size, protect, flags, -1, 0);
  *addr = (p == MAP_FAILED ? NULL : p);
  return unix_result(p == MAP_FAILED, saved);
}

int _mi_prim_alloc(void* hint, size_t size, bool commit, bool try_large,
                   void** addr, bool* is_pinned, bool* is_zero) {
  const int protect = (commit ? PROT_READ | PROT_WRITE : PROT_NONE);
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  *is_pinned = false;
  *is_zero = true;   // fresh anonymous memory is always zero
  #if defined(MAP_HUGETLB)
  if (try_large && commit) {
    int lflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB;
    if (unix_mmap(hint, size, protect, lflags, addr) == 0) { *is_pinned = true; return 0; }
  }
  #else
  (void)try_large;
  #endif
  int err = unix_mmap(hint, size, protect, flags, addr);
  if (err == 0 && try_large) _mi_prim_advise_huge(*addr, size);
  return err;
}

int _mi_prim_alloc_aligned(size_t size, size_t alignment, size_t align_offset, bool commit,
                           void** addr, bool* is_zero) {
  (void)size; (void)alignment; (void)align_offset; (void)commit;
  *addr = NULL; *is_zero = false;
  return ENOSYS;   // a mapping is trimmed to the aligned part (munmap takes parts)
}

int _mi_prim_alloc_huge_os_pages(void* hint, size_t size, size_t page_size, bool fixed, void** addr) {
  *addr = NULL;
  #if defined(MAP_HUGETLB) && defined(__linux__)
  #if !defined(MAP_HUGE_SHIFT)
  #define MAP_HUGE_SHIFT 26   // bits 26..31 of the flags: log2 of the page size
  #endif
  if (page_size == 0 || (page_size & (page_size - 1)) != 0 || (size % page_size) != 0) return EINVAL;
  int log2 = 0;
  while (((size_t)1 << log2) < page_size) log2++;
  // no MAP_NORESERVE: the pages are taken from the pool now, so a later touch cannot fail
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (log2 << MAP_HUGE_SHIFT) | (fixed ? MAP_FIXED : 0);
  const int err = unix_mmap(hint, size, PROT_READ | PROT_WRITE, flags, addr);
  return (err == EINVAL ? ENOSYS : err);   // EINVAL: no pages of this size in this kernel
  #else
  (void)hint; (void)size; (void)page_size; (void)fixed;
  return ENOSYS;
  #endif
}

int _mi_prim_advise_huge(void* addr, size_t size) {
  #if defined(MADV_HUGEPAGE)
  const int saved = errno;
  return unix_result(madvise(addr, size, MADV_HUGEPAGE) != 0, saved);
  #else
  (void)addr; (void)size;
  return ENOSYS;
  #endif
}

int _mi_prim_free(void* addr, size_t size) {
  const int saved = errno;
  return unix_result(munmap(addr, size) == -1, saved);
}

int _mi_prim_commit(void* addr, size_t size, bool* is_zero) {
  *is_zero = false;
  const int saved = errno;
  return unix_result(mprotect(addr, size, PROT_READ | PROT_WRITE) == -1, saved);
}

int _mi_prim_decommit(void* addr, size_t size) {
  // Re-mapping over the range drops the pages and the commit charge in one call.
  const int saved = errno;
  void* p = mmap(addr, size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return unix_result(p == MAP_FAILED, saved);
}

int _mi_prim_purge(void* addr, size_t size) {
  const int saved = errno;
  int r;
  while ((r = madvise(addr, size, MADV_DONTNEED)) != 0 && errno == EAGAIN) { }
  return unix_result(r != 0, saved);
}

// Guard pages: Linux 6.13 and later install them as markers in the page
// table (madvise MADV_GUARD_INSTALL / MADV_GUARD_REMOVE): no split of the
// mapping, no exclusive lock on the address space, where mprotect does both
// (under threads that come and go, the secure profile's guards made mprotect
// the largest system cost). A purge (MADV_DONTNEED) keeps the markers, as it
// keeps an mprotect's protection. Older kernels say EINVAL: mprotect then
// (built with -DMI_NO_GUARD_MARKERS: always mprotect, as CI tests it).
#if defined(__linux__) && !defined(MI_NO_GUARD_MARKERS)
#define MI_GUARD_MARKERS 1
#if !defined(MADV_GUARD_INSTALL)
#define MADV_GUARD_INSTALL  102
#define MADV_GUARD_REMOVE   103
#endif
static int unix_guard_markers = 1;   // 1: try them, 0: not supported here
#endif

int _mi_prim_protect(void* addr, size_t size, bool protect) {
  const int saved = errno;
  #if defined(MI_GUARD_MARKERS)
  if (__atomic_load_n(&unix_guard_markers, __ATOMIC_RELAXED) != 0) {
    if (madvise(addr, size, protect ? MADV_GUARD_INSTALL : MADV_GUARD_REMOVE) == 0) return 0;
    if (errno != EINVAL) return unix_result(true, saved);
    __atomic_store_n(&unix_guard_markers, 0, __ATOMIC_RELAXED);
  }
  #endif
  return unix_result(mprotect(addr, size, protect ? PROT_NONE : (PROT_READ | PROT_WRITE)) == -1, saved);
}

int _mi_prim_populate(void* addr, size_t size) {
  #if !defined(MADV_POPULATE_WRITE) && defined(__linux__)
  #define MADV_POPULATE_WRITE 23   // Linux 5.14; older kernels say EINVAL
  #endif
  #if defined(MADV_POPULATE_WRITE)
  if (madvise(addr, size, MADV_POPULATE_WRITE) == 0) return 0;
  return (errno == EINVAL ? ENOSYS : errno);
  #else
  (void)addr; (void)size; return ENOSYS;
  #endif
}

int _mi_prim_resident(void* addr, size_t size, size_t* resident) {
  // mincore fills one byte per page: ask for at most sizeof(vec) pages a call
  unsigned char vec[4096];   // 16 MiB of 4 KiB pages per call
  const size_t psize = (size_t)sysconf(_SC_PAGESIZE);
  size_t count = 0;
  for (size_t ofs = 0; ofs < size; ofs += sizeof(vec) * psize) {
    const size_t n = (size - ofs < sizeof(vec) * psize ? size - ofs : sizeof(vec) * psize);
    if (mincore((uint8_t*)addr + ofs, n, vec) != 0) return errno;
    for (size_t i = 0; i < (n + psize - 1) / psize; i++) count += (vec[i] & 1);
  }
  *resident = count * psize;
  return 0;
}

// ---------------------------------------------------------------------------
// Threads, time, randomness
// ---------------------------------------------------------------------------

uintptr_t _mi_prim_thread_id(void) {
  return (uintptr_t)pthread_self();
}

int64_t _mi_prim_clock_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return ((int64_t)t.tv_sec * 1000) + ((int64_t)t.tv_nsec / 1000000);
}

bool _mi_prim_random_buf(void* buf, size_t len) {
  #if defined(__linux__) && defined(SYS_getrandom)
  size_t done = 0;
  while (done < len) {
    long n = syscall(SYS_getrandom, (uint8_t*)buf + done, len - done, GRND_NONBLOCK);
    if (n < 0) { if (errno == EINTR) continue; break; }
    done += (size_t)n;
  }
  if (done == len) return true;
  #endif
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t count = 0;
  while (count < len) {
    ssize_t n = read(fd, (uint8_t*)buf + count, len - count);
    if (n <= 0) { if (n < 0 && errno == EINTR) continue; break; }
    count += (size_t)n;
  }
  close(fd);
  return (count == len);
}

static pthread_key_t mi_pthread_key;
static bool mi_pthread_key_ok = false;

void _mi_prim_thread_init_auto_done(void (*fn)(void*)) {
  if (!mi_pthread_key_ok) {
    mi_pthread_key_ok = (pthread_key_create(&mi_pthread_key, fn) == 0);
  }
}

void _mi_prim_thread_set_exit_value(void* value) {
  if (mi_pthread_key_ok) pthread_setspecific(mi_pthread_key, value);
}

void _mi_prim_fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  pthread_atfork(prepare, parent, child);
}

// ---------------------------------------------------------------------------
// Output and environment
// ---------------------------------------------------------------------------

// The duplicate of stderr kept from start-up (-1: none), and the file it
// refers to, to notice when the program closed it and the number was reused.
static int   mi_stderr_fd = -1;
static dev_t mi_stderr_dev;
static ino_t mi_stderr_ino;

void _mi_prim_out_stderr_keep(void) {
  if (mi_stderr_fd >= 0) return;
  const int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return;   // stderr is closed already, or no descriptor is free
  struct stat st;
  if (fstat(fd, &st) != 0) { close(fd); return; }
  mi_stderr_dev = st.st_dev;
  mi_stderr_ino = st.st_ino;
  mi_stderr_fd = fd;
}

static int unix_stderr_fd(void) {
  const int fd = mi_stderr_fd;
  if (fd < 0) return STDERR_FILENO;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_dev != mi_stderr_dev || st.st_ino != mi_stderr_ino) {
    return STDERR_FILENO;   // the program closed our duplicate (or its number now names another file)
  }
  return fd;
}

void _mi_prim_out_stderr(const char* msg) {
  const int fd = unix_stderr_fd();
  size_t len = strlen(msg);
  while (len > 0) {
    ssize_t n = write(fd, msg, len);
    if (n <= 0) { if (n < 0 && errno == EINTR) continue; return; }
    msg += n; len -= (size_t)n;
  }
}

const char* const* _mi_prim_environ(void) {
  return (const char* const*)environ;
}

int _mi_prim_wgetenv(const unsigned short* name, const unsigned short** value) {
  (void)name;
  *value = NULL;
  return EINVAL;   // (wide environment strings are Windows')
}

static size_t unix_current_rss(void) {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  // second field: resident pages
  const char* s = buf;
  while (*s != 0 && *s != ' ') s++;
  while (*s == ' ') s++;
  size_t pages = 0;
  while (*s >= '0' && *s <= '9') { pages = pages * 10 + (size_t)(*s - '0'); s++; }
  long psize = sysconf(_SC_PAGESIZE);
  return pages * (size_t)(psize > 0 ? psize : 4096);
}

void _mi_prim_process_info(mi_prim_process_info_t* info) {
  struct rusage usage;
  memset(&usage, 0, sizeof(usage));
  getrusage(RUSAGE_SELF, &usage);
  info->user_msecs = (size_t)usage.ru_utime.tv_sec * 1000 + (size_t)usage.ru_utime.tv_usec / 1000;
  info->system_msecs = (size_t)usage.ru_stime.tv_sec * 1000 + (size_t)usage.ru_stime.tv_usec / 1000;
  info->current_rss = unix_current_rss();
  info->peak_rss = (size_t)usage.ru_maxrss * 1024;   // Linux: KiB, and updated lazily
  if (info->peak_rss < info->current_rss) info->peak_rss = info->current_rss;
  info->page_faults = (size_t)usage.ru_majflt;
}

// ---------------------------------------------------------------------------
// Files, stacks and mappings (the heap profiler and the statistics file)
// ---------------------------------------------------------------------------

long _mi_prim_process_id(void) {
  return (long)getpid();
}

// Start slots: the new thread copies its function and argument, then frees
// its slot (the statistics writer and the background purge thread).
#define UNIX_THREAD_SLOTS 4
typedef struct unix_thread_start_s {
  int busy;   // (read and written with the compiler's __atomic builtins)
  void (*fn)(void*);
  void* arg;
} unix_thread_start_t;
static unix_thread_start_t unix_thread_start[UNIX_THREAD_SLOTS];

static void* unix_thread_main(void* p) {
  unix_thread_start_t* start = (unix_thread_start_t*)p;
  void (*fn)(void*) = start->fn;
  void* arg = start->arg;
  __atomic_store_n(&start->busy, 0, __ATOMIC_RELEASE);
  fn(arg);
  return NULL;
}

int _mi_prim_thread_start(void (*fn)(void*), void* arg) {
  unix_thread_start_t* start = NULL;
  for (size_t i = 0; i < UNIX_THREAD_SLOTS && start == NULL; i++) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&unix_thread_start[i].busy, &expected, 1, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      start = &unix_thread_start[i];
    }
  }
  if (start == NULL) return EAGAIN;
  start->fn = fn;
  start->arg = arg;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);   // the new thread inherits the mask
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  const int saved = errno;
  const int err = pthread_create(&thread, &attr, &unix_thread_main, start);
  errno = saved;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err != 0) __atomic_store_n(&start->busy, 0, __ATOMIC_RELEASE);
  return err;
}

_Static_assert(sizeof(sigset_t) <= sizeof(mi_prim_sigmask_t), "mi_prim_sigmask_t holds a sigset_t");

void _mi_prim_thread_signals_block(mi_prim_sigmask_t* saved) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, (sigset_t*)saved);
}

void _mi_prim_thread_signals_restore(const mi_prim_sigmask_t* saved) {
  pthread_sigmask(SIG_SETMASK, (const sigset_t*)saved, NULL);
}

// The event: one word, 1 when signalled. Waiting and waking take no lock, so
// signalling is async-signal-safe (a free inside a signal handler may wake
// the purge thread while the interrupted code of the same thread was doing
// so too: a mutex here could deadlock). Linux: a futex on the word; other
// systems: a POSIX semaphore (sem_post is async-signal-safe), polled with a
// timed wait.
static int unix_event_word;

#if defined(__linux__)
#include <linux/futex.h>

void _mi_prim_event_wait(int64_t msecs) {
  const int saved = errno;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  if (msecs >= 0) {
    until.tv_sec += (time_t)(msecs / 1000);
    until.tv_nsec += (long)(msecs % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
  }
  while (__atomic_exchange_n(&unix_event_word, 0, __ATOMIC_ACQ_REL) == 0) {
    // FUTEX_WAIT_BITSET takes an absolute time on the clock chosen (monotonic by default)
    const long r = syscall(SYS_futex, &unix_event_word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0,
                           (msecs >= 0 ? &until : NULL), NULL, FUTEX_BITSET_MATCH_ANY);
    if (r != 0 && errno == ETIMEDOUT) break;
  }
  errno = saved;
}

void _mi_prim_event_signal(void) {
  const int saved = errno;
  __atomic_store_n(&unix_event_word, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &unix_event_word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
  errno = saved;
}

void _mi_prim_event_reset(void) {
  __atomic_store_n(&unix_event_word, 0, __ATOMIC_RELAXED);
}

#else
#include <semaphore.h>
#include <sched.h>
static sem_t unix_event_sem;
static int unix_event_ready;     // 2: the semaphore is initialised (1: being initialised)

static void unix_event_init(void) {
  int expected = 0;
  if (__atomic_compare_exchange_n(&unix_event_ready, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    sem_init(&unix_event_sem, 0, 0);
    __atomic_store_n(&unix_event_ready, 2, __ATOMIC_RELEASE);
  }
  while (__atomic_load_n(&unix_event_ready, __ATOMIC_ACQUIRE) != 2) sched_yield();
}

void _mi_prim_event_wait(int64_t msecs) {
  const int saved = errno;
  unix_event_init();
  // sleep in slices of at most 50 ms on the semaphore (its timed wait is on
  // the real-time clock, which may jump)
  const int64_t until = _mi_prim_clock_now() + msecs;
  while (__atomic_exchange_n(&unix_event_word, 0, __ATOMIC_ACQ_REL) == 0) {
    int64_t left = (msecs < 0 ? 50 : until - _mi_prim_clock_now());
    if (left <= 0) break;
    if (left > 50) left = 50;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)left * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    sem_timedwait(&unix_event_sem, &ts);
  }
  errno = saved;
}

void _mi_prim_event_signal(void) {
  const int saved = errno;
  __atomic_store_n(&unix_event_word, 1, __ATOMIC_RELEASE);
  if (__atomic_load_n(&unix_event_ready, __ATOMIC_ACQUIRE) == 2) sem_post(&unix_event_sem);
  errno = saved;
}

void _mi_prim_event_reset(void) {
  __atomic_store_n(&unix_event_word, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&unix_event_ready, 0, __ATOMIC_RELAXED);   // (a fresh semaphore in the child)
}
#endif

#if defined(__linux__)
void _mi_prim_word_wait(const uint32_t* addr, uint32_t expected) {
  const int saved = errno;
  syscall(SYS_futex, addr, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, expected, NULL, NULL, 0);
  errno = saved;
}

void _mi_prim_word_wake(const uint32_t* addr) {
  const int saved = errno;
  syscall(SYS_futex, addr, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT32_MAX, NULL, NULL, 0);
  errno = saved;
}
#else
void _mi_prim_word_wait(const uint32_t* addr, uint32_t expected) {
  (void)addr; (void)expected;
  sched_yield();
}

void _mi_prim_word_wake(const uint32_t* addr) {
  (void)addr;
}
#endif

void _mi_prim_sleep(int64_t msecs) {
  struct timespec ts = { (time_t)(msecs / 1000), (long)(msecs % 1000) * 1000000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) { /* the rest */ }
}

int _mi_prim_file_write(const char* path, const void* data, size_t size, bool append) {
  const int saved_errno = errno;
  const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0) return unix_result(true, saved_errno);
  int err = 0;
  const uint8_t* p = (const uint8_t*)data;
  while (size > 0 && err == 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) { err = (n < 0 ? errno : EIO); break; }
    p += n; size -= (size_t)n;
  }
  if (close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  errno = saved_errno;
  return err;
}

// glibc's backtrace unwinds with the unwinder of libgcc_s (the tables every
// binary carries for C++ exceptions), so it works without frame pointers; its
// first call loads libgcc_s, which allocates.
void _mi_prim_backtrace_init(void) {
  #if defined(__GLIBC__)
  void* frames[2];
  (void)backtrace(frames, 2);
  #endif
}

size_t _mi_prim_backtrace(void** frames, size_t max) {
  #if defined(__GLIBC__)
  const int n = backtrace(frames, (int)max);
  return (n > 0 ? (size_t)n : 0);
  #else
  (void)frames; (void)max;
  return 0;
  #endif
}

static uintptr_t unix_parse_hex(const char** s) {
  uintptr_t x = 0;
  for (;; (*s)++) {
    const char c = **s;
    if (c >= '0' && c <= '9') x = x * 16 + (uintptr_t)(c - '0');
    else if (c >= 'a' && c <= 'f') x = x * 16 + (uintptr_t)(c - 'a' + 10);
    else return x;
  }
}

// One line of /proc/self/maps: "start-end perms offset dev inode   path".
static bool unix_visit_maps_line(char* line, mi_prim_mapping_fun* visit, void* arg) {
  const char* s = line;
  const uintptr_t start = unix_parse_hex(&s);
  if (*s++ != '-') return true;
  const uintptr_t end = unix_parse_hex(&s);
  if (*s++ != ' ') return true;
  const bool exec = (s[0] != 0 && s[1] != 0 && s[2] == 'x');
  while (*s != 0 && *s != ' ') s++;
  while (*s == ' ') s++;
  const uintptr_t offset = unix_parse_hex(&s);
  for (int field = 0; field < 2; field++) {   // device, inode
    while (*s == ' ') s++;
    while (*s != 0 && *s != ' ') s++;
  }
  while (*s == ' ') s++;
  if (!exec || *s != '/') return true;       // anonymous, [vdso], [stack], ...
  return visit(start, end, offset, s, arg);
}

int _mi_prim_visit_mappings(mi_prim_mapping_fun* visit, void* arg) {
  #if defined(__linux__)
  const int saved_errno = errno;
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return unix_result(true, saved_errno);
  char buf[4096 + 1];   // a longer line (a path near PATH_MAX) is skipped
  size_t len = 0;
  bool skipping = false, go_on = true;
  while (go_on) {
    const ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
    buf[len] = 0;
    char* line = buf;
    char* nl;
    while (go_on && (nl = strchr(line, '\n')) != NULL) {
      *nl = 0;
      if (!skipping) go_on = unix_visit_maps_line(line, visit, arg);
      skipping = false;
      line = nl + 1;
    }
    len = (size_t)(buf + len - line);
    memmove(buf, line, len);
    if (len == sizeof(buf) - 1) { len = 0; skipping = true; }
  }
  close(fd);
  errno = saved_errno;
  return 0;
  #else
  (void)visit; (void)arg;
  return ENOSYS;
  #endif
}

int _mi_prim_realpath(const char* fname, char* buf, size_t size) {
  #if !defined(PATH_MAX)
  #define PATH_MAX 4096
  #endif
  char path[PATH_MAX + 1];
  const int saved = errno;
  if (realpath(fname, path) == NULL) return unix_result(true, saved);
  const size_t n = strlen(path);
  if (n + 1 > size) return ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  return 0;
}

bool _mi_prim_executable_path(char* buf, size_t size) {
  if (size == 0) return false;
  const int saved_errno = errno;
  const ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  errno = saved_errno;
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

bool _mi_prim_symbol_name(const void* addr, char* buf, size_t size) {
  #if defined(__GLIBC__)
  Dl_info info;
  const ElfW(Sym)* sym = NULL;
  if (dladdr1(addr, &info, (void**)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL || info.dli_sname == NULL) return false;
  // dladdr names the nearest symbol below: only take it if its code holds addr
  const uintptr_t start = (uintptr_t)info.dli_saddr;
  if ((uintptr_t)addr < start || (uintptr_t)addr >= start + sym->st_size) return false;
  const size_t n = strlen(info.dli_sname);
  if (n + 1 > size) return false;
  memcpy(buf, info.dli_sname, n + 1);
  return true;
  #else
  (void)addr; (void)buf; (void)size;
  return false;
  #endif
}

// ---------------------------------------------------------------------------
// NUMA
// ---------------------------------------------------------------------------

size_t _mi_prim_numa_node_count(void) {
  // count consecutive /sys/devices/system/node/nodeK directories
  static const char prefix[] = "/sys/devices/system/node/node";
  char buf[sizeof(prefix) + 24];
  size_t node = 0;
  const int saved = errno;   // (access sets it for the node that is not there)
  for (;;) {
    // format prefix + (node+1) without stdio (this may run before libc is ready)
    char digits[24];
    size_t n = 0;
    for (size_t v = node + 1; v > 0; v /= 10) digits[n++] = (char)('0' + (v % 10));
    memcpy(buf, prefix, sizeof(prefix) - 1);
    for (size_t i = 0; i < n; i++) buf[sizeof(prefix) - 1 + i] = digits[n - 1 - i];
    buf[sizeof(prefix) - 1 + n] = 0;
    if (access(buf, R_OK) != 0) break;
    node++;
  }
  errno = saved;
  return node + 1;
}

size_t _mi_prim_numa_node(void) {
  #if defined(__linux__) && defined(SYS_getcpu)
  unsigned cpu = 0, node = 0;
  const int saved = errno;
  const long err = syscall(SYS_getcpu, &cpu, &node, NULL);
  errno = saved;
  return (err == 0 ? (size_t)node : 0);
  #else
  return 0;
  #endif
}

int _mi_prim_numa_prefer(void* addr, size_t size, size_t node) {
  #if defined(__linux__) && defined(SYS_mbind)
  if (node >= 64) return EINVAL;
  const unsigned long mask = 1UL << node;
  const int mpol_preferred = 1;   // MPOL_PREFERRED (numaif.h, which needs libnuma)
  const int saved = errno;
  const long err = syscall(SYS_mbind, addr, size, mpol_preferred, &mask, 64UL, 0U);
  return unix_result(err != 0, saved);
  #else
  (void)addr; (void)size; (void)node;
  return ENOSYS;
  #endif
}
