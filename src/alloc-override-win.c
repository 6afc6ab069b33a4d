/* ----------------------------------------------------------------------------
  alloc-override-win.c -- the override DLL on Windows (mimalloc-override.dll):
  the C runtime's malloc family, served by mimalloc.

  On Windows a program does not link `malloc` by name against whichever
  library comes first, as on ELF systems: every module imports it from the
  C runtime DLL it was built against (msvcrt.dll for mingw-w64's default
  runtime, ucrtbase.dll for UCRT programs and MSVC's), and the runtime calls
  its own functions directly. So this DLL, when it loads (a program linked
  with it loads it before its own code runs), patches the entry of each
  function of the family in every C runtime DLL of the process: the first
  five bytes become a relative jump to a 16-byte stub on a page of ours
  within 2 GiB of the runtime, which jumps to our function. Every caller is
  then served here: the program, other DLLs, and the runtime itself (its
  _strdup, its stdio buffers). (mimalloc 1.6 does this in a separate,
  closed-source mimalloc-redirect.dll.)

  The free, size and realloc functions are patched before the allocating
  ones, and all of them accept blocks the runtime allocated before: such a
  pointer is in no segment of ours (the segment map says so in constant
  time), so it goes back to the runtime's heap it came from (HeapValidate
  finds it among the runtimes' heaps: _get_heap_handle), with the runtime's
  own layout for its _aligned_malloc blocks (the block's start is stored in
  the word before the aligned pointer). A pointer that is neither ours nor a
  runtime's is reported as an invalid free, and ignored.

  MIMALLOC_DISABLE_REDIRECT=1 leaves the runtime alone (the DLL then serves
  only the mi_ API); MIMALLOC_VERBOSE=1 lists what was patched. The patches
  are never undone: the DLL stays in the process (the OS layer pins it; a
  runtime that jumped into an unloaded DLL would crash). Known limits: a runtime DLL
  loaded after this one (LoadLibrary of a plugin built against another
  runtime) is not patched; errno after a failed allocation is set in
  msvcrt's errno, which an UCRT program does not read.
-----------------------------------------------------------------------------*/
#if !defined(_WIN32) || !defined(MI_SHARED_LIB) || !defined(MI_MALLOC_OVERRIDE)
#error "alloc-override-win.c is the Windows override DLL (static.c includes it there only)"
#endif

#include <windows.h>
#include <psapi.h>   // GetModuleInformation

// ---------------------------------------------------------------------------
// The C runtimes of the process and their heaps
// ---------------------------------------------------------------------------

#define MI_WIN_CRT_MAX  8
typedef struct mi_win_crt_s {
  HMODULE     module;
  const char* name;
  HANDLE      heap;      // the heap its malloc allocates from (_get_heap_handle)
  size_t      patched;   // functions patched in it
} mi_win_crt_t;

static mi_win_crt_t mi_win_crts[MI_WIN_CRT_MAX];
static size_t       mi_win_crt_count;
static bool         mi_win_redirected;

// The C runtime heap that holds the block `p` (one the runtime allocated
// before the patch), or NULL.
static HANDLE mi_win_crt_heap_of(const void* p) {
  if (p == NULL) return NULL;
  for (size_t i = 0; i < mi_win_crt_count; i++) {
    HANDLE heap = mi_win_crts[i].heap;
    if (heap != NULL && HeapValidate(heap, 0, p)) return heap;
  }
  HANDLE process_heap = GetProcessHeap();   // (UCRT's heap)
  if (process_heap != NULL && HeapValidate(process_heap, 0, p)) return process_heap;
  return NULL;
}

static inline bool mi_win_is_ours(const void* p) {
  return (p == NULL || mi_is_in_heap_region(p));
}

static void mi_win_invalid(const void* p, const char* fun) {
  _mi_misuse_message(EINVAL, "%s: invalid pointer (neither allocated by mimalloc nor by the C runtime): %p\n", fun, p);
}

// A runtime's _aligned_malloc block: the start of the runtime block is kept
// in the pointer-aligned word before the aligned pointer.
static void* mi_win_crt_aligned_start(void* p, HANDLE* heap) {
  void* const* saved = (void* const*)(((uintptr_t)p & ~(uintptr_t)(sizeof(void*) - 1)) - sizeof(void*));
  void* start = *saved;
  if (start == NULL || (uintptr_t)start >= (uintptr_t)p) return NULL;
  *heap = mi_win_crt_heap_of(start);
  return (*heap == NULL ? NULL : start);
}

// ---------------------------------------------------------------------------
// The functions the runtime's entries jump to
// ---------------------------------------------------------------------------

