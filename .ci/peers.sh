#!/usr/bin/env bash
# Build the RPM peers for the interop tests (crates/cli/tests/rpm.rs,
# lab_rpm_interop.rs) from their unmodified source snapshots in
# ../shared/peers (the Go module proxy refuses these two modules by name but
# serves their dependencies): goresponsiveness (the networkQuality client)
# and goserver (networkqualityd). Nothing of theirs enters the repository;
# the binaries go to target/peers/bin.
# Usage: .ci/peers.sh [PEERS_DIR]   prints the two binaries' paths as
# BLOATLAB_GORESPONSIVENESS=... and BLOATLAB_GOSERVER=... lines.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
src="${1:-}"
if [ -z "$src" ]; then
  for d in "$repo/../shared/peers" /work/shared/peers; do
    if [ -f "$d/goresponsiveness.tar.gz" ] && [ -f "$d/goserver.tar.gz" ]; then src="$d"; break; fi
  done
fi
if [ -z "$src" ]; then
  echo "peers: no goresponsiveness.tar.gz and goserver.tar.gz in ../shared/peers" >&2
  exit 1
fi
# Go as the machine has it (/usr/local/go on these machines), else Debian's golang-go.
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null; then
  (apt-get update -q && apt-get install -y -q --no-install-recommends golang-go) >&2 || true
fi
command -v go >/dev/null || { echo "peers: Go is not installed and could not be installed" >&2; exit 1; }
out="$repo/target/peers"
bin="$out/bin"
mkdir -p "$bin"
build() { # name tarball build-args...
  local name=$1 tarball=$2; shift 2
  local dir="$out/$name"
  # rebuild only when the snapshot changed
  local sum; sum=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [ -f "$dir/.built" ] && [ "$(cat "$dir/.built")" = "$sum" ]; then return; fi
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xzf "$tarball" -C "$dir"
  (cd "$dir" && go build "$@") >&2
  echo "$sum" > "$dir/.built"
}
build goresponsiveness "$src/goresponsiveness.tar.gz" -o "$bin/networkQuality" .
build goserver "$src/goserver.tar.gz" -o "$bin/" ./cmd/...
[ -x "$bin/networkQuality" ] || { echo "peers: goresponsiveness did not build" >&2; exit 1; }
[ -x "$bin/networkqualityd" ] || { echo "peers: goserver did not build (no networkqualityd)" >&2; exit 1; }
echo "BLOATLAB_GORESPONSIVENESS=$bin/networkQuality"
echo "BLOATLAB_GOSERVER=$bin/networkqualityd"
