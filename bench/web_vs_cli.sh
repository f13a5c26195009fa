#!/usr/bin/env bash
# The browser test against `bloatlab test --profile quick` on lab links, in
# the same run: the page in Chromium and in Firefox (headless, in the lab's
# client namespace, through WebDriver) and the CLI, one after another on
# each link. Prints one row per client and link: grade, idle and largest
# added latency, capacities, RPM, each loaded phase's length and whether
# it was still rising, the page's own delay (its probe thread's worst
# lateness, probes left out), and the ratios page / CLI.
#
#   sudo bench/web_vs_cli.sh                         # every link below, both browsers
#   sudo LINKS="aqm fast" BROWSERS=chromium bench/web_vs_cli.sh
#   sudo LINKS=aqm BROWSERS=chromium bench/web_vs_cli.sh   # the smoke run (about a minute)
#   PROBES=main ...  keeps the page's UDP probe channel on its main thread
#                    (what the probe worker saves, measured)
#   KEEP=DIR ...     keeps every result JSON in DIR (LINK-CLIENT.json)
#
# Links: deep (10 Mbit/s, 1000-packet FIFO: 1.2 s when full), asym (20 down
# / 5 up Mbit/s, 500-packet FIFOs: 0.3 s / 1.2 s), aqm (the emulator's
# FQ-CoDel at 20 Mbit/s with 10 ms of delay each way), fast (100 Mbit/s,
# 1000-packet FIFO: 121 ms); deep-bytes and asym-bytes are deep and asym
# with byte-limited FIFOs of the same time (bfifo), where the packet mix
# cannot change what the queue holds, and aqm50 the AQM at 50 Mbit/s, where
# a 2-core machine cannot run a browser's load both ways and time its
# probes (docs/web.md) (run them with LINKS=...). cubic everywhere.
# Needs root, python3 with selenium (pip), chromium + chromium-driver,
# firefox-esr + geckodriver (cargo install geckodriver).
set -euo pipefail
cd "$(dirname "$0")/.."
BL=${BLOATLAB:-$PWD/target/release/bloatlab}
[ -x "$BL" ] || BL=$PWD/target/debug/bloatlab
LINKS=${LINKS:-deep asym aqm fast}
BROWSERS=${BROWSERS:-chromium firefox}
PROBES=${PROBES:-worker}
export PATH="$PATH:$HOME/.cargo/bin"
python3 -c 'import selenium' 2>/dev/null || { echo "bench/web_vs_cli.sh: needs selenium (pip install selenium)" >&2; exit 1; }
for b in $BROWSERS; do
  case $b in
    chromium) command -v chromedriver >/dev/null || { echo "needs chromedriver (apt-get install chromium-driver)" >&2; exit 1; } ;;
    firefox) command -v geckodriver >/dev/null && command -v firefox-esr >/dev/null || { echo "needs firefox-esr and geckodriver (cargo install geckodriver)" >&2; exit 1; } ;;
    *) echo "unknown browser $b (chromium, firefox)" >&2; exit 2 ;;
  esac
done
W=$(mktemp -d)
ids=()
cleanup() { for i in "${ids[@]}"; do "$BL" lab cleanup --id "$i" >/dev/null 2>&1 || true; done; rm -rf "$W"; }
trap cleanup EXIT

link_args() {
  case $1 in
    deep) echo "--rate 10mbit --queue fifo:1000" ;;
    asym) echo "--rate-down 20mbit --rate-up 5mbit --queue fifo:500" ;;
    aqm) echo "--rate 20mbit --queue fq_codel --delay 10ms --backend emulator" ;;
    aqm50) echo "--rate 50mbit --queue fq_codel --delay 10ms --backend emulator" ;;
    fast) echo "--rate 100mbit --queue fifo:1000" ;;
    deep-bytes) echo "--rate 10mbit --queue bfifo:1500000" ;;
    asym-bytes) echo "--rate-down 20mbit --rate-up 5mbit --queue bfifo:750000" ;;
    *) echo "unknown link $1 (deep, asym, aqm, aqm50, fast, deep-bytes, asym-bytes)" >&2; exit 2 ;;
  esac
}

row() { # link client file [cli file]
  python3 - "$@" <<'PY'
import json, sys
link, client, f = sys.argv[1:4]
cli = json.load(open(sys.argv[4])) if len(sys.argv) > 4 else None
r = json.load(open(f)); h = r['headline']
def fmt(v, d=1): return '-' if v is None else ('%.' + str(d) + 'f') % v
ph = []
lag, held = 0.0, 0
for p in r['scenarios']:
    s = p['summary']
    ph.append('%.0fs%s' % ((p['end_ns'] - p['start_ns']) / 1e9, '↑' if s.get('still_rising') else ''))
    lag = max(lag, s.get('page_lag_max_ms') or 0.0); held += s.get('page_delayed_probes', 0)
ratio = ''
if cli:
    c = cli['headline']
    q = lambda a, b: '%.2f' % (a / b) if b else '-'
    ratio = 'added %s (%+.1f ms), down %s, up %s' % (q(h['max_added_latency_ms'], c['max_added_latency_ms']), h['max_added_latency_ms'] - c['max_added_latency_ms'], q(h['download_capacity_bps'], c['download_capacity_bps']), q(h['upload_capacity_bps'], c['upload_capacity_bps']))
print('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |' % (link, client, h.get('grade'), fmt(h['idle_latency_ms'], 2), fmt(h['max_added_latency_ms']),
      fmt(h['download_capacity_bps'] / 1e6, 2), fmt(h['upload_capacity_bps'] / 1e6, 2), fmt(h['rpm'], 0), ' '.join(ph),
      '-' if client == 'cli' else '%s ms, %d held' % (fmt(lag), held), ratio or '-'))
PY
}

echo "| link | client | grade | idle ms | max added ms | down Mbit/s | up Mbit/s | RPM | loaded phases (↑ still rising) | page's own delay | page / cli |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for link in $LINKS; do
  args=$(link_args "$link")
  id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  ids+=("$id")
  # shellcheck disable=SC2086
  "$BL" lab --no-run --quiet --id "$id" $args --cc cubic >/dev/null
  C=blab-$id-client
  srv=$(ip -n "blab-$id-server" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
  ip netns exec "$C" "$BL" test "$srv" --profile quick --cc cubic --quiet --json "$W/$link-cli.json" >/dev/null
  for b in $BROWSERS; do
    q=""; [ "$PROBES" = main ] && q="&probes=main"
    ip netns exec "$C" python3 bench/web_page.py "$b" "http://$srv:9780/?autostart=1&mode=quick$q" "$W/$link-$b.json" 120 2>"$W/$link-$b.err" \
      || { echo "bench/web_vs_cli.sh: $b on $link failed: $(cat "$W/$link-$b.err")" >&2; exit 1; }
  done
  row "$link" cli "$W/$link-cli.json"
  for b in $BROWSERS; do row "$link" "$b" "$W/$link-$b.json" "$W/$link-cli.json"; done
  "$BL" lab cleanup --id "$id" >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$W/$link"-*.json "$KEEP/"; fi
done
