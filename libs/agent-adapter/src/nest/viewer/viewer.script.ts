import { SCHEDULES_SCRIPT } from './viewer.schedules.script';

/**
 * The run viewer page's script (inline, allowed by its hash in the page's Content-Security-Policy).
 *
 * The page is built with DOM calls only, never from HTML text: every value is a text node or an
 * attribute set with `setAttribute` (from a fixed list of names; links only to this page's own
 * `#/` routes, their parts through `encodeURIComponent`), and CSS classes come from fixed tables
 * (a run's status picks one of them, or a neutral one). Nothing a run holds is parsed as markup,
 * and the policy's Trusted Types (`require-trusted-types-for 'script'`) make Chromium refuse any
 * `innerHTML` string outright. Every POST sends JSON and the page's CSRF token.
 *
 * Written without backticks or `${`, inside `String.raw`: the text below is the script verbatim,
 * with the schedules view (`SCHEDULES_SCRIPT`) spliced in before the router.
 * @internal
 */
export const VIEWER_SCRIPT =
  String.raw`
(() => {
  'use strict';
  // The API sits beside the page, wherever the application mounted it (global prefix included).
  const BASE = location.pathname.replace(/[/]+$/, '');
  const TOKEN = document.querySelector('meta[name="agent-adapter-csrf"]').getAttribute('content');
  const app = document.getElementById('app');
  const STATUSES = ['running', 'paused', 'sleeping', 'done', 'failed'];
  const EVERY = 5000;

  const ATTRIBUTES = new Set(['id', 'class', 'href', 'colspan', 'placeholder', 'value', 'selected', 'data-run', 'data-tool', 'data-badge', 'data-call', 'data-schedule']);
  /** An element: attributes through setAttribute (allowed names only), children as nodes or text. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (!ATTRIBUTES.has(name)) throw new Error('viewer: attribute "' + name + '" is not allowed');
      if (name === 'href' && !/^#[/]/.test(value)) throw new Error('viewer: links stay in the page');
      el.setAttribute(name, value === true ? '' : String(value));
    }
    return put(el, children);
  }
  /** Appends children: nodes as they are, anything else as text; skips undefined, null, false, ''. */
  function put(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false || child === '') continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }
  const mount = (el, ...children) => { el.replaceChildren(); return put(el, children); };
  const runLink = (runId) => '#/runs/' + encodeURIComponent(runId);
  const lines = (items) => items.flatMap((item, i) => (i ? [h('br'), item] : [item]));
  const headRow = (...names) => h('thead', {}, h('tr', {}, names.map((n) => h('th', {}, n))));

  const pad = (n) => String(n).padStart(2, '0');
  /** This browser's local time with its zone, e.g. 2026-12-01 17:14:37 UTC+1 (UTC when the offset is 0). */
  const when = (ms) => {
    if (!ms) return '';
    const d = new Date(ms);
    const off = -d.getTimezoneOffset();
    const zone = 'UTC' + (off === 0 ? '' : (off > 0 ? '+' : '-') + Math.floor(Math.abs(off) / 60) + (Math.abs(off) % 60 ? ':' + pad(Math.abs(off) % 60) : ''));
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' ' + zone;
  };
  const short = (v, n = 120) => { const t = typeof v === 'string' ? v : JSON.stringify(v); return t && t.length > n ? t.slice(0, n) + '…' : (t ?? ''); };
  const BADGES = { done: 'b-done', running: 'b-running', paused: 'b-paused', sleeping: 'b-sleeping', failed: 'b-failed', active: 'b-running', recovered: 'b-recovered', doubt: 'b-doubt' };
  // What the clock does at an approval deadline, by the tool's onTimeout (a fixed table, like BADGES).
  const CLOCK = { deny: 'the clock denies the call', approve: 'the clock approves the call', fail: 'the clock fails the run' };
  const clockDoes = (action) => (typeof action === 'string' && Object.prototype.hasOwnProperty.call(CLOCK, action) ? CLOCK[action] : 'the clock decides');
  const badgeClass = (kind) => (typeof kind === 'string' && Object.prototype.hasOwnProperty.call(BADGES, kind) ? BADGES[kind] : 'b-other');
  const badge = (kind, text) => h('span', { class: 'badge ' + badgeClass(kind), 'data-badge': text }, text);
  // A head that does not verify: its status column is not shown as the run's status.
  const badges = (run) => [run.corrupt ? badge('failed', 'corrupt') : badge(run.status, run.status), run.recovered && badge('recovered', 'recovered'), run.inDoubt && badge('doubt', 'in doubt')];
  const messageOf = (e) => (e instanceof Error ? e.message : String(e));

  async function api(path, init) {
    const res = await fetch(BASE + '/api' + path, { credentials: 'same-origin', ...init });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw Object.assign(new Error([].concat(body.message || res.status + ' ' + res.statusText).join('; ')), { status: res.status });
    return body;
  }
  /** An action: JSON, with the token this page was served with (the viewer refuses anything else). */
  const post = (path, body) => api(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-agent-adapter-csrf': TOKEN },
    body: JSON.stringify(body),
  });

  // What the operator typed survives every refresh: the name decisions are recorded with, the search.
  let operator = 'operator';
  let searched = '';
  /** The refresh bar: a button, and when the page was last fetched. */
  const bar = (...extra) => h('div', { class: 'filters' }, extra,
    h('button', { id: 'refresh' }, 'Refresh'),
    h('span', { class: 'muted', id: 'refreshed' }, 'updated ' + when(Date.now()) + ', every ' + EVERY / 1000 + ' s'));

  /** The last "runs without a head" answer (nodes), shown under the list until the page reloads. */
  let audit;
  const showAudit = () => { const out = document.getElementById('headless'); if (out && audit) mount(out, audit); };

  async function list(params, current) {
    const [meta, page] = await Promise.all([api('/meta'), api('/runs?' + params.toString())]);
    if (!current()) return;
    const option = (value, label, current) => h('option', { value, selected: value === (current ?? '') }, label);
    const select = (id, values, current) => h('select', { id }, option('', 'all', current), values.map((v) => option(v, v, current)));
    const row = (r) => h('tr', { 'data-run': r.runId },
      h('td', {}, h('a', { class: 'mono', href: runLink(r.runId) }, r.runId)),
      h('td', {}, r.flow), h('td', {}, badges(r)), h('td', {}, r.step), h('td', {}, when(r.updatedAt)),
      h('td', { class: 'mono' }, r.owner));
    mount(app,
      bar(h('input', { id: 'search', placeholder: 'run id', value: searched }), h('button', { id: 'open' }, 'Open run')),
      h('div', { class: 'filters' },
        'Flow ', select('flow', [...meta.flows, ...meta.loops], params.get('flow')),
        'Status ', select('status', STATUSES, params.get('status')),
        h('button', { id: 'audit' }, 'Find runs without a head')),
      h('table', { id: 'runs' }, headRow('Run', 'Flow', 'Status', 'Step', 'Updated', 'Owner'),
        h('tbody', {}, page.runs.length > 0 ? page.runs.map(row) : h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No runs.')))),
      page.next !== undefined && h('p', {},
        h('a', { id: 'older', href: '#/?' + new URLSearchParams({ ...Object.fromEntries(params), before: page.next }) }, 'Older runs →')),
      h('div', { id: 'headless' }));
    // On request (it reads every run once): runs whose head was deleted below the store, which no
    // list of heads can show. The answer stays on the list across refreshes.
    document.getElementById('audit').onclick = async () => {
      audit = h('p', { class: 'muted' }, 'Checking…');
      showAudit();
      try {
        const found = await api('/headless');
        audit = [found.runs.length === 0
          ? h('p', { class: 'muted', id: 'headless-none' }, 'No run has checkpoints without a head.')
          : h('table', { id: 'headless-runs' }, headRow('Run without a head', 'Flow', 'Status', 'Why'),
            h('tbody', {}, found.runs.map((r) => h('tr', { 'data-run': r.runId },
              h('td', { class: 'mono' }, r.runId), h('td', {}, r.flow), h('td', {}, badge('failed', 'corrupt')),
              h('td', { class: 'error' }, r.corrupt))))),
          found.next !== undefined && h('p', { class: 'muted' }, 'More: run agent-adapter runs verify --all.')];
      } catch (e) { audit = h('p', { class: 'error' }, messageOf(e)); }
      showAudit();
    };
    showAudit();
    for (const id of ['flow', 'status']) {
      document.getElementById(id).onchange = () => {
        const p = new URLSearchParams();
        for (const k of ['flow', 'status']) { const v = document.getElementById(k).value; if (v) p.set(k, v); }
        location.hash = '#/?' + p;
      };
    }
    const search = document.getElementById('search');
    const open = () => { const id = search.value.trim(); if (id) location.hash = runLink(id); };
    search.oninput = () => { searched = search.value; };
    search.onkeydown = (e) => { if (e.key === 'Enter') open(); };
    document.getElementById('open').onclick = open;
  }

  async function show(runId, current) {
    let run;
    try { run = await api('/runs/' + encodeURIComponent(runId)); } catch (e) {
      if (e.status !== 404) throw e;
      if (current()) mount(app, bar(), h('p', { class: 'error', id: 'missing' }, 'no run ', h('span', { class: 'mono' }, runId)));
      return;
    }
    if (!current()) return;
    const pending = run.status === 'paused' && !run.corrupt ? run.pending : undefined;
    // Calls in doubt an operator can decide on, one by one: what each really did at its system.
    // Not after a failover: the store refuses a finding until the run is marked restored.
    const deciding = run.doubtful.length > 0 && run.status === 'running' && !run.corrupt && !run.failover;
    const result = h('span', { id: 'result' });
    // What the page last told the operator about this run stays across refreshes (a refresh that
    // was on its way when they clicked would otherwise wipe it at once).
    if (said && said.runId !== runId) said = null;
    if (said) mount(result, h('span', { class: 'error' }, said.text));
    const actions = [];
    if (pending)
      actions.push(h('span', {}, 'Waiting: ', h('b', {}, pending.tool), ' ', h('code', {}, short(pending.args))),
        typeof pending.deadline === 'number' && h('span', { id: 'deadline' }, 'deadline ', when(pending.deadline), ', then ', clockDoes(pending.onTimeout)),
        h('input', { id: 'by', placeholder: 'your name', value: operator }),
        h('button', { id: 'approve', class: 'primary' }, 'Approve…'),
        h('button', { id: 'deny', class: 'danger' }, 'Deny…'));
    if (run.doubtful.length > 0 && run.status === 'running')
      actions.push(!pending && h('input', { id: 'by', placeholder: 'your name', value: operator }),
        h('button', { id: 'rerun', class: 'danger' }, 'Rerun in doubt…'),
        h('span', { class: 'muted' }, 'only after checking each call at its system; or say below what each call did'));
    // The head's due time, named for what it is: a sleeping run's wake time (sealed), a paused run's
    // deadline (with its call, above), else a lease.
    const lease = run.status === 'sleeping'
      ? typeof run.wakeAt === 'number' && [', ', h('span', { id: 'wakes' }, 'sleeps until ', when(run.wakeAt))]
      : run.status === 'paused' || run.leaseExpiresAt === undefined ? '' : [', lease until ', when(run.leaseExpiresAt), ' ',
        run.status === 'running' && badge(run.leaseLive ? 'running' : 'failed', run.leaseLive ? 'live' : 'expired')];
    // What to check at each call's system: the key a provider can be searched by, the arguments, when.
    const doubt = (c) => h('tr', { class: 'doubt', 'data-tool': c.tool },
      h('td', { class: 'mono' }, c.callId), h('td', {}, h('b', {}, c.tool)),
      h('td', {}, h('span', { class: 'reason' }, c.why), h('br'), c.action),
      h('td', { class: 'mono' }, c.args === undefined ? '' : short(c.args, 400)),
      h('td', { class: 'mono' }, c.idempotencyKey ?? 'unknown (key id not in the ring)'),
      h('td', {}, when(c.startedAt)),
      deciding && h('td', {}, button('primary ran', c, 'It ran…', () => ran(c)), ' ',
        button('danger not-run', c, 'It did not run…', () => notRun(c))));
    const button = (cls, c, label, onclick) => {
      const b = h('button', { class: cls, 'data-call': c.callId }, label);
      b.onclick = () => { asking = true; try { onclick(); } finally { asking = false; } };
      return b;
    };
    const decision = (d) => h('tr', {},
      h('td', {}, d.step), h('td', {}, d.kind, d.sync && ' (sync)', d.timedOut && ' (timed out)'),
      h('td', { class: 'mono' }, d.calls.map((id, i) => id + ' ' + (d.tools[i] ?? '') +
        (d.ran ? (d.ran[i] ? ' (ran)' : ' (did not run)') : '')).join(', ')),
      h('td', {}, d.by ?? (d.timedOut ? 'the clock' : '')), h('td', {}, when(d.at)), h('td', {}, d.reason));

    const checkpoint = (c) => h('tr', {},
      h('td', {}, c.step), h('td', {}, badge(c.status, c.status)),
      h('td', { class: 'mono' }, c.segment, c.claim && [' ', badge('recovered', 'claim')]),
      h('td', {}, c.superstep),
      h('td', {}, c.reason, c.corrupt && h('span', { class: 'error' }, c.corrupt)),
      h('td', { class: 'mono' }, lines(Object.entries(c.changed || {}).map(([k, v]) => k + ' = ' + short(v)))));
    const call = (c) => h('tr', { class: c.inDoubt ? 'doubt' : undefined, 'data-tool': c.tool },
      h('td', {}, c.superstep), h('td', {}, c.node, '#', c.index),
      h('td', {}, h('b', {}, c.tool), c.rerun && [' ', badge('doubt', 'rerun')], c.replayed && [' ', badge('recovered', 'replayed')]),
      h('td', { class: 'mono' }, lines(c.records.map((r) => r.phase + ' ' + r.segment + '/' + r.seq))),
      h('td', {}, c.durationMs === undefined ? '' : c.durationMs + ' ms'),
      h('td', { class: 'mono' }, c.inDoubt ? h('span', { class: 'reason' }, c.inDoubt) : short(c.outcome)));
    mount(app,
      h('p', {}, h('a', { href: '#/' }, '← all runs')),
      bar(),
      h('h2', { class: 'run-id' }, run.runId),
      h('p', {}, badges(run), ' flow ', h('b', {}, run.flow), ', step ', run.step,
        ', segment ', h('span', { class: 'mono' }, run.segment), ', owner ', h('span', { class: 'mono' }, run.owner),
        lease, ', updated ', when(run.updatedAt)),
      run.corrupt && h('p', { class: 'error', id: 'corrupt' }, 'This run does not verify, nothing here is acted on: ', run.corrupt),
      run.error && h('p', { class: 'error' }, run.error.name, ': ', run.error.message),
      run.failover && h('p', { class: 'error', id: 'failover' }, 'A Redis failover may have lost this run\'s last writes ',
        '(written last by replication history ', h('span', { class: 'mono' }, run.failover.lostHistory), '). ',
        'Check its calls at their systems, then mark it restored: ', h('code', {}, 'agent-adapter runs restored --failover'),
        '; each call it may have lost is then in doubt here, to decide one by one.'),
      actions.length > 0 && h('div', { class: 'actions' }, actions, result),
      run.doubtful.length > 0 && [h('h2', {}, 'In doubt: check each call at its system'),
        h('table', { id: 'doubt' }, headRow('Call', 'Tool', 'Why', 'Arguments', 'Idempotency key', 'Started', ...(deciding ? ['What it did'] : [])),
          h('tbody', {}, run.doubtful.map(doubt)))],
      run.decisions.length > 0 && [h('h2', {}, 'Decisions'),
        h('table', { id: 'decisions' }, headRow('Step', 'Decision', 'Calls', 'By', 'At', 'Reason'),
          h('tbody', {}, run.decisions.map(decision)))],
      h('h2', {}, 'Checkpoints'),
      h('table', { id: 'timeline' }, headRow('Step', 'Status', 'Segment', 'Superstep', 'Reason', 'What changed'),
        h('tbody', {}, run.checkpoints.map(checkpoint))),
      h('h2', {}, 'Tool calls'),
      h('table', { id: 'calls' }, headRow('Superstep', 'Node', 'Tool', 'Records', 'Duration', 'Outcome'),
        h('tbody', {}, run.calls.map(call))));

    const act = async (path, body) => {
      said = null;
      result.textContent = 'working…';
      acting = true;
      try {
        const r = await post('/runs/' + encodeURIComponent(runId) + path, body);
        result.textContent = 'now ' + r.status;
        await render();
      } catch (e) { refuse(messageOf(e)); } finally { acting = false; }
    };
    const on = (id, fn) => { const el = document.getElementById(id); if (el) el.onclick = () => { asking = true; try { fn(); } finally { asking = false; } }; };
    const byInput = document.getElementById('by');
    if (byInput) byInput.oninput = () => { operator = byInput.value; };
    const by = () => document.getElementById('by').value;
    on('approve', () => {
      if (confirm('Approve ' + pending.tool + ' ' + short(pending.args) + ' in run ' + run.runId + '? The tool runs now.'))
        act('/approve', { by: by() });
    });
    on('deny', () => {
      const reason = prompt('Deny ' + pending.tool + ' in run ' + run.runId + '? The call is not made. Why (recorded with the decision)?', '');
      if (reason === null) return;
      if (!reason.trim()) { refuse('Not denied: give a reason.'); return; }
      act('/deny', { by: by(), reason: reason.trim() });
    });
    const refuse = (text) => { said = { runId, text }; mount(result, h('span', { class: 'error' }, text)); };
    const named = (c) => c.tool + ' (call ' + c.callId + ', idempotency key ' + (c.idempotencyKey ?? 'unknown') + ')';
    /** Asks why; null when the operator cancelled or gave no reason (said so on the page). */
    const why = (question) => {
      const reason = prompt(question + ' Why (recorded with the decision)?', '');
      if (reason === null) return null;
      if (!reason.trim()) { refuse('Not resolved: give a reason.'); return null; }
      return reason.trim();
    };
    // "It ran": its result as JSON, or the error it returned, as the call's system shows it.
    const ran = (c) => {
      const given = prompt('What did ' + named(c) + ' return, as its system shows it? Its result as JSON ' +
        '(text in double quotes, a number, an object...), or  error: Name: message  if it returned an error; empty for no result.', '');
      if (given === null) return;
      const text = given.trim();
      const failed = /^error:\s*([^:]+?)\s*:\s*([\s\S]*)$/i.exec(text);
      let outcome = {};
      if (failed) outcome = { error: { name: failed[1], message: failed[2] } };
      else if (text !== '') {
        try { outcome = { result: JSON.parse(text) }; } catch (e) {
          refuse('Not resolved: the result is not JSON (' + messageOf(e) + '); text goes in double quotes.');
          return;
        }
      }
      const what = outcome.error ? 'returned the error ' + outcome.error.name + ': ' + outcome.error.message
        : 'result' in outcome ? 'returned ' + short(outcome.result, 400) : 'returned nothing';
      const reason = why('Record that ' + named(c) + ' ran and ' + what + '.');
      if (reason === null) return;
      if (confirm('Record that ' + named(c) + ' in run ' + run.runId + ' RAN and ' + what +
        '? It is never run again: the run goes on with that outcome.'))
        act('/resolve', { call: c.callId, ran: true, ...outcome, by: by(), reason });
    };
    // "It did not run": it runs now, once, with the same idempotency key.
    const notRun = (c) => {
      const reason = why('Record that ' + named(c) + ' did not run.');
      if (reason === null) return;
      if (confirm('Record that ' + named(c) + ' in run ' + run.runId + ' did NOT run? ' +
        'It runs now, once, with the same idempotency key.'))
        act('/resolve', { call: c.callId, ran: false, by: by(), reason });
    };
    on('rerun', () => {
      const reason = prompt('Run every call in doubt again (' + run.doubtful.map((c) => c.tool + ' ' + c.callId).join(', ') +
        ')? Only after checking each one at its system. Why (recorded with the decision)?', '');
      if (reason === null) return;
      act('/rerun-in-doubt', { by: by(), ...(reason.trim() ? { reason: reason.trim() } : {}) });
    });
  }

` +
  SCHEDULES_SCRIPT +
  String.raw`
  // Each render has a number: one that a newer render (a click, a refresh) overtook mounts nothing.
  let generation = 0;
  async function render() {
    const mine = ++generation;
    const current = () => mine === generation;
    const hash = location.hash.slice(1) || '/';
    const focused = document.activeElement && document.activeElement.id;
    try {
      for (const tab of document.querySelectorAll('nav a')) tab.classList.toggle('current', tab.id === (hash === '/schedules' ? 'nav-schedules' : 'nav-runs'));
      if (hash.startsWith('/runs/')) await show(decodeURIComponent(hash.slice(6)), current);
      else if (hash === '/schedules') await schedules(current);
      else await list(new URLSearchParams(hash.split('?')[1] || ''), current);
    } catch (e) { if (current()) mount(app, bar(), h('p', { class: 'error' }, messageOf(e))); }
    // The control the operator was on (a filter, the refresh button) keeps the focus.
    const again = focused && current() ? document.getElementById(focused) : null;
    if (again && again !== document.activeElement) again.focus();
  }
  // Refresh without reloading: on the button, and every EVERY ms unless a question is open, a
  // decision is being sent, the tab is hidden, or the operator is typing (in a name, a run id).
  let asking = false;
  let acting = false;
  /** The last refusal or error shown on a run's page: { runId, text }. */
  let said = null;
  const typing = () => document.activeElement instanceof HTMLInputElement;
  setInterval(() => { if (!asking && !acting && !document.hidden && !typing()) render(); }, EVERY);
  app.addEventListener('click', (e) => { if (e.target instanceof Element && e.target.id === 'refresh') render(); });
  window.addEventListener('hashchange', render);
  render();
})();
`;
