#!/usr/bin/env bash
# Side-by-side on loopback, in one run: bloatlab vs iperf3 goodput and CPU
# (1 flow and 8 flows, upload and download), and idle probe RTT vs irtt.
# Prints each figure and the ratio bloatlab / peer, for receivers that copy
# (bloatlab --rx-copy vs iperf3) and that discard (bloatlab vs iperf3
# --skip-rx-copy), and for each tool's default. Not part of the test suite.
#
#   [IPERF3=/path/to/iperf3] [ROUNDS=n] [FLOWS="1 8"] [DIRS="up down"] bench/throughput.sh [SECONDS]
#   (default 8 s per measurement, 1 round; with ROUNDS the goodput rows are
#   medians over n rounds in which the two tools alternate)
#
# Needs: iperf3, irtt (Debian packages), python3. Only loopback is used.
# Debian 12's iperf3 3.12 runs all streams on one thread; compare 8 flows
# against a multi-threaded iperf3 (3.16 or later, e.g. built from
# github.com/esnet/iperf with ./configure && make) via IPERF3.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-8}
ROUNDS=${ROUNDS:-1}
IPERF3=${IPERF3:-iperf3}
for t in "$IPERF3" irtt python3; do
  command -v "$t" >/dev/null || { echo "bench: $t is missing (apt-get install iperf3 irtt)" >&2; exit 2; }
done
cargo build --release -q -p bloatlab
BL=./target/release/bloatlab
W=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT

# Servers on fixed high ports, loopback only.
$BL server --bind 127.0.0.1 --port 19771 --no-rpm --no-web --quiet > "$W/bl.out" 2>&1 & pids+=($!); BLPID=$!
"$IPERF3" -s -B 127.0.0.1 -p 19772 > /dev/null 2>&1 & pids+=($!); IPPID=$!
irtt server -b 127.0.0.1:19773 > /dev/null 2>&1 & pids+=($!)
sleep 1

# CPU seconds (user+sys) of a pid from /proc.
cpu() { awk '{print ($14+$15)/'"$(getconf CLK_TCK)"'}' /proc/$1/stat; }
# Run a command and print "cpu_seconds" of it on fd 3.
timed() { /usr/bin/env time -f "%U %S" -o "$W/time" "$@" > "$W/cmd.out" 2>"$W/cmd.err"; awk '{print $1+$2}' "$W/time"; }

echo "bloatlab $($BL --version | awk '{print $2}'), iperf3 $("$IPERF3" --version | head -1 | awk '{print $2}'), kernel $(uname -r), cc $(sysctl -n net.ipv4.tcp_congestion_control), $(nproc) cores, ${T}s per measurement, $ROUNDS round(s), the two tools alternating"

# Receivers: bloatlab lets the kernel discard received data by default
# (MSG_TRUNC) and copies it with --rx-copy; iperf3 copies by default and
# discards with --skip-rx-copy (3.13+). Each case runs both tools both ways,
# so every ratio compares like with like, and the defaults are compared too.
SKIP=
"$IPERF3" --help 2>&1 | grep -q -- --skip-rx-copy && SKIP=yes
[ -z "$SKIP" ] && echo "(this iperf3 has no --skip-rx-copy: the discarding pair is not measured)"

# bloatlab goodput and cores for scenario $1 with extra options $2.. -> "gbps cores"
bl_run() {
  local sc=$1 key; shift
  case $sc in 0u*) key=download_bps ;; *) key=upload_bps ;; esac
  local s0 s1 c
  s0=$(cpu $BLPID)
  c=$(timed $BL test 127.0.0.1 --port 19771 --scenarios $sc --duration ${T}s --idle 0 --quiet --json "$W/bl.json" "$@")
  s1=$(cpu $BLPID)
  python3 -c "import json;r=json.load(open('$W/bl.json'));print(r['scenarios'][0]['summary']['$key']/1e9, ($c + $s1 - $s0)/$T)"
}
# iperf3 goodput and cores: flows $1, then options; receiver-side goodput
# from its JSON (0.1 s intervals), skipping the first 20% and the last 5%
# like bloatlab's trimming rule.
ip_run() {
  local p=$1; shift
  local s0 s1 c
  s0=$(cpu $IPPID)
  c=$(timed "$IPERF3" -c 127.0.0.1 -p 19772 -t $T -i 0.1 -P $p -J "$@")
  s1=$(cpu $IPPID)
  python3 - "$W/cmd.out" "$T" "$(python3 -c "print(($c + $s1 - $s0)/$T)")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); T = float(sys.argv[2])
iv = [i["sum"] for i in r["intervals"]]
keep = [i for i in iv if i["start"] >= 0.2 * T and i["end"] <= 0.95 * T + 1e-9]
b = sum(i["bytes"] for i in keep); s = sum(i["seconds"] for i in keep)
print(b * 8 / s / 1e9, sys.argv[3])
PY
}

