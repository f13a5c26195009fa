#!/usr/bin/env bash
# Every script under bench/ in a short smoke mode, as its header documents
# it, so that a refactor cannot leave one broken: each must exit 0 and
# print the line that carries its figures. Figures from a smoke run mean
# nothing (seconds, not minutes); `.ci/run` calls this after the tests.
# Needs root (the lab and emulator benches), iperf3, irtt, ping, python3,
# selenium, chromium-driver, firefox-esr and geckodriver (web_vs_cli).
#
#   .ci/bench-smoke.sh            # all
#   .ci/bench-smoke.sh scale soak # some
set -uo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cargo build --release -q -p bloatlab || exit 1

# name | command | a regular expression the output must match
CASES=(
  "throughput|ROUNDS=1 FLOWS=1 DIRS=up bench/throughput.sh 1|Gbit/s"
  "emulator|OUT=$W/emulator.md bench/emulator.sh 1|through the emulator \\| off \\| [0-9]"
  "lab_vs_ping|DUR=7 bench/lab_vs_ping.sh|bloatlab test: +goodput [0-9]"
  "pacing|DURATION=100ms OUT=$W/pacing bench/pacing.sh|worst: [0-9]"
  "report_large|bench/report_large.sh --release|report"
  "rpm|bench/rpm.sh 10mbit fifo:100|fifo:100 +10mbit +\\| [0-9]"
  "scale|bench/scale.sh 4 2|tests complete: [1-9][0-9]* of 4"
  "soak|bench/soak.sh 10|threads"
  "fuzz|bench/fuzz.sh 1000 20|inputs"
  "monitor-scale|bench/monitor.sh scale 3 5 1|ratio monitor/iputils ping"
  "monitor-soak|bench/monitor.sh soak 35|rounds kept [1-9]"
  "monitor-fleet|bench/monitor.sh fleet 3 10|lost 0"
  "tune|SHARES=90 BUDGET=30s LINE='--rate-down 8mbit --rate-up 2mbit --queue fifo:300' bench/tune.sh|tune vs rule \\(goodput tune / rule\\): 90%: down [0-9]"
  "web_vs_cli|LINKS=aqm BROWSERS=firefox bench/web_vs_cli.sh|\\| aqm \\| firefox \\| A"
)
want="$*"
fail=0
for c in "${CASES[@]}"; do
  IFS='|' read -r name cmd pattern <<<"$c"
  if [ -n "$want" ] && [[ " $want " != *" $name "* ]]; then continue; fi
  start=$(date +%s)
  bash -c "$cmd" >"$W/$name.out" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  if [ $rc -ne 0 ]; then
    echo "bench-smoke: FAIL $name (exit $rc, ${took}s): $cmd"; tail -20 "$W/$name.out"; fail=1
  elif ! grep -Eq "$pattern" "$W/$name.out"; then
    echo "bench-smoke: FAIL $name (${took}s): no line matches /$pattern/"; tail -20 "$W/$name.out"; fail=1
  else
    echo "bench-smoke: ok $name (${took}s)"
  fi
done
exit $fail
