#!/usr/bin/env bash
# Model-checks one Promela model with SPIN and compares the verdict with the
# expected one.
#   check_model.sh MODEL.pml pass|fail [-DNAME=VALUE ...]
# "fail" is for the deliberately broken variants: SPIN must find the error,
# which shows the model can fail.
# Exit 77 (CTest SKIP_RETURN_CODE) when spin or a C compiler is missing.
set -euo pipefail
model=$1
expect=$2
shift 2
command -v spin >/dev/null 2>&1 || { echo "spin not found (Debian package: spin): skipped"; exit 77; }
cc=$(command -v cc || command -v gcc || true)
[ -n "$cc" ] || { echo "no C compiler: skipped"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/model.pml"
cd "$work"
spin -a "$@" model.pml >/dev/null
# Exhaustive safety search; COLLAPSE compresses states (the 3-worker park
# model needs ~0.7 GB with it).
"$cc" -O2 -DSAFETY -DCOLLAPSE -o pan pan.c
./pan -m1000000 -w24 >pan.out 2>&1 || true
errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
grep -E 'states, stored|errors:' pan.out || true
if [ -z "$errors" ]; then
    echo "could not read SPIN's verdict:"
    cat pan.out
    exit 1
fi
if grep -q 'max search depth too small' pan.out; then
    echo "search depth exceeded: the verdict is incomplete"
    exit 1
fi
if [ "$expect" = pass ] && [ "$errors" = 0 ]; then
    echo "verified: $(basename "$model") $*"
    exit 0
fi
if [ "$expect" = fail ] && [ "$errors" != 0 ]; then
    echo "the broken variant is caught, as it must be: $(basename "$model") $*"
    grep -E 'assertion violated|invalid end state' pan.out | head -3 || true
    exit 0
fi
echo "unexpected verdict ($errors errors, expected $expect): $(basename "$model") $*"
cat pan.out
exit 1
