// rocelab's live lab view: plain JS and SVG, no dependencies. It follows /events
// (server-sent events, one lab status per message), draws the topology once, and on
// every message updates each link's utilization and queue, the ports table and the
// selected host's flows. ?frames=N stops after N messages (a snapshot, as the headless
// test takes). Errors land in #errors, so a headless browser's DOM shows them.
//
// The same page replays a finished experiment (rocelab web --experiment DIR): its
// messages have the same shape plus a "replay" field (frame, frames, simulated time
// span), which turns on the play/pause button, the time slider and the speed; the
// page then reopens /events?from=K&every=MS to seek, pause and change speed. Times
// are then the run's simulated nanoseconds, so rates come out as the run had them.
"use strict";

const errorsEl = document.getElementById("errors");
function report(msg) {
  const li = document.createElement("li");
  li.textContent = msg;
  errorsEl.appendChild(li);
}
window.addEventListener("error", (e) => report("error: " + e.message));
window.addEventListener("unhandledrejection", (e) => report("rejected: " + e.reason));
const consoleError = console.error.bind(console);
console.error = (...args) => { report("console: " + args.join(" ")); consoleError(...args); };

const SVG = "http://www.w3.org/2000/svg";
const params = new URLSearchParams(location.search);
const maxFrames = Number(params.get("frames") || 0);
let frames = 0, prev = null, drawn = false, selected = params.get("host") || "";
let es = null, replay = null, playing = true, every = Number(params.get("every") || 100);
const links = new Map();   // "a|b" -> {line, label, ports: [port names]}
const nodes = new Map();   // name -> g

function parseRate(s) {    // "100G", "25G", "400M" -> bit/s
  const m = /^([\d.]+)\s*([KMGT]?)/i.exec(s || "");
  if (!m) return 0;
  return Number(m[1]) * ({ "": 1, K: 1e3, M: 1e6, G: 1e9, T: 1e12 }[m[2].toUpperCase()]);
}

function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

