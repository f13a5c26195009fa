// bloatlab's probe worker, started twice by the page: one runs the
// control WebSocket (the server's pushed state in, the page's phase cuts
// out) and the WebRTC probe channel when the browser lets the page hand it
// over; the other the HTTP request/response probes, so that neither's work
// delays the other's. The page gets the round trips in batches every
// 100 ms, the server's pushed state as it comes, and every probe (and
// this thread's lateness) when told to stop.
'use strict';
const now = () => performance.timeOrigin + performance.now();
let ws = null;
let timer = null;
let seq = 0;
let probeUrl = null;
const probes = []; // [seq, sent, answered|null, url]
let batch = [];

// The HTTP probes are the request/response exchanges of `bloatlab test`
// (engine::probe::RrProbe): one at a time, the next at its slot or, when
// its answer came late, as soon as it comes (a probe every 20 ms
// regardless would put a small packet and its ACK in the queue they
// measure 50 times a second more than the CLI does, and hold a browser's
// connections). Each is timed by the browser's network stack: its Resource
// Timing entry's requestStart (the request went out) and responseStart
// (the answer's first byte came in), so neither this thread nor the
// browser's hand-offs to it are in the round trip; the worker's own clock
// only where a browser gives no entry. The live readings are the same
// stamps: an answer goes into the page's batch when its entry comes (the
// worker's clock would add the new connection's handshake, a whole round
// trip, to each: the server closes each probe's connection).
const timing = new Map(); // url -> [requestStart, responseStart] (Unix ms)
const awaiting = new Map(); // url -> an answered probe whose entry has not come yet
let observing = false;
if (typeof PerformanceObserver === 'function') {
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if (e.name.includes('/api/probe?') && e.requestStart > 0 && e.responseStart >= e.requestStart) {
          const t = [performance.timeOrigin + e.requestStart, performance.timeOrigin + e.responseStart];
          timing.set(e.name, t);
          if (awaiting.delete(e.name)) batch.push([t[0], t[1] - t[0]]);
        }
      }
      // the observer has them: keep the timeline's buffer (250 by default) from filling
      performance.clearResourceTimings();
    }).observe({ type: 'resource', buffered: true });
    observing = true;
  } catch (e) { /* no Resource Timing here: the worker's clock times the probes */ }
}
// An answer whose entry has not come within this long goes live timed by
// the worker's clock (the result, too, times it so: timed()).
const ENTRY_WAIT_MS = 500;
let inFlight = false;
let owed = false;
function send() {
  if (!probeUrl) return;
  if (inFlight) { owed = true; return; }
  owed = false;
  inFlight = true;
  const s = seq++;
  const url = new URL(probeUrl + s, location.href).href;
  const r = [s, now(), null, url];
  probes.push(r);
  fetch(url, { cache: 'no-store' })
    .then((res) => (res.ok ? res.arrayBuffer() : Promise.reject(new Error('HTTP ' + res.status))))
    .then(() => {
      const t4 = now();
      r[2] = t4;
      const t = timing.get(url);
      if (t) batch.push([t[0], t[1] - t[0]]);
      else if (observing) awaiting.set(url, r);
      else batch.push([r[1], t4 - r[1]]);
    }, () => { /* refused or failed: unanswered */ })
    .finally(() => {
      inFlight = false;
      if (owed) send();
    });
}

// the HTTP probes' worker
let httpRole = false;
function http(m) {
  httpRole = true;
  probeUrl = m.probe;
  send();
  timer = setInterval(send, m.interval);
}

function start(m) {
  ws = new WebSocket(m.url);
  ws.onopen = () => postMessage({ k: 'open' });
  ws.onmessage = (ev) => {
    let d;
    try { d = JSON.parse(ev.data); } catch (e) { return; }
    if (d.server) postMessage({ k: 'server', flows: d.server, t: d.t_ns / 1e6, up: d.arrived_up, down: d.arrived_down });
  };
  ws.onclose = (ev) => {
    clearInterval(timer);
    postMessage({ k: 'closed', code: ev.code, reason: ev.reason });
  };
  ws.onerror = () => postMessage({ k: 'error' });
}

// ---- the UDP probes: the page's WebRTC data channel, transferred here
// (browsers that allow it: Chromium, Firefox, Safari), so neither its
// sends nor its answers wait for the page's main thread (its live plot,
// the load's bookkeeping). Each probe is due on a fixed schedule; how late
// this thread sent it, and how late its timers ran (a 5 ms tick), are the
// page's own delay, reported with the probes.
let dc = null;
let rtcTimer = null;
const rtc = []; // [seq, sent, answered|null, due]
let rtcBatch = [];
const lags = []; // [tick due, late by] of ticks late by more than 1 ms
let tickDue = 0;

