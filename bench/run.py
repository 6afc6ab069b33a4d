#!/usr/bin/python3
"""Run the benchmark suite: every workload under every allocator, interleaved.

    bench/run.py [OUT] [--quick] [--rounds N] [--only W,...] [--allocators A,...]
                 [--lib PATH] [--secure-lib PATH] [--baseline-lib PATH]
                 [--no-instr] [--instr-only] [--no-madvise] [--syscalls]

Steps (see bench/README.md for the workloads and the figures):
 1. make sure the comparison allocators are installed (Debian packages; with
    apt-get when running as root), and valgrind and matplotlib;
 2. build our library (Release) and the workloads with CMake in OUT/build
    (a secure build in OUT/build-secure once the project has MI_SECURE);
    --secure-lib and --baseline-lib add columns preloading other builds of ours;
 3. check with a probe program that each preload really serves malloc;
 4. run every workload under every allocator through LD_PRELOAD (glibc with
    no preload), in `rounds` rounds, each round in a rotated allocator order,
    recording wall, user and system time, peak RSS and minor page faults
    (wait4's rusage);
 5. run every workload once more under every allocator, untimed, under
    strace (madvise, mmap and munmap only), to count the madvise calls and
    the bytes they give back (thread stacks, which glibc madvises when a
    thread ends, counted apart);
 6. print and write the tables of medians normalised to ours (wall time, RSS,
    CPU time, system time, page faults; madvise calls and bytes from step 5)
    with a geometric-mean row, a table per workload with all of them, the
    raw CSV and bar charts;
 7. count instructions per malloc+free pair with callgrind (exact counts).

With --syscalls, steps 4-6 are replaced by one run of each workload under
each allocator under `strace -f -c`, and a table of the calls to madvise,
mmap, munmap, mprotect and brk and of all system calls (syscalls.md).

Output goes to OUT (default: out/bench in the repository): results.csv,
madvise.csv, summary.md, time.png, rss.png, faults.png, instructions.csv,
env.txt, strace/ (the madvise traces), logs/ (failures); with --syscalls:
syscalls.md, syscalls.csv, strace/.
Uses only the standard library, and Debian's python3-matplotlib for the charts.
"""

import argparse
import csv
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NCPU = os.cpu_count() or 1


def multiarch_libdir():
    machine = platform.machine()
    arch = {"x86_64": "x86_64", "aarch64": "aarch64"}.get(machine, machine)
    return "/usr/lib/%s-linux-gnu" % arch


LIBDIR = multiarch_libdir()

# ---------------------------------------------------------------------------
# Allocators: name, library to preload (None: no preload), Debian package,
# what the probe must report as malloc's library. "ours" gets its library
# from the build (or --lib). A library given as "--OPTION" is another build of
# ours, preloaded like ours from the path given with that option; the column
# is added when the option is given (see lib_option).
# ---------------------------------------------------------------------------

ALLOCATORS = [
    ("ours", "BUILD", None, "libmimalloc.so"),
    # An earlier build of ours, to compare the current build with side by side.
    ("before", "--baseline-lib", None, "libmimalloc"),
    # Hook: secure mode. The runner also adds this column without --secure-lib
    # when the project's CMakeLists.txt has the MI_SECURE option (it then
    # builds OUT/build-secure with -DMI_SECURE=ON).
    ("ours-secure", "--secure-lib", None, "libmimalloc"),
    ("glibc", None, None, "libc.so"),
    ("jemalloc", LIBDIR + "/libjemalloc.so.2", "libjemalloc2", "libjemalloc"),
    ("tcmalloc", LIBDIR + "/libtcmalloc_minimal.so.4", "libtcmalloc-minimal4", "libtcmalloc"),
    ("mimalloc2", LIBDIR + "/libmimalloc.so.2", "libmimalloc2.0", "libmimalloc.so.2"),
    ("tbbmalloc", LIBDIR + "/libtbbmalloc_proxy.so.2", "libtbbmalloc2", "libtbbmalloc_proxy"),
    # LLVM's hardened allocator (Android's): the peer of our secure builds.
    ("scudo", "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.scudo_standalone-%s.so" % platform.machine(),
     "libclang-rt-14-dev", "libclang_rt.scudo_standalone"),
]

# ---------------------------------------------------------------------------
# Workloads: table name, program (bench/<program>.c or .cpp), arguments of a
# full run, arguments of a quick run. N = the number of cores. A full run
# takes 0.5-3 s under ours on a 2-core machine; a quick one about a sixth.
# ---------------------------------------------------------------------------

