#!/usr/bin/python3
"""Summarise a CPython regrtest --junit-xml file without its timings.

usage: junit_summary.py FILE.xml

Prints the suite totals, the count of test cases per outcome, and then one
line per test case (sorted, so that -jN scheduling order does not matter):
"NAME OUTCOME" with OUTCOME one of ok, skipped, failure, error.  Durations
and start times are left out, so two runs of the same tests compare equal.
"""
import collections
import sys
import xml.etree.ElementTree as ET


def outcome(tc):
    for kind in ("error", "failure", "skipped"):
        if tc.find(kind) is not None:
            return kind
    return "ok"


def main():
    root = ET.parse(sys.argv[1]).getroot()
    cases = []
    for tc in root.iter("testcase"):
        name = tc.get("name")
        cases.append((name, "%s/%s/%s" % (tc.get("status"), tc.get("result"), outcome(tc))))
    counts = collections.Counter(o for _, o in cases)
    print("suite totals: tests=%s errors=%s failures=%s"
          % (root.get("tests"), root.get("errors"), root.get("failures")))
    print("test cases: %d" % len(cases))
    for o in sorted(counts):
        print("  %s: %d" % (o, counts[o]))
    for name, o in sorted(cases):
        print(name, o)
    return 0


if __name__ == "__main__":
    sys.exit(main())
