#!/bin/bash
# The gcc workload of the real-programs test: compile the program in SRC
# (main.c table.c text.c and the generated gen.c) with -O2 -g, link it, run it.
# Prints each step's exit status and the program's output; the objects and
# the executable go to OUT, where run.sh compares them byte for byte with
# those of the other run.  Run with the same SRC (and so the same working
# directory) in both runs, so that debug info names the same paths.
#
# usage: build.sh SRC OUT ROUNDS
set -uo pipefail
src=$1 out=$2 rounds=$3
export LC_ALL=C
cd "$src" || exit 2
rm -rf "$out"
mkdir -p "$out"
status=0
for f in main table text gen; do
  gcc -O2 -g -Wall -Wextra -std=c11 -D_DEFAULT_SOURCE -c "$f.c" -o "$out/$f.o"
  rc=$?
  echo "gcc -c $f.c: exit $rc"
  [ $rc = 0 ] || status=1
done
gcc -O2 -g -o "$out/prog" "$out/main.o" "$out/table.o" "$out/text.o" "$out/gen.o"
rc=$?
echo "gcc link: exit $rc"
[ $rc = 0 ] || exit 1
"$out/prog" "$rounds"
rc=$?
echo "prog: exit $rc"
[ $rc = 0 ] || status=1
exit $status