static void mi_win_free(void* p) {
  if (mi_likely(mi_win_is_ours(p))) { mi_free(p); return; }
  HANDLE heap = mi_win_crt_heap_of(p);
  if (heap != NULL) HeapFree(heap, 0, p);
  else mi_win_invalid(p, "free");
}

static size_t mi_win_msize(void* p) {
  if (mi_win_is_ours(p)) return (p == NULL ? (size_t)-1 : mi_usable_size(p));
  HANDLE heap = mi_win_crt_heap_of(p);
  if (heap != NULL) return HeapSize(heap, 0, p);
  mi_win_invalid(p, "_msize");
  return (size_t)-1;
}

// A runtime block moved into a fresh block of ours of `newsize` bytes
// (zeroing the part beyond the old size with `zero`).
static void* mi_win_crt_move(void* p, HANDLE heap, size_t oldsize, size_t newsize, bool zero) {
  void* q = (zero ? mi_zalloc(newsize) : mi_malloc(newsize));
  if (q == NULL) return NULL;   // (p is left as it was)
  memcpy(q, p, (oldsize < newsize ? oldsize : newsize));
  HeapFree(heap, 0, p);
  return q;
}

static void* mi_win_realloc(void* p, size_t newsize) {
  if (mi_likely(mi_win_is_ours(p))) return mi_std_result(mi_realloc(p, newsize));
  HANDLE heap = mi_win_crt_heap_of(p);
  if (heap == NULL) { mi_win_invalid(p, "realloc"); errno = EINVAL; return NULL; }
  return mi_win_crt_move(p, heap, HeapSize(heap, 0, p), newsize, false);
}

static void* mi_win_recalloc(void* p, size_t count, size_t size) {
  if (mi_likely(mi_win_is_ours(p))) return mi_std_result(mi_recalloc(p, count, size));
  size_t total;
  if (mi_count_size_overflow(count, size, &total)) { errno = ENOMEM; return NULL; }
  HANDLE heap = mi_win_crt_heap_of(p);
  if (heap == NULL) { mi_win_invalid(p, "_recalloc"); errno = EINVAL; return NULL; }
  return mi_win_crt_move(p, heap, HeapSize(heap, 0, p), total, true);
}

static void* mi_win_expand(void* p, size_t newsize) {
  if (mi_win_is_ours(p)) return (p == NULL ? NULL : mi_expand(p, newsize));
  HANDLE heap = mi_win_crt_heap_of(p);
  if (heap == NULL) { mi_win_invalid(p, "_expand"); errno = EINVAL; return NULL; }
  return HeapReAlloc(heap, HEAP_REALLOC_IN_PLACE_ONLY, p, newsize);
}

static void* mi_win_malloc(size_t size)                { return mi_std_result(mi_malloc(size)); }
static void* mi_win_calloc(size_t count, size_t size)  { return mi_std_result(mi_calloc(count, size)); }
static char* mi_win_strdup(const char* s)              { return mi_strdup(s); }
static unsigned short* mi_win_wcsdup(const unsigned short* s) { return mi_wcsdup(s); }
static unsigned char*  mi_win_mbsdup(const unsigned char* s)  { return mi_mbsdup(s); }

// The runtime's aligned family: alignment a power of two (else EINVAL and
// NULL), at least that of a pointer.
static bool mi_win_bad_alignment(size_t alignment) {
  if (alignment != 0 && (alignment & (alignment - 1)) == 0) return false;
  errno = EINVAL;
  return true;
}

static void* mi_win_aligned_offset_malloc(size_t size, size_t alignment, size_t offset) {
  if (mi_win_bad_alignment(alignment)) return NULL;
  if (offset != 0 && offset >= size) { errno = EINVAL; return NULL; }
  return mi_malloc_aligned_at(size, alignment, offset);
}

static void* mi_win_aligned_malloc(size_t size, size_t alignment) {
  return mi_win_aligned_offset_malloc(size, alignment, 0);
}

static void mi_win_aligned_free(void* p) {
  if (mi_likely(mi_win_is_ours(p))) { mi_free(p); return; }
  HANDLE heap;
  void* start = mi_win_crt_aligned_start(p, &heap);
  if (start != NULL) HeapFree(heap, 0, start);
  else mi_win_invalid(p, "_aligned_free");
}

static size_t mi_win_aligned_msize(void* p, size_t alignment, size_t offset) {
  (void)alignment; (void)offset;
  if (mi_win_is_ours(p)) return (p == NULL ? (size_t)-1 : mi_usable_size(p));
  HANDLE heap;
  void* start = mi_win_crt_aligned_start(p, &heap);
  if (start == NULL) { mi_win_invalid(p, "_aligned_msize"); return (size_t)-1; }
  return HeapSize(heap, 0, start) - (size_t)((uint8_t*)p - (uint8_t*)start);
}

