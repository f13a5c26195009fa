#!/bin/sh
# Runs inside the QEMU guest (virtme-ng, the host's filesystem): load the
# stock kernel's queue disciplines, run the kernel-qdisc lab test, log to $1.
out="$1"; bin="$2"; tune="$3"
exec >"$out/guest.log" 2>&1
echo "guest kernel $(uname -r)"
for m in veth tun bridge ifb sch_ingress cls_u32 act_mirred sch_htb sch_tbf sch_fq_codel sch_codel sch_cake sch_pie sch_fq sch_netem sch_prio; do
  modprobe "$m" 2>&1 || echo "modprobe $m failed"
done
mountpoint -q /run || mount -t tmpfs tmpfs /run
mkdir -p /run/netns /run/bloatlab
# The host's sysctls are not the guest's: the lab needs forwarding only in its namespaces.
"$bin" --test-threads=1 --nocapture
lab=$?
echo "LAB EXIT $lab"
# bloatlab tune's shaper installed and undone (HTB + fq_codel, IFB)
BLOATLAB_STRICT=1 "$tune" --test-threads=1 --nocapture
t=$?
echo "TUNE EXIT $t"
[ "$lab" = 0 ] && [ "$t" = 0 ]
echo "GUEST EXIT $?"
