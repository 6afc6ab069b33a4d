#!/usr/bin/env python3
"""lock-stats.py -- how often the shared lock is taken, and for how long.

For each revision named, build a counting copy of the library and run the
workloads that take the shared lock most, interleaved, several times; print
one table row per workload and revision (medians):

    python3 tools/lock-stats.py [--runs 3] [--bench DIR] REV [REV ...]

REV is anything `git worktree add` takes (a commit, a branch, HEAD); the
word `tree` stands for the working tree as it is. --bench is a build folder
of the benchmarks (bench/run.py leaves one in OUT/build; default: build one
in /tmp/lock-stats/bench).

The counting copy: src/segment-shared.c (segment.c before 2026-11-29) gets a few lines (not in the tree,
they would cost the lock): the time from acquisition to release read with
clock_gettime (its own cost, measured at start, subtracted), summed into
process-wide atomics with the number of holds, the holds over 10 us and
their time, and the acquisitions that found the lock taken; since the
shared segments are kept in pools (one lock per processor, 2026-11-29), also
the busy time of each pool's lock. The library prints them at exit when
MI_LOCKSTATS is set.

Columns: holds; busy ms (the sum of holds, every lock); holds over 10 us
and their ms; contended (the first compare-and-swap failed); wall and CPU
seconds (/usr/bin/time, user + system); the mean hold; locks (the pools
here: 1 before the pools); imbalance f (the busiest lock's busy time over
the mean lock's); U2 = f x busy / locks / wall, the busiest lock's
utilisation here; U16 = 16 x f x (busy / CPU) / P16, the busiest lock's
utilisation if 16 cores each ran the workload's per-core rate in one
process, where P16 is the locks there (16 pools: one per processor; 1
before the pools). Optimistic: holds grow with cache-line transfers at 16
cores, and waits as U / (1 - U).
"""
import argparse, os, re, shutil, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = "/tmp/lock-stats"
WORKLOADS = [("xstress", ["32", "50", "10"]), ("churn", ["32"]), ("glibc-simple", []),
             ("larson", ["2"]), ("threadchurn", ["8"]), ("mstress", ["4"])]

COUNTERS = r'''#include <stdio.h>
#include <time.h>
static _Atomic(uint64_t) ls_count, ls_sum, ls_long, ls_long_sum, ls_cont;
static _Atomic(uint64_t) ls_pool_sum[64];
static mi_decl_thread uint64_t ls_t0;
static mi_decl_thread size_t ls_pool;
static uint64_t ls_cost;
static uint64_t ls_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec; }
__attribute__((constructor)) static void ls_init(void) {
  const uint64_t a = ls_ns();
  for (int i = 0; i < 1000; i++) (void)ls_ns();
  ls_cost = (ls_ns() - a) / 1001;
}
__attribute__((destructor)) static void ls_done(void) {
  if (getenv("MI_LOCKSTATS") == NULL) return;
  uint64_t busiest = 0, pools = 0;
  for (size_t i = 0; i < 64; i++) { if (ls_pool_sum[i] > busiest) busiest = ls_pool_sum[i]; if (ls_pool_sum[i] != 0) pools = i + 1; }
  fprintf(stderr, "LOCKSTATS count=%llu busy_ns=%llu long=%llu long_ns=%llu contended=%llu busiest_ns=%llu pools=%llu\n",
          (unsigned long long)ls_count, (unsigned long long)ls_sum, (unsigned long long)ls_long,
          (unsigned long long)ls_long_sum, (unsigned long long)ls_cont, (unsigned long long)busiest,
          (unsigned long long)pools);
}
static void ls_hold_end(void) {
  const uint64_t e = ls_ns();
  const uint64_t d = (e > ls_t0 + ls_cost ? e - ls_t0 - ls_cost : 0);
  ls_count++; ls_sum += d; ls_pool_sum[ls_pool & 63] += d;
  if (d > 10000) { ls_long++; ls_long_sum += d; }
}
'''


def patch(src_dir):
    # (the file of the lock: segment-shared.c, segment.c before the split)
    path = os.path.join(src_dir, "src", "segment-shared.c")
    if not os.path.exists(path):
        path = os.path.join(src_dir, "src", "segment.c")
    s = open(path).read()
    pooled = "mi_shared_pool_t* pool" in s
    if pooled:   # (one lock per pool)
        acquire = "if (mi_atomic_cas_strong_acq_rel(&pool->lock, &expected, tid)) break;"
        counted = ("if (mi_atomic_cas_strong_acq_rel(&pool->lock, &expected, tid)) "
                   "{ if (round > 0) ls_cont++; ls_t0 = ls_ns(); ls_pool = (size_t)(pool - mi_shared_pools); break; }")
        release = ("static void mi_shared_lock_let_go(mi_shared_pool_t* pool) {\n" if "mi_shared_lock_let_go" in s
                   else "static void mi_shared_release(mi_shared_pool_t* pool) {\n")
    else:        # (one lock)
        acquire = "if (mi_atomic_cas_strong_acq_rel(&mi_shared_lock, &expected, tid)) return true;"
        counted = ("if (mi_atomic_cas_strong_acq_rel(&mi_shared_lock, &expected, tid)) "
                   "{ if (round > 0) ls_cont++; ls_t0 = ls_ns(); return true; }")
        release = "static void mi_shared_release(void) {\n"
    if acquire not in s or release not in s:
        sys.exit("lock-stats: %s: the lock's acquire or release is not where this script expects it" % path)
    s = s.replace('#include "prim/prim.h"\n', '#include "prim/prim.h"\n' + COUNTERS, 1)
    s = s.replace(acquire, counted, 1)
    s = s.replace(release, release + "  ls_hold_end();\n", 1)
    open(path, "w").write(s)
    return pooled


