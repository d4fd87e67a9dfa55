// delayq console: one page over the v1 API (no build step, no dependencies).
// Everything that comes from the store (ids, payloads, errors, queue names) is rendered as
// text nodes, never as HTML. Routes live in the URL hash:
//   #/                     queues
//   #/q/NAME[/STATE]       one queue, a state tab (scheduled, due, leased, dead, done)
//   #/q/NAME/job/ID        one job
'use strict';

const STATES = ['waiting', 'scheduled', 'due', 'leased', 'dead', 'done'];
const PAGE = 50;
const TOKEN_KEY = 'delayq-token';

// ---------- DOM helpers (text only) ----------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function toast(text, bad) {
  const t = document.getElementById('toast');
  t.textContent = text;
  t.className = bad ? 'show bad' : 'show';
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.className = ''; }, 4000);
}

function confirmAction(text) {
  const d = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  return new Promise((resolve) => {
    const ok = document.getElementById('confirm-ok');
    const no = document.getElementById('confirm-no');
    const done = (v) => () => { ok.onclick = no.onclick = d.oncancel = null; d.close(); resolve(v); };
    ok.onclick = done(true);
    no.onclick = done(false);
    d.oncancel = done(false);
    d.showModal();
    no.focus();
  });
}

// ---------- time and numbers ----------

const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
function relative(ms) {
  const d = (ms - Date.now()) / 1000;
  const a = Math.abs(d);
  if (a < 1) return 'now';
  if (a < 60) return rtf.format(Math.round(d), 'second');
  if (a < 3600) return rtf.format(Math.round(d / 60), 'minute');
  if (a < 86400) return rtf.format(Math.round(d / 3600), 'hour');
  return rtf.format(Math.round(d / 86400), 'day');
}
function local(ms) { return new Date(ms).toLocaleString(); }
function when(ms) {
  return el('time', { datetime: new Date(ms).toISOString(), title: local(ms) }, relative(ms));
}
function duration(ms) {
  if (!ms) return '0';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3600000) return `${Math.round(ms / 60000)} min`;
  return `${(ms / 3600000).toFixed(1)} h`;
}
function fmt(n) { return n === null || n === undefined ? '–' : Number(n).toLocaleString(); }

// ---------- API ----------

function token() { return sessionStorage.getItem(TOKEN_KEY); }
function headers(json) {
  const h = {};
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
    this.state = body && body.state;
  }
}

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (res.status === 401) { showLogin(); throw new ApiError(401, data); }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

// What this token may do (GET /v1/whoami). An action it does not allow is shown disabled with
// the scope it needs, instead of answering a click with a 403. A server that cannot say
// (an older one) is taken to allow everything: its own 403s still guard it.
let who = null;
async function whoami() {
  if (!who) {
    try { who = await api('GET', '/v1/whoami'); } catch (e) {
      if (e.status === 401) throw e;
      who = { scope: 'all', allows: ['read', 'produce', 'consume', 'admin'] };
    }
  }
  return who;
}
const may = (scope) => !who || who.allows.includes(scope);
const NEEDS = { produce: 'a produce or admin token', consume: 'a consume or admin token', admin: 'an admin token' };
// `node` (a button or an input) as it should be for a token that needs `scope` to use it.
function needs(scope, node) {
  if (!may(scope)) {
    node.disabled = true;
    node.title = `Needs ${NEEDS[scope]} (this one is a ${who.scope} token)`;
  }
  return node;
}

const q = (name) => `/v1/queues/${encodeURIComponent(name)}`;
const jobPath = (name, id) => `${q(name)}/jobs/${encodeURIComponent(id)}`;

// Server-Sent Events over fetch (EventSource cannot send a token).
function subscribe(path, onEvent) {
  const ctl = new AbortController();
  let stopped = false;
  (async function loop() {
    while (!stopped) {
      try {
        const res = await fetch(path, { headers: headers(false), signal: ctl.signal });
        if (res.status === 401) { showLogin(); return; }
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        setLive(true);
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const chunk = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let ev = 'message';
            let data = '';
            for (const line of chunk.split('\n')) {
              if (line.startsWith('event:')) ev = line.slice(6).trim();
              else if (line.startsWith('data:')) data += line.slice(5).trimStart();
            }
            if (data) onEvent(ev, data);
          }
        }
      } catch (_) { /* aborted or dropped: retry below */ }
      setLive(false);
      if (!stopped) await new Promise((r) => setTimeout(r, 2000));
    }
  }());
  return () => { stopped = true; ctl.abort(); };
}

function setLive(on) {
  const l = document.getElementById('live');
  l.textContent = on ? 'live' : '';
  l.className = on ? 'live on' : 'live';
}

// ---------- charts (SVG) ----------

