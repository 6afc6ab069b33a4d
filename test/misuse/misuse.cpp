/* ----------------------------------------------------------------------------
misuse: one heap misuse per run, through the plain C/C++ allocation interface
only (malloc, free, calloc, realloc, memcpy, memmove, memset, new, delete), so
that it runs under any allocator through LD_PRELOAD. test/misuse/run.py runs
every case under several allocators and prints which ones notice what.
On Windows the program is linked with mimalloc's override DLL instead (it
calls mi_version at start, so the DLL is loaded and patches the C runtime's
malloc family) and runs under wine (docs/windows.md); what differs between
the two is in one section below ("What differs between Linux and Windows").

  misuse <case>     run one case
  misuse --list     print the cases: name, kind, class, what it does

Exit codes:
  misuse cases:   42 = the misuse went unnoticed to the end; anything else
                  (a signal, abort, another exit code) = the process was stopped.
                  (Windows: abort() exits 3, an access violation ends the
                  process with the status's low byte, e.g. 5.)
  property cases:  0 = the allocator has the property (a SIGSEGV where the
                  case expects a fault counts: the handler exits 0; Windows:
                  an access violation, caught by a vectored exception handler);
                  42 = it does not.
  77 = the case is not applicable (could not be set up, or the platform lacks
       what it calls). Not 3: that is abort()'s exit code on Windows.
  2 = usage error.

The program never writes to stderr itself (run.py reads stderr as the
allocator's report); notes go to stdout. Sizes and pointers pass through
opaque()/opaque_size() (volatile) so that the compiler can neither see nor
fold the misuse; the file is compiled with -fno-builtin and without
_FORTIFY_SOURCE so that memcpy & co. reach the library at run time.
-----------------------------------------------------------------------------*/
#include <cerrno>
#include <stddef.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#define MI_UNNOTICED 42        // the misuse went through / the property does not hold
#define MI_NOT_APPLICABLE 77   // the case cannot run here (run.py: "n/a")

// ----------------------------------------------------------------------------
// What differs between Linux and Windows (the only OS-specific code):
//   os_start()          at the start of main (Windows: the override DLL is
//                       used, an unhandled fault ends the process at once)
//   expect_fault()      property cases: a fault from now on exits 0
//   executable(p)       is the mapping holding p executable: 1, 0, -1 = cannot tell
//   mi_alloca(n)        alloca
//   reallocarray_fn     reallocarray (through a volatile pointer, as memcpy_fn below),
//                       or nullptr where the C runtime has none
// ----------------------------------------------------------------------------
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <malloc.h>     // _alloca
#include <mimalloc.h>   // mi_version

// A fault nobody handles ends the process at once with its status as exit
// code (under wine: the low byte, 5 for an access violation), as on Windows
// without a debugger. Left to wine, it starts its debugger (winedbg), and the
// process then sometimes ends with 0, which would read as a property held.
static LONG WINAPI on_unhandled(EXCEPTION_POINTERS* e) {
  TerminateProcess(GetCurrentProcess(), (UINT)e->ExceptionRecord->ExceptionCode);
  return EXCEPTION_CONTINUE_SEARCH;
}

// The program links the override DLL; a call to one of its functions keeps the
// import (the linker drops an unused one), and the DLL, loaded before main,
// patches the C runtime DLLs.
static void os_start() {
  (void)mi_version();
  SetUnhandledExceptionFilter(on_unhandled);
}

// Wine ends a process on an access violation with the status as exit code
// (no signals): a vectored exception handler, called before any other
// handler, ends the process with 0 instead (TerminateProcess, as _exit: no
// DLL detach, nothing more runs on a heap that may be damaged).
static LONG WINAPI on_fault(EXCEPTION_POINTERS* e) {
  if (e->ExceptionRecord->ExceptionCode == EXCEPTION_ACCESS_VIOLATION) TerminateProcess(GetCurrentProcess(), 0);
  return EXCEPTION_CONTINUE_SEARCH;
}
static void expect_fault() { AddVectoredExceptionHandler(1, on_fault); }

