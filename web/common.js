// grid dashboard, common: what every page uses. DOM helpers (h() builds
// elements from text only), the API and its errors, the session and the
// caller's role, the hash router and its views table, the header's broker
// line, the live helpers (onChanges, onNodeChanges, every, frame batching),
// virtualised rows, and the cell statuses' order and colours.

import { cellRank } from './jobcells.js';

const API = '/api/v1';
const TOKEN_KEY = 'grid.token';
export const FINAL = new Set(['completed', 'partial_failure', 'failed', 'cancelled']);
export const IN_FLIGHT = new Set(['dispatched', 'acknowledged', 'running']);  // a cell's attempt runs
export const FINAL_CELL = new Set(['success', 'failed', 'timeout', 'lost', 'cancelled', 'interrupted',
                            'offline', 'unsupported', 'skipped']);
export const JOB_STATUSES = ['pending', 'running', 'completed', 'partial_failure',
    'failed', 'cancelled'];
const VIRTUAL_ROWS = 150;     // from this many node rows on, a job's grid draws only those in view
const VIRTUAL_OVERSCAN = 10;  // ... and this many either side
const VIRTUAL_VIEW = 0.7;     // ... of a box this part of the window high (style.css .vscroll.virtual)
const ROLE_RANK = { viewer: 0, operator: 1, admin: 2 };
// A job id no broker makes (its clock part is zero): see whoami().
const ROLE_PROBE_JOB = 'j-000000000000-0000';

export const session = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    role: null,        // 'viewer' | 'operator' | 'admin' | null (unknown)
    name: null,        // the token's name, when the broker says it
    open: false,       // the broker asked for no token at all
    via: null,         // how the broker knows the caller: 'token', 'key', 'insecure'
    checked: false,    // whoami (or status) answered for this token
};

// ------------------------------------------------------------------
// DOM helpers: h() builds elements from text only.

export function h(tag, attrs, ...children) {
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

export function append(el, children) {
    for (const c of children.flat(Infinity)) {
        if (c === null || c === undefined || c === false)
            continue;
        el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
}

export function clear(el) {
    while (el.firstChild)
        el.removeChild(el.firstChild);
    return el;
}

export function badge(status, extra) {
    return h('span', { class: 'badge st-' + cssName(status) + (extra ? ' ' + extra : ''),
                       text: String(status).replace(/_/g, ' ') });
}

// A job event's badge: "finished" in the colour of the status it ended
// with (its detail starts with it), so a failed job's end is not green.
export function eventBadge(e) {
    if (e.event !== 'finished' || typeof e.detail !== 'string')
        return badge(e.event);
    const status = e.detail.split(':')[0].trim();
    const el = badge(FINAL.has(status) ? status : e.event);
    el.textContent = 'finished';
    return el;
}

export function cssName(s) {
    return String(s || '').replace(/[^a-z0-9_-]/gi, '');
}

// One formatter for every time: toLocaleString builds one a call (30 times
// the cost; a 10,000-node job's timeline spent 16 s there)
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'numeric', day: 'numeric',
    hour: 'numeric', minute: 'numeric', second: 'numeric', hour12: false });
export function fmtTime(iso) {
    if (!iso)
        return '';
    const d = new Date(iso);
    if (isNaN(d))
        return String(iso);
    return TIME_FORMAT.format(d);
}