// A line chart of `lines` ([{name, values}]) over `xs` (ms), with a legend and a y scale.
function lineChart(title, xs, lines, unit) {
  const W = 560; const H = 150; const L = 44; const B = 20; const T = 8; const R = 8;
  const all = lines.flatMap((l) => l.values).filter((v) => v !== null && v !== undefined);
  const max = Math.max(1, ...all);
  const n = xs.length;
  const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const last = lines.map((l) => {
    const v = [...l.values].reverse().find((u) => u !== null && u !== undefined);
    return `${l.name} ${v === undefined ? '–' : fmt(Math.round(v * 100) / 100)}${unit || ''}`;
  }).join(', ');
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': `${title}: latest ${last}` });
  for (const f of [0, 0.5, 1]) {
    const yy = y(max * f);
    s.append(svg('line', { x1: L, x2: W - R, y1: yy, y2: yy, class: 'grid' }));
    const t = svg('text', { x: L - 6, y: yy + 4, class: 'axis', 'text-anchor': 'end' });
    t.textContent = fmt(Math.round(max * f * 10) / 10);
    s.append(t);
  }
  // Time labels at both ends (one when they would read the same).
  const label = (i) => new Date(xs[i]).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const ends = n > 1 && label(0) !== label(n - 1) ? [[0, 'start'], [n - 1, 'end']] : n > 0 ? [[n - 1, 'end']] : [];
  for (const [i, anchor] of ends) {
    const t = svg('text', { x: n <= 1 ? W - R : x(i), y: H - 4, class: 'axis', 'text-anchor': anchor });
    t.textContent = label(i);
    s.append(t);
  }
  lines.forEach((l, k) => {
    let d = '';
    l.values.forEach((v, i) => {
      if (v === null || v === undefined) return;
      d += `${d ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    });
    if (d) s.append(svg('path', { d, class: `line s${k}` }));
    // A point without neighbours draws no line: mark it.
    const has = (i) => l.values[i] !== null && l.values[i] !== undefined;
    l.values.forEach((v, i) => {
      if (has(i) && !has(i - 1) && !has(i + 1)) s.append(svg('circle', { cx: x(i), cy: y(v), r: 3, class: `dot s${k}` }));
    });
  });
  const legend = el('ul', { class: 'legend' },
    lines.map((l, k) => el('li', {}, el('span', { class: `swatch s${k}`, 'aria-hidden': 'true' }), l.name)));
  return el('figure', { class: 'card chart-card' }, el('figcaption', {}, title, unit ? ` (${unit.trim()})` : ''), s, legend);
}

// Depth: the server's samples (every 10 s, the last hour), then what this page saw since.
function depthChart(server, seen) {
  const last = server.length ? server[server.length - 1].at : 0;
  const points = server.map((d) => ({ t: d.at, scheduled: d.scheduled, due: d.due, leased: d.leased, dead: d.dead }))
    .concat(seen.filter((d) => d.t > last).map((d) => ({
      t: d.t, scheduled: d.v.scheduled, due: d.v.due, leased: d.v.leased, dead: d.v.dead,
    })));
  const pick = (k) => points.map((p) => p[k]);
  return lineChart('Depth', points.map((p) => p.t), [
    { name: 'scheduled', values: pick('scheduled') },
    { name: 'due', values: pick('due') },
    { name: 'leased', values: pick('leased') },
    { name: 'dead', values: pick('dead') }]);
}

function sparkline(values, label) {
  const W = 120; const H = 28;
  const max = Math.max(1, ...values);
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'spark', role: 'img', 'aria-label': label });
  let d = '';
  values.forEach((v, i) => {
    const xx = values.length <= 1 ? 0 : (i * W) / (values.length - 1);
    d += `${d ? 'L' : 'M'}${xx.toFixed(1)},${(H - 2 - (H - 4) * (v / max)).toFixed(1)}`;
  });
  if (d) s.append(svg('path', { d, class: 'line s1' }));
  return s;
}

// ---------- views ----------

let cleanup = [];
function leave() { cleanup.forEach((f) => f()); cleanup = []; }

function crumbs(...parts) {
  const nav = document.getElementById('crumbs');
  nav.replaceChildren(...parts.map((p, i) => (i < parts.length - 1 && p.href
    ? el('a', { href: p.href }, p.text)
    : el('span', { 'aria-current': i === parts.length - 1 ? 'page' : null }, p.text))));
}

function render(...nodes) {
  const main = document.getElementById('main');
  main.replaceChildren(...nodes.flat(2).filter((n) => n));
}

function showLogin() {
  leave();
  crumbs({ text: 'Sign in' });
  document.getElementById('logout').hidden = true;
  const input = el('input', { id: 'token', type: 'password', autocomplete: 'current-password', required: true });
  const go = async () => {
    who = null;
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    route();
  };
  render(el('section', { class: 'card login' },
    el('h1', {}, 'Sign in'),
    el('p', {}, 'This server requires a token. A read token can browse; actions need an admin token.'),
    el('label', { for: 'token' }, 'Token'),
    input,
    el('div', { class: 'row' }, el('button', { type: 'button', class: 'primary', id: 'signin', onclick: go }, 'Sign in'))));
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  input.focus();
}

function failed(e) {
  if (e.status === 401) return;
  render(el('section', { class: 'card error' }, el('h1', {}, 'Something went wrong'), el('p', {}, e.message)));
}

async function queuesView() {
  crumbs({ text: 'Queues' });
  const table = el('table', { class: 'grid-table' });
  const status = el('p', { class: 'muted' });
  render(el('h1', {}, 'Queues'), status, table);
  const load = async () => {
    const list = await api('GET', '/v1/queues');
    status.textContent = list.length ? '' : 'No queue holds jobs yet. Enqueue one: POST /v1/queues/NAME/jobs';
    const series = await Promise.all(list.map((v) => api('GET', `${q(v.queue)}/series`).catch(() => null)));
    table.replaceChildren(
      el('thead', {}, el('tr', {}, ['Queue', 'Scheduled', 'Due', 'Leased', 'Dead', 'Oldest overdue', 'Completed, last hour']
        .map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, list.map((v, i) => {
        const done = series[i] ? series[i].intervals.map((x) => x.completed) : [];
        const total = done.reduce((a, b) => a + b, 0);
        return el('tr', {},
          el('th', { scope: 'row' }, el('a', { href: `#/q/${encodeURIComponent(v.queue)}` }, v.queue),
            v.paused ? el('span', { class: 'badge warn' }, 'paused') : null),
          el('td', { class: 'num' }, fmt(v.scheduled)),
          el('td', { class: 'num' }, fmt(v.due)),
          el('td', { class: 'num' }, fmt(v.leased)),
          el('td', { class: `num${v.dead ? ' bad' : ''}` }, fmt(v.dead)),
          el('td', { class: `num${v.oldest_overdue_ms > 5000 ? ' bad' : ''}` }, duration(v.oldest_overdue_ms)),
          el('td', {}, sparkline(done, `${total} completed in the last hour`), ` ${fmt(total)}`));
      })));
  };
  await load();
  const t = setInterval(() => load().catch(() => {}), 5000);
  cleanup.push(() => clearInterval(t));
}

