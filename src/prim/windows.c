/* ----------------------------------------------------------------------------
  prim/windows.c -- the OS contract (prim.h) for Windows (x86-64; built with
  mingw-w64, tested under wine).

  Memory: VirtualAlloc reservations. Windows differs from Linux in three ways
  that shape this file:
  - a reservation is released whole (VirtualFree MEM_RELEASE takes its base
    and no size), so the over-allocate-and-trim way to an aligned address is
    not open: aligned reservations come from VirtualAlloc2 with an address
    requirement, or else from reserving a larger range, releasing it and
    reserving the aligned address inside it again (retried if another thread
    took it meanwhile; nothing leaks);
  - commit is real: committed memory counts against the system's commit
    limit, so "decommit" (MEM_DECOMMIT) is what gives memory back;
  - there is no madvise(MADV_DONTNEED): MEM_RESET and DiscardVirtualMemory
    drop the pages but leave their contents undefined (old data or zeros),
    where the contract promises zeros. A purge is therefore a decommit and
    a recommit with the protection each part had (guard pages stay guards).
  Protection, commit and decommit apply within one reservation; every range
  the core passes lies inside one (a region, a segment, a huge block).

  Threads: the thread id is the address of the thread's TEB (one gs-relative
  load, mimalloc-internal.h); thread exit runs through a fiber-local-storage
  destructor (FlsAlloc), which Windows calls on every thread's exit, however
  it was created (CreateThread, _beginthreadex, a thread pool), and for the
  thread that calls ExitProcess.
  Randomness: BCryptGenRandom (RtlGenRandom as a fallback).
  Environment: the C runtime's `_environ`, or a snapshot of the process
  environment where the runtime has not built it (a wide-character program).
  What has no Windows counterpart is a no-op or ENOSYS, as prim.h allows:
  fork handlers, signal masks, transparent huge pages, populate; NUMA
  preference for an existing range (Windows places pages on the node of the
  thread that first touches them).
-----------------------------------------------------------------------------*/
#include "prim.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#include <psapi.h>
#include <bcrypt.h>
#include <errno.h>
#include <string.h>
#include <stdlib.h>   // _environ

// ---------------------------------------------------------------------------
// Functions that not every Windows version has, looked up once
// ---------------------------------------------------------------------------

typedef PVOID (WINAPI* win_virtual_alloc2_t)(HANDLE, PVOID, SIZE_T, ULONG, ULONG, MEM_EXTENDED_PARAMETER*, ULONG);
typedef BOOL  (WINAPI* win_wait_on_address_t)(volatile VOID*, PVOID, SIZE_T, DWORD);
typedef VOID  (WINAPI* win_wake_by_address_t)(PVOID);
typedef BOOL  (WINAPI* win_numa_node_ex_t)(PPROCESSOR_NUMBER, PUSHORT);
typedef VOID  (WINAPI* win_processor_number_ex_t)(PPROCESSOR_NUMBER);

static win_virtual_alloc2_t      win_virtual_alloc2;
static win_wait_on_address_t     win_wait_on_address;
static win_wake_by_address_t     win_wake_by_address_all;
static win_numa_node_ex_t        win_numa_node_ex;
static win_processor_number_ex_t win_processor_number_ex;
static volatile LONG             win_functions_done;   // 2: looked up (1: being looked up)

static FARPROC win_lookup(HMODULE mod, const char* name) {
  return (mod == NULL ? NULL : GetProcAddress(mod, name));
}

static void win_functions_init(void) {
  if (win_functions_done == 2) return;
  if (InterlockedCompareExchange(&win_functions_done, 1, 0) == 0) {
    HMODULE kernelbase = GetModuleHandleW(L"kernelbase.dll");
    HMODULE kernel32 = GetModuleHandleW(L"kernel32.dll");
    win_virtual_alloc2 = (win_virtual_alloc2_t)(void*)win_lookup(kernelbase, "VirtualAlloc2");
    win_wait_on_address = (win_wait_on_address_t)(void*)win_lookup(kernelbase, "WaitOnAddress");
    win_wake_by_address_all = (win_wake_by_address_t)(void*)win_lookup(kernelbase, "WakeByAddressAll");
    win_numa_node_ex = (win_numa_node_ex_t)(void*)win_lookup(kernel32, "GetNumaProcessorNodeEx");
    win_processor_number_ex = (win_processor_number_ex_t)(void*)win_lookup(kernel32, "GetCurrentProcessorNumberEx");
    if (win_wait_on_address == NULL || win_wake_by_address_all == NULL) {
      win_wait_on_address = NULL;
      win_wake_by_address_all = NULL;
    }
    InterlockedExchange(&win_functions_done, 2);
  }
  while (win_functions_done != 2) SwitchToThread();
}

