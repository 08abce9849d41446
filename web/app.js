// grid dashboard: one ES module, no framework, no build step.
//
// It talks to the broker's REST API under /api/v1 with the token the user
// logged in with (kept in sessionStorage, so it goes when the tab closes),
// and renders its views behind a hash router: #/jobs, #/jobs/ID, #/nodes,
// #/run, #/keys, #/audit, #/notify and #/login. Everything that came from
// the broker reaches the DOM as text (textContent, attribute values): never
// as markup.

const API = '/api/v1';
const TOKEN_KEY = 'grid.token';
const FINAL = new Set(['completed', 'partial_failure', 'failed', 'cancelled']);
const IN_FLIGHT = new Set(['dispatched', 'acknowledged', 'running']);  // a cell's attempt runs
const FINAL_CELL = new Set(['success', 'failed', 'timeout', 'lost', 'cancelled', 'interrupted',
                            'offline', 'unsupported', 'skipped']);
const JOB_STATUSES = ['pending', 'running', 'completed', 'partial_failure',
    'failed', 'cancelled'];
const VIRTUAL_ROWS = 150;     // from this many node rows on, a job's grid draws only those in view
const VIRTUAL_OVERSCAN = 10;  // ... and this many either side
const ROLE_RANK = { viewer: 0, operator: 1, admin: 2 };
// A job id no broker makes (its clock part is zero): see whoami().
const ROLE_PROBE_JOB = 'j-000000000000-0000';

const session = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    role: null,        // 'viewer' | 'operator' | 'admin' | null (unknown)
    name: null,        // the token's name, when the broker says it
    open: false,       // the broker asked for no token at all
    via: null,         // how the broker knows the caller: 'token', 'key', 'insecure'
    checked: false,    // whoami (or status) answered for this token
};

// ------------------------------------------------------------------
// DOM helpers: h() builds elements from text only.

function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
        for (const [k, v] of Object.entries(attrs)) {
            if (v === null || v === undefined || v === false)
                continue;
            if (k === 'class')
                el.className = v;
            else if (k === 'text')
                el.textContent = v;
            else if (k.startsWith('on') && typeof v === 'function')
                el.addEventListener(k.slice(2), v);
            else if (k === 'dataset')
                Object.assign(el.dataset, v);
            else if (v === true)
                el.setAttribute(k, '');
            else
                el.setAttribute(k, String(v));
        }
    }
    append(el, children);
    return el;
}

function append(el, children) {
    for (const c of children.flat(Infinity)) {
        if (c === null || c === undefined || c === false)
            continue;
        el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
}

function clear(el) {
    while (el.firstChild)
        el.removeChild(el.firstChild);
    return el;
}

function badge(status, extra) {
    return h('span', { class: 'badge st-' + cssName(status) + (extra ? ' ' + extra : ''),
                       text: String(status).replace(/_/g, ' ') });
}

// A job event's badge: "finished" in the colour of the status it ended
// with (its detail starts with it), so a failed job's end is not green.
function eventBadge(e) {
    if (e.event !== 'finished' || typeof e.detail !== 'string')
        return badge(e.event);
    const status = e.detail.split(':')[0].trim();
    const el = badge(FINAL.has(status) ? status : e.event);
    el.textContent = 'finished';
    return el;
}

function cssName(s) {
    return String(s || '').replace(/[^a-z0-9_-]/gi, '');
}

function fmtTime(iso) {
    if (!iso)
        return '';
    const d = new Date(iso);
    if (isNaN(d))
        return String(iso);
    return d.toLocaleString(undefined, { hour12: false });
}

function fmtClock(iso) {
    const d = new Date(iso);
    if (isNaN(d))
        return String(iso || '');
    const p = (n, w = 2) => String(n).padStart(w, '0');
    return p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds())
        + '.' + p(d.getMilliseconds(), 3);
}

function fmtAgo(iso) {
    if (!iso)
        return '';
    const ms = Date.now() - new Date(iso).getTime();
    if (isNaN(ms))
        return String(iso);
    const s = Math.round(ms / 1000);
    if (s < 2)
        return 'just now';
    if (s < 90)
        return s + ' s ago';
    if (s < 5400)
        return Math.round(s / 60) + ' min ago';
    if (s < 129600)
        return Math.round(s / 3600) + ' h ago';
    return Math.round(s / 86400) + ' d ago';
}

function timeEl(iso, ago) {
    return h('time', { datetime: iso || null, title: fmtTime(iso),
                       text: ago ? fmtAgo(iso) : fmtTime(iso) });
}

function fmtDuration(ms) {
    if (ms === undefined || ms === null || isNaN(ms))
        return '';
    if (ms < 1000)
        return ms + ' ms';
    if (ms < 60000)
        return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
    const m = Math.floor(ms / 60000);
    const s = Math.round((ms % 60000) / 1000);
    if (m < 60)
        return m + ' min ' + s + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}

function fmtBytes(n) {
    if (n < 1024)
        return n + ' B';
    if (n < 1048576)
        return (n / 1024).toFixed(1) + ' KiB';
    return (n / 1048576).toFixed(1) + ' MiB';
}

// ------------------------------------------------------------------
// Flash messages: one line at the top, for errors and confirmations.

let flashTimer = null;

function flash(text, kind = 'error', details = []) {
    const el = document.getElementById('flash');
    clear(el);
    el.className = 'flash ' + kind;
    el.append(h('span', { text }));
    if (details && details.length)
        el.append(h('ul', null, details.map((d) => h('li', { text: d }))));
    el.append(h('button', { type: 'button', class: 'link close', 'aria-label': 'Dismiss',
                            text: '\u00d7', onclick: () => { el.hidden = true; } }));
    el.hidden = false;
    clearTimeout(flashTimer);
    if (kind !== 'error')
        flashTimer = setTimeout(() => { el.hidden = true; }, 5000);
}

function flashError(err) {
    if (err && err.status === 401)
        return;   // already on its way to the login page
    flash(errorText(err), 'error', (err && err.details) || []);
}

function errorText(err) {
    if (!err)
        return 'Something went wrong.';
    if (err.status === 403) {
        const role = session.role ? ' (your role: ' + session.role + ')' : '';
        return 'Forbidden' + role + ': ' + (err.message || 'your token may not do this.');
    }
    if (err.code && err.message)
        return err.message + ' [' + err.code + ']';
    return err.message || String(err);
}

// ------------------------------------------------------------------
// The API: fetch with the token; JSON in and out; errors as ApiError.

class ApiError extends Error {
    constructor(status, body, fallback) {
        const b = body && typeof body === 'object' ? body : {};
        super(typeof b.message === 'string' ? b.message : fallback);
        this.status = status;
        this.code = typeof b.code === 'string' ? b.code : 'http_' + status;
        this.details = Array.isArray(b.details) ? b.details.map(String) : [];
    }
}

function authHeaders(extra) {
    // The audit trail tells the dashboard's requests from other HTTP ones
    const headers = Object.assign({ 'X-Grid-Face': 'dashboard' }, extra);
    if (session.token)
        headers.Authorization = 'Bearer ' + session.token;
    return headers;
}

async function api(method, path, body, opts = {}) {
    const init = { method, cache: 'no-store', credentials: 'omit',
                   headers: authHeaders({ Accept: 'application/json' }) };
    if (body !== undefined) {
        init.headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
    }
    if (opts.signal)
        init.signal = opts.signal;
    let res;
    try {
        res = await fetch(API + path, init);
    } catch (e) {
        if (e.name === 'AbortError')
            throw e;
        throw new ApiError(0, { code: 'unreachable',
                                message: 'The broker cannot be reached (' + e.message + ').' });
    }
    const text = await res.text();
    let data = null;
    if (text) {
        try {
            data = JSON.parse(text);
        } catch (e) {
            data = null;
        }
    }
    if (res.status === 401 && !opts.noRedirect)
        loggedOut('The broker refused the token: log in again.');
    if (!res.ok)
        throw new ApiError(res.status, data, res.status + ' ' + (res.statusText || 'error'));
    return data;
}

function q(params) {
    const parts = [];
    for (const [k, v] of Object.entries(params)) {
        if (v !== undefined && v !== null && v !== '')
            parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
    }
    return parts.length ? '?' + parts.join('&') : '';
}

const enc = encodeURIComponent;

// Server-Sent Events over fetch (EventSource cannot send the token).
// Calls onEvent(name, data) for each event; resolves when the stream ends.
async function sse(path, onEvent, signal) {
    const res = await fetch(API + path, {
        cache: 'no-store', credentials: 'omit', signal,
        headers: authHeaders({ Accept: 'text/event-stream' }) });
    if (res.status === 401)
        loggedOut('The broker refused the token: log in again.');
    if (!res.ok || !res.body) {
        let body = null;
        try {
            body = await res.json();
        } catch (e) { /* not JSON */ }
        throw new ApiError(res.status, body, 'event stream: HTTP ' + res.status);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let name = '';
    let data = [];
    for (;;) {
        const { value, done } = await reader.read();
        if (done)
            break;
        buf += value;
        for (;;) {
            const m = /\r\n|\r|\n/.exec(buf);
            if (!m)
                break;
            if (m[0] === '\r' && m.index === buf.length - 1)
                break;   // maybe the first half of \r\n: wait for more
            const line = buf.slice(0, m.index);
            buf = buf.slice(m.index + m[0].length);
            if (line === '') {
                if (data.length)
                    onEvent(name || 'message', data.join('\n'));
                name = '';
                data = [];
                continue;
            }
            if (line.startsWith(':'))
                continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            let val = colon < 0 ? '' : line.slice(colon + 1);
            if (val.startsWith(' '))
                val = val.slice(1);
            if (field === 'event')
                name = val;
            else if (field === 'data')
                data.push(val);
        }
    }
}

// ------------------------------------------------------------------
// Who is logged in, and what they may do.

async function whoami() {
    // A whoami route says the name and role.
    try {
        const me = await api('GET', '/whoami', undefined, { noRedirect: true });
        session.role = me && ROLE_RANK[me.role] !== undefined ? me.role : null;
        session.name = me && typeof me.name === 'string' ? me.name : null;
        session.via = me && typeof me.via === 'string' ? me.via : null;
        session.checked = true;
        return;
    } catch (err) {
        if (err.status !== 404)
            throw err;
    }
    // Without one: the token works if /status answers (401 otherwise), and
    // the role is read from what the broker refuses, with requests that
    // change nothing: the token list is the admin's, and a cancel of a job
    // that cannot exist is forbidden to a viewer, not_found to an operator.
    await api('GET', '/status', undefined, { noRedirect: true });
    session.name = null;
    session.role = null;
    try {
        await api('GET', '/tokens', undefined, { noRedirect: true });
        session.role = 'admin';
    } catch (err) {
        if (err.status === 401)
            throw err;
        if (err.status === 403) {
            try {
                await api('POST', '/jobs/' + ROLE_PROBE_JOB + '/cancel',
                          { reason: 'role check' }, { noRedirect: true });
                session.role = 'operator';
            } catch (err2) {
                if (err2.status === 401)
                    throw err2;
                session.role = err2.status === 403 ? 'viewer' : 'operator';
            }
        }
    }
    session.checked = true;
}

function can(role) {
    if (session.role === null)
        return true;   // unknown: show the button, the broker decides
    return ROLE_RANK[session.role] >= ROLE_RANK[role];
}

// A button that needs ROLE: disabled, with a reason, for lower roles.
function roleButton(role, label, onclick, attrs = {}) {
    const ok = can(role);
    return h('button', Object.assign({
        type: 'button', onclick, disabled: !ok,
        title: ok ? null : 'needs the ' + role + ' role',
        dataset: { needs: role },
    }, attrs), label);
}

function renderWho() {
    const who = document.getElementById('who');
    const out = document.getElementById('logout');
    clear(who);
    if (session.open && !session.token) {
        who.append('open broker (no token needed)');
        out.hidden = true;
        return;
    }
    if (!session.token) {
        out.hidden = true;
        return;
    }
    if (session.name)
        who.append(h('span', { class: 'who-name', text: session.name }), ' ');
    if (session.role)
        who.append(h('span', { class: 'badge role', id: 'role', text: session.role }));
    if (session.via === 'insecure')
        who.append(' ', h('span', { class: 'badge st-failed', title: 'the broker runs --insecure: every caller is admin',
                                    text: 'insecure broker' }));
    out.hidden = false;
}

let loginMessage = '';

function loggedOut(message) {
    session.token = '';
    session.role = null;
    session.name = null;
    session.via = null;
    session.checked = false;
    sessionStorage.removeItem(TOKEN_KEY);
    loginMessage = message || '';
    brokerState = null;
    clusterState = null;
    clusterAt = 0;
    drawBrokerState(null);
    renderWho();
    const here = location.hash;
    if (!here.startsWith('#/login'))
        location.hash = '#/login' + (here && here !== '#/' ? '?next=' + enc(here.slice(1)) : '');
}

// ------------------------------------------------------------------
// Router: #/view/arg?query. Each view returns a cleanup function.

const views = {};
let cleanupView = null;
let generation = 0;

function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/overview';
    const [path, query] = raw.split('?');
    const parts = path.split('/').filter(Boolean).map((p) => {
        try {
            return decodeURIComponent(p);
        } catch (e) {
            return p;
        }
    });
    return { parts, query: new URLSearchParams(query || '') };
}

