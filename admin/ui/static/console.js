// The operator console of idemgateway (docs/operations.md#operator-console). Everything shown
// comes from the admin API of the listener that serves this page, and is put into the page as
// text (textContent), never as markup: keys, tenants and stored bodies are what clients sent.
'use strict';

(() => {
  const TOKEN = 'idemgateway.adminToken'; // sessionStorage: this tab only, never in a URL
  const DECISIONS = ['execute', 'replay', 'conflict', 'in_progress', 'outcome_unknown', 'rejected'];
  const POLL_MS = 10000;

  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

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
    return data;
  }

  // ref names a record: tenant, tool, idempotency_key, credential_scope, as the API spells them.
  function recordPath(ref, suffix) {
    let p = 'v1/records/' + enc(ref.tenant) + '/' + enc(ref.tool) + '/' + enc(ref.idempotency_key) + (suffix || '');
    if (ref.credential_scope) p += '?credential=' + enc(ref.credential_scope);
    return p;
  }

  function recordHash(ref) {
    let h = '#/record/' + enc(ref.tenant) + '/' + enc(ref.tool) + '/' + enc(ref.idempotency_key);
    if (ref.credential_scope) h += '?credential=' + enc(ref.credential_scope);
    return h;
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

  function show(id) {
    for (const s of ['login', 'home', 'record']) $(s).hidden = s !== id;
    $('forget').hidden = id === 'login' || !sessionStorage.getItem(TOKEN);
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

  function failed(e, where) {
    if (e instanceof Unauthorized) return;
    notice(where + ': ' + e.message, true);
  }

  function route() {
    view++;
    stopPolling();
    const hash = location.hash.replace(/^#/, '') || '/';
    const m = hash.match(/^\/record\/([^/?]*)\/([^/?]*)\/([^/?]*)(?:\?credential=(.*))?$/);
    if (m) {
      try {
        showRecord({
          tenant: decodeURIComponent(m[1]), tool: decodeURIComponent(m[2]),
          idempotency_key: decodeURIComponent(m[3]), credential_scope: m[4] ? decodeURIComponent(m[4]) : '',
        });
      } catch (e) {
        notice('That address names no record.', true);
        showHome();
      }
      return;
    }
    showHome();
  }

  // ---- the queue and the process's activity --------------------------------------------------

  function showHome() {
    show('home');
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

  async function loadQueue(v) {
    const q = new URLSearchParams({ state: 'outcome_unknown', order: 'oldest', limit: '200' });
    const tenant = $('filter-tenant').value.trim();
    const tool = $('filter-tool').value.trim();
    if (tenant) q.set('tenant', tenant);
    if (tool) q.set('tool', tool);
    let page;
    try {
      page = await api('GET', 'v1/records?' + q.toString());
    } catch (e) {
      failed(e, 'The queue could not be read');
      return;
    }
    if (v !== view) return;
    const body = $('queue').tBodies[0];
    clear(body);
    const columns = ['Key', 'Tenant', 'Tool', 'Started', 'Age', 'Upstream', 'Executions'];
    for (const r of page.records) {
      const tr = el('tr');
      const link = el('a', r.idempotency_key);
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
    let summary = total === 0 ? 'No unknown outcomes.' : total + (total === 1 ? ' unknown outcome' : ' unknown outcomes');
    if (page.total_capped) summary += ' among the first 10 000 records read';
    if (total > page.records.length) summary += '; the oldest ' + page.records.length + ' are shown';
    $('queue-summary').textContent = summary + (total ? '.' : '');
    $('queue').hidden = total === 0;
  }

  async function loadActivity(v) {
    let act;
    try {
      act = await api('GET', 'v1/activity');
    } catch (e) {
      failed(e, 'The activity could not be read');
      return;
    }
    if (v !== view) return;
    drawChart(act.decisions_per_minute);
    items($('inflight'), $('inflight-count'), act.in_flight, act.in_flight_count, 'No calls in flight.', (c) => ['started ' + age(c.started_at)]);
    items($('pending'), $('pending-count'), act.pending, act.pending_count, 'No pending receipts.', (p) => [p.op + ', pending since ' + age(p.since)]);
  }

  function items(list, count, entries, n, empty, describe) {
    clear(list);
    count.textContent = '(' + n + ')';
    if (entries.length === 0) list.appendChild(el('li', empty, 'hint'));
    for (const e of entries) {
      const li = el('li');
      const link = el('a', e.idempotency_key);
      link.href = recordHash(e);
      li.appendChild(link);
      li.appendChild(document.createTextNode(' — ' + e.tenant + ' / ' + e.tool + ', ' + describe(e).join(', ')));
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
    in_progress: 'in progress: a call under this key is under way, or its gateway stopped before it finished',
    committed: 'committed: retries replay the receipt',
    outcome_unknown: 'outcome unknown: retries are refused until it is resolved or expires',
  };

  let current = null; // the record shown: {ref, rec}
  let pendingResolve = null; // the resolve asked for, sent once confirmed

  function field(dl, name, value) {
    if (value === undefined || value === null || value === '') return;
    dl.appendChild(el('dt', name));
    const dd = el('dd');
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = String(value);
    dl.appendChild(dd);
  }

  async function showRecord(ref) {
    const v = view;
    show('record');
    current = null;
    hideConfirm();
    $('record-key').textContent = ref.idempotency_key;
    for (const id of ['record-fields', 'timeline', 'receipt-fields']) clear($(id));
    $('record-error').textContent = '';
    $('body-summary').textContent = '';
    $('body').hidden = true;
    $('resolve').hidden = true;
    let rec;
    try {
      rec = await api('GET', recordPath(ref));
    } catch (e) {
      if (v !== view || e instanceof Unauthorized) return;
      $('record-error').textContent = e.status === 404
        ? 'No record holds this key now: it was freed (resolved as not committed, or deleted) or it expired. The next call with this key executes.'
        : 'The record could not be read: ' + e.message;
      return;
    }
    if (v !== view) return;
    current = { ref, rec };

    const fields = $('record-fields');
    field(fields, 'Tenant', rec.tenant);
    field(fields, 'Tool', rec.tool);
    field(fields, 'Idempotency key', rec.idempotency_key);
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

    if (rec.state === 'committed') {
      loadBody(v, ref);
    } else {
      $('body-summary').textContent = 'No response is stored: the call has no known outcome yet.';
      $('resolve').hidden = false;
      $('advice-upstream').textContent = rec.remote_system;
      $('remote-id').value = '';
      $('remote-url').value = '';
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

  async function loadBody(v, ref) {
    let resp;
    try {
      resp = await api('GET', recordPath(ref, '/response'));
    } catch (e) {
      if (v === view) failed(e, 'The stored response could not be read');
      return;
    }
    if (v !== view) return;
    const summary = $('body-summary');
    if (!resp.stored) {
      summary.textContent = 'No response is stored (a record resolved by an operator): replays answer the stored status with no body.';
      return;
    }
    let s = 'Status ' + resp.status + (resp.content_type ? ', ' + resp.content_type : '') + ', ' + resp.body_bytes + ' bytes';
    if (resp.body_binary) s += ': not text, not shown';
    else if (resp.body_truncated) s += ': the first 64 KiB are shown';
    summary.textContent = s + '.';
    if (!resp.body_binary && resp.body_bytes > 0) {
      $('body').textContent = resp.body;
      $('body').hidden = false;
    }
  }

  // ---- resolving -----------------------------------------------------------------------------

  function askResolve(outcome) {
    if (!current) return;
    const rec = current.rec;
    const key = '“' + rec.idempotency_key + '”';
    if (outcome === 'committed') {
      const id = $('remote-id').value.trim();
      const url = $('remote-url').value.trim();
      const status = Number($('response-status').value || rec.resolve_status || 200);
      if (!Number.isInteger(status) || status < 200 || status > 399) {
        $('resolve-result').textContent = 'The status to store is a committed call\'s: 200 to 399.';
        return;
      }
      pendingResolve = { outcome: 'committed', response_status: status };
      if (id) pendingResolve.remote_id = id;
      if (url) pendingResolve.remote_url = url;
      $('confirm-text').textContent = 'Resolve ' + key + ' as committed' +
        (id ? ', remote id “' + id + '”' : ', with no remote id') + ', status ' + status +
        '? Every retry of this key then gets this receipt, and ' + rec.remote_system + ' is not called again for it.';
      $('confirm-yes').textContent = 'Confirm: committed';
    } else {
      pendingResolve = { outcome: 'not_committed' };
      $('confirm-text').textContent = 'Resolve ' + key + ' as not committed? The key is freed, and the next retry calls ' +
        rec.remote_system + ' again.';
      $('confirm-yes').textContent = 'Confirm: not committed';
    }
    $('resolve-result').textContent = '';
    $('confirm').hidden = false;
    $('confirm-yes').focus();
  }

  function hideConfirm() {
    pendingResolve = null;
    $('confirm').hidden = true;
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
      sessionStorage.setItem(TOKEN, token);
      $('token').value = '';
      $('login-error').textContent = '';
      route();
    });
    $('forget').addEventListener('click', () => askToken(''));
    $('filter').addEventListener('submit', (ev) => {
      ev.preventDefault();
      refreshHome(view);
    });
    $('refresh').addEventListener('click', () => refreshHome(view));
    $('committed').addEventListener('click', () => askResolve('committed'));
    $('not-committed').addEventListener('click', () => askResolve('not_committed'));
    $('confirm-yes').addEventListener('click', sendResolve);
    $('confirm-no').addEventListener('click', () => {
      hideConfirm();
      $('committed').focus();
    });
    window.addEventListener('hashchange', () => {
      notice('');
      route();
    });
    route();
  }

  start();
})();