// A Windows error as an errno value.
static int win_errno(DWORD err) {
  switch (err) {
    case ERROR_SUCCESS:               return 0;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
    case ERROR_COMMITMENT_LIMIT:
    case ERROR_NO_SYSTEM_RESOURCES:   return ENOMEM;
    case ERROR_PRIVILEGE_NOT_HELD:
    case ERROR_ACCESS_DENIED:         return EPERM;
    case ERROR_INVALID_ADDRESS:
    case ERROR_INVALID_PARAMETER:     return EINVAL;
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:        return ENOENT;
    case ERROR_NOT_SUPPORTED:
    case ERROR_CALL_NOT_IMPLEMENTED:  return ENOSYS;
    case ERROR_DISK_FULL:             return ENOSPC;
    case ERROR_FILENAME_EXCED_RANGE:  return ENAMETOOLONG;
    default:                          return EIO;
  }
}

static int win_last_errno(void) {
  return win_errno(GetLastError());
}

// ---------------------------------------------------------------------------
// Init
// ---------------------------------------------------------------------------

static size_t win_page_size = 4096;
static size_t win_alloc_granularity = 64 * 1024;   // reservations start at multiples of it

void _mi_prim_init(mi_prim_config_t* config) {
  win_functions_init();
  SYSTEM_INFO si;
  GetSystemInfo(&si);
  if (si.dwPageSize > 0) win_page_size = si.dwPageSize;
  if (si.dwAllocationGranularity > 0) win_alloc_granularity = si.dwAllocationGranularity;
  config->page_size = win_page_size;
  const SIZE_T large = GetLargePageMinimum();
  config->large_page_size = (large > 0 ? (size_t)large : 2 * 1024 * 1024);
  config->has_overcommit = false;   // commit is charged
  config->has_populate = false;     // (_mi_prim_populate: ENOSYS)
  config->cpu_count = (si.dwNumberOfProcessors > 0 ? (size_t)si.dwNumberOfProcessors : 1);
}

// ---------------------------------------------------------------------------
// Large OS pages: they need the "lock pages in memory" privilege, which the
// process token has only where an administrator granted it; it must also be
// enabled, once. 0: not tried yet, 1: enabled, -1: refused (with the error).
// ---------------------------------------------------------------------------

static volatile LONG win_large_state;
static volatile LONG win_large_error;

