// grid dashboard, #/overview: the fleet at a glance, the landing page.

import { JOB_STATUSES, api, append, clear, clusterState, cssName, every, fmtBytes, fmtClock,
    fmtDuration, h, q, statusCame, views } from './common.js';

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
