#!/usr/bin/env python3
"""Runs every case of the misuse program (test/misuse/misuse.cpp) under several
allocators (LD_PRELOAD) and prints which allocator notices which heap misuse,
as a markdown table.

  run.py --misuse build/test/mimalloc-test-misuse \\
         --ours build/libmimalloc.so --ours-debug build-dbg/libmimalloc-debug.so \\
         --ours-secure build-sec/libmimalloc-secure.so --out table.md

Without --lib, the allocators compared are glibc (no preload) and those of the
DEFAULT_LIBS that are installed, plus ours (--ours, --ours-debug,
--ours-secure). With --lib NAME=PATH (repeatable) only those given (and ours).
PATH "glibc" or "" means no preload; PATH "linked" means the misuse program
is linked with the allocator itself: no preload either.

Windows (docs/windows.md): the misuse program is linked with our override DLL
and runs under wine, from the build machine's Python:

  run.py --platform windows --emulator test/windows/wine-run.sh \
         --misuse build-win/bin/mimalloc-test-misuse.exe --lib ours=linked

--emulator PROGRAM is put before every run of the misuse program (--list
included). --platform windows (never implied by --emulator) says the program
is a Windows one: every allocator must be "linked" (LD_PRELOAD is never set),
and the cases in WINDOWS_NOT_CAUGHT (with their reason: what the Windows
build cannot catch by design, or what the C runtime lacks) are taken out of
the cases --expect-all-caught requires.

Classification of one run (each under LD_PRELOAD, or none for "linked", stdin
closed, MIMALLOC_* removed from the environment, killed after --timeout seconds):
  misuse case:   caught   = stopped: killed by a signal, or an exit code other
                            than 42 (the program exits 42 when it reaches its
                            end unnoticed)
  property case: caught   = exit 0 (the allocator has the property)
  both:          reported = exit 42, but the allocator wrote a message on stderr
                 —        = exit 42 and stderr silent
                 hang     = killed by the timeout (not caught)
                 n/a      = exit 77: the case could not be set up (e.g. no three
                            adjacent blocks found) or the platform lacks what it
                            calls (Windows: reallocarray)
(Windows: abort() exits 3, an access violation ends the process with the low
byte of its status, 5; both count as stopped.)

--expect-all-caught NAME exits 1 when allocator NAME does not catch a case,
except those in EXPECTED_NOT_CAUGHT and SOMETIMES_NOT_CAUGHT (listed, with
their reason, as expected), and with --platform windows those in
WINDOWS_NOT_CAUGHT (listed as not required there, with their reason);
with --required CASES only those cases count; with --profile P (release, on,
full: our builds) the cases PROFILE_CASES lists for P count, and those
PROFILE_LETS_PASS lists must not be caught.
Only the standard library is used.
"""
import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import time

UNNOTICED = 42
NOT_APPLICABLE = 77   # (not 3: abort()'s exit code on Windows)