static void* mi_win_aligned_offset_recalloc_ex(void* p, size_t newsize, size_t alignment, size_t offset, bool zero) {
  if (mi_win_bad_alignment(alignment)) return NULL;
  if (mi_likely(mi_win_is_ours(p))) {
    return (zero ? mi_rezalloc_aligned_at(p, newsize, alignment, offset) : mi_realloc_aligned_at(p, newsize, alignment, offset));
  }
  HANDLE heap;
  void* start = mi_win_crt_aligned_start(p, &heap);
  if (start == NULL) { mi_win_invalid(p, "_aligned_realloc"); errno = EINVAL; return NULL; }
  const size_t oldsize = HeapSize(heap, 0, start) - (size_t)((uint8_t*)p - (uint8_t*)start);
  void* q = (zero ? mi_zalloc_aligned_at(newsize, alignment, offset) : mi_malloc_aligned_at(newsize, alignment, offset));
  if (q == NULL) return NULL;
  memcpy(q, p, (oldsize < newsize ? oldsize : newsize));
  HeapFree(heap, 0, start);
  return q;
}

static void* mi_win_aligned_offset_realloc(void* p, size_t newsize, size_t alignment, size_t offset) {
  return mi_win_aligned_offset_recalloc_ex(p, newsize, alignment, offset, false);
}
static void* mi_win_aligned_realloc(void* p, size_t newsize, size_t alignment) {
  return mi_win_aligned_offset_recalloc_ex(p, newsize, alignment, 0, false);
}
static void* mi_win_aligned_offset_recalloc(void* p, size_t count, size_t size, size_t alignment, size_t offset) {
  size_t total;
  if (mi_count_size_overflow(count, size, &total)) { errno = ENOMEM; return NULL; }
  return mi_win_aligned_offset_recalloc_ex(p, total, alignment, offset, true);
}
static void* mi_win_aligned_recalloc(void* p, size_t count, size_t size, size_t alignment) {
  return mi_win_aligned_offset_recalloc(p, count, size, alignment, 0);
}

// What is patched, in this order: first what frees, sizes or resizes a
// block (they take the runtime's blocks too), then what allocates. Names a
// runtime does not export are skipped (the _base forms are UCRT's: its
// malloc calls _malloc_base, and so does the rest of the runtime).
typedef struct mi_win_patch_s {
  const char* name;
  void*       fun;
} mi_win_patch_t;

static const mi_win_patch_t mi_win_patches[] = {
  { "free", (void*)&mi_win_free },                  { "_free_base", (void*)&mi_win_free },
  { "_aligned_free", (void*)&mi_win_aligned_free },
  { "_msize", (void*)&mi_win_msize },               { "_msize_base", (void*)&mi_win_msize },
  { "_aligned_msize", (void*)&mi_win_aligned_msize },
  { "realloc", (void*)&mi_win_realloc },            { "_realloc_base", (void*)&mi_win_realloc },
  { "_recalloc", (void*)&mi_win_recalloc },         { "_recalloc_base", (void*)&mi_win_recalloc },
  { "_expand", (void*)&mi_win_expand },             { "_expand_base", (void*)&mi_win_expand },
  { "_aligned_realloc", (void*)&mi_win_aligned_realloc },
  { "_aligned_recalloc", (void*)&mi_win_aligned_recalloc },
  { "_aligned_offset_realloc", (void*)&mi_win_aligned_offset_realloc },
  { "_aligned_offset_recalloc", (void*)&mi_win_aligned_offset_recalloc },
  { "malloc", (void*)&mi_win_malloc },              { "_malloc_base", (void*)&mi_win_malloc },
  { "calloc", (void*)&mi_win_calloc },              { "_calloc_base", (void*)&mi_win_calloc },
  { "_aligned_malloc", (void*)&mi_win_aligned_malloc },
  { "_aligned_offset_malloc", (void*)&mi_win_aligned_offset_malloc },
  { "_strdup", (void*)&mi_win_strdup },             { "strdup", (void*)&mi_win_strdup },
  { "_wcsdup", (void*)&mi_win_wcsdup },             { "wcsdup", (void*)&mi_win_wcsdup },
  { "_mbsdup", (void*)&mi_win_mbsdup },
};
#define MI_WIN_PATCH_COUNT  (sizeof(mi_win_patches) / sizeof(mi_win_patches[0]))