async function route() {
    const { parts, query } = parseHash();
    const name = parts[0] || 'overview';
    if (cleanupView) {
        try {
            cleanupView();
        } catch (e) { /* a view's cleanup must not stop the next one */ }
        cleanupView = null;
    }
    const gen = ++generation;
    for (const a of document.querySelectorAll('#nav a'))
        a.classList.toggle('active', a.dataset.view === name);
    document.getElementById('flash').hidden = true;
    const main = clear(document.getElementById('view'));
    if (name !== 'login' && !session.checked) {
        try {
            await ensureSession();
        } catch (err) {
            if (gen !== generation)
                return;
            if (err.status === 401)
                return loggedOut(session.token ? 'The broker refused the token: log in again.'
                                               : '');
            main.append(h('p', { class: 'error', text: errorText(err) }));
            return;
        }
        if (gen !== generation)
            return;
    }
    const view = views[name] || views.notFound;
    const ctx = {
        main, parts, query,
        live: () => gen === generation,
    };
    document.title = 'grid \u00b7 ' + (parts[1] || name);
    cleanupView = view(ctx) || null;
}

async function ensureSession() {
    if (!session.token) {
        // No token: an open broker (no auth) answers anyway.
        try {
            await whoami();
            session.open = true;
        } catch (err) {
            throw err;
        }
    } else {
        await whoami();
    }
    renderWho();
    refreshBrokerState();
}

// The header's line about the broker: from the last /status, with the
// node counts of whatever answered last (a /status or the node list).
let brokerState = null;
let brokerStateAt = 0;     // when a /status last answered (Date.now())

function drawBrokerState(st) {
    if (st && st.nodes)
        brokerState = st;
    const el = clear(document.getElementById('broker-state'));
    if (!brokerState || !session.checked)
        return;
    const b = brokerState;
    el.append('broker ' + (b.version || '') + ' \u00b7 ' + (b.state || '')
              + ' \u00b7 ' + b.nodes.online + '/' + b.nodes.total + ' nodes online');
    const c = clusterState;
    if (c && c.role && c.role !== 'alone') {
        const standbys = Array.isArray(c.standbys) ? c.standbys : [];
        const inSync = standbys.filter((s) => s.sync).length;
        el.append(' \u00b7 ', h('span', {
            id: 'broker-cluster',
            title: standbys.map((s) => s.name + ': ' + s.state + (s.sync ? ', in sync' : '')
                                       + ', ' + s.lag_passes + ' passes behind').join('\n'),
            text: 'cluster ' + (c.cluster || '') + ': ' + (c.name || '') + ' ' + c.role + ', '
                + inSync + '/' + standbys.length + ' standbys in sync',
        }));
    }
}

// The broker cluster (GET /cluster: cluster.status), asked now and then:
// the header names it unless the broker is alone.
let clusterState = null;
let clusterAt = 0;
const CLUSTER_MS = 5000;
const CLUSTER_ALONE_MS = 60000;   // a broker alone joins a cluster only by a restart

function clusterDue() {
    const alone = clusterState && clusterState.role === 'alone';
    return Date.now() - clusterAt >= (alone ? CLUSTER_ALONE_MS : CLUSTER_MS) - 100;
}

async function refreshCluster() {
    clusterAt = Date.now();
    try {
        clusterState = await api('GET', '/cluster', undefined, { noRedirect: true });
    } catch (e) {
        clusterState = null;   // an older broker has no such route; the line is a nicety
    }
    drawBrokerState(null);
}

// The node list came: the header counts what it shows.
function drawNodeCounts(nodes) {
    if (!brokerState)
        return;
    const online = nodes.filter((n) => n.status === 'online').length;
    drawBrokerState(Object.assign({}, brokerState,
        { nodes: Object.assign({}, brokerState.nodes, { online, total: nodes.length }) }));
}

// A /status answer, from the header's own poll or a view's.
function statusCame(st) {
    brokerStateAt = Date.now();
    drawBrokerState(st);
}

