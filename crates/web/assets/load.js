// bloatlab's load worker: the page's download streams (fetch, bodies read
// and counted) and upload streams (WebSockets kept topped up), off the main
// thread, so reading gigabits a second does not delay the page's UDP
// probes. The page starts and stops flows; this worker reports their byte
// counts every 50 ms and, when a flow stops, its samples and gaps.
'use strict';
const now = () => performance.timeOrigin + performance.now();
const flows = new Map();
let sampleMs = 100;
const CHUNK = new ArrayBuffer(64 * 1024);

function flow(id, dir) {
  const f = { id, dir, bytes: 0, samples: [], max_gap_ms: 0, max_gap_at_ms: 0, error: null, done: null, stop: null };
  flows.set(id, f);
  return f;
}

function down(id, url) {
  const f = flow(id, 'down');
  const ac = new AbortController();
  f.stop = () => ac.abort();
  f.done = (async () => {
    try {
      const r = await fetch(url, { signal: ac.signal, cache: 'no-store' });
      if (!r.ok) { let j = null; try { j = await r.json(); } catch (e) { /* */ } throw new Error((j && j.error) || 'HTTP ' + r.status); }
      const rd = r.body.getReader();
      let last = 0;
      for (;;) {
        const { done, value } = await rd.read();
        if (done) break;
        const t = now();
        if (last && t - last > f.max_gap_ms) { f.max_gap_ms = t - last; f.max_gap_at_ms = t; }
        last = t;
        f.bytes += value.byteLength;
      }
    } catch (e) {
      if (!ac.signal.aborted) f.error = String(e.message || e);
    }
  })();
}

// An upload stream is opened ahead of its phase (a browser opens one
// WebSocket to a host at a time, RFC 6455 4.1, and through a full queue each
// handshake takes a loaded round trip or more), then started.
function openUp(id, url) {
  const f = flow(id, 'up');
  f.ws = new WebSocket(url);
  f.opened = new Promise((resolve) => {
    f.ws.onopen = () => resolve(true);
    f.ws.onerror = () => resolve(false);
    f.ws.onclose = () => resolve(false);
  });
}

// Kept topped up with about 20 ms of the stream's rate (at least 128 KiB),
// so the data flows without pause. The server resets the connection as the
// phase ends (told `until_ms`, the phase's cap, or sooner when the page says
// on its probe socket that the phase ended), dropping what this browser
// still holds.
function startUp(id, end, phase) {
  const f = flows.get(id);
  const ws = f.ws;
  let sent = 0, timer = null, last = [now(), 0], rate = 0, stopped = false;
  const fill = () => {
    if (ws.readyState !== WebSocket.OPEN) return;
    const t = now();
    f.bytes = sent - ws.bufferedAmount;
    if (t - last[0] >= 100) { rate = ((f.bytes - last[1]) * 1000) / (t - last[0]); last = [t, f.bytes]; }
    const target = Math.max(128 * 1024, rate * 0.02);
    while (ws.bufferedAmount < target) { ws.send(CHUNK); sent += CHUNK.byteLength; }
  };
  f.done = new Promise((resolve) => {
    const halt = () => { clearInterval(timer); if (ws.readyState === WebSocket.OPEN) f.bytes = sent - ws.bufferedAmount; };
    ws.onclose = (ev) => {
      halt();
      if (!stopped && !f.error && now() < end - 250) f.error = 'an upload stream closed: ' + (ev.reason || ev.code);
      resolve();
    };
    f.stop = () => { stopped = true; halt(); ws.close(1000); resolve(); };
    f.opened.then((ok) => {
      if (stopped) return;
      if (!ok) { f.error = 'an upload stream could not connect'; resolve(); return; }
      ws.send(JSON.stringify({ until_ms: Math.max(0, end - now()), phase }));
      fill();
      timer = setInterval(fill, 5);
    });
  });
}

async function stop(ids) {
  const fs = ids.map((id) => flows.get(id)).filter(Boolean);
  fs.forEach((f) => f.stop && f.stop());
  await Promise.all(fs.map((f) => f.done));
  postMessage({ k: 'stopped', flows: fs.map((f) => ({ id: f.id, bytes: f.bytes, samples: f.samples, max_gap_ms: f.max_gap_ms, max_gap_at_ms: f.max_gap_at_ms, error: f.error })) });
  fs.forEach((f) => flows.delete(f.id));
}

setInterval(() => {
  const t = now();
  for (const f of flows.values()) if (f.dir === 'down' && f.done) f.samples.push([t, f.bytes]);
}, sampleMs);

setInterval(() => {
  if (!flows.size) return;
  const v = [];
  for (const f of flows.values()) v.push([f.id, f.bytes, f.error]);
  postMessage({ k: 'bytes', t: now(), flows: v });
}, 50);

onmessage = (e) => {
  const m = e.data;
  if (m.cmd === 'down') down(m.id, m.url);
  else if (m.cmd === 'open-up') openUp(m.id, m.url);
  else if (m.cmd === 'start-up') startUp(m.id, m.end, m.phase);
  else if (m.cmd === 'stop') stop(m.ids);
};
