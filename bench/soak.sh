#!/usr/bin/env bash
# Soak: N short tests (default 1000) against one `bloatlab server` on
# loopback, 2 at a time; every 10th client is killed mid-scenario and every
# 10th (offset 5) opens a connection and goes silent, so the abnormal paths
# run as often as the normal one. Every 100 tests prints the server's
# threads, open descriptors and RSS; at the end, first vs last and the peak.
# Flat numbers = nothing leaks. Not part of the test suite.
#
#   bench/soak.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
cargo build --release -q -p bloatlab
BL=./target/release/bloatlab
W=$(mktemp -d)
SRV=
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
$BL server --bind 127.0.0.1 --port 19781 --no-rpm --no-web --idle-timeout 2s > "$W/srv.out" 2> "$W/srv.log" & SRV=$!
sleep 0.5
state() {
  local t f r
  t=$(ls /proc/$SRV/task | wc -l); f=$(ls /proc/$SRV/fd | wc -l)
  r=$(awk '/VmRSS/{print $2}' /proc/$SRV/status)
  echo "$t $f $r"
}
one() {
  local i=$1
  if (( i % 10 == 0 )); then
    $BL test 127.0.0.1:19781 -s 4u4d -d 2s --idle 0.2s --quiet > /dev/null 2>&1 & local c=$!
    sleep 0.8; kill -9 $c 2>/dev/null || true; wait $c 2>/dev/null || true
  elif (( i % 10 == 5 )); then
    # A connection that sends its handshake and then nothing.
    python3 -c "
import socket,time
s=socket.create_connection(('127.0.0.1',19781)); s.sendall(b'BLOATLAB\x00\x02\x00\x00'); time.sleep(0.3)" || true
  else
    $BL test 127.0.0.1:19781 -s 1u1d -d 0.3s --idle 0.2s --pause 0.1s --quiet > /dev/null 2>&1 || echo "test $i failed" >&2
  fi
}
read -r t0 f0 r0 < <(state)
echo "start: threads $t0 fds $f0 rss ${r0} kB"
peak_r=$r0; peak_t=$t0; peak_f=$f0
start=$(date +%s)
for ((i = 1; i <= N; i += 2)); do
  one $i & a=$!; one $((i + 1)) & b=$!
  wait $a $b || true
  if (( (i + 1) % 100 == 0 )); then
    sleep 0.3
    read -r t f r < <(state)
    (( r > peak_r )) && peak_r=$r; (( t > peak_t )) && peak_t=$t; (( f > peak_f )) && peak_f=$f
    echo "after $((i + 1)) tests ($(( $(date +%s) - start )) s): threads $t fds $f rss ${r} kB"
  fi
done
# Let the last killed client's test time out (idle timeout 2 s + scenario).
sleep 5
read -r t1 f1 r1 < <(state)
served=$(grep -c '"event":"test"' "$W/srv.log" || true)
complete=$(grep '"event":"test"' "$W/srv.log" | grep -c '"outcome":"complete"' || true)
echo "end:   threads $t1 fds $f1 rss ${r1} kB (start $t0/$f0/${r0} kB; peak between samples $peak_t/$peak_f/${peak_r} kB)"
echo "server logged $served tests, $complete complete"