DEFAULT_LIBS = [
    ("glibc", ""),
    ("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
    ("tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"),
    ("mimalloc-2.0", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"),
    ("scudo", "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.scudo_standalone-x86_64.so"),
]

# The cases each build of ours must catch: every build has the properties;
# the secure profile ON (docs/secure.md) catches what its checks see without
# the trailer (so no canaries: no overflow by a direct write but one that
# reaches a guard page, which none of the cases does every time), zero-on-free
# and the C++ delete checks; FULL catches every case.
ALWAYS_CAUGHT = ["malloc0-unique", "malloc0-free", "heap-not-executable", "malloc-size-max",
                 "calloc-overflow", "realloc-size-max", "reallocarray-overflow"]
ON_CAUGHT = ALWAYS_CAUGHT + [
    "memcpy-overflow-1", "memcpy-overflow-32", "memmove-overflow-1", "memmove-overflow-32",
    "memset-overflow-1", "memset-overflow-32",
    "double-free", "double-free-after-other-frees", "double-free-interleaved",
    "double-free-after-reuse", "double-free-after-same-size",
    "free-stack", "free-alloca", "free-global", "free-far", "free-inside-small",
    "free-inside-large", "free-unaligned",
    "write-after-free-memset", "malloc0-read-faults", "malloc0-write-faults", "freed-not-next"]
PROFILE_CASES = {"release": ALWAYS_CAUGHT, "on": ON_CAUGHT, "full": None}   # None: all
# Misuse a profile lets pass on purpose (it must not stop the program).
PROFILE_LETS_PASS = {"on": {"delete-of-new-array": "ON runs real programs as they are: a delete of a "
                                                   "new[] block of a trivially destructible type is common"}}

# Cases our secure build (FULL) does not catch today, each with the reason.
# --expect-all-caught accepts these (and says when one starts being caught).
EXPECTED_NOT_CAUGHT = {}

# Cases our secure build catches in most runs but not all (random allocation
# order): a miss is accepted, with the reason.
SOMETIMES_NOT_CAUGHT = {}

# Cases the Windows build (the override DLL, --platform windows) cannot catch
# by design, each with the reason: they are not required there in any
# profile (Linux's lists above stay as they are). Whatever else a Windows
# build misses is a failure, as on Linux.
WINDOWS_NOT_CAUGHT = {
    "memcpy-overflow-1": "no checked memcpy on Windows: the secure build's bounds-checked "
                         "memcpy/memmove/memset interpose glibc's; the override DLL patches only "
                         "the C runtime's malloc family",
    "memcpy-overflow-32": "no checked memcpy on Windows (as memcpy-overflow-1)",
    "memmove-overflow-1": "no checked memmove on Windows (as memcpy-overflow-1)",
    "memmove-overflow-32": "no checked memmove on Windows (as memcpy-overflow-1)",
    "memset-overflow-1": "no checked memset on Windows (as memcpy-overflow-1)",
    "memset-overflow-32": "no checked memset on Windows (as memcpy-overflow-1)",
    "reallocarray-overflow": "not applicable: the C runtime (msvcrt.dll, ucrtbase.dll) has no reallocarray",
    "delete-of-new-array": "the override DLL serves new and delete through the C runtime's malloc "
                           "(libstdc++'s operators call it), which does not tell the forms apart; "
                           "FULL's delete checks need the static library's operators",
    "delete-array-of-new": "as delete-of-new-array: libstdc++'s operators over the patched malloc",
    "sized-delete-wrong-size": "as delete-of-new-array: libstdc++'s operators over the patched malloc",
}

# How a Windows program ended, by its exit code (under wine: the low byte of
# the status).
WINDOWS_EXITS = {3: "abort", 5: "access violation", 0x1d: "illegal instruction",
                 0x09: "fast fail", 0xfd: "stack overflow"}

# Words an allocator's report on stderr contains.
REPORT_WORDS = ["mimalloc:", "error", "ERROR", "Error", "corrupt", "invalid", "Invalid",
                "double free", "scudo", "Scudo", "<jemalloc>", "tcmalloc", "free():", "malloc():"]


def list_cases(command):
    out = subprocess.run(command + ["--list"], stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, check=True).stdout
    cases = []
    for line in out.splitlines():
        name, kind, cls, what = line.split("\t")
        cases.append({"name": name, "kind": kind, "cls": cls, "what": what})
    return cases


def clean_env(lib):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_") and k != "LD_PRELOAD"}
    if lib:
        env["LD_PRELOAD"] = lib
    return env


def run_one(command, lib, case, timeout, windows):
    """Returns (cell, detail) for one case under one allocator (command: the
    misuse program, after the emulator if there is one)."""
    try:
        p = subprocess.run(command + [case["name"]], stdin=subprocess.DEVNULL, capture_output=True,
                           env=clean_env(lib), timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", "timeout after %g s" % timeout
    err = p.stderr.decode(errors="replace").strip()
    rc = p.returncode
    if rc < 0:
        try:
            how = signal.Signals(-rc).name
        except ValueError:
            how = "signal %d" % -rc
    else:
        how = "exit %d" % rc
        if windows and (rc & 0xff) in WINDOWS_EXITS and rc not in (0, UNNOTICED, NOT_APPLICABLE):
            how += " (%s)" % WINDOWS_EXITS[rc & 0xff]
    first = err.splitlines()[0][:160] if err else ""
    detail = how + (": " + first if first else "")
    if rc == NOT_APPLICABLE:
        return "n/a", detail
    if case["kind"] == "property":
        if rc == 0:
            return "caught", detail
    elif rc != UNNOTICED:
        return "caught", detail
    if rc == UNNOTICED and err and any(w in err for w in REPORT_WORDS):
        return "reported", detail
    return "—", detail


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--misuse", required=True, help="the misuse program")
    ap.add_argument("--lib", action="append", default=[], metavar="NAME=PATH",
                    help="an allocator to compare (repeatable); replaces the defaults; PATH "
                         "'glibc' (or empty): no preload; 'linked': the program is linked with it, no preload")
    ap.add_argument("--emulator", metavar="PROGRAM",
                    help="run the misuse program through PROGRAM (e.g. test/windows/wine-run.sh)")
    ap.add_argument("--platform", choices=["linux", "windows"], default="linux",
                    help="the misuse program's platform (default linux); windows: allocators must be "
                         "'linked', and WINDOWS_NOT_CAUGHT is not required")
    ap.add_argument("--ours", help="our release library (libmimalloc.so)")
    ap.add_argument("--ours-debug", help="our debug library (libmimalloc-debug.so)")
    ap.add_argument("--ours-secure", help="our secure library (libmimalloc-secure.so)")
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per run (default 10)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    ap.add_argument("--out", help="also write the table to this file")
    ap.add_argument("--details", action="store_true", help="print how each run ended (exit code or signal, first line of stderr)")
    ap.add_argument("--expect-all-caught", metavar="NAME",
                    help="exit 1 if allocator NAME does not catch a case (except EXPECTED_NOT_CAUGHT)")
    ap.add_argument("--required", metavar="CASES",
                    help="with --expect-all-caught: only these cases (comma-separated) must be caught")
    ap.add_argument("--profile", choices=sorted(PROFILE_CASES),
                    help="with --expect-all-caught: the cases our build of this profile must catch "
                         "(PROFILE_CASES) and must let pass (PROFILE_LETS_PASS)")
    args = ap.parse_args()

    windows = args.platform == "windows"
    if (windows or args.emulator) and (not args.lib or args.ours or args.ours_debug or args.ours_secure):
        sys.exit("run.py: with --platform windows or --emulator, give the allocators as --lib NAME=linked")
    libs = []
    if args.lib:
        for spec in args.lib:
            name, _, path = spec.partition("=")
            if (windows or args.emulator) and path != "linked":
                sys.exit("run.py: --lib %s: with --platform windows or --emulator only NAME=linked "
                         "(the program is linked with the allocator; no LD_PRELOAD)" % spec)
            libs.append((name, "" if path in ("glibc", "linked") else path))
    else:
        for name, path in DEFAULT_LIBS:
            if path and not os.path.exists(path):
                print("skipped (not installed): %s %s" % (name, path), file=sys.stderr)
                continue
            libs.append((name, path))
    for name, path in (("ours", args.ours), ("ours-debug", args.ours_debug), ("ours-secure", args.ours_secure)):
        if path:
            libs.append((name, path))
    for name, path in libs:
        if path and not os.path.exists(path):
            sys.exit("run.py: %s: no such library: %s" % (name, path))
    names = [n for n, _ in libs]
    if args.expect_all_caught and args.expect_all_caught not in names:
        sys.exit("run.py: --expect-all-caught %s: no such allocator (%s)" % (args.expect_all_caught, ", ".join(names)))

    command = ([args.emulator] if args.emulator else []) + [args.misuse]
    cases = list_cases(command)
    if args.cases:
        wanted = args.cases.split(",")
        unknown = [w for w in wanted if w not in {c["name"] for c in cases}]
        if unknown:
            sys.exit("run.py: unknown cases: " + ", ".join(unknown))
        cases = [c for c in cases if c["name"] in wanted]

    start = time.monotonic()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, command, path, case, args.timeout, windows): (name, case["name"])
                   for name, path in libs for case in cases}
        for f in concurrent.futures.as_completed(futures):
            results[futures[f]] = f.result()
    elapsed = time.monotonic() - start

    # the table: one row per case, grouped by class; one column per allocator
    lines = ["| case | kind | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    cls = None
    for c in cases:
        if c["cls"] != cls:
            cls = c["cls"]
            lines.append("| **%s** | |%s" % (cls, " |" * len(names)))
        lines.append("| `%s` | %s | " % (c["name"], c["kind"]) +
                     " | ".join(results[(n, c["name"])][0] for n in names) + " |")
    caught = {n: sum(results[(n, c["name"])][0] == "caught" for c in cases) for n in names}
    reported = {n: sum(results[(n, c["name"])][0] == "reported" for c in cases) for n in names}
    lines.append("| **caught** | | " + " | ".join("%d of %d" % (caught[n], len(cases)) for n in names) + " |")
    lines.append("| **reported** | | " + " | ".join(str(reported[n]) for n in names) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    if args.details:
        for n in names:
            for c in cases:
                cell, detail = results[(n, c["name"])]
                print("%-14s %-30s %-9s %s" % (n, c["name"], cell, detail))
    print("%d runs in %.1f s" % (len(names) * len(cases), elapsed))

    if args.expect_all_caught:
        n = args.expect_all_caught
        if args.required:
            required = set(args.required.split(","))
        elif args.profile and PROFILE_CASES[args.profile] is not None:
            required = set(PROFILE_CASES[args.profile])
        else:
            required = {c["name"] for c in cases}
        unknown = required - {c["name"] for c in cases}
        if unknown:
            sys.exit("run.py: --required: cases not run: " + ", ".join(sorted(unknown)))
        if windows:   # what the Windows build cannot catch by design is not required there
            for c in cases:
                m = c["name"]
                if m in required and m in WINDOWS_NOT_CAUGHT:
                    required.discard(m)
                    if results[(n, m)][0] == "caught":
                        print("%s: now caught on Windows, remove it from WINDOWS_NOT_CAUGHT: %s" % (n, m))
                    else:
                        print("%s: not required on Windows: %s (%s)" % (n, m, WINDOWS_NOT_CAUGHT[m]))
        missed = [c["name"] for c in cases if c["name"] in required and results[(n, c["name"])][0] != "caught"]
        unexpected = [m for m in missed if m not in EXPECTED_NOT_CAUGHT and m not in SOMETIMES_NOT_CAUGHT]
        for m in missed:
            if m in EXPECTED_NOT_CAUGHT:
                print("%s: expected not caught: %s (%s)" % (n, m, EXPECTED_NOT_CAUGHT[m]))
            elif m in SOMETIMES_NOT_CAUGHT:
                print("%s: not caught this time (accepted): %s (%s)" % (n, m, SOMETIMES_NOT_CAUGHT[m]))
        for c in cases:
            if c["name"] in EXPECTED_NOT_CAUGHT and c["name"] in required and c["name"] not in missed:
                print("%s: now caught, remove it from EXPECTED_NOT_CAUGHT: %s" % (n, c["name"]))
        lets_pass = PROFILE_LETS_PASS.get(args.profile, {}) if args.profile else {}
        stopped = [m for m in lets_pass if m in {c["name"] for c in cases} and results[(n, m)][0] == "caught"]
        if args.profile:
            extra = [c["name"] for c in cases if c["name"] not in required and c["name"] not in lets_pass
                     and results[(n, c["name"])][0] == "caught"]
            print("%s (profile %s): %d required cases, %d caught beyond them%s" %
                  (n, args.profile, len(required), len(extra), (": " + ", ".join(extra) if extra else "")))
        if unexpected:
            print("%s: NOT CAUGHT:" % n)
            for m in unexpected:
                print("  %-30s %s" % (m, results[(n, m)][1]))
        if stopped:
            print("%s: STOPPED, but profile %s lets it pass:" % (n, args.profile))
            for m in stopped:
                print("  %-30s %s (%s)" % (m, results[(n, m)][1], lets_pass[m]))
        if unexpected or stopped:
            return 1
        print("%s: every required case caught (but the expected ones)" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