static bool win_large_pages_enable(void) {
  if (win_large_state != 0) return (win_large_state > 0);
  DWORD err = ERROR_SUCCESS;
  HANDLE token = NULL;
  if (!OpenProcessToken(GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &token)) {
    err = GetLastError();
  }
  else {
    TOKEN_PRIVILEGES tp;
    memset(&tp, 0, sizeof(tp));
    if (!LookupPrivilegeValueW(NULL, L"SeLockMemoryPrivilege", &tp.Privileges[0].Luid)) {
      err = GetLastError();
    }
    else {
      tp.PrivilegeCount = 1;
      tp.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
      // (AdjustTokenPrivileges succeeds without enabling a privilege the
      // token does not have: ERROR_NOT_ALL_ASSIGNED tells)
      if (!AdjustTokenPrivileges(token, FALSE, &tp, 0, NULL, NULL)) err = GetLastError();
      else err = GetLastError();
      if (err == ERROR_NOT_ALL_ASSIGNED) err = ERROR_PRIVILEGE_NOT_HELD;
    }
    CloseHandle(token);
  }
  InterlockedExchange(&win_large_error, (LONG)err);
  InterlockedExchange(&win_large_state, (err == ERROR_SUCCESS ? 1 : -1));
  return (err == ERROR_SUCCESS);
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

static void* win_virtual_alloc(void* addr, size_t size, DWORD flags, DWORD protect) {
  return VirtualAlloc(addr, size, flags, protect);
}

int _mi_prim_alloc(void* hint, size_t size, bool commit, bool try_large,
                   void** addr, bool* is_pinned, bool* is_zero) {
  *addr = NULL;
  *is_pinned = false;
  *is_zero = true;   // fresh memory is always zero
  if (try_large && commit && win_large_pages_enable()) {
    void* p = win_virtual_alloc(hint, size, MEM_RESERVE | MEM_COMMIT | MEM_LARGE_PAGES, PAGE_READWRITE);
    if (p == NULL && hint != NULL) p = win_virtual_alloc(NULL, size, MEM_RESERVE | MEM_COMMIT | MEM_LARGE_PAGES, PAGE_READWRITE);
    if (p != NULL) { *addr = p; *is_pinned = true; return 0; }
  }
  const DWORD flags = MEM_RESERVE | (commit ? MEM_COMMIT : 0);
  const DWORD protect = (commit ? PAGE_READWRITE : PAGE_NOACCESS);
  void* p = NULL;
  // a hint is a place Windows must take as given (it does not look
  // elsewhere): where it is taken, any place will do
  if (hint != NULL) p = win_virtual_alloc(hint, size, flags, protect);
  if (p == NULL) p = win_virtual_alloc(NULL, size, flags, protect);
  if (p == NULL) return win_last_errno();
  *addr = p;
  return 0;
}

int _mi_prim_alloc_aligned(size_t size, size_t alignment, size_t align_offset, bool commit,
                           void** addr, bool* is_zero) {
  *addr = NULL;
  *is_zero = true;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || size == 0) return EINVAL;
  const DWORD flags = MEM_RESERVE | (commit ? MEM_COMMIT : 0);
  const DWORD protect = (commit ? PAGE_READWRITE : PAGE_NOACCESS);
  // 1. the system places it (Windows 10 1803 and later, and wine)
  if (align_offset == 0 && alignment >= win_alloc_granularity && win_virtual_alloc2 != NULL) {
    MEM_ADDRESS_REQUIREMENTS req;
    memset(&req, 0, sizeof(req));
    req.Alignment = alignment;
    MEM_EXTENDED_PARAMETER param;
    memset(&param, 0, sizeof(param));
    param.Type = MemExtendedParameterAddressRequirements;
    param.Pointer = &req;
    void* p = win_virtual_alloc2(GetCurrentProcess(), NULL, size, flags, protect, &param, 1);
    if (p != NULL) { *addr = p; return 0; }
  }
  // 2. reserve more than needed, release it, and take the aligned part: the
  //    aligned address lies in address space just seen free, but another
  //    thread may take it in between, so this is tried a few times
  if (size > SIZE_MAX - alignment - win_alloc_granularity) return ENOMEM;
  const size_t over = size + alignment + win_alloc_granularity;
  for (int tries = 0; tries < 8; tries++) {
    void* base = win_virtual_alloc(NULL, over, MEM_RESERVE, PAGE_NOACCESS);
    if (base == NULL) return win_last_errno();
    uintptr_t aligned = (((uintptr_t)base + align_offset + alignment - 1) & ~(alignment - 1)) - align_offset;
    if (aligned < (uintptr_t)base) aligned += alignment;
    VirtualFree(base, 0, MEM_RELEASE);
    if ((aligned % win_alloc_granularity) != 0) return EINVAL;   // no reservation can start there
    void* p = win_virtual_alloc((void*)aligned, size, flags, protect);
    if (p != NULL) { *addr = p; return 0; }
  }
  return ENOMEM;
}

int _mi_prim_alloc_huge_os_pages(void* hint, size_t size, size_t page_size, bool fixed, void** addr) {
  *addr = NULL;
  if (page_size == 0 || (page_size & (page_size - 1)) != 0 || (size % page_size) != 0) return EINVAL;
  if (!win_large_pages_enable()) return win_errno((DWORD)win_large_error);
  DWORD flags = MEM_RESERVE | MEM_COMMIT | MEM_LARGE_PAGES;
  MEM_EXTENDED_PARAMETER param;
  memset(&param, 0, sizeof(param));
  ULONG nparams = 0;
  if (page_size >= ((size_t)1 << 30)) {
    // 1 GiB pages: VirtualAlloc2 with the "non-paged huge" attribute
    if (win_virtual_alloc2 == NULL) return ENOSYS;
    param.Type = MemExtendedParameterAttributeFlags;
    param.ULong64 = MEM_EXTENDED_PARAMETER_NONPAGED_HUGE;
    nparams = 1;
  }
  else if (page_size != GetLargePageMinimum()) {
    return ENOSYS;
  }
  if (fixed) {
    // the caller holds a reservation at `hint` for this: Windows cannot map
    // over it, so it is released and the pages are asked for exactly there
    // (on failure it is reserved again, for the caller to release)
    VirtualFree(hint, 0, MEM_RELEASE);
  }
  void* p;
  if (nparams > 0) p = win_virtual_alloc2(GetCurrentProcess(), hint, size, flags, PAGE_READWRITE, &param, nparams);
  else p = win_virtual_alloc(hint, size, flags, PAGE_READWRITE);
  if (p == NULL && !fixed && hint != NULL) {
    if (nparams > 0) p = win_virtual_alloc2(GetCurrentProcess(), NULL, size, flags, PAGE_READWRITE, &param, nparams);
    else p = win_virtual_alloc(NULL, size, flags, PAGE_READWRITE);
  }
  if (p == NULL) {
    const int err = win_last_errno();
    if (fixed) (void)win_virtual_alloc(hint, size, MEM_RESERVE, PAGE_NOACCESS);
    return (err == EINVAL ? ENOSYS : err);
  }
  *addr = p;
  return 0;
}

