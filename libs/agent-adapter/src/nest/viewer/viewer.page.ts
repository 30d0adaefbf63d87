/**
 * The run viewer's one page: plain HTML, CSS and JavaScript, no build step, nothing fetched from
 * the internet. It talks to the JSON API beside it (`<path>/api/...`).
 * @internal
 */
export function viewerPage(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Durable runs</title>
<style>
  :root { font: 14px/1.45 system-ui, sans-serif; color: #1d2330; background: #f6f7f9; }
  body { margin: 0 auto; max-width: 1200px; padding: 16px 24px; }
  h1 { font-size: 20px; margin: 0 0 12px; } h1 a { color: inherit; text-decoration: none; }
  h2 { font-size: 16px; margin: 20px 0 8px; }
  table { border-collapse: collapse; width: 100%; background: #fff; }
  th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e3e6eb; vertical-align: top; }
  th { background: #eef1f5; font-weight: 600; }
  tr.doubt td { background: #fff1f0; }
  code, .mono { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
  .badge { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px; margin-right: 4px; color: #fff; }
  .b-done { background: #2f855a; } .b-running { background: #2b6cb0; } .b-paused { background: #b7791f; }
  .b-failed { background: #c53030; } .b-recovered { background: #6b46c1; } .b-doubt { background: #c05621; }
  .filters { display: flex; gap: 8px; margin-bottom: 12px; align-items: center; }
  .actions { display: flex; gap: 8px; align-items: center; margin: 12px 0; padding: 10px; background: #fff; border: 1px solid #e3e6eb; }
  button { padding: 5px 12px; border: 1px solid #9aa5b1; background: #fff; border-radius: 4px; cursor: pointer; }
  button.primary { background: #2b6cb0; color: #fff; border-color: #2b6cb0; }
  button.danger { background: #c53030; color: #fff; border-color: #c53030; }
  .error { color: #c53030; } .muted { color: #6b7785; }
  .reason { color: #c05621; font-weight: 600; }
</style>
</head>
<body>
<h1><a href="#/">Durable runs</a></h1>
<div id="app" class="muted">Loading…</div>
<script>
(() => {
  // The API sits beside the page, wherever the application mounted it (global prefix included).
  const BASE = location.pathname.replace(/[/]+$/, '');
  const app = document.getElementById('app');
  const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  const when = (ms) => (ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '');
  const short = (v, n = 120) => { const t = typeof v === 'string' ? v : JSON.stringify(v); return t && t.length > n ? t.slice(0, n) + '…' : (t ?? ''); };
  const badge = (cls, text) => '<span class="badge b-' + cls + '" data-badge="' + esc(text) + '">' + esc(text) + '</span>';
  async function api(path, init) {
    const res = await fetch(BASE + '/api' + path, { headers: { 'content-type': 'application/json' }, ...init });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(body.message || res.statusText);
    return body;
  }
  function badges(run) {
    return badge(run.status, run.status) + (run.recovered ? badge('recovered', 'recovered') : '') + (run.inDoubt ? badge('doubt', 'in doubt') : '');
  }

  async function list(params) {
    const [meta, page] = await Promise.all([api('/meta'), api('/runs?' + params.toString())]);
    const opt = (v, label, cur) => '<option value="' + esc(v) + '"' + (v === (cur ?? '') ? ' selected' : '') + '>' + esc(label) + '</option>';
    const names = [...meta.flows, ...meta.loops];
    app.innerHTML =
      '<div class="filters">Flow <select id="flow">' + opt('', 'all') + names.map((n) => opt(n, n, params.get('flow'))).join('') + '</select>' +
      'Status <select id="status">' + opt('', 'all') + ['running', 'paused', 'done', 'failed'].map((s) => opt(s, s, params.get('status'))).join('') + '</select></div>' +
      '<table id="runs"><thead><tr><th>Run</th><th>Flow</th><th>Status</th><th>Step</th><th>Updated</th><th>Owner</th></tr></thead><tbody>' +
      (page.runs.length ? page.runs.map((r) =>
        '<tr data-run="' + esc(r.runId) + '"><td><a class="mono" href="#/runs/' + encodeURIComponent(r.runId) + '">' + esc(r.runId) + '</a></td><td>' + esc(r.flow) + '</td><td>' + badges(r) +
        '</td><td>' + esc(r.step) + '</td><td>' + esc(when(r.updatedAt)) + '</td><td class="mono">' + esc(r.owner) + '</td></tr>').join('')
        : '<tr><td colspan="6" class="muted">No runs.</td></tr>') +
      '</tbody></table>' +
      (page.next ? '<p><a id="older" href="#/?' + new URLSearchParams({ ...Object.fromEntries(params), before: page.next }) + '">Older runs →</a></p>' : '');
    for (const id of ['flow', 'status']) {
      document.getElementById(id).onchange = () => {
        const p = new URLSearchParams();
        for (const k of ['flow', 'status']) { const v = document.getElementById(k).value; if (v) p.set(k, v); }
        location.hash = '#/?' + p;
      };
    }
  }

  async function show(runId) {
    const run = await api('/runs/' + encodeURIComponent(runId));
    const doubt = run.doubtful.length
      ? '<h2>In doubt</h2><ul>' + run.doubtful.map((c) => '<li><b>' + esc(c.tool) + '</b> (' + esc(c.node) + '#' + esc(c.index) + '): <span class="reason">' + esc(c.why) + '</span>, ' + esc(c.action) + '</li>').join('') + '</ul>'
      : '';
    const actions = [];
    if (run.status === 'paused' && run.pending)
      actions.push('<span>Waiting: <b>' + esc(run.pending.tool) + '</b> <code>' + esc(short(run.pending.args)) + '</code></span>' +
        '<input id="by" placeholder="your name" value="operator"><button id="approve" class="primary">Approve</button><button id="deny" class="danger">Deny</button>');
    if (run.doubtful.length && run.status === 'running')
      actions.push('<button id="rerun" class="danger">Rerun in doubt…</button><span class="muted">only after checking each call at its system</span>');
    app.innerHTML =
      '<p><a href="#/">← all runs</a></p>' +
      '<h2 class="mono">' + esc(run.runId) + '</h2>' +
      '<p>' + badges(run) + ' flow <b>' + esc(run.flow) + '</b>, step ' + esc(run.step) + ', segment <span class="mono">' + esc(run.segment) + '</span>, owner <span class="mono">' + esc(run.owner) + '</span>, updated ' + esc(when(run.updatedAt)) + '</p>' +
      (run.error ? '<p class="error">' + esc(run.error.name) + ': ' + esc(run.error.message) + '</p>' : '') +
      (actions.length ? '<div class="actions">' + actions.join('') + '<span id="result"></span></div>' : '') +
      doubt +
      '<h2>Checkpoints</h2><table id="timeline"><thead><tr><th>Step</th><th>Status</th><th>Segment</th><th>Superstep</th><th>Reason</th><th>What changed</th></tr></thead><tbody>' +
      run.checkpoints.map((c) => '<tr><td>' + esc(c.step) + '</td><td>' + badge(c.status, c.status) + '</td><td class="mono">' + esc(c.segment) + (c.claim ? ' ' + badge('recovered', 'claim') : '') + '</td><td>' + esc(c.superstep) +
        '</td><td>' + esc(c.reason) + (c.corrupt ? '<span class="error">' + esc(c.corrupt) + '</span>' : '') + '</td><td class="mono">' +
        Object.entries(c.changed || {}).map(([k, v]) => esc(k) + ' = ' + esc(short(v))).join('<br>') + '</td></tr>').join('') +
      '</tbody></table>' +
      '<h2>Tool calls</h2><table id="calls"><thead><tr><th>Superstep</th><th>Node</th><th>Tool</th><th>Records</th><th>Duration</th><th>Outcome</th></tr></thead><tbody>' +
      run.calls.map((c) => '<tr class="' + (c.inDoubt ? 'doubt' : '') + '" data-tool="' + esc(c.tool) + '"><td>' + esc(c.superstep) + '</td><td>' + esc(c.node) + '#' + esc(c.index) + '</td><td><b>' + esc(c.tool) + '</b>' +
        (c.rerun ? ' ' + badge('doubt', 'rerun') : '') + (c.replayed ? ' ' + badge('recovered', 'replayed') : '') + '</td><td class="mono">' +
        c.records.map((r) => esc(r.phase) + ' ' + esc(r.segment) + '/' + esc(r.seq)).join('<br>') + '</td><td>' + (c.durationMs === undefined ? '' : esc(c.durationMs) + ' ms') +
        '</td><td class="mono">' + (c.inDoubt ? '<span class="reason">' + esc(c.inDoubt) + '</span>' : esc(short(c.outcome))) + '</td></tr>').join('') +
      '</tbody></table>';
    const act = async (path, body) => {
      const out = document.getElementById('result');
      out.textContent = 'working…';
      try {
        const r = await api('/runs/' + encodeURIComponent(runId) + path, { method: 'POST', body: JSON.stringify(body) });
        out.textContent = 'now ' + r.status;
        await show(runId);
      } catch (e) { out.innerHTML = '<span class="error">' + esc(e.message) + '</span>'; }
    };
    const on = (id, fn) => { const el = document.getElementById(id); if (el) el.onclick = fn; };
    on('approve', () => act('/approve', { by: document.getElementById('by').value }));
    on('deny', () => act('/deny', { by: document.getElementById('by').value }));
    on('rerun', () => { if (confirm('Run every call in doubt again? Only after checking each one at its system.')) act('/rerun-in-doubt', {}); });
  }

  async function route() {
    const hash = location.hash.slice(1) || '/';
    try {
      if (hash.startsWith('/runs/')) await show(decodeURIComponent(hash.slice(6)));
      else await list(new URLSearchParams(hash.split('?')[1] || ''));
    } catch (e) { app.innerHTML = '<p class="error">' + esc(e.message) + '</p>'; }
  }
  window.addEventListener('hashchange', route);
  route();
})();
</script>
</body>
</html>`;
}
