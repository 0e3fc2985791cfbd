// The operator console of idemgateway (docs/operations.md#operator-console). Everything shown
// comes from the admin API of the listener that serves this page, and is put into the page as
// text (textContent), never as markup: keys, tenants and stored bodies are what clients sent.
'use strict';

(() => {
  // sessionStorage: this tab only, never in a URL; one entry per page path, so that gateways
  // served under prefixes of one origin never get each other's token.
  const TOKEN = 'idemgateway.adminToken:' + location.pathname;
  const DECISIONS = ['execute', 'replay', 'conflict', 'in_progress', 'outcome_unknown', 'rejected'];
  const QUEUE_LIMIT = 200;
  const POLL_MS = 10000;

  const $ = (id) => document.getElementById(id);

  function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (className) e.className = className;
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  // ---- the admin API -------------------------------------------------------------------------

  class Unauthorized extends Error {}

  class APIError extends Error {
    constructor(status, problem) {
      super((problem && (problem.detail || problem.title)) || 'the admin API answered ' + status);
      this.status = status;
      this.type = (problem && problem.type) || '';
    }
  }

  // api calls the admin API with the tab's token; paths are relative to /ui/, so that the page
  // works behind a proxy that serves the listener under a prefix. A 401 asks for the token again.
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN);
    if (token) headers.Authorization = 'Bearer ' + token;
    const init = { method, headers, credentials: 'omit', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch('../' + path, init);
    if (resp.status === 401) {
      askToken(token ? 'The gateway refused that token. Enter the admin token again.' : '');
      throw new Unauthorized();
    }
    if (resp.status === 204) return null;
    let data = null;
    try {
      data = await resp.json();
    } catch (e) {
      data = null;
    }
    if (!resp.ok) throw new APIError(resp.status, data);
    if (data === null) throw new APIError(resp.status, { detail: 'the admin API answered ' + resp.status + ' without JSON (a proxy in between?)' });
    return data;
  }

  // ref names a record: tenant, tool, idempotency_key, credential_scope, as the API spells them.
  // The record is named by the query (/v1/record?…), which carries any key, "." and ".." too.
  function recordPath(ref, suffix) {
    const q = new URLSearchParams({ tenant: ref.tenant, tool: ref.tool, key: ref.idempotency_key });
    if (ref.credential_scope) q.set('credential', ref.credential_scope);
    return 'v1/record' + (suffix || '') + '?' + q.toString();
  }

  function recordHash(ref) {
    const q = new URLSearchParams({ tenant: ref.tenant, tool: ref.tool, key: ref.idempotency_key });
    if (ref.credential_scope) q.set('credential', ref.credential_scope);
    return '#/record?' + q.toString();
  }

  // ---- times ---------------------------------------------------------------------------------

  function parseTime(s) {
    const d = new Date(s);
    return isNaN(d) || d.getUTCFullYear() < 1971 ? null : d;
  }

  function utc(s) {
    const d = parseTime(s);
    return d ? d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '—';
  }

  function span(seconds) {
    if (seconds < 60) return seconds + ' s';
    if (seconds < 3600) return Math.floor(seconds / 60) + ' min';
    if (seconds < 86400) return Math.floor(seconds / 3600) + ' h ' + Math.floor((seconds % 3600) / 60) + ' min';
    return Math.floor(seconds / 86400) + ' d ' + Math.floor((seconds % 86400) / 3600) + ' h';
  }

  function age(s) {
    const d = parseTime(s);
    if (!d) return '—';
    const seconds = Math.round((Date.now() - d.getTime()) / 1000);
    return seconds < 0 ? 'in ' + span(-seconds) : span(seconds) + ' ago';
  }

  function timeEl(s) {
    const t = el('time', utc(s));
    if (parseTime(s)) t.dateTime = s;
    return t;
  }

  // ---- views ---------------------------------------------------------------------------------

  let view = 0; // bumped by every route change: a late answer for an older view is dropped
  let poll = null;
  let filter = { tenant: '', tool: '' }; // the queue's filter, as the address says

  function show(id, focus) {
    for (const s of ['login', 'home', 'record']) $(s).hidden = s !== id;
    $('forget').hidden = id === 'login' || !sessionStorage.getItem(TOKEN);
    if (focus) $(focus).focus();
  }

  function notice(text, isError) {
    $('notice').textContent = text || '';
    $('notice').className = isError ? 'error' : '';
  }

  function askToken(message) {
    sessionStorage.removeItem(TOKEN);
    view++;
    stopPolling();
    show('login');
    $('login-error').textContent = message || '';
    $('token').value = '';
    $('token').focus();
  }

  function route() {
    view++;
    stopPolling();
    const hash = location.hash.replace(/^#/, '') || '/';
    const at = hash.indexOf('?');
    const path = at < 0 ? hash : hash.slice(0, at);
    const q = new URLSearchParams(at < 0 ? '' : hash.slice(at + 1));
    if (path === '/record') {
      showRecord({ tenant: q.get('tenant') || '', tool: q.get('tool') || '', idempotency_key: q.get('key') || '', credential_scope: q.get('credential') || '' });
      return;
    }
    filter = { tenant: q.get('tenant') || '', tool: q.get('tool') || '' };
    showHome();
  }

  // ---- the queue and the process's activity --------------------------------------------------

  function showHome() {
    show('home', 'home-title');
    $('filter-tenant').value = filter.tenant;
    $('filter-tool').value = filter.tool;
    refreshHome(view);
    poll = setInterval(() => {
      if (!document.hidden) refreshHome(view);
    }, POLL_MS);
  }

  function stopPolling() {
    if (poll) clearInterval(poll);
    poll = null;
  }

  function refreshHome(v) {
    loadQueue(v);
    loadActivity(v);
  }

  // Each list drops an answer older than the last one it showed (a slow poll after a refresh).
  const latest = { queue: 0, activity: 0 };

  function failedAt(id, what, e) {
    if (e instanceof Unauthorized) return;
    $(id).textContent = what + ' could not be read (' + e.message + '); shown as last read.';
  }

  async function loadQueue(v) {
    const seq = ++latest.queue;
    const q = new URLSearchParams({ state: 'outcome_unknown', order: 'oldest', limit: String(QUEUE_LIMIT) });
    if (filter.tenant) q.set('tenant', filter.tenant);
    if (filter.tool) q.set('tool', filter.tool);
    let page;
    try {
      page = await api('GET', 'v1/records?' + q.toString());
    } catch (e) {
      if (v === view && seq === latest.queue) failedAt('queue-error', 'The queue', e);
      return;
    }
    if (v !== view || seq !== latest.queue) return;
    $('queue-error').textContent = '';
    const body = $('queue').tBodies[0];
    clear(body);
    const columns = ['Key', 'Tenant', 'Tool', 'Started', 'Age', 'Upstream', 'Executions'];
    for (const r of page.records || []) {
      const tr = el('tr');
      const link = el('a', r.idempotency_key, 'key');
      link.href = recordHash(r);
      const cells = [link, r.tenant, r.tool, timeEl(r.started_at), age(r.started_at), r.remote_system, r.executions];
      cells.forEach((c, i) => {
        const td = el('td');
        td.setAttribute('data-label', columns[i]);
        if (c instanceof Node) td.appendChild(c);
        else td.textContent = String(c);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
    const total = page.total || 0;
    const shown = (page.records || []).length;
    const scope = [filter.tenant && 'tenant “' + filter.tenant + '”', filter.tool && 'tool “' + filter.tool + '”'].filter(Boolean).join(', ');
    let summary = total === 0 ? 'No unknown outcomes' : total + (total === 1 ? ' unknown outcome' : ' unknown outcomes');
    if (scope) summary += ' for ' + scope;
    if (page.total_capped) summary += ' among the first 10 000 records read';
    if (total > shown) summary += '; the oldest ' + shown + ' are shown (filter by tenant or tool to see others)';
    $('queue-summary').textContent = summary + '.';
    $('queue').hidden = total === 0;
  }

  async function loadActivity(v) {
    const seq = ++latest.activity;
    let act;
    try {
      act = await api('GET', 'v1/activity');
    } catch (e) {
      if (v === view && seq === latest.activity) failedAt('activity-error', 'The activity', e);
      return;
    }
    if (v !== view || seq !== latest.activity) return;
    $('activity-error').textContent = '';
    drawChart(act.decisions_per_minute || []);
    items($('inflight'), $('inflight-count'), act.in_flight || [], act.in_flight_count, 'No calls in flight.', (c) => 'started ' + age(c.started_at));
    items($('pending'), $('pending-count'), act.pending || [], act.pending_count, 'No pending receipts.', (p) => p.op + ', pending since ' + age(p.since));
  }

  function items(list, count, entries, n, empty, describe) {
    clear(list);
    count.textContent = '(' + n + ')';
    if (entries.length === 0) list.appendChild(el('li', empty, 'hint'));
    for (const e of entries) {
      const li = el('li');
      const link = el('a', e.idempotency_key, 'key');
      link.href = recordHash(e);
      li.appendChild(link);
      li.appendChild(document.createTextNode(' — ' + e.tenant + ' / ' + e.tool + ', ' + describe(e)));
      list.appendChild(li);
    }
  }

  // drawChart draws the decisions per minute as stacked bars (an SVG built node by node, stretched
  // to the page's width), its scale and time axis as text around it, and a legend that gives each
  // decision's count over the hour.
  function drawChart(minutes) {
    const NS = 'http://www.w3.org/2000/svg';
    const W = 600, H = 100, bar = W / 60;
    const plot = $('chart-plot');
    clear(plot);
    let max = 1;
    const totals = {};
    for (const d of DECISIONS) totals[d] = 0;
    for (const m of minutes) {
      let sum = 0;
      for (const d of DECISIONS) {
        sum += m.decisions[d] || 0;
        totals[d] += m.decisions[d] || 0;
      }
      max = Math.max(max, sum);
    }
    const all = DECISIONS.reduce((s, d) => s + totals[d], 0);
    plot.appendChild(el('p', 'at most ' + max + ' a minute', 'chart-scale'));
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'Decisions per minute over the last hour: ' + all + ' in all, at most ' + max + ' in a minute.');
    minutes.forEach((m, i) => {
      let y = H;
      const g = document.createElementNS(NS, 'g');
      const title = document.createElementNS(NS, 'title');
      const made = DECISIONS.filter((d) => m.decisions[d]).map((d) => m.decisions[d] + ' ' + d);
      title.textContent = utc(m.start).replace(':00 UTC', ' UTC') + ': ' + (made.length ? made.join(', ') : 'none');
      g.appendChild(title);
      for (const d of DECISIONS) {
        const n = m.decisions[d] || 0;
        if (!n) continue;
        const h = (n * H) / max;
        y -= h;
        const r = document.createElementNS(NS, 'rect');
        r.setAttribute('x', String(i * bar + 1));
        r.setAttribute('y', String(y));
        r.setAttribute('width', String(bar - 2));
        r.setAttribute('height', String(h));
        r.setAttribute('class', 'd-' + d);
        g.appendChild(r);
      }
      svg.appendChild(g);
    });
    plot.appendChild(svg);
    const axis = el('div', null, 'chart-axis');
    axis.appendChild(el('span', '60 min ago'));
    axis.appendChild(el('span', 'now'));
    plot.appendChild(axis);
    const legend = $('chart-legend');
    clear(legend);
    for (const d of DECISIONS) {
      const li = el('li');
      li.appendChild(el('span', '', 'swatch d-' + d));
      li.appendChild(document.createTextNode(d + ': ' + totals[d]));
      legend.appendChild(li);
    }
  }

  // ---- a record ------------------------------------------------------------------------------

  const STATES = {
    in_progress: 'in progress: a call under this key is under way',
    committed: 'committed: retries replay the receipt',
    outcome_unknown: 'outcome unknown: retries are refused until it is resolved or expires',
  };

  let current = null; // the record shown: {ref, rec}
  let pendingResolve = null; // the resolve asked for, sent once confirmed
  let opener = null; // the button that asked for it, focused again when it is cancelled

  function field(dl, name, value) {
    if (value === undefined || value === null || value === '') return;
    dl.appendChild(el('dt', name));
    const dd = el('dd');
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = String(value);
    dl.appendChild(dd);
  }

  function showText(pre, summaryEl, summary, view) {
    summaryEl.textContent = summary;
    pre.textContent = view && !view.binary ? view.text || '' : '';
    pre.hidden = !view || view.binary || !view.bytes;
  }

  function describeText(view, what) {
    let s = view.bytes + ' bytes';
    if (view.binary) s += ': not text, not shown';
    else if (view.truncated) s += ': the first 64 KiB are shown';
    return what + ', ' + s + '.';
  }

  async function showRecord(ref) {
    const v = view;
    show('record', 'record-title');
    current = null;
    hideConfirm();
    $('record-key').textContent = ref.idempotency_key;
    for (const id of ['record-fields', 'timeline', 'receipt-fields']) clear($(id));
    for (const id of ['record-error', 'record-gone', 'resolve-result']) $(id).textContent = '';
    showText($('body'), $('body-summary'), '', null);
    showText($('request'), $('request-summary'), '', null);
    $('record-details').hidden = true;
    $('resolve').hidden = true;
    $('in-progress').hidden = true;
    let rec;
    try {
      rec = await api('GET', recordPath(ref));
    } catch (e) {
      if (v !== view || e instanceof Unauthorized) return;
      if (e.status === 404 && /no-record$/.test(e.type)) {
        $('record-gone').textContent = 'No record holds this key now: it was freed (resolved as not committed, or deleted) or it expired. The next call with this key executes.';
      } else {
        $('record-error').textContent = 'The record could not be read: ' + e.message;
      }
      return;
    }
    if (v !== view) return;
    current = { ref, rec };
    $('record-details').hidden = false;

    const fields = $('record-fields');
    field(fields, 'Tenant', rec.tenant);
    field(fields, 'Tool', rec.tool);
    field(fields, 'Idempotency key', el('span', rec.idempotency_key, 'key'));
    field(fields, 'Credential scope', rec.credential_scope);
    field(fields, 'State', STATES[rec.state] || rec.state);
    field(fields, 'Why', rec.detail);
    field(fields, 'Upstream', rec.remote_system);
    field(fields, 'Executions', rec.executions);
    field(fields, 'Actor', rec.actor);
    field(fields, 'Effect fingerprint', el('code', rec.effect_fingerprint));
    field(fields, 'MCP protocol version', rec.mcp_protocol_version);

    const timeline = $('timeline');
    const step = (what, s) => {
      const li = el('li', what + ' ');
      li.appendChild(timeEl(s));
      li.appendChild(document.createTextNode(' (' + age(s) + ')'));
      timeline.appendChild(li);
    };
    step('Started', rec.started_at);
    if (rec.committed_at) step(rec.state === 'committed' ? 'Committed' : 'Settled', rec.committed_at);
    step('Expires', rec.expires_at);

    const receipt = $('receipt-fields');
    field(receipt, 'Remote id', rec.remote_id || '—');
    field(receipt, 'Remote URL', remoteURL(rec.remote_url));
    field(receipt, 'Stored status', rec.response_status || '—');

    loadRequest(v, ref);
    if (rec.state === 'committed') {
      loadBody(v, ref);
    } else {
      $('body-summary').textContent = 'No response is stored: the call has no known outcome yet.';
    }
    if (rec.state === 'in_progress') {
      $('in-progress').hidden = false;
    } else if (rec.state !== 'committed') {
      $('resolve').hidden = false;
      $('advice-upstream').textContent = rec.remote_system;
      $('remote-id').value = '';
      $('remote-url').value = '';
      // A tool call's answer is a JSON-RPC result whatever the status: nothing to choose.
      $('status-field').hidden = !!rec.mcp_protocol_version;
      $('response-status').value = rec.resolve_status || 200;
    }
  }

  // remoteURL is a link when url is an http(s) URL, else the text; "—" when there is none.
  function remoteURL(url) {
    if (!url) return '—';
    try {
      const u = new URL(url);
      if (u.protocol === 'http:' || u.protocol === 'https:') {
        const a = el('a', url);
        a.href = u.href;
        a.rel = 'noopener noreferrer';
        return a;
      }
    } catch (e) {
      // not a URL: shown as text
    }
    return url;
  }

  // readForView reads ref's part at suffix for the view v. When it cannot be read, it says so in
  // the element summary (what could not be read), unless the token was refused (the prompt says
  // that); it returns null then, and also once another view has replaced v.
  async function readForView(v, ref, suffix, summary, what) {
    let data;
    try {
      data = await api('GET', recordPath(ref, suffix));
    } catch (e) {
      if (v === view && !(e instanceof Unauthorized)) $(summary).textContent = what + ' could not be read: ' + e.message;
      return null;
    }
    return v === view ? data : null;
  }

  async function loadBody(v, ref) {
    const resp = await readForView(v, ref, '/response', 'body-summary', 'The stored response');
    if (!resp) return;
    if (!resp.stored) {
      showText($('body'), $('body-summary'), 'No response is stored (a record resolved by an operator): replays answer the stored status with no body.', null);
    } else if (!resp.body_kept) {
      showText($('body'), $('body-summary'), 'Status ' + resp.status + '. Its body was not kept (larger than the receipt limit, or it arrived broken): replays carry no body.', null);
    } else {
      showText($('body'), $('body-summary'), describeText(resp.body, 'Status ' + resp.status + (resp.content_type ? ', ' + resp.content_type : '')), resp.body);
    }
  }

  async function loadRequest(v, ref) {
    const req = await readForView(v, ref, '/request', 'request-summary', 'The request');
    if (!req) return;
    if (!req.kept) {
      showText($('request'), $('request-summary'), 'The record keeps no copy of the request (it was larger than a record keeps).', null);
    } else {
      showText($('request'), $('request-summary'), describeText(req.document, 'The fields its fingerprint covers, as canonical JSON'), req.document);
    }
  }

  // ---- resolving -----------------------------------------------------------------------------

  function askResolve(outcome, button) {
    hideConfirm();
    if (!current) return;
    const rec = current.rec;
    const what = '“' + rec.idempotency_key + '” (tenant ' + rec.tenant + ', tool ' + rec.tool +
      (rec.credential_scope ? ', credential ' + rec.credential_scope : '') + ')';
    if (outcome === 'committed') {
      const id = $('remote-id').value.trim();
      const url = $('remote-url').value.trim();
      pendingResolve = { outcome: 'committed' };
      let status = '';
      if (!$('status-field').hidden) {
        const n = Number($('response-status').value || rec.resolve_status || 200);
        if (!Number.isInteger(n) || n < 200 || n > 399) {
          pendingResolve = null;
          $('resolve-result').textContent = 'The status to store is a committed call\'s: 200 to 399.';
          return;
        }
        pendingResolve.response_status = n;
        status = ', status ' + n;
      }
      if (id) pendingResolve.remote_id = id;
      if (url) pendingResolve.remote_url = url;
      $('confirm-text').textContent = 'Resolve ' + what + ' as committed' +
        (id ? ', remote id “' + id + '”' : ', with no remote id') + status +
        '? Every retry of this key then gets this receipt, and ' + rec.remote_system + ' is not called again for it.';
      $('confirm-yes').textContent = 'Confirm: committed';
    } else {
      pendingResolve = { outcome: 'not_committed' };
      $('confirm-text').textContent = 'Resolve ' + what + ' as not committed? The key is freed, and the next retry calls ' +
        rec.remote_system + ' again.';
      $('confirm-yes').textContent = 'Confirm: not committed';
    }
    opener = button;
    $('resolve-result').textContent = '';
    $('confirm').hidden = false;
    $('confirm-yes').focus();
  }

  function hideConfirm() {
    pendingResolve = null;
    $('confirm').hidden = true;
  }

  function cancelConfirm() {
    if ($('confirm').hidden) return;
    hideConfirm();
    if (opener) opener.focus();
  }

  async function sendResolve() {
    if (!current || !pendingResolve) return;
    const { ref } = current;
    const body = pendingResolve;
    hideConfirm();
    $('confirm-yes').disabled = true;
    try {
      await api('POST', recordPath(ref, '/resolve'), body);
      notice(body.outcome === 'committed'
        ? 'Resolved as committed: retries of “' + ref.idempotency_key + '” replay its receipt.'
        : 'Resolved as not committed: “' + ref.idempotency_key + '” is free, and its next retry executes.');
    } catch (e) {
      if (e instanceof Unauthorized) return;
      notice(e.status === 409
        ? 'Not resolved: the record was resolved meanwhile elsewhere, or a call under its key is under way. It is shown as it is now.'
        : 'Not resolved: ' + e.message, true);
    } finally {
      $('confirm-yes').disabled = false;
    }
    route();
  }

  // ---- wiring --------------------------------------------------------------------------------

  function start() {
    $('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const token = $('token').value.trim();
      if (!token) {
        $('login-error').textContent = 'Enter the admin token.';
        return;
      }
      if (!/^[\x20-\x7e]+$/.test(token)) {
        $('login-error').textContent = 'An admin token is printable ASCII: this one cannot be sent in an HTTP header.';
        return;
      }
      sessionStorage.setItem(TOKEN, token);
      $('token').value = '';
      $('login-error').textContent = '';
      route();
    });
    $('forget').addEventListener('click', () => askToken(''));
    $('filter').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const q = new URLSearchParams();
      if ($('filter-tenant').value.trim()) q.set('tenant', $('filter-tenant').value.trim());
      if ($('filter-tool').value.trim()) q.set('tool', $('filter-tool').value.trim());
      const hash = '#/' + (q.toString() ? '?' + q.toString() : '');
      if (location.hash === hash) route();
      else location.hash = hash; // hashchange routes
    });
    $('refresh').addEventListener('click', () => refreshHome(view));
    $('committed').addEventListener('click', () => askResolve('committed', $('committed')));
    $('not-committed').addEventListener('click', () => askResolve('not_committed', $('not-committed')));
    // A change of what the confirmation would send withdraws it: it never sends values the form no longer shows.
    for (const id of ['remote-id', 'remote-url', 'response-status']) $(id).addEventListener('input', hideConfirm);
    $('confirm-yes').addEventListener('click', sendResolve);
    $('confirm-no').addEventListener('click', cancelConfirm);
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') cancelConfirm();
    });
    window.addEventListener('hashchange', () => {
      notice('');
      route();
    });
    route();
  }

  start();
})();
