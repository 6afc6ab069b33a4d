/* ----------------------------------------------------------------------------
  test-redirect.cpp -- the override DLL on Windows: a program linked with
  mimalloc-override.dll (so it is loaded before main: the program calls
  mi_is_redirected) gets every C runtime allocation served by mimalloc, from
  its own calls, from a DLL that knows nothing of mimalloc
  (redirect-dll.c), and from inside the runtime. Blocks are checked with the
  library's own mi_is_in_heap_region: a block of the runtime's heap is not
  in it.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <windows.h>
#include <direct.h>    // _getcwd
#include <malloc.h>    // _msize, _expand, _aligned_malloc
#include <process.h>   // _beginthreadex
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

extern "C" {
__declspec(dllimport) void* redirect_dll_malloc(size_t size);
__declspec(dllimport) void* redirect_dll_realloc(void* p, size_t size);
__declspec(dllimport) void redirect_dll_free(void* p);
__declspec(dllimport) size_t redirect_dll_msize(void* p);
__declspec(dllimport) char* redirect_dll_strdup(const char* s);
__declspec(dllimport) void* redirect_dll_aligned_malloc(size_t size, size_t alignment);
__declspec(dllimport) void redirect_dll_aligned_free(void* p);
}

namespace {

bool ours(const void* p) { return p != nullptr && mi_is_in_heap_region(p); }

bool aligned(const void* p, size_t alignment) { return ((uintptr_t)p % alignment) == 0; }

}  // namespace

TEST(Redirect, TheRuntimeIsPatched) {
  EXPECT_TRUE(mi_is_redirected());
  void* p = malloc(10);
  EXPECT_TRUE(ours(p));
  free(p);
}

// Every function of the family, called by the program.
TEST(Redirect, TheMallocFamily) {
  char* p = (char*)malloc(100);
  ASSERT_NE(p, nullptr);
  memset(p, 'x', 100);
  ASSERT_TRUE(ours(p));
  EXPECT_GE(_msize(p), 100u);
  EXPECT_EQ(_msize(p), mi_usable_size(p));
  p = (char*)realloc(p, 100000);
  ASSERT_TRUE(ours(p));
  EXPECT_EQ(p[99], 'x');
  EXPECT_GE(_msize(p), 100000u);
  // _expand: in place or NULL, never a move
  void* q = _expand(p, 10);
  EXPECT_TRUE(q == p || q == nullptr);
  free(p);

  int* z = (int*)calloc(1000, sizeof(int));
  ASSERT_TRUE(ours(z));
  for (int i = 0; i < 1000; i++) ASSERT_EQ(z[i], 0);
  free(z);

  // (a size that overflows: NULL, as the runtime's own calloc)
  volatile size_t huge_count = SIZE_MAX / 2;
  EXPECT_EQ(calloc(huge_count, 4), nullptr);
}

TEST(Redirect, TheAlignedFamily) {
  for (size_t alignment = 8; alignment <= 1024 * 1024; alignment *= 4) {
    void* p = _aligned_malloc(1000, alignment);
    ASSERT_TRUE(ours(p)) << alignment;
    EXPECT_TRUE(aligned(p, alignment)) << alignment;
    EXPECT_GE(mi_usable_size(p), 1000u);   // (msvcrt has no _aligned_msize: UCRT's)
    memset(p, 'a', 1000);
    p = _aligned_realloc(p, 50000, alignment);
    ASSERT_TRUE(ours(p));
    EXPECT_TRUE(aligned(p, alignment));
    EXPECT_EQ(((char*)p)[999], 'a');
    _aligned_free(p);
  }
  // offset: p + 16 is aligned
  char* o = (char*)_aligned_offset_malloc(200, 64, 16);
  ASSERT_TRUE(ours(o));
  EXPECT_TRUE(aligned(o + 16, 64));
  _aligned_free(o);
  // (an alignment that is not a power of two: NULL and EINVAL)
  errno = 0;
  EXPECT_EQ(_aligned_malloc(100, 24), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(Redirect, TheStrdupFamily) {
  char* s = _strdup("a string");
  ASSERT_TRUE(ours(s));
  EXPECT_STREQ(s, "a string");
  free(s);
  wchar_t* w = _wcsdup(L"a wide string");
  ASSERT_TRUE(ours(w));
  EXPECT_EQ(wcscmp(w, L"a wide string"), 0);
  free(w);
}

// Blocks the runtime allocates inside its own functions (its internal
// malloc calls jump here too), freed by the program.
TEST(Redirect, BlocksMadeInsideTheRuntime) {
  char* cwd = _getcwd(nullptr, 0);
  ASSERT_NE(cwd, nullptr);
  EXPECT_TRUE(ours(cwd));
  EXPECT_GT(strlen(cwd), 0u);
  free(cwd);
  char* full = _fullpath(nullptr, "some-file.txt", 0);
  ASSERT_NE(full, nullptr);
  EXPECT_TRUE(ours(full));
  EXPECT_NE(strstr(full, "some-file.txt"), nullptr);
  free(full);
  wchar_t* wcwd = _wgetcwd(nullptr, 0);
  ASSERT_NE(wcwd, nullptr);
  EXPECT_TRUE(ours(wcwd));
  free(wcwd);
  char* temp = _tempnam(nullptr, "mi");
  ASSERT_NE(temp, nullptr);
  EXPECT_TRUE(ours(temp));
  free(temp);
}

// A DLL that calls the runtime, and the program, exchange blocks both ways.
TEST(Redirect, AnExeAndADllExchangeBlocks) {
  std::vector<void*> from_dll, from_exe;
  for (size_t i = 0; i < 200; i++) {
    void* p = redirect_dll_malloc(16 + i * 37);
    ASSERT_TRUE(ours(p));
    memset(p, (int)i, 16 + i * 37);
    from_dll.push_back(p);
    from_exe.push_back(malloc(16 + i * 41));
    ASSERT_TRUE(ours(from_exe.back()));
  }
  for (size_t i = 0; i < 200; i++) {
    EXPECT_EQ(_msize(from_dll[i]), redirect_dll_msize(from_dll[i]));
    EXPECT_EQ(((unsigned char*)from_dll[i])[15], (unsigned char)i);
    if (i % 2 == 0) {
      free(from_dll[i]);                                        // the program frees the DLL's block
      from_exe[i] = redirect_dll_realloc(from_exe[i], 5000);    // the DLL resizes the program's
      ASSERT_TRUE(ours(from_exe[i]));
      redirect_dll_free(from_exe[i]);                           // and frees it
    }
    else {
      redirect_dll_free(from_dll[i]);
      free(from_exe[i]);
    }
  }
  char* s = redirect_dll_strdup("from the dll");
  ASSERT_TRUE(ours(s));
  free(s);
  void* a = redirect_dll_aligned_malloc(300, 4096);
  ASSERT_TRUE(ours(a));
  EXPECT_TRUE(aligned(a, 4096));
  _aligned_free(a);
  a = _aligned_malloc(300, 4096);
  redirect_dll_aligned_free(a);
}

// C++: libstdc++'s operator new calls the runtime's malloc.
TEST(Redirect, CxxNewAndDelete) {
  std::vector<int>* v = new std::vector<int>(10000, 3);
  EXPECT_TRUE(ours(v));
  EXPECT_TRUE(ours(v->data()));
  delete v;
  std::string s(1000, 'c');
  EXPECT_TRUE(ours(s.data()));
}

// Threads made with CreateThread and with _beginthreadex allocate and exit
// with their blocks still allocated; other threads free them. Each ending
// thread's heap is torn down (the fiber-local-storage destructor): the
// statistics count the threads as gone.
namespace {

constexpr size_t kBlocks = 2000;

struct ThreadBlocks {
  std::vector<unsigned char*> blocks;
  unsigned char tag = 0;
};

void allocate_and_leave(ThreadBlocks* t) {
  t->blocks.reserve(kBlocks);
  for (size_t i = 0; i < kBlocks; i++) {
    const size_t size = 8 + (i * 131) % 3000;
    unsigned char* p = (unsigned char*)malloc(size);
    if (p == nullptr) return;
    memset(p, t->tag, size);
    t->blocks.push_back(p);
  }
}

DWORD WINAPI create_thread_main(LPVOID arg) {
  allocate_and_leave((ThreadBlocks*)arg);
  return 0;
}

unsigned __stdcall beginthreadex_main(void* arg) {
  allocate_and_leave((ThreadBlocks*)arg);
  return 0;
}

long long threads_ended() {
  mi_stats_snapshot_t st;
  mi_stats_get(sizeof(st), &st);
  return st.threads.freed;
}

}  // namespace

TEST(Redirect, ThreadsExitWithBlocksOtherThreadsFree) {
  const long long ended_before = threads_ended();
  constexpr int kThreads = 8;
  std::vector<ThreadBlocks> work(kThreads);
  std::vector<HANDLE> handles;
  for (int i = 0; i < kThreads; i++) {
    work[i].tag = (unsigned char)(0x40 + i);
    HANDLE h;
    if (i % 2 == 0) h = CreateThread(nullptr, 0, &create_thread_main, &work[i], 0, nullptr);
    else h = (HANDLE)_beginthreadex(nullptr, 0, &beginthreadex_main, &work[i], 0, nullptr);
    ASSERT_NE(h, nullptr);
    handles.push_back(h);
  }
  ASSERT_EQ(WaitForMultipleObjects((DWORD)handles.size(), handles.data(), TRUE, 60000), WAIT_OBJECT_0);
  for (HANDLE h : handles) CloseHandle(h);
  EXPECT_EQ(threads_ended() - ended_before, kThreads) << "every thread's heap was torn down at its exit";

  // two other threads free the blocks of the ended ones
  std::atomic<size_t> bad{0};
  auto free_half = [&](int parity) {
    for (int i = parity; i < kThreads; i += 2) {
      for (unsigned char* p : work[i].blocks) {
        if (!ours(p) || p[0] != work[i].tag) bad++;
        free(p);
      }
    }
  };
  std::thread a(free_half, 0), b(free_half, 1);
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0u);
  for (const ThreadBlocks& t : work) EXPECT_EQ(t.blocks.size(), kBlocks);
  mi_collect(true);
}
