/* ----------------------------------------------------------------------------
  api-util.cpp -- the operating system's side of the API tests' helpers
  (declared in api-util.h, under "The operating system").

  Two implementations, one after the other, each under `#if defined(_WIN32)`:
  Linux (mmap, /proc, realpath, setrlimit, dlsym) and Windows (VirtualAlloc,
  VirtualQuery, _fullpath, _putenv_s, GetProcAddress). Nothing here calls
  mimalloc: these are the OS's own answers the tests compare against.
-----------------------------------------------------------------------------*/
#include "api-util.h"

#include <cstdio>
#include <cstdlib>

#if defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX   // (windows.h would define min and max as macros)
#endif
#include <windows.h>
#include <psapi.h>   // (K32QueryWorkingSetEx: exported by kernel32, no extra library)
#else
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace mitest {

#if !defined(_WIN32)
// ------------------------------------------------------
// Linux
// ------------------------------------------------------

size_t os_page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

void* os_map(size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return (p == MAP_FAILED ? nullptr : p);
}

void os_unmap(void* p, size_t size) { munmap(p, size); }

bool os_readable(const void* p) {
  // (one pipe for the whole run; a byte written is read back at once)
  static int fds[2] = {-1, -1};
  if (fds[0] < 0 && pipe(fds) != 0) return true;
  const bool ok = (write(fds[1], p, 1) == 1);
  if (ok) {
    char c;
    (void)!read(fds[0], &c, 1);
  }
  return ok;
}

std::string os_mapping_perms(const void* p) {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return "";
  std::string perms;
  char line[1024];
  while (perms.empty() && std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    char rwxp[8] = {0};
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, rwxp) != 3) continue;
    if ((uintptr_t)p >= lo && (uintptr_t)p < hi) perms = rwxp;
  }
  std::fclose(f);
  return perms;
}

size_t os_resident_bytes(const void* p, size_t n) {
  const size_t ps = os_page_size();
  const uintptr_t start = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1);
  const uintptr_t end = ((uintptr_t)p + n) & ~(uintptr_t)(ps - 1);
  if (end <= start) return 0;
  std::vector<unsigned char> vec((end - start) / ps);
  if (mincore((void*)start, end - start, vec.data()) != 0) return SIZE_MAX;
  size_t count = 0;
  for (unsigned char v : vec) count += (v & 1);
  return count * ps;
}

bool os_can_populate() {
  void* p = os_map(os_page_size());
  if (p == nullptr) return false;
  const bool ok = (madvise(p, os_page_size(), 23 /* MADV_POPULATE_WRITE */) == 0);
  os_unmap(p, os_page_size());
  return ok;
}

bool os_realpath(const char* path, char* out) { return realpath(path, out) != nullptr; }

std::string roundabout_dir_path() { return "/usr/../usr/./lib"; }

bool os_setenv(const char* name, const char* value) { return setenv(name, value, 1) == 0; }

bool os_unsetenv(const char* name) { return unsetenv(name) == 0; }

bool os_limit_address_space(size_t headroom, std::string* error) {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) {
    *error = "cannot read /proc/self/statm";
    return false;
  }
  unsigned long pages = 0;
  const int n = std::fscanf(f, "%lu", &pages);
  std::fclose(f);
  if (n != 1) {
    *error = "cannot parse /proc/self/statm";
    return false;
  }
  struct rlimit rl;
  rl.rlim_cur = rl.rlim_max = (rlim_t)(pages * os_page_size() + headroom);
  if (setrlimit(RLIMIT_AS, &rl) != 0) {
    *error = std::string("setrlimit(RLIMIT_AS): ") + std::strerror(errno);
    return false;
  }
  return true;
}

LibcMalloc libc_malloc() {
  LibcMalloc m;
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libc == nullptr) return m;
  void* fm = dlsym(libc, "malloc");
  void* ff = dlsym(libc, "free");
  if (fm != nullptr && ff != nullptr) {
    m.malloc_fn = reinterpret_cast<void* (*)(size_t)>(fm);
    m.free_fn = reinterpret_cast<void (*)(void*)>(ff);
  }
  dlclose(libc);
  return m;
}

#else  // _WIN32
// ------------------------------------------------------
// Windows
// ------------------------------------------------------

size_t os_page_size() {
  SYSTEM_INFO si;
  GetSystemInfo(&si);
  return (size_t)si.dwPageSize;
}

void* os_map(size_t size) { return VirtualAlloc(nullptr, size, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE); }

void os_unmap(void* p, size_t size) {
  (void)size;   // (a reservation is released whole, from its base)
  VirtualFree(p, 0, MEM_RELEASE);
}

bool os_readable(const void* p) {
  MEMORY_BASIC_INFORMATION info;
  if (VirtualQuery(p, &info, sizeof(info)) == 0) return false;
  if (info.State != MEM_COMMIT) return false;
  return (info.Protect & (PAGE_NOACCESS | PAGE_GUARD)) == 0 && info.Protect != 0;
}

