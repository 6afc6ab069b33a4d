/* ----------------------------------------------------------------------------
  procfile.h -- a whole /proc (or /sys) file into a caller's buffer, read
  without stdio (fopen would allocate, possibly from the allocator under
  test). For the C tests that look at smaps, numa_maps and kernel settings.
-----------------------------------------------------------------------------*/
#pragma once

#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

// The file's bytes (at most size - 1), NUL-terminated; 0 if it cannot be read.
static inline size_t proc_read_file(const char* path, char* buf, size_t size) {
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  size_t len = 0;
  ssize_t n;
  while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0) len += (size_t)n;
  close(fd);
  buf[len] = 0;
  return len;
}