// A broker cluster's standby serves nothing (every request: 503
// not_leader): GET /leader (no token) says so and names the active,
// whose dashboard the banner links to.
async function checkLeader() {
    let who = null;
    try {
        const res = await fetch(API + '/leader', { cache: 'no-store', credentials: 'omit' });
        who = await res.json();
    } catch (e) {
        who = null;   // an older broker has no such route
    }
    const el = clear(document.getElementById('standby'));
    el.hidden = !(who && who.role === 'standby');
    if (el.hidden)
        return;
    el.append('This broker' + (who.name ? ' (' + who.name + ')' : '') + ' is a standby of cluster '
              + (who.cluster || '') + ': it serves nothing until it takes over. ');
    if (!who.leader)
        el.append('No active is known yet.');
    else if (typeof who.http === 'string' && /^https?:\/\//.test(who.http))
        el.append('The active is ' + who.leader + ': ',
                  h('a', { id: 'standby-active', href: who.http.replace(/\/+$/, '') + '/',
                           text: 'open its dashboard' }), '.');
    else
        el.append('The active is ' + who.leader + '.');
}

async function refreshBrokerState() {
    checkLeader();
    try {
        statusCame(await api('GET', '/status', undefined, { noRedirect: true }));
    } catch (e) { /* the header line is a nicety */ }
    if (clusterDue())
        await refreshCluster();
}

// The header stays current on every page (nodes come and go): it asks
// again every few seconds while someone is logged in, unless a view (the
// jobs page) just asked.
const BROKER_STATE_MS = 5000;
(function pollBrokerState() {
    setTimeout(async () => {
        if (session.checked && !location.hash.startsWith('#/login')) {
            if (Date.now() - brokerStateAt >= BROKER_STATE_MS - 100)
                await refreshBrokerState();
            else if (clusterDue())
                await refreshCluster();
        }
        pollBrokerState();
    }, document.hidden ? BROKER_STATE_MS * 3 : BROKER_STATE_MS);
})();

// Calls fn now and again as soon as any job changes (job.changes, a long
// poll the broker answers on change), at most every CHANGES_MIN_MS, and
// every ms anyway; against a broker without job.changes, every ms only.
// Returns a stop().
const CHANGES_MIN_MS = 200;
function onChanges(ctx, ms, fn) {
    const abort = new AbortController();
    let stopped = false;
    let version = null;
    let timer = null;
    let last = 0;
    let running = false;
    let again = false;
    const run = async () => {
        if (stopped || !ctx.live())
            return;
        if (running) {
            again = true;
            return;
        }
        running = true;
        clearTimeout(timer);
        const wait = CHANGES_MIN_MS - (Date.now() - last);
        if (wait > 0)
            await sleep(wait);
        last = Date.now();
        try {
            await fn();
        } catch (e) {
            if (e.name !== 'AbortError' && ctx.live())
                flashError(e);
        }
        running = false;
        if (stopped || !ctx.live())
            return;
        if (again) {
            again = false;
            run();
            return;
        }
        timer = setTimeout(run, document.hidden ? ms * 3 : ms);
    };
    const watch = async () => {
        while (!stopped && ctx.live()) {
            try {
                const r = await api('GET', '/jobs/changes' + q({ after: version === null ? undefined : version,
                                                                timeout_ms: 25000 }),
                                    undefined, { signal: abort.signal, noRedirect: true });
                const first = version === null;
                version = r.version;
                if (r.changed && !first)
                    run();
            } catch (e) {
                if (e.name === 'AbortError' || stopped)
                    return;
                // An older broker (no such request), or a pause: the timer
                // carries on alone; a broker that went away is tried again later
                if (e.status === 400 || e.status === 404)
                    return;
                await sleep(ms);
            }
        }
    };
    run();
    watch();
    return () => {
        stopped = true;
        clearTimeout(timer);
        abort.abort();
    };
}

// Calls fn now and every ms while the view is live; returns a stop().
function every(ctx, ms, fn) {
    let timer = null;
    let stopped = false;
    const tick = async () => {
        if (stopped || !ctx.live())
            return;
        try {
            await fn();
        } catch (e) {
            if (e.name !== 'AbortError' && ctx.live())
                flashError(e);
        }
        if (!stopped && ctx.live())
            timer = setTimeout(tick, document.hidden ? ms * 3 : ms);
    };
    tick();
    return () => {
        stopped = true;
        clearTimeout(timer);
    };
}

// ------------------------------------------------------------------
// #/login

views.login = (ctx) => {
    const next = ctx.query.get('next') || '/overview';
    const msg = h('p', { class: 'error', id: 'login-error', role: 'alert',
                         text: loginMessage, hidden: !loginMessage });
    loginMessage = '';
    const input = h('input', { type: 'password', id: 'token', name: 'token',
                               autocomplete: 'off', spellcheck: 'false', required: true,
                               placeholder: 'paste your API token' });
    const button = h('button', { type: 'submit', id: 'login-submit' }, 'Log in');
    const form = h('form', { class: 'login card', onsubmit: async (ev) => {
        ev.preventDefault();
        const token = input.value.trim();
        if (!token)
            return;
        button.disabled = true;
        msg.hidden = true;
        session.token = token;
        try {
            await whoami();
            sessionStorage.setItem(TOKEN_KEY, token);
            session.open = false;
            renderWho();
            refreshBrokerState();
            location.hash = '#' + (next.startsWith('/') && !next.startsWith('/login') ? next : '/overview');
        } catch (err) {
            session.token = '';
            session.checked = false;
            msg.textContent = err.status === 401 ? 'The broker does not know this token.'
                                                 : errorText(err);
            msg.hidden = false;
        } finally {
            button.disabled = false;
        }
    } },
        h('h1', null, 'Log in to grid'),
        h('p', { class: 'muted' },
          'Use an API token made by an admin with ',
          h('code', null, 'gridcli token add NAME --role viewer|operator|admin'),
          '. It stays in this tab only (session storage).'),
        h('label', { for: 'token' }, 'Token'),
        input, msg, button);
    ctx.main.append(form);
    input.focus();
};

views.notFound = (ctx) => {
    ctx.main.append(h('p', null, 'No such page. ', h('a', { href: '#/jobs' }, 'Go to the jobs.')));
};

// ------------------------------------------------------------------
// #/overview: the fleet at a glance, the landing page

// A small line chart (inline SVG) of VALUES, the latest at the right.
function sparkline(values, label) {
    const W = 120, H = 28;
    const svgNS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(svgNS, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('width', String(W));
    svg.setAttribute('height', String(H));
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', label);
    if (values.length > 1) {
        const max = Math.max(1, ...values);
        const step = W / (values.length - 1);
        const points = values.map((v, i) => (i * step).toFixed(1) + ','
            + (H - 2 - (v / max) * (H - 4)).toFixed(1)).join(' ');
        const line = document.createElementNS(svgNS, 'polyline');
        line.setAttribute('points', points);
        svg.append(line);
    }
    return svg;
}

const OVERVIEW_MS = 5000;
const OVERVIEW_JOBS_MS = 30000;   // the recent jobs' tally: a larger read, less often
const OVERVIEW_SAMPLES = 60;      // five minutes of trend at OVERVIEW_MS

views.overview = (ctx) => {
    const trend = { online: [], running: [], waiting: [], cells: [] };
    let recent = null;             // {hour: {status: n}, day: {status: n}, seen: n}
    let recentAt = 0;
    const body = h('div', { class: 'overview', id: 'overview' });
    ctx.main.append(h('div', { class: 'titlebar' }, h('h1', null, 'Overview'),
                      h('span', { class: 'muted', id: 'overview-live' })), body);

    const tile = (id, title, main, detail, spark) => h('section', { class: 'card tile', id },
        h('h2', null, title),
        h('div', { class: 'tile-main', text: main }),
        detail ? h('div', { class: 'small muted tile-detail' }, detail) : null,
        spark || null);

    const chips = (counts, order, hrefOf) => !order.some((k) => counts[k]) ? 'none'
        : h('div', { class: 'tallies' }, order.filter((k) => counts[k]).map((k) => h(hrefOf ? 'a' : 'span', {
            class: 'tally st-' + cssName(k), dataset: { status: k },
            href: hrefOf ? hrefOf(k) : undefined, text: counts[k] + ' ' + k.replace(/_/g, ' ') })));

    const tallyRecent = (jobs) => {
        const now = Date.now();
        const hour = {}, day = {};
        for (const j of jobs) {
            const at = Date.parse(j.updated_at || j.created_at || '');
            if (!Number.isFinite(at))
                continue;
            if (now - at <= 86400e3)
                day[j.status] = (day[j.status] || 0) + 1;
            if (now - at <= 3600e3)
                hour[j.status] = (hour[j.status] || 0) + 1;
        }
        return { hour, day, seen: jobs.length };
    };

    const push = (list, v) => {
        list.push(Number.isFinite(v) ? v : 0);
        if (list.length > OVERVIEW_SAMPLES)
            list.shift();
    };

    const refresh = async () => {
        const wantJobs = Date.now() - recentAt >= OVERVIEW_JOBS_MS - 100;
        const [st, qs, list] = await Promise.all([
            api('GET', '/status'),
            api('GET', '/queue/stats').catch(() => null),
            wantJobs ? api('GET', '/jobs' + q({ limit: 1000 })).catch(() => null) : null,
        ]);
        if (!ctx.live())
            return;
        statusCame(st);
        if (list) {
            recent = Object.assign(tallyRecent(list.jobs || []), { stored: list.by_status || {},
                                                                   total: list.total });
            recentAt = Date.now();
        }
        const nodes = st.nodes || {};
        const jobs = (qs && qs.jobs) || st.jobs || {};
        const cells = (qs && qs.cells) || {};
        push(trend.online, nodes.online);
        push(trend.running, jobs.running);
        push(trend.waiting, (st.queue || {}).waiting);
        push(trend.cells, cells.running);
        const wait = (qs && qs.wait_ms && qs.wait_ms['5m']) || null;
        const run = (qs && qs.run_ms && qs.run_ms['5m']) || null;
        const store = st.store || {};
        const c = clusterState;
        clear(body);
        append(body, [
            tile('ov-nodes', 'Nodes', (nodes.online || 0) + ' / ' + (nodes.total || 0) + ' online',
                [h('a', { href: '#/nodes', text: (nodes.offline || 0) + ' offline' }),
                 nodes.incompatible ? ' \u00b7 ' + nodes.incompatible + ' incompatible' : ''],
                sparkline(trend.online, 'nodes online')),
            tile('ov-jobs', 'Jobs now', (jobs.running || 0) + ' running \u00b7 ' + (jobs.pending || 0) + ' pending',
                (cells.running || 0) + ' tasks running, ' + (cells.pending || 0) + ' waiting',
                sparkline(trend.running, 'jobs running')),
            tile('ov-queue', 'Queue', (qs ? (qs.jobs || {}).pending || 0 : 0) + ' jobs waiting',
                [wait && wait.count ? 'wait p50 ' + fmtDuration(wait.p50) + ', p99 ' + fmtDuration(wait.p99)
                                    + ' (5 min)' : 'no wait in the last 5 min',
                 qs && qs.oldest_pending ? ' \u00b7 oldest ' + qs.oldest_pending.job : ''],
                sparkline(trend.waiting, 'queue waiting')),
            tile('ov-results', 'Results', (run ? run.count : 0) + ' in 5 min',
                run && run.count ? (run.count / 300).toFixed(1) + '/s \u00b7 run p50 ' + fmtDuration(run.p50)
                                   + ', p99 ' + fmtDuration(run.p99) : 'none in the last 5 min',
                sparkline(trend.cells, 'tasks running')),
            tile('ov-dlq', 'Dead letters', String(qs ? qs.dead_letter || 0 : 0),
                 qs && qs.dead_letter ? 'jobs that gave up: gridcli dlq list' : 'none'),
            tile('ov-store', 'Store', (store.used_percent !== undefined ? store.used_percent : '?') + '% used',
                 fmtBytes(store.used_bytes || 0) + ' of ' + fmtBytes(store.max_bytes || 0)
                 + (store.state && store.state !== 'ok' ? ' \u00b7 ' + store.state : '')),
            tile('ov-recent', 'Jobs, last hour', null,
                 recent ? chips(recent.hour, JOB_STATUSES, (k) => '#/jobs?status=' + k) : 'reading\u2026'),
            tile('ov-day', 'Jobs, last day', null,
                 recent ? [chips(recent.day, JOB_STATUSES, (k) => '#/jobs?status=' + k),
                           recent.total > recent.seen ? h('div', { class: 'muted',
                               text: 'of the newest ' + recent.seen + ' of ' + recent.total + ' stored' }) : null]
                        : 'reading\u2026'),
            c && c.role && c.role !== 'alone'
                ? tile('ov-cluster', 'Cluster ' + (c.cluster || ''), (c.name || '') + ' ' + c.role
                       + (c.epoch !== undefined ? ', epoch ' + c.epoch : ''),
                       (Array.isArray(c.standbys) ? c.standbys : []).map((sb) => h('div', {
                           text: sb.name + ': ' + sb.state + (sb.sync ? ', in sync' : '') })))
                : null]);
        const live = document.getElementById('overview-live');
        if (live)
            live.textContent = 'broker ' + (st.state || '') + ' \u00b7 updated ' + fmtClock(new Date().toISOString());
    };
    return every(ctx, OVERVIEW_MS, refresh);
};

// ------------------------------------------------------------------
// #/jobs

views.jobs = (ctx) => {
    if (ctx.parts[1])
        return jobView(ctx, ctx.parts[1]);
    const status = ctx.query.get('status') || '';
    let limit = 50;
    const counts = {};
    const filters = h('nav', { class: 'filters', 'aria-label': 'status filter' });
    const drawFilters = () => {
        clear(filters);
        for (const s of [''].concat(JOB_STATUSES)) {
            const n = s ? counts[s] : undefined;
            filters.append(h('a', {
                href: '#/jobs' + (s ? '?status=' + s : ''),
                class: 'filter' + (s === status ? ' active' : '') + (s ? ' st-' + s : ''),
                dataset: { status: s || 'all' },
            }, s ? s.replace(/_/g, ' ') : 'all', n !== undefined ? h('span', { class: 'count', text: n }) : null));
        }
    };
    drawFilters();
    const tbody = h('tbody');
    const foot = h('p', { class: 'muted' });
    const more = h('button', { type: 'button', id: 'more-jobs', hidden: true, onclick: () => {
        limit = Math.min(limit + 50, 1000);
        refresh();
    } }, 'Show older jobs');
    ctx.main.append(
        h('div', { class: 'titlebar' }, h('h1', null, 'Jobs'),
          h('a', { class: 'button', href: '#/run' }, 'Run a job')),
        filters,
        h('table', { class: 'list', id: 'jobs' },
          h('thead', null, h('tr', null, ['Job', 'Status', 'Target', 'Step', 'Nodes',
                                          'Created', 'Updated'].map((t) => h('th', null, t)))),
          tbody),
        foot, more);

    const refresh = async () => {
        const [list, st] = await Promise.all([
            api('GET', '/jobs' + q({ status, limit })),
            api('GET', '/status').catch(() => null),
        ]);
        if (!ctx.live())
            return;
        // The chips count the stored jobs (the list's by_status), as the
        // list shows them; /status counts what finished since the broker
        // started, deleted jobs too.
        if (list && list.by_status) {
            Object.assign(counts, list.by_status);
            drawFilters();
        }
        if (st)
            statusCame(st);
        const jobs = (list && list.jobs) || [];
        clear(tbody);
        for (const j of jobs) {
            tbody.append(h('tr', { dataset: { job: j.id, status: j.status } },
                h('td', null, h('a', { href: '#/jobs/' + enc(j.id), class: 'mono', text: j.id }),
                  j.schedule ? h('span', { class: 'muted small', text: ' \u00b7 ' + j.schedule }) : null),
                h('td', null, badge(j.status)),
                h('td', { class: 'mono', text: j.target }),
                h('td', { text: Math.min(j.step, j.steps) + ' / ' + j.steps }),
                h('td', { text: j.expected }),
                h('td', null, timeEl(j.created_at, true)),
                h('td', null, timeEl(j.updated_at, true))));
        }
        if (!jobs.length)
            tbody.append(h('tr', null, h('td', { colspan: 7, class: 'muted empty' },
                status ? 'No ' + status.replace(/_/g, ' ') + ' jobs.' : 'No jobs yet.')));
        const total = list && typeof list.total === 'number' ? list.total : jobs.length;
        foot.textContent = 'Showing ' + jobs.length + ' of ' + total + ' \u00b7 live';
        more.hidden = jobs.length >= total || limit >= 1000;
    };
    return onChanges(ctx, 10000, refresh);
};

// The leaves of a job's tasks, depth-first: step numbers.
function flattenSteps(tasks) {
    const steps = [];
    (tasks || []).forEach((phase, i) => {
        if (phase && Array.isArray(phase.tasks)) {
            phase.tasks.forEach((leaf, k) => steps.push({ leaf, phase: i, sub: k, branch: phase }));
        } else {
            steps.push({ leaf: phase || {}, phase: i });
        }
    });
    return steps;
}

function targetText(t) {
    if (!t)
        return '';
    if (typeof t === 'string')
        return t;
    const base = t.scope === 'all' ? 'all' : t.scope === 'expr' ? t.value : t.scope + ':' + t.value;
    return (t.any ? 'any:' : '') + base;
}

const CELL_SHORT = { success: 'ok', failed: 'failed', running: 'running', pending: 'pending',
                     dispatched: 'sent', acknowledged: 'acked', timeout: 'timeout',
                     skipped: 'skipped', lost: 'lost', cancelled: 'cancelled',
                     interrupted: 'interrupted', offline: 'offline', drained: 'drained',
                     unsupported: 'unsupported', retry_wait: 'retry wait' };

function jobView(ctx, id) {
    const abort = new AbortController();
    let record = null;
    let lastSeq = 0;
    let selected = null;           // {step, node} of the open cell
    let streaming = false;
    let stopPoll = null;
    let refetchTimer = null;
    // The grid's rows: virtualised past VIRTUAL_ROWS (drawRows)
    let rowState = null;           // {matching, results, nsteps, pending} of the last drawGrid
    let gridTbody = null;
    const rowPitch = { px: 34 };    // measured from drawn rows
    const scrollBox = h('div', { class: 'gridscroll vscroll' });
    onScrollFrame(scrollBox, () => drawRows());
    let drawnCell = '';            // what the open cell panel shows (JSON)
    let tasks = new Map();         // step/node -> the running task's latest progress
    const fullOutputs = new Map(); // whole streams loaded: step/node/stream/attempt -> text
    const liveOut = new Map();     // step/node/stream -> {attempt, next, bytes}: what a
                                   // running attempt printed so far (output events)
    const gridFilter = h('input', { type: 'search', id: 'grid-filter', placeholder: 'filter nodes',
                                    hidden: true });
    let statusFilter = '';         // rows with a cell of this status only ('' = all)
    const mapBox = h('div', { class: 'mapbox', id: 'heatmap', hidden: true });
    const forceMap = ctx.query.get('view') === 'map';
    const statusChips = h('nav', { class: 'filters', id: 'cell-filters', 'aria-label': 'cell status filter' });

    const head = h('div', { class: 'jobhead' });
    const actions = h('div', { class: 'actions' });
    const gridBox = h('div', { class: 'gridbox' });
    const cellBox = h('section', { class: 'cell card', id: 'cell', hidden: true });
    const liveEl = h('span', { class: 'live muted', id: 'live' });
    const eventsBody = h('tbody');
    ctx.main.append(
        h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ',
          h('span', { class: 'mono', text: id })),
        head, actions,
        h('div', { class: 'titlebar' }, h('h2', null, 'Nodes \u00d7 steps ', liveEl), gridFilter),
        statusChips, mapBox, gridBox, cellBox,
        h('h2', null, 'Timeline'),
        h('div', { class: 'timeline' }, h('table', { class: 'list events', id: 'events' },
          h('thead', null, h('tr', null, ['#', 'Time', 'Event', 'Node', 'Step', 'Detail']
            .map((t) => h('th', null, t)))),
          eventsBody)));

    const drawHead = () => {
        const r = record;
        clear(head);
        head.append(
            h('div', { class: 'titlebar' },
              h('h1', { class: 'mono', text: r.id }),
              badge(r.status, 'big')),
            h('dl', { class: 'facts' },
              fact('Target', h('span', { class: 'mono', text: targetText(r.target) })),
              fact('Progress', (r.status === 'pending' ? 0 : Math.min(r.step, r.steps)) + ' / ' + r.steps + ' steps'),
              fact('Nodes', String((r.expected || []).length)),
              fact('Strategy', r.strategy),
              r.timeout ? fact('Timeout', r.timeout) : null,
              fact('Priority', String(r.priority)),
              r.schedule ? fact('Schedule', r.schedule) : null,
              r.submitted_by ? fact('Submitted by', r.submitted_by) : null,
              r.idempotency_key ? fact('Idempotency key', r.idempotency_key) : null,
              r.trace ? fact('Trace', h('span', { class: 'mono', id: 'trace', title: r.trace.traceparent,
                                                 text: r.trace.trace_id + (r.trace.generated ? ' (generated)' : '') })) : null,
              fact('Created', timeEl(r.created_at)),
              fact('Updated', timeEl(r.updated_at)),
              r.retry_of ? fact('Retry of', jobLink(r.retry_of)) : null,
              r.retried_by && r.retried_by.length
                ? fact('Retried by', r.retried_by.map((j, i) => [i ? ', ' : '', jobLink(j)])) : null));
        if (r.reason)
            head.append(h('p', { class: 'reason', id: 'reason' },
                          h('strong', null, r.status === 'failed' ? 'Failed: ' : 'Reason: '), r.reason));
        if (r.not_run && r.not_run.length)
            head.append(h('p', { class: 'muted' }, 'Not run on: ',
                r.not_run.map((n, i) => [i ? ', ' : '', n.node + ' (' + (n.reason || n.status) + ')'])));

        clear(actions);
        const running = !FINAL.has(r.status);
        if (running)
            actions.append(roleButton('operator', 'Cancel', doCancel, { id: 'cancel', class: 'danger' }));
        else {
            actions.append(roleButton('operator', 'Retry', () => doRetry(false), { id: 'retry' }));
            if (r.status !== 'completed')
                actions.append(roleButton('operator', 'Retry failed nodes', () => doRetry(true),
                                          { id: 'retry-failed' }));
            actions.append(roleButton('operator', 'Delete', doDelete, { id: 'delete', class: 'danger' }));
        }
    };

    // The latest progress of a running cell's attempt (job.progress tasks),
    // or null.
    const cellTask = (step, node, cell) => {
        if (!cell || cell.status !== 'running')
            return null;
        const task = tasks.get(step + '/' + node);
        if (!task || (typeof task.attempt === 'number' && typeof cell.attempts === 'number'
                      && task.attempt !== cell.attempts))
            return null;
        return task;
    };

    // What the running attempt of a cell printed on STREAM so far (output
    // events), or undefined when the cell does not run or nothing came.
    const liveText = (step, node, stream, cell) => {
        if (!cell || !IN_FLIGHT.has(cell.status))
            return undefined;
        const entry = liveOut.get(step + '/' + node + '/' + stream);
        return entry ? new TextDecoder('utf-8', { fatal: false }).decode(entry.bytes) : undefined;
    };

    // The open cell's output, where it is shown, as it comes.
    const drawLive = (step, node) => {
        if (!selected || selected.step !== step || selected.node !== node || !record)
            return;
        const cell = ((record.results || {})[String(step)] || {})[node];
        for (const stream of ['stdout', 'stderr']) {
            const text = liveText(step, node, stream, cell);
            const pre = cellBox.querySelector('#output-' + stream);
            if (text !== undefined && pre)
                pre.textContent = text;
        }
    };

    // A running cell opened after its first pieces went by (or left the
    // stream's memory): what has arrived so far, read once from the start.
    const seeding = new Set();
    const seedLive = async (step, node, stream) => {
        const key = step + '/' + node + '/' + stream;
        if (seeding.has(key) || liveOut.has(key))
            return;
        seeding.add(key);
        try {
            // No attempt named: the broker serves the one running
            const page = await api('GET', '/jobs/' + enc(id) + '/output' + q({ node, step, stream }),
                                   undefined, { signal: abort.signal });
            if (!liveOut.has(key) && page && typeof page.next === 'number') {
                liveOut.set(key, { attempt: page.attempt, next: page.next, bytes: pageBytes(page.data) });
                drawLive(step, node);
            }
        } catch (err) {
            // the events carry it on; nothing to say
        } finally {
            seeding.delete(key);
        }
    };

    // An output event: a piece of a running cell's stream, kept where the
    // last one ended (a repeat or a gap is passed over: the whole stream
    // is read when the cell is done).
    const addOutput = (o) => {
        if (!o || typeof o.step !== 'number' || typeof o.node !== 'string'
            || typeof o.offset !== 'number' || typeof o.attempt !== 'number')
            return;
        const key = o.step + '/' + o.node + '/' + (o.stream === 'stderr' ? 'stderr' : 'stdout');
        let entry = liveOut.get(key);
        if (!entry || entry.attempt !== o.attempt) {
            entry = { attempt: o.attempt, next: 0, bytes: new Uint8Array() };
            liveOut.set(key, entry);
        }
        if (o.offset !== entry.next)
            return;
        const piece = pageBytes(o.data);
        const grown = new Uint8Array(entry.bytes.length + piece.length);
        grown.set(entry.bytes);
        grown.set(piece, entry.bytes.length);
        entry.bytes = grown;
        entry.next += piece.length;
        drawLive(o.step, o.node);
    };

    // A job.progress answer (or a stream's progress event): its tasks go to
    // their cells at once, without fetching the job's record.
    const setProgress = (p) => {
        tasks = new Map();
        for (const t of (p && Array.isArray(p.tasks) ? p.tasks : []))
            if (t && typeof t.node === 'string' && typeof t.step === 'number')
                tasks.set(t.step + '/' + t.node, t);
        if (!record)
            return;
        for (const btn of gridBox.querySelectorAll('.cellbtn[data-status="running"]')) {
            const step = Number(btn.dataset.step);
            const cell = ((record.results || {})[String(step)] || {})[btn.dataset.node];
            const task = cellTask(step, btn.dataset.node, cell);
            for (const old of btn.querySelectorAll('.cprogress, progress'))
                old.remove();
            btn.dataset.percent = task && task.percent >= 0 ? String(task.percent) : '';
            if (task)
                append(btn, [progressEls(task)]);
        }
        if (selected && record)
            drawCell();
    };

    const drawGrid = () => {
        const r = record;
        const steps = flattenSteps(r.tasks);
        const results = r.results || {};
        const nsteps = Math.max(r.steps || 0, steps.length);
        const nodes = new Set(r.expected || []);
        for (const cells of Object.values(results))
            for (const node of Object.keys(cells || {}))
                nodes.add(node);
        const counts = cellCounts(results, nodes, nsteps);
        // Failures first, then what runs, then what went well; by name within
        const allNodes = [...nodes].sort((a, b) => {
            const ra = cellRank(counts.nodes.get(a));
            const rb = cellRank(counts.nodes.get(b));
            return ra !== rb ? ra - rb : (a < b ? -1 : a > b ? 1 : 0);
        });
        if (statusFilter && !counts.rows.has(statusFilter))
            statusFilter = '';
        drawChips(counts, allNodes.length);
        const needle = gridFilter.value.trim().toLowerCase();
        const matching = allNodes.filter((n) => (!needle || n.toLowerCase().includes(needle))
            && (!statusFilter || cellsOf(results, n, nsteps).has(statusFilter)));
        gridFilter.hidden = allNodes.length <= 10;
        drawMap(matching, results, nsteps, steps);
        const headRow = h('tr', null, h('th', { class: 'corner' }, 'node \\ step'));
        for (let s = 0; s < nsteps; s++) {
            const st = steps[s];
            const leaf = st ? st.leaf : {};
            const label = (leaf.backend || '?') + ' ' + (leaf.action || '?');
            const where = st ? (st.sub !== undefined ? 'phase ' + st.phase + '.' + st.sub : 'phase ' + st.phase) : '';
            const tally = [...counts.steps[s].entries()]
                .sort((a, b) => cellRank(a[0]) - cellRank(b[0]))
                .map(([status, n]) => h('span', { class: 'tally st-' + cssName(status),
                                                 dataset: { status }, text: n + ' ' + (CELL_SHORT[status] || status) }));
            headRow.append(h('th', { class: 'step' + (s === r.step && !FINAL.has(r.status) ? ' current' : ''),
                                     title: where + (leaf.condition ? ' \u00b7 ' + leaf.condition : '') },
                h('span', { class: 'stepno', text: '#' + s }), ' ',
                h('span', { text: leaf.name ? leaf.name : label }),
                leaf.name ? h('div', { class: 'small muted', text: label }) : null,
                tally.length ? h('div', { class: 'tallies small', dataset: { step: String(s) } }, tally) : null));
        }
        rowState = { matching, results, nsteps, pending: r.status === 'pending' };
        const top = scrollBox.scrollTop;
        clear(gridBox);
        clear(scrollBox);
        gridTbody = h('tbody');
        scrollBox.append(h('table', { class: 'grid', id: 'grid' }, h('thead', null, headRow), gridTbody));
        gridBox.append(scrollBox, legend());
        scrollBox.scrollTop = top;
        drawRows();
    };

    // One node's row of the grid.
    const rowOf = (node, results, nsteps) => {
        const row = h('tr', { dataset: { node } }, h('th', { class: 'node mono', text: node }));
        for (let s = 0; s < nsteps; s++) {
            const cell = (results[String(s)] || {})[node];
            if (!cell) {
                row.append(h('td', { class: 'cell none' }, ''));
                continue;
            }
            const isSel = selected && selected.step === s && selected.node === node;
            const task = cellTask(s, node, cell);
            const info = [];
            if (cell.attempts > 1)
                info.push('\u00d7' + cell.attempts);
            if (cell.duration_ms || cell.status === 'success')
                info.push(fmtDuration(cell.duration_ms || 0));
            row.append(h('td', { class: 'cell' },
                h('button', {
                    type: 'button',
                    class: 'cellbtn st-' + cssName(cell.status) + (isSel ? ' selected' : ''),
                    title: node + ' \u00b7 step ' + s + ': ' + cell.status
                        + (cell.reason ? ' (' + cell.reason + ')' : '')
                        + (cell.waiting ? ' (' + cell.waiting + ')' : '')
                        + (task ? ' \u00b7 ' + progressText(task) : ''),
                    dataset: { node, step: String(s), status: cell.status,
                               percent: task && task.percent >= 0 ? String(task.percent) : '' },
                    onclick: () => {
                        selected = { step: s, node };
                        drawGrid();
                        drawCell();
                    },
                },
                h('span', { class: 'cstatus', text: CELL_SHORT[cell.status] || cell.status }),
                info.length ? h('span', { class: 'cinfo', text: info.join(' \u00b7 ') }) : null,
                task ? progressEls(task) : null)));
        }
        return row;
    };

    // The rows of the grid, only those in view past VIRTUAL_ROWS.
    const drawRows = () => {
        if (!rowState || !gridTbody)
            return;
        const { matching, results, nsteps, pending } = rowState;
        if (!matching.length) {
            clear(gridTbody);
            gridTbody.append(h('tr', null, h('td', { colspan: nsteps + 1, class: 'muted empty' },
                pending ? 'Waiting to start.' : 'No node took part.')));
            return;
        }
        virtualRows(scrollBox, gridTbody, matching.length, (i) => rowOf(matching[i], results, nsteps), rowPitch);
    };

    // The heat map: per step, one small square per node (in the rows'
    // order: failures first), coloured by the cell's status, drawn on a
    // canvas so that 10,000 cells are one element; hovering names the cell
    // below the map, a click opens it. Under each step, its durations.
    // Shown from MAP_NODES nodes on (or with ?view=map).
    const MAP_NODES = 40;
    const drawMap = (nodes, results, nsteps, steps) => {
        mapBox.hidden = !(forceMap || nodes.length >= MAP_NODES);
        if (mapBox.hidden)
            return;
        clear(mapBox);
        const width = Math.max(240, Math.min(960, (mapBox.parentElement || document.body).clientWidth - 20));
        const size = nodes.length > 4000 ? 5 : nodes.length > 1000 ? 7 : 10;
        const pitch = size + 1;
        const perRow = Math.max(1, Math.floor(width / pitch));
        const rows = Math.max(1, Math.ceil(nodes.length / perRow));
        const info = h('div', { class: 'small mono mapinfo', id: 'heatmap-info',
                                text: 'hover a square for its cell; click to open it' });
        const dpr = window.devicePixelRatio || 1;
        for (let s = 0; s < nsteps; s++) {
            const leaf = (steps[s] || {}).leaf || {};
            const canvas = h('canvas', { class: 'heat', dataset: { step: String(s) },
                                         width: Math.round(perRow * pitch * dpr),
                                         height: Math.round(rows * pitch * dpr) });
            canvas.style.width = perRow * pitch + 'px';
            canvas.style.height = rows * pitch + 'px';
            const g = canvas.getContext('2d');
            g.scale(dpr, dpr);
            const cells = results[String(s)] || {};
            const colours = new Map();
            const durations = [];
            nodes.forEach((node, i) => {
                const cell = cells[node];
                const status = cell ? cell.status : 'none';
                if (!colours.has(status))
                    colours.set(status, cell ? toneColour(status) : getComputedStyle(
                        document.documentElement).getPropertyValue('--line').trim() || '#ddd');
                g.fillStyle = colours.get(status);
                g.fillRect((i % perRow) * pitch, Math.floor(i / perRow) * pitch, size, size);
                if (cell && FINAL_CELL.has(cell.status) && typeof cell.duration_ms === 'number')
                    durations.push(cell.duration_ms);
            });
            const at = (ev) => {
                const rect = canvas.getBoundingClientRect();
                const x = Math.floor((ev.clientX - rect.left) / pitch);
                const y = Math.floor((ev.clientY - rect.top) / pitch);
                const i = y * perRow + x;
                return x >= 0 && x < perRow && i >= 0 && i < nodes.length ? nodes[i] : null;
            };
            canvas.addEventListener('mousemove', (ev) => {
                const node = at(ev);
                const cell = node ? cells[node] : null;
                info.textContent = !node ? '' : node + ' \u00b7 step ' + s + ': '
                    + (cell ? cell.status + (cell.reason ? ' (' + cell.reason + ')' : '')
                              + (typeof cell.duration_ms === 'number' && cell.duration_ms ? ' \u00b7 '
                                 + fmtDuration(cell.duration_ms) : '') : 'no cell');
            });
            canvas.addEventListener('click', (ev) => {
                const node = at(ev);
                if (!node || !cells[node])
                    return;
                selected = { step: s, node };
                drawCell();
                cellBox.scrollIntoView({ block: 'nearest' });
            });
            mapBox.append(h('div', { class: 'mapstep' },
                h('div', { class: 'small', text: '#' + s + ' ' + (leaf.name || ((leaf.backend || '?') + ' '
                                                                 + (leaf.action || '?'))) }),
                canvas, durationHistogram(durations, s)));
        }
        mapBox.append(info);
    };

    // The statuses of NODE's cells over the steps.
    const cellsOf = (results, node, nsteps) => {
        const seen = new Set();
        for (let s = 0; s < nsteps; s++) {
            const cell = (results[String(s)] || {})[node];
            if (cell && typeof cell.status === 'string')
                seen.add(cell.status);
        }
        return seen;
    };

    // One chip per status some row has (how many rows have it), failures
    // first; a click shows those rows only. Hidden while every row went well.
    const drawChips = (counts, total) => {
        clear(statusChips);
        const present = [...counts.rows.entries()].sort((a, b) => cellRank(a[0]) - cellRank(b[0]));
        statusChips.hidden = present.length < 2 && !statusFilter;
        if (statusChips.hidden)
            return;
        const chip = (status, label, n) => h('button', {
            type: 'button',
            class: 'filter' + (status === statusFilter ? ' active' : '') + (status ? ' st-' + cssName(status) : ''),
            dataset: { status: status || 'all' },
            onclick: () => {
                statusFilter = status;
                scrollBox.scrollTop = 0;
                drawGrid();
            },
        }, label, h('span', { class: 'count', text: String(n) }));
        statusChips.append(chip('', 'all nodes', total));
        for (const [status, n] of present)
            statusChips.append(chip(status, CELL_SHORT[status] || status, n));
    };

    gridFilter.addEventListener('input', () => {
        if (record)
            drawGrid();
    });

    const drawCell = () => {
        if (!selected || !record) {
            cellBox.hidden = true;
            drawnCell = '';
            return;
        }
        const { step, node } = selected;
        const cell = ((record.results || {})[String(step)] || {})[node];
        // Redrawn only when the cell changed (a redraw would lose the scroll
        // position and what the user selected)
        const now = JSON.stringify([step, node, cell || null, cellTask(step, node, cell)]);
        if (now === drawnCell && !cellBox.hidden)
            return;
        drawnCell = now;
        clear(cellBox);
        cellBox.hidden = false;
        const leaf = (flattenSteps(record.tasks)[step] || {}).leaf || {};
        cellBox.append(h('div', { class: 'titlebar' },
            h('h2', null, 'Step ' + step + ' on ', h('span', { class: 'mono', text: node }),
              h('span', { class: 'muted', text: ' \u00b7 ' + (leaf.backend || '') + ' ' + (leaf.action || '') })),
            h('button', { type: 'button', class: 'link', text: 'Close', onclick: () => {
                selected = null;
                drawGrid();
                drawCell();
            } })));
        if (!cell) {
            cellBox.append(h('p', { class: 'muted' }, 'No result for this cell.'));
            return;
        }
        const params = leaf.params && Object.keys(leaf.params).length
            ? Object.entries(leaf.params).map(([k, v]) => k + '=' + v).join(' ') : '';
        cellBox.append(h('dl', { class: 'facts' },
            fact('Status', badge(cell.status)),
            fact('Attempts', String(cell.attempts)),
            fact('Exit code', String(cell.exit_code)),
            fact('Duration', fmtDuration(cell.duration_ms)),
            params ? fact('Params', h('span', { class: 'mono', text: params })) : null,
            cell.reason ? fact('Reason', cell.reason) : null,
            cell.waiting ? fact('Waiting', cell.waiting) : null,
            cellTask(step, node, cell) ? fact('Progress', progressText(cellTask(step, node, cell))) : null));
        cellBox.append(streamBlock('stdout', cell.output, cell.output_size, cell.output_dropped, step, node, cell));
        if (cell.error || cell.error_size || liveText(step, node, 'stderr', cell) !== undefined)
            cellBox.append(streamBlock('stderr', cell.error, cell.error_size, cell.error_dropped, step, node, cell));
        if (cell.truncated)
            cellBox.append(h('p', { class: 'muted' }, 'The agent truncated this output at its cap.'));
        const data = cell.data && Object.entries(cell.data);
        if (data && data.length)
            cellBox.append(h('h3', null, 'Data'), h('table', { class: 'list kv' },
                h('tbody', null, data.map(([k, v]) => h('tr', null, h('th', { text: k }), h('td', { class: 'mono', text: v }))))));
        if (cell.history && cell.history.length) {
            cellBox.append(h('h3', null, 'Earlier attempts'));
            for (const a of cell.history) {
                cellBox.append(h('details', { class: 'attempt' },
                    h('summary', null, 'attempt ' + a.attempt + ' ', badge(a.status),
                      ' exit ' + a.exit_code + ' \u00b7 ' + fmtDuration(a.duration_ms),
                      a.node ? ' \u00b7 on ' + a.node : '', a.late ? ' \u00b7 late' : ''),
                    a.output ? h('pre', { class: 'output', text: a.output }) : null,
                    a.error ? h('pre', { class: 'output stderr', text: a.error }) : null));
            }
        }
    };

    const streamBlock = (stream, text, size, dropped, step, node, cell) => {
        const whole = fullOutputs.get(step + '/' + node + '/' + stream + '/' + cell.attempts);
        const live = liveText(step, node, stream, cell);
        if (live === undefined && IN_FLIGHT.has(cell.status))
            seedLive(step, node, stream);
        const pre = h('pre', { class: 'output' + (stream === 'stderr' ? ' stderr' : ''),
                               id: 'output-' + stream,
                               text: whole !== undefined ? whole : live !== undefined ? live : text || '' });
        if (!text && live === undefined)
            pre.append(h('span', { class: 'muted', text: '(empty)' }));
        const block = h('div', { class: 'stream' }, h('h3', null, stream), pre);
        if (live !== undefined)
            return block;   // it runs: what came so far, and more as it comes
        const shown = new TextEncoder().encode(text || '').length;
        if (whole !== undefined) {
            block.append(h('p', { class: 'muted' }, 'All ' + fmtBytes(size) + '.'));
        } else if (size && size > shown) {
            const note = h('p', { class: 'muted' },
                'Showing the first ' + fmtBytes(shown) + ' of ' + fmtBytes(size)
                + (dropped ? ' (' + fmtBytes(dropped) + ' dropped from the middle by the cap)' : '') + '. ');
            note.append(h('button', { type: 'button', class: 'link', text: 'Load all', onclick: async (ev) => {
                ev.target.disabled = true;
                try {
                    const all = await loadOutput(id, node, step, stream, cell.attempts, size);
                    fullOutputs.set(step + '/' + node + '/' + stream + '/' + cell.attempts, all);
                    pre.textContent = all;
                    note.textContent = 'All ' + fmtBytes(size) + '.';
                } catch (err) {
                    ev.target.disabled = false;
                    flashError(err);
                }
            } }));
            block.append(note);
        }
        return block;
    };

    const refetch = async () => {
        const r = await api('GET', '/jobs/' + enc(id), undefined, { signal: abort.signal });
        if (!ctx.live())
            return;
        record = r;
        if (FINAL.has(r.status))
            setLive('');
        drawHead();
        drawGrid();
        drawCell();
        document.body.dataset.jobStatus = r.status;
    };

    const scheduleRefetch = () => {
        if (refetchTimer)
            return;
        // A large job's record is large: fetch it less often (at most every 5 s).
        const cells = record ? (record.expected || []).length * Math.max(1, record.steps || 1) : 0;
        refetchTimer = setTimeout(() => {
            refetchTimer = null;
            refetch().catch(onError);
        }, Math.min(5000, 300 + cells * 2));
    };

    const addEvents = (events) => {
        for (const e of events) {
            if (typeof e.seq === 'number' && e.seq <= lastSeq)
                continue;
            if (typeof e.seq === 'number')
                lastSeq = e.seq;
            eventsBody.append(h('tr', { class: 'ev-' + cssName(e.event) },
                h('td', { class: 'muted', text: e.seq }),
                h('td', { class: 'mono', text: fmtClock(e.time), title: fmtTime(e.time) }),
                h('td', null, eventBadge(e)),
                h('td', { class: 'mono', text: e.node || '' }),
                h('td', { text: e.step !== undefined ? e.step : '' }),
                h('td', { class: 'detail', text: e.detail || '' })));
        }
    };

    const fetchEvents = async () => {
        const r = await api('GET', '/jobs/' + enc(id) + '/events' + q({ after: lastSeq || undefined }),
                            undefined, { signal: abort.signal });
        if (ctx.live())
            addEvents((r && r.events) || []);
    };

    const fetchProgress = async () => {
        const p = await api('GET', '/jobs/' + enc(id) + '/progress', undefined, { signal: abort.signal });
        if (ctx.live())
            setProgress(p);
    };

    const onError = (err) => {
        if (err && err.name === 'AbortError')
            return;
        if (ctx.live())
            flashError(err);
    };

    const setLive = (text) => {
        liveEl.textContent = text;
    };

    // Live: the event stream while the job runs; polling if it breaks.
    const follow = async () => {
        let failures = 0;
        while (ctx.live() && record && !FINAL.has(record.status)) {
            streaming = true;
            setLive('\u25cf live');
            let ended = false;
            let broke = null;
            try {
                await sse('/jobs/' + enc(id) + '/stream' + q({ after: lastSeq || undefined }), (name, data) => {
                    let obj = null;
                    try {
                        obj = JSON.parse(data);
                    } catch (e) {
                        return;
                    }
                    if (name === 'event' && obj)
                        addEvents([obj]);
                    else if (name === 'output')
                        addOutput(obj);
                    else if (name === 'progress') {
                        setProgress(obj);
                        scheduleRefetch();
                    }
                    else if (name === 'end')
                        ended = true;
                    else if (name === 'error')
                        broke = obj;
                }, abort.signal);
                if (broke)
                    throw new ApiError(0, broke, 'event stream error');
                failures = 0;
            } catch (err) {
                if (err.name === 'AbortError' || !ctx.live())
                    return;
                failures++;
                if (err.status === 404 || err.status === 405 || failures > 3) {
                    streaming = false;
                    break;   // no stream here: poll instead
                }
                await sleep(1000 * failures);
            }
            if (!ctx.live())
                return;
            await Promise.all([refetch(), fetchEvents()]).catch(onError);
            if (ended)
                break;
        }
        streaming = false;
        if (!ctx.live())
            return;
        if (record && !FINAL.has(record.status)) {
            setLive('\u25cf live (polling)');
            stopPoll = every(ctx, 2000, async () => {
                await Promise.all([refetch(), fetchEvents(), fetchProgress()]);
                if (FINAL.has(record.status)) {
                    stopPoll();
                    setLive('');
                }
            });
        } else {
            setLive('');
        }
    };

    const doCancel = async () => {
        if (!confirm('Cancel job ' + id + '?'))
            return;
        try {
            await api('POST', '/jobs/' + enc(id) + '/cancel', { reason: 'cancelled from the dashboard' });
            flash('Job ' + id + ' cancelled.', 'ok');
            await Promise.all([refetch(), fetchEvents()]);
        } catch (err) {
            flashError(err);
        }
    };

    const doRetry = async (failedOnly) => {
        try {
            const r = await api('POST', '/jobs/' + enc(id) + '/retry', failedOnly ? { failed_only: true } : {});
            flash('Retry started: ' + r.job, 'ok');
            location.hash = '#/jobs/' + enc(r.job);
        } catch (err) {
            flashError(err);
        }
    };

    const doDelete = async () => {
        if (!confirm('Delete job ' + id + ' and its outputs?'))
            return;
        try {
            await api('DELETE', '/jobs/' + enc(id));
            flash('Job ' + id + ' deleted.', 'ok');
            location.hash = '#/jobs';
        } catch (err) {
            flashError(err);
        }
    };

    (async () => {
        try {
            await Promise.all([refetch(), fetchEvents()]);
        } catch (err) {
            if (err.name === 'AbortError' || !ctx.live())
                return;
            if (err.status === 404) {
                clear(ctx.main).append(h('p', { class: 'error', text: 'No job ' + id + '.' }),
                    h('p', null, h('a', { href: '#/jobs' }, 'Back to the jobs')));
                return;
            }
            return flashError(err);
        }
        if (!FINAL.has(record.status))
            fetchProgress().catch(onError);
        follow();
    })();

    return () => {
        abort.abort();
        clearTimeout(refetchTimer);
        if (stopPoll)
            stopPoll();
        delete document.body.dataset.jobStatus;
        void streaming;
    };
}

// A cell's statuses in the order a job's rows are drawn: failures first,
// then what is still under way, then what went well.
const CELL_ORDER = ['failed', 'timeout', 'lost', 'offline', 'interrupted', 'unsupported',
                    'cancelled', 'retry_wait', 'running', 'acknowledged', 'dispatched',
                    'pending', 'drained', 'skipped', 'success'];
const CELL_RANK = new Map(CELL_ORDER.map((s, i) => [s, i]));

function cellRank(status) {
    const rank = CELL_RANK.get(status);
    return rank === undefined ? CELL_ORDER.length : rank;
}

// The nodes of a job's results, each with its worst status over the
// steps, and the counts per status per step: {nodes: Map(node -> worst),
// steps: [Map(status -> n)], rows: Map(status -> nodes having it)}.
function cellCounts(results, nodes, nsteps) {
    const worst = new Map();
    const steps = [];
    const rows = new Map();
    for (const node of nodes)
        worst.set(node, null);
    for (let s = 0; s < nsteps; s++) {
        const counts = new Map();
        for (const [node, cell] of Object.entries(results[String(s)] || {})) {
            if (!cell || typeof cell.status !== 'string')
                continue;
            counts.set(cell.status, (counts.get(cell.status) || 0) + 1);
            const was = worst.get(node);
            if (was === null || was === undefined || cellRank(cell.status) < cellRank(was))
                worst.set(node, cell.status);
        }
        steps.push(counts);
    }
    for (const node of worst.keys()) {
        const seen = new Set();
        for (let s = 0; s < nsteps; s++) {
            const cell = (results[String(s)] || {})[node];
            if (cell && typeof cell.status === 'string' && !seen.has(cell.status)) {
                seen.add(cell.status);
                rows.set(cell.status, (rows.get(cell.status) || 0) + 1);
            }
        }
    }
    return { nodes: worst, steps, rows };
}

// Draws into TBODY the rows ROW(i) for i in [0, COUNT): all of them up to
// VIRTUAL_ROWS; past that only those in BOX's view (and VIRTUAL_OVERSCAN
// either side), between two spacer rows as tall as the rows left out.
// PITCH holds the rows' height with the table's spacing ({px}), measured
// from the rows drawn. BOX scrolls (class "virtual" while it is).
function virtualRows(box, tbody, count, row, pitch) {
    // Read before the rows go: without them the box cannot scroll, and a
    // read after would clamp its position to the top
    const view = box.clientHeight || 600;
    const scrolled = box.scrollTop;
    box.classList.toggle('virtual', count > VIRTUAL_ROWS);
    clear(tbody);
    let first = 0, last = count;
    if (count > VIRTUAL_ROWS) {
        first = Math.min(count - 1, Math.max(0, Math.floor(scrolled / pitch.px) - VIRTUAL_OVERSCAN));
        last = Math.min(count, first + Math.ceil(view / pitch.px) + 2 * VIRTUAL_OVERSCAN);
    }
    const spacer = (rows, where) => {
        const tr = h('tr', { class: 'spacer', dataset: { where } });
        tr.style.height = rows * pitch.px + 'px';   // CSSOM: the policy allows no style attribute
        return tr;
    };
    if (first > 0)
        tbody.append(spacer(first, 'above'));
    for (let i = first; i < last; i++)
        tbody.append(row(i));
    if (last < count)
        tbody.append(spacer(count - last, 'below'));
    const drawn = tbody.querySelectorAll('tr:not(.spacer)');
    const px = drawn.length > 1 ? drawn[1].offsetTop - drawn[0].offsetTop : 0;
    if (count > VIRTUAL_ROWS && px > 0 && Math.abs(px - pitch.px) > 1) {
        pitch.px = px;
        virtualRows(box, tbody, count, row, pitch);
    }
}

// Calls DRAW at the next animation frame after BOX scrolls, once a frame.
function onScrollFrame(box, draw) {
    let frame = 0;
    box.addEventListener('scroll', () => {
        if (!frame)
            frame = requestAnimationFrame(() => {
                frame = 0;
                draw();
            });
    });
}

// A cell status's colour group, as the badges colour them (style.css).
const CELL_TONE = { success: 'ok', failed: 'bad', timeout: 'bad', lost: 'bad', offline: 'bad',
                    interrupted: 'bad', unsupported: 'bad', retry_wait: 'warn', drained: 'warn',
                    running: 'run', dispatched: 'run', acknowledged: 'run' };

function toneColour(status) {
    const tone = CELL_TONE[status] || 'idle';
    return getComputedStyle(document.documentElement).getPropertyValue('--' + tone).trim() || '#888';
}

// The durations of a step's finished cells as a small bar chart (inline
// SVG, log scale from the fastest to the slowest) with p50, p90 and max.
function durationHistogram(durations, step) {
    const svgNS = 'http://www.w3.org/2000/svg';
    const box = h('div', { class: 'histogram small muted', dataset: { step: String(step) } });
    if (!durations.length)
        return null;
    durations.sort((a, b) => a - b);
    const pick = (p) => durations[Math.min(durations.length - 1, Math.floor(p * durations.length))];
    const lo = Math.max(1, durations[0]);
    const hi = Math.max(lo + 1, durations[durations.length - 1]);
    const BINS = 24, W = 240, H = 36;
    const bins = new Array(BINS).fill(0);
    const span = Math.log(hi) - Math.log(lo);
    for (const d of durations) {
        const at = span > 0 ? Math.floor((Math.log(Math.max(lo, d)) - Math.log(lo)) / span * BINS) : 0;
        bins[Math.min(BINS - 1, Math.max(0, at))]++;
    }
    const top = Math.max(...bins);
    const svg = document.createElementNS(svgNS, 'svg');
    svg.setAttribute('class', 'hist');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('width', String(W));
    svg.setAttribute('height', String(H));
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'durations of step ' + step);
    bins.forEach((n, i) => {
        if (!n)
            return;
        const bar = document.createElementNS(svgNS, 'rect');
        const barH = Math.max(1, Math.round(n / top * (H - 2)));
        bar.setAttribute('x', String(i * (W / BINS) + 0.5));
        bar.setAttribute('y', String(H - barH));
        bar.setAttribute('width', String(W / BINS - 1));
        bar.setAttribute('height', String(barH));
        const tip = document.createElementNS(svgNS, 'title');
        tip.textContent = n + ' cell' + (n === 1 ? '' : 's');
        bar.append(tip);
        svg.append(bar);
    });
    box.append(svg, h('div', { text: durations.length + ' done \u00b7 p50 ' + fmtDuration(pick(0.5))
        + ' \u00b7 p90 ' + fmtDuration(pick(0.9)) + ' \u00b7 max ' + fmtDuration(hi) }));
    return box;
}

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function fact(term, value) {
    return [h('dt', null, term), h('dd', null, value)];
}

