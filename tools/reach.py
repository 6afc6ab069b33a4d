#!/usr/bin/env python3
"""reach.py -- how much of the library a function reaches through direct calls.

For each entry function named on the command line, print how many distinct
library functions it can reach by following direct calls (the entry itself
included), in how many distinct source files those functions are defined,
and which functions outside the library (libc, compiler built-ins) it calls.

    python3 tools/reach.py [--src DIR] [--build DIR] [--opt FLAGS] [--list] \\
        mi_malloc _mi_malloc_generic mi_free mi_thread_done

How it works
  1. Configure and build the shared library target `mimalloc` with CMake:
       cmake -S SRC -B BUILD -DCMAKE_BUILD_TYPE=Release -DMI_BUILD_TESTS=OFF
             -DMI_BUILD_BENCH=OFF -DCMAKE_C_COMPILER=gcc
             -DCMAKE_C_FLAGS="-fcallgraph-info [--cflags]"
             -DCMAKE_C_FLAGS_RELEASE="[--opt, default -O3] -DNDEBUG"
       cmake --build BUILD --target mimalloc -j1
     gcc's -fcallgraph-info writes, beside each object, a .ci file (VCG) with
     one `node:` per function (label "name\\nfile:line:col"; functions
     without a body in the unit carry `shape : ellipse`) and one `edge:` per
     call site.  Only the objects of that one target (BUILD/CMakeFiles/
     mimalloc.dir) are read, so nothing is counted twice.  NOTE: in this
     tree every library target is built from the single unit src/static.c,
     which #includes the layer files; there is one .ci file, and a function's
     file is the file its label names (src/segment.c, not src/static.c).
     A build of one object per source file would work the same way.
  2. Merge the nodes of all .ci files: a function with a body is keyed by
     (name, file), so static functions of the same name in different files
     stay apart while an exported function's declarations in other units
     merge with its one definition.  gcc's clones (foo.part.0,
     foo.constprop.0, foo.isra.0, foo.cold, foo.localalias) are folded into
     foo.  A function whose first declaration is a system header (malloc,
     mallinfo2, ...) is labelled with that header; its file is then looked
     up in the sources (the top-level line that defines it).
  3. Walk the edges breadth first from each entry.  A callee without a body
     in the build (memset, mmap, pthread_*, __builtin_*) is "external": it
     is listed, not followed.

What the numbers do NOT include
  * Indirect calls (through function pointers: the output callback, the
    deferred-free hook, atexit/pthread_key destructors, the new_handler)
    cannot be followed: gcc records them only as a placeholder node
    `__indirect_call`.  The output says how many of the reached functions
    make such calls.
  * Calls removed by the compiler: at -O2/-O3 a callee that was inlined is
    no edge at all (its own direct calls are attributed to the caller), and
    a single-unit build inlines across files.  So the optimised graph is
    the machine-code call graph; for the source-level call graph measure
    with --opt=-O0 (or --cflags=-fno-inline), where every function is a
    node.  Calls the optimiser proved dead are gone too.
  * Functions reached only through asm or aliases (e.g. __libc_malloc ->
    malloc): an alias is no node of its own.

Other options: --list prints the reachable functions grouped by file;
--no-build reads the .ci files of an existing --build directory;
--cmake-arg passes e.g. -DMI_SECURE=ON on to CMake.  The build directory
defaults to a temporary directory, removed afterwards (--keep keeps it).
Python 3 standard library only.
"""

import argparse
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

NODE_RE = re.compile(r'^node: \{ title: "((?:[^"\\]|\\.)*)" label: "((?:[^"\\]|\\.)*)"(.*)\}\s*$')
EDGE_RE = re.compile(r'^edge: \{ sourcename: "((?:[^"\\]|\\.)*)" targetname: "((?:[^"\\]|\\.)*)"'
                     r'(?: label: "((?:[^"\\]|\\.)*)")?')
CLONE_RE = re.compile(r'(?:\.(?:constprop|isra|part|cold|localalias|lto_priv|clone|specialized)(?:\.\d+)?)+$')
INDIRECT = "__indirect_call"


def split_title(title):
    """gcc titles a static function "UNIT:name", an exported one "name"."""
    if ":" in title:
        unit, name = title.rsplit(":", 1)
        return unit, name
    return None, title


def canon(name):
    """foo.part.0, foo.constprop.0, foo.localalias ... -> foo"""
    return CLONE_RE.sub("", name)


def run(cmd, **kw):
    print("+ " + shlex.join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, **kw)


