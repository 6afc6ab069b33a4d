/* ----------------------------------------------------------------------------
  spawn.c -- run one command and report its time, peak resident set and
  minor page faults.

  The runner (bench/run.py) starts every measured program through this
  helper instead of directly, because Linux carries the peak RSS of a process
  across exec: a program forked from the Python runner starts with the
  runner's own peak (tens of MiB) as its ru_maxrss. This helper is small, so
  the program it forks and execs reports its own peak. It also sets
  LD_PRELOAD for the program only (the helper itself runs on glibc's malloc).

  usage: spawn RESULT-FILE PRELOAD command [args...]
         (PRELOAD "-" or "" for none)
  writes to RESULT-FILE one line:
      wall_s user_s sys_s maxrss_kib minflt wait_status
  (minflt: minor page faults, ru_minflt: pages the kernel had to map in,
  most of them memory touched for the first time since it came from the OS)
  and exits with the program's exit code (128 + signal if it was killed).
-----------------------------------------------------------------------------*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: spawn RESULT-FILE PRELOAD command [args...]\n");
    return 2;
  }
  const char* preload = argv[2];
  const double start = now();
  const pid_t pid = fork();
  if (pid < 0) { perror("spawn: fork"); return 2; }
  if (pid == 0) {
    if (preload[0] != 0 && strcmp(preload, "-") != 0) setenv("LD_PRELOAD", preload, 1);
    else unsetenv("LD_PRELOAD");
    execvp(argv[3], argv + 3);
    perror("spawn: exec");
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) { perror("spawn: wait4"); return 2; }
  const double wall = now() - start;
  FILE* f = fopen(argv[1], "w");
  if (f == NULL) { perror("spawn: result file"); return 2; }
  fprintf(f, "%.6f %.6f %.6f %ld %ld %d\n", wall,
          (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec,
          (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec, ru.ru_maxrss, ru.ru_minflt,
          status);
  fclose(f);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
