/* ----------------------------------------------------------------------------
  statm.h -- the process's virtual and resident size, and its number of
  threads, read without stdio (fopen would allocate, possibly from the
  allocator under test). For the C tests that measure what goes back to the
  OS (test-memreturn.c, test-huge-remote.c, test-idle-purge.c).

  Linux: /proc/self/statm (size and resident, in pages) and the "Threads:"
  line of /proc/self/status.

  Windows: what the tests use each figure for, measured the Windows way.
  - resident: the working set (GetProcessMemoryInfo's WorkingSetSize, from
    kernel32 as K32GetProcessMemoryInfo). The tests ask whether freed
    memory left RAM; a purge decommits, which takes the pages out of the
    working set at once. (Under wine the figure is Linux's VmRSS of the
    wine process, which moves the same way.)
  - virtual: the address space the process holds, reserved or committed,
    summed over a VirtualQuery walk of the user address space. The tests
    use it to see whether a block's segment was given back or is kept
    (test-huge-remote.c: a segment nobody frees stays mapped), which on
    Windows is whether its reservation was released. The commit charge
    (PROCESS_MEMORY_COUNTERS_EX.PrivateUsage) would be the wrong figure: a
    kept segment whose pages were decommitted holds address space without
    charge (and wine 8 leaves PrivateUsage at 0). The walk takes 0.1 ms
    under wine.
  - threads: the threads of this process in a Toolhelp32 snapshot.
-----------------------------------------------------------------------------*/
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#include <psapi.h>
#include <tlhelp32.h>

// Both in bytes; false if Windows does not answer.
static inline bool statm_read(size_t* vsize, size_t* rss) {
  PROCESS_MEMORY_COUNTERS counters;
  memset(&counters, 0, sizeof(counters));
  if (!K32GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof(counters))) return false;
  SYSTEM_INFO si;
  GetSystemInfo(&si);
  size_t held = 0;
  const char* p = (const char*)si.lpMinimumApplicationAddress;
  while (p < (const char*)si.lpMaximumApplicationAddress) {
    MEMORY_BASIC_INFORMATION info;
    if (VirtualQuery(p, &info, sizeof(info)) == 0) break;   // (past the last region)
    if (info.State != MEM_FREE) held += info.RegionSize;
    const char* next = (const char*)info.BaseAddress + info.RegionSize;
    if (next <= p) return false;
    p = next;
  }
  *vsize = held;
  *rss = counters.WorkingSetSize;
  return true;
}

// The number of threads of the process (0 if unknown).
static inline size_t statm_threads(void) {
  const DWORD pid = GetCurrentProcessId();
  HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);   // (every process's threads: the pid is ignored)
  if (snap == INVALID_HANDLE_VALUE) return 0;
  size_t count = 0;
  THREADENTRY32 entry;
  memset(&entry, 0, sizeof(entry));
  entry.dwSize = sizeof(entry);
  for (BOOL more = Thread32First(snap, &entry); more; more = Thread32Next(snap, &entry)) {
    if (entry.th32OwnerProcessID == pid) count++;
    entry.dwSize = sizeof(entry);
  }
  CloseHandle(snap);
  return count;
}

#else

#include <unistd.h>
#include "procfile.h"

// Both in bytes; false without /proc/self/statm.
static inline bool statm_read(size_t* vsize, size_t* rss) {
  char buf[256];
  if (proc_read_file("/proc/self/statm", buf, sizeof(buf)) == 0) return false;
  // fields: size resident shared text lib data dt (in pages)
  char* end;
  const unsigned long long size = strtoull(buf, &end, 10);
  const unsigned long long resident = strtoull(end, &end, 10);
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return false;
  *vsize = (size_t)size * (size_t)page;
  *rss = (size_t)resident * (size_t)page;
  return true;
}

// The number of threads of the process (0 if unknown).
static inline size_t statm_threads(void) {
  char buf[4096];
  if (proc_read_file("/proc/self/status", buf, sizeof(buf)) == 0) return 0;
  const char* s = strstr(buf, "Threads:");
  return (s == NULL ? 0 : (size_t)strtoul(s + 8, NULL, 10));
}

#endif
