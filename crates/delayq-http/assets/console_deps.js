// The console's view of jobs that wait for other jobs: on a job's page, its dependencies
// with how each stands, each linked to its own page. Loaded after console.js, whose helpers
// (el) it uses.

// A job's dependencies (GET's `dependencies`), or nothing for a job without any.
function depsView(j) {
  if (!j.dependencies || !j.dependencies.length) return [];
  const pending = j.dependencies.filter((d) => d.state === 'pending').length;
  const rows = j.dependencies.map((d) => el('tr', {},
    el('th', { scope: 'row' }, el('a', { class: 'mono', href: `#/q/${encodeURIComponent(d.queue)}/job/${encodeURIComponent(d.id)}` }, d.id)),
    el('td', { class: 'mono' }, d.queue),
    el('td', {}, el('span', { class: `badge st-dep-${d.state}` }, d.state))));
  return [
    el('h2', {}, 'Dependencies ', el('span', { class: 'count', id: 'deps-count' },
      pending ? `${pending} of ${j.dependencies.length} pending` : `all ${j.dependencies.length} ended`)),
    el('table', { class: 'grid-table', id: 'deps' },
      el('thead', {}, el('tr', {}, ['Job', 'Queue', 'State'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, rows)),
  ];
}
