#!/usr/bin/env bash
# Benchmark of bloatlab's user-space link emulator, side by side in one run:
#   1. unshaped TCP throughput (iperf3, 1 flow) through a plain veth router path
#      (kernel forwarding only) vs the same path through the emulator;
#   2. release-timer error (p50/p99/max) at 100 Mbit/s + 10 ms delay under an
#      iperf3 load, for each timer strategy;
#   3. emulator CPU time per Gbit forwarded.
# Needs root, iproute2, ethtool, iperf3 (installed with apt-get if missing).
# Usage: [BL=binary] [OUT=file] bench/emulator.sh [SECONDS]   (default 10 s per measurement)
# Writes a markdown table to stdout and to bench/emulator-results.md (or $OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-10}"
OUT="${OUT:-bench/emulator-results.md}"

[ "$(id -u)" = 0 ] || { echo "bench/emulator.sh: needs root (network namespaces)" >&2; exit 1; }
need=""
command -v iperf3 >/dev/null || need="$need iperf3"
command -v ethtool >/dev/null || need="$need ethtool"
if [ -n "$need" ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $need
fi

# The emulator is the `bloatlab emulate` subcommand of the one binary (the
# lab runs it in its router namespace).
# BL=path runs that binary instead of building this tree's.
if [ -n "${BL:-}" ]; then EMU="$BL"; else cargo build --release -q -p bloatlab; EMU="$PWD/target/release/bloatlab"; fi

TAG="blemub-$$"
C="$TAG-c"; R="$TAG-r"; S="$TAG-s"
TMP="$(mktemp -d)"
EMU_PID=""
cleanup() {
  [ -n "$EMU_PID" ] && kill "$EMU_PID" 2>/dev/null && wait "$EMU_PID" 2>/dev/null || true
  for n in "$C" "$R" "$S"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

for n in "$C" "$R" "$S"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip link add c0 netns "$C" type veth peer name r-cli netns "$R"
ip link add s0 netns "$S" type veth peer name r-srv netns "$R"
ip -n "$C" addr add 10.77.1.2/24 dev c0
ip -n "$R" addr add 10.77.1.1/24 dev r-cli
ip -n "$R" addr add 10.77.2.1/24 dev r-srv
ip -n "$S" addr add 10.77.2.2/24 dev s0
for x in "$C c0" "$R r-cli" "$R r-srv" "$S s0"; do set -- $x; ip -n "$1" link set "$2" up; done
ip -n "$C" route add default via 10.77.1.1
ip -n "$S" route add default via 10.77.2.1
ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=1

offloads() { # on|off
  local m="$1"
  for x in "$C c0" "$R r-cli" "$R r-srv" "$S s0"; do set -- $x
    ip netns exec "$1" ethtool -K "$2" tso "$m" gso "$m" gro "$m" >/dev/null 2>&1 || true
  done
}

iperf() { # -> Gbit/s of the receiver
  ip netns exec "$S" iperf3 -s -1 -D --logfile "$TMP/srv.log" >/dev/null 2>&1 || true
  sleep 0.3
  ip netns exec "$C" iperf3 -c 10.77.2.2 -t "$DUR" -J -C cubic > "$TMP/iperf.json" 2>/dev/null || { echo 0; return; }
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % (d["end"]["sum_received"]["bits_per_second"]/1e9))' "$TMP/iperf.json"
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

start_emu() { # args...
  rm -f "$TMP/emu.json"
  "$EMU" emulate --netns "$R" --client-if r-cli --server-if r-srv --stats "$TMP/emu.json" "$@" > "$TMP/ready" 2> "$TMP/emu.log" &
  EMU_PID=$!
  for _ in $(seq 100); do [ -s "$TMP/ready" ] && break; sleep 0.05; done
  [ -s "$TMP/ready" ] || { echo "emulator did not start: $(cat "$TMP/emu.log")" >&2; exit 1; }
}
stop_emu() {
  kill -TERM "$EMU_PID"; wait "$EMU_PID" || true; EMU_PID=""
}
stat() { python3 - "$TMP/emu.json" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    v = d
    for k in path.split("."):
        v = v[k]
    print(v)
PY
}

echo "== bench/emulator.sh: $(uname -r), $(nproc) CPUs, ${DUR}s per measurement" >&2
declare -A RES

offloads on
RES[veth_on]=$(iperf)
offloads off
RES[veth_off]=$(iperf)

for mode in on off; do
  offloads $mode
  start_emu
  t0=$(cpu_ticks "$EMU_PID"); s0=$(date +%s.%N)
  g=$(iperf)
  t1=$(cpu_ticks "$EMU_PID"); s1=$(date +%s.%N)
  stop_emu
  RES[emu_$mode]=$g
  RES[emu_cpu_$mode]=$(python3 -c "import sys; t=($t1-$t0)/$HZ; w=$s1-$s0; g=$g; print('%.2f %.2f' % (t/(g*w) if g>0 else 0, 100*t/w))")
  RES[emu_drop_$mode]=$(stat up.kernel_tun.to_emulator_dropped)
  RES[emu_maxpkt_$mode]=$(stat up.max_packet_bytes)
done

offloads off
declare -A ERR
TIMERS=("sleep-spin --spin 30us --rt-priority 10" "sleep-spin --spin 100us --rt-priority 10" "sleep --rt-priority 10"
        "sleep-spin --spin 30us --rt-priority 0" "sleep --rt-priority 0" "spin")
for t in "${TIMERS[@]}"; do
  # shellcheck disable=SC2086
  start_emu --rate 100mbit --delay 10ms --queue fifo:1000 --timer $t
  t0=$(cpu_ticks "$EMU_PID"); s0=$(date +%s.%N)
  g=$(iperf)
  t1=$(cpu_ticks "$EMU_PID"); s1=$(date +%s.%N)
  stop_emu
  cpu=$(python3 -c "print('%.0f' % (100*($t1-$t0)/$HZ/($s1-$s0)))")
  ERR[$t]="$(stat up.release_error.p50_us up.release_error.p99_us up.release_error.max_us down.release_error.p99_us up.release_error.count | paste -sd' ') $g $cpu"
done

{
echo "# Emulator benchmark"
echo
echo "Run: \`bench/emulator.sh $DUR\` on $(date -u +%Y-%m-%dT%H:%MZ), kernel $(uname -r), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), iperf3 $(iperf3 -v | head -1 | awk '{print $2}'), one cubic flow, ${DUR} s each, release build."
echo
echo "## Unshaped throughput (client -> router -> server, 1 TCP flow)"
echo
echo "| path | veth offloads | Gbit/s | emulator CPU s per Gbit | emulator CPU % | largest packet read, B | kernel drops before emulator |"
echo "|---|---|---|---|---|---|---|"
echo "| plain veth (kernel forwarding) | on | ${RES[veth_on]} | - | - | - | - |"
echo "| plain veth (kernel forwarding) | off | ${RES[veth_off]} | - | - | - | - |"
set -- ${RES[emu_cpu_on]}; echo "| through the emulator | on | ${RES[emu_on]} | $1 | $2 | ${RES[emu_maxpkt_on]} | ${RES[emu_drop_on]} |"
set -- ${RES[emu_cpu_off]}; echo "| through the emulator | off | ${RES[emu_off]} | $1 | $2 | ${RES[emu_maxpkt_off]} | ${RES[emu_drop_off]} |"
echo
echo "## Release error at 100 Mbit/s, 10 ms delay, fifo:1000, under one iperf3 flow"
echo
echo "| timer | up p50 us | up p99 us | up max us | down p99 us | packets | goodput Gbit/s | emulator CPU % |"
echo "|---|---|---|---|---|---|---|---|"
for t in "${TIMERS[@]}"; do
  set -- ${ERR[$t]}
  printf "| %s | %.1f | %.1f | %.1f | %.1f | %s | %s | %s |\n" "$t" "$1" "$2" "$3" "$4" "$5" "$6" "$7"
done
} | tee "$OUT"
