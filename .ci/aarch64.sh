#!/usr/bin/env bash
# The router build: the static aarch64 binary (scripts/build-aarch64.sh,
# built once, `router` profile) run under qemu-user: --version, tune
# --help, and a loopback server + test whose result must be complete and
# graded.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v qemu-aarch64 >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq qemu-user >/dev/null; }
bash scripts/build-aarch64.sh
B=target/aarch64-unknown-linux-musl/router/bloatlab
Q="qemu-aarch64 $B"
$Q --version | grep -q '^bloatlab ' || { echo "aarch64: --version failed" >&2; exit 1; }
$Q tune --help | grep -q -- '--wan <IFACE>' || { echo "aarch64: tune --help lacks --wan" >&2; exit 1; }
W=$(mktemp -d)
PORT=$((20000 + RANDOM % 20000))
$Q server --port "$PORT" --no-web --no-rpm >"$W/server.log" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 1 100); do grep -q listening "$W/server.log" && break; sleep 0.1; done
$Q test "127.0.0.1:$PORT" --duration 2s --scenarios 1u1d --json "$W/r.json" >"$W/test.log" 2>&1 || { cat "$W/test.log" "$W/server.log" >&2; exit 1; }
python3 - "$W/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["complete"], r.get("incomplete_reason")
assert r["headline"].get("grade"), r["headline"]
assert r["headline"]["download_capacity_bps"] > 0 and r["headline"]["upload_capacity_bps"] > 0
print("aarch64: loopback test under qemu-user: grade %s, %.0f Mbit/s down" % (r["headline"]["grade"], r["headline"]["download_capacity_bps"] / 1e6))
PY
echo "aarch64: ok ($(du -h "$B" | cut -f1) static binary)"
