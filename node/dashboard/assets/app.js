// Nomicore dashboard: plain JavaScript, no framework, no build step. It reads the admin API
// of the process that serves it — GET /v1/status/stream for the live picture, the
// namespace routes for the details — and writes through the same documented routes.
// Rendering never parses HTML: elements are built one by one and every value is set as text.
'use strict';

(function () {
  const TOKEN_KEY = 'nomicore.adminToken';

  // Every admin route the page uses, as README.md's route table names it (a test checks that
  // each is there). api(name, id) gives the path, {id} replaced.
  const ROUTES = {
    session: 'GET /ui/session.json',
    status: 'GET /v1/status',
    stream: 'GET /v1/status/stream',
    roots: 'GET /v1/namespaces/{id}/roots',
    doc: 'GET /v1/namespaces/{id}/doc',
    create: 'POST /v1/namespaces',
    epoch: 'POST /v1/namespaces/{id}/epoch',
    schema: 'PUT /v1/namespaces/{id}/schema',
    deleteNs: 'DELETE /v1/namespaces/{id}',
    reset: 'POST /v1/namespaces/{id}/reset',
    addTarget: 'POST /v1/targets',
    removeTarget: 'DELETE /v1/targets/{id}',
  };
  const DOC_MAX_BYTES = 256 * 1024; // the largest document JSON the page shows
  const HISTORY = 60;               // samples kept per sparkline
  const PAGE = 25;                  // namespaces per page of the overview's table

  const app = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    tokenRequired: false,
    status: null,      // the last GET /v1/status answer
    detail: null,      // the last namespace status (namespace page)
    skew: 0,           // server clock minus this browser's, ms
    route: { page: 'overview' },
    stream: null,      // AbortController of the running stream
    lastSeq: 0,        // the last event seq shown, to resume
    events: [],        // newest last
    series: {},        // name -> Series
    nsSeries: new Map(),
    nsQuery: { match: '', offset: 0 }, // the overview's namespace table: its search and page
    nsSearchTimer: null,
    doc: { roots: null, chosen: null, writes: -1, loading: false, lastLoad: 0, pending: null },
  };

  // ---------- small helpers ----------

  function $(id) { return document.getElementById(id); }

  // h builds an element: h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child…).
  function h(tag, attrs) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
        else if (k === 'class') el.className = v;
        else if (k === 'text') el.textContent = v;
        else el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (let i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function append(el, c) {
    if (c === undefined || c === null || c === false) return;
    if (Array.isArray(c)) { c.forEach((x) => append(el, x)); return; }
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }

  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }

  function fmtBytes(n) {
    if (n === undefined || n === null) return '—';
    if (n < 1024) return n + ' B';
    const units = ['KiB', 'MiB', 'GiB', 'TiB'];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (v < 10 ? v.toFixed(1) : Math.round(v)) + ' ' + units[i];
  }

  function fmtNum(v) {
    if (v === undefined || v === null || Number.isNaN(v)) return '—';
    if (v === 0) return '0';
    if (v < 10) return v.toFixed(1);
    return String(Math.round(v));
  }

  function fmtDuration(s) {
    if (s === undefined || s === null) return '—';
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + (s % 60) + ' s';
    const hr = Math.floor(m / 60);
    if (hr < 48) return hr + ' h ' + (m % 60) + ' min';
    return Math.floor(hr / 24) + ' d ' + (hr % 24) + ' h';
  }

  function serverNow() { return Date.now() + app.skew; }

  function fmtAgo(iso) {
    if (!iso) return '—';
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return '—';
    return fmtDuration((serverNow() - t) / 1000) + ' ago';
  }

  function fmtTime(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], { hour12: false });
  }

  function shortNs(id) { return id && id.length > 14 ? id.slice(0, 11) + '…' + id.slice(-4) : id; }

  // ---------- states: a word and a symbol, colour only adds ----------

  const GOOD = ['live', 'ready', 'healthy', 'active'];
  const BUSY = ['opening', 'bootstrapping', 'reconciling', 'needs-resync', 'connecting', 'handshaking',
    'backoff', 'draining', 'targeted', 'disconnected', 'closing', 'upgraded', 'starting'];
  const BAD = ['conflicted', 'failed', 'blocked', 'degraded', 'not ready'];

  function stateClass(s) {
    if (GOOD.includes(s)) return 'good';
    if (BUSY.includes(s)) return 'busy';
    if (BAD.includes(s)) return 'bad';
    return 'idle';
  }

  function stateEl(s) { return h('span', { class: 'state ' + stateClass(s), 'data-state': s }, s); }

  // ---------- rates and sparklines ----------

  // Series turns readings of a counter into per-second rates (a reading lower than the last
  // one is a restart: that interval is skipped).
  class Series {
    constructor() { this.last = null; this.rates = []; }
    push(t, v) {
      if (v === undefined || v === null) return;
      if (this.last && t > this.last.t && v >= this.last.v) {
        this.rates.push((v - this.last.v) / ((t - this.last.t) / 1000));
        if (this.rates.length > HISTORY) this.rates.shift();
      }
      this.last = { t, v };
    }
    current() { return this.rates.length ? this.rates[this.rates.length - 1] : undefined; }
  }

  function series(name) {
    if (!app.series[name]) app.series[name] = new Series();
    return app.series[name];
  }

  function sparkSvg(rates, small, label) {
    const ns = 'http://www.w3.org/2000/svg';
    const w = small ? 60 : 120, hgt = small ? 16 : 28;
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + hgt);
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', label);
    if (small) svg.setAttribute('class', 'small');
    const max = Math.max(1e-9, ...rates);
    const step = w / (HISTORY - 1);
    const off = HISTORY - rates.length;
    const pts = rates.map((r, i) => ((off + i) * step).toFixed(1) + ',' + (hgt - 1 - (r / max) * (hgt - 2)).toFixed(1));
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', pts.join(' '));
    svg.appendChild(line);
    return svg;
  }

  function sparkBlock(title, s, unit, fmt) {
    const cur = s.current();
    const text = cur === undefined ? '—' : fmt(cur) + unit;
    return h('div', { class: 'spark' }, h('span', null, title),
      sparkSvg(s.rates, false, title + ' over the last minute; now ' + text), h('span', { class: 'value' }, text));
  }

  // ---------- the admin API ----------

  function headers(json) {
    const hd = {};
    if (app.token) hd.Authorization = 'Bearer ' + app.token;
    if (json) hd['Content-Type'] = 'application/json';
    return hd;
  }

  // route returns the method and path of a named route, {id} replaced and query appended.
  function route(name, id, query) {
    const [method, path] = ROUTES[name].split(' ');
    return [method, path.replace('{id}', encodeURIComponent(id || '')) + (query ? '?' + query : '')];
  }

  // call sends a request to a named route and resolves to {ok, status, data, message}; 401
  // opens the token form.
  function call(name, id, query, body) {
    const [method, path] = route(name, id, query);
    return request(method, path, body);
  }

  async function request(method, path, body) {
    let res;
    try {
      res = await fetch(path, { method, headers: headers(body !== undefined), cache: 'no-store',
        body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      return { ok: false, status: 0, message: 'the admin API did not answer (' + e.message + ')' };
    }
    let data = null;
    const text = await res.text();
    if (text) { try { data = JSON.parse(text); } catch (e) { data = text; } }
    if (res.status === 401) showAuth('The admin API refused the token; give it again.');
    const message = data && data.message ? data.message + (data.code ? ' (' + data.code + ')' : '') : res.statusText;
    return { ok: res.ok, status: res.status, data, message };
  }

  // ---------- the live stream ----------

  function setLive(text) { $('live').textContent = text; }

  function streamPath() {
    let q = 'interval=1000';
    if (app.route.page === 'namespace') q += '&namespace=' + encodeURIComponent(app.route.id);
    else {
      // One page of the namespaces, searched on the server: a hub may have thousands.
      q += '&namespaces=' + PAGE + '&offset=' + app.nsQuery.offset;
      if (app.nsQuery.match) q += '&match=' + encodeURIComponent(app.nsQuery.match);
    }
    if (app.lastSeq > 0) q += '&after=' + app.lastSeq;
    return route('stream', '', q)[1];
  }

  function stopStream() {
    if (app.stream) { app.stream.abort(); app.stream = null; }
  }

  // startStream reads GET /v1/status/stream with fetch (EventSource cannot send the token
  // header), and reconnects with a growing delay when it ends.
  function startStream() {
    stopStream();
    const ctl = new AbortController();
    app.stream = ctl;
    let delay = 1000;
    const run = async () => {
      while (!ctl.signal.aborted) {
        let res;
        try {
          res = await fetch(streamPath(), { headers: headers(false), signal: ctl.signal, cache: 'no-store' });
        } catch (e) {
          if (ctl.signal.aborted) return;
          res = null;
        }
        if (res && res.status === 401) { showAuth('The admin API refused the token; give it again.'); return; }
        if (res && res.ok && res.body) {
          delay = 1000;
          const ended = await readEvents(res.body, ctl.signal);
          if (ctl.signal.aborted) return;
          if (ended === 'closed') { setLive('Stopped: the process is shutting down. Reload when it is back.'); return; }
        } else if (res) {
          const body = await res.text().catch(() => '');
          let msg = res.statusText;
          try { msg = JSON.parse(body).message || msg; } catch (e) { /* not JSON */ }
          if (res.status === 404 && app.route.page === 'namespace') { showMissing(msg); return; }
          setLive('The status stream was refused: ' + msg);
        }
        if (ctl.signal.aborted) return;
        setLive('Disconnected; trying again in ' + Math.round(delay / 1000) + ' s');
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 15000);
      }
    };
    run().catch(() => { if (!ctl.signal.aborted) setLive('Disconnected.'); });
  }

  // readEvents parses Server-Sent Events from a body; it resolves to 'closed' when the
  // process said it shuts down, else when the body ends.
  async function readEvents(body, signal) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return 'ended';
        buf += dec.decode(value, { stream: true });
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let name = 'message', data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) name = line.slice(7);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          if (name === 'closed') return 'closed';
          if (data) {
            // A bug in rendering must not end the stream, nor go unnoticed: it is reported
            // as an uncaught error (the console shows it) and the stream goes on.
            try { handleEvent(name, data); } catch (e) { setTimeout(() => { throw e; }); }
          }
        }
      }
    } catch (e) {
      if (!signal.aborted) return 'ended';
      return 'aborted';
    } finally {
      try { reader.releaseLock(); } catch (e) { /* already released */ }
    }
  }

  function handleEvent(name, data) {
    let v;
    try { v = JSON.parse(data); } catch (e) { return; }
    switch (name) {
      case 'status': onStatus(v); break;
      case 'namespace': onNamespace(v); break;
      case 'event': onEvent(v); break;
      case 'missed': addNote(v.missed + ' events were missed (the page fell behind)'); break;
      case 'error': setLive('The admin API reported: ' + v.message); break;
    }
  }

  // ---------- routing ----------

  function parseRoute() {
    const m = /^#\/ns\/(ns-[0-9a-f]{32})$/.exec(location.hash);
    return m ? { page: 'namespace', id: m[1] } : { page: 'overview' };
  }

  function go() {
    app.route = parseRoute();
    app.events = [];
    app.lastSeq = 0;
    app.detail = null;
    app.doc = { roots: null, chosen: null, writes: -1, loading: false, lastLoad: 0, pending: null };
    buildView();
    if (app.status) render(app.status);
    startStream();
    $('main').focus({ preventScroll: true });
  }

  // ---------- auth ----------

  function showAuth(message) {
    stopStream();
    $('auth').hidden = false;
    $('view').hidden = true;
    $('forget').hidden = true;
    $('auth-error').textContent = message || '';
    setLive('Waiting for the admin token');
    $('token').focus();
  }

  async function submitToken(ev) {
    ev.preventDefault();
    const tok = $('token').value.trim();
    if (!tok) return;
    app.token = tok;
    const r = await call('status', '', 'namespaces=1');
    if (r.status === 401) { app.token = ''; $('auth-error').textContent = 'That token was refused.'; return; }
    sessionStorage.setItem(TOKEN_KEY, tok);
    $('token').value = '';
    $('auth').hidden = true;
    $('view').hidden = false;
    $('forget').hidden = false;
    go();
  }

  function forgetToken() {
    sessionStorage.removeItem(TOKEN_KEY);
    app.token = '';
    showAuth('');
  }

  // ---------- tables that keep focus: rows keyed, cells replaced only when they change ----------

  // syncRows makes tbody show items: one row per key, cells[i](item) giving cell i (a string
  // or a node); a cell whose content did not change is left alone, so focus stays put.
  function syncRows(tbody, items, keyOf, columns, emptyText) {
    const rows = new Map();
    for (const r of Array.from(tbody.rows)) {
      if (r.dataset.key) rows.set(r.dataset.key, r); else tbody.removeChild(r);
    }
    let prev = null;
    for (const item of items) {
      const key = keyOf(item);
      let row = rows.get(key);
      if (row) rows.delete(key);
      else {
        row = h('tr', { 'data-key': key });
        columns.forEach((c) => row.appendChild(h('td', { 'data-label': c.label, class: c.num ? 'num' : null })));
      }
      columns.forEach((c, i) => setCell(row.cells[i], c.cell(item)));
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== row) tbody.insertBefore(row, want);
      prev = row;
    }
    for (const r of rows.values()) tbody.removeChild(r);
    if (!items.length) {
      tbody.appendChild(h('tr', { class: 'empty' }, h('td', { colspan: columns.length }, emptyText)));
    }
  }

  function setCell(td, v) {
    const node = v instanceof Node ? v : document.createTextNode(v === undefined || v === null ? '—' : String(v));
    const sig = node.nodeType === 1 ? node.outerHTML : 't:' + node.textContent;
    if (td.dataset.sig === sig) return;
    td.dataset.sig = sig;
    clear(td);
    td.appendChild(node);
  }

  function table(id, columns, caption) {
    return h('div', { class: 'table-wrap' },
      h('table', { id, class: 'stack' },
        caption ? h('caption', { class: 'note', style: null }, caption) : null,
        h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.label)))),
        h('tbody')));
  }

  // ---------- views ----------

  function buildView() {
    const view = $('view');
    clear(view);
    if (app.route.page === 'namespace') buildNamespace(view);
    else buildOverview(view);
  }

  function section(title, id, ...body) {
    return h('section', { class: 'card', 'aria-labelledby': id + '-title', id },
      h('h2', { id: id + '-title' }, title), ...body);
  }

  const hubConnColumns = [
    { label: 'Peer', cell: (c) => c.peerInstanceId },
    { label: 'Connection', cell: (c) => h('span', { class: 'mono' }, c.connectionId) },
    { label: 'State', cell: (c) => stateEl(c.state) },
    { label: 'Connected', cell: (c) => c.connectedSince ? fmtAgo(c.connectedSince) : '—' },
    { label: 'Live namespaces', num: true, cell: (c) => c.liveNamespaces + ' of ' + c.namespaces },
    { label: 'Queued', num: true, cell: (c) => fmtBytes(c.queuedBytes) },
    { label: 'In flight', num: true, cell: (c) => c.inFlightUpdates === undefined ? '—' : String(c.inFlightUpdates) },
    { label: 'Ping', num: true, cell: (c) => c.pingRttMs === undefined ? '—' : fmtNum(c.pingRttMs) + ' ms' },
  ];

  function nsLink(id) { return h('a', { href: '#/ns/' + id, class: 'mono', title: id }, id); }

  function writesCell(n) {
    const s = app.nsSeries.get(n.namespaceId);
    const cur = s ? s.current() : undefined;
    const text = cur === undefined ? '—' : fmtNum(cur);
    return h('span', { class: 'spark' }, sparkSvg(s ? s.rates : [], true, 'writes per second of ' + n.namespaceId + ': ' + text),
      h('span', { class: 'value' }, text));
  }

  function peersCell(n) {
    if (!n.peers) return '—';
    const live = n.peers.live || 0;
    const others = Object.entries(n.peers).filter(([s]) => s !== 'live').map(([s, k]) => k + ' ' + s);
    return h('span', null, live + ' live', others.length ? h('span', { class: 'reason' }, others.join(', ')) : null);
  }

  const hubNsColumns = [
    { label: 'Namespace', cell: (n) => nsLink(n.namespaceId) },
    { label: 'Owner', cell: (n) => n.owner },
    { label: 'State', cell: (n) => stateEl(nsHealth(n)) },
    { label: 'Epoch', num: true, cell: (n) => n.replicationEpoch ? String(n.replicationEpoch) : '—' },
    { label: 'Size', num: true, cell: (n) => fmtBytes(n.documentBytes) },
    { label: 'Writes/s', cell: writesCell },
    { label: 'Peers', cell: peersCell },
    { label: 'Last write', cell: (n) => fmtAgo(n.lastWriteAt) },
    { label: 'Editors', num: true, cell: (n) => n.editors === undefined ? '—' : String(n.editors) },
  ];

  // nsHealth sums up a hub namespace: its worst peer channel, else idle or active.
  function nsHealth(n) {
    if (n.state === 'archived') return 'archived';
    const p = n.peers || {};
    for (const s of ['failed', 'conflicted', 'needs-resync', 'bootstrapping', 'reconciling', 'opening']) if (p[s]) return s;
    if (p.live) return 'live';
    return n.loaded ? 'active' : 'idle';
  }

  // transferWords names what a chunked transfer brings, in the operator's words: the hub's
  // snapshot (a bootstrap), the difference of a catch-up, or one large live update.
  const transferWords = { 'snapshot': 'Bootstrap snapshot', 'sync-diff': 'Catch-up', 'update': 'Large update' };

  // progressEl shows a transfer being received: a bar, what it is, and the bytes so far of
  // the total (on a line of its own under the state).
  function progressEl(p) {
    if (!p || !p.totalBytes) return null;
    const pct = Math.min(100, Math.floor((p.bytesReceived / p.totalBytes) * 100));
    const what = transferWords[p.kind] || ('Transfer (' + p.kind + ')');
    return h('span', { class: 'transfer', 'data-kind': p.kind },
      h('progress', { max: p.totalBytes, value: p.bytesReceived, 'aria-label': what + ', ' + pct + ' percent' }),
      ' ', h('span', { class: 'transfer-text' }, what + ': ' + fmtBytes(p.bytesReceived) + ' of ' + fmtBytes(p.totalBytes) + ' (' + pct + '%)'));
  }

  function targetStateCell(n) {
    return h('span', null, stateEl(n.state), progressEl(n.progress),
      n.code ? h('span', { class: 'reason' }, n.code) : null,
      n.reason ? h('span', { class: 'reason' }, n.reason) : null);
  }

  function peerActions(n) {
    if (n.state === 'closed' && !n.reason) return '—'; // a local replica that is no longer a target
    return h('span', { class: 'actions' },
      h('button', { type: 'button', 'data-action': 'reset', 'data-ns': n.namespaceId, onclick: onResetClick }, 'Reset…'),
      h('button', { type: 'button', 'data-action': 'remove', 'data-ns': n.namespaceId, onclick: onRemoveClick }, 'Remove…'));
  }

  const peerNsColumns = [
    { label: 'Namespace', cell: (n) => nsLink(n.namespaceId) },
    { label: 'Owner', cell: (n) => n.owner },
    { label: 'State', cell: targetStateCell },
    { label: 'Epoch', num: true, cell: (n) => n.replicationEpoch ? String(n.replicationEpoch) : '—' },
    { label: 'Size', num: true, cell: (n) => fmtBytes(n.documentBytes) },
    { label: 'Writes/s', cell: writesCell },
    { label: 'Last write', cell: (n) => fmtAgo(n.lastWriteAt) },
    { label: 'Editors', num: true, cell: (n) => n.editors === undefined ? '—' : String(n.editors) },
    { label: 'Actions', cell: peerActions },
  ];

  function buildOverview(view) {
    view.appendChild(h('section', { class: 'card', id: 'node', 'aria-labelledby': 'node-title' },
      h('h1', { id: 'node-title' }, 'Loading…'), h('dl', { class: 'facts', id: 'node-facts' }),
      h('div', { class: 'sparks', id: 'sparks' }), h('p', { class: 'note version', id: 'node-version' })));
    view.appendChild(h('div', { id: 'side' }));
    view.appendChild(section('Recent events', 'events-card', h('ol', { class: 'events', id: 'events', 'aria-live': 'off' })));
  }

  function buildSide(st) {
    const side = $('side');
    if (!side || side.dataset.side === st.side) return;
    side.dataset.side = st.side;
    clear(side);
    if (st.side === 'hub') {
      side.appendChild(section('Peers connected', 'conns', table('connections', hubConnColumns)));
      side.appendChild(section('Namespaces', 'nss',
        h('div', { class: 'actions' }, h('button', { type: 'button', id: 'create-ns', onclick: onCreateNamespace }, 'New namespace'),
          h('span', { id: 'create-msg', class: 'note', role: 'status' })),
        nsSearch(), table('namespaces', hubNsColumns), nsPager()));
    } else {
      side.appendChild(section('Connection to the hub', 'link', h('dl', { class: 'facts', id: 'link-facts' })));
      side.appendChild(section('Replication targets', 'nss', nsSearch(), table('namespaces', peerNsColumns), nsPager(),
        h('form', { class: 'inline', id: 'add-target', onsubmit: onAddTarget },
          h('label', { for: 'add-ns' }, 'Add a target'),
          h('input', { id: 'add-ns', type: 'text', placeholder: 'ns-…', pattern: 'ns-[0-9a-f]{32}', size: 38, required: true, spellcheck: 'false' }),
          h('label', { for: 'add-owner' }, 'owner'),
          h('input', { id: 'add-owner', type: 'text', value: 'default', size: 10, required: true }),
          h('button', { type: 'submit' }, 'Add'),
          h('span', { id: 'add-msg', class: 'note', role: 'status' }))));
    }
  }

  // nsSearch is the search box above the namespace table: the server selects the namespaces
  // whose id or owner contains the text, a moment after the last key.
  function nsSearch() {
    return h('form', { class: 'inline search', role: 'search', onsubmit: (ev) => { ev.preventDefault(); searchNow(); } },
      h('label', { for: 'ns-search' }, 'Search'),
      h('input', { id: 'ns-search', type: 'search', placeholder: 'namespace id or owner', size: 30, spellcheck: 'false',
        autocomplete: 'off', value: app.nsQuery.match, oninput: () => {
          clearTimeout(app.nsSearchTimer);
          app.nsSearchTimer = setTimeout(searchNow, 250);
        } }));
  }

  function searchNow() {
    clearTimeout(app.nsSearchTimer);
    const match = $('ns-search').value.trim();
    if (match === app.nsQuery.match) return;
    app.nsQuery = { match, offset: 0 };
    startStream();
  }

  // nsPager is the line under the namespace table: which of how many it shows, and the
  // buttons to the pages before and after.
  function nsPager() {
    return h('div', { class: 'pager' },
      h('button', { type: 'button', id: 'ns-prev', onclick: () => turnPage(-PAGE) }, '← Previous'),
      h('span', { class: 'note', id: 'ns-count', role: 'status' }),
      h('button', { type: 'button', id: 'ns-next', onclick: () => turnPage(PAGE) }, 'Next →'));
  }

  function turnPage(by) {
    app.nsQuery = { match: app.nsQuery.match, offset: Math.max(0, app.nsQuery.offset + by) };
    startStream();
  }

  // renderPager says which namespaces the table shows; a page emptied meanwhile (namespaces
  // gone) moves to the last page there is.
  function renderPager(st) {
    const shown = st.namespaces.length, matched = st.namespacesMatched, total = st.namespacesTotal;
    const offset = st.namespacesOffset || 0;
    if (offset !== app.nsQuery.offset || (st.namespacesMatched === undefined)) return; // an answer to an older query
    if (shown === 0 && offset > 0 && matched > 0) {
      app.nsQuery = { match: app.nsQuery.match, offset: Math.floor((matched - 1) / PAGE) * PAGE };
      startStream();
      return;
    }
    const what = st.side === 'hub' ? 'namespaces' : 'replicas';
    let text;
    if (app.nsQuery.match) {
      text = matched === 0 ? 'None of the ' + total + ' ' + what + ' matches “' + app.nsQuery.match + '”.'
        : (offset + 1) + '–' + (offset + shown) + ' of the ' + matched + ' matching “' + app.nsQuery.match + '” (' + total + ' in all)';
    } else {
      text = total <= PAGE ? '' : (offset + 1) + '–' + (offset + shown) + ' of ' + total + ' (the loaded ones first)';
    }
    $('ns-count').textContent = text;
    $('ns-prev').disabled = offset === 0;
    $('ns-next').disabled = offset + shown >= matched;
    $('ns-prev').hidden = $('ns-next').hidden = matched <= PAGE && offset === 0; // one page: nothing to turn
  }

  // facts fills a list of [name, value, wide] (wide: the whole row, for long text).
  function facts(dl, list) {
    clear(dl);
    for (const [k, v, wide] of list) {
      if (v === undefined) continue;
      dl.appendChild(h('div', { class: wide ? 'wide' : null }, h('dt', null, k), h('dd', null, v)));
    }
  }

  function onStatus(st) {
    app.status = st;
    app.skew = Date.parse(st.now) - Date.now();
    const t = Date.parse(st.now);
    if (st.totals) {
      series('updates').push(t, st.totals.updatesSent + st.totals.updatesReceived);
      series('bytes').push(t, st.totals.bytesSent + st.totals.bytesReceived);
    }
    let writes = 0;
    for (const n of st.namespaces) {
      writes += n.writes || 0;
      if (!app.nsSeries.has(n.namespaceId)) app.nsSeries.set(n.namespaceId, new Series());
      app.nsSeries.get(n.namespaceId).push(t, n.writes);
    }
    series('writes').push(t, st.writes !== undefined ? st.writes : writes); // st.writes: every namespace, not only this page's
    const name = nodeTitle(st.side, st.instanceId);
    $('who').textContent = name;
    document.title = name + ' · Nomicore';
    setLive('Live · ' + fmtTime(st.now));
    render(st);
  }

  function render(st) {
    if (app.route.page === 'namespace') { renderNamespaceFromStatus(st); return; }
    const title = $('node-title');
    if (!title) return;
    title.textContent = nodeTitle(st.side, st.instanceId);
    facts($('node-facts'), [
      ['Ready', st.ready ? stateEl('ready') : h('span', null, stateEl('not ready'), h('span', { class: 'reason' }, st.notReadyReason || '')), !st.ready],
      ['Persistence', stateEl(st.persistence)],
      ['Up for', fmtDuration(st.uptimeSeconds)],
      ['Documents loaded', String(st.store.loadedNamespaces)],
      ['Store queue', st.store.queuedAppends + ' appends, ' + fmtBytes(st.store.queuedBytes)],
      ['Outbound', st.load ? fmtBytes(st.load.queuedBytes) + ' queued, ' + st.load.inFlightUpdates + ' in flight' : undefined],
      ['Listeners', st.listeners ? Object.entries(st.listeners).map(([k, v]) => k + ' ' + v).join(', ') : undefined],
      ['Webhooks', st.webhooks && st.webhooks.length ? webhooksEl(st.webhooks) : undefined, true],
    ]);
    $('node-version').textContent = st.version || '';
    const sparks = $('sparks');
    clear(sparks);
    sparks.appendChild(sparkBlock('Writes', series('writes'), '/s', fmtNum));
    sparks.appendChild(sparkBlock('Replicated updates', series('updates'), '/s', fmtNum));
    sparks.appendChild(sparkBlock('Replicated bytes', series('bytes'), '/s', (v) => fmtBytes(Math.round(v))));
    buildSide(st);
    if (st.side === 'hub') {
      syncRows($('connections').tBodies[0], st.connections || [], (c) => c.connectionId, hubConnColumns, 'No peer is connected.');
      syncRows($('namespaces').tBodies[0], st.namespaces, (n) => n.namespaceId, hubNsColumns,
        app.nsQuery.match ? 'No namespace matches.' : 'No namespace yet.');
    } else {
      renderLink(st.hub);
      syncRows($('namespaces').tBodies[0], st.namespaces, (n) => n.namespaceId, peerNsColumns,
        app.nsQuery.match ? 'No replica matches.' : 'No replication target yet.');
    }
    renderPager(st);
  }

  // webhooksEl lists the webhook endpoints' delivery state: where each is in the change
  // feed, what waits, and why the last attempt failed.
  function webhooksEl(list) {
    return h('ul', { class: 'webhooks' }, ...list.map((w) => h('li', null,
      h('code', null, w.url), ' ', stateEl(w.state),
      ' cursor ' + w.cursor + ', ' + w.pending + ' pending, ' + w.delivered + ' delivered, ' + w.failed + ' failed attempts',
      w.lastError ? h('span', { class: 'reason' }, w.lastError + (w.nextAttempt ? ' (next attempt ' + fmtTime(w.nextAttempt) + ')' : '')) : null)));
  }

  // nodeTitle names the process: "Hub main", "Peer laptop" — or only the instance id when it
  // says what the process is already ("peer-a", "hub-eu"), and "Hub" for a hub named hub.
  function nodeTitle(side, id) {
    const kind = side === 'hub' ? 'Hub' : 'Peer';
    if (!id || id.toLowerCase() === side) return kind;
    if (id.toLowerCase().startsWith(side)) return id;
    return kind + ' ' + id;
  }

  function renderLink(l) {
    const dl = $('link-facts');
    if (!dl || !l) return;
    let backoff;
    if (l.backoff) {
      const left = Math.max(0, (Date.parse(l.backoff.retryAt) - serverNow()) / 1000);
      backoff = 'attempt ' + l.backoff.attempt + ' (' + l.backoff.reason + '), next try in ' + fmtDuration(left);
    }
    facts(dl, [
      ['Hub', l.url ? h('span', { class: 'mono' }, l.url) : undefined],
      ['State', stateEl(l.state)],
      ['Since', l.since ? fmtAgo(l.since) : undefined],
      ['Ping', l.pingRttMs === undefined ? undefined : fmtNum(l.pingRttMs) + ' ms'],
      ['Backoff', backoff],
      ['Problem', l.problem ? h('span', { class: 'error' }, l.problem) : undefined, true],
      ['Last failure', l.lastFailure ? l.lastFailure + ', ' + fmtAgo(l.lastFailureAt) : undefined],
    ]);
  }

  // ---------- events ----------

  function eventSummary(e) {
    const parts = [];
    if (e.namespaceId) parts.push(shortNs(e.namespaceId));
    if (e.from !== undefined && e.to !== undefined) parts.push(e.from + ' → ' + e.to);
    for (const [k, v] of Object.entries(e)) {
      if (['type', 'side', 'namespaceId', 'from', 'to'].includes(k)) continue;
      parts.push(k + ' ' + (typeof v === 'object' ? JSON.stringify(v) : v));
    }
    return parts.join(' · ');
  }

  function onEvent(rec) {
    if (rec.seq <= app.lastSeq) return;
    app.lastSeq = rec.seq;
    const list = $('events');
    if (!list) return;
    const e = rec.event || {};
    list.insertBefore(h('li', { 'data-seq': rec.seq, 'data-type': e.type },
      h('time', { datetime: rec.time }, fmtTime(rec.time)), h('span', { class: 'type' }, e.type), eventSummary(e)), list.firstChild);
    while (list.children.length > 100) list.removeChild(list.lastChild);
  }

  function addNote(text) {
    const list = $('events');
    if (list) list.insertBefore(h('li', { class: 'note' }, text), list.firstChild);
  }

  // ---------- the namespace page ----------

  const sessionColumns = [
    { label: 'Peer', cell: (s) => s.peerInstanceId },
    { label: 'Connection', cell: (s) => s.connectionId ? h('span', { class: 'mono' }, s.connectionId) : '—' },
    { label: 'State', cell: (s) => stateEl(s.state) },
    { label: 'Sent', num: true, cell: (s) => s.updatesSent === undefined ? '—' : String(s.updatesSent) },
    { label: 'Acknowledged', num: true, cell: (s) => s.updatesAcked === undefined ? '—' : String(s.updatesAcked) },
    { label: 'In flight', num: true, cell: (s) => s.inFlightUpdates === undefined ? '—' : String(s.inFlightUpdates) },
    { label: 'Queued', num: true, cell: (s) => fmtBytes(s.queuedBytes) },
  ];

  // The editors of a namespace on this node: who (the signed token's or the webhook's user,
  // or the client token's name; never a token), with what, since when, until when.
  const credentialNames = { 'client-token': 'client token', jwt: 'signed token', webhook: 'webhook' };
  const editorColumns = [
    { label: 'Who', cell: (e) => e.user || e.name },
    { label: 'Credential', cell: (e) => credentialNames[e.credential] || e.credential || 'none' },
    { label: 'Access', cell: (e) => e.readOnly ? 'read-only' : 'read-write' },
    { label: 'Connected', cell: (e) => fmtAgo(e.connectedSince) },
    { label: 'Token expires', cell: (e) => e.expiresAt ? new Date(e.expiresAt).toLocaleString([], { hour12: false }) : '—' },
    { label: 'From', cell: (e) => e.remote ? h('span', { class: 'mono' }, e.remote) : '—' },
  ];

  // The editors present in the namespace across the system, as this node holds their
  // presence (awareness) states: its own editors' and those of the other nodes.
  const presenceColumns = [
    { label: 'Who', cell: (p) => p.user || (p.client ? p.client + ' (client ' + p.clientId + ')' : 'client ' + p.clientId) },
    { label: 'Node', cell: (p) => p.local ? p.node + ' (this node)' : p.node },
    { label: 'Client', cell: (p) => p.client || '—' },
    { label: 'Last change', cell: (p) => fmtAgo(p.updatedAt) },
  ];

  function buildNamespace(view) {
    const id = app.route.id;
    view.appendChild(h('p', null, h('a', { href: '#/' }, '← Overview')));
    view.appendChild(h('section', { class: 'card', id: 'ns', 'aria-labelledby': 'ns-title' },
      h('h1', { id: 'ns-title' }, 'Namespace ', h('span', { class: 'mono' }, id)),
      h('dl', { class: 'facts', id: 'ns-facts' }),
      h('div', { class: 'actions', id: 'ns-actions' }),
      h('p', { id: 'ns-msg', class: 'note', role: 'status' })));
    view.appendChild(h('div', { id: 'ns-peers' }));
    view.appendChild(h('div', { id: 'ns-editors' }));
    view.appendChild(section('Document', 'doc',
      h('p', { class: 'note' }, 'The document as JSON, for the roots you choose (at most ' + fmtBytes(DOC_MAX_BYTES) + '). It reloads when the document changes.'),
      h('fieldset', { id: 'roots', class: 'roots' }, h('legend', null, 'Roots'), h('span', { class: 'note' }, 'Loading…')),
      h('div', { class: 'actions' }, h('button', { type: 'button', id: 'doc-show', onclick: () => loadDoc(true) }, 'Show')),
      h('pre', { class: 'doc', id: 'doc-json', tabindex: '0', 'aria-label': 'the document as JSON' })));
    view.appendChild(section('Recent events of this namespace', 'events-card', h('ol', { class: 'events', id: 'events' })));
  }

  function showMissing(msg) {
    const view = $('view');
    clear(view);
    view.appendChild(h('p', null, h('a', { href: '#/' }, '← Overview')));
    view.appendChild(h('section', { class: 'card' }, h('h1', null, 'No such namespace'), h('p', null, msg)));
    setLive('');
  }

  function renderNamespaceFromStatus(st) {
    if (app.detail) renderNamespace(app.detail);
  }

  function onNamespace(d) {
    app.detail = d;
    renderNamespace(d);
    // The document changed (or was never loaded): reload its roots and JSON, at most once a second.
    const writes = d.writes === undefined ? -2 : d.writes;
    if (writes !== app.doc.writes) {
      app.doc.writes = writes;
      scheduleDocLoad();
    }
  }

  function renderNamespace(d) {
    const dl = $('ns-facts');
    if (!dl) return;
    const isHub = app.status && app.status.side === 'hub';
    const st = isHub ? nsHealthFromSessions(d) : d.state;
    facts(dl, [
      ['State', h('span', null, stateEl(st), progressEl(d.progress), d.code ? h('span', { class: 'reason' }, d.code) : null,
        d.reason ? h('span', { class: 'reason' }, d.reason) : null)],
      ['Owner', d.owner],
      ['Name', d.name || undefined],
      ['Labels', d.labels && Object.keys(d.labels).length ? Object.keys(d.labels).sort().map((k) => k + '=' + d.labels[k]).join(', ') : undefined],
      ['Replication id', d.replicationId ? h('span', { class: 'mono' }, d.replicationId) : undefined],
      ['Epoch', d.replicationEpoch ? String(d.replicationEpoch) : undefined],
      ['Schema', d.schema ? h('span', { class: 'mono' }, d.schema.semanticFingerprint) : 'none'],
      ['Size', d.documentBytes === undefined ? undefined : fmtBytes(d.documentBytes)],
      ['Writes', d.writes === undefined ? undefined : String(d.writes)],
      ['Last write', d.lastWriteAt ? fmtAgo(d.lastWriteAt) : undefined],
      ['Editors', d.editors === undefined ? undefined : String(d.editors)],
    ]);
    const actions = $('ns-actions');
    if (actions.dataset.side !== (isHub ? 'hub' : 'peer')) {
      actions.dataset.side = isHub ? 'hub' : 'peer';
      clear(actions);
      if (isHub) {
        actions.appendChild(h('button', { type: 'button', class: 'danger', id: 'bump-epoch', onclick: onBumpClick }, 'Bump the epoch…'));
        actions.appendChild(h('button', { type: 'button', class: 'danger', id: 'replace-schema', onclick: onSchemaClick }, 'Replace the schema…'));
        actions.appendChild(h('button', { type: 'button', class: 'danger', id: 'delete-ns', onclick: onDeleteClick }, 'Delete the namespace…'));
      } else {
        actions.appendChild(h('button', { type: 'button', class: 'danger', id: 'reset-ns', 'data-ns': d.namespaceId, onclick: onResetClick }, 'Reset the replica…'));
        actions.appendChild(h('button', { type: 'button', id: 'remove-ns', 'data-ns': d.namespaceId, onclick: onRemoveClick }, 'Remove the target…'));
      }
    }
    const archived = d.state === 'archived';
    for (const b of actions.querySelectorAll('button')) b.disabled = archived || (!isHub && d.state === 'closed' && !d.reason);
    const peers = $('ns-peers');
    if (isHub) {
      if (!peers.firstChild) peers.appendChild(section('Peers replicating it', 'sessions-card', table('sessions', sessionColumns)));
      syncRows($('sessions').tBodies[0], d.sessions || [], (s) => s.peerInstanceId + ' ' + (s.connectionId || ''), sessionColumns,
        'No peer replicates it now.');
    }
    const editors = $('ns-editors');
    if (editors && d.editors !== undefined) {
      if (!editors.firstChild) editors.appendChild(section('Editors on this node', 'editors-card', table('editor-list', editorColumns)));
      syncRows($('editor-list').tBodies[0], d.editorList || [], (e) => (e.user || e.name) + ' ' + e.remote + ' ' + e.connectedSince, editorColumns,
        'No editor has it open on this node.');
      if (!$('presence-list')) editors.appendChild(section('Editors present across the system', 'presence-card', table('presence-list', presenceColumns)));
      syncRows($('presence-list').tBodies[0], d.presence || [], (p) => p.node + ' ' + p.clientId, presenceColumns,
        'No editor shows its presence here.');
    }
  }

  function nsHealthFromSessions(d) {
    if (d.state === 'archived') return 'archived';
    const states = (d.sessions || []).map((s) => s.state);
    for (const s of ['failed', 'conflicted', 'needs-resync', 'bootstrapping', 'reconciling', 'opening']) if (states.includes(s)) return s;
    return states.includes('live') ? 'live' : 'active';
  }

  function scheduleDocLoad() {
    if (app.doc.pending) return;
    const wait = Math.max(0, 1000 - (Date.now() - app.doc.lastLoad));
    app.doc.pending = setTimeout(() => { app.doc.pending = null; loadRoots().then(() => loadDoc(false)); }, wait);
  }

  async function loadRoots() {
    const id = app.route.id;
    const r = await call('roots', id);
    const box = $('roots');
    if (!box || app.route.id !== id) return;
    if (!r.ok) {
      clear(box);
      box.appendChild(h('legend', null, 'Roots'));
      box.appendChild(h('span', { class: 'note' }, r.status === 503 ? 'Not bootstrapped yet.' : 'Unavailable: ' + r.message));
      app.doc.roots = [];
      return;
    }
    const roots = r.data || [];
    const first = app.doc.chosen === null;
    if (first) {
      // At first, every root but meta (the replication identity and schema), within the limit.
      app.doc.chosen = new Set();
      let sum = 0;
      for (const root of roots) {
        if (root.name === 'meta' && roots.length > 1) continue;
        if (sum + root.jsonBytes > DOC_MAX_BYTES) continue;
        sum += root.jsonBytes;
        app.doc.chosen.add(root.name);
      }
    }
    const sig = JSON.stringify(roots.map((x) => [x.name, x.type]));
    if (box.dataset.sig !== sig) {
      box.dataset.sig = sig;
      clear(box);
      box.appendChild(h('legend', null, 'Roots'));
      if (!roots.length) box.appendChild(h('span', { class: 'note' }, 'The document is empty.'));
      for (const root of roots) {
        const cb = h('input', { type: 'checkbox', name: 'root', value: root.name, 'data-type': root.type,
          onchange: (ev) => { if (ev.target.checked) app.doc.chosen.add(root.name); else app.doc.chosen.delete(root.name); } });
        cb.checked = app.doc.chosen.has(root.name);
        box.appendChild(h('label', { class: 'check' }, cb, h('span', { 'data-root': root.name },
          root.name + ' (' + root.type + ', ' + fmtBytes(root.jsonBytes) + ')')));
      }
    } else {
      for (const root of roots) {
        const label = box.querySelector('[data-root="' + CSS.escape(root.name) + '"]');
        if (label) label.textContent = root.name + ' (' + root.type + ', ' + fmtBytes(root.jsonBytes) + ')';
      }
    }
    app.doc.roots = roots;
  }

  async function loadDoc(byHand) {
    const id = app.route.id;
    const out = $('doc-json');
    if (!out || app.doc.loading) return;
    app.doc.lastLoad = Date.now();
    const roots = (app.doc.roots || []).filter((r) => app.doc.chosen && app.doc.chosen.has(r.name));
    if (!roots.length) {
      out.textContent = app.doc.roots && app.doc.roots.length ? 'Choose one or more roots.' : '';
      return;
    }
    app.doc.loading = true;
    const q = roots.map((r) => 'root=' + encodeURIComponent(r.name + ':' + r.type)).join('&');
    const r = await call('doc', id, q + '&maxBytes=' + DOC_MAX_BYTES);
    app.doc.loading = false;
    if (app.route.id !== id) return;
    if (r.ok) out.textContent = JSON.stringify(r.data, null, 2);
    else out.textContent = 'Cannot show it: ' + r.message;
    if (byHand) out.focus();
  }

  // ---------- confirmations ----------

  // confirmAction opens the dialog: what it does, its consequence, a box to tick, and the
  // button that does it; run() returns an error message or '' when done. ready(), when
  // given, is a further condition on what the extra fields hold (checked as they change).
  function confirmAction({ title, text, ack, ok, extra, ready, run }) {
    const dlg = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ack-text').textContent = ack;
    $('confirm-error').textContent = '';
    const extraBox = $('confirm-extra');
    clear(extraBox);
    if (extra) extraBox.appendChild(extra);
    const okBtn = $('confirm-ok');
    const ackBox = $('confirm-ack');
    okBtn.textContent = ok;
    ackBox.checked = false;
    okBtn.disabled = true;
    const allowed = () => ackBox.checked && (!ready || ready());
    const update = () => { okBtn.disabled = !allowed(); };
    ackBox.onchange = update;
    extraBox.oninput = update;
    $('confirm-cancel').onclick = () => dlg.close('cancel');
    $('confirm-form').onsubmit = async (ev) => {
      ev.preventDefault();
      if (!allowed()) return;
      okBtn.disabled = true;
      const err = await run();
      if (err) { $('confirm-error').textContent = err; update(); return; }
      dlg.close('ok');
    };
    dlg.showModal();
    $('confirm-cancel').focus();
  }

  function nsMsg(text) { const m = $('ns-msg'); if (m) m.textContent = text; }

  function onBumpClick() {
    const d = app.detail;
    if (!d || !d.replicationEpoch) return;
    const epoch = d.replicationEpoch;
    confirmAction({
      title: 'Bump the epoch of ' + d.namespaceId + '?',
      text: 'Every peer replicating this namespace goes conflicted: its replica stops replicating until it is reset ' +
        '(POST /v1/namespaces/' + d.namespaceId + '/reset on that peer, or its dashboard). Writes a peer made that never ' +
        'reached the hub stay only in that peer\'s archive. The epoch goes from ' + epoch + ' to ' + (epoch + 1) + '.',
      ack: 'I understand that every peer of this namespace goes conflicted until it is reset.',
      ok: 'Bump the epoch to ' + (epoch + 1),
      run: async () => {
        const r = await call('epoch', d.namespaceId, '', { expectedEpoch: epoch });
        if (!r.ok) return r.message;
        nsMsg('The epoch is now ' + r.data.replicationEpoch + '.');
        return '';
      },
    });
  }

  async function onSchemaClick() {
    const d = app.detail;
    if (!d) return;
    const current = d.schema ? d.schema.semanticFingerprint : '';
    let definition = '{\n  \n}';
    const meta = await call('doc', d.namespaceId, 'root=meta:map&maxBytes=' + DOC_MAX_BYTES);
    if (meta.ok && meta.data && meta.data.meta && meta.data.meta.schema && meta.data.meta.schema.definition) {
      definition = JSON.stringify(meta.data.meta.schema.definition, null, 2);
    }
    const area = h('textarea', { id: 'schema-definition', 'aria-label': 'the new schema definition (a JSON object)', spellcheck: 'false' });
    area.value = definition;
    confirmAction({
      title: 'Replace the schema of ' + d.namespaceId + '?',
      text: 'Every peer re-arms the new schema as this namespace\'s active schema. A peer on which it does not install ' +
        'closes the namespace until its replica is reset. ' + (current ? 'It replaces the schema ' + current + '.' : 'The namespace has no schema now.'),
      extra: h('div', null, h('label', { for: 'schema-definition' }, 'Definition (JSON object)'), area),
      ack: 'I understand that every peer re-arms this schema, and that a peer on which it does not install stops replicating the namespace until it is reset.',
      ok: 'Replace the schema',
      run: async () => {
        let def;
        try { def = JSON.parse(area.value); } catch (e) { return 'The definition is not JSON: ' + e.message; }
        if (!def || typeof def !== 'object' || Array.isArray(def)) return 'The definition must be a JSON object.';
        const r = await call('schema', d.namespaceId, '', { definition: def, expectedFingerprint: current });
        if (!r.ok) return r.message;
        nsMsg('The schema is now ' + (r.data && r.data.semanticFingerprint) + '.');
        return '';
      },
    });
  }

  // onDeleteClick asks for a delete: the consequence, a box to tick, and the namespace's id
  // (or its name) typed in full; the request names the epoch shown, so that a delete is of
  // the namespace the operator looked at.
  function onDeleteClick() {
    const d = app.detail;
    if (!d || !d.replicationEpoch) return;
    const id = d.namespaceId, name = d.name || '', epoch = d.replicationEpoch;
    const typed = h('input', { id: 'delete-confirm', type: 'text', size: 40, spellcheck: 'false', autocomplete: 'off' });
    const matches = () => { const v = typed.value.trim(); return v === id || (name !== '' && v === name); };
    confirmAction({
      title: 'Delete ' + (name ? name + ' (' + id + ')' : id) + '?',
      text: 'The namespace is removed from the hub, from the cluster if the hub is one, and from every peer that replicates it ' +
        '(a peer that is offline learns it when it reconnects). Its editors are disconnected, every later request for it ' +
        'answers 404, and its id is never used again. A peer keeps, in an archive, what it held that the hub never had. ' +
        'This cannot be undone.',
      extra: h('div', null, h('label', { for: 'delete-confirm' }, 'Type ' + (name ? 'its name or its id' : 'its id') + ' to confirm: ',
        h('span', { class: 'mono' }, name || id)), typed),
      ack: 'I understand that this namespace and its document are deleted everywhere, for good.',
      ok: 'Delete the namespace',
      ready: matches,
      run: async () => {
        const r = await call('deleteNs', id, 'expectedEpoch=' + epoch);
        if (!r.ok) return r.message;
        showDeleted(id, name);
        return '';
      },
    });
  }

  // showDeleted replaces the namespace page once the namespace is deleted.
  function showDeleted(id, name) {
    stopStream();
    app.detail = null;
    const view = $('view');
    clear(view);
    view.appendChild(h('p', null, h('a', { href: '#/' }, '← Overview')));
    view.appendChild(h('section', { class: 'card', id: 'ns-deleted' }, h('h1', null, 'Namespace deleted'),
      h('p', { role: 'status' }, 'The namespace ' + (name ? name + ' (' + id + ')' : id) + ' was deleted. Its peers delete their replicas ' +
        'as they learn it; its id is never used again.')));
    setLive('');
  }

  function onResetClick(ev) {
    const id = ev.currentTarget.dataset.ns;
    confirmAction({
      title: 'Reset the replica of ' + id + '?',
      text: 'This peer archives its local replica (it stays readable with nmcr store ls on the stopped peer) and bootstraps ' +
        'the namespace again from the hub. Writes made here that never reached the hub remain only in that archive.',
      ack: 'I understand that this replica is replaced by the hub\'s copy.',
      ok: 'Reset the replica',
      run: async () => {
        const r = await call('reset', id);
        if (!r.ok) return r.message;
        nsMsg('The replica was reset; it bootstraps again.');
        return '';
      },
    });
  }

  function onRemoveClick(ev) {
    const id = ev.currentTarget.dataset.ns;
    confirmAction({
      title: 'Stop replicating ' + id + '?',
      text: 'This peer removes the target: it stops replicating the namespace. Its local replica stays, readable, but ' +
        'receives no more updates; adding the target again resumes from it.',
      ack: 'I understand that this peer stops replicating this namespace.',
      ok: 'Remove the target',
      run: async () => {
        const r = await call('removeTarget', id);
        if (!r.ok) return r.message;
        nsMsg('The target was removed.');
        return '';
      },
    });
  }

  async function onCreateNamespace() {
    const msg = $('create-msg');
    const r = await call('create', '', '', { owner: 'default' });
    clear(msg);
    if (!r.ok) { msg.textContent = 'Not created: ' + r.message; return; }
    msg.appendChild(document.createTextNode('Created '));
    msg.appendChild(nsLink(r.data.namespaceId));
  }

  async function onAddTarget(ev) {
    ev.preventDefault();
    const msg = $('add-msg');
    const id = $('add-ns').value.trim();
    const owner = $('add-owner').value.trim() || 'default';
    const r = await call('addTarget', '', '', { namespaceId: id, owner });
    msg.textContent = r.ok ? 'Added ' + id + '.' : 'Not added: ' + r.message;
    if (r.ok) $('add-ns').value = '';
  }

  // ---------- start ----------

  async function start() {
    $('auth-form').addEventListener('submit', (ev) => { submitToken(ev).catch(() => {}); });
    $('forget').addEventListener('click', forgetToken);
    $('confirm').addEventListener('close', () => { $('confirm-form').onsubmit = null; });
    window.addEventListener('hashchange', go);
    const s = await call('session');
    app.tokenRequired = !!(s.ok && s.data && s.data.tokenRequired);
    if (app.tokenRequired && !app.token) { showAuth(''); return; }
    $('forget').hidden = !app.tokenRequired;
    go();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
