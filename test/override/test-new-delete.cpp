// ----------------------------------------------------------------------------
// test-new-delete.cpp -- mimalloc-new-delete.h routes the global operators to
// mimalloc; mi_stl_allocator works in standard containers; the mi_new family
// has the C++ out-of-memory semantics. Linked three times (test/CMakeLists.txt):
// with a static mimalloc built WITHOUT the symbol override (so only the header
// can make these blocks ours), and with the overriding static library and
// object file, whose weak operators must give way to the header's.
// ----------------------------------------------------------------------------
#include <mimalloc-new-delete.h>   // in exactly one source file of the program
#include <mimalloc.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {
volatile size_t impossible_size = (size_t)1 << 50;
// keeps a new-expression observable: a new/delete pair may otherwise be elided
void* volatile sink;
int handler_calls = 0;
void counting_handler() {
  handler_calls++;
  std::set_new_handler(nullptr);
}
struct alignas(128) Aligned128 { char x[10]; };
}  // namespace

TEST(NewDelete, OperatorsAreOurs) {
  int* i = new int(7);
  EXPECT_TRUE(mi_is_in_heap_region(i));
  delete i;
  double* d = new double[100];
  EXPECT_TRUE(mi_is_in_heap_region(d));
  delete[] d;
  Aligned128* a = new Aligned128;
  EXPECT_TRUE(mi_is_in_heap_region(a));
  EXPECT_EQ((uintptr_t)a % 128, 0u);
  delete a;
  char* n = new (std::nothrow) char[10];
  EXPECT_TRUE(mi_is_in_heap_region(n));
  delete[] n;
  EXPECT_EQ(new (std::nothrow) char[impossible_size], nullptr);
  EXPECT_THROW({ sink = new char[impossible_size]; }, std::bad_alloc);
}

TEST(NewDelete, TheHeadersOperatorsAreTheOnesLinked) {
  // the libraries' operators are aliases of the mi_ functions; the header's
  // are functions of their own that call them
  void* (*op_new)(std::size_t) = &::operator new;
  void (*op_delete)(void*) noexcept = &::operator delete;
  EXPECT_NE((void*)op_new, (void*)&mi_new);
  EXPECT_NE((void*)op_delete, (void*)&mi_free);
}

TEST(NewDelete, StlAllocatorInContainers) {
  std::vector<int, mi_stl_allocator<int>> v;
  for (int i = 0; i < 10000; i++) v.push_back(i);
  EXPECT_TRUE(mi_is_in_heap_region(v.data()));
  EXPECT_EQ(v[9999], 9999);
  std::map<int, int, std::less<int>, mi_stl_allocator<std::pair<const int, int>>> m;
  for (int i = 0; i < 1000; i++) m[i] = i * 2;
  EXPECT_EQ(m[500], 1000);
  std::unordered_map<int, std::string, std::hash<int>, std::equal_to<int>,
                     mi_stl_allocator<std::pair<const int, std::string>>> um;
  um[1] = "one";
  EXPECT_EQ(um[1], "one");
  std::list<double, mi_stl_allocator<double>> l(100, 1.5);
  EXPECT_EQ(l.size(), 100u);
  using mi_string = std::basic_string<char, std::char_traits<char>, mi_stl_allocator<char>>;
  mi_string s(1000, 'q');
  EXPECT_TRUE(mi_is_in_heap_region(s.data()));
  // stateless allocators compare equal and rebind
  mi_stl_allocator<int> ai;
  mi_stl_allocator<double> ad(ai);
  EXPECT_TRUE(ai == ad);
  EXPECT_FALSE(ai != ad);
  EXPECT_EQ(ai.max_size(), (size_t)PTRDIFF_MAX / sizeof(int));
  EXPECT_THROW({ sink = ai.allocate(impossible_size); }, std::bad_alloc);
}

TEST(NewDelete, MiNewFamily) {
  void* p = mi_new(100);
  EXPECT_TRUE(mi_is_in_heap_region(p));
  p = mi_new_realloc(p, 10000);
  EXPECT_GE(mi_usable_size(p), 10000u);
  p = mi_new_reallocn(p, 10, 100);
  mi_free(p);
  p = mi_new_aligned(100, 4096);
  EXPECT_EQ((uintptr_t)p % 4096, 0u);
  mi_free(p);
  p = mi_new_n(10, 10);
  EXPECT_GE(mi_usable_size(p), 100u);
  mi_free(p);
  EXPECT_EQ(mi_new_nothrow(impossible_size), nullptr);
  EXPECT_EQ(mi_new_aligned_nothrow(impossible_size, 64), nullptr);
  volatile size_t half = SIZE_MAX / 2;
  EXPECT_THROW(sink = mi_new(impossible_size), std::bad_alloc);
  EXPECT_THROW(sink = mi_new_aligned(impossible_size, 64), std::bad_alloc);
  EXPECT_THROW(sink = mi_new_n(half, 3), std::bad_alloc);          // overflow
  void* q = mi_new(10);
  EXPECT_THROW(sink = mi_new_reallocn(q, half, 3), std::bad_alloc);  // overflow keeps q
  EXPECT_THROW(sink = mi_new_realloc(q, impossible_size), std::bad_alloc);
  mi_free(q);
}

TEST(NewDelete, NewHandlerRunsBeforeThrow) {
  handler_calls = 0;
  std::set_new_handler(&counting_handler);
  EXPECT_THROW(sink = mi_new(impossible_size), std::bad_alloc);
  EXPECT_EQ(handler_calls, 1);
  handler_calls = 0;
  std::set_new_handler(&counting_handler);
  EXPECT_EQ(mi_new_nothrow(impossible_size), nullptr);   // the handler gave up
  EXPECT_EQ(handler_calls, 1);
  std::set_new_handler(nullptr);
}

TEST(NewDelete, IsRedirectedIsFalseOnLinux) {
  EXPECT_FALSE(mi_is_redirected());
}