function statCards(v) {
  const card = (label, value, cls) => el('div', { class: `stat ${cls || ''}` }, el('div', { class: 'label' }, label), el('div', { class: 'value' }, value));
  return [
    card('Scheduled', fmt(v.scheduled)),
    card('Due now', fmt(v.due), v.due ? 'warn' : ''),
    card('Leased', fmt(v.leased)),
    card('Dead', fmt(v.dead), v.dead ? 'bad' : ''),
    v.done ? card('Done (kept)', fmt(v.done)) : null,
    v.waiting_on_limit ? card('Waiting on limit', fmt(v.waiting_on_limit), 'warn') : null,
    card('Oldest overdue', duration(v.oldest_overdue_ms), v.oldest_overdue_ms > 5000 ? 'bad' : ''),
  ].filter(Boolean);
}

// A queue's settings: a one-line summary that opens on the whole list and a form for the
// limits an operator changes on a running queue (start rate, jobs in flight). Shards and the
// lane and its windows change only while the queue is empty (the API's PUT, or `delayq queue set`).
function settingsPanel(name, s, onSaved) {
  const rate = s.rate ? `${fmt(s.rate.per_s)}/s, burst ${fmt(s.rate.burst)}` : 'no limit';
  const inFlight = s.max_in_flight ? fmt(s.max_in_flight) : 'no limit';
  const target = s.target ? `${s.target.method || 'POST'} ${s.target.url}` : 'none';
  const push = s.delivery === 'push';
  const summary = [
    `${fmt(s.shards)} shard${s.shards === 1 ? '' : 's'}`,
    s.lane ? (s.lane_window_ms ? `lane, ${duration(s.lane_window_ms)} windows` : 'one-delay lane') : null,
    `rate: ${rate}`,
    `in flight: ${inFlight}`,
    push ? 'push delivery' : 'pull (workers claim)',
    s.cold_after_ms ? `cold after ${duration(s.cold_after_ms)}` : null,
  ].filter(Boolean).join(' · ');
  const row = (k, v, id) => [el('dt', {}, k), el('dd', id ? { id } : {}, v)];
  const num = (id, value, attrs) => el('input', Object.assign({ id, type: 'number', value: value === null || value === undefined ? '' : String(value) }, attrs));
  const perS = num('set-rate', s.rate ? s.rate.per_s : null, { min: '0', step: 'any', placeholder: 'none' });
  const burst = num('set-burst', s.rate ? s.rate.burst : null, { min: '1', step: '1', placeholder: 'burst' });
  const mif = num('set-mif', s.max_in_flight, { min: '1', step: '1', placeholder: 'none' });
  const delivery = el('select', { id: 'set-delivery' },
    el('option', { value: 'pull' }, 'pull: workers claim'),
    el('option', { value: 'push' }, 'push: sent to targets'));
  delivery.value = push ? 'push' : 'pull';
  const save = needs('admin', el('button', { type: 'submit', id: 'set-save', class: 'primary' }, 'Save'));
  [perS, burst, mif, delivery].forEach((i) => needs('admin', i));
  // No browser validation: the API's own errors (typed, with the allowed range) are shown.
  const form = el('form', { class: 'row limits', id: 'limits', novalidate: true },
    el('label', { for: 'set-rate' }, 'Jobs started per second'), perS,
    el('label', { for: 'set-burst' }, 'burst'), burst,
    el('label', { for: 'set-mif' }, 'Most in flight'), mif,
    el('label', { for: 'set-delivery' }, 'Delivery'), delivery, save);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {
      rate: perS.value === '' ? null : { per_s: Number(perS.value), burst: burst.value === '' ? Math.max(1, Math.ceil(Number(perS.value))) : Number(burst.value) },
      max_in_flight: mif.value === '' ? null : Number(mif.value),
      delivery: delivery.value,
    };
    try {
      const v = await api('PUT', q(name), body);
      toast(`${name}: settings saved`);
      onSaved(v);
    } catch (err) { toast(err.message, true); }
  });
  return el('details', { class: 'card settings', id: 'settings' },
    el('summary', {}, el('span', { class: 'label' }, 'Settings'), ' ', el('span', { id: 'settings-summary' }, summary)),
    el('dl', { class: 'fields' },
      row('Shards', fmt(s.shards), 'set-shards'),
      row('One-delay lane', s.lane ? 'on: jobs due in arrival order are kept whole in a list' : 'off', 'set-lane'),
      row('Time windows', s.lane && s.lane_window_ms
        ? `${duration(s.lane_window_ms)} wide: other jobs due further ahead than two widths wait whole in their window`
        : 'off', 'set-windows'),
      row('Cold tier', s.cold_after_ms
        ? `jobs due more than ${duration(s.cold_after_ms)} ahead wait in PostgreSQL, moved into the store once due within it`
        : 'off (every job in the store)', 'set-cold'),
      row('Start rate', rate),
      row('Most in flight', inFlight),
      row('Completed jobs kept', s.keep_done_ms ? duration(s.keep_done_ms) : 'no (deleted when done)'),
      row('Ids refused after done', s.dedupe_ms ? `for ${duration(s.dedupe_ms)}` : 'no'),
      row('Delivery', push
        ? 'push: `delayq serve --push` sends each job to its target; jobs without one need a default target'
        : 'pull: workers claim the jobs; jobs with a target are refused', 'set-delivery-now'),
      row('Push target', el('span', { class: s.target ? 'mono' : '' }, target)),
      row('Each key', [
        s.key_max_in_flight ? `at most ${fmt(s.key_max_in_flight)} in flight` : null,
        s.key_rate ? `${fmt(s.key_rate.per_s)}/s, burst ${fmt(s.key_rate.burst)}` : null,
        s.pause_key_on_429 ? 'paused by a 429 with Retry-After' : null,
      ].filter(Boolean).join(' · ') || 'no limit (keys share the claims in turn)', 'set-keys')),
    form,
    el('p', { class: 'muted', id: 'limits-note' }, may('admin')
      ? 'Leave a field empty for no limit. Shards and the lane change only while the queue is empty.'
      : `Changing limits needs ${NEEDS.admin}; this one may only read them.`));
}

