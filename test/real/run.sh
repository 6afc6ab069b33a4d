#!/bin/bash
# Real programs, plain and with the allocator preloaded.
#
# usage: run.sh LIB OUTDIR
#   LIB     the shared library to preload (e.g. build/libmimalloc.so), or
#           "none" for a harness self-check where both runs are plain
#   OUTDIR  scratch directory for this run (emptied first)
#
# Runs programs that nobody here wrote, each twice, once plainly and once
# with LD_PRELOAD=LIB, and compares what they print and their exit codes:
#   python      CPython (/usr/bin/python3) running a slice of its own
#               regression test suite (python3 -m test -j2 ...), with
#               PYTHONMALLOC=malloc so every object goes through malloc;
#               compares exit code, result line and every test case outcome
#   git         a repository with commits, a branch, a merge, log/diff/blame,
#               gc and fsck, with fixed dates so all object ids are fixed
#   gcc         gcc -O2 -g compiling and linking a 4-file C program, and the
#               program's output; the objects and executable must be
#               byte-identical too
#   sqlite      the sqlite3 shell: tables filled by recursive CTEs, indexes,
#               joins, group by, window functions, updates, deletes, vacuum
#   containers  containers.cpp: 4 std::threads passing std containers and
#               shared_ptrs through mutex-protected queues (built with plain
#               g++, not linked with the allocator)
# The preloaded runs get MIMALLOC_SHOW_ERRORS=1, and any error or warning the
# library prints there counts as a difference too (except "unable to
# allocate" for requests that fail anyway, as glibc's would, silently).
# It also proves the library was in use: each preloaded program is run once
# more, with MIMALLOC_VERBOSE=1 and a tiny workload, and every process must
# announce itself ("mimalloc: process init", or the option list the library
# prints at load; for gcc that is 5 processes: the driver, cc1, as, collect2
# and ld), and the preloaded runs' stderr must not contain ld.so's "cannot
# be preloaded".  At the end it prints a table with wall time and peak RSS
# (ru_maxrss: the largest single process of the run) of both runs.
# Exits 0 only if every program gave the same result both ways, the plain
# runs succeeded, and the library was in use.
#
# Environment:
#   MI_REAL_QUICK=1      smaller workloads (for slow Debug/full-checking builds)
#   MI_REAL_ONLY="a b"   run only these programs (python git gcc sqlite containers)
#   MI_REAL_TIMEOUT=N    seconds before a single run is killed (default 900)
# Needs (Debian): python3 libpython3.11-testsuite git gcc g++ sqlite3
set -euo pipefail