// layout: hosts on the bottom row; switches that reach a host above them; switches that
// reach only switches (spines) on top.
function draw(st) {
  const svg = document.getElementById("graph");
  const hosts = (st.hosts || []).map((h) => h.name);
  const sws = st.switches || [];
  const edge = sws.filter((s) => s.ports.some((p) => hosts.includes(p.peer))).map((s) => s.name);
  const core = sws.map((s) => s.name).filter((n) => !edge.includes(n));
  const rows = [core, edge, hosts].filter((r) => r.length);
  const pos = new Map();
  rows.forEach((row, i) => {
    const y = rows.length === 1 ? 180 : 40 + i * (280 / (rows.length - 1));
    row.forEach((n, j) => pos.set(n, { x: (1100 * (j + 1)) / (row.length + 1), y }));
  });
  const gl = el("g", {}, svg), gn = el("g", {}, svg);
  for (const s of sws) {
    for (const p of s.ports) {
      const key = [s.name, p.peer].sort().join("|");
      let l = links.get(key);
      if (!l) {
        const a = pos.get(s.name), b = pos.get(p.peer) || a;
        const line = el("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "link", stroke: "#bbb", "stroke-width": 2 }, gl);
        const label = el("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 4, class: "linklabel" }, gl);
        l = { line, label, ports: [] };
        links.set(key, l);
      }
      l.ports.push(p.port);
    }
  }
  for (const [name, p] of pos) {
    const isHost = hosts.includes(name);
    const g = el("g", { class: "node " + (isHost ? "host" : "switch"), id: "node-" + name, "data-name": name }, gn);
    el("rect", { x: p.x - 34, y: p.y - 14, width: 68, height: 28, rx: isHost ? 14 : 3 }, g);
    el("text", { x: p.x, y: p.y }, g).textContent = name;
    if (isHost) g.addEventListener("click", () => select(name));
    nodes.set(name, g);
  }
  const sel = document.getElementById("host");
  for (const h of hosts) {
    const o = document.createElement("option");
    o.value = o.textContent = h;
    sel.appendChild(o);
  }
  sel.addEventListener("change", () => select(sel.value));
  select(selected && hosts.includes(selected) ? selected : hosts[0]);
}

function select(name) {
  selected = name;
  document.getElementById("host").value = name;
  for (const [n, g] of nodes) g.classList.toggle("selected", n === name);
  if (prev) flows(prev.status);
}

// stat reads a port counter under its status --json key: the Go field name today,
// snake_case once status's keys are (both are accepted).
function stat(s, camel, snake) { return s[snake] ?? s[camel] ?? 0; }

function gbps(v) { return v == null ? "∞" : (v / 1e9).toFixed(2); }

function flows(st) {
  const body = document.querySelector("#qps tbody");
  body.textContent = "";
  const h = (st.hosts || []).find((x) => x.name === selected);
  for (const q of (h && h.qps) || []) {
    const tr = body.insertRow();
    tr.id = "qp-" + selected + "-" + q.qpn;
    for (const v of [q.qpn, q.state, gbps(q.rate_bps), q.window_bytes == null ? "∞" : Math.round(q.window_bytes),
      q.hpcc_u == null ? "-" : q.hpcc_u.toFixed(3), q.inflight_bytes]) tr.insertCell().textContent = v;
  }
}

// token is what a capture needs (rocelab prints the page's URL with ?token=...); the
// page keeps it for the tab's session, so a reload without it still captures.
const token = new URLSearchParams(location.search).get("token") || sessionStorage.getItem("rocelab-token") || "";
if (token) sessionStorage.setItem("rocelab-token", token);

async function toggleCapture(port, running) {
  const r = await fetch(`/api/capture?port=${encodeURIComponent(port)}&action=${running ? "stop" : "start"}`,
    { method: "POST", headers: { "X-Rocelab-Token": token } });
  if (!r.ok) report(`capture ${port}: ${await r.text()}`);
}

function update(v) {
  const st = v.status;
  if (!drawn) { draw(st); drawn = true; }
  document.getElementById("lab").textContent = st.name;
  if (v.replay) showReplay(v);
  if (prev && v.time_ns <= prev.time_ns) prev = null; // a replay sought back: no rate yet
  const dt = prev ? (v.time_ns - prev.time_ns) / 1e9 : 0;
  const old = new Map();
  if (prev) for (const s of prev.status.switches || []) for (const p of s.ports) old.set(p.port, p.stats);
  const util = new Map();
  const body = document.querySelector("#ports tbody");
  body.textContent = "";
  for (const s of st.switches || []) {
    for (const p of s.ports) {
      const o = old.get(p.port);
      const tx = stat(p.stats, "TxBytes", "tx_bytes"), q = stat(p.stats, "QLen", "qlen_bytes");
      const rate = o && dt > 0 ? ((tx - stat(o, "TxBytes", "tx_bytes")) * 8) / dt : 0;
      const u = parseRate(p.rate) ? rate / parseRate(p.rate) : 0;
      util.set(p.port, { u, q });
      const tr = body.insertRow();
      tr.id = "port-" + p.port;
      tr.dataset.txBytes = tx;
      // a replay has no drops, ECN marks or captures: the runs do not record them per port
      const na = (x) => (replay ? "–" : x);
      for (const x of [p.port, p.peer, (rate / 1e9).toFixed(2), (100 * u).toFixed(1) + "%", q,
        na(stat(p.stats, "Drops", "drops")), na(stat(p.stats, "ECNMarks", "ecn_marks")), tx]) tr.insertCell().textContent = x;
      if (replay) { tr.insertCell().textContent = "–"; continue; }
      const c = v.captures[p.port];
      const running = !!(c && c.running);
      const cell = tr.insertCell();
      const b = document.createElement("button");
      b.textContent = running ? "stop" : "capture";
      b.className = "capture";
      b.onclick = () => toggleCapture(p.port, running);
      cell.appendChild(b);
      if (c && !c.running && c.figures) cell.append(` ${c.figures.frames} frames, ${c.figures.dropped} dropped`);
    }
  }
  for (const l of links.values()) {
    let u = 0, q = 0;
    for (const port of l.ports) {
      const x = util.get(port);
      if (x) { u = Math.max(u, x.u); q = Math.max(q, x.q); }
    }
    l.line.setAttribute("stroke-width", 2 + 10 * Math.min(1, u));
    l.line.setAttribute("stroke", u > 0.8 ? "#d33" : u > 0.1 ? "#e90" : u > 0 ? "#4a4" : "#bbb");
    l.label.textContent = `${(100 * u).toFixed(1)}% · q ${q} B`;
  }
  prev = v;
  flows(st);
  document.getElementById("updates").textContent = ++frames;
}

// showReplay sets up the replay's controls on its first message and moves them along.
function showReplay(v) {
  const r = v.replay;
  const seek = document.getElementById("seek");
  if (!replay) {
    document.getElementById("kind").textContent = "experiment";
    document.getElementById("qpcol").textContent = "flow";
    document.getElementById("replay").hidden = false;
    seek.max = r.frames - 1;
    seek.addEventListener("input", () => seekTo(Number(seek.value)));
    document.getElementById("play").addEventListener("click", () => (playing ? pause() : play()));
    const speed = document.getElementById("speed");
    speed.value = String(every);
    speed.addEventListener("change", () => { every = Number(speed.value); if (playing) play(); });
  }
  replay = r;
  seek.value = r.frame;
  document.getElementById("simtime").textContent =
    `${((v.time_ns - r.start_ns) / 1e3).toFixed(2)} of ${((r.end_ns - r.start_ns) / 1e3).toFixed(2)} µs simulated, sample ${r.frame + 1} of ${r.frames}`;
}

function setPlaying(p, state) {
  playing = p;
  document.getElementById("play").textContent = p ? "pause" : "play";
  document.getElementById("state").textContent = state;
}

function pause() {
  if (es) es.close();
  setPlaying(false, "paused");
}

// play goes on from the frame shown (from the start once at the end).
function play() {
  const next = replay.frame + 1 < replay.frames ? replay.frame + 1 : 0;
  if (next === 0) prev = null;
  follow(`?from=${next}&every=${every}`);
  setPlaying(true, "replaying");
}

// seekTo shows frame k: paused, the frame before it and k (a rate needs two); playing,
// the replay goes on from there.
function seekTo(k) {
  prev = null;
  const from = Math.max(0, k - 1);
  follow(`?from=${from}&every=${every}` + (playing ? "" : `&count=${k - from + 1}`));
}

function follow(query) {
  if (es) es.close();
  es = new EventSource("/events" + query);
  es.onopen = () => { if (!replay) document.getElementById("state").textContent = "live"; };
  es.onmessage = (e) => {
    update(JSON.parse(e.data));
    if (replay && playing) document.getElementById("state").textContent = "replaying";
    if (maxFrames && frames >= maxFrames) {
      es.close();
      document.getElementById("state").textContent = "snapshot";
    }
  };
  es.addEventListener("failure", (e) => report("lab: " + e.data));
  es.addEventListener("end", () => { // the replay's last frame (or the frames asked for) was sent
    es.close();
    if (playing) setPlaying(false, replay.frame + 1 === replay.frames ? "ended" : "paused");
  });
}

follow(location.search);