int _mi_prim_advise_huge(void* addr, size_t size) {
  (void)addr; (void)size;
  return ENOSYS;   // large pages on Windows are fixed (MEM_LARGE_PAGES) or none
}

int _mi_prim_free(void* addr, size_t size) {
  (void)size;   // a reservation is released whole, from its base
  return (VirtualFree(addr, 0, MEM_RELEASE) ? 0 : win_last_errno());
}

int _mi_prim_commit(void* addr, size_t size, bool* is_zero) {
  *is_zero = false;   // (pages committed before keep their contents)
  return (win_virtual_alloc(addr, size, MEM_COMMIT, PAGE_READWRITE) != NULL ? 0 : win_last_errno());
}

int _mi_prim_decommit(void* addr, size_t size) {
  return (VirtualFree(addr, size, MEM_DECOMMIT) ? 0 : win_last_errno());
}

// Visit the parts of [addr, addr+size) that are committed, each with its
// protection; stop at the first error.
typedef int (win_committed_fun)(uint8_t* start, size_t size, DWORD protect);
static int win_committed_visit(void* addr, size_t size, win_committed_fun* fun) {
  uint8_t* p = (uint8_t*)addr;
  uint8_t* const end = p + size;
  while (p < end) {
    MEMORY_BASIC_INFORMATION info;
    if (VirtualQuery(p, &info, sizeof(info)) == 0) return win_last_errno();
    uint8_t* next = (uint8_t*)info.BaseAddress + info.RegionSize;
    if (next > end) next = end;
    if (next <= p) return EINVAL;
    if (info.State == MEM_COMMIT) {
      const int err = fun(p, (size_t)(next - p), info.Protect);
      if (err != 0) return err;
    }
    p = next;
  }
  return 0;
}

static int win_purge_part(uint8_t* start, size_t size, DWORD protect) {
  if (!VirtualFree(start, size, MEM_DECOMMIT)) return win_last_errno();
  if (win_virtual_alloc(start, size, MEM_COMMIT, protect) == NULL) return win_last_errno();
  return 0;
}

int _mi_prim_purge(void* addr, size_t size) {
  return win_committed_visit(addr, size, &win_purge_part);
}

static int win_protect_part(uint8_t* start, size_t size, DWORD protect) {
  (void)protect;
  DWORD old;
  return (VirtualProtect(start, size, PAGE_NOACCESS, &old) ? 0 : win_last_errno());
}

int _mi_prim_protect(void* addr, size_t size, bool protect) {
  if (protect) {
    // committed parts lose their access; reserved parts have none anyway
    return win_committed_visit(addr, size, &win_protect_part);
  }
  // accessible again, as on Linux (which commits by access rights)
  if (win_virtual_alloc(addr, size, MEM_COMMIT, PAGE_READWRITE) == NULL) return win_last_errno();
  DWORD old;
  return (VirtualProtect(addr, size, PAGE_READWRITE, &old) ? 0 : win_last_errno());
}

int _mi_prim_populate(void* addr, size_t size) {
  (void)addr; (void)size;
  return ENOSYS;   // (PrefetchVirtualMemory reads file-backed pages in; fresh pages fault on touch)
}

