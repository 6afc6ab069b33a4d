/* ----------------------------------------------------------------------------
  test-posix.cpp -- API tests: the mi_-prefixed posix / Unix / Windows
  convenience functions.
-----------------------------------------------------------------------------*/
#include <gtest/gtest.h>
#include <mimalloc.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "api-util.h"

using namespace mitest;

// ------------------------------------------------------
// mi_cfree: checked free
// ------------------------------------------------------

TEST(Posix, CfreeFreesOwnBlocks) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  std::vector<void*> blocks;
  for (size_t size : std::initializer_list<size_t>{1, 100, 1000, 20000, 300000}) {
    void* p = mi_heap_malloc(h, size);
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
  }
  void* keep = mi_heap_malloc(h, dyn(100));
  ASSERT_NE(keep, nullptr);
  for (void* p : blocks) ASSERT_TRUE(is_live_in(h, p));
  for (void* p : blocks) mi_cfree(p);
  HeapWalk w = walk_heap(h);
  for (void* p : blocks) EXPECT_FALSE(w.contains(p)) << "mi_cfree did not free " << p;
  EXPECT_TRUE(w.contains(keep));
  EXPECT_EQ(w.blocks.size(), 1u);
  mi_cfree(keep);
  mi_cfree(nullptr);
  EXPECT_TRUE(walk_heap(h).blocks.empty());
  mi_heap_delete(h);
}

namespace {
alignas(64) unsigned char g_foreign[8192];
}

TEST(Posix, CfreeIgnoresForeignPointers) {
  // stack and static memory
  alignas(16) unsigned char on_stack[256];
  fill_pattern(on_stack, sizeof(on_stack), 50);
  fill_pattern(g_foreign, sizeof(g_foreign), 51);
  mi_cfree(on_stack);
  mi_cfree(g_foreign);
  mi_cfree(g_foreign + 4096);
  EXPECT_TRUE(has_pattern(on_stack, sizeof(on_stack), 50));
  EXPECT_TRUE(has_pattern(g_foreign, sizeof(g_foreign), 51));
  // memory mapped from the OS directly
  const size_t len = 64 * KiB;
  void* mapped = os_map(len);
  ASSERT_NE(mapped, nullptr);
  fill_pattern(mapped, len, 52);
  mi_cfree(mapped);
  mi_cfree((char*)mapped + 4096);
  EXPECT_TRUE(has_pattern(mapped, len, 52));
  os_unmap(mapped, len);
  // a block of the C library's allocator: still usable and freeable there
  LibcMalloc libc = libc_malloc();
  ASSERT_NE(libc.malloc_fn, nullptr) << "could not look up the C library's malloc";
  void* g = libc.malloc_fn(200);
  ASSERT_NE(g, nullptr);
  fill_pattern(g, 200, 53);
  mi_cfree(g);
  EXPECT_TRUE(has_pattern(g, 200, 53));
  libc.free_fn(g);
  // and our allocator is still fine
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  mi_cfree(p);
}

// ------------------------------------------------------
// _expand, malloc_size, malloc_usable_size
// ------------------------------------------------------

