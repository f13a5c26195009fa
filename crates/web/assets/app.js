// bloatlab's browser test. The page runs the plan the server gives it,
// measures (probes in a Web Worker, load with parallel fetch/XHR streams),
// posts its raw measurements, and shows the result the server built from
// them and from its own side: every number shown below the live view comes
// from that result, as `bloatlab test` would print it.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const now = () => performance.timeOrigin + performance.now();
  const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
  const SVG = 'http://www.w3.org/2000/svg';
  const LABEL = { idle: 'Idle', download: 'Download', upload: 'Upload', both: 'Both ways', household: 'Household' };

  // ---- the live readings' formatting (three significant digits, as the CLI
  // prints); every figure of the result comes formatted by the server ----
  function sig3(v, maxDec) {
    if (v === null || v === undefined || !isFinite(v)) return '-';
    if (v === 0) return '0';
    if (Math.abs(v) >= 99.5) return v.toFixed(0);
    const mag = Math.floor(Math.log10(Math.abs(v)));
    const scale = Math.pow(10, mag - 2);
    const r = Math.round(v / scale) * scale;
    const m2 = Math.floor(Math.log10(Math.abs(r)));
    const dec = Math.min(Math.max(2 - m2, 0), maxDec === undefined ? 9 : maxDec);
    return r.toFixed(dec);
  }
  const ms = (v) => (v === null || v === undefined ? '-' : sig3(v, 3) + ' ms');
  function rate(bps) {
    if (bps === null || bps === undefined || !isFinite(bps)) return '-';
    const a = Math.abs(bps);
    const [d, u] = a >= 999.5e6 ? [1e9, 'Gbit/s'] : a >= 999.5e3 ? [1e6, 'Mbit/s'] : a >= 999.5 ? [1e3, 'kbit/s'] : [1, 'bit/s'];
    return sig3(bps / d) + ' ' + u;
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function table(t, head, rows) {
    t.replaceChildren();
    const tr = el('tr');
    head.forEach((h) => tr.append(el('th', { scope: 'col' }, h)));
    t.appendChild(el('thead')).appendChild(tr);
    const tb = t.appendChild(el('tbody'));
    rows.forEach((r) => {
      const row = tb.appendChild(el('tr'));
      r.forEach((c, i) => {
        const cell = el(i === 0 ? 'th' : 'td', i === 0 ? { scope: 'row' } : {});
        if (c instanceof Node) cell.append(c); else cell.textContent = c;
        row.append(cell);
      });
    });
  }

  // a test's workers: a test that fails stops them (no probe or load outlives it)
  let testWorkers = [];
  function fail(msg) {
    testWorkers.forEach((w) => w.terminate());
    testWorkers = [];
    window.bloatlabError = msg;
    $('error').textContent = msg;
    $('error').hidden = false;
    $('status').textContent = '';
    $('start').disabled = false;
  }

  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ cache: 'no-store' }, opts || {}));
    let j = null;
    try { j = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((j && j.error) || path + ': HTTP ' + r.status);
    return j;
  }

  // ---- live view ----
  // rest: the least time the phases after the current one take; current: the
  // current phase's load flows (the server also holds the next phase's
  // upload streams, opened ahead of it); shown: send time of the round trip shown
  const live = { t0: 0, total: 1, rest: 0, phases: [], rtts: [], tcp: [], arrived: [], current: new Set(), shown: 0 };

  function drawPlot() {
    // drawn at the size it is shown, so its text is the size it says
    const p = $('plot');
    // the test runs at least its phases' minimums; a phase running on while latency rises lengthens it
    if (!live.over) live.total = Math.max(live.total, now() - live.t0 + live.rest);
    const W = Math.max(300, Math.round(p.clientWidth || 800)), H = W < 600 ? 240 : 280, L = 58, R = 8, T = 22, B = 48;
    p.setAttribute('viewBox', `0 0 ${W} ${H}`);
    p.setAttribute('height', H);
    p.replaceChildren();
    const xs = (t) => L + ((t - live.t0) / live.total) * (W - L - R);
    let top = 50;
    for (const [, r] of live.rtts) top = Math.max(top, r * 1.1);
    if (!live.rtts.length) for (const [, r] of live.tcp) top = Math.max(top, r * 1.1);
    const steps = [1, 2, 5];
    let step = 10;
    for (let k = 0; ; k++) {
      const s = steps[k % 3] * Math.pow(10, Math.floor(k / 3));
      if (top / s <= 5) { step = s; break; }
    }
    top = Math.ceil(top / step) * step;
    const ys = (v) => T + (1 - v / top) * (H - T - B);
    for (const ph of live.phases) {
      const x0 = xs(ph.start), x1 = xs(ph.end || now());
      p.append(svg('rect', { x: x0, y: T, width: Math.max(0, x1 - x0), height: H - T - B, class: 'band band-' + ph.name }));
      p.append(svg('text', { x: x0 + 4, y: T - 6, class: 'plabel' }, LABEL[ph.name] || ph.name));
    }
    for (let v = 0; v <= top; v += step) {
      p.append(svg('line', { x1: L, x2: W - R, y1: ys(v), y2: ys(v), class: 'grid' }));
      p.append(svg('text', { x: L - 6, y: ys(v) + 4, class: 'tick', 'text-anchor': 'end' }, String(v)));
    }
    const secs = live.total / 1000;
    const xstep = secs > 30 || W < 500 ? 10 : 5;
    for (let s = 0; s <= secs; s += xstep) {
      p.append(svg('text', { x: xs(live.t0 + s * 1000), y: H - 30, class: 'tick', 'text-anchor': s + xstep > secs ? 'end' : 'middle' }, s + ' s'));
    }
    p.append(svg('text', { x: 12, y: T + (H - T - B) / 2, class: 'tick', transform: `rotate(-90 12 ${T + (H - T - B) / 2})`, 'text-anchor': 'middle' }, 'round trip, ms'));
    // the HTTP (TCP) round trips, clipped to the axis, under the UDP ones
    for (const [list, cls] of [[live.tcp, 'tcp'], [live.rtts, 'rtt']]) {
      if (!list.length) continue;
      const pts = list.map(([t, r]) => xs(t).toFixed(1) + ',' + ys(Math.min(r, top)).toFixed(1)).join(' ');
      p.append(svg('polyline', { points: pts, class: cls }));
    }
    const second = W < 560 ? L + 120 : L + 250;
    p.append(svg('line', { x1: L, x2: L + 20, y1: H - 10, y2: H - 10, class: 'rtt' }));
    p.append(svg('text', { x: L + 24, y: H - 6, class: 'tick' }, W < 560 ? 'UDP (WebRTC)' : 'round trip, UDP probes (WebRTC)'));
    p.append(svg('line', { x1: second, x2: second + 20, y1: H - 10, y2: H - 10, class: 'tcp' }));
    p.append(svg('text', { x: second + 24, y: H - 6, class: 'tick' }, W < 560 ? 'TCP (HTTP)' : 'round trip, TCP probes (HTTP)'));
  }

  // what arrived over the last second, as the server counts it
  function liveRates() {
    const h = live.arrived;
    if (h.length < 2) return;
    const last = h[h.length - 1];
    let i = h.length - 1;
    while (i > 0 && last[0] - h[i - 1][0] <= 1000) i--;
    const first = h[i];
    const dt = (last[0] - first[0]) / 1000;
    if (dt <= 0) return;
    $('now-down').textContent = rate(((last[1] - first[1]) * 8) / dt);
    $('now-up').textContent = rate(((last[2] - first[2]) * 8) / dt);
  }

  function showServer(flows) {
    if (!flows.length) { $('server-now').textContent = ''; return; }
    const rng = (vals, f) => {
      const v = vals.filter((x) => x !== null && x !== undefined);
      if (!v.length) return '-';
      const lo = Math.min(...v), hi = Math.max(...v);
      return lo === hi ? f(lo) : f(lo) + ' to ' + f(hi);
    };
    // this phase's streams (the next phase's uploads are connected ahead of it)
    flows = flows.filter((f) => live.current.has(f.id));
    if (!flows.length) { $('server-now').textContent = ''; return; }
    const down = flows.filter((f) => f.direction === 'down');
    const parts = [flows.length + ' load connection(s)'];
    if (down.length) {
      parts.push('sending: cwnd ' + rng(down.map((f) => f.cwnd), String) + ' segments');
      parts.push('smoothed RTT ' + rng(down.map((f) => f.srtt_ms), (v) => sig3(v, 3)) + ' ms');
      parts.push(rng(down.map((f) => f.retransmits), String) + ' retransmits');
    }
    $('server-now').textContent = 'Server now: ' + parts.join(', ');
  }

  // ---- load ----
  let nextFlow = 1;
  const wsBase = () => (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host;

  // The load runs in its own worker (load.js); this thread keeps the flows'
  // records and runs the ramp from the byte counts the worker reports.
  let loader = null;
  let probeWorker = null;
  let rtcOpened = null;
  // the main thread's own lateness while a test runs: a 5 ms tick, [due,
  // late by] when over 1 ms (the probes' if their channel runs here)
  const mainLags = [];
  let mainDue = 0;
  let mainTick = null;
  function tick() {
    const t = now();
    if (mainDue && t - mainDue > 1 && mainLags.length < 100000) mainLags.push([mainDue, t - mainDue]);
    mainDue = t + 5;
    mainTick = setTimeout(tick, 5);
  }
  const known = new Map();
  let stopped = null;
  function startLoader() {
    loader = new Worker('/load.js');
    testWorkers.push(loader);
    loader.onmessage = (e) => {
      const m = e.data;
      if (m.k === 'bytes') {
        for (const [id, bytes, error] of m.flows) {
          const f = known.get(id);
          if (f) { f.bytes = bytes; if (error) f.error = error; }
        }
      } else if (m.k === 'stopped' && stopped) {
        stopped(m.flows);
      }
    };
  }
  function stopFlows(fs) {
    return new Promise((resolve) => {
      stopped = (list) => {
        for (const x of list) {
          const f = known.get(x.id);
          if (!f) continue;
          Object.assign(f, { bytes: x.bytes, max_gap_ms: x.max_gap_ms, max_gap_at_ms: x.max_gap_at_ms });
          if (f.direction === 'down') f.samples = x.samples;
          if (x.error && !f.error) f.error = x.error;
          known.delete(x.id);
        }
        resolve();
      };
      loader.postMessage({ cmd: 'stop', ids: fs.map((f) => f.id) });
    });
  }
  function openUp(sid, f) {
    known.set(f.id, f);
    loader.postMessage({ cmd: 'open-up', id: f.id, url: wsBase() + '/api/upws?s=' + sid + '&f=' + f.id });
    return f;
  }

  // ---- when a loaded phase has shown the queue's size ----
  // The server's rule (plan.settle: model::SETTLE_RULE), applied live as
  // `bloatlab test` applies it; the result judges every phase by the same
  // rule in Rust (metrics::settle: still_rising, settled_after_s).
  function median(v) {
    const s = v.slice().sort((a, b) => a - b);
    const h = (s.length - 1) / 2;
    return (s[Math.floor(h)] + s[Math.ceil(h)]) / 2;
  }
  function settled(samples, start, elapsed, r) {
    const n = Math.floor(elapsed / r.window_ms);
    if (n < r.hold + 1) return false;
    const bins = Array.from({ length: n }, () => []);
    for (const [sent, rtt] of samples) {
      const k = Math.floor((sent + rtt - start) / r.window_ms);
      if (sent >= start && k >= 0 && k < n) bins[k].push(rtt);
    }
    const lv = bins.map((b) => (b.length >= r.min_samples ? median(b) : null));
    const recent = lv.slice(n - r.hold);
    if (recent.some((v) => v === null)) return false;
    const prior = Math.max(...lv.slice(0, n - r.hold).filter((v) => v !== null));
    return isFinite(prior) && Math.max(...recent) <= prior * (1 + r.tolerance) + r.floor_ms;
  }

  // A pause lasts pause_ms and, after a phase that ran until latency stopped
  // rising, on until the queue it left has drained back to the idle round
  // trip (plan.drain: model::DRAIN_RULE, as `bloatlab test` waits), at most
  // drain.cap_ms: this browser's uploads stop only when the server hears of
  // the phase's end, through that very queue.
  async function drain(plan, rep) {
    const t0 = now();
    await sleep(plan.pause_ms);
    const adaptive = plan.phases.some((p) => p.cap_ms > p.duration_ms);
    const idleP50 = idleMedian(rep, plan.drain.min_samples);
    if (!adaptive || idleP50 === null) return;
    const r = plan.drain;
    while (now() - t0 < r.cap_ms) {
      const t = now();
      const recent = (live.rtts.length ? live.rtts : live.tcp).filter(([s, rtt]) => s + rtt >= t - r.window_ms).map(([, rtt]) => rtt);
      if (recent.length >= r.min_samples && median(recent) <= idleP50 * (1 + r.tolerance) + r.floor_ms) return;
      await sleep(50);
    }
  }

  // The idle phase's median round trip (the probes the result grades: the
  // UDP ones, else the HTTP ones), or null with fewer than `min` answers.
  function idleMedian(rep, min) {
    const idle = rep.phases.find((p) => p.name === 'idle');
    if (!idle) return null;
    const list = live.rtts.length ? live.rtts : live.tcp;
    const base = list.filter(([t]) => t >= idle.start_ms && t < idle.end_ms).map(([, r]) => r);
    return base.length >= Math.max(1, min) ? median(base) : null;
  }

  async function loadPhase(plan, sid, ph, idx, rep, start, ready) {
    // at least duration_ms, then on until latency stopped rising, at most cap_ms
    const min = start + ph.duration_ms;
    const end = start + ph.cap_ms;
    const adaptive = ph.cap_ms > ph.duration_ms;
    const dirs = [];
    if (ph.download) dirs.push('down');
    if (ph.upload) dirs.push('up');
    const streams = [];
    const open = (dir) => {
      if (dir === 'up') {
        const f = ready.length ? ready.shift() : openUp(sid, newFlow(rep, 'up', idx));
        loader.postMessage({ cmd: 'start-up', id: f.id, end, phase: idx });
        live.current.add(f.id);
        streams.push({ dir, f });
        return;
      }
      const f = newFlow(rep, 'down', idx);
      known.set(f.id, f);
      live.current.add(f.id);
      loader.postMessage({ cmd: 'down', id: f.id, url: `/api/down?s=${sid}&f=${f.id}` });
      streams.push({ dir, f });
    };
    const count = (d) => streams.filter((s) => s.dir === d).length;
    const bytes = (d) => streams.filter((s) => s.dir === d).reduce((a, s) => a + s.f.bytes, 0);
    for (const d of dirs) for (let k = 0; k < Math.min(plan.start_streams, ph.max_streams); k++) open(d);
    // ramp: from ramp_from on, add a stream each step while the
    // direction's goodput still grew and no queue has built (the round
    // trip over the last step within ramp_queue_ms of idle's: once it is
    // not, the line is full and the growth is slow start into the queue);
    // then hold (never back off)
    const ramp = {};
    for (const d of dirs) ramp[d] = { growing: true, bytes: 0, rate: 0 };
    const idleP50 = idleMedian(rep, plan.drain.min_samples);
    const queued = (t) => {
      if (idleP50 === null) return false;
      const recent = (live.rtts.length ? live.rtts : live.tcp).filter(([s, rtt]) => s + rtt >= t - plan.ramp_step_ms && s >= start).map(([, rtt]) => rtt);
      return recent.length > 0 && median(recent) > idleP50 + plan.ramp_queue_ms;
    };
    let lastStep = 0;
    // the phase ends when its load is told to stop (the cut, the cap or a failure)
    let stoppedAt = null;
    try {
      while (now() < end) {
        await sleep(Math.min(plan.sample_interval_ms, end - now()));
        const t = now();
        if (hidden) throw new Error(HIDDEN);
        const err = streams.find((s) => s.f.error);
        if (err) throw new Error(err.f.error);
        const from = start + plan.ramp_from_ms - plan.ramp_step_ms;
        if (t >= from && t - lastStep >= plan.ramp_step_ms) {
          const ramping = lastStep > 0 && t < start + plan.ramp_until * ph.duration_ms && !queued(t);
          if (lastStep > 0 && !ramping) for (const d of dirs) ramp[d].growing = false;
          for (const d of dirs) {
            const r = ramp[d];
            const b = bytes(d);
            const rt = lastStep > 0 ? (b - r.bytes) / (t - lastStep) : 0;
            if (ramping && r.growing && r.rate > 0) {
              if (count(d) < ph.max_streams && rt > r.rate * (1 + plan.ramp_growth)) open(d);
              else r.growing = false;
            }
            r.bytes = b;
            r.rate = rt;
          }
          lastStep = t;
        }
        // the probes the result grades: the UDP ones, else the HTTP
        // ones; judged over the windows whose answers have all reached this
        // thread, and only when those are the windows the result will judge
        // (it ends the phase here, at t): an answer still in the worker's
        // batch would otherwise be missing from the last window
        const which = live.rtts.length ? 'rtts' : 'tcp';
        const heard = Math.min(t, live.heard[which]);
        const w = plan.settle.window_ms;
        if (adaptive && t >= min && Math.floor((heard - start) / w) === Math.floor((t - start) / w) && settled(live[which], start, heard - start, plan.settle)) {
          probeWorker.postMessage({ cmd: 'cut', phase: idx });
          stoppedAt = t;
          break;
        }
      }
    } finally {
      live.current.clear();
      if (stoppedAt === null) stoppedAt = now();
      await stopFlows(streams.map((s) => s.f));
    }
    return stoppedAt;
  }

  function newFlow(rep, dir, phase) {
    const f = { id: nextFlow++, direction: dir, phase, samples: [], bytes: 0, max_gap_ms: 0, max_gap_at_ms: 0 };
    // a stream's failure, for the phase's own check (a failure while it runs
    // ends the test); not part of the report: when the page ends a phase
    // before its cap the server resets its uploads, and a close that lands
    // before the stop reaches the load worker is not a failure of the phase
    Object.defineProperty(f, 'error', { value: null, writable: true, enumerable: false });
    rep.flows.push(f);
    return f;
  }

  // ---- UDP probes: a WebRTC data channel, unordered, never retransmitted ----
  // One peer connection per channel: one SCTP association sends its
  // channels' messages through one congestion window, so the probes would
  // wait behind the household test's call frames in this browser.
  async function connect(sid, kind, id) {
    if (!window.RTCPeerConnection) throw new Error('this browser offers no WebRTC');
    const pc = new RTCPeerConnection({ iceServers: [] });
    // negotiated (the server opens the same stream id): both ends then send unreliably
    const dc = pc.createDataChannel(kind, { negotiated: true, id, ordered: false, maxRetransmits: 0 });
    await pc.setLocalDescription(await pc.createOffer());
    const answer = await api('/api/rtc?s=' + sid + '&c=' + kind, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'offer', sdp: pc.localDescription.sdp }) });
    await pc.setRemoteDescription(answer);
    await new Promise((resolve, reject) => {
      dc.onopen = resolve;
      setTimeout(() => reject(new Error('the ' + kind + ' channel did not open within 5 s (UDP to the server blocked?)')), 5000);
    });
    return { pc, dc };
  }

  // The probe channel runs in the probe worker where the browser lets the
  // page hand a data channel over (transferable RTCDataChannel), so the
  // page's own work (its plot, the load's bookkeeping) cannot delay a
  // probe or its answer; else here, on the page's main thread, and the
  // result says which ran.
  async function openRtcInWorker(sid, worker, interval) {
    if (!window.RTCPeerConnection) throw new Error('this browser offers no WebRTC');
    const pc = new RTCPeerConnection({ iceServers: [] });
    const dc = pc.createDataChannel('probe', { negotiated: true, id: 0, ordered: false, maxRetransmits: 0 });
    try {
      worker.postMessage({ cmd: 'rtc', dc, interval }, [dc]);
    } catch (e) {
      pc.close();
      return null;
    }
    const opened = new Promise((resolve, reject) => {
      rtcOpened = resolve;
      setTimeout(() => reject(new Error('the probe channel did not open within 5 s (UDP to the server blocked?)')), 5000);
    });
    await pc.setLocalDescription(await pc.createOffer());
    const answer = await api('/api/rtc?s=' + sid + '&c=probe', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'offer', sdp: pc.localDescription.sdp }) });
    await pc.setRemoteDescription(answer);
    await opened;
    // the worker hands the probes back with its HTTP ones, once their
    // last answers are in: the connection closes after that (close())
    return { thread: 'worker', stop: async () => null, close: () => pc.close() };
  }

  async function openRtc(sid, interval) {
    const { pc, dc } = await connect(sid, 'probe', 0);
    const probes = [];
    let seq = 0;
    dc.onmessage = (ev) => {
      const t4 = now();
      let d;
      try { d = JSON.parse(ev.data); } catch (e) { return; }
      const r = probes[d.p];
      if (r && r[0] === d.p && r[2] === null) {
        r[2] = t4;
        live.rtts.push([r[1], t4 - r[1]]);
        // "now" is the latest probe's: an answer that overtook an older one wins
        if (!live.over && r[1] > live.shown) { live.shown = r[1]; $('now-rtt').textContent = ms(t4 - r[1]); }
      }
    };
    live.heard.rtts = Infinity;
    const timer = setInterval(() => {
      if (dc.readyState !== 'open') return;
      const s = seq++;
      probes.push([s, now(), null]);
      dc.send('{"p":' + s + '}');
    }, interval);
    return {
      thread: 'main',
      stop: async () => {
        clearInterval(timer);
        // the last answers, as the worker waits for them (UDP: lost ones never come)
        const until = now() + 3000;
        while (now() < until && probes.some((p) => p[2] === null && p[1] > until - 6000)) await sleep(20);
        dc.close();
        pc.close();
        return probes;
      },
    };
  }

  // ---- the household test's video call: a frame every 1/fps s, each sent
  // back by the server; [seq, sent, back or null], the frame's first 4 bytes
  // its number ----
  async function openCall(sid, h) {
    const { pc, dc } = await connect(sid, 'call', 1);
    dc.binaryType = 'arraybuffer';
    const frames = [];
    let timer = null;
    dc.onmessage = (ev) => {
      const t4 = now();
      if (!(ev.data instanceof ArrayBuffer) || ev.data.byteLength < 4) return;
      const r = frames[new DataView(ev.data).getUint32(0)];
      if (r && r[2] === null) r[2] = t4;
    };
    return {
      start: (end) => {
        const frame = new ArrayBuffer(h.call_frame_bytes);
        timer = setInterval(() => {
          if (now() >= end) { clearInterval(timer); return; }
          if (dc.readyState !== 'open') return;
          const n = frames.length;
          new DataView(frame).setUint32(0, n);
          frames.push([n, now(), null]);
          dc.send(frame);
        }, 1000 / h.call_fps);
      },
      stop: async () => {
        clearInterval(timer);
        // the last frames back, as the probes' last answers are awaited
        const until = now() + 3000;
        while (now() < until && frames.some((f) => f[2] === null && f[1] > until - 6000)) await sleep(20);
        dc.close();
        pc.close();
        return frames;
      },
    };
  }

  // ---- the household test's stream: segments fetched in turn, each when
  // due or when the last one arrived, whichever is later ----
  async function streamSegments(sid, h, start, end) {
    const segs = [];
    // segments due within the phase (timers wake up to a millisecond early:
    // the schedule decides, not the clock, so a segment due at the end is not fetched)
    for (let k = 0; start + k * h.stream_segment_ms < end; k++) {
      await sleep(start + k * h.stream_segment_ms - now());
      const g = { requested_ms: now(), first_byte_ms: null, done_ms: null, bytes: 0 };
      segs.push(g);
      const ac = new AbortController();
      const cut = setTimeout(() => ac.abort(), Math.max(0, end - now()));
      try {
        const r = await fetch(`/api/down?s=${sid}&f=${nextFlow++}&bytes=${h.stream_segment_bytes}`, { signal: ac.signal, cache: 'no-store' });
        if (!r.ok) throw new Error('a stream segment: HTTP ' + r.status);
        const rd = r.body.getReader();
        for (;;) {
          const { done, value } = await rd.read();
          if (done) break;
          if (g.first_byte_ms === null) g.first_byte_ms = now();
          g.bytes += value.byteLength;
        }
        g.done_ms = now();
      } catch (e) {
        // cut at the phase's end, or its connection failed through the full
        // queue (a new connection's request can wait seconds behind it): the
        // segment did not arrive (done_ms stays null), as a player stalls
      } finally {
        clearTimeout(cut);
      }
    }
    return segs;
  }

  // ---- the test ----
  // A tab sent to the background has its timers slowed by the browser: its
  // figures would measure the browser, so the test stops, never graded.
  let hidden = false;
  document.addEventListener('visibilitychange', () => { if (document.hidden) hidden = true; });
  const HIDDEN = 'the test was interrupted: this tab went to the background, where the browser slows its timers, so its figures would measure the browser, not the line. Keep the tab in front and start again.';

  async function runTest(mode) {
    hidden = false;
    $('error').hidden = true;
    window.bloatlabError = undefined;
    window.bloatlabResult = undefined;
    $('start').disabled = true;
    $('result').hidden = true;
    $('status').textContent = 'Starting…';
    const sess = await api('/api/session?mode=' + encodeURIComponent(mode), { method: 'POST' });
    const plan = sess.plan;
    const worker = new Worker('/worker.js');
    probeWorker = worker;
    // the HTTP probes in a worker of their own: their requests' work does
    // not delay the UDP probes' thread
    const httpWorker = new Worker('/worker.js');
    let httpDone = null;
    testWorkers = [worker, httpWorker];
    httpWorker.onmessage = (e) => {
      const m = e.data;
      if (m.k === 'rtt') { for (const v of m.v) live.tcp.push(v); live.heard.tcp = m.at; }
      else if (m.k === 'done' && httpDone) httpDone(m);
    };
    const wsUrl = wsBase() + '/api/ws?s=' + sess.id;
    let probesDone = null;
    let wsClosed = null;
    const opened = new Promise((resolve, reject) => {
      worker.onmessage = (e) => {
        const m = e.data;
        if (m.k === 'open') resolve();
        else if (m.k === 'error') reject(new Error('the control WebSocket could not connect'));
        else if (m.k === 'rtc-open' && rtcOpened) rtcOpened();
        else if (m.k === 'rtc-rtt') {
          for (const v of m.v) {
            live.rtts.push(v);
            if (!live.over && v[0] > live.shown) { live.shown = v[0]; $('now-rtt').textContent = ms(v[1]); }
          }
          live.heard.rtts = m.at;
        }
        else if (m.k === 'server' && !live.over) { showServer(m.flows); live.arrived.push([m.t, m.down, m.up]); liveRates(); }
        else if (m.k === 'closed') { wsClosed = m.reason || 'closed (' + m.code + ')'; reject(new Error('the control WebSocket closed: ' + wsClosed)); }
        else if (m.k === 'done' && probesDone) probesDone(m);
      };
    });
    // heard: up to when each list holds every answer (the worker's batches
    // say; UDP probes on this thread are heard as they come)
    Object.assign(live, { phases: [], rtts: [], tcp: [], arrived: [], over: false, heard: { rtts: 0, tcp: 0 } });
    worker.postMessage({ cmd: 'start', url: wsUrl });
    let rtc = null;
    let rtcError = null;
    await opened;
    httpWorker.postMessage({ cmd: 'http', probe: '/api/probe?s=' + sess.id + '&p=', interval: plan.probe_interval_ms });
    // ?probes=main keeps the channel on this thread (to measure what the worker saves)
    const inWorker = new URLSearchParams(location.search).get('probes') !== 'main';
    const rtcUp = (inWorker ? openRtcInWorker(sess.id, worker, plan.probe_interval_ms) : Promise.resolve(null))
      .then((r) => r || openRtc(sess.id, plan.probe_interval_ms))
      .then((r) => { rtc = r; }, (e) => { rtcError = String(e.message || e); });
    await rtcUp;
    // the household test's call, connected ahead of its phase
    const call = plan.household ? await openCall(sess.id, plan.household) : null;
    mainLags.length = 0;
    mainDue = 0;
    clearTimeout(mainTick);
    tick();
    const rep = { start_ms: now(), phases: [], flows: [], rtc_probes: [], rtc_error: rtcError, rr_probes: [], complete: true, call_frames: [], segments: [],
      page: { probe_thread: rtc ? rtc.thread : 'worker', lags: [], timer_step_ms: null, isolated: false } };
    Object.assign(live, { t0: rep.start_ms, total: plan.total_ms });
    $('live').hidden = false;
    const timer = setInterval(drawPlot, 250);
    // each uploading phase's first streams, connected ahead of it
    startLoader();
    const ready = plan.phases.map((ph, i) => (ph.upload ? Array.from({ length: Math.min(plan.start_streams, ph.max_streams) }, () => openUp(sess.id, newFlow(rep, 'up', i))) : []));
    try {
      for (const [i, ph] of plan.phases.entries()) {
        if (i > 0) {
          // a pause shows as a pause: no load, the queue drains
          $('now-phase').textContent = 'Pause';
          $('status').textContent = 'Pausing so the queue drains…';
          for (const id of ['now-down', 'now-up']) $(id).textContent = '-';
          await drain(plan, rep);
        }
        live.rest = plan.phases.slice(i + 1).reduce((a, p) => a + p.duration_ms + plan.pause_ms, 0);
        if (wsClosed) throw new Error('the control WebSocket closed: ' + wsClosed);
        if (hidden) throw new Error(HIDDEN);
        const start = now();
        const p = { name: ph.name, start_ms: start, end_ms: start };
        rep.phases.push(p);
        live.phases.push({ name: ph.name, start });
        $('now-phase').textContent = LABEL[ph.name] || ph.name;
        $('status').textContent = 'Measuring: ' + (LABEL[ph.name] || ph.name).toLowerCase() + '…';
        if (ph.name === 'household') {
          // a game (the probes), a call, a stream and a bulk update at once
          const end = start + ph.duration_ms;
          call.start(end);
          const [segs, stopped] = await Promise.all([streamSegments(sess.id, plan.household, start, end), loadPhase(plan, sess.id, ph, i, rep, start, ready[i])]);
          rep.segments = segs;
          p.end_ms = stopped;
        } else if (ph.download || ph.upload) p.end_ms = await loadPhase(plan, sess.id, ph, i, rep, start, ready[i]);
        else {
          await sleep(ph.duration_ms);
          p.end_ms = now();
        }
        live.phases[i].end = p.end_ms;
      }
    } finally {
      clearInterval(timer);
      drawPlot();
      // the live numbers are over: the result below holds what was measured
      live.over = true;
      $('now-phase').textContent = 'Finished';
      for (const id of ['now-rtt', 'now-down', 'now-up']) $(id).textContent = '-';
      $('server-now').textContent = '';
    }
    $('status').textContent = 'Computing the result…';
    const wsDone = new Promise((resolve) => { probesDone = resolve; worker.postMessage({ cmd: 'stop' }); });
    const rrDone = new Promise((resolve) => { httpDone = resolve; httpWorker.postMessage({ cmd: 'stop' }); });
    let mainRtc;
    [mainRtc, rep.call_frames] = await Promise.all([rtc ? rtc.stop() : [], call ? call.stop() : []]);
    const [done, rr] = await Promise.all([wsDone, rrDone]);
    if (rtc && rtc.close) rtc.close();
    // probes sent while the channels were still connecting belong to no
    // phase (Firefox took over a second to open WebRTC on loopback)
    const inTest = (list) => list.filter((p) => p[1] >= rep.start_ms);
    rep.rr_probes = inTest(rr.probes);
    // the UDP probes: from the worker (the channel ran there) or this thread
    rep.rtc_probes = inTest(rtc && rtc.thread === 'worker' ? done.rtc.map((r) => r.slice(0, 3)) : mainRtc || []);
    // the lateness of the thread that timed the graded probes: the UDP
    // ones', else the HTTP ones' (those the network stack did not time)
    rep.page.lags = !rtc ? rr.lags : rtc.thread === 'main' ? mainLags.slice() : done.lags;
    clearTimeout(mainTick);
    rep.page.timer_step_ms = done.step_ms;
    rep.page.isolated = done.isolated;
    testWorkers.forEach((w) => w.terminate());
    testWorkers = [];
    const out = await api('/api/result?s=' + sess.id, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(rep) });
    show(out, plan);
    $('status').textContent = 'Done.';
    $('start').disabled = false;
    return out;
  }

  // ---- the result, as the server built it ----
  function show(out, plan) {
    const r = out.result;
    const h = r.headline;
    const g = h.grade || '?';
    $('grade').textContent = g;
    // the badge's colour from the server's one grade table (report::grade_color)
    const gc = grades.find((x) => x.letter === g);
    $('grade').style.background = gc ? gc.color : '';
    $('verdict').textContent = out.verdict.sentence;
    // every figure below is the server's, formatted by the CLI's formatter (view)
    const view = out.view;
    const dl = $('headline');
    dl.replaceChildren();
    for (const [k, v] of view.headline) {
      const d = dl.appendChild(el('div'));
      d.append(el('dt', {}, k), el('dd', {}, v));
    }
    table($('phases'), view.phases.head, view.phases.rows);
    $('page-delay').textContent = view.notes;
    const cards = (box, list) => {
      box.replaceChildren();
      for (const u of list || []) {
        const c = box.appendChild(el('div', { class: 'use' }));
        const head = c.appendChild(el('h3', {}, u.name + ' '));
        head.append(el('span', { class: 'badge v-' + u.verdict }, u.verdict));
        c.append(el('p', {}, u.measured), el('p', { class: 'small' }, u.rule));
      }
    };
    cards($('uses'), out.uses);
    cards($('household'), out.household);
    $('household-box').hidden = !(out.household && out.household.length);
    table($('server'), view.server.head, view.server.rows);
    // the server's text: its nanosecond integers are beyond a JS number's precision
    const blob = new Blob([out.result_json], { type: 'application/json' });
    const dlb = $('download');
    dlb.onclick = () => {
      const a = el('a', { href: URL.createObjectURL(blob), download: 'bloatlab-browser-' + r.metadata.start_time.replace(/[:.]/g, '-') + '.json' });
      document.body.append(a);
      a.click();
      a.remove();
    };
    const pl = $('permalink');
    pl.hidden = !out.permalink;
    if (out.permalink) pl.href = out.permalink;
    $('not-kept').hidden = !out.not_kept;
    $('not-kept').textContent = out.not_kept || '';
    $('result').hidden = false;
    // last: automation reads it once the page shows it
    window.bloatlabPermalink = out.permalink || null;
    window.bloatlabResultJson = out.result_json;
    window.bloatlabResult = r;
  }

  function mode() {
    const m = document.querySelector('input[name=mode]:checked');
    return m ? m.value : 'quick';
  }

  // the grade scale and colours, as /api/plan gives them
  let grades = [];

  async function init() {
    const q = new URLSearchParams(location.search);
    if (q.get('mode')) {
      const m = document.querySelector('input[name=mode][value="' + CSS.escape(q.get('mode')) + '"]');
      if (m) m.checked = true;
    }
    $('start').addEventListener('click', () => { runTest(mode()).catch((e) => fail(String(e.message || e))); });
    try {
      for (const m of ['quick', 'thorough', 'household']) {
        const p = await api('/api/plan?mode=' + m);
        $('len-' + m).textContent = '(about ' + Math.round(p.plan.total_ms / 1000) + ' s)';
        $('version').textContent = p.server.bloatlab_version;
        grades = p.grades;
        $('grade-scale').textContent = p.grade_scale;
      }
    } catch (e) { fail(String(e.message || e)); return; }
    const kept = location.pathname.match(/^\/r\/([0-9a-f]{16})$/);
    if (kept) {
      try {
        const out = await api('/api/results/' + kept[1]);
        show(out, null);
        $('status').textContent = 'A kept result from ' + out.result.metadata.start_time + '. Start a test to measure your own line.';
      } catch (e) { fail(String(e.message || e)); }
    } else if (q.get('autostart') === '1') {
      $('start').click();
    }
  }
  init();
})();
