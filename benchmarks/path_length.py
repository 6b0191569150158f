#!/usr/bin/env python3
"""Instructions per unit of work (task, or round trip) of W1, W3 and W4 on one
worker, for two or more builds of ftl, counted with callgrind.

Times on this kind of host drift with its state; instruction counts do not.
A path-length change shows here to the instruction, where a timed run needs
many interleaved rounds to see 3%. Instructions are not time (a locked
operation costs more than an add): confirm a change with benchmarks/compare.py.

  benchmarks/path_length.py /tmp/old-checkout .

Each argument is a checkout whose bench build exists (build/bench/libftl.a,
from `cmake --workflow --preset bench`); the probe (path_length.cpp, lineage
API only) is compiled against each. Every workload runs at two sizes, and the
difference is divided by the work added, so start-up and teardown cancel out.
Needs valgrind and g++.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "path_length.cpp")
# Units of work one step of SCALE adds.
UNITS = {"W1": ("task", 20000), "W3": ("task", 21891), "W4": ("round trip", 10000)}


def build(checkout, out):
    library = os.path.join(checkout, "build", "bench", "libftl.a")
    if not os.path.exists(library):
        sys.exit(f"{library} is missing: run `cmake --workflow --preset bench` in {checkout}")
    subprocess.run(["g++", "-O2", "-std=c++17", "-I", os.path.join(checkout, "include"), PROBE, library,
                    "-lboost_context", "-pthread", "-o", out], check=True)


def instructions(binary, workload, scale):
    with tempfile.NamedTemporaryFile() as profile:
        result = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile.name}",
                                 binary, workload, str(scale)], capture_output=True, text=True, check=True)
    match = re.search(r"Collected : (\d+)", result.stderr)
    if match is None:
        sys.exit(f"no instruction count from callgrind for {binary} {workload}")
    return int(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="+")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        binaries = []
        for i, checkout in enumerate(args.checkouts):
            binary = os.path.join(scratch, f"path_length_{i}")
            build(checkout, binary)
            binaries.append(binary)
        names = [os.path.basename(os.path.abspath(c)) or c for c in args.checkouts]
        print("instructions per unit of work, one worker (callgrind)")
        print("figure  unit        " + "".join(f"{n[:14]:>15}" for n in names) + "   last/first")
        for workload, (unit, per_scale) in UNITS.items():
            counts = [(instructions(b, workload, 2) - instructions(b, workload, 1)) / per_scale for b in binaries]
            row = "".join(f"{c:15.1f}" for c in counts)
            print(f"{workload:<7} {unit:<11} {row}   {counts[-1] / counts[0]:.3f}")


if __name__ == "__main__":
    main()