std::string os_mapping_perms(const void* p) {
  MEMORY_BASIC_INFORMATION info;
  if (VirtualQuery(p, &info, sizeof(info)) == 0 || info.State == MEM_FREE) return "";
  std::string perms = "---";
  if (info.State == MEM_COMMIT && (info.Protect & PAGE_GUARD) == 0) {
    const DWORD prot = info.Protect & 0xFF;   // (without PAGE_NOCACHE and the like)
    if (prot & (PAGE_READONLY | PAGE_READWRITE | PAGE_WRITECOPY | PAGE_EXECUTE_READ | PAGE_EXECUTE_READWRITE |
                PAGE_EXECUTE_WRITECOPY)) perms[0] = 'r';
    if (prot & (PAGE_READWRITE | PAGE_WRITECOPY | PAGE_EXECUTE_READWRITE | PAGE_EXECUTE_WRITECOPY)) perms[1] = 'w';
    if (prot & (PAGE_EXECUTE | PAGE_EXECUTE_READ | PAGE_EXECUTE_READWRITE | PAGE_EXECUTE_WRITECOPY)) perms[2] = 'x';
  }
  perms += (info.Type == MEM_MAPPED ? 's' : 'p');
  return perms;
}

size_t os_resident_bytes(const void* p, size_t n) {
  const size_t ps = os_page_size();
  const uintptr_t start = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1);
  const uintptr_t end = ((uintptr_t)p + n) & ~(uintptr_t)(ps - 1);
  PSAPI_WORKING_SET_EX_INFORMATION info[256];   // (one entry a page, 256 pages a call)
  size_t count = 0;
  for (uintptr_t addr = start; addr < end;) {
    const size_t pages = std::min<size_t>(256, (end - addr) / ps);
    for (size_t i = 0; i < pages; i++) info[i].VirtualAddress = (void*)(addr + i * ps);
    if (!K32QueryWorkingSetEx(GetCurrentProcess(), info, (DWORD)(pages * sizeof(info[0])))) return SIZE_MAX;
    for (size_t i = 0; i < pages; i++) count += info[i].VirtualAttributes.Valid;
    addr += pages * ps;
  }
  return count * ps;
}

bool os_can_populate() { return false; }

bool os_realpath(const char* path, char* out) {
  if (_fullpath(out, path, PATH_MAX) == nullptr) return false;
  return GetFileAttributesA(out) != INVALID_FILE_ATTRIBUTES;
}

std::string roundabout_dir_path() {
  char sys[MAX_PATH + 1];
  const UINT n = GetSystemDirectoryA(sys, MAX_PATH);
  if (n == 0 || n >= MAX_PATH) return "C:\\windows\\..\\windows\\.";
  const std::string dir(sys, n);   // C:\windows\system32
  const std::string last = dir.substr(dir.find_last_of('\\') + 1);
  return dir + "\\..\\" + last + "\\.";
}

bool os_setenv(const char* name, const char* value) { return _putenv_s(name, value) == 0; }

bool os_unsetenv(const char* name) { return _putenv_s(name, "") == 0; }   // (an empty value removes it)

bool os_limit_address_space(size_t headroom, std::string* error) {
  (void)headroom;
  *error = "no address-space limit on Windows (a job object's memory limit is not enforced under wine)";
  return false;
}

LibcMalloc libc_malloc() {
  LibcMalloc m;
  for (const char* dll : {"msvcrt.dll", "ucrtbase.dll"}) {
    HMODULE crt = GetModuleHandleA(dll);
    if (crt == nullptr) continue;
    FARPROC fm = GetProcAddress(crt, "malloc");
    FARPROC ff = GetProcAddress(crt, "free");
    if (fm != nullptr && ff != nullptr) {
      m.malloc_fn = reinterpret_cast<void* (*)(size_t)>(reinterpret_cast<void (*)()>(fm));
      m.free_fn = reinterpret_cast<void (*)(void*)>(reinterpret_cast<void (*)()>(ff));
      break;
    }
  }
  return m;
}

// A death test's child that faults on purpose (test-secure.cpp) ends at once
// with the exception's code, as a Windows program does where no debugger is
// registered, instead of starting wine's debugger first (a second, and a
// page of registers and stacks on stderr, each time). Only in those
// children: a crash of the test program itself still gets wine's report.
namespace {
LONG WINAPI end_with_the_exception_code(EXCEPTION_POINTERS* info) {
  TerminateProcess(GetCurrentProcess(), (UINT)info->ExceptionRecord->ExceptionCode);
  return EXCEPTION_EXECUTE_HANDLER;
}
struct DeathTestChildFaults {
  DeathTestChildFaults() {
    if (std::strstr(GetCommandLineA(), "--gtest_internal_run_death_test") != nullptr) {
      SetUnhandledExceptionFilter(&end_with_the_exception_code);
    }
  }
} g_death_test_child_faults;
}  // namespace

#endif  // _WIN32

}  // namespace mitest