function jobLink(jobId) {
    return h('a', { href: '#/jobs/' + enc(jobId), class: 'mono', text: jobId });
}

function legend() {
    const list = ['pending', 'dispatched', 'running', 'success', 'failed', 'timeout', 'skipped',
                  'lost', 'cancelled'];
    return h('p', { class: 'legend small' }, list.map((s) => badge(s)));
}

// A running task's progress as text: "42% · sleeping 1 of 60 s".
function progressText(task) {
    const parts = [];
    if (typeof task.percent === 'number' && task.percent >= 0)
        parts.push(task.percent + '%');
    if (task.message)
        parts.push(task.message);
    else if (task.kind)
        parts.push(task.kind);
    return parts.join(' \u00b7 ');
}

// What a running cell shows of its progress: a bar when the percent is
// known, and the text.
function progressEls(task) {
    const known = typeof task.percent === 'number' && task.percent >= 0;
    return [known ? h('progress', { max: 100, value: Math.min(100, task.percent) }) : null,
            h('span', { class: 'cprogress', text: progressText(task) })];
}

// Reads a whole output stream, a page at a time (job.output).
async function loadOutput(id, node, step, stream, attempt, size) {
    const chunks = [];
    let offset = 0;
    for (let guard = 0; guard < 64 && offset < size; guard++) {
        const page = await api('GET', '/jobs/' + enc(id) + '/output'
                               + q({ node, step, stream, attempt, offset }));
        const bytes = pageBytes(page.data);
        chunks.push(bytes);
        if (!bytes.length || page.next <= offset)
            break;
        offset = page.next;
        size = page.size;
    }
    const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of chunks) {
        all.set(c, at);
        at += c.length;
    }
    return new TextDecoder('utf-8', { fatal: false }).decode(all);
}