def build(rev, name):
    src = os.path.join(WORK, name)
    if os.path.exists(src):
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", src], stderr=subprocess.DEVNULL)
        shutil.rmtree(src, ignore_errors=True)
    if rev == "tree":
        os.makedirs(src)
        for item in ("CMakeLists.txt", "cmake", "include", "src"):
            (shutil.copytree if os.path.isdir(os.path.join(ROOT, item)) else shutil.copy)(
                os.path.join(ROOT, item), os.path.join(src, item))
    else:
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-f", src, rev], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pooled = patch(src)
    out = os.path.join(src, "build")
    subprocess.run(["cmake", "-S", src, "-B", out, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DMI_BUILD_TESTS=OFF", "-DMI_BUILD_BENCH=OFF"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", out, "--target", "mimalloc"], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, "libmimalloc.so"), pooled


def bench_dir(given):
    if given:
        return given
    out = os.path.join(WORK, "bench")
    subprocess.run(["cmake", "-S", ROOT, "-B", out, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DMI_BUILD_TESTS=OFF", "-DMI_BUILD_BENCH=ON"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", out], check=True, stdout=subprocess.DEVNULL)
    return out


def run_one(lib, binary, args):
    env = dict(os.environ, MI_LOCKSTATS="1")
    # /usr/bin/time measures the workload; only the workload gets the library
    cmd = ["/usr/bin/time", "-f", "TIME %e %U %S", "env", "LD_PRELOAD=" + lib, binary] + args
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    m = re.search(r"LOCKSTATS count=(\d+) busy_ns=(\d+) long=(\d+) long_ns=(\d+) contended=(\d+) "
                  r"busiest_ns=(\d+) pools=(\d+)", p.stderr)
    t = re.search(r"TIME ([\d.]+) ([\d.]+) ([\d.]+)", p.stderr)
    if not m or not t:
        sys.exit("lock-stats: no figures from %s:\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    return [int(x) for x in m.groups()] + [float(t.group(1)), float(t.group(2)) + float(t.group(3))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("revs", nargs="+")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bench", help="a build folder of the benchmarks")
    a = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    built = [build(rev, "rev%d" % i) for i, rev in enumerate(a.revs)]
    libs = [(rev, lib) for rev, (lib, _) in zip(a.revs, built)]
    pooled = {rev: p for rev, (_, p) in zip(a.revs, built)}
    bdir = bench_dir(a.bench)
    print("| workload | revision | holds | busy ms | holds > 10 us | their ms | contended | wall s | CPU s "
          "| mean hold ns | locks | f | U2 | U16 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, args in WORKLOADS:
        binary = os.path.join(bdir, "bench", "mimalloc-bench-" + name)
        results = {rev: [] for rev, _ in libs}
        for _ in range(a.runs):
            for rev, lib in libs:   # (interleaved: a change in the machine's load hits every revision alike)
                results[rev].append(run_one(lib, binary, args))
        for rev, _ in libs:
            rows = results[rev]
            med = lambda i: statistics.median(r[i] for r in rows)
            holds, busy, lng, lng_ns, cont = (med(i) for i in range(5))
            wall, cpu = med(7), med(8)
            locks = max(1, round(med(6)))
            # the busiest lock's share, over the mean lock's (each run's own ratio, then the median)
            f = statistics.median((r[5] * max(1, r[6]) / r[1]) if r[1] > 0 else 1.0 for r in rows)
            p16 = 16 if pooled[rev] else 1
            print("| %s %s | %s | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f | %.2f | %.0f | %d | %.2f | %.3f | %.2f |" % (
                name, " ".join(args), rev, holds, busy / 1e6, lng, lng_ns / 1e6, cont, wall, cpu,
                busy / max(holds, 1), locks, f, f * busy / locks / 1e9 / wall, 16 * f * busy / 1e9 / cpu / p16))
        sys.stdout.flush()
    # (the revisions' checkouts go: git would list them as worktrees of the repository)
    for i, (rev, _) in enumerate(libs):
        src = os.path.join(WORK, "rev%d" % i)
        if rev != "tree":
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", src], stderr=subprocess.DEVNULL)
        shutil.rmtree(src, ignore_errors=True)


if __name__ == "__main__":
    main()
