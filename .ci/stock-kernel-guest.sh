#!/bin/sh
# Runs inside the QEMU guest (virtme-ng, the host's filesystem): load the
# stock kernel's queue disciplines, run the kernel-qdisc lab test, log to $1.
out="$1"; bin="$2"
exec >"$out/guest.log" 2>&1
echo "guest kernel $(uname -r)"
for m in veth tun bridge sch_htb sch_tbf sch_fq_codel sch_codel sch_cake sch_pie sch_fq sch_netem sch_prio; do
  modprobe "$m" 2>&1 || echo "modprobe $m failed"
done
mountpoint -q /run || mount -t tmpfs tmpfs /run
mkdir -p /run/netns /run/bloatlab
# The host's sysctls are not the guest's: the lab needs forwarding only in its namespaces.
"$bin" --test-threads=1 --nocapture
echo "GUEST EXIT $?"
