// grid dashboard, #/jobs: the job list, live on job.changes.

import { JOB_STATUSES, api, badge, clear, enc, h, onChanges, q, statusCame, timeEl, views } from './common.js';
import { jobView } from './job.js';

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
