/**
 * The run viewer page's "Schedules" view (`#/schedules`): a part of the page's one inline script
 * (`VIEWER_SCRIPT` splices it in, inside its closure, and the page's CSP hashes the whole), using
 * its helpers: `h` and `mount` (DOM calls only, every value a text node), `api`, `post` (JSON and
 * the page's CSRF token), `when`, `badge`, `bar`. Every stored schedule, with its next tick in
 * this browser's local time and in ISO (UTC); Pause and Resume ask first, like a run's actions.
 *
 * Written without backticks or `${`, inside `String.raw`: the text below is the script verbatim.
 * @internal
 */
export const SCHEDULES_SCRIPT = String.raw`
  const isoOf = (ms) => (typeof ms === 'number' ? new Date(ms).toISOString() : '');

  async function schedules(current) {
    const found = await api('/schedules');
    if (!current()) return;
    const result = h('span', { id: 'result' });
    const by = () => document.getElementById('by').value;
    const act = async (name, to) => {
      result.textContent = 'working…';
      acting = true;
      try {
        const r = await post('/schedules/' + encodeURIComponent(name) + '/' + to, { by: by() });
        result.textContent = name + ' now ' + (r.paused ? 'paused' : 'active');
        await render();
      } catch (e) { mount(result, h('span', { class: 'error' }, messageOf(e))); } finally { acting = false; }
    };
    const toggle = (s) => {
      const b = h('button', { class: s.paused ? 'primary' : 'danger', 'data-schedule': s.name }, s.paused ? 'Resume…' : 'Pause…');
      b.onclick = () => {
        let sure = false;
        asking = true;
        try {
          sure = confirm(s.paused
            ? 'Resume schedule ' + s.name + '? It fires again from its next tick; the ticks missed while it was paused never run.'
            : 'Pause schedule ' + s.name + '? No worker fires it until it is resumed; its runs in flight go on.');
        } finally { asking = false; }
        if (sure) act(s.name, s.paused ? 'resume' : 'pause');
      };
      return b;
    };
    // A record that does not verify is named, with why, and never acted on.
    const row = (s) => s.corrupt
      ? h('tr', { 'data-schedule': s.name }, h('td', { class: 'mono' }, s.name),
        h('td', { colspan: 8 }, badge('failed', 'corrupt'), ' ', h('span', { class: 'error' }, s.corrupt)))
      : h('tr', { 'data-schedule': s.name },
        h('td', { class: 'mono' }, s.name), h('td', {}, s.flow), h('td', { class: 'mono' }, s.expression),
        h('td', {}, s.timezone ?? 'UTC'), h('td', {}, s.overlap), h('td', {}, s.catchUp),
        h('td', {}, s.paused ? badge('paused', 'paused') : badge('active', 'active')),
        h('td', { class: 'next' }, s.paused ? h('span', { class: 'muted' }, 'none while paused')
          : [when(s.nextAt), h('br'), h('span', { class: 'mono' }, isoOf(s.nextAt))]),
        h('td', {}, toggle(s)));
    mount(app,
      bar(h('input', { id: 'by', placeholder: 'your name', value: operator }), result),
      h('table', { id: 'schedules' },
        headRow('Schedule', 'Flow', 'Cron', 'Time zone', 'Overlap', 'Catch-up', 'State', 'Next tick', ''),
        h('tbody', {}, found.schedules.length > 0 ? found.schedules.map(row)
          : h('tr', {}, h('td', { colspan: 9, class: 'muted', id: 'no-schedules' }, 'No schedules stored.')))));
    const byInput = document.getElementById('by');
    byInput.oninput = () => { operator = byInput.value; };
  }
`;
