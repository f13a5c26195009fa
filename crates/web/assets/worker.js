// bloatlab's probe worker: one WebSocket, a probe every interval, each
// answer timed here (Unix ms from performance.timeOrigin + now()). The page
// gets the round trips in batches every 100 ms, the server's pushed state
// as it comes, and every probe when told to stop.
'use strict';
const now = () => performance.timeOrigin + performance.now();
let ws = null;
let timer = null;
let seq = 0;
const probes = []; // [seq, sent, answered|null]
let batch = [];

function send() {
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  const s = seq++;
  probes.push([s, now(), null]);
  ws.send('{"p":' + s + '}');
}

function start(m) {
  ws = new WebSocket(m.url);
  ws.onopen = () => {
    postMessage({ k: 'open' });
    send();
    timer = setInterval(send, m.interval);
  };
  ws.onmessage = (ev) => {
    const t4 = now();
    let d;
    try { d = JSON.parse(ev.data); } catch (e) { return; }
    if (typeof d.p === 'number') {
      const r = probes[d.p];
      if (r && r[0] === d.p && r[2] === null) {
        r[2] = t4;
        batch.push([r[1], t4 - r[1]]);
      }
    } else if (d.server) {
      postMessage({ k: 'server', flows: d.server, t: d.t_ns / 1e6, up: d.arrived_up, down: d.arrived_down });
    }
  };
  ws.onclose = (ev) => {
    clearInterval(timer);
    postMessage({ k: 'closed', code: ev.code, reason: ev.reason });
  };
  ws.onerror = () => postMessage({ k: 'error' });
}

function stop() {
  clearInterval(timer);
  // give the last answers a moment (1 s at most) to arrive
  const until = now() + 1000;
  const wait = () => {
    if (now() < until && probes.some((p) => p[2] === null)) { setTimeout(wait, 20); return; }
    postMessage({ k: 'done', probes });
    if (ws) ws.close(1000);
  };
  wait();
}

setInterval(() => {
  if (batch.length) { postMessage({ k: 'rtt', v: batch }); batch = []; }
}, 100);

onmessage = (e) => {
  if (e.data.cmd === 'start') start(e.data);
  else if (e.data.cmd === 'stop') stop();
  // the page ended loaded phase i before its cap: the server resets its uploads
  else if (e.data.cmd === 'cut' && ws && ws.readyState === WebSocket.OPEN) ws.send('{"cut":' + e.data.phase + '}');
};