static int executable(const void* p) {   // the protection of p's region (VirtualQuery)
  MEMORY_BASIC_INFORMATION mbi;
  if (VirtualQuery(p, &mbi, sizeof(mbi)) == 0 || mbi.State != MEM_COMMIT) {
    printf("VirtualQuery(%p) found no committed region\n", p);
    return -1;
  }
  const DWORD exec = PAGE_EXECUTE | PAGE_EXECUTE_READ | PAGE_EXECUTE_READWRITE | PAGE_EXECUTE_WRITECOPY;
  if ((mbi.Protect & exec) == 0) return 0;
  printf("executable: %p, %zu bytes, protection 0x%lx\n", mbi.BaseAddress, (size_t)mbi.RegionSize, (unsigned long)mbi.Protect);
  return 1;
}

#define mi_alloca(n) _alloca(n)

// (msvcrt.dll and ucrtbase.dll have no reallocarray)
static void* (*volatile reallocarray_fn)(void*, size_t, size_t) = nullptr;

#else
#include <csignal>
#include <alloca.h>
#include <unistd.h>

static void os_start() {}

static void on_fault(int) { _exit(0); }   // property cases: the fault is the protection
static void expect_fault() {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_fault;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

static int executable(const void* p) {   // the permissions of p's mapping (/proc/self/maps)
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == nullptr) { printf("cannot read /proc/self/maps\n"); return -1; }
  int result = -1;
  char line[512];
  while (result < 0 && fgets(line, sizeof(line), f) != nullptr) {
    unsigned long lo, hi;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
    if ((uintptr_t)p < lo || (uintptr_t)p >= hi) continue;
    result = (strchr(perms, 'x') != nullptr);
    if (result) printf("executable: %s", line);
  }
  fclose(f);
  if (result < 0) printf("%p not found in /proc/self/maps\n", p);
  return result;
}

#define mi_alloca(n) alloca(n)

static void* (*volatile reallocarray_fn)(void*, size_t, size_t) = reallocarray;
#endif

// ----------------------------------------------------------------------------
// Hiding values from the optimiser
// ----------------------------------------------------------------------------

template <class T> static T* opaque(T* p) {
  T* volatile q = p;
  return q;
}
static size_t opaque_size(size_t n) {
  volatile size_t v = n;
  return v;
}
static void* volatile sink;   // keeps blocks "used"

// memcpy & co. through volatile function pointers: never inlined, never
// turned into stores of a known size, always the symbol the dynamic linker bound.
static void* (*volatile memcpy_fn)(void*, const void*, size_t) = memcpy;
static void* (*volatile memmove_fn)(void*, const void*, size_t) = memmove;
static void* (*volatile memset_fn)(void*, int, size_t) = memset;

static void write_bytes(char* p, ptrdiff_t from, ptrdiff_t to) {   // p[from..to) = 'A'
  volatile char* q = opaque(p);
  for (ptrdiff_t i = from; i < to; i++) q[i] = 'A';
}

static const size_t small_size = 64;   // a size class in every allocator compared

// ----------------------------------------------------------------------------
// Overflows and underflows by direct writes
// ----------------------------------------------------------------------------

static int overflow(size_t by) {
  char* p = (char*)malloc(opaque_size(small_size));
  write_bytes(p, (ptrdiff_t)small_size, (ptrdiff_t)(small_size + by));
  free(opaque(p));
  return MI_UNNOTICED;
}
static int overflow_1() { return overflow(1); }
static int overflow_32() { return overflow(32); }
static int overflow_page() { return overflow(4096); }

