#!/usr/bin/env python3
"""Generate the example mahimahi traces in this folder (deterministic).

Trace format (mahimahi): one line per delivery opportunity of 1500 bytes,
the number is the millisecond it happens at; the last line is the period
after which the trace repeats.

* constant-12mbit.trace: one opportunity per ms for 1 s = 12 Mbit/s.
* cellular-down.trace / cellular-up.trace: synthetic, cellular-like links
  over a 20 s period: the rate changes every 100 ms by a bounded random walk
  (down: 2-40 Mbit/s, up: 0.5-8 Mbit/s), with two 300 ms outages. These are
  NOT measurements of a real network; they exercise variable-rate behaviour.
"""
import random

def write(name, rates_bps, step_ms, period_ms):
    lines, acc = [], 0.0
    for ms in range(1, period_ms + 1):
        rate = rates_bps[(ms - 1) // step_ms]
        acc += rate / 1000.0 / (1500 * 8)  # opportunities this ms
        while acc >= 1.0:
            lines.append(ms)
            acc -= 1.0
    if not lines or lines[-1] != period_ms:
        lines.append(period_ms)  # the period marker (one more opportunity)
    with open(name, "w") as f:
        f.write("".join(f"{t}\n" for t in lines))

def walk(seed, lo, hi, n, outages):
    r = random.Random(seed)
    x, out = (lo + hi) / 2, []
    for i in range(n):
        x *= 2 ** r.uniform(-0.35, 0.35)
        x = min(max(x, lo), hi)
        out.append(0.0 if any(a <= i < b for a, b in outages) else x)
    return out

write("constant-12mbit.trace", [12e6], 1000, 1000)
write("cellular-down.trace", walk(1, 2e6, 40e6, 200, [(50, 53), (140, 143)]), 100, 20000)
write("cellular-up.trace", walk(2, 0.5e6, 8e6, 200, [(50, 53), (140, 143)]), 100, 20000)
