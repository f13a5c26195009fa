#!/usr/bin/env bash
# Scale: C concurrent clients (default 200), each a 2u2d test (4 flows) with
# UDP probes every 10 ms, against one `bloatlab server` on loopback. Prints
# the server's peak threads, descriptors and RSS (sampled every 0.2 s) and
# its CPU time, how many tests completed, the probe loss over all of them,
# and the UDP probe and request/response RTT percentiles under load. Not
# part of the test suite.
#
#   [SERVER_CPUS=0 CLIENT_CPUS=1] [RAMP=s] [BL=binary] [KEEP=1]
#   bench/scale.sh [CLIENTS] [SECONDS] [PROBE_INTERVAL]   (default 200, 20 s, 10ms)
#
# All clients run on the same host as the server: on a small machine the
# clients' own threads (each has a probe thread and a request/response
# thread waking every interval, a sampler and four flows) can take more CPU
# than the server. SERVER_CPUS and CLIENT_CPUS (taskset lists) keep them
# apart, standing in for clients on other hosts.
set -euo pipefail
cd "$(dirname "$0")/.."
C=${1:-200}
T=${2:-20}
PI=${3:-10ms}
# Both ends' sockets live in this one kernel: 1600 autotuned sockets (up to
# 6 MB each) would hit tcp_mem pressure, which stalls new connections for
# seconds. 256 KB buffers keep the kernel's TCP memory out of the way.
BUF=${BUF:-256K}
# BL=path runs that binary instead of building this tree's.
if [ -z "${BL:-}" ]; then cargo build --release -q -p bloatlab; BL=./target/release/bloatlab; fi
W=$(mktemp -d); [ -n "${KEEP:-}" ] && echo "work dir: $W"
SRV=
# Wait for the server to exit, so that a next run can bind the same port.
cleanup() { [ -n "$SRV" ] && { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; } || true; [ -n "${KEEP:-}" ] || rm -rf "$W"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || true
# SERVER_CPUS / CLIENT_CPUS (taskset lists, e.g. 0 and 1) keep the two
# apart, standing in for clients on other hosts.
SPIN=(); [ -n "${SERVER_CPUS:-}" ] && SPIN=(taskset -c "$SERVER_CPUS")
CPIN=(); [ -n "${CLIENT_CPUS:-}" ] && CPIN=(taskset -c "$CLIENT_CPUS")
"${SPIN[@]}" $BL server --bind 127.0.0.1 --port 19791 --no-rpm --no-web --max-flows 4 --max-tests $C --max-tests-per-source $C \
  --max-conns $((C * 8)) --max-conns-per-source $((C * 8)) --idle-timeout 60s > "$W/srv.out" 2> "$W/srv.log" & SRV=$!
sleep 0.5
kill -0 $SRV 2>/dev/null || { echo "the server did not start:"; cat "$W/srv.log"; exit 1; }
base=$(awk '/VmRSS/{print $2}' /proc/$SRV/status)
echo "bloatlab $($BL --version | awk '{print $2}'), kernel $(uname -r), $(nproc) cores: $C clients x 2u2d, ${T}s, probes every $PI, socket buffers $BUF${SERVER_CPUS:+, server on CPU $SERVER_CPUS}${CLIENT_CPUS:+, clients on CPU $CLIENT_CPUS}"
(
  peak_t=0; peak_f=0; peak_r=0
  while kill -0 $SRV 2>/dev/null && [ ! -e "$W/done" ]; do
    t=$(ls /proc/$SRV/task | wc -l); f=$(ls /proc/$SRV/fd | wc -l); r=$(awk '/VmRSS/{print $2}' /proc/$SRV/status)
    (( t > peak_t )) && peak_t=$t; (( f > peak_f )) && peak_f=$f; (( r > peak_r )) && peak_r=$r
    echo "$peak_t $peak_f $peak_r" > "$W/peak"
    sleep 0.2
  done
) &
MON=$!
start=$(date +%s.%N)
# Clients arrive over RAMP seconds (default 5; 0 = all in the same instant);
# with a scenario
# longer than the ramp all of them overlap.
RAMP=${RAMP:-5}
for ((i = 0; i < C; i++)); do
  [ "$RAMP" != 0 ] && sleep "$(python3 -c "print($RAMP / $C)")"
  "${CPIN[@]}" $BL test 127.0.0.1:19791 -s 2u2d -d ${T}s --idle 2s --probe-interval $PI --socket-buffer $BUF --quiet --json "$W/r$i.json" > /dev/null 2> "$W/e$i.txt" &
done
wait $(jobs -p | grep -v "^$MON$" | grep -v "^$SRV$") 2>/dev/null || true
touch "$W/done"; wait $MON || true
end=$(date +%s.%N)
read -r pt pf pr < "$W/peak"
sleep 1
# The server's CPU time over the run (utime + stime of all its threads, living or ended).
cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' /proc/$SRV/stat)
after_t=$(ls /proc/$SRV/task | wc -l); after_f=$(ls /proc/$SRV/fd | wc -l); after_r=$(awk '/VmRSS/{print $2}' /proc/$SRV/status)
python3 - "$W" "$C" <<PY
import json, sys, glob, os
w, c = sys.argv[1], int(sys.argv[2])
done = sent = recv = 0; errs = []; udp = []; rr = []
for i in range(c):
    p = os.path.join(w, f"r{i}.json")
    try:
        r = json.load(open(p))
    except Exception:
        errs.append(open(os.path.join(w, f"e{i}.txt")).read().strip()[:200]); continue
    done += bool(r.get("complete"))
    for ph in [r.get("idle")] + r["scenarios"]:
        if not ph: continue
        s = ph["summary"]["latency"]
        sent += s["sent"]; recv += s["received"]
    for ph in r["scenarios"]:
        udp += [p["rtt_ns"] / 1e6 for p in ph.get("probes", []) if p.get("rtt_ns") is not None]
        rr += [x["rtt_ns"] / 1e6 for x in ph.get("rr", []) if x.get("completed")]
loss = 100 * (sent - recv) / sent if sent else float("nan")
print(f"tests complete: {done} of {c}; probes sent {sent}, answered {recv}, loss {loss:.3f}%")
def pct(v, q): return sorted(v)[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
print(f"under load, all tests: UDP probe RTT p50 {pct(udp, .5):.2f} p99 {pct(udp, .99):.2f} ms; request/response p50 {pct(rr, .5):.2f} p99 {pct(rr, .99):.2f} ms")
for e in sorted(set(errs))[:5]: print("  failed:", e)
PY
# How many tests really ran at once: from the server's log (each test line
# has its end time and length), not from the clients' start order.
python3 - "$W/srv.log" <<'PY'
import json, sys, datetime
iv = []
for l in open(sys.argv[1]):
    if not l.startswith("{"):
        continue
    j = json.loads(l)
    if j["event"] == "test":
        end = datetime.datetime.fromisoformat(j["time"].replace("Z", "+00:00")).timestamp()
        iv.append((end - j["seconds"], end))
ev = sorted([(a, 1) for a, b in iv] + [(b, -1) for a, b in iv])
c = m = 0
for _, d in ev:
    c += d
    m = max(m, c)
print(f"tests at once on the server: at most {m} (of {len(iv)} logged)")
PY
echo "server peak: threads $pt, fds $pf, RSS $pr kB (idle: $base kB); after: threads $after_t fds $after_f RSS $after_r kB; server CPU $cpu s; wall $(python3 -c "print(f'{$end-$start:.0f}')") s"
