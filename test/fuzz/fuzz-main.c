/* ----------------------------------------------------------------------------
  fuzz-main.c -- run the fuzz target on files, without libFuzzer.

  Usage: mimalloc-fuzz-replay FILE|DIR...  (every regular file in a DIR)

  So the seed corpus (test/fuzz/corpus) runs as an ordinary test in every
  build variant, with any compiler, and a crash found by libFuzzer can be
  replayed in a debugger.
-----------------------------------------------------------------------------*/
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static unsigned long files;

static int run_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) { perror(path); return 1; }
  uint8_t* buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = (cap == 0 ? 4096 : 2 * cap);
      uint8_t* nbuf = (uint8_t*)realloc(buf, cap);
      if (nbuf == NULL) { fprintf(stderr, "%s: out of memory\n", path); fclose(f); free(buf); return 1; }
      buf = nbuf;
    }
    const size_t n = fread(buf + len, 1, cap - len, f);
    if (n == 0) break;
    len += n;
  }
  const int err = ferror(f);
  fclose(f);
  if (err) { fprintf(stderr, "%s: read error\n", path); free(buf); return 1; }
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  files++;
  return 0;
}

static int run_path(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) { perror(path); return 1; }
  if (!S_ISDIR(st.st_mode)) return run_file(path);
  DIR* dir = opendir(path);
  if (dir == NULL) { perror(path); return 1; }
  int rc = 0;
  struct dirent* e;
  while (rc == 0 && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char sub[4096];
    snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
    rc = run_path(sub);
  }
  closedir(dir);
  return rc;
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]); return 2; }
  for (int i = 1; i < argc; i++) {
    if (run_path(argv[i]) != 0) return 1;
  }
  if (files == 0) { fprintf(stderr, "%s: no input files\n", argv[0]); return 1; }
  printf("mimalloc-fuzz-replay: OK: %lu inputs\n", files);
  return 0;
}
