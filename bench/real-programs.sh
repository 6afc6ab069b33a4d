#!/usr/bin/env bash
# real-programs.sh -- allocation-bound real programs under several allocators.
#
# Runs Python (every object through malloc, and with its own small-object
# allocator), sort and sqlite3 on generated inputs, each ROUNDS times per
# allocator with the runs interleaved, and prints the median user+system time
# and the median peak RSS per program and allocator. Allocators are given as
# NAME=LIB (LIB preloaded; an empty LIB means the system malloc).
#
# usage: bench/real-programs.sh [-r ROUNDS] NAME=LIB ...
#   e.g. bench/real-programs.sh release=build/libmimalloc.so \
#          secure=build-sec/libmimalloc-secure.so glibc=
set -euo pipefail
rounds=5
if [[ "${1:-}" == "-r" ]]; then rounds=$2; shift 2; fi
(( $# > 0 )) || { sed -n 2,13p "$0"; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=$(command -v python3)

# inputs: fixed seeds, so every run does the same work
python3 - "$work" <<'EOF'
import random, sys
work = sys.argv[1]
random.seed(1)
with open(f"{work}/sort.txt", "w") as f:
    for i in range(600000):
        f.write("%x %s\n" % (random.getrandbits(64), "x" * random.randint(1, 40)))
with open(f"{work}/objects.py", "w") as f:
    f.write("""d = {}
for i in range(300000):
    d[str(i)] = [i, str(i) * 3, {'k': i}]
s = sorted(d.items(), key=lambda kv: kv[1][1])
t = [x[1][1].upper() for x in s]
print(len(t))
""")
EOF
sed 's/@ROWS@/200000/g' "$here/../test/real/sqlite-work.sql" > "$work/sqlite.sql"

programs=(
  "python-malloc|env PYTHONMALLOC=malloc $py $work/objects.py"
  "python-pymalloc|$py $work/objects.py"
  "sort|sort $work/sort.txt -o $work/sorted.txt"
)
if command -v sqlite3 > /dev/null; then programs+=("sqlite3|sqlite3 :memory: < $work/sqlite.sql"); fi

printf '%-16s %-12s %10s %10s\n' program allocator "cpu (s)" "rss (MiB)"
for entry in "${programs[@]}"; do
  name=${entry%%|*}; cmd=${entry#*|}
  for ((r = 0; r < rounds; r++)); do
    for alloc in "$@"; do
      lib=${alloc#*=}
      [[ -z "$lib" ]] || lib=$(realpath "$lib")
      /usr/bin/time -f "%U %S %M" -o "$work/time" bash -c "LD_PRELOAD=$lib $cmd > /dev/null"
      awk '{ printf "%.2f %.1f\n", $1 + $2, $3 / 1024 }' "$work/time" >> "$work/$name.${alloc%%=*}"
    done
  done
  for alloc in "$@"; do
    f="$work/$name.${alloc%%=*}"
    mid=$(( (rounds + 1) / 2 ))
    printf '%-16s %-12s %10s %10s\n' "$name" "${alloc%%=*}" \
      "$(cut -d' ' -f1 "$f" | sort -n | sed -n "${mid}p")" "$(cut -d' ' -f2 "$f" | sort -n | sed -n "${mid}p")"
  done
done