async function queueView(name, tab) {
  tab = STATES.includes(tab) ? tab : 'scheduled';
  crumbs({ text: 'Queues', href: '#/' }, { text: name });
  const stats = el('div', { class: 'stats', 'aria-live': 'polite' });
  const pauseBtn = needs('admin', el('button', { type: 'button', id: 'pause' }));
  const badge = el('span', { class: 'badge warn', hidden: true }, 'paused');
  const charts = el('div', { class: 'charts' });
  const settings = el('div', {});
  const showSettings = (v) => {
    if (!v.settings) return;
    const open = settings.firstChild && settings.firstChild.open;
    const p = settingsPanel(name, v.settings, showSettings);
    p.open = Boolean(open);
    settings.replaceChildren(p);
  };
  const depth = [];
  const show = (v) => {
    stats.replaceChildren(...statCards(v));
    badge.hidden = !v.paused;
    pauseBtn.textContent = v.paused ? 'Resume' : 'Pause';
    pauseBtn.className = v.paused ? 'primary' : '';
    pauseBtn.dataset.paused = v.paused ? '1' : '0';
    depth.push({ t: Date.now(), v });
    if (depth.length > 3600) depth.shift();
  };
  pauseBtn.addEventListener('click', async () => {
    const paused = pauseBtn.dataset.paused === '1';
    try {
      await api('POST', `${q(name)}/${paused ? 'resume' : 'pause'}`);
      toast(paused ? `${name} resumed` : `${name} paused: consumers lease nothing until resumed`);
      show(await api('GET', q(name)));
    } catch (e) { toast(e.message, true); }
  });
  const drawCharts = async () => {
    const s = await api('GET', `${q(name)}/series`);
    const xs = s.intervals.map((i) => i.start);
    const per = (k) => s.intervals.map((i) => i[k]);
    charts.replaceChildren(
      lineChart('Throughput per 10 s', xs, [
        { name: 'enqueued', values: per('enqueued') },
        { name: 'completed', values: per('completed') },
        { name: 'retried', values: per('retried') },
        { name: 'dead', values: per('dead') }]),
      depthChart(s.depth, depth),
      lineChart('Lateness, due → start', xs, [
        { name: 'p50', values: per('lateness_p50_ms') },
        { name: 'p99', values: per('lateness_p99_ms') }], ' ms'));
  };
  const tabs = el('div', { role: 'tablist', 'aria-label': 'Jobs by state', class: 'tabs' },
    STATES.map((s) => el('a', {
      role: 'tab', href: `#/q/${encodeURIComponent(name)}/${s}`, id: `tab-${s}`,
      'aria-selected': s === tab ? 'true' : 'false', class: s === tab ? 'active' : '',
    }, s)));
  const search = el('input', { id: 'find', type: 'search', placeholder: 'job id', autocomplete: 'off' });
  const findForm = el('div', { class: 'row find' },
    el('label', { for: 'find' }, 'Find a job by id'), search,
    el('button', { type: 'button', id: 'find-go', onclick: () => find(name, search.value.trim(), results) }, 'Find'));
  search.addEventListener('keydown', (e) => { if (e.key === 'Enter') find(name, search.value.trim(), results); });
  findForm.append(keyFinder(name));
  const results = el('div', { class: 'results' });
  const panel = el('section', { role: 'tabpanel', 'aria-labelledby': `tab-${tab}`, id: 'panel' });
  const keys = el('div', {});
  const batches = el('div', {});
  const drawKeys = async () => {
    keys.replaceChildren(await keysPanel(name, drawKeys));
    batches.replaceChildren(await batchesPanel(name));
  };
  render(
    el('div', { class: 'row spread' }, el('h1', {}, name, ' ', badge), pauseBtn),
    stats, settings, keys, batches, charts, findForm, results, tabs, panel);
  let reloadList = () => {};
  const first = await api('GET', q(name));
  show(first);
  showSettings(first);
  await drawCharts();
  await drawKeys();
  const t = setInterval(() => { drawCharts().catch(() => {}); drawKeys().catch(() => {}); }, 10000);
  cleanup.push(() => clearInterval(t));
  cleanup.push(subscribe(`${q(name)}/events`, (ev, data) => {
    if (ev === 'stats') show(JSON.parse(data));
    else if (ev === 'action') {
      const a = JSON.parse(data);
      toast(`${a.outcome}${a.id ? ` ${a.id}` : ''}${a.count !== undefined ? ` (${a.count})` : ''}`);
      if (a.outcome !== 'paused' && a.outcome !== 'resumed') reloadList();
    }
  }));
  await listPanel(name, tab, panel, (f) => { reloadList = f; });
}

