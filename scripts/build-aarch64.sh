#!/usr/bin/env bash
# A static bloatlab for aarch64 routers (OpenWrt, a Raspberry Pi, any
# arm64 Linux): musl, linked by zig through cargo-zigbuild.
#
# Why zig: ring and aws-lc-sys (TLS, the RPM server's certificates, the
# browser test's WebRTC) compile C for the target; zig is a whole C cross
# toolchain for musl in one PyPI wheel (`pip install ziglang`), where
# Debian's cross gcc would need a musl sysroot besides. Everything comes
# from crates.io and PyPI.
#
#   scripts/build-aarch64.sh          # -> target/aarch64-unknown-linux-musl/router/bloatlab
#
# The `router` profile (Cargo.toml) is release without debug information,
# stripped: about 23 MB. Copy it with `scp` (OpenWrt: to /tmp, RAM; or to
# /usr/bin where flash allows) and run it there: see docs/tune.md.
set -euo pipefail
cd "$(dirname "$0")/.."
T=aarch64-unknown-linux-musl
rustup target list --installed | grep -qx "$T" || rustup target add "$T"
python3 -m ziglang version >/dev/null 2>&1 || pip install --quiet --break-system-packages ziglang 2>/dev/null || pip install --quiet ziglang
command -v cargo-zigbuild >/dev/null 2>&1 || cargo install --quiet --locked cargo-zigbuild
cargo zigbuild --quiet --profile router --target "$T" -p bloatlab
B=target/$T/router/bloatlab
echo "built $B ($(du -h "$B" | cut -f1)$(command -v file >/dev/null 2>&1 && file -b "$B" | cut -d, -f1-2 | sed 's/^/, /'))"
