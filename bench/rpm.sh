#!/usr/bin/env bash
# RPM side by side through the same lab link, in one run: bloatlab rpm and
# goresponsiveness (networkQuality) against the lab server's RPM endpoints,
# per queue, with the physics beside them (the analytic delay of a full
# queue and the RPM it alone allows). Needs root (the lab); goresponsiveness
# optional (GORESPONSIVENESS=PATH, else on PATH; without it only bloatlab's
# column is filled). Not part of the test suite.
#
#   sudo [GORESPONSIVENESS=...] bench/rpm.sh [RATE] [QUEUE ...]
#   default: 10mbit fifo:1000 fifo:10 fq_codel
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-10mbit}
shift || true
QUEUES=("$@")
[ ${#QUEUES[@]} -gt 0 ] || QUEUES=(fifo:1000 fifo:10 fq_codel)
NQ=${GORESPONSIVENESS:-$(command -v goresponsiveness || command -v networkQuality || true)}
cargo build --release -q -p bloatlab
BL=$(pwd)/target/release/bloatlab
W=$(mktemp -d)
LAB=""
cleanup() { [ -n "$LAB" ] && $BL lab cleanup --id "$LAB" >/dev/null 2>&1 || true; rm -rf "$W"; }
trap cleanup EXIT

printf "%-10s %-7s | %-11s %-14s | %-22s %-9s | %-20s %-10s\n" queue rate "full queue" "queue-only RPM" "bloatlab down/up RPM" "goodput" "goresp. down/up" "(P90)"
for Q in "${QUEUES[@]}"; do
  $BL lab --no-run --rate "$RATE" --queue "$Q" > "$W/lab.txt" 2>&1
  LAB=$(sed -n 's/^lab \([0-9a-f]*\) left up:.*/\1/p' "$W/lab.txt" | head -1)
  NS=blab-$LAB-client
  SRV=$(sed -n 's/.*server   sudo ip netns exec [^ ]* bash *# \([0-9.]*\).*/\1/p' "$W/lab.txt" | head -1)
  rm -f "$W/bl.json"
  ip netns exec "$NS" "$BL" rpm "https://$SRV:4043" -k -q --json "$W/bl.json" > /dev/null 2> "$W/bl.err" || true
  nqd="-"; nqu="-"; p90="-"
  if [ -n "$NQ" ]; then
    ip netns exec "$NS" "$NQ" -config "$SRV" -port 4043 -path .well-known/nq > "$W/nq.txt" 2>&1 || true
    # goresponsiveness prints per stage "RPM: N (P90)" then "RPM: N (Single-Sided 5% Trimmed Mean)".
    mapfile -t tm < <(grep "Trimmed Mean" "$W/nq.txt" | grep -o 'RPM: *[0-9.]*' | grep -o '[0-9.]*$')
    mapfile -t pn < <(grep "(P90)" "$W/nq.txt" | grep -o 'RPM: *[0-9.]*' | grep -o '[0-9.]*$')
    nqd=${tm[0]:--}; nqu=${tm[1]:--}; p90="${pn[0]:--}/${pn[1]:--}"
  fi
  python3 - "$W/bl.json" "$Q" "$RATE" "$nqd" "$nqu" "$p90" "$BL" <<'EOF'
import json, subprocess, sys
path, q, rate, nqd, nqu, p90, bl = sys.argv[1:]
try:
    r = json.load(open(path))
    st = {s["direction"]: s for s in r["stages"]}
    f = lambda d: "%.0f%s" % (st[d]["rpm"], "" if st[d]["confidence"] == "high" else "*") if d in st and st[d]["rpm"] else "-"
    g = lambda d: "%.2f" % (st[d]["goodput_bps"] / 1e6) if d in st else "-"
    blr, gp = f("download") + "/" + f("upload"), g("download") + "/" + g("upload")
except Exception as e:
    blr, gp = "failed (see below)", "-"
# The full queue's delay (bloatlab's own analytic model) and the RPM it
# alone allows (one loaded queue on the path of each round trip).
def full_ms():
    import re
    m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate.lower())
    bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    kind, _, n = q.partition(":")
    if kind == "fifo":
        return int(n) * 1514 * 8 / bps * 1000
    return None
d = full_ms()
phys = "%.1f ms" % d if d else "AQM 5 ms"
prpm = "%.0f" % (60000 / d) if d else "%.0f" % (60000 / 5)
print("%-10s %-7s | %-11s %-14s | %-22s %-9s | %-20s %-10s" % (q, rate, phys, prpm, blr, gp, nqd + "/" + nqu, p90))
# Where bloatlab's round trip goes, per probe kind (95% trimmed means, ms),
# and how many foreign probes had a handshake packet retransmitted.
try:
    for d in ("download", "upload"):
        s = st[d]
        kinds = " ".join("%s %s" % (k, "%.3g" % s[k + "_ms"] if s.get(k + "_ms") is not None else "-") for k in ("tcp_foreign", "tls_foreign", "http_foreign", "http_self"))
        print("    %-8s %s; handshakes retransmitted %d of %d" % (d, kinds, s.get("handshake_retransmits", 0), s.get("foreign_probes", 0)))
except Exception:
    pass
EOF
  [ -s "$W/bl.json" ] || echo "  bloatlab rpm: $(tail -1 "$W/bl.err")"
  $BL lab cleanup --id "$LAB" >/dev/null 2>&1 || true
  LAB=""
done
echo "queue-only RPM = 60000 / the full queue's delay: what the bottleneck queue alone allows; measured RPM also"
echo "counts TLS handshakes, HTTP/2 and the endpoints' own socket buffers (self probes queue behind the load)."
echo "* = low confidence (not stable within 20 s). goodput in Mbit/s (download/upload)."
echo "goresponsiveness's 'trimmed mean' keeps the fastest 5% of probes (docs/rpm.md); its P90 figure is shown beside it."