// An output page's data: the stream's bytes, base64 in JSON.
function pageBytes(data) {
    if (typeof data !== 'string')
        return new Uint8Array();
    let bin;
    try {
        bin = atob(data);
    } catch (e) {
        return new TextEncoder().encode(data);
    }
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++)
        out[i] = bin.charCodeAt(i);
    return out;
}

// ------------------------------------------------------------------
// #/nodes

views.nodes = (ctx) => {
    if (ctx.parts[1])
        return nodeView(ctx, ctx.parts[1]);
    const show = ctx.query.get('show') || 'all';
    const tbody = h('tbody');
    const summary = h('p', { class: 'muted' });
    const filterInput = h('input', { type: 'search', placeholder: 'filter by id, group or label',
                                     id: 'node-filter', value: ctx.query.get('q') || '' });
    let nodes = [];
    const filters = h('nav', { class: 'filters' }, ['all', 'online', 'offline', 'drained', 'incompatible'].map((s) =>
        h('a', { href: '#/nodes' + (s === 'all' ? '' : '?show=' + s),
                 class: 'filter' + (s === show ? ' active' : ''), dataset: { show: s } }, s)));
    const listBox = h('div', { class: 'vscroll' });
    const rowPitch = { px: 40 };
    let shownNodes = [];
    listBox.append(h('table', { class: 'list', id: 'nodes' },
          h('thead', null, h('tr', null, ['Node', 'State', 'Host', 'Groups', 'Labels', 'Running',
                                          'Last seen', 'Version', ''].map((t) => h('th', null, t)))),
          tbody));
    ctx.main.append(h('div', { class: 'titlebar' }, h('h1', null, 'Nodes'), filterInput),
        filters, listBox, summary);

    // One node's row.
    const rowOf = (n) => {
            const state = n.drained ? 'drained' : n.status;
            const labels = Object.entries(n.labels || {});
            const act = n.drained
                ? roleButton('admin', 'Resume', () => nodeAction(n.id, 'resume'), { class: 'small-btn', dataset: { needs: 'admin', action: 'resume' } })
                : roleButton('admin', 'Drain', () => nodeAction(n.id, 'drain'), { class: 'small-btn', dataset: { needs: 'admin', action: 'drain' } });
            return h('tr', { dataset: { node: n.id, state } },
                h('td', null, h('a', { class: 'mono', href: '#/nodes/' + enc(n.id), text: n.id })),
                h('td', null, badge(n.status), n.drained ? [' ', badge('drained')] : null,
                  n.duplicate ? h('span', { class: 'warn small', title: 'a second agent was refused '
                    + n.duplicate.count + ' times, last ' + fmtTime(n.duplicate.last_at) + ' from ' + n.duplicate.hostname,
                  text: ' duplicate!' }) : null),
                h('td', null, n.hostname, n.relay ? h('div', { class: 'small muted', text: 'via relay ' + n.relay }) : null),
                h('td', null, (n.groups || []).map((g) => h('a', { class: 'chip', href: '#/run?target=' + enc('group:' + g), text: g }))),
                h('td', null, labels.map(([k, v]) => h('span', { class: 'chip label', text: k + '=' + v }))),
                h('td', { text: n.running + ' / ' + n.concurrency }),
                h('td', null, timeEl(n.last_seen, true)),
                h('td', { class: 'muted', text: n.version }),
                h('td', null, act));
    };

    // The rows: only those in view past VIRTUAL_ROWS nodes.
    const drawRows = () => {
        if (!shownNodes.length) {
            clear(tbody);
            tbody.append(h('tr', null, h('td', { colspan: 9, class: 'muted empty' }, 'No nodes to show.')));
            return;
        }
        virtualRows(listBox, tbody, shownNodes.length, (i) => rowOf(shownNodes[i]), rowPitch);
    };
    onScrollFrame(listBox, drawRows);

    const draw = () => {
        const needle = filterInput.value.trim().toLowerCase();
        shownNodes = nodes.filter((n) => {
            if (show !== 'all' && !(show === 'drained' ? n.drained : n.status === show))
                return false;
            if (!needle)
                return true;
            const hay = [n.id, n.hostname].concat(n.groups || [],
                Object.entries(n.labels || {}).map(([k, v]) => k + '=' + v)).join(' ').toLowerCase();
            return hay.includes(needle);
        });
        drawRows();
        const online = nodes.filter((n) => n.status === 'online').length;
        const drained = nodes.filter((n) => n.drained).length;
        summary.textContent = nodes.length + ' nodes: ' + online + ' online, '
            + (nodes.length - online) + ' offline, ' + drained + ' drained \u00b7 live';
    };
    filterInput.addEventListener('input', draw);

    const refresh = async () => {
        const r = await api('GET', '/nodes');
        if (!ctx.live())
            return;
        nodes = (r && r.nodes) || [];
        draw();
        drawNodeCounts(nodes);
    };

    const nodeAction = async (nodeId, what) => {
        if (what === 'drain' && !confirm('Drain ' + nodeId + '? It takes no new jobs until resumed.'))
            return;
        try {
            await api('POST', '/nodes/' + enc(nodeId) + '/' + what);
            flash(nodeId + (what === 'drain' ? ' drained.' : ' resumed.'), 'ok');
            await refresh();
        } catch (err) {
            flashError(err);
        }
    };
    return every(ctx, 4000, refresh);
};

