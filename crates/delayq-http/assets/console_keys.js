// The console's key pages: the busiest keys of a queue, and every job of one key — listed
// by id, cancelled in one call ("Cancel all"). Loaded after console.js, whose helpers (el,
// api, needs, toast, confirmAction, jobTable, crumbs, render) it uses.

const keyHref = (name, key) => `#/q/${encodeURIComponent(name)}/key/${encodeURIComponent(key)}`;
const keyPath = (name, key) => `${q(name)}/keys/${encodeURIComponent(key)}`;

// A button that cancels every scheduled and due job of `key` (with `running`, its running
// jobs too) after a confirmation, then calls `after`.
function cancelKeyButton(name, key, running, after) {
  const label = running ? 'Cancel all, running too' : 'Cancel all';
  const text = running
    ? `Cancel every job of key ${key} in ${name}, also the running ones (their workers are told to stop)? This cannot be undone.`
    : `Cancel every scheduled and due job of key ${key} in ${name}? Running and dead jobs stay. This cannot be undone.`;
  return needs('produce', el('button', {
    type: 'button', class: 'small danger', 'data-key': key, onclick: async () => {
      if (!(await confirmAction(text))) return;
      try {
        const r = await api('POST', `${keyPath(name, key)}/cancel`, { running });
        toast(`${key}: ${r.cancelled} cancelled${r.running ? ` (${r.running} running)` : ''}`);
        await after();
      } catch (e) { toast(e.message, true); }
    },
  }, label));
}

// "Show a key's jobs": a field that opens the key's page (any key, also one with only jobs due
// later, which the busiest keys do not list).
function keyFinder(name) {
  const input = el('input', { id: 'find-key', type: 'search', placeholder: 'key', autocomplete: 'off' });
  const go = () => { if (input.value.trim()) location.hash = keyHref(name, input.value.trim()); };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  return el('span', { class: 'row' }, el('label', { for: 'find-key' }, 'Jobs of a key'), input,
    el('button', { type: 'button', id: 'find-key-go', onclick: go }, 'Show'));
}

// The busiest keys of a queue (jobs in flight and due per key, held keys), shown only when
// it has any; an admin holds a key for a minute or lifts its hold; each key's jobs are a link
// away, and "Cancel all" cancels every scheduled and due one.
async function keysPanel(name, redraw) {
  const v = await api('GET', `${q(name)}/keys?limit=10`);
  if (!v.keys.length) return el('span', {});
  const act = (k, path, body, said) => needs('admin', el('button', {
    type: 'button', class: 'small', onclick: async () => {
      try { await api('POST', `${q(name)}/keys/${encodeURIComponent(k)}/${path}`, body); toast(`${k}: ${said}`); redraw(); } catch (e) { toast(e.message, true); }
    },
  }, path === 'pause' ? 'Hold 1 min' : 'Resume'));
  const rows = v.keys.map((k) => el('tr', {},
    el('td', { class: 'mono' }, k.key), el('td', { class: 'num' }, fmt(k.in_flight)), el('td', { class: 'num' }, fmt(k.due)),
    el('td', {}, k.paused_until ? el('span', { class: 'badge warn', title: local(k.paused_until) }, `held, ends ${relative(k.paused_until)}`) : '–'),
    el('td', { class: 'actions' },
      k.paused_until ? act(k.key, 'resume', undefined, 'resumed') : act(k.key, 'pause', { for_ms: 60000 }, 'held for a minute'), ' ',
      el('a', { class: 'small', href: keyHref(name, k.key) }, 'Jobs'), ' ',
      cancelKeyButton(name, k.key, false, redraw))));
  const head = [['key'], ['in flight', 'num'], ['due', 'num'], ['hold'], ['']];
  return el('details', { class: 'card settings keys', id: 'keys', open: true },
    el('summary', {}, el('span', { class: 'label' }, 'Busiest keys'), ' ',
      el('span', { class: 'count' }, `${v.keys.length} key${v.keys.length === 1 ? '' : 's'} with jobs in flight, due or held`)),
    el('table', { class: 'grid-table' },
      el('thead', {}, el('tr', {}, head.map(([h, c]) => el('th', c ? { class: c } : {}, h)))), el('tbody', {}, rows)));
}

// One key's page: its jobs by id (every state but done) with their states, a page at a time,
// and "Cancel all" (scheduled and due) / "Cancel all, running too".
async function keyView(name, key) {
  crumbs({ text: 'Queues', href: '#/' }, { text: name, href: `#/q/${encodeURIComponent(name)}` }, { text: `key ${key}` });
  const body = el('div', { id: 'key-jobs' });
  const more = el('button', { type: 'button', id: 'more', hidden: true }, 'Load more');
  const count = el('span', { class: 'count' });
  let cursor = null;
  let jobs = [];
  const load = async (reset) => {
    if (reset) { cursor = null; jobs = []; }
    const page = await api('GET', `${keyPath(name, key)}/jobs?limit=${PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    jobs = jobs.concat(page.jobs);
    cursor = page.next_cursor;
    count.textContent = `${jobs.length}${cursor ? '+' : ''} job${jobs.length === 1 ? '' : 's'} scheduled, due, running or dead`;
    body.replaceChildren(jobs.length ? jobTable(name, jobs, 'key') : el('p', { class: 'muted' }, `No jobs of key ${key}.`));
    more.hidden = !cursor;
  };
  more.addEventListener('click', () => load(false).catch((e) => toast(e.message, true)));
  const reload = () => load(true);
  render(
    el('div', { class: 'row spread' }, el('h1', {}, el('span', { class: 'muted' }, 'key '), el('span', { class: 'mono' }, key)),
      el('div', { class: 'row' }, cancelKeyButton(name, key, false, reload), cancelKeyButton(name, key, true, reload))),
    el('p', {}, count),
    body, more);
  await load(true);
}