// The batches of a queue not done yet, each with its progress (its jobs ended of all that
// joined, and how) and where its callbacks go — and, when they could not be enqueued, why
// and when they are tried next; shown only when it has any.
async function batchesPanel(name) {
  const v = await api('GET', `${q(name)}/batches?limit=10`);
  if (!v.batches.length) return el('span', {});
  const rows = v.batches.map((b) => {
    const ended = b.total - b.pending;
    const to = [b.on_complete ? `done → ${b.on_complete.queue}` : '', b.on_success ? `ok → ${b.on_success.queue}` : ''];
    return el('tr', {},
      el('td', { class: 'mono' }, b.id),
      el('td', {}, el('span', { class: { open: 'badge', callback_failed: 'badge bad' }[b.state] || 'badge warn' }, b.state.replace('_', ' ')),
        b.callback_error ? el('div', { class: 'err-box why' }, b.callback_error) : '',
        b.callback_error ? el('div', { class: 'count' },
          `tried ${fmt(b.callback_attempts)}×, next at ${new Date(b.callback_next_try_at_ms).toLocaleTimeString()}`) : ''),
      el('td', {}, el('progress', { max: String(b.total || 1), value: String(ended) }), ` ${fmt(ended)} of ${fmt(b.total)}`),
      el('td', { class: 'num' }, fmt(b.succeeded)), el('td', { class: 'num' }, fmt(b.dead)), el('td', { class: 'num' }, fmt(b.cancelled)),
      el('td', {}, to.filter(Boolean).join(' · ') || '–'));
  });
  const head = [['batch'], ['state'], ['ended'], ['acked', 'num'], ['dead', 'num'], ['cancelled', 'num'], ['callbacks']];
  return el('details', { class: 'card settings batches', id: 'batches', open: true },
    el('summary', {}, el('span', { class: 'label' }, 'Batches'), ' ',
      el('span', { class: 'count' }, `${v.batches.length} not done yet`)),
    el('table', { class: 'grid-table' },
      el('thead', {}, el('tr', {}, head.map(([h, c]) => el('th', c ? { class: c } : {}, h)))), el('tbody', {}, rows)));
}