// ------------------------------------------------------------------
// #/nodes/ID

function nodeView(ctx, id) {
    const head = h('div', { class: 'jobhead' });
    const actions = h('div', { class: 'actions' });
    const slotsBody = h('tbody');
    const counters = h('p', { class: 'muted small' });
    const backendsBox = h('div');
    const historyBox = h('div');
    ctx.main.append(
        h('p', { class: 'crumbs' }, h('a', { href: '#/nodes' }, 'Nodes'), ' / ',
          h('span', { class: 'mono', text: id })),
        head, actions,
        h('h2', null, 'Running tasks'),
        h('table', { class: 'list', id: 'slots' },
          h('thead', null, h('tr', null, ['Job', 'Step', 'Attempt', 'Action', 'Status', 'Since',
                                          'Progress'].map((t) => h('th', null, t)))),
          slotsBody),
        counters,
        h('h2', null, 'Backends'), backendsBox,
        h('h2', null, 'Registrations'), historyBox);

    const act = async (what) => {
        if (what === 'drain' && !confirm('Drain ' + id + '? It takes no new jobs until resumed.'))
            return;
        try {
            await api('POST', '/nodes/' + enc(id) + '/' + what);
            flash(id + (what === 'drain' ? ' drained.' : ' resumed.'), 'ok');
            await refresh();
        } catch (err) {
            flashError(err);
        }
    };

    let drawnBackends = false;
    const refresh = async () => {
        const [n, w] = await Promise.all([
            api('GET', '/nodes/' + enc(id)),
            api('GET', '/nodes/' + enc(id) + '/workers').catch(() => null),
        ]);
        if (!ctx.live())
            return;
        clear(head).append(
            h('div', { class: 'titlebar' }, h('h1', { class: 'mono', text: n.id }),
              badge(n.status, 'big'), n.drained ? badge('drained', 'big') : null),
            h('dl', { class: 'facts' },
              fact('Host', n.hostname),
              fact('Version', n.version),
              fact('Groups', (n.groups || []).map((g) => h('span', { class: 'chip', text: g }))),
              fact('Labels', Object.entries(n.labels || {}).map(([k, v]) =>
                  h('span', { class: 'chip label', text: k + '=' + v }))),
              Object.keys(n.facts || {}).length
                  ? fact('Facts', h('span', { id: 'node-facts' },
                      Object.entries(n.facts).map(([k, v]) =>
                          h('span', { class: 'chip fact', title: 'target: fact:' + k + '=' + v,
                                      text: k + '=' + v }))))
                  : null,
              fact('Running', n.running + ' / ' + n.concurrency),
              fact('Last seen', timeEl(n.last_seen, true)),
              fact('Registered', timeEl(n.registered_at)),
              n.relay ? fact('Relay', n.relay) : null,
              n.incompatible ? fact('Incompatible', n.incompatible) : null));
        clear(actions).append(n.drained
            ? roleButton('admin', 'Resume', () => act('resume'), { id: 'node-resume' })
            : roleButton('admin', 'Drain', () => act('drain'), { id: 'node-drain' }),
            h('a', { class: 'button secondary', href: '#/run?target=' + enc('node:' + n.id) }, 'Run a job here'));
        clear(slotsBody);
        const slots = (w && w.slots) || [];
        for (const s of slots) {
            slotsBody.append(h('tr', null,
                h('td', null, jobLink(s.job)),
                h('td', { text: s.step }),
                h('td', { text: s.attempt }),
                h('td', { class: 'mono', text: s.action }),
                h('td', null, badge(s.status)),
                h('td', null, s.since ? timeEl(s.since, true) : ''),
                h('td', { text: [s.percent !== undefined ? s.percent + '%' : '', s.kind || '', s.message || '']
                    .filter(Boolean).join(' \u00b7 ') })));
        }
        if (!slots.length)
            slotsBody.append(h('tr', null, h('td', { colspan: 7, class: 'muted empty' },
                w ? 'Nothing running.' : 'Not known.')));
        if (w && w.counters) {
            const c = w.counters;
            counters.textContent = 'Since the broker started: ' + c.run + ' attempts ended, '
                + c.failed + ' failed, ' + c.lost + ' lost, ' + c.retried + ' retried, '
                + c.claims + ' any-node claims.';
        }
        if (!drawnBackends) {
            drawnBackends = true;
            clear(backendsBox);
            const rows = [];
            for (const b of n.backends || []) {
                (b.actions || []).forEach((a, i) => rows.push(h('tr', null,
                    h('td', { class: 'mono', text: i ? '' : b.name + (b.version ? ' ' + b.version : '') }),
                    h('td', { class: 'mono', text: a.name }),
                    h('td', null, badge(a.kind === 'modify' ? 'modify' : 'query')),
                    h('td', { text: a.help || '' }),
                    h('td', { class: 'mono small', text: (a.params || []).map((p) =>
                        p.name + (p.required ? '' : '?') + ':' + p.type).join(' ') }))));
            }
            backendsBox.append(rows.length
                ? h('table', { class: 'list', id: 'backends' },
                    h('thead', null, h('tr', null, ['Backend', 'Action', 'Kind', 'What it does', 'Parameters']
                        .map((t) => h('th', null, t)))),
                    h('tbody', null, rows))
                : h('p', { class: 'muted' }, 'This node offers no action.'));
            api('GET', '/nodes/' + enc(id) + '/history').then((r) => {
                if (!ctx.live())
                    return;
                const list = (r && r.history) || [];
                clear(historyBox).append(list.length ? h('table', { class: 'list' }, h('tbody', null,
                    list.map((e) => h('tr', null,
                        h('td', null, timeEl(e.time)),
                        h('td', null, badge(e.event)),
                        h('td', { text: 'agent ' + (e.agent_version || '?') + ' \u00b7 ' + e.actions + ' actions'
                            + (e.added && e.added.length ? ' \u00b7 added ' + e.added.join(', ') : '')
                            + (e.removed && e.removed.length ? ' \u00b7 removed ' + e.removed.join(', ') : '') })))))
                    : h('p', { class: 'muted' }, 'None.'));
            }).catch(() => {});
        }
    };
    return every(ctx, 3000, refresh);
}

