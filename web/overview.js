// grid dashboard, #/overview: the fleet at a glance, the landing page.

import { JOB_STATUSES, api, append, clear, clusterState, cssName, fmtBytes, fmtClock,
    fmtDuration, h, inFrame, onChanges, onClusterState, onNodeChanges, q, statusCame, views } from './common.js';

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
    if (values.length === 1)
        values = [values[0], values[0]];   // one sample so far: a level line
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

const OVERVIEW_MS = 5000;          // a trend sample at most this often
const OVERVIEW_PUSHED_MS = 15000; // read anyway this often while changes are pushed
const OVERVIEW_JOBS_MS = 30000;   // the recent jobs' tally: a larger read, less often
const OVERVIEW_SAMPLES = 60;      // the trend's samples
const TREND_KEY = 'grid.overview.trend';

// The trend kept from the last visit of this tab (sessionStorage): the
// sparklines go on where they were, not from nothing at each visit.
// Anything unreadable there is a fresh start.
function keptTrend() {
    const fresh = { trend: { online: [], running: [], waiting: [], cells: [] }, at: 0 };
    try {
        const kept = JSON.parse(sessionStorage.getItem(TREND_KEY) || 'null');
        if (!kept || typeof kept !== 'object' || !Number.isFinite(kept.at) || !kept.trend)
            return fresh;
        for (const k of Object.keys(fresh.trend)) {
            const list = kept.trend[k];
            if (!Array.isArray(list) || !list.every(Number.isFinite))
                return fresh;
            fresh.trend[k] = list.slice(-OVERVIEW_SAMPLES);
        }
        fresh.at = kept.at;
    } catch (e) {
        /* a fresh start */
    }
    return fresh;
}

// A tile: ID, TITLE, its MAIN line, a DETAIL (text or elements) and a
// sparkline, any of them null.
export function tile(id, title, main, detail, spark) {
    return h('section', { class: 'card tile', id },
        h('h2', null, title),
        main !== null && main !== undefined ? h('div', { class: 'tile-main', text: main }) : null,
        detail ? h('div', { class: 'small muted tile-detail' }, detail) : null,
        spark || null);
}

// Chips of COUNTS in ORDER, each a link (HREFOF) when given, or 'none'.
function chips(counts, order, hrefOf) {
    return !order.some((k) => counts[k]) ? 'none'
        : h('div', { class: 'tallies' }, order.filter((k) => counts[k]).map((k) => h(hrefOf ? 'a' : 'span', {
            class: 'tally st-' + cssName(k), dataset: { status: k },
            href: hrefOf ? hrefOf(k) : undefined, text: counts[k] + ' ' + k.replace(/_/g, ' ') })));
}

// The overview's tiles, in the order shown: each draws itself from what
// the last reads gave (D: {st, qs, nodes, jobs, cells, wait, run, store,
// recent, trend, cluster}) or returns null to be left out. A new tile is
// one more entry here.
export const overviewTiles = [
    (d) => tile('ov-nodes', 'Nodes', (d.nodes.online || 0) + ' / ' + (d.nodes.total || 0) + ' online',
        [h('a', { href: '#/nodes?show=offline', text: (d.nodes.offline || 0) + ' offline' }),
         d.nodes.drained ? [' \u00b7 ', h('a', { href: '#/nodes?show=drained', text: d.nodes.drained + ' drained' })] : '',
         d.nodes.incompatible ? ' \u00b7 ' + d.nodes.incompatible + ' incompatible' : ''],
        sparkline(d.trend.online, 'nodes online')),
    (d) => tile('ov-jobs', 'Jobs now', (d.jobs.running || 0) + ' running \u00b7 ' + (d.jobs.pending || 0) + ' pending',
        (d.cells.running || 0) + ' tasks running, ' + (d.cells.pending || 0) + ' waiting',
        sparkline(d.trend.running, 'jobs running')),
    (d) => tile('ov-queue', 'Queue', (d.qs ? (d.qs.jobs || {}).pending || 0 : 0) + ' jobs waiting',
        [d.wait && d.wait.count ? 'wait p50 ' + fmtDuration(d.wait.p50) + ', p99 ' + fmtDuration(d.wait.p99)
                                  + ' (5 min)' : 'no wait in the last 5 min',
         d.qs && d.qs.oldest_pending ? ' \u00b7 oldest ' + d.qs.oldest_pending.job : ''],
        sparkline(d.trend.waiting, 'queue waiting')),
    (d) => tile('ov-results', 'Results', (d.run ? d.run.count : 0) + ' in 5 min',
        d.run && d.run.count ? (d.run.count / 300).toFixed(1) + '/s \u00b7 run p50 ' + fmtDuration(d.run.p50)
                               + ', p99 ' + fmtDuration(d.run.p99) : 'none in the last 5 min',
        sparkline(d.trend.cells, 'tasks running')),
    (d) => tile('ov-dlq', 'Dead letters', String(d.qs ? d.qs.dead_letter || 0 : 0),
        d.qs && d.qs.dead_letter ? h('a', { href: '#/dlq', text: 'jobs that gave up: see and retry' }) : 'none'),
    (d) => tile('ov-store', 'Store', (d.store.used_percent !== undefined ? d.store.used_percent : '?') + '% used',
        fmtBytes(d.store.used_bytes || 0) + ' of ' + fmtBytes(d.store.max_bytes || 0)
        + (d.store.state && d.store.state !== 'ok' ? ' \u00b7 ' + d.store.state : '')),
    (d) => tile('ov-recent', 'Jobs, last hour', null,
        d.recent ? chips(d.recent.hour, JOB_STATUSES, (k) => '#/jobs?status=' + k) : 'reading\u2026'),
    (d) => tile('ov-day', 'Jobs, last day', null,
        d.recent ? [chips(d.recent.day, JOB_STATUSES, (k) => '#/jobs?status=' + k),
                    d.recent.total > d.recent.seen ? h('div', { class: 'muted',
                        text: 'of the newest ' + d.recent.seen + ' of ' + d.recent.total + ' stored' }) : null]
                 : 'reading\u2026'),
    (d) => (d.cluster && d.cluster.role && d.cluster.role !== 'alone'
        ? tile('ov-cluster', 'Cluster ' + (d.cluster.cluster || ''), (d.cluster.name || '') + ' ' + d.cluster.role
               + (d.cluster.epoch !== undefined ? ', epoch ' + d.cluster.epoch : ''),
               (Array.isArray(d.cluster.standbys) ? d.cluster.standbys : []).map((sb) => h('div', {
                   text: sb.name + ': ' + sb.state + (sb.sync ? ', in sync' : '') })))
        : null),
];

