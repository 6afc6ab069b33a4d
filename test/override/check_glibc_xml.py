#!/usr/bin/env python3
"""malloc_info's XML document, parsed by a real XML parser (test/CMakeLists.txt).

Usage: check_glibc_xml.py LIBMIMALLOC PRELOAD_PROGRAM OBJECT_PROGRAM STATIC_PROGRAM

Each program, run with `xml`, prints malloc_info(0, stdout) after allocating
1000 blocks of 100 bytes and one huge block of 8 MiB. The preload program is
run twice: with the library preloaded (ours) and without (glibc's own
document, the reference for the shape). Ours must parse, have glibc's element
structure (<malloc version="1"> with <heap nr="0"> holding <sizes>, <total>,
<system> and <aspace> elements, then the process <total>, <system> and
<aspace> elements, with the same type attributes in the same order), numeric
size and count attributes, and carry our figures: the huge block under
<total type="mmap">, the live small blocks in <system type="current">.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

MiB = 1024 * 1024


def document(program, preload=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    out = subprocess.run([program, "xml"], env=env, check=True, capture_output=True, text=True).stdout
    return ET.fromstring(out)


def shape(root):
    """The element structure: tag and type/nr attributes, <sizes> children left out."""
    def walk(e):
        key = (e.tag, e.get("type"), e.get("nr"), e.get("version"))
        kids = [] if e.tag == "sizes" else [walk(k) for k in e]
        return (key, tuple(kids))
    return walk(root)


def check(name, root, reference):
    fails = []
    if shape(root) != shape(reference):
        fails.append("element structure differs from glibc's:\n  ours:  %s\n  glibc: %s" % (shape(root), shape(reference)))
    for e in root.iter():
        for attr in ("size", "count"):
            if attr in e.attrib and not e.get(attr).isdigit():
                fails.append("<%s type=%s> %s=%r is not a number" % (e.tag, e.get("type"), attr, e.get(attr)))
    if fails:
        return fails
    mmap = root.find("./total[@type='mmap']")
    if int(mmap.get("count")) < 1 or int(mmap.get("size")) < 8 * MiB:
        fails.append("the 8 MiB huge block is not under <total type=mmap>: %s" % mmap.attrib)
    heap = root.find("./heap[@nr='0']")
    current = int(heap.find("./system[@type='current']").get("size"))
    if current < 100 * 1000:
        fails.append("<system type=current> of the heap (%d) does not hold the live small blocks" % current)
    maximum = int(root.find("./system[@type='max']").get("size"))
    if maximum < current:
        fails.append("<system type=max> (%d) below current (%d)" % (maximum, current))
    rest = root.find("./total[@type='rest']")
    if int(rest.get("size")) > current:
        fails.append("<total type=rest> size %s above the heap's system current %d" % (rest.get("size"), current))
    aspace = int(root.find("./aspace[@type='total']").get("size"))
    mprotect = int(root.find("./aspace[@type='mprotect']").get("size"))
    if aspace < current or mprotect > aspace:
        fails.append("aspace total %d / mprotect %d do not cover the heap (%d)" % (aspace, mprotect, current))
    print("%s: %s" % (name, " ".join("%s/%s=%s" % (e.tag, e.get("type"), e.get("size")) for e in root if e.get("size"))))
    return fails


def main():
    lib, preload_prog, object_prog, static_prog = sys.argv[1:5]
    reference = document(preload_prog)
    if reference.tag != "malloc" or reference.find("heap") is None:
        print("glibc's own document is not what this test expects:", ET.tostring(reference)[:200])
        return 1
    failed = 0
    for name, root in (("preload", document(preload_prog, lib)), ("object", document(object_prog)),
                       ("static", document(static_prog))):
        fails = check(name, root, reference)
        for f in fails:
            print("%s: FAILED: %s" % (name, f))
        failed += len(fails) > 0
    print("%d passed, %d failed" % (3 - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