N = str(NCPU)
HALF = str(max(1, NCPU // 2))

WORKLOADS = [
    ("cfrac", "cfrac", [], ["20"]),
    ("espresso", "espresso", [], ["50"]),
    ("stl", "stl", [], ["7"]),
    ("larsonN", "larson", [N], [N, "40"]),
    ("xmallocN", "xmalloc", [HALF, HALF], [HALF, HALF, "6000000"]),
    ("mstressN", "mstress", [str(2 * NCPU)], [str(2 * NCPU), "5"]),
    ("rptestN", "rptest", [N], [N, "1000"]),
    ("alloc-test1", "alloctest", ["1"], ["1", "4000000"]),
    ("alloc-testN", "alloctest", [N], [N, "4000000"]),
    ("cache-scratchN", "cache-scratch", [N], [N, "80"]),
    ("cache-thrashN", "cache-thrash", [N], [N, "80"]),
    ("sh6benchN", "sh6bench", [N], [N, "1300"]),
    ("sh8benchN", "sh6bench", [N, "-", "-", "-", "1"], [N, "1300", "-", "-", "1"]),
    ("largeN", "large", [N], [N, "200"]),
    ("glibc-simple", "glibc-simple", [], ["250000"]),
    ("glibc-threadN", "glibc-thread", [N], [N, "8000000"]),
    ("churnN", "churn", [str(16 * NCPU)], [str(16 * NCPU), "25"]),
    ("bigblocks", "bigblocks", [], ["60"]),
    ("prodcons", "prodcons", [], ["3000000"]),
    ("batch", "batch", [], ["100"]),
    ("serverN", "server", [N], [N, "250000"]),
    ("kvserver", "kvserver", [], ["50000"]),
    ("threadchurnN", "threadchurn", [str(4 * NCPU)], [str(4 * NCPU), "50"]),
    ("threadchurn2", "threadchurn", ["2", "200", "2", "20000"], ["2", "50", "2", "20000"]),
    ("xstressN", "xstress", ["32", "50", "10"], ["32", "20", "5"]),
]

INSTR_SIZES = [16, 64, 256, 1024, 4096]
INSTR_SIZES_QUICK = [16, 256, 4096]


def log(msg):
    print(msg, flush=True)


def binary(build, program):
    return os.path.join(build, "bench", "mimalloc-bench-" + program)


# ---------------------------------------------------------------------------
# 1. Prerequisites
# ---------------------------------------------------------------------------

def apt_install(packages):
    """Install Debian packages when we are root; True if apt-get succeeded."""
    if not packages:
        return True
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        log("  not root (or no apt-get): install them yourself: apt-get install -y " + " ".join(packages))
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q"] + packages
    log("  " + " ".join(cmd))
    if subprocess.call(cmd, env=env, stdout=subprocess.DEVNULL) == 0:
        return True
    log("  apt-get install failed; trying apt-get update first")
    subprocess.call(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
    return subprocess.call(cmd, env=env, stdout=subprocess.DEVNULL) == 0


def ensure_prerequisites(args):
    missing = []
    for name, lib, package, _ in ALLOCATORS:
        if package and name in args.allocators and not os.path.exists(lib):
            missing.append(package)
    if args.instr and shutil.which("valgrind") is None:
        missing.append("valgrind")
    if (args.syscalls or args.madvise) and shutil.which("strace") is None:
        missing.append("strace")
    if args.plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            missing.append("python3-matplotlib")
    if missing:
        log("missing: " + " ".join(missing))
        apt_install(missing)
    for name, lib, package, _ in ALLOCATORS:
        if package and name in args.allocators and not os.path.exists(lib):
            log("  %s: %s not found, left out" % (name, lib))
            args.allocators.remove(name)
    if args.instr and shutil.which("valgrind") is None:
        log("  valgrind not found: no instruction counts")
        args.instr = False
    if args.syscalls and shutil.which("strace") is None:
        sys.exit("strace not found: no system call counts (apt-get install strace)")
    if args.madvise and shutil.which("strace") is None:
        log("  strace not found: no madvise counts")
        args.madvise = False


# ---------------------------------------------------------------------------
# 2. Build
# ---------------------------------------------------------------------------

def cmake_build(build, extra, targets):
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release"] + generator + extra
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        log("  " + " ".join(configure))
    if subprocess.call(configure, stdout=subprocess.DEVNULL) != 0:
        sys.exit("cmake configure failed: " + " ".join(configure))
    cmd = ["cmake", "--build", build, "--parallel", str(NCPU), "--target"] + targets
    log("  " + " ".join(cmd))
    if subprocess.call(cmd, stdout=subprocess.DEVNULL) != 0:
        sys.exit("build failed: " + " ".join(cmd))


def lib_option(lib):
    """The args attribute of a "--OPTION" library in ALLOCATORS, or None."""
    return lib[2:].replace("-", "_") if lib and lib.startswith("--") else None


def has_secure_option():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        text = f.read()
    return re.search(r"option\(\s*MI_SECURE\b|set\(\s*MI_SECURE\b[^)]*\bCACHE\b", text) is not None


def build(args):
    """Build the workloads (and our library unless --lib); returns {allocator: preload}."""
    build_dir = os.path.join(args.out, "build")
    targets = ["mimalloc-bench"] + ([] if args.lib else ["mimalloc"])
    log("building in " + build_dir)
    cmake_build(build_dir, [], targets)
    preload = {}
    for name, lib, _, _ in ALLOCATORS:
        if name == "ours":
            preload[name] = os.path.abspath(args.lib) if args.lib else os.path.join(build_dir, "libmimalloc.so")
        elif lib_option(lib):   # another build of ours: --secure-lib, --baseline-lib
            path = getattr(args, lib_option(lib))
            if path:
                preload[name] = os.path.abspath(path)
            elif name == "ours-secure" and has_secure_option() and name in args.allocators:
                secure_dir = os.path.join(args.out, "build-secure")
                cmake_build(secure_dir, ["-DMI_SECURE=ON"], ["mimalloc"])
                preload[name] = os.path.join(secure_dir, "libmimalloc-secure.so")
        else:
            preload[name] = lib
    args.allocators = [a for a in args.allocators if a in preload]
    global SPAWN
    SPAWN = binary(build_dir, "spawn")
    return build_dir, preload


# ---------------------------------------------------------------------------
# 3.-4. Running one program. It is started through bench/spawn.c, which forks
# and execs it and reports wall, user and system time, peak RSS and minor
# page faults from wait4 (a program forked from Python directly would inherit
# the runner's peak RSS in ru_maxrss: Linux keeps the peak across exec).
# ---------------------------------------------------------------------------

class Result:
    def __init__(self, wall, user, sys_, maxrss_kib, minflt, status, out, err):
        self.wall, self.user, self.sys, self.maxrss_kib = wall, user, sys_, maxrss_kib
        self.minflt = minflt
        self.status, self.out, self.err = status, out, err

    @property
    def figure(self):
        lines = [l for l in self.out.splitlines() if l.strip()]
        return lines[-1] if lines else ""


def env_for(preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    return env


SPAWN = None   # the helper, set once built


def run_measured(cmd, preload, timeout):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r") as res:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        proc = subprocess.Popen([SPAWN, res.name, preload or "-"] + cmd, env=env, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)   # the helper and the program
            proc.wait()
            timed_out = True
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        fields = res.read().split()
    if timed_out or len(fields) != 6:
        return Result(float(timeout), 0.0, 0.0, 0, 0, "timeout" if timed_out else "no result", stdout, stderr)
    wall, user, sys_, maxrss, minflt, wstatus = float(fields[0]), float(fields[1]), float(fields[2]), \
        int(fields[3]), int(fields[4]), int(fields[5])
    status = exit_status(os.waitstatus_to_exitcode(wstatus), stdout)
    return Result(wall, user, sys_, maxrss, minflt, status, stdout, stderr)


def exit_status(code, stdout):
    """'ok', or what went wrong: a signal, an exit code, or FAILED in the output."""
    if code < 0:
        return "signal %d (%s)" % (-code, signal.Signals(-code).name)
    if code != 0:
        return "exit %d" % code
    if "FAILED" in stdout:
        return "failed"
    return "ok"


def reproducer(cmd, preload):
    return ("LD_PRELOAD=%s " % preload if preload else "") + " ".join(cmd)


def probe(build_dir, preload, args):
    log("probing malloc under each allocator")
    for name in list(args.allocators):
        expect = next(a[3] for a in ALLOCATORS if a[0] == name)
        r = run_measured([binary(build_dir, "probe")], preload[name], 30)
        line = r.figure
        if r.status != "ok" or expect not in line:
            log("  %-12s %s -- not the expected %s: left out" % (name, line or r.status, expect))
            args.allocators.remove(name)
        else:
            log("  %-12s %s" % (name, line.replace("probe: ", "")))


def run_all(build_dir, preload, args):
    results = []   # (round, workload, allocator, Result, cmd)
    workloads = [w for w in WORKLOADS if w[0] in args.only]
    total = args.rounds * len(workloads) * len(args.allocators)
    done = 0
    for rnd in range(args.rounds):
        shift = rnd % len(args.allocators)
        order = args.allocators[shift:] + args.allocators[:shift]
        for name, program, full, quick in workloads:
            cmd = [binary(build_dir, program)] + (quick if args.quick else full)
            for alloc in order:
                r = run_measured(cmd, preload[alloc], args.timeout)
                done += 1
                log("[%3d/%d] round %d %-15s %-12s %7.2f s %6.2f s sys %8.1f MiB %9d faults  %s" % (
                    done, total, rnd + 1, name, alloc, r.wall, r.sys, r.maxrss_kib / 1024.0, r.minflt,
                    "" if r.status == "ok" else r.status.upper()))
                if r.status != "ok":
                    save_log(args, "%s-%s-r%d" % (name, alloc, rnd + 1), r.out, r.err)
                results.append((rnd + 1, name, alloc, r, cmd))
    return results


def save_log(args, base, out, err):
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    base = os.path.join(args.out, "logs", base)
    with open(base + ".out", "w") as f:
        f.write(out)
    with open(base + ".err", "w") as f:
        f.write(err)


def strace_failure(args, failures, what, name, alloc, status, stdout, stderr, cmd, preload):
    """A run under strace (`what`: the pass) that did not end well: its log is
    kept and a line for the failure list says how to reproduce it."""
    save_log(args, "%s-%s-%s" % (name, alloc, what), stdout, stderr)
    detail = ([l for l in stdout.splitlines() if l.strip()] or stderr.strip().splitlines() or [""])[-1]
    label = "strace" if what == "strace" else "%s pass, strace" % what
    failures.append("%s under %s (%s): %s: %s\n    reproduce: %s" % (
        name, alloc, label, status, detail, reproducer(cmd, preload)))


# ---------------------------------------------------------------------------
# 5. Tables, CSV, charts
# ---------------------------------------------------------------------------

def write_csv(path, results, preload):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "workload", "allocator", "wall_s", "user_s", "sys_s", "maxrss_kib",
                    "minflt", "status", "output", "command"])
        for rnd, name, alloc, r, cmd in results:
            w.writerow([rnd, name, alloc, "%.4f" % r.wall, "%.4f" % r.user, "%.4f" % r.sys,
                        r.maxrss_kib, r.minflt, r.status, r.figure, reproducer(cmd, preload[alloc])])


# indices into a medians() tuple
WALL, RSS, CPU, FAULTS, SYS = range(5)


def medians(results, allocators, workloads):
    """{(workload, allocator): (median wall, median maxrss KiB, median user+sys, median minor
    page faults, median system time)} over the runs; None if any run failed."""
    med = {}
    for name in workloads:
        for alloc in allocators:
            runs = [r for _, w, a, r, _ in results if w == name and a == alloc]
            if not runs:
                continue
            if any(r.status != "ok" for r in runs):
                med[(name, alloc)] = None
            else:
                med[(name, alloc)] = (statistics.median(r.wall for r in runs),
                                      statistics.median(r.maxrss_kib for r in runs),
                                      statistics.median(r.user + r.sys for r in runs),
                                      statistics.median(r.minflt for r in runs),
                                      statistics.median(r.sys for r in runs))
    return med


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def ratio_table(med, allocators, workloads, index, unit_fmt, geomean_row=True):
    """Rows of strings: ours absolute, the others relative to ours (absolute, in parentheses,
    where ours is 0); last row geometric means (unless geomean_row is False: counts that are
    often 0, whose ratios have no geometric mean)."""
    header = ["workload", "ours"] + [a for a in allocators if a != "ours"]
    rows = []
    ratios = {a: [] for a in allocators}
    for name in workloads:
        base = med.get((name, "ours"))
        row = [name, "FAIL" if base is None else unit_fmt(base[index])]
        for a in allocators:
            if a == "ours":
                continue
            m = med.get((name, a), "absent")
            if m == "absent":
                row.append("-")
            elif m is None:
                row.append("FAIL")
            elif base is None:
                row.append(unit_fmt(m[index]))
            elif base[index] <= 0:
                row.append("-" if m[index] <= 0 else "(%s)" % unit_fmt(m[index]))
            else:
                x = m[index] / base[index]
                ratios[a].append(x)
                row.append(format_ratio(x))
        rows.append(row)
    means = [geomean(ratios[a]) for a in allocators if a != "ours"]
    if geomean_row:
        rows.append(["geomean", "1.00"] + ["-" if g is None else format_ratio(g) for g in means])
    return header, rows, ratios


def format_ratio(x):
    """Two decimals; two significant digits below 0.1 (madvise calls of 5 against 1730)."""
    return "%.2f" % x if x >= 0.095 or x == 0 else "%.2g" % x


def format_text(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).rjust(widths[i]) if i else str(c).ljust(widths[i]) for i, c in enumerate(r))
             for r in [header] + rows]
    return "\n".join(lines)


