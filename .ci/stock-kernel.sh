#!/usr/bin/env bash
# The lab on a stock kernel: boot Debian's kernel (linux-image-*-amd64,
# extracted with dpkg-deb, not installed) in QEMU with virtme-ng over this
# machine's filesystem, load its queue disciplines, and run the kernel-qdisc
# lab test (fq_codel, codel, pie, cake, fq, netem) inside. Judged by the
# guest's own log (vng exits 255 without udev). Skips, saying why, when QEMU
# cannot start the guest; with BLOATLAB_STRICT=1 (as .ci/run sets it) that
# is a failure. Run by .ci/run after the test suite.
set -uo pipefail
cd "$(dirname "$0")/.."
work="${STOCK_KERNEL_DIR:-/tmp/bloatlab-stock-kernel}"
mkdir -p "$work"
skip() {
  if [ -n "${BLOATLAB_STRICT:-}" ] && [ "${BLOATLAB_STRICT}" != 0 ]; then
    echo "FAIL stock-kernel job (BLOATLAB_STRICT): $*"; exit 1
  fi
  echo "SKIP stock-kernel job: $*"; exit 0
}

export DEBIAN_FRONTEND=noninteractive
need=""
command -v qemu-system-x86_64 >/dev/null || need="$need qemu-system-x86"
command -v depmod >/dev/null || need="$need kmod"
command -v busybox >/dev/null || need="$need busybox-static"
if [ -n "$need" ]; then
  apt-get install -y -q --no-install-recommends $need >/dev/null 2>&1 || skip "cannot install$need"
fi
if ! command -v vng >/dev/null; then
  python3 -m pip install -q virtme-ng >/dev/null 2>&1 || python3 -m pip install -q --break-system-packages virtme-ng >/dev/null 2>&1 \
    || skip "virtme-ng cannot be installed from PyPI"
  hash -r
fi
command -v vng >/dev/null || skip "vng is not on PATH after installing virtme-ng"

# The newest Debian stock kernel package (not -cloud, not -rt).
pkg=$(apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-amd64$' | awk '{print $1}' | sort -V | tail -1)
[ -n "$pkg" ] || skip "no linux-image-*-amd64 package in the apt lists"
ver=${pkg#linux-image-}
root="$work/$ver"
if [ ! -f "$root/boot/vmlinuz-$ver" ]; then
  (cd "$work" && rm -f "$pkg"_*.deb && apt-get download "$pkg" >/dev/null 2>&1) || skip "cannot download $pkg"
  dpkg-deb -x "$work/$pkg"_*.deb "$root" || skip "cannot extract $pkg"
  depmod -b "$root" "$ver" 2>/dev/null || true
fi

# The test binaries, built on the host, run in the guest: test_bin PACKAGE TEST
test_bin() {
  cargo test -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$2" | tail -1
}
bin=$(test_bin bloatlab lab_kernel_qdiscs)
[ -x "$bin" ] || { echo "stock-kernel job: cannot build the lab_kernel_qdiscs test"; exit 1; }
# bloatlab tune's shaper on a kernel with fq_codel: installed (HTB +
# fq_codel, download through an IFB) and undone exactly.
tune=$(test_bin bloatlab-tune apply)
[ -x "$tune" ] || { echo "stock-kernel job: cannot build the tune apply test"; exit 1; }

# the bloatlab binary for `bloatlab lab --tune` in the guest
cargo build -q -p bloatlab || { echo "stock-kernel job: cannot build bloatlab"; exit 1; }
exe="$PWD/target/debug/bloatlab"

out="$work/out"
rm -rf "$out" && mkdir -p "$out"
# KVM when it can run this kernel (a paravirtual /dev/kvm may refuse a stock
# kernel's MSRs and abort QEMU within seconds), TCG otherwise.
kvm="--disable-kvm"; accel="TCG"
if [ -w /dev/kvm ]; then
  mkdir -p "$out/kvm-probe"
  timeout 120 vng --run "$root/boot/vmlinuz-$ver" --rwdir "$out/kvm-probe" --memory 1G \
    --exec "echo ok > $out/kvm-probe/ok" >"$out/kvm-probe/vng.log" 2>&1
  if [ -s "$out/kvm-probe/ok" ]; then kvm=""; accel="KVM"
  else echo "stock-kernel job: KVM cannot run $pkg here ($(grep -m1 -iE 'error|assert' "$out/kvm-probe/vng.log" || echo 'no guest')); using TCG"; fi
fi
start=$(date +%s)
echo "stock-kernel job: booting $pkg under QEMU ($accel) with virtme-ng"
timeout 2400 vng $kvm --run "$root/boot/vmlinuz-$ver" \
  --rodir "/lib/modules/$ver=$root/lib/modules/$ver" --rwdir "$out" \
  --memory 2G --cpus 2 --cwd "$PWD" \
  --exec "sh $PWD/.ci/stock-kernel-guest.sh $out $bin $tune $exe" >"$out/vng.log" 2>&1
rc=$?
echo "stock-kernel job: vng exited $rc after $(( $(date +%s) - start )) s"
if [ ! -s "$out/guest.log" ]; then
  tail -20 "$out/vng.log"
  skip "QEMU did not start the guest (no guest log; vng exit $rc)"
fi
grep -E "^guest kernel|^modprobe|SKIP|^(fifo|fq_codel|codel|pie|cake|fq|netem)|tune: |lab tune |test result|EXIT|panicked|Error" "$out/guest.log"
if grep -q "^GUEST EXIT 0" "$out/guest.log" && grep -q "test result: ok. 1 passed" "$out/guest.log" \
  && grep -q "tune: HTB + fq_codel on wan0 and ifb4wan0: installed, then undone exactly" "$out/guest.log" \
  && grep -q "test result: ok. 4 passed" "$out/guest.log" && ! grep -q "^SKIP" "$out/guest.log" \
  && grep -q "^lab tune cake: [DF] -> " "$out/guest.log" && grep -q "^lab tune fq_codel: [DF] -> " "$out/guest.log" \
  && ! grep -q "AssertionError" "$out/guest.log"; then
  echo "stock-kernel job: passed on $pkg"
  exit 0
fi
echo "stock-kernel job: FAILED on $pkg (guest log: $out/guest.log)"
tail -60 "$out/guest.log"
exit 1
