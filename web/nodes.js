// grid dashboard, #/nodes and #/nodes/ID.

import { api, badge, clear, drawNodeCounts, enc, every, fact, flash, flashError, fmtTime, h, inFrame,
    jobLink, listKeys, onNodeChanges, onScrollFrame, roleButton, timeEl, views, virtualRows } from './common.js';

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

    // One node's row: the same element while the node's data is the same
    // (virtualRows leaves it in place), a new one when it changed.
    let rowCache = new Map();      // node id -> {sig, tr}
    const rowOf = (n) => {
        const sig = JSON.stringify(n);
        const cached = rowCache.get(n.id);
        if (cached && cached.sig === sig)
            return cached.tr;
        const tr = drawRow(n);
        rowCache.set(n.id, { sig, tr });
        return tr;
    };
    const drawRow = (n) => {
            const state = n.drained ? 'drained' : n.status;
            const labels = Object.entries(n.labels || {});
            const act = n.drained
                ? roleButton('admin', 'Resume', () => nodeAction(n.id, 'resume'), { class: 'small-btn', dataset: { needs: 'admin', action: 'resume' } })
                : roleButton('admin', 'Drain', () => nodeAction(n.id, 'drain'), { class: 'small-btn', dataset: { needs: 'admin', action: 'drain' } });
            return h('tr', { dataset: { node: n.id, key: n.id, state } },
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
        keys.drawn();
    };
    onScrollFrame(listBox, drawRows);
    const keys = listKeys(tbody, filterInput);

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
    filterInput.addEventListener('input', () => inFrame(draw));

    const refresh = async () => {
        const r = await api('GET', '/nodes');
        if (!ctx.live())
            return;
        nodes = (r && r.nodes) || [];
        // Rows of nodes that went from the list are forgotten
        const ids = new Set(nodes.map((n) => n.id));
        rowCache = new Map([...rowCache].filter(([id]) => ids.has(id)));
        inFrame(draw);
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
    // Pushed: read again once a node changes (a large fleet's list, at
    // most every second); every 30 s anyway, every 4 s from an older broker
    const stop = onNodeChanges(ctx, 30000, 4000, refresh, () => (nodes.length > 2000 ? 1000 : 200));
    return () => {
        stop();
        keys.stop();
    };
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
