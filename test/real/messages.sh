#!/usr/bin/env bash
# messages.sh LIB -- what a user sees on stderr when running real programs
# with the library preloaded:
#   - statistics at exit (MIMALLOC_SHOW_STATS=1) from ls, sort and cat, which
#     close their stderr before they exit;
#   - the warning for a mistake in the environment, once and as written,
#     whatever MIMALLOC_SHOW_ERRORS says, and the program's own output intact.
set -u
lib=${1:?usage: messages.sh LIB}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passed=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { passed=$((passed + 1)); }

printf 'b\na\nc\n' > "$tmp/input"
ls / > "$tmp/ls.plain"

# 1. Statistics from programs that close stderr
for cmd in "ls /" "sort $tmp/input" "cat $tmp/input"; do
  env MIMALLOC_SHOW_STATS=1 LD_PRELOAD="$lib" $cmd > "$tmp/out" 2> "$tmp/err"
  rc=$?
  if [ $rc -ne 0 ]; then fail "$cmd: exit code $rc"; continue; fi
  if grep -q '^heap stats:' "$tmp/err" && grep -q '^   process: user: ' "$tmp/err"; then
    pass
  else
    fail "$cmd with MIMALLOC_SHOW_STATS=1: no statistics on stderr"; sed 's/^/  | /' "$tmp/err"
  fi
done

# 2. Mistakes in the environment: "VARIABLE=value|expected line"
cases=(
  "MIMALLOC_SHOW_STATS=ye|mimalloc: warning: MIMALLOC_SHOW_STATS=ye is not a valid value (use 1, true, yes, on or 0, false, no, off, or json); the default 0 is used"
  "mimalloc_Show_Stats=Ye|mimalloc: warning: mimalloc_Show_Stats=Ye is not a valid value (use 1, true, yes, on or 0, false, no, off, or json); the default 0 is used"
  "MIMALLOC_ARENA_EAGER_COMMIT=1|mimalloc: warning: MIMALLOC_ARENA_EAGER_COMMIT=1 is not a mimalloc option and is ignored"
  "MIMALLOC_RESET_DELAY=-5|mimalloc: warning: MIMALLOC_RESET_DELAY=-5 is out of range (0 to 86400000); the default 100 is used"
  "MIMALLOC_OS_TAG=Twelve|mimalloc: warning: MIMALLOC_OS_TAG=Twelve is not a valid value (use an integer from 100 to 255); the default 100 is used"
)
for c in "${cases[@]}"; do
  var=${c%%|*}
  expected=${c#*|}
  for show in "" "MIMALLOC_SHOW_ERRORS=0" "MIMALLOC_SHOW_ERRORS=1"; do
    env $show "$var" LD_PRELOAD="$lib" ls / > "$tmp/out" 2> "$tmp/err"
    rc=$?
    if [ $rc -ne 0 ]; then fail "$var $show ls: exit code $rc"; continue; fi
    if [ "$(cat "$tmp/err")" != "$expected" ]; then
      fail "$var $show ls: expected exactly '$expected' on stderr"; sed 's/^/  | /' "$tmp/err"
    elif ! cmp -s "$tmp/out" "$tmp/ls.plain"; then
      fail "$var $show ls: its output changed"
    else
      pass
    fi
  done
done

echo "messages: $passed passed, $failures failed"
[ $failures -eq 0 ]