// ------------------------------------------------------------------
// #/run

views.run = (ctx) => {
    const catalog = new Map();   // backend -> Map(action -> {kind, help, params})
    const targets = new Set(['all', 'any:all']);
    const form = h('form', { class: 'card runform', id: 'run-form', novalidate: true });
    const note = h('p', { class: 'muted', text: 'Reading what the nodes offer\u2026' });
    ctx.main.append(h('h1', null, 'Run a job'), note, form);

    const targetInput = h('input', { name: 'target', id: 'target', list: 'target-list', required: true,
                                     value: ctx.query.get('target') || 'all', spellcheck: 'false' });
    const targetList = h('datalist', { id: 'target-list' });
    const backendSel = h('select', { name: 'backend', id: 'backend', required: true });
    const actionSel = h('select', { name: 'action', id: 'action', required: true });
    const actionHelp = h('p', { class: 'muted small', id: 'action-help' });
    const paramsBox = h('fieldset', { class: 'params', id: 'params' });
    const strategySel = h('select', { name: 'strategy', id: 'strategy' },
        h('option', { value: 'fail-fast' }, 'fail-fast'), h('option', { value: 'continue' }, 'continue'));
    const jobTimeout = h('input', { name: 'timeout', id: 'job-timeout', placeholder: 'e.g. 10m', size: 8 });
    const taskTimeout = h('input', { name: 'task_timeout', id: 'task-timeout', placeholder: 'e.g. 30s', size: 8 });
    const retries = h('input', { name: 'max_retries', id: 'max-retries', type: 'number', min: 0, max: 10, placeholder: '0' });
    const priority = h('input', { name: 'priority', id: 'priority', type: 'number', min: -100, max: 100, placeholder: '0' });
    const idem = h('input', { name: 'idempotency_key', id: 'idempotency-key', placeholder: 'optional' });
    const submit = h('button', { type: 'submit', id: 'run-submit' }, 'Run');
    const check = h('button', { type: 'button', id: 'run-check-button', class: 'secondary',
                                title: 'a dry run: where the job would run, nothing is started' }, 'Check');
    const result = h('div', { id: 'run-result' });

    form.append(
        row('Target', targetInput, h('span', { class: 'muted small' },
            'all, group:G, node:A,B, label:K=V, any:\u2026, or an expression (group:web and not node:web-03)')),
        targetList,
        row('Backend', backendSel),
        row('Action', actionSel, actionHelp),
        paramsBox,
        h('fieldset', { class: 'options' }, h('legend', null, 'Options'),
          row('Strategy', strategySel),
          row('Job timeout', jobTimeout),
          row('Task timeout', taskTimeout),
          row('Retries', retries),
          row('Priority', priority),
          row('Idempotency key', idem)),
        h('div', { class: 'actions' }, submit, check),
        result);

    function row(label, ...controls) {
        const id = controls[0] && controls[0].id;
        return h('div', { class: 'row' }, h('label', { for: id || null }, label), h('div', null, controls));
    }

    const currentAction = () => {
        const acts = catalog.get(backendSel.value);
        return acts ? acts.get(actionSel.value) : null;
    };

    const drawActions = () => {
        clear(actionSel);
        const acts = catalog.get(backendSel.value) || new Map();
        for (const name of [...acts.keys()].sort())
            actionSel.append(h('option', { value: name }, name));
        const want = ctx.query.get('action');
        if (want && acts.has(want))
            actionSel.value = want;
        else {
            // Unasked, the form starts on an action that changes nothing
            const query = [...acts.keys()].sort().find((a) => acts.get(a).kind !== 'modify');
            if (query)
                actionSel.value = query;
        }
        drawParams();
    };

    const drawParams = () => {
        clear(paramsBox);
        const act = currentAction();
        actionHelp.textContent = act ? (act.kind + (act.help ? ' \u00b7 ' + act.help : '')) : '';
        submit.disabled = !!act && act.kind === 'modify' && !can('operator');
        submit.title = submit.disabled ? 'modify actions need the operator role' : '';
        paramsBox.append(h('legend', null, 'Parameters'));
        if (!act || !act.params.length) {
            paramsBox.append(h('p', { class: 'muted small' }, 'This action takes no parameters.'));
            return;
        }
        for (const p of act.params) {
            const id = 'param-' + p.name;
            let input;
            if (p.type === 'bool') {
                input = h('select', { id, name: p.name, dataset: { param: p.name } },
                    h('option', { value: '' }, p.default !== undefined ? '(default: ' + p.default + ')' : '(not set)'),
                    h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
            } else {
                input = h('input', {
                    id, name: p.name, dataset: { param: p.name, type: p.type },
                    type: p.type === 'int' ? 'number' : 'text',
                    min: p.min, max: p.max,
                    placeholder: p.default !== undefined ? 'default: ' + p.default : p.type,
                    required: !!p.required, spellcheck: 'false',
                });
            }
            paramsBox.append(h('div', { class: 'row' },
                h('label', { for: id }, p.name, p.required ? h('span', { class: 'req', text: ' *' }) : null),
                h('div', null, input, h('span', { class: 'muted small',
                    text: ' ' + [p.type, p.pattern ? 'pattern ' + p.pattern : '',
                                 p.min !== undefined ? p.min + '..' + p.max : '', p.help || '']
                        .filter(Boolean).join(' \u00b7 ') }))));
        }
    };

    backendSel.addEventListener('change', drawActions);
    actionSel.addEventListener('change', drawParams);

    // The job the form describes, or null (with a message) when it lacks a part.
    const buildJob = () => {
        clear(result);
        const task = { backend: backendSel.value, action: actionSel.value };
        const params = {};
        for (const el of paramsBox.querySelectorAll('[data-param]')) {
            if (el.value === '')
                continue;
            params[el.dataset.param] = el.dataset.type === 'int' && /^-?\d+$/.test(el.value)
                ? Number(el.value) : el.value;
        }
        if (Object.keys(params).length)
            task.params = params;
        if (taskTimeout.value.trim())
            task.timeout = taskTimeout.value.trim();
        if (retries.value !== '')
            task.max_retries = Number(retries.value);
        const job = { target: targetInput.value.trim(), tasks: [task] };
        if (strategySel.value !== 'fail-fast')
            job.strategy = strategySel.value;
        if (jobTimeout.value.trim())
            job.timeout = jobTimeout.value.trim();
        if (priority.value !== '')
            job.priority = Number(priority.value);
        if (idem.value.trim())
            job.idempotency_key = idem.value.trim();
        if (!job.target || !task.backend || !task.action) {
            result.append(h('p', { class: 'error', text: 'A target, a backend and an action are needed.' }));
            return null;
        }
        return job;
    };

    const showError = (err) => {
        if (!ctx.live())
            return;
        result.append(h('div', { class: 'error', role: 'alert', id: 'run-error' },
            h('p', { text: errorText(err) }),
            err.details && err.details.length ? h('ul', null, err.details.map((d) => h('li', { text: d }))) : null));
    };

    form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const job = buildJob();
        if (!job)
            return;
        submit.disabled = true;
        try {
            const r = await api('POST', '/jobs', job);
            location.hash = '#/jobs/' + enc(r.job);
        } catch (err) {
            showError(err);
        } finally {
            submit.disabled = false;
        }
    });

    // A dry run (job.check): where it would run, and where not, and why.
    check.addEventListener('click', async () => {
        const job = buildJob();
        if (!job)
            return;
        check.disabled = true;
        try {
            const r = await api('POST', '/jobs/check', job);
            if (!ctx.live())
                return;
            const nodes = r.nodes || [];
            const notRun = r.not_run || [];
            result.append(h('div', { class: 'card check', id: 'run-check' },
                h('p', null, h('strong', null, 'Check: '), nodes.length
                    ? (r.any ? 'one of ' : '') + nodes.length + ' node' + (nodes.length === 1 ? '' : 's')
                      + ' would run it: ' : 'no node would run it.',
                  h('span', { class: 'mono', text: nodes.join(', ') })),
                notRun.length ? h('ul', null, notRun.map((n) => h('li', null,
                    h('span', { class: 'mono', text: n.node }), ': ' + (n.reason || n.status)))) : null));
        } catch (err) {
            showError(err);
        } finally {
            check.disabled = false;
        }
    });

    (async () => {
        let list;
        try {
            list = await api('GET', '/nodes');
        } catch (err) {
            note.textContent = errorText(err);
            return;
        }
        const nodes = (list && list.nodes) || [];
        for (const n of nodes) {
            targets.add('node:' + n.id);
            for (const g of n.groups || [])
                targets.add('group:' + g);
            for (const [k, v] of Object.entries(n.labels || {}))
                targets.add('label:' + k + '=' + v);
        }
        for (const t of [...targets].sort())
            targetList.append(h('option', { value: t }));
        // What the nodes declare: ask the online ones (at most 32) for their backends.
        const online = nodes.filter((n) => n.status === 'online' && !n.drained).slice(0, 32);
        const details = await Promise.all(online.map((n) =>
            api('GET', '/nodes/' + enc(n.id)).catch(() => null)));
        if (!ctx.live())
            return;
        for (const d of details) {
            for (const b of (d && d.backends) || []) {
                if (!catalog.has(b.name))
                    catalog.set(b.name, new Map());
                const acts = catalog.get(b.name);
                for (const a of b.actions || [])
                    if (!acts.has(a.name))
                        acts.set(a.name, { kind: a.kind, help: a.help, params: a.params || [] });
            }
        }
        if (!catalog.size) {
            note.textContent = 'No online node declares any action: start an agent first.';
            submit.disabled = true;
            return;
        }
        note.textContent = 'Actions and parameters as ' + online.length + ' online node'
            + (online.length === 1 ? '' : 's') + ' declare them.';
        for (const name of [...catalog.keys()].sort())
            backendSel.append(h('option', { value: name }, name));
        const want = ctx.query.get('backend');
        if (want && catalog.has(want))
            backendSel.value = want;
        else {
            // Unasked, a backend with an action that changes nothing (system
            // when there is one), not the first in the alphabet (apt)
            const queries = (b) => [...catalog.get(b).values()].some((a) => a.kind !== 'modify');
            const first = catalog.has('system') && queries('system') ? 'system'
                        : [...catalog.keys()].sort().find(queries);
            if (first)
                backendSel.value = first;
        }
        drawActions();
    })();
};

