#!/bin/sh
# bench/pacing.sh — full-range figures of the pacing recipe (seed 004).
#
# Runs the pacing recipe's full grid (t_ipi 50 us .. 50 ms, 19 values; timers
# precise, sleep, tick:1000, tick:250) with a release build, then prints the
# largest deviation of the precise pacer from the idealized rate and the
# tick model's factors below and above t_gran. Needs no root.
#
#   bench/pacing.sh                 # 5 s per point (~7 min)
#   DURATION=20s bench/pacing.sh    # as the seed (20 s per point, ~26 min)
#   OUT=results/ bench/pacing.sh     # default: $TMPDIR/bloatlab-bench-pacing
#
# The result folder holds the per-point JSON (inter-departure histograms,
# burst factors, machine metadata), results.csv, table.md and the plots.
set -eu
cd "$(dirname "$0")/.."
DURATION="${DURATION:-5s}"
OUT="${OUT:-${TMPDIR:-/tmp}/bloatlab-bench-pacing}"
cargo build --release -q -p bloatlab
BIN=target/release/bloatlab
mkdir -p "$OUT"
echo "machine: $(uname -sr), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" recipe run pacing --full --set "duration=$DURATION" --out "$OUT" --quiet
DIR=$(ls -td "$OUT"/pacing-* | head -1)
cat "$DIR/table.md"
echo
echo "precise pacer, |achieved/ideal - 1| per t_ipi (aim: < 1% everywhere):"
awk -F, 'NR==1 { for (i=1;i<=NF;i++) col[$i]=i; next }
  $col["timer"]=="precise" { d=$col["ratio"]-1; if (d<0) d=-d; printf "  %-8s %.4f%%\n", $col["ipi"], d*100; if (d>m) m=d }
  END { printf "  worst: %.4f%%\n", m*100 }' "$DIR/results.csv"
echo "results: $DIR"