function startRtc(m) {
  dc = m.dc;
  dc.onopen = () => {
    postMessage({ k: 'rtc-open' });
    const t0 = now();
    let k = 0;
    const next = () => {
      const due = t0 + k * m.interval;
      rtcTimer = setTimeout(() => {
        if (dc.readyState !== 'open') return;
        const s = k++;
        const t = now();
        rtc.push([s, t, null, due]);
        dc.send('{"p":' + s + '}');
        next();
      }, Math.max(0, due - now()));
    };
    next();
  };
  dc.onmessage = (ev) => {
    const t4 = now();
    let d;
    try { d = JSON.parse(ev.data); } catch (e) { return; }
    const r = rtc[d.p];
    if (r && r[0] === d.p && r[2] === null) {
      r[2] = t4;
      rtcBatch.push([r[1], t4 - r[1]]);
    }
  };
  dc.onclose = () => clearTimeout(rtcTimer);
}

function tick() {
  const t = now();
  if (tickDue && t - tickDue > 1 && lags.length < 100000) lags.push([tickDue, t - tickDue]);
  tickDue = t + 5;
  setTimeout(tick, 5);
}
tick();

// The last answers: as `bloatlab test` does, up to LAST_ANSWERS_MS for
// them (a bloated queue holds seconds), less once every probe is answered
// (UDP: a lost one never is).
const LAST_ANSWERS_MS = 3000;
function lastAnswers(list) {
  const until = now() + LAST_ANSWERS_MS;
  return new Promise((resolve) => {
    const wait = () => {
      if (now() < until && list.some((p) => p[2] === null && p[1] > until - 2 * LAST_ANSWERS_MS)) { setTimeout(wait, 20); return; }
      resolve(list);
    };
    wait();
  });
}

function stopRtc() {
  clearTimeout(rtcTimer);
  return lastAnswers(rtc).then((r) => {
    if (dc) dc.close();
    return r;
  });
}

// the clock's step as measured here (browsers coarsen performance.now():
// 5 us when cross-origin isolated, 100 us or more otherwise)
function timerStep() {
  let step = Infinity;
  const until = performance.now() + 3;
  let last = performance.now();
  while (performance.now() < until) {
    const t = performance.now();
    if (t > last) { step = Math.min(step, t - last); last = t; }
  }
  return isFinite(step) ? step : null;
}

// [seq, sent, answered|null, network-timed]: each answered probe's times
// from its Resource Timing entry where the browser gave one (observers
// hear of an entry a little after its fetch resolves: a moment is left)
function timed(list) {
  return new Promise((resolve) => setTimeout(() => resolve(list.map(([s, t1, t4, url]) => {
    const e = t4 === null ? null : timing.get(url);
    return e ? [s, e[0], e[1], true] : [s, t1, t4, false];
  })), 200));
}

function stop() {
  clearInterval(timer);
  probeUrl = null;
  const rtcDone = dc ? stopRtc() : Promise.resolve([]);
  Promise.all([rtcDone, httpRole ? lastAnswers(probes).then(timed) : []]).then(([r, rr]) => {
    postMessage({ k: 'done', probes: rr, rtc: r, lags, step_ms: timerStep(), isolated: self.crossOriginIsolated === true });
    if (ws) ws.close(1000);
  });
}

// Every batch says up to when it is whole (`at`: every answer timed here
// before it is in this batch or an earlier one), even an empty one: the
// page judges a phase's latency only over windows it has heard in full.
setInterval(() => {
  let at = now();
  if (httpRole) {
    // answers still waiting for their entry are not heard yet: the batch is
    // whole only up to the first one's sending
    for (const [url, r] of awaiting) {
      if (at - r[2] > ENTRY_WAIT_MS) {
        awaiting.delete(url);
        batch.push([r[1], r[2] - r[1]]);
      } else at = Math.min(at, r[1]);
    }
    postMessage({ k: 'rtt', v: batch, at });
    batch = [];
  }
  if (dc) { postMessage({ k: 'rtc-rtt', v: rtcBatch, at }); rtcBatch = []; }
}, 100);

onmessage = (e) => {
  if (e.data.cmd === 'start') start(e.data);
  else if (e.data.cmd === 'http') http(e.data);
  else if (e.data.cmd === 'stop') stop();
  else if (e.data.cmd === 'rtc') startRtc(e.data);
  // the page ended loaded phase i before its cap: the server resets its uploads
  else if (e.data.cmd === 'cut' && ws && ws.readyState === WebSocket.OPEN) ws.send('{"cut":' + e.data.phase + '}');
};