// ------------------------------------------------------------------
// #/keys

views.keys = (ctx) => {
    const box = h('div', { id: 'keys' });
    ctx.main.append(h('h1', null, 'Keys'),
        h('p', { class: 'muted' }, 'Agent and client CURVE keys the broker knows. Accepting and rejecting needs the admin role.'),
        box);
    const groups = [['pending', 'Pending'], ['accepted', 'Enrolled'], ['rejected', 'Rejected']];

    const refresh = async () => {
        let r;
        try {
            r = await api('GET', '/keys');
        } catch (err) {
            if (err.status === 403) {
                clear(box).append(h('p', { class: 'error', id: 'keys-forbidden', text:
                    'Your token may not list keys: that needs the admin role'
                    + (session.role ? ' (yours is ' + session.role + ')' : '') + '.' }));
                return;
            }
            throw err;
        }
        if (!ctx.live())
            return;
        const keys = (r && r.keys) || [];
        clear(box);
        for (const [status, title] of groups) {
            const list = keys.filter((k) => k.status === status);
            box.append(h('h2', null, title + ' ', h('span', { class: 'count', text: list.length })));
            if (!list.length) {
                box.append(h('p', { class: 'muted empty', dataset: { keys: status } }, 'None.'));
                continue;
            }
            box.append(h('table', { class: 'list', dataset: { keys: status } },
                h('thead', null, h('tr', null, ['Key', 'Kind', 'Node / name', 'Host', 'Role',
                                                'First seen', 'Accepted', ''].map((t) => h('th', null, t)))),
                h('tbody', null, list.map((k) => h('tr', { dataset: { key: k.key } },
                    h('td', { class: 'mono key', text: k.key }),
                    h('td', { text: k.kind }),
                    h('td', { class: 'mono', text: k.node || k.name || '' }),
                    h('td', { text: k.hostname || '' }),
                    h('td', { text: k.role || '' }),
                    h('td', null, k.first_seen ? timeEl(k.first_seen, true) : ''),
                    h('td', null, k.accepted_at ? timeEl(k.accepted_at, true) : ''),
                    h('td', { class: 'row-actions' },
                      status !== 'accepted' ? roleButton('admin', 'Accept', () => keyAction(k, 'accept'), { class: 'small-btn' }) : null,
                      status !== 'rejected' ? roleButton('admin', 'Reject', () => keyAction(k, 'reject'), { class: 'small-btn danger' }) : null))))));
        }
    };

    const keyAction = async (k, what) => {
        const who = k.node || k.name || k.key;
        if (what === 'reject' && !confirm('Reject the key of ' + who + '? It is refused from now on.'))
            return;
        try {
            await api('POST', '/keys/' + what, { key: k.key });
            flash('Key of ' + who + (what === 'accept' ? ' accepted.' : ' rejected.'), 'ok');
            await refresh();
        } catch (err) {
            flashError(err);
        }
    };
    return every(ctx, 5000, refresh);
};

// ------------------------------------------------------------------
// #/audit

const AUDIT_SINCE = [['', 'any time'], ['1h', 'last hour'], ['24h', 'last day'],
                     ['7d', 'last week'], ['30d', 'last 30 days']];
const AUDIT_SINCE_MS = { '1h': 3600e3, '24h': 86400e3, '7d': 7 * 86400e3, '30d': 30 * 86400e3 };

views.audit = (ctx) => {
    const get = (k) => ctx.query.get(k) || '';
    const filter = { who: get('who'), request_type: get('type'), object: get('object'),
                     outcome: get('outcome'), since: get('since') };
    const input = (name, value, placeholder) =>
        h('input', { name, value, placeholder, type: 'text', size: 16, 'aria-label': placeholder });
    const sinceSel = h('select', { name: 'since', 'aria-label': 'since' },
        AUDIT_SINCE.map(([v, t]) => h('option', { value: v, selected: v === filter.since }, t)));
    const outcomeSel = h('select', { name: 'outcome', 'aria-label': 'outcome' },
        [['', 'any outcome'], ['ok', 'ok'], ['error', 'error'], ['refused', 'refused']].map(([v, t]) =>
            h('option', { value: v, selected: v === filter.outcome }, t)));
    const form = h('form', { class: 'filters', id: 'audit-filters', onsubmit: (e) => {
        e.preventDefault();
        const data = new FormData(form);
        const params = {};
        for (const k of ['who', 'type', 'object', 'outcome', 'since'])
            params[k] = (data.get(k) || '').trim();
        location.hash = '#/audit' + q(params);
    } },
        input('who', filter.who, 'who (a name)'),
        input('type', filter.request_type, 'request (job. or job.cancel)'),
        input('object', filter.object, 'object (job, node, key...)'),
        outcomeSel, sinceSel,
        h('button', { type: 'submit' }, 'Filter'),
        h('a', { href: '#/audit', class: 'button secondary' }, 'Clear'));
    const tbody = h('tbody');
    const foot = h('p', { class: 'muted' });
    let next = null;
    let shown = 0;
    const more = h('button', { type: 'button', id: 'more-audit', hidden: true,
                               onclick: () => load(next).catch(flashError) }, 'Show older entries');
    ctx.main.append(
        h('div', { class: 'titlebar' }, h('h1', null, 'Audit trail')),
        h('p', { class: 'muted' }, 'Every request that changed something, and refused attempts ' +
          '(at most one per caller per 10 s), newest first. Needs the admin role.'),
        form,
        h('table', { class: 'list', id: 'audit' },
          h('thead', null, h('tr', null, ['Time', 'Who', 'Role', 'Face', 'Request', 'Object',
                                          'Outcome'].map((t) => h('th', null, t)))),
          tbody),
        foot, more);

    const objectEl = (o) => !o ? ''
        : /^j-[0-9a-f]{12}-[0-9a-f]{4}$/.test(o) ? jobLink(o)
        : h('span', { class: 'mono', text: o });
    const load = async (before) => {
        const params = Object.assign({}, filter, { limit: 100, before: before || '' });
        delete params.since;
        if (AUDIT_SINCE_MS[filter.since])
            params.since = Math.floor(Date.now() - AUDIT_SINCE_MS[filter.since]);
        let r;
        try {
            r = await api('GET', '/audit' + q(params));
        } catch (err) {
            if (err.status === 403) {
                clear(tbody).append(h('tr', null, h('td', { colspan: 7, class: 'error', id: 'audit-forbidden',
                    text: 'Your token may not read the audit trail: that needs the admin role'
                        + (session.role ? ' (yours is ' + session.role + ')' : '') + '.' })));
                return;
            }
            throw err;
        }
        if (!ctx.live())
            return;
        if (!before) {
            clear(tbody);
            shown = 0;
        }
        const entries = (r && r.entries) || [];
        for (const e of entries) {
            const refused = e.outcome === 'forbidden' || e.outcome === 'unauthorized';
            tbody.append(h('tr', { dataset: { entry: e.id, type: e.type } },
                h('td', null, timeEl(e.time, true)),
                h('td', { text: e.who }),
                h('td', { text: e.role }),
                h('td', { text: e.face }),
                h('td', { class: 'mono', text: e.type }),
                h('td', null, objectEl(e.object)),
                h('td', { class: e.outcome === 'ok' ? '' : refused ? 'error' : 'muted',
                          title: e.message || '' },
                  e.outcome + (e.suppressed ? ' (+' + e.suppressed + ' not recorded)' : ''))));
        }
        shown += entries.length;
        if (!shown)
            tbody.append(h('tr', null, h('td', { colspan: 7, class: 'muted empty' }, 'No entries.')));
        next = r && r.next ? r.next : null;
        more.hidden = !next;
        foot.textContent = 'Showing ' + shown + (next ? ', older ones below' : '');
    };
    load(null).catch(flashError);
    return null;
};

// ------------------------------------------------------------------
// #/notify

const NOTIFY_STATUSES = ['pending', 'sent', 'dead'];

views.notify = (ctx) => {
    const status = NOTIFY_STATUSES.includes(ctx.query.get('status')) ? ctx.query.get('status') : '';
    let dead = null;   // how many deliveries are dead (the chip's count)
    const filters = h('nav', { class: 'filters', id: 'notify-filters', 'aria-label': 'status filter' });
    const drawFilters = () => {
        clear(filters);
        for (const s of [''].concat(NOTIFY_STATUSES)) {
            const n = s === 'dead' && dead !== null ? dead : undefined;
            filters.append(h('a', {
                href: '#/notify' + (s ? '?status=' + s : ''),
                class: 'filter' + (s === status ? ' active' : ''),
                dataset: { status: s || 'all' },
            }, s || 'all', n !== undefined
                ? h('span', { class: 'count' + (n ? ' bad' : ''), id: 'notify-dead-count', text: n }) : null));
        }
    };
    drawFilters();
    const tbody = h('tbody');
    const foot = h('p', { class: 'muted' });
    ctx.main.append(
        h('div', { class: 'titlebar' }, h('h1', null, 'Notifications')),
        h('p', { class: 'muted' }, 'Webhook deliveries of jobs\' ends, newest first. A dead one ' +
          'failed for the whole retry window; Retry sends it again. Needs the admin role.'),
        filters,
        h('table', { class: 'list', id: 'notify' },
          h('thead', null, h('tr', null, ['Delivery', 'Job', 'Status', 'Attempts', 'Updated',
                                          'URL', 'Last error', ''].map((t) => h('th', null, t)))),
          tbody),
        foot);

    const retry = async (d) => {
        try {
            await api('POST', '/notify/' + enc(d.id) + '/retry');
            flash('Delivery ' + d.id + ' is sent again.', 'ok');
            await refresh();
        } catch (err) {
            flashError(err);
        }
    };

    const refresh = async () => {
        let list;
        let deadList;
        try {
            [list, deadList] = await Promise.all([
                api('GET', '/notify' + q({ status, limit: 200 })),
                status === 'dead' ? null : api('GET', '/notify' + q({ status: 'dead', limit: 1000 })),
            ]);
        } catch (err) {
            if (err.status === 403) {
                clear(tbody).append(h('tr', null, h('td', { colspan: 8, class: 'error', id: 'notify-forbidden',
                    text: 'Your token may not list notifications: that needs the admin role'
                        + (session.role ? ' (yours is ' + session.role + ')' : '') + '.' })));
                return;
            }
            throw err;
        }
        if (!ctx.live())
            return;
        const rows = (list && list.deliveries) || [];
        const deadRows = status === 'dead' ? rows : (deadList && deadList.deliveries) || [];
        dead = deadRows.length;
        drawFilters();
        clear(tbody);
        for (const d of rows) {
            const error = d.error ? d.error : d.code ? 'HTTP ' + d.code : '';
            tbody.append(h('tr', { dataset: { delivery: d.id, job: d.job, status: d.status,
                                              attempts: d.attempts } },
                h('td', { class: 'mono', text: d.id }),
                h('td', null, jobLink(d.job)),
                h('td', null, badge(d.status)),
                h('td', { text: d.attempts }),
                h('td', null, timeEl(d.updated, true)),
                h('td', { class: 'mono', title: d.source === 'broker' ? 'a broker-wide webhook'
                                                                        : 'the job\'s own webhook',
                          text: d.url }),
                h('td', { class: error ? 'error' : 'muted', text: error }),
                h('td', { class: 'row-actions' },
                  d.status !== 'pending' && session.role !== null && can('admin')
                      ? h('button', { type: 'button', class: 'small-btn', dataset: { action: 'retry' },
                                      onclick: () => retry(d) }, 'Retry')
                      : null)));
        }
        if (!rows.length)
            tbody.append(h('tr', null, h('td', { colspan: 8, class: 'muted empty' },
                status ? 'No ' + status + ' deliveries.' : 'No deliveries yet.')));
        foot.textContent = 'Showing ' + rows.length + (dead ? ' \u00b7 ' + dead + ' dead' : '') + ' \u00b7 live';
    };
    return every(ctx, 5000, refresh);
};

// ------------------------------------------------------------------

document.getElementById('logout').addEventListener('click', () => {
    loggedOut('');
});
window.addEventListener('hashchange', route);
checkLeader();
route();
