// The console's view of jobs that wait for other jobs: on a job's page, its dependencies
// with how each stands and the jobs waiting for it, each linked to its own page. Loaded after console.js, whose helpers
// (el) it uses.

// A job's dependencies (GET's `dependencies`) and the jobs waiting for it (`dependents`), or
// nothing for a job with neither.
function depsView(j) {
  return [dependenciesView(j), dependentsView(j)];
}

function jobLink(d) {
  return el('a', { class: 'mono', href: `#/q/${encodeURIComponent(d.queue)}/job/${encodeURIComponent(d.id)}` }, d.id);
}

function dependentsView(j) {
  if (!j.dependents || !j.dependents.length) return [];
  return [
    el('h2', {}, 'Waiting for this job ', el('span', { class: 'count', id: 'dependents-count' }, `${j.dependents.length}`)),
    el('table', { class: 'grid-table', id: 'dependents' },
      el('thead', {}, el('tr', {}, ['Job', 'Queue'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, j.dependents.map((d) => el('tr', {}, el('th', { scope: 'row' }, jobLink(d)), el('td', { class: 'mono' }, d.queue))))),
  ];
}

function dependenciesView(j) {
  if (!j.dependencies || !j.dependencies.length) return [];
  const pending = j.dependencies.filter((d) => d.state === 'pending').length;
  const rows = j.dependencies.map((d) => el('tr', {},
    el('th', { scope: 'row' }, jobLink(d)),
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