int _mi_prim_resident(void* addr, size_t size, size_t* resident) {
  // QueryWorkingSetEx: one entry per page, asked in batches of 256 pages
  PSAPI_WORKING_SET_EX_INFORMATION info[256];
  size_t count = 0;
  const size_t pages = (size + win_page_size - 1) / win_page_size;
  for (size_t first = 0; first < pages; first += 256) {
    const size_t n = (pages - first < 256 ? pages - first : 256);
    for (size_t i = 0; i < n; i++) {
      info[i].VirtualAddress = (uint8_t*)addr + (first + i) * win_page_size;
      info[i].VirtualAttributes.Flags = 0;
    }
    if (!QueryWorkingSetEx(GetCurrentProcess(), info, (DWORD)(n * sizeof(info[0])))) return win_last_errno();
    for (size_t i = 0; i < n; i++) count += (info[i].VirtualAttributes.Valid ? 1 : 0);
  }
  *resident = count * win_page_size;
  return 0;
}

// ---------------------------------------------------------------------------
// Threads, time, randomness
// ---------------------------------------------------------------------------

uintptr_t _mi_prim_thread_id(void) {
  #if defined(__GNUC__)
  uintptr_t teb;   // (NtCurrentTeb, without mingw-w64's intrinsic header, which gcc 12 warns about)
  __asm__("movq %%gs:0x30, %0" : "=r" (teb));
  return teb;
  #else
  return (uintptr_t)NtCurrentTeb();
  #endif
}

int64_t _mi_prim_clock_now(void) {
  static LARGE_INTEGER freq;   // (a constant of the system, read once)
  if (freq.QuadPart == 0) QueryPerformanceFrequency(&freq);
  LARGE_INTEGER t;
  QueryPerformanceCounter(&t);
  if (freq.QuadPart <= 0) return (int64_t)GetTickCount64();
  return (int64_t)(t.QuadPart / freq.QuadPart) * 1000 + (int64_t)((t.QuadPart % freq.QuadPart) * 1000 / freq.QuadPart);
}

bool _mi_prim_random_buf(void* buf, size_t len) {
  if (len > ULONG_MAX) return false;
  if (BCryptGenRandom(NULL, (PUCHAR)buf, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) >= 0) return true;
  // RtlGenRandom (advapi32's SystemFunction036), where bcrypt is not usable
  typedef BOOLEAN (WINAPI* rtl_gen_random_t)(PVOID, ULONG);
  HMODULE advapi = LoadLibraryW(L"advapi32.dll");
  rtl_gen_random_t gen = (rtl_gen_random_t)(void*)win_lookup(advapi, "SystemFunction036");
  return (gen != NULL && gen(buf, (ULONG)len));
}

// Thread exit: a fiber-local-storage slot whose destructor Windows calls on
// every thread's exit when the slot holds a value (the thread's heap).
static DWORD win_fls_key = FLS_OUT_OF_INDEXES;
static void (*win_thread_done_fn)(void*);

static void WINAPI win_fls_done(void* value) {
  if (value != NULL && win_thread_done_fn != NULL) win_thread_done_fn(value);
}

void _mi_prim_thread_init_auto_done(void (*fn)(void*)) {
  if (win_fls_key != FLS_OUT_OF_INDEXES) return;
  win_thread_done_fn = fn;
  win_fls_key = FlsAlloc(&win_fls_done);
  // Windows calls the destructor at every later thread exit, and the
  // background purge thread runs our code: the module that holds them (our
  // DLL, or the program or DLL the static library is linked into) stays in
  // the process (FreeLibrary does not unload it)
  HMODULE self = NULL;
  GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                     (LPCWSTR)(void*)&win_fls_done, &self);
}

void _mi_prim_thread_set_exit_value(void* value) {
  if (win_fls_key != FLS_OUT_OF_INDEXES) FlsSetValue(win_fls_key, value);
}

void _mi_prim_fork_handlers(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  (void)prepare; (void)parent; (void)child;   // no fork on Windows
}

// ---------------------------------------------------------------------------
// Output and environment
// ---------------------------------------------------------------------------

// The duplicate of the standard error handle kept from start-up (NULL: none).
static HANDLE win_stderr_kept;

void _mi_prim_out_stderr_keep(void) {
  if (win_stderr_kept != NULL) return;
  HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
  if (err == NULL || err == INVALID_HANDLE_VALUE) return;
  HANDLE dup = NULL;
  if (DuplicateHandle(GetCurrentProcess(), err, GetCurrentProcess(), &dup, 0, FALSE, DUPLICATE_SAME_ACCESS)) {
    win_stderr_kept = dup;
  }
}

static bool win_write_all(HANDLE h, const char* msg, size_t len) {
  while (len > 0) {
    DWORD chunk = (len > 0x10000000 ? 0x10000000 : (DWORD)len);
    DWORD written = 0;
    if (!WriteFile(h, msg, chunk, &written, NULL) || written == 0) return false;
    msg += written; len -= written;
  }
  return true;
}

