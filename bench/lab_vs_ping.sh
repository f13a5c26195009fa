#!/usr/bin/env bash
# Cross-check of `bloatlab lab` against the classic tools in the same lab:
# an iperf3 upload with ping to the witness (seed 000's method), then
# bloatlab test's own upload and probes, through the same bottleneck.
#
#   sudo bench/lab_vs_ping.sh                 # 10mbit, fifo:100, 15 s each
#   sudo RATE=10mbit QUEUE=fifo:1000 DUR=30 bench/lab_vs_ping.sh
#
# Needs root, iperf3 and ping (apt-get install iperf3 iputils-ping).
set -euo pipefail
cd "$(dirname "$0")/.."
BL=${BLOATLAB:-target/release/bloatlab}
[ -x "$BL" ] || BL=target/debug/bloatlab
RATE=${RATE:-10mbit}
QUEUE=${QUEUE:-fifo:100}
DUR=${DUR:-15}
[ "$DUR" -ge 7 ] || { echo "bench/lab_vs_ping.sh: DUR must be at least 7 (seconds; ping skips the first 5 while the queue fills)" >&2; exit 2; }
for t in iperf3 ping; do command -v $t >/dev/null || { echo "needs $t" >&2; exit 1; }; done

id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
"$BL" lab --no-run --quiet --id "$id" --rate "$RATE" --queue "$QUEUE" >/dev/null
trap '"$BL" lab cleanup --id "$id" >/dev/null' EXIT
C=blab-$id-client S=blab-$id-server W=blab-$id-witness
addr() { ip -n "$1" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1; }
srv=$(addr "$S"); wit=$(addr "$W")
echo "lab $id: $RATE, $QUEUE on the router; server $srv, witness $wit; cubic upload ${DUR}s"

# 1. iperf3 upload + ping to the witness (skip the first 5 s: the queue fills).
ip netns exec "$S" iperf3 -s -1 -D -p 5201
sleep 0.5
ip netns exec "$C" iperf3 -c "$srv" -p 5201 -t "$DUR" -C cubic -J > /tmp/lab_vs_ping.iperf3.json &
ip=$!
sleep 5
n=$(( (DUR - 6) * 20 ))
ping_line=$(ip netns exec "$C" ping -q -i 0.05 -c "$n" "$wit" | tail -1)
wait $ip
gp=$(python3 -c "import json;d=json.load(open('/tmp/lab_vs_ping.iperf3.json'));print('%.2f'%(d['end']['sum_received']['bits_per_second']/1e6))")
echo "iperf3 + ping:  goodput $gp Mbit/s; ping witness $ping_line"

# 2. bloatlab test in the same lab.
sleep 2
ip netns exec "$C" "$BL" test "$srv" --witness "$wit" --scenarios 1u0d --duration "${DUR}s" --idle 2s \
  --cc cubic --probe-interval 50ms --json /tmp/lab_vs_ping.bloatlab.json --quiet >/dev/null || true
python3 - <<'PY'
import json
r = json.load(open('/tmp/lab_vs_ping.bloatlab.json'))
s = r['scenarios'][0]['summary']
w = s.get('witness_latency') or {}
l = s['latency']
print("bloatlab test:  goodput %.2f Mbit/s; server rtt min/avg/max/mdev = %.3f/%.3f/%.3f/%.3f ms; witness avg %.3f ms"
      % (s['upload_bps'] / 1e6, l['min_ms'], l['avg_ms'], l['max_ms'], l['mdev_ms'], w.get('avg_ms', float('nan'))))
PY
