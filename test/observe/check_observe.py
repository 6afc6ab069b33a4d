#!/usr/bin/env python3
"""check_observe.py -- the statistics-as-data and heap-profiler tests.

  check_observe.py stats PROGRAM
      mi_stats_get_json parsed by Python's json module: every documented field
      present with its type and unit, the figures consistent, and equal to
      mi_stats_get's; MIMALLOC_SHOW_STATS=json prints one such object at exit;
      MIMALLOC_STATS_FILE with MIMALLOC_STATS_INTERVAL appends one object per
      line while the program runs.
      Then a process with large figures (1 GiB resident, and 4 TiB committed
      where the build does not write every new block) writes all three, the
      stats file at a path of about 1000 characters with %p in it many times.
  check_observe.py widest PROGRAM
      the JSON of a snapshot with every figure at its widest
      (observe-json-widest.c) parsed, and every figure read back exactly.
  check_observe.py prof PROGRAM WORKDIR [GO]
      the profile written by mi_prof_dump (and the one MIMALLOC_PROF_FILE
      writes at exit) decoded here (gzip, then protobuf by hand): the estimates
      per call site are within statistical bounds of what observe-sites.c
      allocates; then, with GO (the go command), the same from
      `go tool pprof -top`.

PROGRAM is test/observe/observe-sites.c (widest: observe-json-widest.c). Exit
status 0 when every check holds.
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

MiB = 1 << 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED: " + what)


# ---------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------

AMOUNT_ROWS = {  # name: unit
    "reserved": "bytes", "committed": "bytes", "reset": "bytes", "touched": "bytes",
    "segments": "count", "segments_abandoned": "count", "segments_cached": "count",
    "pages": "count", "pages_abandoned": "count", "threads": "count",
    "huge": "bytes", "giant": "bytes", "normal": "bytes", "malloc": "bytes",
}
EVENT_ROWS = ["pages_extended", "pages_retired", "mmap_calls", "commit_calls", "searches",
              "normal_count", "huge_count", "giant_count"]
PROCESS_FIELDS = ["pid", "elapsed_ms", "user_ms", "system_ms", "current_rss_bytes", "peak_rss_bytes",
                  "current_commit_bytes", "peak_commit_bytes", "page_faults", "numa_nodes"]
BIN_FIELDS = ["bin", "block_size", "unit", "current", "peak", "allocated", "freed"]


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def check_stats_object(obj, where, in_use=True):
    """Every field of the documented JSON object, with its type, unit and invariants."""
    expected = {"version", "mimalloc_version", "per_allocation", "bins", "process", "prof"}
    expected |= set(AMOUNT_ROWS) | set(EVENT_ROWS)
    check(set(obj) == expected, "%s: fields %s, expected %s" % (where, sorted(obj), sorted(expected)))
    check(obj.get("version") == 1, where + ": version 1")
    check(is_int(obj.get("mimalloc_version")), where + ": mimalloc_version is an integer")
    check(isinstance(obj.get("per_allocation"), bool), where + ": per_allocation is a boolean")
    for name, unit in AMOUNT_ROWS.items():
        row = obj.get(name, {})
        check(set(row) == {"unit", "current", "peak", "allocated", "freed"}, "%s: %s has its four figures and unit" % (where, name))
        check(row.get("unit") == unit, "%s: %s is in %s" % (where, name, unit))
        if not all(is_int(row.get(k)) for k in ("current", "peak", "allocated", "freed")):
            check(False, "%s: %s figures are integers" % (where, name))
            continue
        check(0 <= row["freed"], "%s: %s freed >= 0" % (where, name))
        check(row["current"] <= row["peak"], "%s: %s current <= peak" % (where, name))
        if name in ("reserved", "committed", "segments", "pages", "huge", "giant"):   # exact process rows
            check(row["current"] == row["allocated"] - row["freed"], "%s: %s current == allocated - freed" % (where, name))
    for name in EVENT_ROWS:
        row = obj.get(name, {})
        check(set(row) == {"unit", "total", "count"} and row.get("unit") == "count" and
              is_int(row.get("total")) and is_int(row.get("count")), "%s: %s is an event counter" % (where, name))
    check(obj["committed"]["current"] <= obj["reserved"]["current"], where + ": committed <= reserved")
    if in_use:   # (the first snapshot of a file may come before the first allocation)
        check(obj["reserved"]["current"] > 0 and obj["segments"]["current"] > 0, where + ": something is reserved")
    bins = obj.get("bins")
    check(isinstance(bins, list), where + ": bins is a list")
    if obj.get("per_allocation"):
        # (a snapshot from another thread, or after the exit-time collection
        # of debug builds, may come before any thread's counts were merged)
        check(len(bins) > 0 or not in_use, where + ": a per-allocation build lists the size classes in use")
    else:
        check(bins == [], where + ": a release build lists no size classes")
    for b in bins or []:
        check(set(b) == set(BIN_FIELDS) and b["unit"] == "count" and b["allocated"] > 0 and
              0 <= b["bin"] < 74 and is_int(b["block_size"]), "%s: bin entry %s" % (where, b))
    proc = obj.get("process", {})
    check(set(proc) == set(PROCESS_FIELDS) and all(is_int(proc[k]) and proc[k] >= 0 for k in proc),
          where + ": process has its fields, non-negative integers")
    check(proc.get("peak_rss_bytes", 0) >= proc.get("current_rss_bytes", 1) > 0, where + ": peak rss >= rss > 0")
    prof = obj.get("prof", {})
    check(set(prof) == {"sample_bytes", "live_samples"} and all(is_int(v) for v in prof.values()),
          where + ": prof has sample_bytes and live_samples")


def run(cmd, env=None, timeout=300):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("MIMALLOC_"):
            del e[k]
    e.update(env or {})
    return subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          universal_newlines=True)


def test_stats(program, workdir):
    # mi_stats_get_json, and mi_stats_get right after it
    p = run([program, "stats"])
    check(p.returncode == 0, "stats: exit code %d: %s" % (p.returncode, p.stderr))
    text, _, rest = p.stdout.partition("--\n")
    try:
        obj = json.loads(text)
    except ValueError as e:
        check(False, "mi_stats_get_json is not JSON: %s\n%s" % (e, text))
        return
    check_stats_object(obj, "mi_stats_get_json")
    for line in rest.splitlines():
        f = line.split()
        if f[0] == "version":
            check(int(f[1]) == obj["version"], "mi_stats_get version matches")
            continue
        row = obj[f[0]]
        got = [row["current"], row["peak"], row["allocated"], row["freed"]]
        check(got == [int(x) for x in f[1:]], "mi_stats_get %s %s == JSON %s" % (f[0], f[1:], got))

    # MIMALLOC_SHOW_STATS=json: one object on stderr at exit
    p = run([program, "churn", "50"], {"MIMALLOC_SHOW_STATS": "json"})
    check(p.returncode == 0, "show_stats=json: exit code %d" % p.returncode)
    try:
        check_stats_object(json.loads(p.stderr), "MIMALLOC_SHOW_STATS=json", in_use=False)   # (debug builds collect first)
    except ValueError as e:
        check(False, "MIMALLOC_SHOW_STATS=json output is not JSON: %s\n%s" % (e, p.stderr))

    # MIMALLOC_STATS_FILE + MIMALLOC_STATS_INTERVAL: JSON Lines while running,
    # also while the program does not allocate ("sleep"); %p is the pid
    for f in os.listdir(workdir):
        if f.startswith("stats-"):
            os.remove(os.path.join(workdir, f))
    for mode in ("churn", "sleep"):
        p = run([program, mode, "400"], {"MIMALLOC_STATS_FILE": os.path.join(workdir, "stats-%s-%%p.jsonl" % mode),
                                         "MIMALLOC_STATS_INTERVAL": "20"})
        check(p.returncode == 0 and p.stderr == "", "stats file: exit code %d, stderr %r" % (p.returncode, p.stderr))
        files = [f for f in os.listdir(workdir) if re.match(r"stats-%s-\d+\.jsonl$" % mode, f)]
        check(len(files) == 1, "stats file: one file named by the pid: %s" % files)
        lines = open(os.path.join(workdir, files[0])).read().splitlines() if files else []
        check(len(lines) >= 5, "stats file (%s): %d snapshots in 400 ms at 20 ms intervals (expected >= 5)" % (mode, len(lines)))
        times = check_lines(lines)
        check(len(times) > 0 and max(times) >= 350, "stats file (%s): the snapshots span the run: %s ms" % (mode, times))

    test_large(program, workdir, obj["per_allocation"])


def long_stats_path(workdir):
    """A MIMALLOC_STATS_FILE value of 1024 characters (the most a text option
    takes) ending in a file name of as many %p as fit a name of 255 bytes once
    expanded, and the directories it names (created). Expanded, it is longer
    than the 1100-byte buffer the writer once had whenever the process id has
    4 digits or more (then nothing was written, silently). Returns the value
    and a function giving the file name for a process id."""
    try:
        digits = len(open("/proc/sys/kernel/pid_max").read().strip())
    except OSError:
        digits = 7
    count = (255 - len("s.jsonl")) // digits
    name = "s" + "%p" * count + ".jsonl"
    d = os.path.abspath(os.path.join(workdir, "long"))
    room = 1024 - len(name) - 1 - len(d)   # for the directories below d
    while room > 1:
        part = min(200, room - 1)
        d = os.path.join(d, "d" * part)
        room -= part + 1
    shutil.rmtree(os.path.join(workdir, "long"), ignore_errors=True)
    os.makedirs(d)
    return os.path.join(d, name), (lambda pid: os.path.join(d, "s" + str(pid) * count + ".jsonl"))


def test_large(program, workdir, per_allocation):
    # 1 GiB written (resident) and, unless the build writes every new block
    # (the builds that count every allocation are the debug builds: a TiB
    # block would be touched whole), 4 TiB never touched (committed)
    resident, untouched = 1 << 30, (0 if per_allocation else 4 << 40)
    path, name_of = long_stats_path(workdir)
    check(len(path) == 1024, "the stats file option is %d characters, expected 1024" % len(path))
    p = run([program, "large", str(resident >> 20), str(untouched)],
            {"MIMALLOC_SHOW_STATS": "json", "MIMALLOC_STATS_FILE": path, "MIMALLOC_STATS_INTERVAL": "100000"})
    check(p.returncode == 0, "large: exit code %d: %s" % (p.returncode, p.stderr[-2000:]))
    outputs = [("large: mi_stats_get_json", p.stdout), ("large: MIMALLOC_SHOW_STATS=json", p.stderr)]
    try:
        pid = json.loads(p.stdout)["process"]["pid"]
        lines = open(name_of(pid)).read().splitlines()
        check(len(lines) >= 2, "large: %d snapshots in the stats file, expected 2 (start and exit)" % len(lines))
        outputs += [("large: stats file line %d" % (i + 1), line) for i, line in enumerate(lines)]
    except (ValueError, KeyError, OSError) as e:
        check(False, "large: no stats file at the long path: %s" % e)
    for where, text in outputs:
        try:
            obj = json.loads(text)
        except ValueError as e:
            check(False, "%s is not JSON: %s\n%s" % (where, e, text))
            continue
        longest = max(len(line) for line in text.splitlines())
        print("%s: %d bytes, longest line %d characters" % (where, len(text), longest))
        check_stats_object(obj, where, in_use=False)
        if where.endswith("line 1"):
            continue   # (the first snapshot may come before the blocks)
        proc = obj["process"]
        check(proc["peak_rss_bytes"] >= resident, "%s: peak rss %d >= %d" % (where, proc["peak_rss_bytes"], resident))
        check(proc["current_commit_bytes"] >= resident + untouched and obj["committed"]["current"] >= resident + untouched,
              "%s: committed %d >= %d" % (where, proc["current_commit_bytes"], resident + untouched))


def check_lines(lines):
    times, pid = [], None
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except ValueError as e:
            check(False, "stats file line %d is not JSON: %s" % (i + 1, e))
            continue
        check_stats_object(obj, "stats file line %d" % (i + 1), in_use=False)
        check(pid is None or obj["process"]["pid"] == pid, "stats file: one process")
        times.append(obj["process"]["elapsed_ms"])
        pid = obj["process"]["pid"]
    return times


def test_widest(program):
    """Every figure of observe-json-widest.c's snapshot, read back exactly."""
    proc = subprocess.Popen([program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    out, err = proc.communicate(timeout=60)
    check(proc.returncode == 0, "widest: exit code %d: %s" % (proc.returncode, err))
    try:
        obj = json.loads(out)
    except ValueError as e:
        check(False, "widest: not JSON: %s\n%s" % (e, out))
        return
    print("widest: %d bytes, longest line %d characters" % (len(out), max(len(line) for line in out.splitlines())))
    lo, hi, top = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
    amount = {"current": lo, "peak": hi, "allocated": lo + 1, "freed": hi - 1}
    expected = {"version", "mimalloc_version", "per_allocation", "bins", "process", "prof"}
    expected |= set(AMOUNT_ROWS) | set(EVENT_ROWS)
    check(set(obj) == expected, "widest: fields %s, expected %s" % (sorted(obj), sorted(expected)))
    check(obj.get("version") == 1 and obj.get("per_allocation") is True, "widest: version 1, per_allocation true")
    for name, unit in AMOUNT_ROWS.items():
        want = dict(amount, unit=unit)
        check(obj.get(name) == want, "widest: %s is %s, expected %s" % (name, obj.get(name), want))
    for name in EVENT_ROWS:
        want = {"unit": "count", "total": lo, "count": hi}
        check(obj.get(name) == want, "widest: %s is %s, expected %s" % (name, obj.get(name), want))
    bins = obj.get("bins", [])
    want = [dict(amount, bin=i, block_size=top, unit="count") for i in range(74)]
    check(bins == want, "widest: the 74 size classes with their figures: %s" % bins[:2])
    process = obj.get("process", {})
    check(process.get("pid") == proc.pid, "widest: process.pid %s, expected %d" % (process.get("pid"), proc.pid))
    want = {k: top for k in PROCESS_FIELDS if k != "pid"}
    got = {k: v for k, v in process.items() if k != "pid"}
    check(got == want, "widest: process figures %s, expected %s" % (got, want))
    check(obj.get("prof") == {"sample_bytes": top, "live_samples": top}, "widest: prof %s" % obj.get("prof"))


# ---------------------------------------------------------------------------
# The heap profile
# ---------------------------------------------------------------------------

def read_varint(data, i):
    """The varint at data[i:], and the index after it."""
    x = shift = 0
    while True:
        b = data[i]
        i += 1
        x |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return x, i


def pb_fields(data):
    """(field, wire type, value) of a protobuf message: ints for varints, bytes for the rest."""
    i, out = 0, []
    while i < len(data):
        key, i = read_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            n, i = read_varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire in (1, 5):
            n = (8 if wire == 1 else 4)
            value, i = data[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wire)
        out.append((field, wire, value))
    return out


def pb_packed(data):
    """The varints of a packed repeated field."""
    i, out = 0, []
    while i < len(data):
        x, i = read_varint(data, i)
        out.append(x)
    return out


def decode_profile(path):
    raw = gzip.open(path).read()
    strings, sample_types, samples, locations, functions, mappings = [], [], [], {}, {}, []
    period = drop = 0
    for field, wire, value in pb_fields(raw):
        if field == 6:
            strings.append(value.decode())
        elif field == 1:
            sample_types.append({f: v for f, _, v in pb_fields(value)})
        elif field == 2:
            locs, vals = [], []
            for f, w, v in pb_fields(value):
                if f == 1:
                    locs += pb_packed(v) if w == 2 else [v]
                elif f == 2:
                    vals += pb_packed(v) if w == 2 else [v]
            samples.append((locs, vals))
        elif field == 3:
            mappings.append({f: v for f, _, v in pb_fields(value)})
        elif field == 4:
            loc = {"function": 0}
            for f, w, v in pb_fields(value):
                if f == 1:
                    loc["id"] = v
                elif f == 3:
                    loc["address"] = v
                elif f == 4:
                    loc["function"] = dict((ff, vv) for ff, _, vv in pb_fields(v)).get(1, 0)
            locations[loc["id"]] = loc
        elif field == 5:
            fn = {f: v for f, _, v in pb_fields(value)}
            functions[fn[1]] = fn.get(2, 0)
        elif field == 12:
            period = value
        elif field == 7:
            drop = value
    types = ["%s/%s" % (strings[t.get(1, 0)], strings[t.get(2, 0)]) for t in sample_types]
    return {"types": types, "samples": samples, "locations": locations, "functions": functions,
            "strings": strings, "mappings": mappings, "period": period, "drop": strings[drop] if drop else ""}


def per_leaf_function(prof):
    """Values summed by the innermost named function of each sample."""
    totals = {}
    for locs, vals in prof["samples"]:
        name = "?"
        for lid in locs:
            fid = prof["locations"][lid]["function"]
            if fid:
                name = prof["strings"][prof["functions"][fid]]
                break
        t = totals.setdefault(name, [0] * len(vals))
        for k, v in enumerate(vals):
            t[k] += v
    return totals


# (site, inuse_space expected, alloc_space expected, relative bound): a
# block of `size` bytes is sampled with p = 1 - exp(-size/65536), and the
# estimate of n such blocks has a relative standard deviation of
# sqrt((1-p)/(n p)): 3.6% (small), 6.2% (big), 4.4% (freed), 8.8% (thread);
# the bounds are 5 of them (a false failure about once in 100,000 runs)
SITES = [
    ("site_small", 48 * MiB, 48 * MiB, 0.18),
    ("site_big", 16 * MiB, 16 * MiB, 0.31),
    ("site_huge", 32 * MiB, 32 * MiB, 0.001),
    ("site_freed", 0, 32 * MiB, 0.22),
    ("site_thread", 0, 8 * MiB, 0.45),
]
SAMPLE = 65536


def near(got, want, bound):
    return abs(got - want) <= bound * want if want else got == 0


def test_prof(program, workdir, go):
    dump = os.path.join(workdir, "dump.pb.gz")
    for f in os.listdir(workdir):
        if f.endswith(".pb.gz"):
            os.remove(os.path.join(workdir, f))
    p = run([program, "prof", dump], {"MIMALLOC_PROF_SAMPLE": str(SAMPLE),
                                      "MIMALLOC_PROF_FILE": os.path.join(workdir, "exit-%p.pb.gz")})
    check(p.returncode == 0 and p.stderr == "", "prof: exit code %d, stderr %r" % (p.returncode, p.stderr))
    at_exit = [f for f in os.listdir(workdir) if re.match(r"exit-\d+\.pb\.gz$", f)]
    check(len(at_exit) == 1, "MIMALLOC_PROF_FILE with %%p wrote one profile named by the pid: %s" % at_exit)
    for path in [dump] + [os.path.join(workdir, f) for f in at_exit]:
        prof = decode_profile(path)
        check(prof["types"] == ["alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"],
              "%s: sample types %s" % (path, prof["types"]))
        check(prof["period"] == SAMPLE, "%s: period %d" % (path, prof["period"]))
        check(len(prof["mappings"]) > 0, path + ": has mappings")
        totals = per_leaf_function(prof)
        print("%s: %s" % (os.path.basename(path), {k: v for k, v in totals.items() if k.startswith("site_")}))
        for site, inuse, alloc, bound in SITES:
            t = totals.get(site, [0, 0, 0, 0])
            check(near(t[3], inuse, bound), "%s: %s inuse_space %d, expected %d within %d%%" % (path, site, t[3], inuse, bound * 100))
            check(near(t[1], alloc, bound), "%s: %s alloc_space %d, expected %d within %d%%" % (path, site, t[1], alloc, bound * 100))
        check(totals.get("site_huge", [0])[0] == 4, path + ": site_huge: 4 objects (every huge block is sampled)")
        leaves = [n for n in totals if not n.startswith("site_")]
        check(all(not re.match(r"^(_?mi_|malloc$|free$)", n) for n in leaves),
              "%s: no sample ends in the allocator's own frames: %s" % (path, leaves))
    if go:
        for index, col in (("inuse_space", 3), ("alloc_space", 1)):
            p = run([go, "tool", "pprof", "-top", "-unit=B", "-sample_index=" + index, dump], timeout=600)
            check(p.returncode == 0, "go tool pprof: exit code %d: %s" % (p.returncode, p.stderr))
            print(p.stdout)
            flat = {}
            for line in p.stdout.splitlines():
                m = re.match(r"\s*(\d+)B\s+[\d.]+%\s+[\d.]+%\s+(\d+)B\s+[\d.]+%\s+(\S+)", line)
                if m:
                    flat[m.group(3)] = int(m.group(1))
            for site, inuse, alloc, bound in SITES:
                want = (inuse if col == 3 else alloc)
                check(near(flat.get(site, 0), want, bound),
                      "go tool pprof %s: %s flat %d, expected %d within %d%%" % (index, site, flat.get(site, 0), want, bound * 100))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "stats":
        workdir = sys.argv[3] if len(sys.argv) > 3 else "."
        os.makedirs(workdir, exist_ok=True)
        test_stats(sys.argv[2], workdir)
    elif len(sys.argv) == 3 and sys.argv[1] == "widest":
        test_widest(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "prof":
        os.makedirs(sys.argv[3], exist_ok=True)
        go = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] not in ("", "GO-NOTFOUND") else None
        if go is None:
            print("go not found: the profile is checked by this script's own decoder only")
        test_prof(sys.argv[2], sys.argv[3], go)
    else:
        print(__doc__)
        return 2
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
