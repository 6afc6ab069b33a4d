#!/usr/bin/env bash
# MIMALLOC_LARGE_OS_PAGES=1 on a hugetlb pool configured for the test: as root,
# raise /proc/sys/vm/nr_hugepages by 160 (a 256 MiB region takes 128 2 MiB
# pages), run test-large-pages, and require a 2 MiB hugetlb mapping and the
# verbose line "fixed 2048 KiB pages"; restore the pool after.
# Where the pool cannot be raised (not root, or the kernel gives no pages),
# require the clean fallback instead: transparent huge pages and the verbose
# line saying fixed large pages were refused.
# Usage: large-pages-hugetlb.sh PATH/mimalloc-test-large-pages
set -u
prog=$1
pool=/proc/sys/vm/nr_hugepages
# the pool is global: one user at a time, across concurrent test runs too
exec 9>"${TMPDIR:-/tmp}/mimalloc-hugetlb-pool.lock"
flock -w 120 9 || echo "(pool lock not taken)"
old=$(cat "$pool" 2>/dev/null || echo 0)
got=$old
if [ -w "$pool" ]; then
  echo $((old + 160)) > "$pool" 2>/dev/null
  got=$(cat "$pool")
  trap 'echo "$old" > "$pool"' EXIT
fi
echo "hugetlb pool: $old -> $got pages of 2 MiB"
out=$(MIMALLOC_LARGE_OS_PAGES=1 MIMALLOC_VERBOSE=1 "$prog" 2>&1); rc=$?
echo "$out" | grep -E "large OS pages|large-pages"
if [ "$got" -ge $((old + 128)) ]; then
  echo "$out" | grep -q "fixed 2048 KiB pages" || { echo "FAIL: no MAP_HUGETLB region"; exit 1; }
  echo "$out" | grep -Eq "hugetlb mappings [1-9][0-9]* KiB" || { echo "FAIL: no hugetlb mapping in smaps"; exit 1; }
else
  echo "$out" | grep -q "fixed large pages refused" || { echo "FAIL: no fallback message"; exit 1; }
fi
[ $rc -eq 0 ] || [ $rc -eq 77 ] || { echo "FAIL: exit $rc"; exit 1; }
echo "ok"