// Three blocks of one size class, adjacent in memory: the distance between
// them is the smallest distance between any two of many blocks of the class
// (the block size). The middle one overflows, then the block below or above
// it is freed (not the overflowing one).
static bool adjacent_triple(char** lo, char** mid, char** hi) {
  enum { N = 256 };
  static char* blocks[N];
  for (int i = 0; i < N; i++) blocks[i] = (char*)malloc(opaque_size(small_size));
  ptrdiff_t stride = PTRDIFF_MAX;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      if (blocks[j] > blocks[i] && blocks[j] - blocks[i] < stride) stride = blocks[j] - blocks[i];
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      if (blocks[j] - blocks[i] != stride) continue;
      for (int k = 0; k < N; k++) {
        if (blocks[k] - blocks[j] != stride) continue;
        *lo = blocks[i]; *mid = blocks[j]; *hi = blocks[k];
        printf("adjacent blocks %p %p %p\n", (void*)*lo, (void*)*mid, (void*)*hi);
        return true;   // (the other blocks stay allocated)
      }
    }
  return false;
}
static int overflow_free_neighbour(size_t by, bool above) {
  char *lo, *mid, *hi;
  if (!adjacent_triple(&lo, &mid, &hi)) {
    printf("no three adjacent blocks found: case not applicable\n");
    return MI_NOT_APPLICABLE;
  }
  write_bytes(mid, (ptrdiff_t)small_size, (ptrdiff_t)(small_size + by));
  free(opaque(above ? hi : lo));
  return MI_UNNOTICED;
}
static int overflow_1_free_below() { return overflow_free_neighbour(1, false); }
static int overflow_1_free_above() { return overflow_free_neighbour(1, true); }
static int overflow_32_free_below() { return overflow_free_neighbour(32, false); }
static int overflow_32_free_above() { return overflow_free_neighbour(32, true); }
static int overflow_page_free_below() { return overflow_free_neighbour(4096, false); }
static int overflow_page_free_above() { return overflow_free_neighbour(4096, true); }

static int underflow(size_t by) {
  char* p = (char*)malloc(opaque_size(small_size));
  write_bytes(p, -(ptrdiff_t)by, 0);
  free(opaque(p));
  return MI_UNNOTICED;
}
static int underflow_1() { return underflow(1); }
static int underflow_32() { return underflow(32); }

// ----------------------------------------------------------------------------
// Overflows through memcpy, memmove, memset (the block is not freed: these
// cases ask whether the call itself is checked)
// ----------------------------------------------------------------------------

static int copy_overflow(int which, size_t by) {
  char* src = (char*)malloc(opaque_size(small_size + 64));
  memset_fn(src, 'S', small_size + 64);
  char* dst = (char*)malloc(opaque_size(small_size));
  size_t n = opaque_size(small_size + by);
  if (which == 0) memcpy_fn(dst, src, n);
  else if (which == 1) memmove_fn(dst, src, n);
  else memset_fn(dst, 'A', n);
  sink = dst;
  sink = src;
  return MI_UNNOTICED;
}
static int memcpy_overflow_1() { return copy_overflow(0, 1); }
static int memcpy_overflow_32() { return copy_overflow(0, 32); }
static int memmove_overflow_1() { return copy_overflow(1, 1); }
static int memmove_overflow_32() { return copy_overflow(1, 32); }
static int memset_overflow_1() { return copy_overflow(2, 1); }
static int memset_overflow_32() { return copy_overflow(2, 32); }

// ----------------------------------------------------------------------------
// Double frees
// ----------------------------------------------------------------------------