def build(src, bld, args):
    """Configure and build the target; return its object directory."""
    flags = " ".join(["-fcallgraph-info"] + ([args.cflags] if args.cflags else []))
    cmd = ["cmake", "-S", src, "-B", bld,
           "-DCMAKE_BUILD_TYPE=Release", "-DMI_BUILD_TESTS=OFF", "-DMI_BUILD_BENCH=OFF",
           "-DCMAKE_C_COMPILER=gcc", "-DCMAKE_C_FLAGS=" + flags,
           "-DCMAKE_C_FLAGS_RELEASE=" + args.opt + " -DNDEBUG"] + args.cmake_arg
    run(cmd, stdout=subprocess.DEVNULL)
    objdir = target_dir(bld, args.target)
    # stale .ci/.o (another source list, other flags): remove them, so that
    # every .ci read below comes from this build
    if os.path.isdir(objdir):
        for root, _dirs, files in os.walk(objdir):
            for f in files:
                if f.endswith((".ci", ".o")):
                    os.remove(os.path.join(root, f))
    run(["cmake", "--build", bld, "--target", args.target, "-j", str(args.jobs)],
        stdout=subprocess.DEVNULL)
    return objdir


def target_dir(bld, target):
    return os.path.join(bld, "CMakeFiles", target + ".dir")


def ci_files(objdir):
    out = []
    for root, _dirs, files in os.walk(objdir):
        out += [os.path.join(root, f) for f in files if f.endswith(".ci")]
    return sorted(out)


