// grid dashboard, the admin's pages: #/keys, #/audit, #/dlq, #/notify.

import { api, badge, can, clear, enc, every, flash, flashError, h, inFrame, jobLink, listKeys, onChanges, q,
    roleButton, session, timeEl, views } from './common.js';

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
// #/dlq: the dead letters (cells that failed for good), retried one by
// one or a job's at once (dlq.retry: a new job for the failed nodes)

views.dlq = (ctx) => {
    const job = ctx.query.get('job') || '';
    let entries = [];
    const search = h('input', { type: 'search', id: 'dlq-filter', placeholder: 'filter: node, job, action  ( / )',
                                'aria-label': 'filter the dead letters' });
    const tbody = h('tbody');
    const keys = listKeys(tbody, search);
    const foot = h('p', { class: 'muted' });
    ctx.main.append(
        h('div', { class: 'titlebar' }, h('h1', null, 'Dead letters'), search),
        h('p', { class: 'muted' }, 'Cells of jobs with dead_letter that failed for good (every retry spent), oldest job first. '
          + 'A retry makes a new job for the failed node (or all of a job\u2019s). '
          + 'Retrying needs the operator role.',
          job ? [' Of ', jobLink(job), ' only: ', h('a', { href: '#/dlq', text: 'all' }), '.'] : null),
        h('div', { class: 'hscroll' }, h('table', { class: 'list', id: 'dlq' },
          h('thead', null, h('tr', null, ['Job', 'Step', 'Node', 'Action', 'Status', 'Exit', 'Error',
                                          'Landed', ''].map((t) => h('th', null, t)))),
          tbody)),
        foot);

    const retry = async (entry) => {
        try {
            const r = await api('POST', '/dlq/retry', { entry });
            flash('Retrying ' + entry + (r && r.job ? ': new job ' + r.job : '') + '.', 'ok');
            await refresh();
        } catch (err) {
            flashError(err);
        }
    };

    const draw = () => {
        if (!ctx.live())
            return;
        const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
        const shown = entries.filter((e) => {
            const hay = [e.job, e.node, e.backend + '.' + e.action, e.status, e.error].join(' ').toLowerCase();
            return words.every((w) => hay.includes(w));
        });
        clear(tbody);
        for (const e of shown)
            tbody.append(h('tr', { dataset: { entry: e.id, key: e.id, status: e.status } },
                h('td', null, jobLink(e.job)),
                h('td', { text: e.step }),
                h('td', null, h('a', { class: 'mono', href: '#/nodes/' + enc(e.node), text: e.node })),
                h('td', { class: 'mono', text: e.backend + '.' + e.action }),
                h('td', null, badge(e.status)),
                h('td', { text: e.exit_code }),
                h('td', { class: 'mono small detail', title: e.error || '',
                          text: (e.error || '').trim().split('\n').pop().slice(0, 120) }),
                h('td', null, timeEl(e.time, true)),
                h('td', null, e.retry_job ? ['retried as ', jobLink(e.retry_job), ' '] : null,
                  roleButton('operator', 'Retry', () => retry(e.id),
                             { class: 'small-btn', dataset: { action: 'retry' } }))));
        if (!shown.length)
            tbody.append(h('tr', null, h('td', { colspan: 9, class: 'muted empty' },
                entries.length ? 'No dead letter matches the filter.' : 'No dead letters.')));
        foot.textContent = 'Showing ' + shown.length + ' of ' + total + ' \u00b7 live';
        keys.drawn();
    };
    search.addEventListener('input', () => inFrame(draw));

    let total = 0;
    const refresh = async () => {
        const r = await api('GET', '/dlq' + q({ job: job || undefined, limit: 1000 }));
        if (!ctx.live())
            return;
        entries = (r && r.entries) || [];
        total = r && typeof r.total === 'number' ? r.total : entries.length;
        inFrame(draw);
    };
    // A cell lands here as its job moves on: job.changes tells
    const stop = onChanges(ctx, 30000, refresh, 5000);
    return () => {
        stop();
        keys.stop();
    };
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