def format_markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def plot(path, title, ylabel, workloads, allocators, med, index):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        log("matplotlib not available: no chart " + path)
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.8 * len(workloads)), 5.5))
    width = 0.8 / len(allocators)
    for i, a in enumerate(allocators):
        xs, ys = [], []
        for j, name in enumerate(workloads):
            base, m = med.get((name, "ours")), med.get((name, a))
            if base and m and base[index] > 0:
                xs.append(j + (i - (len(allocators) - 1) / 2) * width)
                ys.append(m[index] / base[index])
        ax.bar(xs, ys, width=width, label=a)
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, rotation=40, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="right")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v))

    def minor_label(v, _):   # label 0.2, 0.5, 2, 5, ... between the powers of ten
        lead = round(v / 10 ** math.floor(math.log10(v)), 6) if v > 0 else 0
        return "%g" % v if lead in (2, 5) else ""
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(minor_label))
    ax.legend(ncol=min(len(allocators), 7), fontsize="small", loc="lower left", bbox_to_anchor=(0, 1.06))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------
# 6. Instruction counts with callgrind
# ---------------------------------------------------------------------------

def callgrind_costs(path):
    """(total Ir, self Ir of measured_loop) from a callgrind output file."""
    names, selfcost, total = {}, {}, 0
    current, after_calls = None, False
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line.startswith("fn="):
                m = re.match(r"fn=\((\d+)\)(?: (.*))?", line.strip())
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    current = names.get(m.group(1))
                else:
                    current = line.strip()[3:]
                after_calls = False
            elif line.startswith("cfn="):   # may be where a name is first defined
                m = re.match(r"cfn=\((\d+)\) (.*)", line.strip())
                if m:
                    names[m.group(1)] = m.group(2)
            elif line.startswith("calls="):
                after_calls = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:   # the inclusive cost of a call, not self cost
                    after_calls = False
                    continue
                selfcost[current] = selfcost.get(current, 0) + int(line.split()[-1])
    return total, selfcost.get("measured_loop", 0)


