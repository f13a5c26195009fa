#!/usr/bin/env bash
# bloatlab tune against the rule users follow by hand: a shaper (SQM) at
# 85, 90 or 95% of a speed test. One lab line, one run: tune on the lab's
# home router (the line measured unshaped: the quick profile's goodput
# each way is the "speed test"), then each rule's rates in the same shaper
# (bloatlab's user-space shaper, rate + FQ-CoDel each way, which tune is
# told to use too, so only the rates differ), each verified with the
# quick profile from the LAN host. Per method: the grade, the added
# latency each way and both ways, goodput each way, and goodput as a
# ratio of tune's.
#
#   sudo bench/tune.sh                                        # 20/5 Mbit/s, 1000-packet FIFOs
#   sudo LINE="--rate 100mbit --queue fifo:5000" bench/tune.sh
#   sudo SHARES="90" BUDGET=40s LINE="--rate-down 8mbit --rate-up 2mbit --queue fifo:300" bench/tune.sh   # smoke
#
# Needs root. Prints a Markdown table; the line "tune vs" carries the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
LINE=${LINE:-"--rate-down 20mbit --rate-up 5mbit --queue fifo:1000"}
SHARES=${SHARES:-"85 90 95"}
BUDGET=${BUDGET:-3m}
cargo build --release -q -p bloatlab
B=$PWD/target/release/bloatlab
W=$(mktemp -d)
id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
EMU=
cleanup() {
  [ -n "$EMU" ] && kill "$EMU" 2>/dev/null && wait "$EMU" 2>/dev/null
  "$B" lab cleanup --id "$id" >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT
# shellcheck disable=SC2086
"$B" lab $LINE --tune --no-run --id "$id" >"$W/lab.txt"
home=blab-$id-home client=blab-$id-client
S=$(ip -n "blab-$id-server" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1):9770

echo "bench/tune.sh: line: $LINE; tune (budget $BUDGET) vs shaper at ${SHARES// /, }% of the unshaped goodput"
ip netns exec "$home" "$B" tune "$S" --wan wan0 --lan lan0 --client-netns "$client" --sqm emulator \
  --budget "$BUDGET" --state-dir "$W/state" --json "$W/tune.json" --quiet >"$W/tune.txt"

for share in $SHARES; do
  read -r down up < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
def g(up):
    for p in d["before"]["scenarios"]:
        if (p["uploads"] > 0) == up and (p["downloads"] > 0) != up:
            return p["summary"]["upload_bps" if up else "download_bps"]
s = float(sys.argv[2]) / 100
print(int(g(False) * s), int(g(True) * s))' "$W/tune.json" "$share")
  ip netns exec "$home" "$B" emulate --client-if lan0 --server-if wan0 --rate-down "${down}bit" --rate-up "${up}bit" \
    --queue fq_codel --overhead 14 >"$W/emu-$share.txt" 2>&1 &
  EMU=$!
  for _ in $(seq 1 100); do grep -q '"ready"' "$W/emu-$share.txt" && break; sleep 0.1; done
  ip netns exec "$client" "$B" test "$S" --profile quick --json "$W/rule-$share.json" >/dev/null 2>&1
  kill "$EMU"; wait "$EMU" 2>/dev/null || true; EMU=
done

python3 - "$W" $SHARES <<'PY'
import json, sys
w, shares = sys.argv[1], sys.argv[2:]
d = json.load(open(f"{w}/tune.json"))
def phase(r, up, down):
    return next((p for p in r["scenarios"] if (p["uploads"] > 0) == up and (p["downloads"] > 0) == down), None)
def row(name, r, rates):
    dn, upp, both = phase(r, False, True), phase(r, True, False), phase(r, True, True)
    add = lambda p: "%+.1f" % p["summary"]["added_latency_ms"] if p and p["summary"].get("added_latency_ms") is not None else "-"
    gd, gu = dn["summary"]["download_bps"], upp["summary"]["upload_bps"]
    return [name, rates, r["headline"].get("grade", "-"), add(dn), add(upp), add(both), "%.2f" % (gd / 1e6), "%.2f" % (gu / 1e6)], (gd, gu)
rows = []
b, _ = row("unshaped", d["before"], "-")
rows.append(b)
st = d["settings"] or {}
rate = lambda k: "%.2f" % (st[k]["rate_bps"] / 1e6) if st.get(k) else "-"
t, tg = row("bloatlab tune", d["after"], "%s / %s" % (rate("download"), rate("upload")))
rows.append(t)
ratios = []
for s in shares:
    r = json.load(open(f"{w}/rule-{s}.json"))
    x, g = row(f"{s}% of the speed test", r, "%.2f / %.2f" % tuple(v * float(s) / 100 / 1e6 for v in (phase(d["before"], False, True)["summary"]["download_bps"], phase(d["before"], True, False)["summary"]["upload_bps"])))
    rows.append(x)
    ratios.append(f"{s}%: down {tg[0] / g[0]:.3f}, up {tg[1] / g[1]:.3f}, added both ways {t[5]} vs {x[5]} ms")
head = ["method", "shaper down / up Mbit/s", "grade", "added down ms", "added up ms", "added both ms", "goodput down Mbit/s", "goodput up Mbit/s"]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| " + " | ".join(r) + " |")
print(f"search: {d['search_seconds']:.0f} s, {d['search_bytes'] / 1e6:.0f} MB, {len(d['steps'])} steps")
print("tune vs rule (goodput tune / rule): " + "; ".join(ratios))
PY