// The runtime DLLs looked for: mingw-w64's default and the old MSVC ones
// (msvcrt.dll, msvcrNNN.dll), and the universal runtime (ucrtbase.dll).
static const char* const mi_win_crt_names[] = {
  "msvcrt.dll", "ucrtbase.dll", "msvcr120.dll", "msvcr110.dll", "msvcr100.dll", "msvcr90.dll", "msvcr80.dll",
};

// ---------------------------------------------------------------------------
// Patching
// ---------------------------------------------------------------------------

// Stubs: `jmp [rip+0]` and the 8-byte address, 16 bytes each, on a page
// within 2 GiB of the runtime (a relative jump reaches it).
#define MI_WIN_STUB_SIZE  16
typedef struct mi_win_stubs_s {
  uint8_t* page;
  size_t   used;
} mi_win_stubs_t;

static bool mi_win_near(uintptr_t a, uintptr_t b) {
  const uintptr_t d = (a > b ? a - b : b - a);
  return (d < ((uintptr_t)1 << 31) - 2 * 4096);
}

// A free page of address space within reach of [lo, hi) (the runtime's
// image), searched below it, then above it.
static uint8_t* mi_win_stub_page(uintptr_t lo, uintptr_t hi) {
  const uintptr_t gran = 64 * 1024;
  // below: walk down from the image, region by region
  uintptr_t addr = lo;
  while (addr > gran && mi_win_near(addr, hi)) {
    MEMORY_BASIC_INFORMATION info;
    if (VirtualQuery((void*)(addr - 1), &info, sizeof(info)) == 0) break;
    const uintptr_t base = (uintptr_t)info.BaseAddress;
    if (info.State == MEM_FREE) {
      const uintptr_t end = base + info.RegionSize;
      const uintptr_t cand = (end - gran) & ~(gran - 1);
      if (cand >= base && mi_win_near(cand, hi)) {
        void* p = VirtualAlloc((void*)cand, 4096, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
        if (p != NULL) return (uint8_t*)p;
      }
    }
    addr = (info.AllocationBase != NULL && (uintptr_t)info.AllocationBase < base ? (uintptr_t)info.AllocationBase : base);
  }
  // above: walk up from the image's end
  addr = (hi + gran - 1) & ~(gran - 1);
  while (mi_win_near(addr, lo)) {
    MEMORY_BASIC_INFORMATION info;
    if (VirtualQuery((void*)addr, &info, sizeof(info)) == 0) break;
    if (info.State == MEM_FREE) {
      const uintptr_t cand = ((uintptr_t)info.BaseAddress + gran - 1) & ~(gran - 1);
      if (cand + gran <= (uintptr_t)info.BaseAddress + info.RegionSize) {
        void* p = VirtualAlloc((void*)cand, 4096, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
        if (p != NULL) return (uint8_t*)p;
      }
    }
    addr = (uintptr_t)info.BaseAddress + info.RegionSize;
  }
  return NULL;
}

static uint8_t* mi_win_stub_new(mi_win_stubs_t* stubs, void* target) {
  if (stubs->page == NULL || stubs->used + MI_WIN_STUB_SIZE > 4096) return NULL;
  uint8_t* stub = stubs->page + stubs->used;
  stubs->used += MI_WIN_STUB_SIZE;
  stub[0] = 0xFF; stub[1] = 0x25;                        // jmp qword [rip+0]
  stub[2] = 0; stub[3] = 0; stub[4] = 0; stub[5] = 0;
  memcpy(stub + 6, &target, sizeof(target));
  return stub;
}

// Overwrite the first five bytes of `site` with `jmp rel32` to `stub`; in one
// aligned 8-byte store when the five bytes lie in one such word (a thread
// that runs the function meanwhile sees either the old or the new code).
static bool mi_win_patch_site(uint8_t* site, const uint8_t* stub) {
  const intptr_t rel = (intptr_t)stub - (intptr_t)(site + 5);
  if (rel < INT32_MIN || rel > INT32_MAX) return false;
  uint8_t code[5];
  const int32_t rel32 = (int32_t)rel;
  code[0] = 0xE9;
  memcpy(code + 1, &rel32, sizeof(rel32));
  DWORD old;
  if (!VirtualProtect(site, 5, PAGE_EXECUTE_READWRITE, &old)) return false;
  if (((uintptr_t)site & 7) <= 3) {
    volatile LONG64* word = (volatile LONG64*)((uintptr_t)site & ~(uintptr_t)7);
    LONG64 value = *word;
    memcpy((uint8_t*)&value + ((uintptr_t)site & 7), code, sizeof(code));
    InterlockedExchange64(word, value);
  }
  else {
    memcpy(site, code, sizeof(code));
  }
  DWORD ignored;
  VirtualProtect(site, 5, old, &ignored);
  FlushInstructionCache(GetCurrentProcess(), site, 5);
  return true;
}

// Patch the family in one runtime; the names patched are appended to `list`.
static void mi_win_patch_crt(mi_win_crt_t* crt, char* list, size_t list_size) {
  MODULEINFO info;
  memset(&info, 0, sizeof(info));
  const uintptr_t lo = (uintptr_t)crt->module;
  const uintptr_t hi = (GetModuleInformation(GetCurrentProcess(), crt->module, &info, sizeof(info)) ? lo + info.SizeOfImage : lo + 1);
  mi_win_stubs_t stubs = { mi_win_stub_page(lo, hi), 0 };
  if (stubs.page == NULL) {
    _mi_warning_message("redirect: no free address space near %s: it is not patched\n", crt->name);
    return;
  }
  void* done[MI_WIN_PATCH_COUNT];   // entries patched (names may share one)
  size_t done_count = 0;
  for (size_t i = 0; i < MI_WIN_PATCH_COUNT; i++) {
    uint8_t* site = (uint8_t*)(void*)GetProcAddress(crt->module, mi_win_patches[i].name);
    if (site == NULL) continue;
    bool seen = false;
    for (size_t j = 0; j < done_count && !seen; j++) seen = (done[j] == site);
    if (seen) continue;
    uint8_t* stub = mi_win_stub_new(&stubs, mi_win_patches[i].fun);
    if (stub == NULL) break;
    // the stub page becomes executable before any entry jumps to it
    DWORD old;
    VirtualProtect(stubs.page, 4096, PAGE_EXECUTE_READ, &old);
    if (!mi_win_patch_site(site, stub)) {
      _mi_warning_message("redirect: %s: cannot patch %s (error %lu)\n", crt->name, mi_win_patches[i].name, GetLastError());
      VirtualProtect(stubs.page, 4096, PAGE_READWRITE, &old);
      continue;
    }
    VirtualProtect(stubs.page, 4096, PAGE_READWRITE, &old);
    done[done_count++] = site;
    crt->patched++;
    const size_t len = strlen(list);
    snprintf(list + len, list_size - len, "%s%s", (len > 0 ? " " : ""), mi_win_patches[i].name);
  }
  DWORD old;
  VirtualProtect(stubs.page, 4096, PAGE_EXECUTE_READ, &old);
}

// At load (init.c, after the options are read): find the runtimes and patch them.
void _mi_redirect_init(void) {
  if (mi_option_is_enabled(mi_option_disable_redirect)) {
    _mi_verbose_message("redirect: disabled (MIMALLOC_DISABLE_REDIRECT): the C runtime allocates on its own\n");
    return;
  }
  // (the DLL stays in the process for good, as the runtimes jump here from
  // now on: the OS layer pinned it when it registered the thread-exit
  // destructor, at process init)
  for (size_t n = 0; n < sizeof(mi_win_crt_names) / sizeof(mi_win_crt_names[0]) && mi_win_crt_count < MI_WIN_CRT_MAX; n++) {
    HMODULE mod = GetModuleHandleA(mi_win_crt_names[n]);
    if (mod == NULL) continue;
    mi_win_crt_t* crt = &mi_win_crts[mi_win_crt_count++];
    crt->module = mod;
    crt->name = mi_win_crt_names[n];
    typedef intptr_t (__cdecl* get_heap_handle_t)(void);
    get_heap_handle_t get_heap = (get_heap_handle_t)(void*)GetProcAddress(mod, "_get_heap_handle");
    crt->heap = (get_heap != NULL ? (HANDLE)get_heap() : NULL);
  }
  // the heaps are all known before any entry is patched (a free of a block
  // of the second runtime may come through the first one's patched entry)
  for (size_t i = 0; i < mi_win_crt_count; i++) {
    char list[1024];
    list[0] = 0;
    mi_win_patch_crt(&mi_win_crts[i], list, sizeof(list));
    if (mi_win_crts[i].patched > 0) mi_win_redirected = true;
    _mi_verbose_message("redirect: %s at %p: %zu functions patched: %s\n", mi_win_crts[i].name,
                        (void*)mi_win_crts[i].module, mi_win_crts[i].patched, list);
  }
  if (mi_win_crt_count == 0) _mi_warning_message("redirect: no C runtime DLL in the process: nothing patched\n");
}

bool _mi_is_redirected(void) {
  return mi_win_redirected;
}