static int double_free() {
  void* p = malloc(opaque_size(small_size));
  free(opaque(p));
  free(opaque(p));
  return MI_UNNOTICED;
}
static int double_free_after_other_frees() {
  void* p = malloc(opaque_size(small_size));
  void* q[8];
  for (int i = 0; i < 8; i++) q[i] = malloc(opaque_size(small_size));
  free(opaque(p));
  for (int i = 0; i < 8; i++) free(opaque(q[i]));
  free(opaque(p));
  return MI_UNNOTICED;
}
static int double_free_interleaved() {   // a b a
  void* a = malloc(opaque_size(small_size));
  void* b = malloc(opaque_size(small_size));
  free(opaque(a));
  free(opaque(b));
  free(opaque(a));
  return MI_UNNOTICED;
}
// The slot is handed out again (many allocations of its size) and freed
// again by its new owner; then the old pointer is freed once more.
static int double_free_after_reuse() {
  void* p = malloc(opaque_size(small_size));
  free(opaque(p));
  enum { N = 1000 };
  static void* q[N];
  int reused = 0;
  for (int i = 0; i < N; i++) { q[i] = malloc(opaque_size(small_size)); reused += (q[i] == p); }
  for (int i = 0; i < N; i++) free(opaque(q[i]));
  printf("slot reused: %s\n", reused ? "yes" : "no");
  free(opaque(p));
  return MI_UNNOTICED;
}
// One allocation of the same size between the two frees: an allocator that
// hands the block just freed out again makes the second free a free of a
// live block (the new owner's), which no allocator can tell from a valid one.
static int double_free_after_same_size() {
  void* p = malloc(opaque_size(small_size));
  free(opaque(p));
  void* q = malloc(opaque_size(small_size));
  printf("next allocation is the freed block: %s\n", q == p ? "yes" : "no");
  sink = q;
  free(opaque(p));
  return MI_UNNOTICED;
}

// ----------------------------------------------------------------------------
// Frees of pointers malloc never returned
// ----------------------------------------------------------------------------

static char global_block[64];

static int free_stack() {
  char buf[64];
  write_bytes(buf, 0, 64);
  free(opaque((void*)buf));
  return MI_UNNOTICED;
}
static int free_alloca() {
  char* p = (char*)mi_alloca(opaque_size(64));
  write_bytes(p, 0, 64);
  free(opaque((void*)p));
  return MI_UNNOTICED;
}
static int free_global() {
  free(opaque((void*)global_block));
  return MI_UNNOTICED;
}
static int free_far() {   // far from anything the allocator mapped (2^40 above a block)
  char* p = (char*)malloc(opaque_size(small_size));
  free(opaque((void*)((uintptr_t)p + ((uintptr_t)1 << 40))));
  return MI_UNNOTICED;
}
static int free_inside_small() {
  char* p = (char*)malloc(opaque_size(small_size));
  free(opaque(p + 16));
  return MI_UNNOTICED;
}
static int free_inside_large() {
  char* p = (char*)malloc(opaque_size(300000));
  free(opaque(p + 65536));
  return MI_UNNOTICED;
}
static int free_unaligned() {
  char* p = (char*)malloc(opaque_size(small_size));
  free(opaque(p + 3));
  return MI_UNNOTICED;
}

// ----------------------------------------------------------------------------
// C++: mismatched new/delete (trivially destructible types: no array cookie,
// so only the allocator can notice) and a sized delete with the wrong size
// ----------------------------------------------------------------------------

static int delete_of_new_array() {
  char* p = opaque(new char[opaque_size(100)]);
  delete opaque(p);
  return MI_UNNOTICED;
}
static int delete_array_of_new() {
  int* p = opaque(new int);
  *p = 1;
  delete[] opaque(p);
  return MI_UNNOTICED;
}
static int sized_delete_wrong_size() {
  void* p = ::operator new(opaque_size(64));
  ::operator delete(opaque(p), opaque_size(1024));
  return MI_UNNOTICED;
}

// ----------------------------------------------------------------------------
// Use after free
// ----------------------------------------------------------------------------