async function find(name, id, out) {
  if (!id) return;
  try {
    const found = await api('GET', `${q(name)}/jobs?id_prefix=${encodeURIComponent(id)}&limit=20`);
    const note = found.by_prefix ? `Jobs whose id starts with “${id}”` : `Job “${id}” (this store looks up exact ids)`;
    out.replaceChildren(el('h2', {}, note),
      found.jobs.length ? jobTable(name, found.jobs, 'any') : el('p', { class: 'muted' }, 'No such job.'));
  } catch (e) { toast(e.message, true); }
}

// The first characters of a done job's result, for a table cell.
function resultSnippet(j) {
  if (j.result !== undefined) return JSON.stringify(j.result).slice(0, 120);
  if (j.result_b64 !== undefined) return `(bytes) ${j.result_b64.slice(0, 100)}`;
  return '';
}

// A job kept in PostgreSQL's cold tier (`tier: "cold"`) is marked where it is listed.
function coldBadge(j) {
  return j.tier === 'cold' ? el('span', { class: 'badge tier-cold', title: 'Kept in PostgreSQL until it is due within the queue’s cold window' }, 'cold') : [];
}

function jobTable(name, jobs, state) {
  // (`state` 'key': a key's jobs in every state, each timed by its own.)
  const timeCol = state === 'leased' ? 'Lease until' : state === 'dead' ? 'Failed' : state === 'done' ? 'Completed' : state === 'key' ? 'Due / lease until / failed' : 'Due';
  const lastCol = state === 'done' ? 'Result' : 'Last error';
  return el('table', { class: 'grid-table jobs' },
    el('thead', {}, el('tr', {}, ['Job', 'State', timeCol, 'Attempts', lastCol].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, jobs.map((j) => {
      const st = state === 'key' ? j.state : state;
      const t = st === 'leased' ? j.lease_deadline : st === 'dead' ? j.failed_at : st === 'done' ? j.completed_at : j.due_at;
      return el('tr', {},
        el('th', { scope: 'row' }, el('a', { class: 'mono', href: `#/q/${encodeURIComponent(name)}/job/${encodeURIComponent(j.id)}` }, j.id)),
        el('td', {}, el('span', { class: `badge st-${j.state}` }, j.state), coldBadge(j)),
        el('td', {}, t ? when(t) : '–'),
        el('td', { class: 'num' }, `${j.attempt}/${j.max_attempts}`),
        state === 'done'
          ? el('td', { class: 'mono result' }, resultSnippet(j))
          : el('td', { class: 'err' }, j.last_error ? j.last_error.slice(0, 120) : ''));
    })));
}

async function listPanel(name, state, panel, setReload) {
  const bulk = el('div', { class: 'row' });
  const body = el('div', {});
  const more = el('button', { type: 'button', id: 'more', hidden: true }, 'Load more');
  let cursor = null;
  let jobs = [];
  const load = async (reset) => {
    if (reset) { cursor = null; jobs = []; }
    const page = await api('GET', `${q(name)}/jobs?state=${state}&limit=${PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    jobs = jobs.concat(page.jobs);
    cursor = page.next_cursor;
    body.replaceChildren(jobs.length ? jobTable(name, jobs, state) : el('p', { class: 'muted' }, `No ${state} jobs.`));
    more.hidden = !cursor;
  };
  more.addEventListener('click', () => load(false).catch((e) => toast(e.message, true)));
  const act = (label, text, method, path, cls) => needs('admin', el('button', {
    type: 'button', class: cls || '', onclick: async () => {
      if (text && !(await confirmAction(text))) return;
      try {
        const r = await api(method, path);
        toast(`${r.outcome}${r.count !== undefined ? `: ${r.count} jobs` : ''}`);
        await load(true);
      } catch (e) { toast(e.message, true); }
    },
  }, label));
  if (state === 'dead') {
    bulk.append(
      act('Requeue all dead', `Requeue every dead job of ${name}? They become due now.`, 'POST', `${q(name)}/dead/requeue`),
      act('Purge all dead', `Delete every dead job of ${name}? This cannot be undone.`, 'DELETE', `${q(name)}/dead`, 'danger'));
  } else if (state === 'scheduled' || state === 'due') {
    bulk.append(act(`Cancel all ${state}`, `Cancel every ${state} job of ${name}? This cannot be undone.`, 'DELETE', `${q(name)}/jobs?state=${state}`, 'danger'));
  }
  panel.replaceChildren(bulk, body, more);
  setReload(() => load(true).catch(() => {}));
  await load(true);
}

function payloadView(j) {
  if (j.payload !== undefined) {
    return [el('h2', {}, 'Payload (JSON)'), el('pre', { class: 'payload', id: 'payload' }, JSON.stringify(j.payload, null, 2))];
  }
  return [el('h2', {}, 'Payload (bytes, base64)'), el('pre', { class: 'payload', id: 'payload' }, j.payload_b64 || '')];
}

// A done job's result, as its handler acked it (JSON, or bytes in base64).
function resultView(j) {
  if (j.result !== undefined) {
    return [el('h2', {}, 'Result (JSON)'), el('pre', { class: 'payload', id: 'result' }, JSON.stringify(j.result, null, 2))];
  }
  if (j.result_b64 !== undefined) {
    return [el('h2', {}, 'Result (bytes, base64)'), el('pre', { class: 'payload', id: 'result' }, j.result_b64)];
  }
  return [];
}

async function jobView(name, id) {
  crumbs({ text: 'Queues', href: '#/' }, { text: name, href: `#/q/${encodeURIComponent(name)}` }, { text: id });
  let j;
  try { j = await api('GET', jobPath(name, id)); } catch (e) {
    if (e.status === 404) {
      render(el('h1', { class: 'mono' }, id), el('p', {}, 'No such job: it was completed, cancelled or deleted, or never existed.'),
        el('a', { href: `#/q/${encodeURIComponent(name)}` }, `Back to ${name}`));
      return;
    }
    throw e;
  }
  const row = (k, ...v) => [el('dt', {}, k), el('dd', {}, ...v)];
  const dl = el('dl', { class: 'fields' },
    row('State', el('span', { class: `badge st-${j.state}`, id: 'job-state' }, j.state)),
    row('Attempts', `${j.attempt} of ${j.max_attempts}`),
    row('Due', when(j.due_at), ` — ${local(j.due_at)}`),
    j.tier === 'cold' ? row('Kept', el('span', { id: 'job-tier' }, 'in PostgreSQL (cold tier)'),
      el('span', { class: 'muted' }, ' — moved into the store once due within the queue’s cold window; never run before its due time')) : [],
    row('Created', when(j.created_at), ` — ${local(j.created_at)}`),
    j.lease_deadline ? row('Lease deadline', when(j.lease_deadline), ` — ${local(j.lease_deadline)}`) : [],
    j.failed_at ? row('Failed', when(j.failed_at), ` — ${local(j.failed_at)}`) : [],
    j.completed_at ? row('Completed', when(j.completed_at), ` — ${local(j.completed_at)}`) : [],
    j.priority !== undefined && j.priority !== 5 ? row('Priority', String(j.priority)) : [],
    j.timeout_ms ? row('Timeout', duration(j.timeout_ms)) : [],
    j.expires_at ? row('Expires', when(j.expires_at), ` — ${local(j.expires_at)}`) : [],
    j.target ? row('Push target', el('span', { class: 'mono', id: 'job-target' }, `${j.target.method || 'POST'} ${j.target.url}`)) : [],
    j.traceparent ? row('Trace', traceId(j.traceparent)) : []);
  const back = () => { location.hash = `#/q/${encodeURIComponent(name)}/${j.state === 'dead' ? 'dead' : 'scheduled'}`; };
  const act = (scope, label, confirmText, method, path, body, cls, after) => needs(scope, el('button', {
    type: 'button', class: cls || '', onclick: async () => {
      if (confirmText && !(await confirmAction(confirmText))) return;
      try {
        const r = await api(method, path, body);
        toast(`${id}: ${r.outcome}`);
        if (after) after(); else route();
      } catch (e) {
        toast(e.state ? `${e.message} (it is ${e.state} now)` : e.message, true);
        route();
      }
    },
  }, label));
  const actions = el('div', { class: 'row actions' });
  if (j.state === 'waiting') {
    actions.append(
      el('p', { class: 'muted' }, 'Waiting for its dependencies to end.'),
      act('produce', 'Cancel', `Cancel job ${id}? It will not run.`, 'DELETE', jobPath(name, id), undefined, 'danger', back));
  } else if (j.state === 'scheduled') {
    const delay = needs('produce', el('input', { id: 'delay', type: 'number', min: '0', step: '1', value: '60' }));
    actions.append(
      act('admin', 'Run now', null, 'POST', `${jobPath(name, id)}/run`, undefined, 'primary'),
      el('label', { for: 'delay' }, 'Reschedule in (s)'), delay,
      needs('produce', el('button', {
        type: 'button', onclick: async () => {
          try {
            const r = await api('PATCH', jobPath(name, id), { delay_ms: Math.max(0, Number(delay.value) || 0) * 1000 });
            toast(`${id}: ${r.outcome}`);
            route();
          } catch (e) { toast(e.message, true); }
        },
      }, 'Reschedule')),
      act('produce', 'Cancel', `Cancel job ${id}? It will not run.`, 'DELETE', jobPath(name, id), undefined, 'danger', back));
  } else if (j.state === 'dead') {
    actions.append(
      act('admin', 'Requeue', null, 'POST', `${q(name)}/dead/${encodeURIComponent(id)}/requeue`, undefined, 'primary'),
      act('admin', 'Delete', `Delete dead job ${id}? This cannot be undone.`, 'DELETE', `${q(name)}/dead/${encodeURIComponent(id)}`, undefined, 'danger', back));
  } else if (j.state === 'done') {
    actions.append(el('p', { class: 'muted' }, 'Completed; kept while the queue keeps done jobs.'));
  } else {
    actions.append(
      el('p', { class: 'muted' }, 'A worker is running this job.'),
      act('produce', 'Cancel', `Cancel job ${id} while it runs? Its worker is told to stop the handler within a second; the job will not run again.`,
        'DELETE', `${jobPath(name, id)}?running=true`, undefined, 'danger', back));
  }
  render(
    el('h1', { class: 'mono', id: 'job-id' }, id),
    actions,
    el('div', { class: 'card' }, dl),
    depsView(j),
    j.last_error ? [el('h2', {}, 'Last error'), el('pre', { class: 'err-box', id: 'last-error' }, j.last_error)] : [],
    await deliveriesView(name, id, j),
    resultView(j),
    payloadView(j));
}

// The HTTP requests this server's pusher sent for a job (a pushed job, or any job of a
// queue with a default target: the server lists what it has).
async function deliveriesView(name, id, j) {
  let d;
  try { d = await api('GET', `${jobPath(name, id)}/deliveries`); } catch (e) { return []; }
  if (!d.deliveries.length) {
    if (!j.target) return [];
    return [el('h2', {}, 'Deliveries'), el('p', { class: 'muted', id: 'no-deliveries' }, d.pusher
      ? 'No request sent by this server yet.'
      : 'This server does not push (start it with --push); another process may.')];
  }
  const table = el('table', { class: 'grid-table', id: 'deliveries' },
    el('thead', {}, el('tr', {}, ['Attempt', 'Sent', 'Status', 'Outcome', 'Took', 'Error']
      .map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, d.deliveries.map((x) => el('tr', {},
      el('td', { class: 'num' }, String(x.attempt)),
      el('td', { title: local(x.at) }, when(x.at)),
      el('td', { class: x.status && x.status < 300 ? 'num' : 'num bad' }, x.status ? String(x.status) : '—'),
      el('td', {}, x.outcome),
      el('td', { class: 'num' }, x.duration_ms < 1000 ? `${x.duration_ms} ms` : duration(x.duration_ms)),
      el('td', { class: 'err', title: x.error || '' }, x.error || '')))));
  return [el('h2', {}, `Deliveries (${d.deliveries.length})`), table];
}

async function route() {
  leave();
  document.getElementById('logout').hidden = !token();
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  try {
    await whoami();
    const badge = document.getElementById('scope');
    badge.hidden = may('admin');
    badge.textContent = who.scope === 'read' ? 'read-only token' : `${who.scope} token`;
    badge.title = `This token may ${who.allows.join(', ')}; the other actions are greyed out.`;
    if (parts[0] === 'q' && parts[1]) {
      if (parts[2] === 'job' && parts[3] !== undefined) await jobView(parts[1], parts.slice(3).join('/'));
      else if (parts[2] === 'key' && parts[3] !== undefined) await keyView(parts[1], parts.slice(3).join('/'));
      else await queueView(parts[1], parts[2]);
    } else {
      await queuesView();
    }
    document.getElementById('main').focus({ preventScroll: true });
  } catch (e) { failed(e); }
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    who = null;
    showLogin();
  });
  window.addEventListener('hashchange', route);
  route();
});

// A job's trace id (from its W3C traceparent), with a button that copies it: paste it into the
// tracing backend's search.
function traceId(traceparent) {
  const id = traceparent.split('-')[1] || traceparent;
  const copy = el('button', {
    type: 'button', class: 'small', title: 'Copy the trace id',
    onclick: async () => {
      try { await navigator.clipboard.writeText(id); toast('Trace id copied'); } catch (e) { toast(`Copy failed: ${id}`); }
    },
  }, 'Copy');
  return el('span', {}, el('span', { class: 'mono', id: 'job-trace' }, id), ' ', copy);
}