if [ $# -ne 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
out=$2
if [ "$1" = none ]; then
  lib=""
else
  lib=$(realpath "$1")
  [ -f "$lib" ] || { echo "run.sh: no such library: $1" >&2; exit 2; }
fi
quick=${MI_REAL_QUICK:-0}
[ "$quick" = 0 ] && quick=""
only=${MI_REAL_ONLY:-python git gcc sqlite containers}
timeout=${MI_REAL_TIMEOUT:-900}

if [ -n "$quick" ]; then
  py_modules="test_thread test_queue test_json test_dict test_set test_collections test_struct test_weakref"
  git_scale=40 gcc_funcs=150 gcc_rounds=50000 sqlite_rows=30000 containers_items=30000
else
  py_modules="test_threading test_thread test_queue test_json test_re test_dict test_list test_set"
  py_modules="$py_modules test_collections test_functools test_bytes test_unicode test_itertools test_weakref test_gc"
  git_scale=150 gcc_funcs=1000 gcc_rounds=200000 sqlite_rows=200000 containers_items=200000
fi

# A fixed, clean environment for both runs.
export LC_ALL=C TZ=UTC
unset LD_PRELOAD MIMALLOC_VERBOSE MIMALLOC_SHOW_STATS PYTHONPATH PYTHONHOME PYTHONSTARTUP PYTHONMALLOC || true

# ---- prerequisites ---------------------------------------------------------
missing=""
[ -x "$py" ] || missing="$missing python3"
for m in $py_modules; do
  [ -x "$py" ] && "$py" -c "import importlib.util as u, sys; sys.exit(u.find_spec('test.$m') is None)" 2>/dev/null \
    || { missing="$missing libpython3.11-testsuite"; break; }
done
command -v git >/dev/null || missing="$missing git"
command -v gcc >/dev/null || missing="$missing gcc"
command -v g++ >/dev/null || missing="$missing g++"
command -v sqlite3 >/dev/null || missing="$missing sqlite3"
if [ -n "$missing" ]; then
  echo "run.sh: missing programs; install them with: apt-get install -y$missing" >&2
  exit 2
fi

rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "real programs: library=${lib:-none (self-check: both runs plain)} quick=${quick:-0} out=$out"

# ---- helpers ---------------------------------------------------------------
# measured PROG MODE CWD CMD...: run CMD in CWD, plain or preloaded, recording
# $out/PROG/MODE/{stdout,stderr,meta}.
measured() {
  local prog=$1 mode=$2 cwd=$3; shift 3
  local d=$out/$prog/$mode
  mkdir -p "$d" "$cwd"
  local envcmd=(env -u LD_PRELOAD)
  [ "$mode" = preload ] && [ -n "$lib" ] && envcmd=(env LD_PRELOAD="$lib" MIMALLOC_SHOW_ERRORS=1)
  "$py" "$here/measure.py" "$d/meta" "$d/stdout" "$d/stderr" "$timeout" "$cwd" -- "${envcmd[@]}" "$@"
}

meta() {  # meta PROG MODE KEY
  sed -n "s/.*\b$3=\([^ ]*\).*/\1/p" "$out/$1/$2/meta"
}

# normalised TEXTFILE...: the files' content with the run's own directory
# replaced, so that plain and preloaded runs (in different dirs) compare.
normalised() {
  sed -e "s#$out/[a-z]*/plain#<RUNDIR>#g" -e "s#$out/[a-z]*/preload#<RUNDIR>#g" "$@"
}

# normalised_err FILE: like normalised, without mimalloc's messages about
# failed allocations (see compare).
normalised_err() {
  normalised "$1" | grep -Ev '^mimalloc: .*(unable to allocate (OS )?memory|allocation request is too large)' || true
}

# proof PROG MIN CMD...: with the library preloaded and MIMALLOC_VERBOSE=1,
# at least MIN processes of CMD must announce the library; writes "yes(N)"
# or "NO(...)" to $out/PROG/proof.txt (output in $out/PROG/proof/).
proof() {
  local prog=$1 min=$2; shift 2
  local d=$out/$prog/proof
  mkdir -p "$d"
  if [ -z "$lib" ]; then echo "n/a" > "$out/$prog/proof.txt"; return; fi
  "$py" "$here/measure.py" "$d/meta" "$d/stdout" "$d/stderr" 300 "$d" -- \
    env LD_PRELOAD="$lib" MIMALLOC_VERBOSE=1 "$@"
  # Processes that loaded the library: each prints "process init" or, if a
  # C++ runtime allocated before the library's constructor ran (then the
  # environment is not read yet when init runs), at least its option list.
  local n ni no
  ni=$(cat "$d/stdout" "$d/stderr" | grep -c 'mimalloc: process init' || true)
  no=$(cat "$d/stdout" "$d/stderr" | grep -c "mimalloc: option 'show_errors'" || true)
  n=$(( ni > no ? ni : no ))
  if grep -q 'cannot be preloaded' "$out/$prog/preload/stderr" "$d/stderr"; then
    echo "NO(ld.so)" > "$out/$prog/proof.txt"
  elif [ "$n" -ge "$min" ]; then
    echo "yes($n)" > "$out/$prog/proof.txt"
  else
    echo "NO($n<$min)" > "$out/$prog/proof.txt"
  fi
}

# ---- the programs ----------------------------------------------------------
# Each prog_X MODE does the run and writes $out/X/MODE/result, the text that
# must be the same for both modes.

prog_python() {
  local mode=$1 d=$out/python/$1
  # shellcheck disable=SC2086
  measured python "$mode" "$d/work" env PYTHONMALLOC=malloc "$py" -s -m test -j2 \
    --junit-xml "$d/junit.xml" $py_modules || true
  {
    echo "exit $(meta python "$mode" exit)"
    grep -E '^(== )?(Tests result|Result):|^(All )?[0-9]+ tests? |^[0-9]+ tests? ' "$d/stdout" | sort || true
    if [ -s "$d/junit.xml" ]; then "$py" "$here/junit_summary.py" "$d/junit.xml"; else echo "no junit xml"; fi
  } > "$d/result" 2>&1
}

prog_git() {
  local mode=$1 d=$out/git/$1
  measured git "$mode" "$d" bash "$here/git-work.sh" "$d/repo" "$git_scale" || true
  {
    echo "exit $(meta git "$mode" exit)"
    normalised "$d/stdout"
    echo "--- stderr"
    normalised_err "$d/stderr"
  } > "$d/result"
}

prog_gcc() {
  local mode=$1 d=$out/gcc/$1
  measured gcc "$mode" "$out/gcc/src" bash "$here/cprog/build.sh" "$out/gcc/src" "$d/build" "$gcc_rounds" || true
  {
    echo "exit $(meta gcc "$mode" exit)"
    normalised "$d/stdout"
    echo "--- stderr"
    normalised_err "$d/stderr"
    echo "--- outputs (compared byte for byte below)"
    (cd "$d/build" 2>/dev/null && ls -1) || true
  } > "$d/result"
}

prog_sqlite() {
  local mode=$1 d=$out/sqlite/$1
  measured sqlite "$mode" "$d" sqlite3 -batch -init /dev/null "$d/db.sqlite" ".bail on" ".read $out/sqlite/work.sql" || true
  {
    echo "exit $(meta sqlite "$mode" exit)"
    normalised "$d/stdout"
    echo "--- stderr"
    normalised_err "$d/stderr"
  } > "$d/result"
}

prog_containers() {
  local mode=$1 d=$out/containers/$1
  measured containers "$mode" "$d" "$out/containers/containers" "$containers_items" || true
  {
    echo "exit $(meta containers "$mode" exit)"
    normalised "$d/stdout"
    echo "--- stderr"
    normalised_err "$d/stderr"
  } > "$d/result"
}

# ---- preparation (not measured, never preloaded) ---------------------------
prepare() {
  case $1 in
    gcc)
      mkdir -p "$out/gcc/src"
      cp "$here"/cprog/*.c "$here"/cprog/*.h "$out/gcc/src/"
      "$py" "$here/cprog/gen_c.py" "$gcc_funcs" > "$out/gcc/src/gen.c" ;;
    sqlite)
      mkdir -p "$out/sqlite"
      sed "s/@ROWS@/$sqlite_rows/g" "$here/sqlite-work.sql" > "$out/sqlite/work.sql" ;;
    containers)
      mkdir -p "$out/containers"
      g++ -O2 -pthread -o "$out/containers/containers" "$here/containers.cpp" ;;
  esac
}

prove() {
  case $1 in
    python) proof python 2 "$py" -c 'import subprocess, sys; sys.exit(subprocess.call([sys.executable, "-c", "import threading, json"]))' ;;
    git) proof git 2 bash -c 'git --version' ;;
    gcc) printf 'int main(void) { return 0; }\n' > "$out/gcc/proof.c"
         proof gcc 5 gcc -O2 -o "$out/gcc/proof/a.out" "$out/gcc/proof.c" ;;
    sqlite) proof sqlite 1 sqlite3 -batch -init /dev/null :memory: 'select 1;' ;;
    containers) proof containers 1 "$out/containers/containers" 100 ;;
  esac
}

# compare PROG: "same" or "DIFFERENT (...)" into $out/PROG/verdict
compare() {
  local p=$1 why=""
  cmp -s "$out/$p/plain/result" "$out/$p/preload/result" || why="output"
  # With MIMALLOC_SHOW_ERRORS=1 (and no verbose), any "mimalloc:" line is
  # an error or warning the library reported (python's -j2 workers' output
  # ends up in its stdout), except for failed allocations: a program that
  # asks for absurd sizes on purpose (CPython's tests do) gets NULL from
  # glibc silently, and from mimalloc with a message.
  grep -h 'mimalloc:' "$out/$p/preload/stdout" "$out/$p/preload/stderr" \
    | grep -Ev '^mimalloc: .*(unable to allocate (OS )?memory|allocation request is too large)' \
    > "$out/$p/preload/mimalloc-messages" && why="${why:+$why,}mimalloc-messages"
  if [ "$p" = gcc ]; then
    local f
    for f in main.o table.o text.o gen.o prog; do
      cmp -s "$out/gcc/plain/build/$f" "$out/gcc/preload/build/$f" 2>/dev/null || why="${why:+$why,}$f"
    done
  fi
  local m
  for m in plain preload; do
    [ "$(meta "$p" $m timeout)" = 1 ] && why="${why:+$why,}$m-TIMEOUT"
  done
  if [ -n "$why" ]; then
    echo "DIFFERENT($why)" > "$out/$p/verdict"
  elif [ "$(meta "$p" plain exit)" != 0 ]; then
    echo "PLAIN-FAILED" > "$out/$p/verdict"
  else
    echo "same" > "$out/$p/verdict"
  fi
}

# ---- run -------------------------------------------------------------------
t_start=$(date +%s)
for p in $only; do
  case $p in python|git|gcc|sqlite|containers) ;; *) echo "run.sh: unknown program $p" >&2; exit 2 ;; esac
  echo "== $p"
  prepare "$p"
  "prog_$p" plain
  "prog_$p" preload
  prove "$p"
  compare "$p"
  echo "   $(cat "$out/$p/verdict"), mimalloc in use: $(cat "$out/$p/proof.txt")," \
       "wall $(meta "$p" plain wall)s / $(meta "$p" preload wall)s"
done

# ---- report ----------------------------------------------------------------
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
fail=0 npass=0 nfail=0
summary=$out/summary.txt
{
  echo
  printf '%-11s %-20s %-9s %-13s %-17s %s\n' program result exit wall-s peak-RSS-MiB mimalloc-in-use
  printf '%-11s %-20s %-9s %-13s %-17s %s\n' "" "" plain/pre plain/pre plain/pre ""
  for p in $only; do
    v=$(cat "$out/$p/verdict") u=$(cat "$out/$p/proof.txt")
    printf '%-11s %-20s %-9s %-13s %-17s %s\n' "$p" "$v" \
      "$(meta "$p" plain exit)/$(meta "$p" preload exit)" \
      "$(meta "$p" plain wall)/$(meta "$p" preload wall)" \
      "$(mib "$(meta "$p" plain maxrss_kib)")/$(mib "$(meta "$p" preload maxrss_kib)")" "$u"
  done
  echo
  echo "total time $(( $(date +%s) - t_start ))s; details in $out/<program>/{plain,preload}/"
} > "$summary"
cat "$summary"
for p in $only; do
  v=$(cat "$out/$p/verdict") u=$(cat "$out/$p/proof.txt")
  if [ "$v" = same ] && { [ "$u" = n/a ] || [ "${u#yes}" != "$u" ]; }; then
    npass=$((npass + 1))
  else
    nfail=$((nfail + 1)); fail=1
  fi
done

for p in $only; do
  if [ "$(cat "$out/$p/verdict")" != same ]; then
    echo
    echo "== $p: $(cat "$out/$p/verdict"); diff of plain vs preloaded result (first 40 lines):"
    diff "$out/$p/plain/result" "$out/$p/preload/result" | head -n 40 || true
    if [ -s "$out/$p/preload/mimalloc-messages" ]; then
      echo "-- mimalloc messages in the preloaded run (first 20):"
      head -n 20 "$out/$p/preload/mimalloc-messages"
    fi
    echo "-- preloaded stderr (last 20 lines):"
    tail -n 20 "$out/$p/preload/stderr" || true
  fi
done
echo "summary: $npass passed, $nfail failed"
exit $fail
