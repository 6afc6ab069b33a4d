/* ----------------------------------------------------------------------------
  statm.h -- the process's virtual and resident size from /proc/self/statm,
  read without stdio (fopen would allocate, possibly from the allocator under
  test). For the C tests that measure what goes back to the OS.
-----------------------------------------------------------------------------*/
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

// Both in bytes; false without /proc/self/statm.
static inline bool statm_read(size_t* vsize, size_t* rss) {
  char buf[256];
  const int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return false;
  ssize_t n;
  do { n = read(fd, buf, sizeof(buf) - 1); } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
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