// Write 8 bytes in the middle of a freed block (not where free lists keep
// their links), then allocate its size until the block is surely reused.
static void reuse_many(size_t size) {
  for (int i = 0; i < 2000; i++) sink = malloc(opaque_size(size));
}
static int write_after_free() {
  char* p = (char*)malloc(opaque_size(small_size));
  free(opaque(p));
  write_bytes(p, 24, 32);
  reuse_many(small_size);
  return MI_UNNOTICED;
}
static int write_after_free_memset() {   // the whole block
  char* p = (char*)malloc(opaque_size(small_size));
  free(opaque(p));
  memset_fn(opaque(p), 'A', opaque_size(small_size));
  reuse_many(small_size);
  return MI_UNNOTICED;
}
static int read_after_free_zero() {   // property: a freed block reads zero (or faults)
  expect_fault();
  char* p = (char*)malloc(opaque_size(small_size));
  memset_fn(p, 'S', small_size);
  free(opaque(p));
  volatile char* q = opaque(p);
  size_t nonzero = 0, first = 0;
  for (size_t i = 0; i < small_size; i++)
    if (q[i] != 0 && nonzero++ == 0) first = i;
  if (nonzero == 0) return 0;
  printf("%zu of %zu bytes are not zero, the first is byte %zu\n", nonzero, small_size, first);
  return MI_UNNOTICED;
}

// ----------------------------------------------------------------------------
// malloc(0)
// ----------------------------------------------------------------------------

static int malloc0_read_faults() {
  expect_fault();
  volatile char* p = opaque((char*)malloc(opaque_size(0)));
  if (p == nullptr) { printf("malloc(0) returned NULL\n"); return MI_UNNOTICED; }
  sink = (void*)(uintptr_t)p[0];
  return MI_UNNOTICED;
}
static int malloc0_write_faults() {
  expect_fault();
  volatile char* p = opaque((char*)malloc(opaque_size(0)));
  if (p == nullptr) { printf("malloc(0) returned NULL\n"); return MI_UNNOTICED; }
  p[0] = 'A';
  return MI_UNNOTICED;
}
static int malloc0_unique() {   // two live 0-byte blocks are different pointers
  void* p = malloc(opaque_size(0));
  void* q = malloc(opaque_size(0));
  if (p == nullptr || q == nullptr) { printf("malloc(0) returned NULL\n"); return MI_UNNOTICED; }
  if (p == q) { printf("malloc(0) twice: %p both times\n", p); return MI_UNNOTICED; }
  free(opaque(p));
  free(opaque(q));
  return 0;
}
static int malloc0_free() {   // free(malloc(0)) is fine: exit 0 (anything else: not OK)
  for (int i = 0; i < 100; i++) free(opaque(malloc(opaque_size(0))));
  return 0;
}

// ----------------------------------------------------------------------------
// Other properties
// ----------------------------------------------------------------------------

static int freed_not_next() {   // the block just freed is not the next one of its size
  void* p = malloc(opaque_size(small_size));
  free(opaque(p));
  void* q = malloc(opaque_size(small_size));
  return q == p ? MI_UNNOTICED : 0;
}

static int heap_not_executable() {   // the mapping holding a small and a large block is not executable
  char* blocks[2] = {(char*)malloc(opaque_size(small_size)), (char*)malloc(opaque_size(300000))};
  int exec = 0;
  for (char* b : blocks) {
    int x = executable(b);
    if (x < 0) return MI_NOT_APPLICABLE;
    exec += x;
  }
  return exec ? MI_UNNOTICED : 0;
}