def count_instructions(build_dir, preload, alloc, size, live, count, tmpdir):
    """Instructions per malloc+free pair: (cost(2n) - cost(n)) / n, loop overhead excluded."""
    costs = []
    for n in (count, 2 * count):
        out = os.path.join(tmpdir, "cg-%s-%d-%d-%d" % (alloc, size, live, n))
        cmd = ["valgrind", "--tool=callgrind", "--soname-synonyms=somalloc=nouserintercepts",
               "--collect-atstart=no", "--toggle-collect=measured_loop", "--callgrind-out-file=" + out,
               binary(build_dir, "fastpath"), str(size), str(n), str(live)]
        p = subprocess.run(cmd, env=env_for(preload[alloc]), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        if p.returncode != 0 or not os.path.exists(out):
            return None
        total, loop_self = callgrind_costs(out)
        costs.append(total - loop_self)
    return (costs[1] - costs[0]) / count


def instructions(build_dir, preload, args):
    sizes = INSTR_SIZES_QUICK if args.quick else INSTR_SIZES
    cases = [1] if args.quick else [1, 0]
    count = 5000 if args.quick else 20000
    jobs = [(a, s, live) for live in cases for s in sizes for a in args.allocators]
    log("counting instructions with callgrind (%d runs)" % (2 * len(jobs)))
    with tempfile.TemporaryDirectory() as tmpdir, ThreadPoolExecutor(max_workers=NCPU) as pool:
        futures = {job: pool.submit(count_instructions, build_dir, preload, job[0], job[1], job[2],
                                    count, tmpdir) for job in jobs}
        counts = {job: f.result() for job, f in futures.items()}
    header = ["size"] + args.allocators
    rows = []
    for live in cases:
        for s in sizes:
            label = "%d%s" % (s, "" if live else " (lone)")
            rows.append([label] + ["-" if counts[(a, s, live)] is None else "%.1f" % counts[(a, s, live)]
                                   for a in args.allocators])
    with open(os.path.join(args.out, "instructions.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["size", "case", "allocator", "instructions_per_pair"])
        for (a, s, live), c in sorted(counts.items(), key=lambda kv: (kv[0][2], kv[0][1], kv[0][0])):
            w.writerow([s, "live" if live else "lone", a, "" if c is None else "%.2f" % c])
    return header, rows


# ---------------------------------------------------------------------------
# --syscalls: each workload once under each allocator under strace -f -c
# ---------------------------------------------------------------------------

SYSCALLS = ["madvise", "mmap", "munmap", "mprotect", "brk"]


def parse_strace_summary(path):
    """{syscall: calls} from the table `strace -c` writes (all threads with -f).

    A row is: % time, seconds, usecs/call, calls, [errors], syscall. The
    'total' row is left out: the total is the sum of the rows. Only the rows
    under the last header count: with -C the calls come first (and strace may
    print an empty table among them)."""
    counts = {}
    in_table = False
    with open(path) as f:
        for line in f:
            if line.startswith("% time"):
                counts, in_table = {}, True
                continue
            fields = line.split()
            if not in_table or len(fields) < 5 or not re.match(r"^\d+(\.\d+)?$", fields[0]) \
                    or fields[-1] == "total":
                continue
            if not fields[3].isdigit():
                continue
            counts[fields[-1]] = counts.get(fields[-1], 0) + int(fields[3])
    return counts


# madvise advice that gives memory back (the next touch faults in a fresh page)
GIVE_BACK = {"MADV_DONTNEED", "MADV_DONTNEED_LOCKED", "MADV_FREE", "MADV_REMOVE", "MADV_PAGEOUT"}
TRACE_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(\S+)")


def parse_madvise_trace(path):
    """The madvise calls in a trace of madvise, mmap and munmap (strace -f -o PATH).

    Returns {"calls", "bytes", "failed", "stack_calls", "stack_bytes",
    "advice": {advice: [calls, bytes]}}: "bytes" are those of successful calls
    with advice in GIVE_BACK. A call on a thread stack (a mapping made with
    MAP_STACK: glibc madvises the unused part of a stack when its thread ends)
    counts in stack_calls and stack_bytes only, not in calls, bytes and advice."""
    stats = {"calls": 0, "bytes": 0, "failed": 0, "stack_calls": 0, "stack_bytes": 0, "advice": {}}
    stacks = {}     # start -> end of the live MAP_STACK mappings
    pending = {}    # pid -> the first part of an unfinished call

    def drop_stacks(lo, hi):
        for start in [a for a, b in stacks.items() if a < hi and lo < b]:
            del stacks[start]

    with open(path, errors="replace") as f:
        for line in f:
            pid, _, body = line.rstrip("\n").partition(" ")
            if not pid.isdigit():
                continue
            body = body.strip()
            if body.endswith("<unfinished ...>"):
                pending[pid] = body[:-len("<unfinished ...>")].rstrip()
                continue
            if body.startswith("<..."):
                head = pending.pop(pid, None)
                if head is None:
                    continue
                body = head + body.split(" resumed>", 1)[-1]
            m = TRACE_CALL.match(body)
            if not m:
                continue
            name, argstr, ret = m.group(1), m.group(2), m.group(3)
            args = [a.strip() for a in argstr.split(",")]
            ok = ret != "-1" and ret != "?"
            try:
                if name == "mmap" and ok:
                    start, length = int(ret, 16), int(args[1])
                    drop_stacks(start, start + length)
                    if "MAP_STACK" in argstr:
                        stacks[start] = start + length
                elif name == "munmap" and ok:
                    start = int(args[0], 16)
                    drop_stacks(start, start + int(args[1]))
                elif name == "madvise":
                    start, length, advice = int(args[0], 16), int(args[1]), args[2]
                    gives_back = ok and advice in GIVE_BACK
                    if any(a <= start < b for a, b in stacks.items()):
                        stats["stack_calls"] += 1
                        stats["stack_bytes"] += length if gives_back else 0
                        continue
                    stats["calls"] += 1
                    stats["failed"] += 0 if ok else 1
                    entry = stats["advice"].setdefault(advice, [0, 0])
                    entry[0] += 1
                    if gives_back:
                        stats["bytes"] += length
                        entry[1] += length
            except (ValueError, IndexError):
                continue
    return stats


SECCOMP = None   # whether strace has --seccomp-bpf, found out on first use


def strace_has_seccomp():
    """True if this strace can stop the program at the traced calls only (--seccomp-bpf)."""
    global SECCOMP
    if SECCOMP is None:
        try:
            SECCOMP = subprocess.call(["strace", "-f", "--seccomp-bpf", "-e", "trace=madvise", "-o", os.devnull,
                                       "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
        except OSError:
            SECCOMP = False
    return SECCOMP


def run_strace(cmd, preload, out_file, timeout, trace=None):
    """Run cmd under strace -f (preload set for the program, not for strace);
    returns (status, stdout, stderr, {syscall: calls}).

    trace None: count every system call (strace -c, the summary into out_file).
    trace a list of system calls: write those calls, then their summary (-C),
    into out_file, stopping the program at those calls only (--seccomp-bpf,
    where strace has it)."""
    if os.path.exists(out_file):
        os.remove(out_file)   # a summary of an earlier run must not count
    if trace is None:
        mode = ["-c"]
    else:
        mode = ["-C", "-qq", "-e", "trace=" + ",".join(trace), "-e", "signal=none"] + \
            (["--seccomp-bpf"] if strace_has_seccomp() else [])
    trace = ["strace", "-f"] + mode + ["-o", out_file] + (["-E", "LD_PRELOAD=" + preload] if preload else [])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(trace + cmd, env=env_for(None), stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
            status = None
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)   # strace and the program
            proc.wait()
            status = "timeout"
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if status is None:
        # strace exits with the program's code, or kills itself with its signal
        status = exit_status(code, stdout)
    counts = parse_strace_summary(out_file) if os.path.exists(out_file) else {}
    if status == "ok" and not counts:
        status = "no strace summary"
    return status, stdout, stderr, counts


def count_syscalls(build_dir, preload, args):
    """Run every selected workload once under every allocator under strace; returns
    the table (header, rows) and the failures."""
    workloads = [w for w in WORKLOADS if w[0] in args.only]
    trace_dir = os.path.join(args.out, "strace")
    os.makedirs(trace_dir, exist_ok=True)
    total = len(workloads) * len(args.allocators)
    done = 0
    table = []      # (workload, allocator, status, counts, cmd)
    failures = []
    for name, program, full, quick in workloads:
        cmd = [binary(build_dir, program)] + (quick if args.quick else full)
        for alloc in args.allocators:
            out_file = os.path.join(trace_dir, "%s-%s.txt" % (name, alloc))
            started = time.monotonic()
            status, stdout, stderr, counts = run_strace(cmd, preload[alloc], out_file, args.timeout)
            done += 1
            log("[%3d/%d] %-15s %-12s %8d system calls  (%.1f s under strace)  %s" % (
                done, total, name, alloc, sum(counts.values()), time.monotonic() - started,
                "" if status == "ok" else status.upper()))
            if status != "ok":
                strace_failure(args, failures, "strace", name, alloc, status, stdout, stderr, cmd, preload[alloc])
            table.append((name, alloc, status, counts, cmd))
    with open(os.path.join(args.out, "syscalls.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "allocator", "status", "syscall", "calls"])
        for name, alloc, status, counts, _ in table:
            for sc, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                w.writerow([name, alloc, status, sc, n])
    header = ["workload", "allocator"] + SYSCALLS + ["total"]
    rows = []
    for name, alloc, status, counts, _ in table:
        if status != "ok" and not counts:
            rows.append([name, alloc] + ["-"] * len(SYSCALLS) + ["FAIL"])
            continue
        rows.append([name, alloc] + [str(counts.get(sc, 0)) for sc in SYSCALLS] +
                    [str(sum(counts.values())) + ("" if status == "ok" else " FAIL")])
    return header, rows, failures


def trace_madvise(cmd, preload, out_file, timeout):
    """One untimed run under strace (madvise, mmap, munmap): (status, stdout, stderr,
    {syscall: calls} of strace's summary, parse_madvise_trace's stats or None)."""
    status, stdout, stderr, counts = run_strace(cmd, preload, out_file, timeout,
                                                trace=["madvise", "mmap", "munmap"])
    return status, stdout, stderr, counts, parse_madvise_trace(out_file) if os.path.exists(out_file) else None


def count_madvise(build_dir, preload, args):
    """Run every selected workload once under every allocator, untimed, under strace
    (madvise, mmap, munmap); returns {(workload, allocator): (calls, bytes) or None}
    and the failures, and writes madvise.csv. With --quick, NCPU runs at a time (the
    counts are of one run anyway, and the timed rounds are over)."""
    workloads = [w for w in WORKLOADS if w[0] in args.only]
    trace_dir = os.path.join(args.out, "strace")
    os.makedirs(trace_dir, exist_ok=True)
    total = len(workloads) * len(args.allocators)
    done = 0
    madv, rows, failures = {}, [], []
    jobs = []
    with ThreadPoolExecutor(max_workers=NCPU if args.quick else 1) as pool:
        for name, program, full, quick in workloads:
            cmd = [binary(build_dir, program)] + (quick if args.quick else full)
            for alloc in args.allocators:
                out_file = os.path.join(trace_dir, "%s-%s.madvise.txt" % (name, alloc))
                jobs.append((name, alloc, cmd, pool.submit(trace_madvise, cmd, preload[alloc], out_file,
                                                           args.timeout)))
        for name, alloc, cmd, future in jobs:
            status, stdout, stderr, counts, st = future.result()
            if status == "ok" and st is None:
                status = "no strace output"
            elif status == "ok" and abs(counts.get("madvise", 0) - st["calls"] - st["stack_calls"]) > \
                    max(2, counts.get("madvise", 0) // 100):
                # the trace has the calls the summary counts, and those cut short by the
                # process's exit (`= ?`, a few at most): more is a trace we misread
                status = "madvise calls: %d in strace's summary, %d read from the trace" % (
                    counts.get("madvise", 0), st["calls"] + st["stack_calls"])
            done += 1
            log("[%3d/%d] madvise %-15s %-12s %7d calls %10.1f MiB given back  (thread stacks: %d calls)  %s" % (
                done, total, name, alloc, st["calls"] if st else 0, (st["bytes"] if st else 0) / 1048576.0,
                st["stack_calls"] if st else 0, "" if status == "ok" else status.upper()))
            if status != "ok":
                strace_failure(args, failures, "madvise", name, alloc, status, stdout, stderr, cmd, preload[alloc])
                madv[(name, alloc)] = None
            else:
                madv[(name, alloc)] = (st["calls"], st["bytes"])
            if st is not None:
                for advice, (calls, nbytes) in sorted(st["advice"].items()):
                    rows.append([name, alloc, status, "allocator", advice, calls, nbytes])
                rows.append([name, alloc, status, "thread stacks", "all", st["stack_calls"], st["stack_bytes"]])
    with open(os.path.join(args.out, "madvise.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "allocator", "status", "of", "advice", "calls", "bytes"])
        w.writerows(rows)
    return madv, failures


def with_ratio(value, base, fmt):
    """fmt(value), followed by its ratio to base in parentheses when base is given and not 0."""
    return fmt(value) if base is None or base <= 0 else "%s (%s)" % (fmt(value), format_ratio(value / base))


def workload_tables(med, madv, allocators, workloads):
    """Markdown: per workload, a table of every allocator's figures, ratios to ours in parentheses."""
    cols = [("wall", WALL, lambda v: "%.3f s" % v), ("system", SYS, lambda v: "%.3f s" % v),
            ("minor faults", FAULTS, lambda v: "%d" % v)]
    mcols = [("madvise calls", 0, lambda v: "%d" % v), ("MiB given back", 1, lambda v: "%.1f" % (v / 1048576.0))]
    out = []
    for name in workloads:
        header = ["allocator"] + [c[0] for c in cols] + ([c[0] for c in mcols] if madv else []) + ["peak RSS"]
        rows = []
        base, mbase = med.get((name, "ours")), madv.get((name, "ours")) if madv else None
        for a in allocators:
            m = med.get((name, a), "absent")
            if m == "absent":
                continue
            b = base if a != "ours" else None      # ours: no ratio
            mb = mbase if a != "ours" else None
            row = [a]
            row += ["FAIL"] * len(cols) if m is None else \
                [with_ratio(m[i], b[i] if b else None, fmt) for _, i, fmt in cols]
            if madv:
                mm = madv.get((name, a))
                row += ["FAIL"] * len(mcols) if mm is None else \
                    [with_ratio(mm[i], mb[i] if mb else None, fmt) for _, i, fmt in mcols]
            row.append("FAIL" if m is None else with_ratio(m[RSS], b[RSS] if b else None,
                                                           lambda v: "%.1f MiB" % (v / 1024.0)))
            rows.append(row)
        out += ["### " + name, "", format_markdown(header, rows), ""]
    return out


# ---------------------------------------------------------------------------
# Environment record and the main program
# ---------------------------------------------------------------------------

def describe_environment(path, preload, args):
    def cmd_out(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, cwd=ROOT).stdout.strip()
        except OSError:
            return "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    except OSError:
        pass
    packages = [p for _, _, p, _ in ALLOCATORS if p]
    lines = [
        "date: " + time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine: %s, %d cores, %s" % (cpu, NCPU, platform.platform()),
        "load average at start: %.2f %.2f %.2f" % os.getloadavg(),
        "commit: %s%s" % (cmd_out(["git", "rev-parse", "--short", "HEAD"]),
                          " (with local changes)" if cmd_out(["git", "status", "--porcelain"]) else ""),
        "compiler: " + cmd_out(["cc", "--version"]).splitlines()[0] if shutil.which("cc") else "compiler: ?",
        "packages: " + cmd_out(["dpkg-query", "-W", "-f", "${Package} ${Version}, "] + packages).rstrip(", "),
        "mode: %s, %s, timeout %d s" % ("quick" if args.quick else "full",
                                        "system calls (strace -f -c)" if args.syscalls
                                        else "%d rounds" % args.rounds, args.timeout),
    ]
    lines += ["preload %s: %s" % (a, preload[a] or "(none)") for a in args.allocators]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", nargs="?", default=os.path.join(ROOT, "out", "bench"),
                   help="output folder (default: out/bench in the repository)")
    p.add_argument("--quick", action="store_true", help="small sizes, 1 round: about a minute")
    p.add_argument("--rounds", type=int, help="rounds (default 3, quick 1)")
    p.add_argument("--only", help="comma-separated workloads (default: all): " +
                   ",".join(w[0] for w in WORKLOADS))
    p.add_argument("--allocators", help="comma-separated allocators (default: all): " +
                   ",".join(a[0] for a in ALLOCATORS))
    p.add_argument("--lib", help="our libmimalloc.so to use instead of building one")
    p.add_argument("--secure-lib", help="our secure libmimalloc.so (adds the ours-secure column)")
    p.add_argument("--baseline-lib", help="an earlier build of our libmimalloc.so, preloaded like "
                   "ours (adds the before column; ratios stay relative to ours)")
    p.add_argument("--extra", action="append", default=[], metavar="NAME=LIB",
                   help="another library (e.g. a build of ours with one check left out) preloaded "
                   "as the column NAME; repeatable")
    p.add_argument("--timeout", type=int, help="seconds before a run counts as hung "
                   "(default 120, quick 60; with --syscalls 600, quick 300)")
    p.add_argument("--no-instr", dest="instr", action="store_false", help="skip the instruction counts")
    p.add_argument("--instr-only", action="store_true", help="only the instruction counts")
    p.add_argument("--no-plots", dest="plots", action="store_false", help="skip the charts")
    p.add_argument("--no-madvise", dest="madvise", action="store_false",
                   help="skip the untimed pass under strace that counts madvise calls and bytes")
    p.add_argument("--syscalls", action="store_true",
                   help="instead of the timed rounds: run each workload once per allocator under "
                   "strace -f -c and count system calls (syscalls.md)")
    args = p.parse_args()
    args.out = os.path.abspath(args.out)
    args.rounds = args.rounds or (1 if args.quick else 3)
    if args.syscalls:
        # strace stops the program at every system call: allow for it
        args.timeout = args.timeout or (300 if args.quick else 600)
        args.instr = args.plots = args.madvise = False
        args.instr_only = False
    if args.instr_only:
        args.madvise = False
    args.timeout = args.timeout or (60 if args.quick else 120)
    # --extra NAME=LIB: any other build (e.g. ours with one check left out)
    # as a column of its own, preloaded like ours
    for extra in args.extra:
        name, _, path = extra.partition("=")
        if not name or not path or not os.path.isfile(path):
            p.error("--extra %s: NAME=LIB with an existing library expected" % extra)
        if name in [a[0] for a in ALLOCATORS]:
            p.error("--extra %s: the name %s is taken" % (extra, name))
        ALLOCATORS.append((name, os.path.abspath(path), None, os.path.basename(path)))
    names = [a[0] for a in ALLOCATORS]
    explicit = bool(args.allocators)
    args.allocators = args.allocators.split(",") if args.allocators else list(names)
    if explicit:   # the extra columns come along with the ones named
        args.allocators += [e.partition("=")[0] for e in args.extra if e.partition("=")[0] not in args.allocators]
    for a in args.allocators:
        if a not in names:
            p.error("unknown allocator " + a)
    if "ours" not in args.allocators:
        args.allocators.insert(0, "ours")   # everything is normalised to ours
    # a library given for another build of ours adds its column (after ours)
    at = args.allocators.index("ours") + 1
    for name, lib, _, _ in ALLOCATORS:
        path = getattr(args, lib_option(lib)) if lib_option(lib) else None
        if path:
            if not os.path.isfile(path):
                p.error("%s %s: no such file" % (lib, path))
            if name not in args.allocators:
                args.allocators.insert(at, name)
                at += 1
    workload_names = [w[0] for w in WORKLOADS]
    args.only = args.only.split(",") if args.only else workload_names
    for w in args.only:
        if w not in workload_names:
            p.error("unknown workload " + w)
    return args


def reexec_with_system_python():
    """Debian's matplotlib belongs to /usr/bin/python3: run under it if started by another one."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) \
                and not os.environ.get("MI_BENCH_REEXEC"):
            os.environ["MI_BENCH_REEXEC"] = "1"
            os.execv(system, [system] + sys.argv)


def main():
    reexec_with_system_python()
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    ensure_prerequisites(args)
    build_dir, preload = build(args)
    probe(build_dir, preload, args)
    if "ours" not in args.allocators:
        sys.exit("our library does not serve malloc when preloaded: nothing to compare with")
    env_lines = describe_environment(os.path.join(args.out, "env.txt"), preload, args)
    summary = ["# Benchmark results", ""] + ["    " + l for l in env_lines] + [""]
    failures = []

    if args.syscalls:
        sh, sr, failures = count_syscalls(build_dir, preload, args)
        title = ("SYSTEM CALLS: calls made by the whole process (all threads) in one run under "
                 "strace -f -c; total: all system calls")
        log("\n" + title)
        log(format_text(sh, sr))
        lines = ["# System calls", ""] + ["    " + l for l in env_lines] + [
            "", "Calls made by the whole process (all threads) in one run of each workload under "
            "`strace -f -c` (the time under strace means nothing); `total`: all system calls.", "",
            format_markdown(sh, sr), ""]
        if failures:
            lines += ["## Failures", ""] + ["    " + f for f in failures] + [""]
            log("\nFAILURES")
            for f in failures:
                log("  " + f)
        with open(os.path.join(args.out, "syscalls.md"), "w") as f:
            f.write("\n".join(lines))
        log("\nwritten to %s (%.0f s in total)" % (args.out, time.monotonic() - started))
        return 1 if failures else 0

    if not args.instr_only:
        results = run_all(build_dir, preload, args)
        write_csv(os.path.join(args.out, "results.csv"), results, preload)
        workloads = [w[0] for w in WORKLOADS if w[0] in args.only]
        med = medians(results, args.allocators, workloads)
        madv = None
        if args.madvise:
            log("counting madvise calls: each workload once more per allocator, untimed, under strace")
            madv, madv_failures = count_madvise(build_dir, preload, args)
            failures += madv_failures
        fmt_s = lambda v: "%.3f s" % v
        fmt_mib = lambda v: "%.1f MiB" % (v / 1024.0)
        # (console title, summary.md title, table): medians, ours absolute, others relative to ours
        tables = [
            ("TIME: median wall time; ours in seconds, the others relative to ours (lower is better)",
             "Time (median wall time; ours in seconds, others relative to ours)",
             ratio_table(med, args.allocators, workloads, WALL, fmt_s)),
            ("SYSTEM TIME: median system time; ours in seconds, the others relative to ours (the "
             "kernel's share: page faults, madvise, mmap, lock waits)",
             "System time (median; ours in seconds, others relative to ours)",
             ratio_table(med, args.allocators, workloads, SYS, fmt_s)),
            ("RSS: median peak resident set; ours in MiB, the others relative to ours (lower is better)",
             "Peak RSS (median; ours in MiB, others relative to ours)",
             ratio_table(med, args.allocators, workloads, RSS, fmt_mib)),
            ("CPU: median user+system time; ours in seconds, the others relative to ours (less noisy "
             "than wall time on a shared machine)",
             "CPU time (median user+system; ours in seconds, others relative to ours)",
             ratio_table(med, args.allocators, workloads, CPU, fmt_s)),
            ("PAGE FAULTS: median minor page faults (ru_minflt); ours as a count, the others relative "
             "to ours (lower is better)",
             "Minor page faults (median; ours as a count, others relative to ours)",
             ratio_table(med, args.allocators, workloads, FAULTS, lambda v: "%d" % v)),
        ]
        if madv is not None:
            absent = "; in parentheses: the count where ours is 0"
            tables += [
                ("MADVISE CALLS: one untimed run under strace, thread stacks left out; ours as a count, "
                 "the others relative to ours" + absent + " (lower is better)",
                 "madvise calls (one untimed run under strace, thread stacks left out; ours as a count, "
                 "others relative to ours" + absent + ")",
                 ratio_table(madv, args.allocators, workloads, 0, lambda v: "%d" % v, geomean_row=False)),
                ("MADVISE BYTES: memory given back (MADV_DONTNEED, MADV_FREE, ...) in the same run; ours "
                 "in MiB, the others relative to ours" + absent.replace("count", "MiB") + " (lower is not "
                 "always better: memory given back lowers the resident set)",
                 "Memory given back by madvise (MADV_DONTNEED, MADV_FREE, ... in the same run; ours in MiB, "
                 "others relative to ours" + absent.replace("count", "MiB") + ")",
                 ratio_table(madv, args.allocators, workloads, 1, lambda v: "%.1f MiB" % (v / 1048576.0),
                             geomean_row=False)),
            ]
        for title, md_title, (header, rows, _) in tables:
            log("\n" + title)
            log(format_text(header, rows))
            summary += ["## " + md_title, "", format_markdown(header, rows), ""]
        summary += ["## Per workload", "",
                    "Medians of the timed rounds (madvise: the untimed run under strace); in "
                    "parentheses the ratio to ours.", ""]
        summary += workload_tables(med, madv, args.allocators, workloads)
        # deterministic workloads must print the same check value under every allocator
        checks = {}
        for rnd, name, alloc, r, cmd in results:
            m = re.search(r"check=([0-9a-f]+)", r.figure)
            if m and r.status == "ok":
                checks.setdefault(name, {}).setdefault(m.group(1), []).append(alloc)
        for name, values in checks.items():
            if len(values) > 1:
                failures.append("%s: different results: %s" % (name, values))
        for rnd, name, alloc, r, cmd in results:
            if r.status != "ok":
                detail = r.figure or (r.err.strip().splitlines() or [""])[-1]
                failures.append("%s under %s (round %d): %s: %s\n    reproduce: %s" % (
                    name, alloc, rnd, r.status, detail, reproducer(cmd, preload[alloc])))
        if args.plots:
            axis = "relative to ours (log scale, lower is better)"
            plot(os.path.join(args.out, "time.png"), "Median wall time " + axis.split(" (")[0],
                 "time " + axis, workloads, args.allocators, med, 0)
            plot(os.path.join(args.out, "rss.png"), "Median peak RSS " + axis.split(" (")[0],
                 "peak RSS " + axis, workloads, args.allocators, med, 1)
            plot(os.path.join(args.out, "faults.png"), "Median minor page faults " + axis.split(" (")[0],
                 "minor page faults " + axis, workloads, args.allocators, med, 3)

    if args.instr:
        ih, ir = instructions(build_dir, preload, args)
        log("\nINSTRUCTIONS per malloc+free pair (callgrind; 'lone': the block is alone in its page)")
        log(format_text(ih, ir))
        summary += ["## Instructions per malloc+free pair (callgrind)", "", format_markdown(ih, ir), ""]

    if failures:
        log("\nFAILURES")
        for f in failures:
            log("  " + f)
        summary += ["## Failures", ""] + ["    " + f for f in failures] + [""]
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(summary))
    log("\nwritten to %s (%.0f s in total)" % (args.out, time.monotonic() - started))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
