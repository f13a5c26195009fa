#!/usr/bin/env bash
# `bloatlab monitor` over time and at scale, on loopback. Not part of the
# test suite; figures for the issue's closing note and docs/monitor.md.
#
#   bench/monitor.sh scale [SECONDS=120] [PROBED=100] [LOADED=5]
#     One monitor with PROBED latency-only targets (ping:127.0.0.N, one probe
#     a second) and LOADED bloatlab servers (a 20 s loaded test each, one at
#     a time, back to back): its CPU (share of one core) and memory, first
#     with the latency-only targets alone, side by side with PROBED iputils
#     `ping -i 1` processes (the peer: what smokeping-style scripts run),
#     then with the loaded targets too.
#   bench/monitor.sh soak [ROUNDS=288]
#     24 h of 5-minute rounds in fast time: 20 latency-only targets probed
#     every 100 ms in 1 s rounds, ROUNDS rounds, and a loaded server target
#     every 30 s; the monitor's RSS, threads, descriptors and CPU every
#     tenth of the run, first vs last: flat = nothing grows. Every round
#     must be in the database.
#   bench/monitor.sh fleet [MONITORS=20] [SECONDS=60]
#     MONITORS monitors (5 latency-only targets each, 1 s rounds) writing
#     into one PostgreSQL server (initdb into a temporary directory); the
#     server is stopped for 5 s halfway and started again. Every run each
#     monitor printed must be in the database: "lost 0".
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-scale}
shift || true
cargo build --release -q -p bloatlab
BL=$PWD/target/release/bloatlab
W=$(mktemp -d)
chmod 755 "$W"
PIDS=()
PGDIR=
cleanup() {
  for p in "${PIDS[@]}" $(cat "$W/servers.pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
  if [ -n "$PGDIR" ] && [ -f "$PGDIR/data/postmaster.pid" ]; then kill -QUIT "$(head -1 "$PGDIR/data/postmaster.pid")" 2>/dev/null || true; fi
  sleep 0.5
  rm -rf "$W"
}
trap cleanup EXIT
TCK=$(getconf CLK_TCK)
# CPU ticks (user + system) of the processes given, their ended threads included
ticks() { local s=0 p; for p in "$@"; do s=$(( s + $(awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null || echo 0) )); done; echo $s; }
# CPU nanoseconds of the processes' live threads (schedstat: finer than
# ticks, for processes that use too little for a 10 ms tick to see)
cpu_ns() { local p; for p in "$@"; do cat /proc/$p/task/*/schedstat 2>/dev/null; done | awk '{s += $1} END {printf "%d", s}'; }
pct_ns() { awk -v n="$1" -v s="$2" 'BEGIN{printf "%.3f", n / 1e9 / s * 100}'; }
rss_kb() { awk '/VmRSS/{print $2}' /proc/$1/status; }
state() { echo "rss $(rss_kb $1) kB, threads $(ls /proc/$1/task | wc -l), fds $(ls /proc/$1/fd | wc -l)"; }
pct() { awk -v t="$1" -v s="$2" -v k="$TCK" 'BEGIN{printf "%.2f", t / k / s * 100}'; }
servers() {
  local n=$1 i port
  for i in $(seq 1 "$n"); do
    port=$((19800 + i))
    # called as $(servers N): the pids go through a file, not PIDS (a subshell's)
    $BL server --bind 127.0.0.1 --port $port --no-rpm --no-web > /dev/null 2> "$W/srv$i.log" & echo $! >> "$W/servers.pids"
    echo "127.0.0.1:$port"
  done
  sleep 0.5
}
pings() { local n=$1 i; for i in $(seq 1 "$n"); do echo "ping:127.0.$(( i / 250 )).$(( i % 250 + 1 ))"; done; }

case "$MODE" in
scale)
  SECS=${1:-120}; PROBED=${2:-100}; LOADED=${3:-5}
  mapfile -t P < <(pings "$PROBED")
  # the peer: one iputils ping per target
  PP=()
  for t in "${P[@]}"; do ping -q -i 1 "${t#ping:}" > /dev/null 2>&1 & PP+=($!); PIDS+=($!); done
  sleep 2; a=$(cpu_ns "${PP[@]}"); sleep "$SECS"; b=$(cpu_ns "${PP[@]}")
  peer=$(pct_ns $((b - a)) "$SECS")
  peer_rss=0; for p in "${PP[@]}"; do peer_rss=$(( peer_rss + $(rss_kb $p) )); done
  for p in "${PP[@]}"; do kill "$p" 2>/dev/null || true; done
  echo "iputils ping x$PROBED: CPU $peer% of one core over ${SECS}s; rss $peer_rss kB in all"
  # bloatlab monitor, the same targets
  $BL monitor "${P[@]}" --round 1m --probe-every 1s --db "$W/p.sqlite" --id scale --quiet & M=$!; PIDS+=($M)
  sleep 2; a=$(cpu_ns $M); sleep "$SECS"; b=$(cpu_ns $M)
  mine=$(pct_ns $((b - a)) "$SECS")
  echo "bloatlab monitor, $PROBED latency-only targets: CPU $mine% of one core over ${SECS}s; $(state $M)"
  awk -v a="$mine" -v b="$peer" 'BEGIN{ if (b > 0) printf "ratio monitor/iputils ping: %.2f (CPU)\n", a / b; else print "ratio monitor/iputils ping: n/a (the peer used no measurable CPU)" }'
  kill $M; wait $M || true
  mapfile -t S < <(servers "$LOADED")
  $BL monitor "${P[@]}" "${S[@]}" --every 1s --jitter 0% --round 1m --probe-every 1s --db "$W/l.sqlite" --id scale --quiet & M=$!; PIDS+=($M)
  sleep 2; a=$(ticks $M); sleep "$SECS"; b=$(ticks $M)
  echo "bloatlab monitor, $PROBED latency-only + $LOADED loaded targets (loaded tests back to back): CPU $(pct $((b - a)) "$SECS")% of one core over ${SECS}s; $(state $M)"
  kill $M; wait $M || true
  ;;
soak)
  ROUNDS=${1:-288}
  mapfile -t P < <(pings 20)
  mapfile -t S < <(servers 1)
  $BL monitor "${P[@]}" "${S[@]}" --every 30s --jitter 0% --round 1s --probe-every 100ms --db "$W/s.sqlite" --id soak --quiet & M=$!; PIDS+=($M)
  sleep 3
  first=$(state $M); t0=$(ticks $M); s0=$(date +%s); echo "start: $first"
  for i in $(seq 1 10); do
    # the i-th tenth of the rounds
    until [ $(( $(date +%s) - s0 )) -ge $(( ROUNDS * i / 10 )) ]; do sleep 0.2; done
    last=$(state $M); echo "after $(( ROUNDS * i / 10 )) rounds: $last, database $(du -k "$W/s.sqlite" | cut -f1) kB, its log $(du -k "$W/s.sqlite-wal" 2>/dev/null | cut -f1) kB"
  done
  t1=$(ticks $M); secs=$(( $(date +%s) - s0 ))
  kill $M; wait $M || true
  n=$(python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute(\"select count(*) from runs where target like 'ping:%'\").fetchone()[0], c.execute(\"select count(*) from runs where target not like 'ping:%'\").fetchone()[0])" "$W/s.sqlite")
  echo "soak: $ROUNDS rounds of 20 latency-only targets (24 h of 5-minute rounds at 288) and a loaded test every 30 s; CPU $(pct $((t1 - t0)) "$secs")% of one core (the loaded tests' data included)"
  echo "soak: first $first; last $last"
  echo "soak: rounds kept $(cut -d' ' -f1 <<<"$n") (20 a second at rest: the rounds wholly within a loaded test are not kept), loaded runs $(cut -d' ' -f2 <<<"$n")"
  ;;
fleet)
  MON=${1:-20}; SECS=${2:-60}
  PGBIN=${BLOATLAB_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
  PGDIR=$W/pg; mkdir -p "$PGDIR"
  PW=pw$RANDOM$RANDOM; echo "$PW" > "$PGDIR/pw"
  AS=(); if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$PGDIR"; AS=(runuser -u postgres --); fi
  "${AS[@]}" "$PGBIN/initdb" -D "$PGDIR/data" -U bloatlab --auth=scram-sha-256 --pwfile="$PGDIR/pw" --locale=C > "$W/initdb.log"
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  pgstart() { "${AS[@]}" "$PGBIN/postgres" -D "$PGDIR/data" -h 127.0.0.1 -p "$PORT" -k "$PGDIR" -c max_connections=200 >> "$W/pg.log" 2>&1 & PG=$!; PIDS+=($PG)
    for _ in $(seq 100); do grep -q "ready to accept" "$W/pg.log" 2>/dev/null && break; sleep 0.1; done; }
  pgstop() { kill -QUIT "$(head -1 "$PGDIR/data/postmaster.pid")"; wait "$PG" 2>/dev/null || true; : > "$W/pg.log"; }
  pgstart
  URL="postgres://bloatlab:$PW@127.0.0.1:$PORT/postgres?sslmode=disable"
  MP=()
  for m in $(seq 1 "$MON"); do
    T=(); for k in 1 2 3 4 5; do T+=("ping:127.0.$m.$k"); done
    $BL monitor "${T[@]}" --round 1s --probe-every 200ms --db "$URL" --id "fleet-$m" > "$W/m$m.out" 2>&1 & MP+=($!); PIDS+=($!)
  done
  sleep $(( SECS / 2 ))
  pgstop; echo "PostgreSQL stopped for 5 s under $MON monitors"; sleep 5; pgstart
  sleep $(( SECS / 2 ))
  for p in "${MP[@]}"; do kill -TERM "$p"; done
  for p in "${MP[@]}"; do wait "$p" || echo "a monitor exited with $?"; done
  lost=0; total=0; held=0
  for m in $(seq 1 "$MON"); do
    printed=$(grep -c '\[run ' "$W/m$m.out" || true)
    stored=$(PGPASSWORD=$PW "$PGBIN/psql" -h 127.0.0.1 -p "$PORT" -U bloatlab -d postgres -At -c "select count(*) from bloatlab_runs where monitor_id = 'fleet-$m'")
    grep -q "held run(s) written" "$W/m$m.out" && held=$((held + 1))
    total=$((total + stored)); lost=$((lost + printed - stored))
  done
  echo "fleet: $MON monitors, $total runs in one PostgreSQL over ${SECS}s ($held of them held runs through the outage and wrote them); lost $lost"
  [ "$lost" = 0 ]
  ;;
*) echo "usage: bench/monitor.sh scale|soak|fleet ..." >&2; exit 2 ;;
esac