class Graph:
    def __init__(self, src):
        self.src = os.path.realpath(src)
        self.funcs = {}                            # key (name, file) -> set of gcc titles
        self.defined = {}                          # gcc title -> key
        self.calls = collections.defaultdict(set)  # key -> keys of library callees
        self.ext = collections.defaultdict(set)    # key -> names of external callees
        self.indirect = collections.Counter()      # key -> indirect call sites
        self.units = []
        self._defs_cache = None

    def relfile(self, path):
        real = os.path.realpath(path)
        if real.startswith(self.src + os.sep):
            return os.path.relpath(real, self.src)
        return None

    def find_definition(self, name):
        """The source file that defines name at top level (for the functions
        whose first declaration, hence gcc's label, is a system header)."""
        if self._defs_cache is None:
            self._defs_cache = {}
            for sub in ("src", "include"):
                for root, _d, files in os.walk(os.path.join(self.src, sub)):
                    for f in files:
                        if f.endswith((".c", ".h")):
                            p = os.path.join(root, f)
                            with open(p, errors="replace") as fh:
                                self._defs_cache[os.path.relpath(p, self.src)] = fh.read().splitlines()
        # a top-level line naming it before any "(", ";" or "=", with a body
        # or not ending in ";" (a prototype or an alias does)
        pat = re.compile(r'^[A-Za-z_][^;=(]*\b' + re.escape(name) + r'\s*\(')
        attr = re.compile(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*')
        hits = [f for f, lines in self._defs_cache.items()
                if any(pat.match(attr.sub("", l)) and ("{" in l or not l.rstrip().endswith(";"))
                       for l in lines)]
        hits = [f for f in hits if f.endswith(".c")] or hits
        return hits[0] if len(hits) == 1 else None

    def read(self, paths):
        edges = []
        for path in paths:
            self.units.append(path)
            with open(path, errors="replace") as fh:
                for line in fh:
                    m = NODE_RE.match(line)
                    if m:
                        title, label, rest = m.groups()
                        if title == INDIRECT or "ellipse" in rest:
                            continue                         # no body in this unit
                        parts = label.split("\\n")
                        name = canon(parts[0])
                        loc = parts[1] if len(parts) > 1 else ""
                        file = loc.rsplit(":", 2)[0] if loc.count(":") >= 2 else loc
                        rel = self.relfile(file) or self.find_definition(name) or file
                        key = (name, rel)
                        self.funcs.setdefault(key, set()).add(title)
                        self.defined[title] = key
                        continue
                    m = EDGE_RE.match(line)
                    if m:
                        edges.append((m.group(1), m.group(2)))
        for a, b in edges:
            ka = self.resolve(a)
            kb = self.resolve(b)
            if not isinstance(ka, tuple):
                continue                                     # (an edge from a body-less node: none expected)
            if kb == INDIRECT:
                self.indirect[ka] += 1
            elif isinstance(kb, tuple):
                if kb != ka:
                    self.calls[ka].add(kb)
            else:
                self.ext[ka].add(kb)

    def resolve(self, title):
        """A title -> the key of a library function, or an external name."""
        if title == INDIRECT:
            return INDIRECT
        if title in self.defined:
            return self.defined[title]
        unit, name = split_title(title)
        base = canon(name)
        for t in ((unit + ":" + base) if unit else None, base):
            if t and t in self.defined:
                return self.defined[t]
        return base

    def lookup(self, name):
        """Entry "name" or "file:name" -> keys."""
        file = None
        if ":" in name:
            file, name = name.rsplit(":", 1)
        return [k for k in self.funcs if k[0] == name and (file is None or k[1] == file)]

    def reach(self, roots):
        seen = set(roots)
        todo = collections.deque(roots)
        while todo:
            k = todo.popleft()
            for c in self.calls.get(k, ()):
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
        ext = set()
        for k in seen:
            ext |= self.ext.get(k, set())
        return seen, ext


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="See the module docstring for what is and is not counted.")
    ap.add_argument("entries", nargs="+", metavar="FUNCTION",
                    help="entry functions (name, or FILE:name for a static one, e.g. src/free.c:mi_free_generic)")
    ap.add_argument("--src", default=here, help="source tree (default: the repository holding this script)")
    ap.add_argument("--build", help="build directory (default: a temporary one)")
    ap.add_argument("--opt", default="-O3", help="optimisation flags for the Release build (default -O3, "
                    "CMake's own; -O0 gives the source-level call graph)")
    ap.add_argument("--cflags", default="", help="extra C flags, e.g. -fno-inline")
    ap.add_argument("--cmake-arg", action="append", default=[], help="extra CMake argument (repeatable)")
    ap.add_argument("--target", default="mimalloc", help="CMake target whose objects are read (default mimalloc)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="build jobs (default 1)")
    ap.add_argument("--no-build", action="store_true", help="read the .ci files of an existing --build")
    ap.add_argument("--keep", action="store_true", help="keep the temporary build directory")
    ap.add_argument("--list", action="store_true", help="list the reachable functions, grouped by file")
    args = ap.parse_args()

    if args.no_build and not args.build:
        ap.error("--no-build needs --build")
    bld = os.path.abspath(args.build) if args.build else tempfile.mkdtemp(prefix="reach-build-")
    try:
        objdir = target_dir(bld, args.target) if args.no_build else build(os.path.abspath(args.src), bld, args)
        paths = ci_files(objdir)
        if not paths:
            sys.exit("reach.py: no .ci files under %s (was it built with -fcallgraph-info?)" % objdir)
        g = Graph(args.src)
        g.read(paths)
    finally:
        if not args.build and not args.keep:
            shutil.rmtree(bld, ignore_errors=True)
        elif not args.build:
            print("build kept in " + bld, file=sys.stderr)

    print("# %d unit(s) of target %s: %s; %s; %d library functions, %d call edges"
          % (len(paths), args.target, ", ".join(os.path.relpath(p, objdir) for p in paths),
             " ".join(filter(None, [args.opt, args.cflags])), len(g.funcs), sum(len(v) for v in g.calls.values())))
    print("# direct calls only (indirect calls are not followed); counts include the entry")
    print("%-28s %9s %6s %9s %9s" % ("entry", "functions", "files", "external", "indirect"))
    results = []
    status = 0
    for e in args.entries:
        roots = g.lookup(e)
        if not roots:
            print("%-28s not found in the build" % e)
            status = 1
            continue
        seen, ext = g.reach(roots)
        files = {k[1] for k in seen}
        ind = sum(1 for k in seen if g.indirect.get(k))
        note = "" if len(roots) == 1 else "  (%d functions of that name)" % len(roots)
        print("%-28s %9d %6d %9d %9d%s" % (e, len(seen), len(files), len(ext), ind, note))
        results.append((e, seen, ext))
    print("# external: distinct callees outside the library; indirect: reached functions with an indirect call")
    for e, seen, ext in results:
        print("\n%s -- external callees: %s" % (e, ", ".join(sorted(ext)) or "none"))
        if args.list:
            byfile = collections.defaultdict(list)
            for name, f in seen:
                byfile[f].append(name)
            for f in sorted(byfile, key=lambda f: (-len(byfile[f]), f)):
                print("  %s (%d): %s" % (f, len(byfile[f]), " ".join(sorted(byfile[f]))))
    return status


if __name__ == "__main__":
    sys.exit(main())