void _mi_prim_out_stderr(const char* msg) {
  const size_t len = strlen(msg);
  const DWORD saved = GetLastError();
  if (win_stderr_kept == NULL || !win_write_all(win_stderr_kept, msg, len)) {
    HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
    if (err != NULL && err != INVALID_HANDLE_VALUE) (void)win_write_all(err, msg, len);
  }
  SetLastError(saved);
}

// A snapshot of the process environment as an array of entries, for a
// program whose C runtime has no narrow environment: taken once, kept.
static const char* const* win_env_snapshot;

static const char* const* win_environ_snapshot(void) {
  if (win_env_snapshot != NULL) return win_env_snapshot;
  char* block = GetEnvironmentStringsA();   // (allocated on the process heap by Windows)
  if (block == NULL) return NULL;
  size_t count = 0;
  for (const char* s = block; *s != 0; s += strlen(s) + 1) count++;
  const char** arr = (const char**)VirtualAlloc(NULL, (count + 1) * sizeof(char*), MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  if (arr == NULL) { FreeEnvironmentStringsA(block); return NULL; }
  size_t i = 0;
  for (const char* s = block; *s != 0; s += strlen(s) + 1) arr[i++] = s;
  arr[i] = NULL;
  if (InterlockedCompareExchangePointer((void* volatile*)&win_env_snapshot, (void*)arr, NULL) != NULL) {
    VirtualFree((void*)arr, 0, MEM_RELEASE);   // another thread was first
    FreeEnvironmentStringsA(block);
  }
  return win_env_snapshot;
}

const char* const* _mi_prim_environ(void) {
  char** env = _environ;
  if (env != NULL) return (const char* const*)env;
  return win_environ_snapshot();
}

int _mi_prim_wgetenv(const unsigned short* name, const unsigned short** value) {
  *value = (const unsigned short*)_wgetenv((const wchar_t*)name);   // (the runtime's wide environment, as 1.6)
  return 0;
}

static uint64_t win_filetime_msecs(const FILETIME* ft) {
  const uint64_t t = ((uint64_t)ft->dwHighDateTime << 32) | ft->dwLowDateTime;   // 100 ns units
  return t / 10000;
}

void _mi_prim_process_info(mi_prim_process_info_t* info) {
  memset(info, 0, sizeof(*info));
  FILETIME created, exited, kernel, user;
  if (GetProcessTimes(GetCurrentProcess(), &created, &exited, &kernel, &user)) {
    info->user_msecs = (size_t)win_filetime_msecs(&user);
    info->system_msecs = (size_t)win_filetime_msecs(&kernel);
  }
  PROCESS_MEMORY_COUNTERS counters;
  memset(&counters, 0, sizeof(counters));
  if (GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof(counters))) {
    info->current_rss = counters.WorkingSetSize;
    info->peak_rss = counters.PeakWorkingSetSize;
    info->page_faults = counters.PageFaultCount;   // (Windows counts soft faults too)
  }
  if (info->peak_rss < info->current_rss) info->peak_rss = info->current_rss;
}

// ---------------------------------------------------------------------------
// Processes, threads, the wake-up event
// ---------------------------------------------------------------------------

long _mi_prim_process_id(void) {
  return (long)GetCurrentProcessId();
}

// Start slots: the new thread copies its function and argument, then frees
// its slot (the statistics writer and the background purge thread).
#define WIN_THREAD_SLOTS 4
typedef struct win_thread_start_s {
  volatile LONG busy;
  void (*fn)(void*);
  void* arg;
} win_thread_start_t;
static win_thread_start_t win_thread_start[WIN_THREAD_SLOTS];

static DWORD WINAPI win_thread_main(LPVOID p) {
  win_thread_start_t* start = (win_thread_start_t*)p;
  void (*fn)(void*) = start->fn;
  void* arg = start->arg;
  InterlockedExchange(&start->busy, 0);
  fn(arg);
  return 0;
}

