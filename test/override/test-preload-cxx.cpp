// ----------------------------------------------------------------------------
// test-preload-cxx.cpp -- run with LD_PRELOAD=libmimalloc.so. Not linked with
// mimalloc: every form of C++ operator new/delete must be served by the
// preloaded library, with the C++ out-of-memory semantics (new_handler, then
// std::bad_alloc; nothrow forms return nullptr).
// ----------------------------------------------------------------------------
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "override-check.h"

namespace {

mi_owned_fun* owned() {
  static mi_owned_fun* fun = mi_test_owned_fun();
  return fun;
}

bool is_ours(const void* p) {
  return p != nullptr && owned() != nullptr && owned()(p);
}

// Sizes the compiler cannot see through (no -Walloc-size-larger-than).
volatile size_t impossible_size = (size_t)1 << 50;   // 1 PiB: more than the address space
// keeps a new-expression observable: a new/delete pair may otherwise be elided
void* volatile sink;

struct alignas(256) Aligned256 {
  char data[300];
};

int handler_calls = 0;
void counting_handler() {
  handler_calls++;
  std::set_new_handler(nullptr);   // give up: the next failure throws
}

}  // namespace

TEST(PreloadCxx, LibraryIsPreloaded) {
  ASSERT_NE(owned(), nullptr) << "run with LD_PRELOAD=.../libmimalloc.so";
}

TEST(PreloadCxx, ScalarAndArrayNewDelete) {
  int* i = new int(42);
  EXPECT_TRUE(is_ours(i));
  delete i;
  char* a = new char[1000];
  EXPECT_TRUE(is_ours(a));
  delete[] a;
  std::string* s = new std::string(200, 'x');
  EXPECT_TRUE(is_ours(s));
  EXPECT_TRUE(is_ours(s->data()));
  delete s;
}

TEST(PreloadCxx, NothrowNew) {
  int* i = new (std::nothrow) int(1);
  EXPECT_TRUE(is_ours(i));
  delete i;
  char* a = new (std::nothrow) char[100];
  EXPECT_TRUE(is_ours(a));
  delete[] a;
  char* big = new (std::nothrow) char[impossible_size];
  EXPECT_EQ(big, nullptr);
}

TEST(PreloadCxx, AlignedNew) {
  Aligned256* x = new Aligned256();
  EXPECT_TRUE(is_ours(x));
  EXPECT_EQ((uintptr_t)x % 256, 0u);
  delete x;
  Aligned256* xs = new Aligned256[7];
  EXPECT_TRUE(is_ours(xs));
  EXPECT_EQ((uintptr_t)xs % 256, 0u);
  delete[] xs;
  Aligned256* y = new (std::nothrow) Aligned256();
  EXPECT_TRUE(is_ours(y));
  delete y;
  // a very large alignment through the explicit operator
  const std::align_val_t big{(size_t)8 << 20};
  void* p = ::operator new(1000, big);
  EXPECT_TRUE(is_ours(p));
  EXPECT_EQ((uintptr_t)p % ((size_t)8 << 20), 0u);
  ::operator delete(p, big);
  p = ::operator new[](1000, big, std::nothrow);
  EXPECT_TRUE(is_ours(p));
  ::operator delete[](p, big, std::nothrow);
}

TEST(PreloadCxx, SizedAndNothrowDelete) {
  void* p = ::operator new(64);
  EXPECT_TRUE(is_ours(p));
  ::operator delete(p, 64);
  p = ::operator new[](64);
  ::operator delete[](p, 64);
  p = ::operator new(64, std::nothrow);
  ::operator delete(p, std::nothrow);
  p = ::operator new(64, std::align_val_t{64});
  ::operator delete(p, 64, std::align_val_t{64});
}

TEST(PreloadCxx, FailedNewThrowsBadAlloc) {
  EXPECT_THROW({ sink = new char[impossible_size]; }, std::bad_alloc);
  EXPECT_THROW({ sink = ::operator new(impossible_size, std::align_val_t{64}); },
               std::bad_alloc);
}

TEST(PreloadCxx, NewHandlerIsCalledBeforeThrowing) {
  handler_calls = 0;
  std::set_new_handler(&counting_handler);
  EXPECT_THROW({ sink = new char[impossible_size]; }, std::bad_alloc);
  EXPECT_EQ(handler_calls, 1);
  std::set_new_handler(nullptr);
}

TEST(PreloadCxx, ContainersAcrossThreads) {
  std::vector<std::vector<std::string>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([t, &results]() {
      std::map<int, std::string> m;
      for (int i = 0; i < 2000; i++) m[i] = std::string(20 + i % 50, (char)('a' + t));
      for (auto& kv : m) results[t].push_back(kv.second);
    });
  }
  for (auto& th : threads) th.join();
  // the blocks outlive their threads and are freed here
  for (int t = 0; t < 4; t++) {
    ASSERT_EQ(results[t].size(), 2000u);
    EXPECT_TRUE(is_ours(results[t].data()));
    EXPECT_TRUE(is_ours(results[t][1999].data()));
    EXPECT_EQ(results[t][1999][0], (char)('a' + t));
  }
}
