#!/usr/bin/env bash
# Fuzz on stable Rust (proptest), many more cases than the test suite runs:
#  * every wire decoder: 5 properties x N cases (default N = 10^7, so 5 x 10^7
#    inputs): arbitrary bytes, mutated valid frames, probe round trips and
#    reply sizes, report chunking, the replay window against a model;
#  * the server's per-connection state machine: M generated cases (default
#    20000) of up to 42 operations each against a real in-process server on
#    loopback, checking after each that it freed everything and still serves
#    (default 10000, about 50 ms each).
# Prints cases, seconds and inputs per second. Not part of the test suite.
#
#   bench/fuzz.sh [N] [M]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
M=${2:-10000}
cargo test --release -q -p bloatlab-wire --test fuzz --no-run 2>/dev/null
cargo test --release -q -p bloatlab-engine --test fuzz_server --no-run 2>/dev/null
t0=$(date +%s.%N)
BLOATLAB_FUZZ_CASES=$N cargo test --release -q -p bloatlab-wire --test fuzz 2>&1 | grep -E "test result|panicked|minimal" 
t1=$(date +%s.%N)
BLOATLAB_FUZZ_CASES=$M cargo test --release -q -p bloatlab-engine --test fuzz_server the_server_survives 2>&1 | grep -E "test result|panicked|minimal|holds"
t2=$(date +%s.%N)
python3 - "$N" "$M" "$t0" "$t1" "$t2" <<'PY'
import sys
n, m, t0, t1, t2 = int(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:])
print(f"wire decoders: 5 properties x {n} cases = {5*n} inputs in {t1-t0:.0f} s ({5*n/(t1-t0):,.0f}/s)")
print(f"server state machine: {m} cases in {t2-t1:.0f} s ({m/(t2-t1):,.0f} cases/s)")
PY