TEST(Posix, UnderscoreExpand) {
  void* p = mi_malloc(dyn(100));
  ASSERT_NE(p, nullptr);
  fill_pattern(p, 100, 54);
  const size_t usable = mi_usable_size(p);
  errno = 0;
  EXPECT_EQ(mi__expand(p, usable), p);
  EXPECT_EQ(mi__expand(p, 10), p);
  errno = 0;
  EXPECT_EQ(mi__expand(p, usable + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(mi__expand(p, dyn(1 * MiB)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(has_pattern(p, 100, 54));
  mi_free(p);
  errno = 0;
  EXPECT_EQ(mi__expand(nullptr, dyn(10)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Posix, MallocSizeAndMallocUsableSize) {
  for (size_t size : std::initializer_list<size_t>{0, 1, 100, 1000, 5000, 100000, 3 * MiB}) {
    void* p = mi_malloc(size);
    ASSERT_NE(p, nullptr);
    EXPECT_GE(mi_malloc_size(p), size);
    EXPECT_EQ(mi_malloc_size(p), mi_usable_size(p));
    EXPECT_EQ(mi_malloc_usable_size(p), mi_usable_size(p));
    mi_free(p);
  }
  void* a = mi_malloc_aligned(dyn(100), dyn(256));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(mi_malloc_size(a), mi_usable_size(a));
  EXPECT_EQ(mi_malloc_usable_size(a), mi_usable_size(a));
  mi_free(a);
  EXPECT_EQ(mi_malloc_size(nullptr), 0u);
  EXPECT_EQ(mi_malloc_usable_size(nullptr), 0u);
}

// ------------------------------------------------------
// posix_memalign / memalign / valloc / pvalloc / aligned_alloc
// ------------------------------------------------------

TEST(Posix, PosixMemalignSucceeds) {
  for (size_t alignment = sizeof(void*); alignment <= 16 * MiB; alignment *= 2) {
    for (size_t size : {(size_t)1, (size_t)100, alignment}) {
      void* p = nullptr;
      EXPECT_EQ(mi_posix_memalign(&p, dyn(alignment), size), 0) << alignment;
      ASSERT_NE(p, nullptr) << alignment;
      EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
      EXPECT_GE(mi_usable_size(p), size);
      fill_bytes(p, 0x3C, size);
      mi_free(p);
    }
  }
  void* z = nullptr;
  EXPECT_EQ(mi_posix_memalign(&z, 16, dyn(0)), 0);
  mi_free(z);
}

TEST(Posix, PosixMemalignRejectsBadArguments) {
  void* const sentinel = (void*)&g_foreign[0];
  for (size_t bad : {(size_t)0, (size_t)1, (size_t)2, (size_t)4, (size_t)3, (size_t)12, (size_t)24, (size_t)48,
                     (size_t)4097, SIZE_MAX}) {
    void* p = sentinel;
    EXPECT_EQ(mi_posix_memalign(&p, dyn(bad), 64), EINVAL) << "alignment " << bad;
    EXPECT_EQ(p, sentinel) << "*p modified on error, alignment " << bad;
  }
  EXPECT_EQ(mi_posix_memalign(opaque<void*>(nullptr), 16, 64), EINVAL);
  // allocation failure
  void* p = sentinel;
  EXPECT_EQ(mi_posix_memalign(&p, 64, impossible_size()), ENOMEM);
  EXPECT_EQ(p, sentinel) << "*p modified on error";
  p = sentinel;
  EXPECT_NE(mi_posix_memalign(&p, 64, too_large_size()), 0);
  EXPECT_EQ(p, sentinel) << "*p modified on error";
}

TEST(Posix, Memalign) {
  for (size_t alignment = 1; alignment <= 16 * MiB; alignment *= 2) {
    void* p = mi_memalign(dyn(alignment), 200);
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
    EXPECT_GE(mi_usable_size(p), 200u);
    fill_bytes(p, 0x4D, mi_usable_size(p));
    mi_free(p);
  }
  errno = 0;
  EXPECT_EQ(mi_memalign(dyn(48), 64), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(Posix, Valloc) {
  const size_t page = os_page_size();
  for (size_t size : std::initializer_list<size_t>{0, 1, 100, 4096, 5000, 1 * MiB, 3 * MiB}) {
    void* p = mi_valloc(size);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_TRUE(is_aligned(p, page)) << size;
    EXPECT_GE(mi_usable_size(p), size);
    fill_bytes(p, 0x56, size);
    mi_free(p);
  }
  errno = 0;
  EXPECT_EQ(mi_valloc(impossible_size()), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Posix, Pvalloc) {
  const size_t page = os_page_size();
  for (size_t size : std::initializer_list<size_t>{1, 100, 4095, 4096, 4097, 10000, 1 * MiB + 1, 3 * MiB}) {
    void* p = mi_pvalloc(size);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_TRUE(is_aligned(p, page)) << size;
    const size_t rounded = (size + page - 1) / page * page;
    EXPECT_GE(mi_usable_size(p), rounded) << "size not rounded up to whole pages: " << size;
    fill_bytes(p, 0x50, rounded);  // the whole rounded size is usable
    mi_free(p);
  }
  void* z = mi_pvalloc(dyn(0));
  ASSERT_NE(z, nullptr);
  EXPECT_TRUE(is_aligned(z, page));
  mi_free(z);
  // rounding up overflows
  EXPECT_EQ(mi_pvalloc(dyn(SIZE_MAX - 10)), nullptr);
}

TEST(Posix, AlignedAlloc) {
  for (size_t alignment = 1; alignment <= 16 * MiB; alignment *= 2) {
    const size_t size = alignment < 64 ? 64 : alignment;  // a multiple of the alignment
    void* p = mi_aligned_alloc(dyn(alignment), size);
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_TRUE(is_aligned(p, alignment)) << alignment;
    EXPECT_GE(mi_usable_size(p), size);
    fill_bytes(p, 0x41, size);
    mi_free(p);
  }
  // 1.6 behaviour (C11 strict): the size must be a multiple of the alignment
  EXPECT_EQ(mi_aligned_alloc(dyn(64), dyn(100)), nullptr);
  EXPECT_EQ(mi_aligned_alloc(dyn(4096), dyn(4097)), nullptr);
  // the alignment must be a power of two
  EXPECT_EQ(mi_aligned_alloc(dyn(0), dyn(64)), nullptr);
  EXPECT_EQ(mi_aligned_alloc(dyn(24), dyn(48)), nullptr);
}

// ------------------------------------------------------
// reallocarray and the Microsoft recalloc variants
// ------------------------------------------------------

TEST(Posix, Reallocarray) {
  void* p = mi_reallocarray(nullptr, dyn(10), dyn(10));
  ASSERT_NE(p, nullptr);
  EXPECT_GE(mi_usable_size(p), 100u);
  fill_pattern(p, 100, 55);
  p = mi_reallocarray(p, dyn(1000), dyn(10));
  ASSERT_NE(p, nullptr);
  EXPECT_GE(mi_usable_size(p), 10000u);
  EXPECT_TRUE(has_pattern(p, 100, 55));
  // overflow: NULL, errno ENOMEM, block untouched
  errno = 0;
  EXPECT_EQ(mi_reallocarray(p, dyn(SIZE_MAX / 2), dyn(3)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(has_pattern(p, 100, 55));
  // failure to allocate: ENOMEM as well
  errno = 0;
  EXPECT_EQ(mi_reallocarray(p, dyn(1), impossible_size()), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_TRUE(has_pattern(p, 100, 55));
  p = mi_reallocarray(p, dyn(5), dyn(10));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(has_pattern(p, 50, 55));
  mi_free(p);
}

TEST(Posix, AlignedRecalloc) {
  void* p = mi_aligned_recalloc(nullptr, dyn(10), dyn(10), dyn(64));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(p, 64));
  EXPECT_TRUE(is_zero(p, 100));
  fill_pattern(p, 100, 56);
  dirty_size_class(20000, 32);
  p = mi_aligned_recalloc(p, dyn(200), dyn(100), dyn(64));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(p, 64));
  EXPECT_TRUE(has_pattern(p, 100, 56));
  EXPECT_TRUE(is_zero((uint8_t*)p + 100, 20000 - 100));
  errno = 0;
  EXPECT_EQ(mi_aligned_recalloc(p, dyn(SIZE_MAX / 2), dyn(3), dyn(64)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  EXPECT_TRUE(has_pattern(p, 100, 56));
  mi_free(p);
}

TEST(Posix, AlignedOffsetRecalloc) {
  void* p = mi_aligned_offset_recalloc(nullptr, dyn(10), dyn(10), dyn(128), dyn(16));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(((uintptr_t)opaque(p) + 16) % 128, 0u);
  EXPECT_TRUE(is_zero(p, 100));
  fill_pattern(p, 100, 57);
  dirty_size_class(20000, 32);
  p = mi_aligned_offset_recalloc(p, dyn(100), dyn(200), dyn(128), dyn(16));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(((uintptr_t)opaque(p) + 16) % 128, 0u);
  EXPECT_TRUE(has_pattern(p, 100, 57));
  EXPECT_TRUE(is_zero((uint8_t*)p + 100, 20000 - 100));
  errno = 0;
  EXPECT_EQ(mi_aligned_offset_recalloc(p, dyn(SIZE_MAX / 2), dyn(3), dyn(128), dyn(16)), nullptr);
  EXPECT_EQ(errno, EOVERFLOW);
  EXPECT_TRUE(has_pattern(p, 100, 57));
  mi_free(p);
}

// ------------------------------------------------------
// String duplication and environment
// ------------------------------------------------------

TEST(Posix, Wcsdup) {
  const unsigned short s[] = {'h', 'i', 0x263A, 0xFFFF, 0x0100, 0};
  unsigned short* d = mi_wcsdup(s);
  ASSERT_NE(d, nullptr);
  EXPECT_NE((const void*)d, (const void*)s);
  EXPECT_GE(mi_usable_size(d), sizeof(s));
  EXPECT_EQ(memcmp(d, s, sizeof(s)), 0);
  mi_free(d);
  const unsigned short empty[] = {0};
  unsigned short* e = mi_wcsdup(empty);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e[0], 0);
  mi_free(e);
  EXPECT_EQ(mi_wcsdup(opaque<const unsigned short>(nullptr)), nullptr);
}

TEST(Posix, Mbsdup) {
  const unsigned char s[] = {'m', 'b', 0xC3, 0xA9, 's', 0};
  unsigned char* d = mi_mbsdup(s);
  ASSERT_NE(d, nullptr);
  EXPECT_NE((const void*)d, (const void*)s);
  EXPECT_EQ(memcmp(d, s, sizeof(s)), 0);
  mi_free(d);
  EXPECT_EQ(mi_mbsdup(opaque<const unsigned char>(nullptr)), nullptr);
}

TEST(Posix, DupenvS) {
  const char* name = "MIMALLOC_TEST_API_DUPENV";
  ASSERT_TRUE(os_setenv(name, "some value = 42"));
  char* buf = nullptr;
  size_t size = 12345;
  EXPECT_EQ(mi_dupenv_s(&buf, &size, name), 0);
  ASSERT_NE(buf, nullptr);
  EXPECT_STREQ(buf, "some value = 42");
  EXPECT_EQ(size, strlen("some value = 42"));
  EXPECT_NE((const void*)buf, (const void*)getenv(name));  // a copy
  EXPECT_TRUE(mi_check_owned(buf));
  mi_free(buf);
  // size may be NULL
  buf = nullptr;
  EXPECT_EQ(mi_dupenv_s(&buf, nullptr, name), 0);
  ASSERT_NE(buf, nullptr);
  EXPECT_STREQ(buf, "some value = 42");
  mi_free(buf);
  // absent variable: *buf = NULL, returns 0
  ASSERT_TRUE(os_unsetenv(name));
  buf = (char*)g_foreign;
  EXPECT_EQ(mi_dupenv_s(&buf, &size, name), 0);
  EXPECT_EQ(buf, nullptr);
  // bad arguments
  EXPECT_EQ(mi_dupenv_s(opaque<char*>(nullptr), &size, name), EINVAL);
  EXPECT_EQ(mi_dupenv_s(&buf, &size, opaque<const char>(nullptr)), EINVAL);
}

// The wide-character environment exists on Windows only: there mi_wdupenv_s
// copies a variable as mi_dupenv_s does (as mimalloc 1.6 does with
// _wgetenv); elsewhere it fails with EINVAL and sets *buf to NULL.
TEST(Posix, WdupenvS) {
  const unsigned short name[] = {'M', 'I', 'M', 'A', 'L', 'L', 'O', 'C', '_', 'T', 'E', 'S',
                                 'T', '_', 'W', 'D', 'U', 'P', 'E', 'N', 'V', 0};   // MIMALLOC_TEST_WDUPENV
  const unsigned short value[] = {'w', 'i', 'd', 'e', ' ', '4', '2', 0};
  ASSERT_TRUE(os_setenv("MIMALLOC_TEST_WDUPENV", "wide 42"));
  unsigned short* buf = (unsigned short*)g_foreign;
  size_t size = 77;
  const int err = mi_wdupenv_s(&buf, &size, name);
  if (!kWideEnvironment) {
    EXPECT_EQ(err, EINVAL);
    EXPECT_EQ(buf, nullptr);
  }
  else {
    EXPECT_EQ(err, 0);
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(memcmp(buf, value, sizeof(value)), 0);
    EXPECT_EQ(size, sizeof(value) / sizeof(value[0]) - 1);   // in characters, without the terminator
    EXPECT_TRUE(mi_check_owned(buf));
    mi_free(buf);
    // absent variable: *buf = NULL, returns 0
    ASSERT_TRUE(os_unsetenv("MIMALLOC_TEST_WDUPENV"));
    buf = (unsigned short*)g_foreign;
    EXPECT_EQ(mi_wdupenv_s(&buf, &size, name), 0);
    EXPECT_EQ(buf, nullptr);
  }
  os_unsetenv("MIMALLOC_TEST_WDUPENV");
  // bad arguments, everywhere
  EXPECT_EQ(mi_wdupenv_s(opaque<unsigned short*>(nullptr), &size, name), EINVAL);
  EXPECT_EQ(mi_wdupenv_s(&buf, &size, opaque<const unsigned short>(nullptr)), EINVAL);
}

// ------------------------------------------------------
// Sized / aligned free
// ------------------------------------------------------

TEST(Posix, FreeSizeAndAlignedFreeRelease) {
  mi_heap_t* h = mi_heap_new();
  ASSERT_NE(h, nullptr);
  void* a = mi_heap_malloc(h, dyn(100));
  void* b = mi_heap_malloc(h, dyn(3000));
  void* c = mi_heap_malloc_aligned(h, dyn(100), dyn(128));
  void* d = mi_heap_malloc_aligned(h, dyn(300), dyn(4096));
  void* e = mi_heap_malloc(h, dyn(200));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  ASSERT_NE(d, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(walk_heap(h).blocks.size(), 5u);
  mi_free_size(a, 100);
  mi_free_size(b, 3000);
  mi_free_size_aligned(c, 100, 128);
  mi_free_aligned(d, 4096);
  HeapWalk w = walk_heap(h);
  EXPECT_EQ(w.blocks.size(), 1u);
  EXPECT_TRUE(w.contains(e));
  mi_free_aligned(e, 8);
  EXPECT_TRUE(walk_heap(h).blocks.empty());
  mi_free_size(nullptr, 0);
  mi_free_aligned(nullptr, 16);
  mi_free_size_aligned(nullptr, 0, 16);
  mi_heap_delete(h);
}