int _mi_prim_thread_start(void (*fn)(void*), void* arg) {
  win_thread_start_t* start = NULL;
  for (size_t i = 0; i < WIN_THREAD_SLOTS && start == NULL; i++) {
    if (InterlockedCompareExchange(&win_thread_start[i].busy, 1, 0) == 0) start = &win_thread_start[i];
  }
  if (start == NULL) return EAGAIN;
  start->fn = fn;
  start->arg = arg;
  HANDLE thread = CreateThread(NULL, 64 * 1024, &win_thread_main, start, STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
  if (thread == NULL) {
    const int err = win_last_errno();
    InterlockedExchange(&start->busy, 0);
    return (err == ENOMEM ? EAGAIN : err);
  }
  CloseHandle(thread);   // detached
  return 0;
}

void _mi_prim_thread_signals_block(mi_prim_sigmask_t* saved) {
  memset(saved, 0, sizeof(*saved));   // no signals on Windows
}

void _mi_prim_thread_signals_restore(const mi_prim_sigmask_t* saved) {
  (void)saved;
}

// The event: a word (1 when signalled) and an auto-reset event object made
// on first use. Signalling sets the word, and the event only when the
// waiter sleeps on it.
static volatile LONG win_event_word;
static HANDLE win_event;

static HANDLE win_event_get(void) {
  if (win_event != NULL) return win_event;
  HANDLE ev = CreateEventW(NULL, FALSE, FALSE, NULL);
  if (ev == NULL) return NULL;
  if (InterlockedCompareExchangePointer((void* volatile*)&win_event, ev, NULL) != NULL) CloseHandle(ev);
  return win_event;
}

void _mi_prim_event_wait(int64_t msecs) {
  HANDLE ev = win_event_get();
  const int64_t until = _mi_prim_clock_now() + msecs;
  while (InterlockedExchange(&win_event_word, 0) == 0) {
    int64_t left = (msecs < 0 ? -1 : until - _mi_prim_clock_now());
    if (msecs >= 0 && left <= 0) break;
    if (ev == NULL) { Sleep(left < 0 || left > 50 ? 50 : (DWORD)left); continue; }
    const DWORD r = WaitForSingleObject(ev, (left < 0 ? INFINITE : (DWORD)(left > 0x7FFFFFFF ? 0x7FFFFFFF : left)));
    if (r == WAIT_TIMEOUT) break;
  }
}

void _mi_prim_event_signal(void) {
  InterlockedExchange(&win_event_word, 1);
  HANDLE ev = win_event_get();
  if (ev != NULL) SetEvent(ev);
}

void _mi_prim_event_reset(void) {
  InterlockedExchange(&win_event_word, 0);
  if (win_event != NULL) ResetEvent(win_event);
}

void _mi_prim_word_wait(const uint32_t* addr, uint32_t expected) {
  win_functions_init();
  if (win_wait_on_address != NULL) {
    uint32_t cmp = expected;
    (void)win_wait_on_address((volatile VOID*)addr, &cmp, sizeof(cmp), INFINITE);
  }
  else {
    SwitchToThread();
  }
}

void _mi_prim_word_wake(const uint32_t* addr) {
  win_functions_init();
  if (win_wake_by_address_all != NULL) win_wake_by_address_all((PVOID)addr);
}

void _mi_prim_sleep(int64_t msecs) {
  while (msecs > 0) {
    const DWORD now = (msecs > 0x7FFFFFFF ? 0x7FFFFFFF : (DWORD)msecs);
    Sleep(now);
    msecs -= now;
  }
}

// ---------------------------------------------------------------------------
// Files, stacks and modules (the heap profiler and the statistics file)
// ---------------------------------------------------------------------------

int _mi_prim_file_write(const char* path, const void* data, size_t size, bool append) {
  HANDLE h = CreateFileA(path, (append ? FILE_APPEND_DATA : GENERIC_WRITE), FILE_SHARE_READ | FILE_SHARE_WRITE, NULL,
                         (append ? OPEN_ALWAYS : CREATE_ALWAYS), FILE_ATTRIBUTE_NORMAL, NULL);
  if (h == INVALID_HANDLE_VALUE) return win_last_errno();
  int err = 0;
  if (!win_write_all(h, (const char*)data, size)) err = win_last_errno();
  if (!CloseHandle(h) && err == 0) err = win_last_errno();
  return err;
}

void _mi_prim_backtrace_init(void) {
  // (RtlCaptureStackBackTrace walks the unwind tables every x64 image has; it
  // needs no set-up and does not allocate)
}

size_t _mi_prim_backtrace(void** frames, size_t max) {
  if (max > 0xFFFF) max = 0xFFFF;
  return (size_t)RtlCaptureStackBackTrace(0, (DWORD)max, frames, NULL);
}

// The loaded modules (from the loader's list): each image as one mapping
// from its base, file offset 0 (addresses in it are relative to the base).
int _mi_prim_visit_mappings(mi_prim_mapping_fun* visit, void* arg) {
  HMODULE mods[512];
  DWORD needed = 0;
  if (!EnumProcessModules(GetCurrentProcess(), mods, sizeof(mods), &needed)) return win_last_errno();
  const size_t count = (needed / sizeof(HMODULE) < 512 ? needed / sizeof(HMODULE) : 512);
  char path[MAX_PATH + 1];
  for (size_t i = 0; i < count; i++) {
    MODULEINFO info;
    if (!GetModuleInformation(GetCurrentProcess(), mods[i], &info, sizeof(info))) continue;
    const DWORD n = GetModuleFileNameA(mods[i], path, MAX_PATH);
    if (n == 0 || n >= MAX_PATH) continue;
    path[n] = 0;
    const uintptr_t start = (uintptr_t)info.lpBaseOfDll;
    if (!visit(start, start + info.SizeOfImage, 0, path, arg)) break;
  }
  return 0;
}

int _mi_prim_realpath(const char* fname, char* buf, size_t size) {
  if (fname == NULL) return EINVAL;
  if (size == 0 || size > 0x7FFFFFFF) return ENAMETOOLONG;
  const DWORD n = GetFullPathNameA(fname, (DWORD)size, buf, NULL);
  if (n == 0) return win_last_errno();
  if (n >= size) return ENAMETOOLONG;
  if (GetFileAttributesA(buf) == INVALID_FILE_ATTRIBUTES) return win_last_errno();   // (realpath: it must exist)
  return 0;
}

bool _mi_prim_executable_path(char* buf, size_t size) {
  if (size == 0 || size > 0x7FFFFFFF) return false;
  const DWORD n = GetModuleFileNameA(NULL, buf, (DWORD)size);
  return (n > 0 && n < size);
}

// The exported function whose code holds `addr`: the unwind table gives the
// function's start, the export table its name (exported functions only, as
// on Linux).
bool _mi_prim_symbol_name(const void* addr, char* buf, size_t size) {
  DWORD64 image = 0;
  PRUNTIME_FUNCTION fn = RtlLookupFunctionEntry((DWORD64)(uintptr_t)addr, &image, NULL);
  if (fn == NULL || image == 0) return false;
  const uint8_t* base = (const uint8_t*)(uintptr_t)image;
  const IMAGE_DOS_HEADER* dos = (const IMAGE_DOS_HEADER*)base;
  if (dos->e_magic != IMAGE_DOS_SIGNATURE) return false;
  const IMAGE_NT_HEADERS* nt = (const IMAGE_NT_HEADERS*)(base + dos->e_lfanew);
  const IMAGE_DATA_DIRECTORY* dir = &nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXPORT];
  if (dir->VirtualAddress == 0 || dir->Size == 0) return false;
  const IMAGE_EXPORT_DIRECTORY* exp = (const IMAGE_EXPORT_DIRECTORY*)(base + dir->VirtualAddress);
  const DWORD* functions = (const DWORD*)(base + exp->AddressOfFunctions);
  const DWORD* names = (const DWORD*)(base + exp->AddressOfNames);
  const WORD* ordinals = (const WORD*)(base + exp->AddressOfNameOrdinals);
  for (DWORD i = 0; i < exp->NumberOfNames; i++) {
    if (ordinals[i] >= exp->NumberOfFunctions || functions[ordinals[i]] != fn->BeginAddress) continue;
    const char* name = (const char*)(base + names[i]);
    const size_t n = strlen(name);
    if (n + 1 > size) return false;
    memcpy(buf, name, n + 1);
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// NUMA
// ---------------------------------------------------------------------------

size_t _mi_prim_numa_node_count(void) {
  ULONG highest = 0;
  if (!GetNumaHighestNodeNumber(&highest)) return 1;
  return (size_t)highest + 1;
}

size_t _mi_prim_numa_node(void) {
  win_functions_init();
  if (win_numa_node_ex != NULL && win_processor_number_ex != NULL) {
    PROCESSOR_NUMBER pnum;
    USHORT node = 0;
    win_processor_number_ex(&pnum);
    if (win_numa_node_ex(&pnum, &node)) return node;
  }
  UCHAR node = 0;
  if (GetNumaProcessorNode((UCHAR)GetCurrentProcessorNumber(), &node)) return node;
  return 0;
}

int _mi_prim_numa_prefer(void* addr, size_t size, size_t node) {
  (void)addr; (void)size; (void)node;
  return ENOSYS;   // (a node is chosen when memory is committed: VirtualAllocExNuma)
}