export function fmtClock(iso) {
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

export function timeEl(iso, ago) {
    return h('time', { datetime: iso || null, title: fmtTime(iso),
                       text: ago ? fmtAgo(iso) : fmtTime(iso) });
}

export function fmtDuration(ms) {
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

export function fmtBytes(n) {
    if (n < 1024)
        return n + ' B';
    if (n < 1048576)
        return (n / 1024).toFixed(1) + ' KiB';
    return (n / 1048576).toFixed(1) + ' MiB';
}

// ------------------------------------------------------------------
// Flash messages: one line at the top, for errors and confirmations.

let flashTimer = null;

export function flash(text, kind = 'error', details = []) {
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

export function flashError(err) {
    if (err && err.status === 401)
        return;   // already on its way to the login page
    flash(errorText(err), 'error', (err && err.details) || []);
}

export function errorText(err) {
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

export class ApiError extends Error {
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

// What a request of PATH needs outside api() (a Worker's fetch): its
// address and headers.
export function apiRequest(path) {
    return { url: API + path, headers: authHeaders({ Accept: 'application/json' }) };
}

export async function api(method, path, body, opts = {}) {
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

export function q(params) {
    const parts = [];
    for (const [k, v] of Object.entries(params)) {
        if (v !== undefined && v !== null && v !== '')
            parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
    }
    return parts.length ? '?' + parts.join('&') : '';
}

export const enc = encodeURIComponent;

// Server-Sent Events over fetch (EventSource cannot send the token).
// Calls onEvent(name, data) for each event; resolves when the stream ends.
export async function sse(path, onEvent, signal) {
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
    const eol = /\r\n|\r|\n/g;
    for (;;) {
        const { value, done } = await reader.read();
        if (done)
            break;
        buf += value;
        // The lines read where they are (a large piece of the stream holds
        // thousands: cut off one by one, each cut was a copy), and the
        // thread given back every SSE_SLICE_MS
        let at = 0;
        let since = performance.now();
        eol.lastIndex = 0;
        for (;;) {
            const m = eol.exec(buf);
            if (!m)
                break;
            if (m[0] === '\r' && m.index === buf.length - 1)
                break;   // maybe the first half of \r\n: wait for more
            const line = buf.slice(at, m.index);
            at = eol.lastIndex;
            if (performance.now() - since > SSE_SLICE_MS) {
                await sleep(0);
                since = performance.now();
            }
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
        buf = buf.slice(at);
    }
}
const SSE_SLICE_MS = 8;

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

export function can(role) {
    if (session.role === null)
        return true;   // unknown: show the button, the broker decides
    return ROLE_RANK[session.role] >= ROLE_RANK[role];
}

// A button that needs ROLE: disabled, with a reason, for lower roles.
export function roleButton(role, label, onclick, attrs = {}) {
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

export function loggedOut(message) {
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

export const views = {};
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

export async function route() {
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
    watchHeaderNodes();
}

// The header's line about the broker: from the last /status, with the
// node counts of whatever answered last (a /status or the node list).
let brokerState = null;
let brokerStateAt = 0;     // when a /status last answered (Date.now())

function drawBrokerState(st) {
    if (st && st.nodes)
        brokerState = st;
    inFrame(drawBrokerLine);
}

function drawBrokerLine() {
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
export let clusterState = null;
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
    for (const fn of [...clusterListeners])
        fn(clusterState);
}

// Calls FN(clusterState) each time the cluster's state was read again (a
// view that shows it: the overview). Returns a stop().
const clusterListeners = new Set();
export function onClusterState(fn) {
    clusterListeners.add(fn);
    return () => clusterListeners.delete(fn);
}

// The node list came: the header counts what it shows.
export function drawNodeCounts(nodes) {
    if (!brokerState)
        return;
    const online = nodes.filter((n) => n.status === 'online').length;
    drawBrokerState(Object.assign({}, brokerState,
        { nodes: Object.assign({}, brokerState.nodes, { online, total: nodes.length }) }));
}

// A /status answer, from the header's own poll or a view's.
export function statusCame(st) {
    brokerStateAt = Date.now();
    drawBrokerState(st);
}

// A broker cluster's standby serves nothing (every request: 503
// not_leader): GET /leader (no token) says so and names the active,
// whose dashboard the banner links to.
export async function checkLeader() {
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

// ------------------------------------------------------------------
// Live: the broker's change feeds and one drawing per animation frame.

// What waits for the next animation frame (inFrame): each function once.
const frameQueue = new Set();

// Calls FN at the next animation frame, once however often it is asked
// before then: what arrives in a burst (changes, events) is drawn once.
export function inFrame(fn) {
    if (!frameQueue.size)
        requestAnimationFrame(() => {
            const due = [...frameQueue];
            frameQueue.clear();
            for (const f of due) {
                try {
                    f();
                } catch (e) {
                    flashError(e);
                }
            }
        });
    frameQueue.add(fn);
}

// A queue of drawing work spread over animation frames, so that no one
// task holds the page's thread long: each frame runs the work due, oldest
// first, until FRAME_WORK_MS have gone (at least one piece), and leaves the
// rest to the next frame. Each piece has a KEY: asked again before it ran,
// it runs once, in its later place. Made per view: CTX.live() false drops
// what is left. later(key, fn) queues; pending(key) says whether it waits;
// drop(key) forgets it.
const FRAME_WORK_MS = 4;
export function frameWork(ctx) {
    const queue = new Map();       // key -> fn, in the order asked
    let frame = 0;
    const run = () => {
        frame = 0;
        if (!ctx.live()) {
            queue.clear();
            return;
        }
        const start = performance.now();
        while (queue.size) {
            const [key, fn] = queue.entries().next().value;
            queue.delete(key);
            try {
                fn();
            } catch (e) {
                flashError(e);
            }
            if (performance.now() - start >= FRAME_WORK_MS)
                break;
        }
        // (a piece that asked for more asked for the next frame already)
        if (queue.size && !frame)
            frame = requestAnimationFrame(run);
    };
    return {
        later(key, fn) {
            queue.delete(key);
            queue.set(key, fn);
            if (!frame)
                frame = requestAnimationFrame(run);
        },
        pending: (key) => queue.has(key),
        drop: (key) => queue.delete(key),
    };
}

// A change feed of the broker: a long poll on PATH (job.changes,
// node.changes) that calls every subscriber once its version moves. One
// request at a time however many subscribe; none while nobody does.
// Against a broker without the feed (400 or 404) it stops, and says so
// (supported false): the subscribers' timers carry on alone.
function changeFeed(path) {
    const subscribers = new Set();
    let version = null;
    let running = false;
    let abort = null;
    const self = {
        supported: true,
        subscribe(fn) {
            subscribers.add(fn);
            if (!running && self.supported)
                loop();
            return () => {
                subscribers.delete(fn);
                if (!subscribers.size && abort)
                    abort.abort();
            };
        },
    };
    const loop = async () => {
        running = true;
        while (subscribers.size && self.supported) {
            abort = new AbortController();
            try {
                const r = await api('GET', path + q({ after: version === null ? undefined : version,
                                                     timeout_ms: 25000 }),
                                    undefined, { signal: abort.signal, noRedirect: true });
                const first = version === null;
                version = r.version;
                if (r.changed && !first)
                    for (const fn of [...subscribers])
                        fn();
            } catch (e) {
                if (e.name === 'AbortError')
                    continue;
                if (e.status === 400 || e.status === 404) {
                    self.supported = false;
                    break;
                }
                if (e.status === 401 || e.status === 403)
                    break;
                await sleep(2000);   // a broker that went away is tried again later
            }
        }
        running = false;
    };
    return self;
}

export const jobFeed = changeFeed('/jobs/changes');
export const nodeFeed = changeFeed('/nodes/changes');

// The header asks /status again once a node changed (at most every
// CHANGES_MIN_MS): its counts are true within a moment, on every page.
let headerAsked = 0;
let headerTimer = null;
function headerNodesChanged() {
    if (headerTimer)
        return;
    headerTimer = setTimeout(() => {
        headerTimer = null;
        headerAsked = Date.now();
        refreshBrokerState();
    }, Math.max(0, CHANGES_MIN_MS - (Date.now() - headerAsked)));
}

function watchHeaderNodes() {
    nodeFeed.subscribe(headerNodesChanged);
}

// The header stays current on every page: its node counts are asked
// again as soon as a node changes (node.changes, pushed), the rest every
// few seconds while someone is logged in, unless a view just asked.
const BROKER_STATE_MS = 5000;
const BROKER_STATE_PUSHED_MS = 15000;  // while node.changes tells of nodes
(function pollBrokerState() {
    const period = nodeFeed.supported ? BROKER_STATE_PUSHED_MS : BROKER_STATE_MS;
    setTimeout(async () => {
        if (session.checked && !location.hash.startsWith('#/login')) {
            if (Date.now() - brokerStateAt >= period - 100)
                await refreshBrokerState();
            else if (clusterDue())
                await refreshCluster();
        }
        pollBrokerState();
    }, document.hidden ? period * 3 : period);
})();

// Calls fn now and again as soon as FEED changes, at most every MIN_MS
// (a number, or a function that says it: a large read waits longer), and
// every MS anyway (every OLD_MS against a broker without the feed).
// Returns a stop().
const CHANGES_MIN_MS = 200;
function onFeed(feed, ctx, ms, oldMs, fn, minMs = CHANGES_MIN_MS) {
    let stopped = false;
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
        const wait = (typeof minMs === 'function' ? minMs() : minMs) - (Date.now() - last);
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
        const period = feed.supported ? ms : oldMs;
        timer = setTimeout(run, document.hidden ? period * 3 : period);
    };
    const unsubscribe = feed.subscribe(run);
    run();
    return () => {
        stopped = true;
        clearTimeout(timer);
        unsubscribe();
    };
}

// Calls fn now and as soon as any job changes (job.changes), at most
// every MIN_MS (CHANGES_MIN_MS), and every MS anyway (every OLD_MS against
// a broker without job.changes); see onFeed.
export function onChanges(ctx, ms, fn, oldMs = ms, minMs = CHANGES_MIN_MS) {
    return onFeed(jobFeed, ctx, ms, oldMs, fn, minMs);
}

// Calls fn now and as soon as any node changes (node.changes), at most
// every MIN_MS, and every MS anyway (every OLD_MS against a broker without
// node.changes).
export function onNodeChanges(ctx, ms, oldMs, fn, minMs) {
    return onFeed(nodeFeed, ctx, ms, oldMs, fn, minMs);
}

// Calls fn now and every ms while the view is live; returns a stop().
export function every(ctx, ms, fn) {
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
            watchHeaderNodes();
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


// The leaves of a job's tasks, depth-first: step numbers.
export function flattenSteps(tasks) {
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

export function targetText(t) {
    if (!t)
        return '';
    if (typeof t === 'string')
        return t;
    const base = t.scope === 'all' ? 'all' : t.scope === 'expr' ? t.value : t.scope + ':' + t.value;
    return (t.any ? 'any:' : '') + base;
}

export const CELL_SHORT = { success: 'ok', failed: 'failed', running: 'running', pending: 'pending',
                     dispatched: 'sent', acknowledged: 'acked', timeout: 'timeout',
                     skipped: 'skipped', lost: 'lost', cancelled: 'cancelled',
                     interrupted: 'interrupted', offline: 'offline', drained: 'drained',
                     unsupported: 'unsupported', retry_wait: 'retry wait' };


// A cell's statuses in the order a job's rows are drawn (failures
// first): cellRank, with the cells' columns in jobcells.js (which the
// Workers load too).
export { cellRank };


// Draws into TBODY the rows ROW(i) for i in [0, COUNT): all of them up to
// VIRTUAL_ROWS; past that only those in BOX's view (and VIRTUAL_OVERSCAN
// either side), between two spacer rows as tall as the rows left out.
// PITCH holds the rows' height with the table's spacing ({px}), measured
// once from the first rows drawn ({measured: true} after); a caller that
// knows BOX's scroll position says it in PITCH.top (read, it would lay out
// at once a page whose grid just changed). BOX scrolls (class "virtual"
// while it is: 70vh high, its content contained: style.css .vscroll).
export function virtualRows(box, tbody, count, row, pitch) {
    const view = Math.ceil(window.innerHeight * VIRTUAL_VIEW);
    const scrolled = count <= VIRTUAL_ROWS ? 0 : pitch.top !== undefined ? pitch.top : box.scrollTop;
    // PITCH.lean: the rows in view only, none either side (a first draw,
    // with the rest to come: less to lay out at once)
    const over = pitch.lean ? 0 : VIRTUAL_OVERSCAN;
    delete pitch.top;
    delete pitch.lean;
    box.classList.toggle('virtual', count > VIRTUAL_ROWS);
    let first = 0, last = count;
    if (count > VIRTUAL_ROWS) {
        first = Math.min(count - 1, Math.max(0, Math.floor(scrolled / pitch.px) - over));
        last = Math.min(count, first + Math.ceil(view / pitch.px) + 2 * over);
    }
    const spacer = (rows, where) => {
        const tr = h('tr', { class: 'spacer', dataset: { where } });
        tr.style.height = rows * pitch.px + 'px';   // CSSOM: the policy allows no style attribute
        return tr;
    };
    const want = [];
    if (first > 0)
        want.push(spacer(first, 'above'));
    for (let i = first; i < last; i++)
        want.push(row(i));
    if (last < count)
        want.push(spacer(count - last, 'below'));
    // A row ROW gives again (the same element: its data did not change)
    // stays where it is, untouched: a click on it is not lost to a redraw
    want.forEach((tr, i) => {
        const now = tbody.children[i];
        if (now !== tr)
            tbody.insertBefore(tr, now || null);
    });
    while (tbody.children.length > want.length)
        tbody.lastElementChild.remove();
    // The pitch is measured once, from the first rows drawn, and not now:
    // offsetTop would force a layout of the new rows at once (tens of ms
    // for a page at fleet size). A task queued now runs once the browser
    // laid them out for the frame, when reading costs nothing; the rows are
    // drawn again only if they were not as tall as guessed
    pitch.last = [box, tbody, count, row];    // what the measure draws again: the latest
    if (pitch.measured || pitch.measuring || count <= VIRTUAL_ROWS)
        return;
    pitch.measuring = true;
    setTimeout(() => {
        pitch.measuring = false;
        const [lastBox, lastBody, lastCount, lastRow] = pitch.last;
        if (pitch.measured || !lastBody.isConnected)
            return;
        const drawn = lastBody.querySelectorAll('tr:not(.spacer)');
        const px = drawn.length > 1 ? drawn[1].offsetTop - drawn[0].offsetTop : 0;
        if (px <= 0)
            return;
        pitch.measured = true;
        if (Math.abs(px - pitch.px) > 1) {
            pitch.px = px;
            virtualRows(lastBox, lastBody, lastCount, lastRow, pitch);
        }
    }, 0);
}

// Calls DRAW at the next animation frame after BOX scrolls, once a frame.
export function onScrollFrame(box, draw) {
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

export function toneColour(status) {
    const tone = CELL_TONE[status] || 'idle';
    return getComputedStyle(document.documentElement).getPropertyValue('--' + tone).trim() || '#888';
}


export function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

export function fact(term, value) {
    return [h('dt', null, term), h('dd', null, value)];
}

export function jobLink(jobId) {
    return h('a', { href: '#/jobs/' + enc(jobId), class: 'mono', text: jobId });
}

export function legend() {
    const list = ['pending', 'dispatched', 'running', 'success', 'failed', 'timeout', 'skipped',
                  'lost', 'cancelled'];
    return h('p', { class: 'legend small' }, list.map((s) => badge(s)));
}

// A running task's progress as text: "42% · sleeping 1 of 60 s".
export function progressText(task) {
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
export function progressEls(task) {
    const known = typeof task.percent === 'number' && task.percent >= 0;
    return [known ? h('progress', { max: 100, value: Math.min(100, task.percent) }) : null,
            h('span', { class: 'cprogress', text: progressText(task) })];
}

// Reads a whole output stream, a page at a time (job.output).
export async function loadOutput(id, node, step, stream, attempt, size) {
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
export function pageBytes(data) {
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
// Keyboard: in a list, j/k (or the arrows) move through the rows, Enter
// opens the row's first link, / goes to the filter, Escape leaves it.
// Rows are known by their data-key (a job or node id): the mark stays on
// its row when the list is drawn again. Returns {drawn(), stop()}:
// drawn() after each drawing puts the mark back.

export function listKeys(tbody, filter) {
    let key = null;
    const rows = () => [...tbody.querySelectorAll('tr[data-key]')];
    const mark = (scroll) => {
        for (const tr of tbody.querySelectorAll('tr.kbd'))
            tr.classList.remove('kbd');
        const tr = key === null ? null : rows().find((r) => r.dataset.key === key);
        if (!tr)
            return;
        tr.classList.add('kbd');
        if (scroll)
            tr.scrollIntoView({ block: 'nearest' });
    };
    const onKey = (ev) => {
        if (ev.ctrlKey || ev.metaKey || ev.altKey || !tbody.isConnected)
            return;
        const t = ev.target;
        const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT'
                             || t.isContentEditable);
        if (typing) {
            if (ev.key === 'Escape' || (ev.key === 'ArrowDown' && t === filter)) {
                t.blur();
                ev.preventDefault();
            }
            return;
        }
        if (ev.key === '/' && filter) {
            ev.preventDefault();
            filter.focus();
            filter.select();
            return;
        }
        const list = rows();
        if (!list.length)
            return;
        let at = list.findIndex((r) => r.dataset.key === key);
        if (ev.key === 'j' || ev.key === 'ArrowDown')
            at = Math.min(list.length - 1, at + 1);
        else if (ev.key === 'k' || ev.key === 'ArrowUp')
            at = Math.max(0, at < 0 ? 0 : at - 1);
        else if (ev.key === 'Enter' && at >= 0) {
            const a = list[at].querySelector('a[href]');
            if (a) {
                ev.preventDefault();
                location.hash = a.getAttribute('href');
            }
            return;
        } else
            return;
        ev.preventDefault();
        key = list[at].dataset.key;
        mark(true);
    };
    document.addEventListener('keydown', onKey);
    return {
        drawn: () => mark(false),
        stop: () => document.removeEventListener('keydown', onKey),
    };
}
