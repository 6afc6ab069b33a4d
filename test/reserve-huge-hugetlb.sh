#!/usr/bin/env bash
# Reserved huge OS pages on hugetlb pools configured for the test (as root):
#   1. 1 GiB pages: one more page in the 1 GiB pool, then
#      MIMALLOC_RESERVE_HUGE_OS_PAGES=1 (mode env): blocks in a 1048576 kB
#      hugetlb mapping, allocations beyond the GiB from ordinary memory, and
#      the verbose line "reserved 1 GiB of 1 requested ... 1 page of 1 GiB";
#   2. the 2 MiB fallback: 512 more pages in the 2 MiB pool (and none free of
#      1 GiB): mi_reserve_huge_os_pages_at (mode api) gets the GiB as 2 MiB
#      pages and stops at its 1 ms limit; mode env too when step 1 could not
#      be done (1 GiB pages are often not obtainable on a fragmented machine).
# Each pool is restored afterwards, whatever happens. Where no pool can be
# configured (not root, no hugetlb, or pages already in use by others), the
# program must work without huge pages, and verbose output must say that
# none were reserved. In secure builds the reservation is declined.
# Usage: reserve-huge-hugetlb.sh PATH/mimalloc-test-reserve-huge [secure]
set -u
prog=$1
variant=${2:-}
dir=/sys/kernel/mm/hugepages
pool1g=$dir/hugepages-1048576kB
pool2m=$dir/hugepages-2048kB

# the pools are global: one user at a time, across concurrent test runs too
exec 9>"${TMPDIR:-/tmp}/mimalloc-hugetlb-pool.lock"
flock -w 120 9 || echo "(pool lock not taken)"

old1g=$(cat $pool1g/nr_hugepages 2>/dev/null || echo -)
old2m=$(cat $pool2m/nr_hugepages 2>/dev/null || echo -)
restore() {
  [ "$old1g" != - ] && [ -w $pool1g/nr_hugepages ] && echo "$old1g" > $pool1g/nr_hugepages
  [ "$old2m" != - ] && [ -w $pool2m/nr_hugepages ] && echo "$old2m" > $pool2m/nr_hugepages
  echo "pools restored: 1 GiB $(cat $pool1g/nr_hugepages 2>/dev/null || echo -), 2 MiB $(cat $pool2m/nr_hugepages 2>/dev/null || echo -)"
}
trap restore EXIT

free_pages() { cat "$1/free_hugepages" 2>/dev/null || echo 0; }

# raise POOL by N pages; true if N pages are free then
raise() {
  local pool=$1 n=$2 old
  [ -w "$pool/nr_hugepages" ] || return 1
  old=$(cat "$pool/nr_hugepages")
  echo $((old + n)) > "$pool/nr_hugepages" 2>/dev/null
  [ "$(free_pages "$pool")" -ge "$n" ]
}

status=0
# run MODE KIB [ENV...]: the program, its verbose lines, and a required verbose line
run() {
  local mode=$1 kib=$2 want=$3; shift 3
  local out rc
  out=$(env MIMALLOC_VERBOSE=1 "$@" "$prog" "$mode" "$kib" 2>&1); rc=$?
  echo "--- $mode, pages of $kib KiB expected:"
  echo "$out" | grep -E "huge OS pages|reserve-huge"
  if [ $rc -eq 77 ]; then echo "(skipped: no /proc)"; return; fi
  [ $rc -eq 0 ] || { echo "FAIL: $mode exit $rc"; status=1; }
  echo "$out" | grep -q -- "$want" || { echo "FAIL: no verbose line \"$want\""; status=1; }
}

if [ "$variant" = secure ]; then
  run env 0 "none reserved of 1 GiB requested on node 0: not in secure builds" MIMALLOC_RESERVE_HUGE_OS_PAGES=1
  run api 0 "not in secure builds"
  exit $status
fi

others=$(( $(free_pages $pool1g) + $(free_pages $pool2m) ))
did1g=no; did2m=no
if [ "$others" -eq 0 ]; then
  if raise $pool1g 1; then
    did1g=yes
    run env 1048576 "reserved 1 GiB of 1 requested on node 0: 1 page of 1 GiB, 0 pages of 2 MiB" MIMALLOC_RESERVE_HUGE_OS_PAGES=1
  else
    echo "1 GiB pages: the kernel gives none here (fragmented memory?): the 2 MiB fallback only"
  fi
  [ "$old1g" != - ] && [ -w $pool1g/nr_hugepages ] && echo "$old1g" > $pool1g/nr_hugepages
  if raise $pool2m 512; then
    did2m=yes
    run api 2048 "reserved 1 GiB of 2 requested on node 0: 0 pages of 1 GiB, 512 pages of 2 MiB, in [0-9]* ms (stopped at the time limit)"
    if [ $did1g = no ]; then
      run env 2048 "reserved 1 GiB of 1 requested on node 0: 0 pages of 1 GiB, 512 pages of 2 MiB" MIMALLOC_RESERVE_HUGE_OS_PAGES=1
    fi
  fi
else
  echo "huge pages already free in the pools (someone else's): the fallback is not checked, the pools are left alone"
  exit 0
fi
if [ $did1g = no ] && [ $did2m = no ]; then
  echo "no hugetlb pool could be configured (not root, or no huge pages): the fallback"
  run env 0 "huge OS pages: none reserved of 1 GiB requested on node 0" MIMALLOC_RESERVE_HUGE_OS_PAGES=1
  run api 0 "huge OS pages: none reserved of 2 GiB requested on node 0"
fi
[ $status -eq 0 ] && echo "ok"
exit $status