views.overview = (ctx) => {
    const kept = keptTrend();
    const trend = kept.trend;
    let trendAt = kept.at;
    let recent = null;             // {hour: {status: n}, day: {status: n}, seen: n}
    let recentAt = 0;
    let last = null;               // what the last reads gave
    const body = h('div', { class: 'overview', id: 'overview' });
    ctx.main.append(h('div', { class: 'titlebar' }, h('h1', null, 'Overview'),
                      h('span', { class: 'muted', id: 'overview-live' })), body);

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

    const draw = () => {
        if (!ctx.live() || !last)
            return;
        clear(body);
        append(body, overviewTiles.map((t) => t(last)));
        const live = document.getElementById('overview-live');
        if (live)
            live.textContent = 'broker ' + (last.st.state || '') + ' \u00b7 live \u00b7 updated '
                + fmtClock(new Date().toISOString());
    };

    const read = async () => {
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
        const nodes = Object.assign({}, st.nodes || {});
        const jobs = (qs && qs.jobs) || st.jobs || {};
        const cells = (qs && qs.cells) || {};
        // The trend takes a sample at most every OVERVIEW_MS (changes come
        // in bursts); the latest one follows every read
        if (Date.now() - trendAt >= OVERVIEW_MS - 100 || !trend.online.length) {
            trendAt = Date.now();
            push(trend.online, nodes.online);
            push(trend.running, jobs.running);
            push(trend.waiting, (st.queue || {}).waiting);
            push(trend.cells, cells.running);
        } else {
            trend.online[trend.online.length - 1] = nodes.online || 0;
            trend.running[trend.running.length - 1] = jobs.running || 0;
            trend.waiting[trend.waiting.length - 1] = (st.queue || {}).waiting || 0;
            trend.cells[trend.cells.length - 1] = cells.running || 0;
        }
        try {
            sessionStorage.setItem(TREND_KEY, JSON.stringify({ trend, at: trendAt }));
        } catch (e) {
            /* no room: the trend lives as long as the page */
        }
        last = {
            st, qs, nodes, jobs, cells, recent, trend, cluster: clusterState,
            wait: (qs && qs.wait_ms && qs.wait_ms['5m']) || null,
            run: (qs && qs.run_ms && qs.run_ms['5m']) || null,
            store: st.store || {},
        };
        inFrame(draw);
    };
    // Both feeds may ask at once: one read serves them
    let reading = null;
    const refresh = () => reading || (reading = read().finally(() => {
        reading = null;
    }));
    // Pushed: read again as soon as a job or a node changes; every
    // OVERVIEW_PUSHED_MS anyway (the trend, the queue's figures), every
    // OVERVIEW_MS from a broker without the change feeds
    const stopJobs = onChanges(ctx, OVERVIEW_PUSHED_MS, refresh, OVERVIEW_MS);
    const stopNodes = onNodeChanges(ctx, 60000, 60000, refresh);
    // The cluster's tile as soon as the header read its state
    const stopCluster = onClusterState((c) => {
        if (last && ctx.live()) {
            last.cluster = c;
            inFrame(draw);
        }
    });
    return () => {
        stopJobs();
        stopNodes();
        stopCluster();
    };
};