static bool failed_nomem(void* p, const char* what) {
  int e = errno;
  if (p == nullptr && (e == ENOMEM || e == EOVERFLOW)) return true;
  printf("%s: returned %p, errno %d (%s)\n", what, p, e, strerror(e));
  return false;
}
static int malloc_size_max() {
  errno = 0;
  void* p = malloc(opaque_size(SIZE_MAX));
  return failed_nomem(p, "malloc(SIZE_MAX)") ? 0 : MI_UNNOTICED;
}
static int calloc_overflow() {
  errno = 0;
  void* p = calloc(opaque_size(SIZE_MAX / 2), opaque_size(3));
  return failed_nomem(p, "calloc(SIZE_MAX/2, 3)") ? 0 : MI_UNNOTICED;
}
static int realloc_size_max() {   // fails, and the old block stays valid
  char* p = (char*)malloc(opaque_size(small_size));
  memset_fn(p, 'S', small_size);
  errno = 0;
  void* q = realloc(opaque(p), opaque_size(SIZE_MAX));
  if (!failed_nomem(q, "realloc(p, SIZE_MAX)")) return MI_UNNOTICED;
  if (p[0] != 'S' || p[small_size - 1] != 'S') { printf("old block changed\n"); return MI_UNNOTICED; }
  free(opaque(p));
  return 0;
}
static int reallocarray_overflow() {
  if (reallocarray_fn == nullptr) {
    printf("the C runtime has no reallocarray: case not applicable\n");
    return MI_NOT_APPLICABLE;
  }
  char* p = (char*)malloc(opaque_size(small_size));
  errno = 0;
  void* q = reallocarray_fn(opaque(p), opaque_size(SIZE_MAX / 2), opaque_size(3));
  if (!failed_nomem(q, "reallocarray(p, SIZE_MAX/2, 3)")) return MI_UNNOTICED;
  free(opaque(p));
  return 0;
}

// ----------------------------------------------------------------------------
// The case table
// ----------------------------------------------------------------------------

enum mi_case_kind_e { MISUSE, PROPERTY };

struct mi_case_t {
  const char* name;
  mi_case_kind_e kind;
  const char* cls;    // misuse class (rows of the table are grouped by it)
  const char* what;
  int (*run)();
};