# One line per measurement in $W/runs: flows direction pair bloatlab_gbps peer_gbps bloatlab_cores peer_cores
# (pair: copy = bloatlab --rx-copy vs iperf3; discard = bloatlab vs iperf3 --skip-rx-copy)
: > "$W/runs"
for R in $(seq "$ROUNDS"); do
for P in ${FLOWS:-1 8}; do
for DIR in ${DIRS:-up down}; do
  if [ $DIR = up ]; then SC=${P}u0d; REV=; else SC=0u${P}d; REV=-R; fi
  read -r bg bc < <(bl_run $SC --rx-copy)
  read -r ig ic < <(ip_run $P $REV)
  echo "$P $DIR copy $bg $ig $bc $ic" >> "$W/runs"
  [ "$ROUNDS" -gt 1 ] && printf "  round %d: %d flow(s) %-4s copying:    bloatlab --rx-copy %6.2f, iperf3 %6.2f Gbit/s\n" "$R" "$P" "$DIR" "$bg" "$ig"
  if [ -n "$SKIP" ]; then
    read -r bg bc < <(bl_run $SC)
    read -r ig ic < <(ip_run $P $REV --skip-rx-copy)
    echo "$P $DIR discard $bg $ig $bc $ic" >> "$W/runs"
    [ "$ROUNDS" -gt 1 ] && printf "  round %d: %d flow(s) %-4s discarding: bloatlab %6.2f, iperf3 --skip-rx-copy %6.2f Gbit/s\n" "$R" "$P" "$DIR" "$bg" "$ig"
  fi
done
done
done
# Medians over the rounds (a single pair on a small VM varies by +/-15%).
python3 - "$W/runs" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
fmt = "%-44s %14s %14s %8s"
print(fmt % ("", "bloatlab", "iperf3", "ratio"))
med = {}
for p in ("1", "8"):
    for d in ("up", "down"):
        for pair, label in (("copy", "copying"), ("discard", "discarding")):
            r = [list(map(float, x[3:])) for x in rows if x[0] == p and x[1] == d and x[2] == pair]
            if not r:
                continue
            bg, ig, bc, ic = (st.median(c) for c in zip(*r))
            med[(p, d, pair)] = (bg, ig)
            n = "" if len(r) == 1 else " (median)"
            print(fmt % (f"goodput {p} flow(s) {d} {label}, Gbit/s{n}", "%.2f" % bg, "%.2f" % ig, "%.2fx" % (bg / ig)))
            print(fmt % (f"CPU per Gbit/s {p} {d} {label}, core-s", "%.3f" % (bc / bg), "%.3f" % (ic / ig), "%.2fx" % ((bc / bg) / (ic / ig))))
        if (p, d, "discard") in med:
            # Each tool as it runs by default: bloatlab discarding, iperf3 copying.
            bg, ig = med[(p, d, "discard")][0], med[(p, d, "copy")][1]
            print(fmt % (f"goodput {p} flow(s) {d}, each tool's default", "%.2f" % bg, "%.2f" % ig, "%.2fx" % (bg / ig)))
PY

# Idle probe RTT: bloatlab's idle phase vs irtt, both 10 ms isochronous probes.
$BL test 127.0.0.1 --port 19771 --scenarios 1u0d --duration 0.3s --idle ${T}s --quiet --json "$W/idle.json" > /dev/null
irtt client -i 10ms -d ${T}s -q -o "$W/irtt.json" 127.0.0.1:19773 > /dev/null 2>&1 || true
python3 - "$W/idle.json" "$W/irtt.json" <<'PY'
import json, sys, statistics as st, gzip
bl = json.load(open(sys.argv[1]))["idle"]["probes"]
b = sorted(p["rtt_ns"] / 1e3 for p in bl if p["rtt_ns"] is not None)
path = sys.argv[2]
try:
    ir = json.load(open(path))
except Exception:
    ir = json.load(gzip.open(path + ".gz"))
i = sorted(r["delay"]["rtt"] / 1e3 for r in ir["round_trips"] if r.get("lost") == "false" and "rtt" in r.get("delay", {}))
def q(v, p): return v[min(len(v) - 1, int(p * len(v)))]
fmt = "%-34s %14s %14s %8s"
print(fmt % ("idle RTT p50, us (n=%d vs %d)" % (len(b), len(i)), "%.1f" % q(b, .5), "%.1f" % q(i, .5), "%+.1f us" % (q(b, .5) - q(i, .5))))
print(fmt % ("idle RTT p90, us", "%.1f" % q(b, .9), "%.1f" % q(i, .9), "%+.1f us" % (q(b, .9) - q(i, .9))))
print(fmt % ("idle RTT min, us", "%.1f" % b[0], "%.1f" % i[0], "%+.1f us" % (b[0] - i[0])))
PY
