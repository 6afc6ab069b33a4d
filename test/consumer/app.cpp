// ----------------------------------------------------------------------------
// app.cpp -- a C++ consumer that includes mimalloc-new-delete.h and links the
// static library (or the object file): it must link (the library's C++
// operators give way to the header's) and new/delete must be mimalloc's.
// ----------------------------------------------------------------------------
#include <mimalloc-new-delete.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

int main() {
  int failures = 0;
  auto* v = new std::vector<int>(1000, 7);
  if (!mi_is_in_heap_region(v) || !mi_is_in_heap_region(v->data())) failures++;
  delete v;
  std::map<int, std::string> m;
  for (int i = 0; i < 100; i++) m[i] = std::string(100, 'x');
  if (!mi_is_in_heap_region(m[50].data())) failures++;
  int* a = new int[10];
  if (!mi_is_in_heap_region(a)) failures++;
  delete[] a;
  std::puts(failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
