// grid dashboard, #/jobs: the job list, live on job.changes.

import { FINAL, JOB_STATUSES, api, badge, clear, enc, fmtDuration, h, inFrame, listKeys, onChanges, q, statusCame,
    timeEl, views } from './common.js';
import { jobView } from './job.js';

// The list is read again at most this often while jobs change (a read of
// the newest 50 is small; the 200 ms of the other pages would let a new
// job wait that long behind the previous job's change)
const LIST_MIN_MS = 100;

// ------------------------------------------------------------------
// #/jobs

// How long JOB ran: from its creation to its last change once it ended,
// to now while it runs ('' while it waits).
function jobDuration(j) {
    const from = Date.parse(j.created_at || '');
    const to = FINAL.has(j.status) ? Date.parse(j.updated_at || '') : Date.now();
    if (j.status === 'pending' || !Number.isFinite(from) || !Number.isFinite(to))
        return '';
    return fmtDuration(Math.max(0, to - from));
}

views.jobs = (ctx) => {
    if (ctx.parts[1])
        return jobView(ctx, ctx.parts[1]);
    const status = ctx.query.get('status') || '';
    let limit = 50;
    let jobs = [];
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
    // What the rows shown must contain: the job, what it runs, its target
    // or who submitted it (words, all of them)
    const search = h('input', { type: 'search', id: 'job-filter', value: ctx.query.get('q') || '',
                                placeholder: 'filter: task, submitter, target, id  ( / )',
                                'aria-label': 'filter the jobs' });
    const tbody = h('tbody');
    const keys = listKeys(tbody, search);
    const foot = h('p', { class: 'muted' });
    const more = h('button', { type: 'button', id: 'more-jobs', hidden: true, onclick: () => {
        limit = Math.min(limit + 50, 1000);
        refresh();
    } }, 'Show older jobs');
    ctx.main.append(
        h('div', { class: 'titlebar' }, h('h1', null, 'Jobs'), search,
          h('a', { class: 'button', href: '#/run' }, 'Run a job')),
        filters,
        h('div', { class: 'hscroll' }, h('table', { class: 'list', id: 'jobs' },
          h('thead', null, h('tr', null, ['Job', 'Status', 'Runs', 'Target', 'Submitted by', 'Step', 'Nodes',
                                          'Duration', 'Created'].map((t) => h('th', null, t)))),
          tbody)),
        foot, more);

    let total = 0;
    const draw = () => {
        if (!ctx.live())
            return;
        const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
        const shown = !words.length ? jobs : jobs.filter((j) => {
            const hay = [j.id, j.runs, j.target_text || j.target, j.submitted_by, j.schedule]
                .filter(Boolean).join(' ').toLowerCase();
            return words.every((w) => hay.includes(w));
        });
        clear(tbody);
        for (const j of shown) {
            tbody.append(h('tr', { dataset: { job: j.id, key: j.id, status: j.status } },
                h('td', null, h('a', { href: '#/jobs/' + enc(j.id), class: 'mono', text: j.id }),
                  j.schedule ? h('span', { class: 'muted small', text: ' \u00b7 ' + j.schedule }) : null),
                h('td', null, badge(j.status)),
                h('td', { class: 'mono runs', text: j.runs || '' }),
                h('td', { class: 'mono', text: j.target_text || j.target }),
                h('td', { class: 'submitter', text: j.submitted_by || '' }),
                h('td', { text: Math.min(j.step, j.steps) + ' / ' + j.steps }),
                h('td', { text: j.nodes !== undefined ? j.nodes : j.expected }),
                h('td', { class: 'duration', text: jobDuration(j) }),
                h('td', null, timeEl(j.created_at, true))));
        }
        if (!shown.length)
            tbody.append(h('tr', null, h('td', { colspan: 9, class: 'muted empty' },
                words.length ? 'No job matches the filter.'
                : status ? 'No ' + status.replace(/_/g, ' ') + ' jobs.' : 'No jobs yet.')));
        foot.textContent = 'Showing ' + shown.length + (words.length ? ' matching' : '') + ' of ' + total
            + ' \u00b7 live \u00b7 j/k to move, Enter to open, / to filter';
        more.hidden = jobs.length >= total || limit >= 1000;
        keys.drawn();
    };
    search.addEventListener('input', () => inFrame(draw));

    const refresh = async () => {
        // The list is drawn as soon as it came, the header's figures after
        const asked = api('GET', '/status').catch(() => null);
        const list = await api('GET', '/jobs' + q({ status, limit }));
        if (!ctx.live())
            return;
        // The chips count the stored jobs (the list's by_status), as the
        // list shows them; /status counts what finished since the broker
        // started, deleted jobs too.
        if (list && list.by_status) {
            Object.assign(counts, list.by_status);
            drawFilters();
        }
        jobs = (list && list.jobs) || [];
        total = list && typeof list.total === 'number' ? list.total : jobs.length;
        inFrame(draw);
        const st = await asked;
        if (st && ctx.live())
            statusCame(st);
    };
    // A new job is listed within LIST_MIN_MS and a read of the list of its
    // submit, however busy the fleet
    const stop = onChanges(ctx, 10000, refresh, 10000, LIST_MIN_MS);
    return () => {
        stop();
        keys.stop();
    };
};