static const mi_case_t cases[] = {
  {"overflow-1", MISUSE, "overflow", "write 1 byte past a 64-byte block, free it", overflow_1},
  {"overflow-32", MISUSE, "overflow", "write 32 bytes past a 64-byte block, free it", overflow_32},
  {"overflow-page", MISUSE, "overflow", "write 4096 bytes past a 64-byte block, free it", overflow_page},
  {"overflow-1-free-below", MISUSE, "overflow", "overflow by 1, free the adjacent block below", overflow_1_free_below},
  {"overflow-1-free-above", MISUSE, "overflow", "overflow by 1, free the adjacent block above", overflow_1_free_above},
  {"overflow-32-free-below", MISUSE, "overflow", "overflow by 32, free the adjacent block below", overflow_32_free_below},
  {"overflow-32-free-above", MISUSE, "overflow", "overflow by 32, free the adjacent block above", overflow_32_free_above},
  {"overflow-page-free-below", MISUSE, "overflow", "overflow by 4096, free the adjacent block below", overflow_page_free_below},
  {"overflow-page-free-above", MISUSE, "overflow", "overflow by 4096, free the adjacent block above", overflow_page_free_above},
  {"underflow-1", MISUSE, "overflow", "write 1 byte before a 64-byte block, free it", underflow_1},
  {"underflow-32", MISUSE, "overflow", "write 32 bytes before a 64-byte block, free it", underflow_32},
  {"memcpy-overflow-1", MISUSE, "copy overflow", "memcpy 65 bytes into a 64-byte block", memcpy_overflow_1},
  {"memcpy-overflow-32", MISUSE, "copy overflow", "memcpy 96 bytes into a 64-byte block", memcpy_overflow_32},
  {"memmove-overflow-1", MISUSE, "copy overflow", "memmove 65 bytes into a 64-byte block", memmove_overflow_1},
  {"memmove-overflow-32", MISUSE, "copy overflow", "memmove 96 bytes into a 64-byte block", memmove_overflow_32},
  {"memset-overflow-1", MISUSE, "copy overflow", "memset 65 bytes of a 64-byte block", memset_overflow_1},
  {"memset-overflow-32", MISUSE, "copy overflow", "memset 96 bytes of a 64-byte block", memset_overflow_32},
  {"double-free", MISUSE, "double free", "free(p); free(p)", double_free},
  {"double-free-after-other-frees", MISUSE, "double free", "free(p), free 8 other blocks, free(p)", double_free_after_other_frees},
  {"double-free-interleaved", MISUSE, "double free", "free(a); free(b); free(a)", double_free_interleaved},
  {"double-free-after-reuse", MISUSE, "double free", "free(p), 1000 mallocs of its size and their frees, free(p)", double_free_after_reuse},
  {"double-free-after-same-size", MISUSE, "double free", "free(p), one malloc of its size (kept), free(p)", double_free_after_same_size},
  {"free-stack", MISUSE, "invalid free", "free a stack array", free_stack},
  {"free-alloca", MISUSE, "invalid free", "free an alloca block", free_alloca},
  {"free-global", MISUSE, "invalid free", "free a global array", free_global},
  {"free-far", MISUSE, "invalid free", "free an address 2^40 above a block", free_far},
  {"free-inside-small", MISUSE, "invalid free", "free 64-byte block + 16", free_inside_small},
  {"free-inside-large", MISUSE, "invalid free", "free 300000-byte block + 65536", free_inside_large},
  {"free-unaligned", MISUSE, "invalid free", "free 64-byte block + 3", free_unaligned},
  {"delete-of-new-array", MISUSE, "C++ delete", "delete of new char[100]", delete_of_new_array},
  {"delete-array-of-new", MISUSE, "C++ delete", "delete[] of new int", delete_array_of_new},
  {"sized-delete-wrong-size", MISUSE, "C++ delete", "operator delete(operator new(64), 1024)", sized_delete_wrong_size},
  {"write-after-free", MISUSE, "use after free", "write 8 bytes at offset 24 of a freed block, 2000 mallocs of its size", write_after_free},
  {"write-after-free-memset", MISUSE, "use after free", "memset a freed block, 2000 mallocs of its size", write_after_free_memset},
  {"read-after-free-zero", PROPERTY, "use after free", "a freed block reads zero (or faults)", read_after_free_zero},
  {"malloc0-read-faults", PROPERTY, "malloc(0)", "reading malloc(0)'s byte 0 faults", malloc0_read_faults},
  {"malloc0-write-faults", PROPERTY, "malloc(0)", "writing malloc(0)'s byte 0 faults", malloc0_write_faults},
  {"malloc0-unique", PROPERTY, "malloc(0)", "two malloc(0) give two different non-NULL pointers", malloc0_unique},
  {"malloc0-free", PROPERTY, "malloc(0)", "free(malloc(0)) is fine", malloc0_free},
  {"freed-not-next", PROPERTY, "allocation order", "the block just freed is not the next one of its size", freed_not_next},
  {"heap-not-executable", PROPERTY, "heap permissions", "the mappings of a small and a large block are not executable", heap_not_executable},
  {"malloc-size-max", PROPERTY, "impossible sizes", "malloc(SIZE_MAX) is NULL, errno ENOMEM", malloc_size_max},
  {"calloc-overflow", PROPERTY, "impossible sizes", "calloc(SIZE_MAX/2, 3) is NULL, errno ENOMEM", calloc_overflow},
  {"realloc-size-max", PROPERTY, "impossible sizes", "realloc(p, SIZE_MAX) is NULL, errno ENOMEM, p intact", realloc_size_max},
  {"reallocarray-overflow", PROPERTY, "impossible sizes", "reallocarray(p, SIZE_MAX/2, 3) is NULL, errno ENOMEM", reallocarray_overflow},
};

int main(int argc, char** argv) {
  os_start();
  setvbuf(stdout, nullptr, _IONBF, 0);   // notes appear even if the allocator aborts
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (const mi_case_t& c : cases)
      printf("%s\t%s\t%s\t%s\n", c.name, c.kind == MISUSE ? "misuse" : "property", c.cls, c.what);
    return 0;
  }
  if (argc == 2) {
    for (const mi_case_t& c : cases)
      if (strcmp(argv[1], c.name) == 0) return c.run();
  }
  printf("usage: misuse <case> | --list\n");
  return 2;
}
