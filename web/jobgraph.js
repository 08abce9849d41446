// grid dashboard, the shapes of a job beyond its grid: the batches of a
// rolling job (R26 of docs/SCHEDULING.md) and where its failure budget
// stands, and the DAG of a graph job drawn as a graph (inline SVG).

import { CELL_SHORT, FINAL, IN_FLIGHT, cellRank, cssName, flattenSteps, h } from './common.js';

const SVG = 'http://www.w3.org/2000/svg';

function svgEl(tag, attrs) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {}))
        if (v !== undefined && v !== null)
            el.setAttribute(k, String(v));
    return el;
}

// A cell status failed (counts in the failure budget: R26).
const FAILED = new Set(['failed', 'timeout', 'lost', 'offline', 'interrupted', 'drained', 'unsupported']);

// An AMOUNT of the job spec (a count, or "N%" of NODES): nodes, rounded up
// and at least 1 for a percent; null when absent or unreadable.
function amountNodes(amount, nodes) {
    if (typeof amount === 'number' && amount >= 0)
        return amount;
    const m = typeof amount === 'string' ? /^(\d+)%$/.exec(amount.trim()) : null;
    if (!m)
        return typeof amount === 'string' && /^\d+$/.test(amount) ? Number(amount) : null;
    return Math.max(1, Math.ceil(Number(m[1]) * nodes / 100));
}

// The batches of a rolling job as the broker cuts them (R26): the
// expected nodes sorted by id, the first batch `canary` nodes (else
// `batch`), the others `batch`, the last what is left. [] without batch.
export function cutBatches(record) {
    const expected = record.expected || [];
    const size = amountNodes(record.batch, expected.length);
    const canary = typeof record.canary === 'number' && record.canary > 0 ? record.canary : null;
    if ((!size && !canary) || !expected.length)
        return [];
    const nodes = [...expected].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const batches = [];
    let at = 0;
    let first = true;
    while (at < nodes.length) {
        const n = Math.max(1, first && canary ? canary : size || nodes.length);
        batches.push(nodes.slice(at, at + n));
        at += n;
        first = false;
    }
    return batches;
}

// The failure budget in nodes: the broker's (progress.budget) while the
// job is live, else what the spec says (R26); null when there is none.
export function failureBudget(record, progress, batchCount) {
    if (progress && typeof progress.budget === 'number')
        return progress.budget;
    const n = (record.expected || []).length;
    if (record.max_failures !== undefined && record.max_failures !== null)
        return amountNodes(record.max_failures, n);
    if (batchCount > 1 && record.strategy === 'fail-fast')
        return 0;
    return null;
}

// The rolling job's batches and budget as a section (null for a job
// without batches): one box per batch, its state (done, running, waiting,
// not started) and its failed nodes; a line saying which batch runs and
// how much of the budget is used and left. CELLS: the job's cells
// (jobcells.js CellTable).
export function batchesView(record, progress, cells) {
    const batches = cutBatches(record);
    if (batches.length < 2 || !cells)
        return null;
    const failedNodes = new Set();
    const states = batches.map((nodes) => {
        let started = false, running = false, final = 0, failed = 0;
        for (const node of nodes) {
            let nodeFinal = true, nodeFailed = false;
            const i = cells.index.get(node);
            for (let s = 0; i !== undefined && s < cells.nsteps; s++) {
                const status = cells.statusAt(s, i);
                if (!status)
                    continue;
                if (cells.attempts[s][i] > 0 || status !== 'pending')
                    started = true;
                if (IN_FLIGHT.has(status) || status === 'retry_wait')
                    running = true;
                if (status === 'pending' || IN_FLIGHT.has(status) || status === 'retry_wait')
                    nodeFinal = false;
                if (FAILED.has(status))
                    nodeFailed = true;
            }
            if (nodeFinal)
                final++;
            if (nodeFailed) {
                failed++;
                failedNodes.add(node);
            }
        }
        const state = running ? 'running' : started && final === nodes.length ? 'done'
            : started ? 'running' : FINAL.has(record.status) ? 'not-started' : 'waiting';
        return { nodes: nodes.length, failed, state };
    });
    const current = progress && typeof progress.batch === 'number' ? progress.batch
        : (states.findIndex((b) => b.state === 'running') + 1) || null;
    const used = progress && typeof progress.failed === 'number' ? progress.failed : failedNodes.size;
    const budget = failureBudget(record, progress, batches.length);
    const size = batches.length > 1 ? batches[1].length : batches[0].length;
    const line = [
        batches.length + ' batches of ' + size + ' node' + (size === 1 ? '' : 's')
            + (record.canary ? ' (canary ' + batches[0].length + ')' : ''),
        current && !FINAL.has(record.status) ? 'batch ' + current + ' runs' : null,
        budget === null ? 'no failure budget (' + used + ' failed)'
            : 'failure budget: ' + used + ' of ' + budget + ' used, '
              + (used > budget ? 'spent: no new batch starts' : (budget - used) + ' left'),
    ].filter(Boolean).join(' \u00b7 ');
    return h('section', { class: 'batches card', id: 'batches',
                          dataset: { batches: String(batches.length), used: String(used),
                                     budget: budget === null ? '' : String(budget) } },
        h('h2', null, 'Batches'),
        h('p', { class: 'small', id: 'batches-line', text: line }),
        h('ol', { class: 'batchrow' }, states.map((b, i) => h('li', {
            class: 'batch b-' + b.state + (b.failed ? ' has-failed' : '') + (current === i + 1 ? ' current' : ''),
            dataset: { batch: String(i + 1), state: b.state, failed: String(b.failed) },
            title: 'batch ' + (i + 1) + ': ' + b.nodes + ' nodes, ' + b.state.replace('-', ' ')
                + (b.failed ? ', ' + b.failed + ' failed' : ''),
        }, h('span', { class: 'bno', text: String(i + 1) }),
           h('span', { class: 'bstate', text: b.state.replace('-', ' ') }),
           b.failed ? h('span', { class: 'bfail', text: b.failed + ' failed' }) : null))));
}

// The step graph of a DAG job, as the broker makes it (job_graph_new in
// proto/job.h): for each step the steps it needs. A top-level task that
// needs a pipeline needs its last steps (those no other step of it
// needs); a pipeline without inner needs is a chain; a pipeline's outer
// needs go to its first steps. Null when no task has needs.
export function dagEdges(tasks) {
    const steps = flattenSteps(tasks);
    if (!(tasks || []).some((t) => t && (Array.isArray(t.needs) && t.needs.length
        || Array.isArray(t.tasks) && t.tasks.some((l) => l && Array.isArray(l.needs) && l.needs.length))))
        return null;
    const needs = steps.map(() => new Set());
    const byPhase = new Map();           // top-level index -> its step numbers
    steps.forEach((st, i) => {
        if (!byPhase.has(st.phase))
            byPhase.set(st.phase, []);
        byPhase.get(st.phase).push(i);
    });
    const phaseByName = new Map();
    (tasks || []).forEach((t, i) => {
        if (t && t.name)
            phaseByName.set(t.name, i);
    });
    const inner = new Map();             // top-level index -> {first, last} steps
    for (const [phase, list] of byPhase) {
        const task = tasks[phase] || {};
        if (!Array.isArray(task.tasks)) {
            inner.set(phase, { first: list, last: list });
            continue;
        }
        const named = new Map();
        list.forEach((i) => {
            if (steps[i].leaf.name)
                named.set(steps[i].leaf.name, i);
        });
        const hasInner = list.some((i) => Array.isArray(steps[i].leaf.needs) && steps[i].leaf.needs.length);
        if (hasInner) {
            for (const i of list)
                for (const n of steps[i].leaf.needs || [])
                    if (named.has(n))
                        needs[i].add(named.get(n));
        } else {
            for (let k = 1; k < list.length; k++)
                needs[list[k]].add(list[k - 1]);
        }
        const needed = new Set();
        for (const i of list)
            for (const n of needs[i])
                needed.add(n);
        inner.set(phase, { first: list.filter((i) => needs[i].size === 0), last: list.filter((i) => !needed.has(i)) });
    }
    (tasks || []).forEach((t, phase) => {
        for (const n of (t && t.needs) || []) {
            if (!phaseByName.has(n))
                continue;
            const from = inner.get(phaseByName.get(n));
            const to = inner.get(phase);
            if (from && to)
                for (const i of to.first)
                    for (const f of from.last)
                        needs[i].add(f);
        }
    });
    return { steps, needs: needs.map((s) => [...s]) };
}

// A step's state over its nodes, for the graph's colour: the worst status
// some cell has (failures first, as the rows), and its tally (COUNTS:
// Map(status -> cells)).
function stepState(counts) {
    const sorted = [...(counts || new Map()).entries()].filter(([, n]) => n > 0)
        .sort((a, b) => cellRank(a[0]) - cellRank(b[0]));
    return { state: sorted.length ? sorted[0][0] : 'none', tally: sorted };
}

// The DAG of a graph job as an SVG: one box per step (its name, or
// backend and action), coloured by its state over the nodes, an arrow
// from each step to the steps that need it; laid out in columns by depth
// (a step sits one column right of its deepest need). STEPCOUNTS: per
// step, Map(status -> cells). ONOPEN(step) when a box is clicked (or Enter
// or Space pressed on it): the boxes are buttons then, SELECTED's pressed.
// Null for a job that is not a graph.
export function dagView(record, onOpen, stepCounts, selected) {
    const graph = dagEdges(record.tasks);
    if (!graph)
        return null;
    const { steps, needs } = graph;
    const depth = steps.map(() => -1);
    const depthOf = (i, seen = new Set()) => {
        if (depth[i] >= 0)
            return depth[i];
        if (seen.has(i))
            return 0;       // a cycle the broker refuses: drawn flat
        seen.add(i);
        depth[i] = needs[i].length ? 1 + Math.max(...needs[i].map((n) => depthOf(n, seen))) : 0;
        return depth[i];
    };
    steps.forEach((_, i) => depthOf(i));
    const columns = [];
    steps.forEach((_, i) => {
        (columns[depth[i]] = columns[depth[i]] || []).push(i);
    });
    const BW = 150, BH = 44, GX = 50, GY = 16, PAD = 8;
    const rows = Math.max(...columns.map((c) => c.length));
    const width = PAD * 2 + columns.length * BW + (columns.length - 1) * GX;
    const height = PAD * 2 + rows * BH + (rows - 1) * GY;
    const at = new Map();
    columns.forEach((col, x) => col.forEach((i, y) => {
        const top = PAD + y * (BH + GY) + (rows - col.length) * (BH + GY) / 2;
        at.set(i, { x: PAD + x * (BW + GX), y: top });
    }));
    const svg = svgEl('svg', { class: 'dag', id: 'dag', viewBox: '0 0 ' + width + ' ' + height,
                               width, height, role: onOpen ? 'group' : 'img',
                               'aria-label': 'the job\'s task graph' });
    const defs = svgEl('defs');
    const marker = svgEl('marker', { id: 'dag-arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
                                     markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    marker.append(svgEl('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'dag-head' }));
    defs.append(marker);
    svg.append(defs);
    needs.forEach((list, i) => {
        for (const n of list) {
            const a = at.get(n), b = at.get(i);
            const x1 = a.x + BW, y1 = a.y + BH / 2, x2 = b.x, y2 = b.y + BH / 2;
            const mid = (x1 + x2) / 2;
            svg.append(svgEl('path', { class: 'dag-edge', 'data-from': n, 'data-to': i,
                                       d: 'M ' + x1 + ' ' + y1 + ' C ' + mid + ' ' + y1 + ', ' + mid + ' '
                                          + y2 + ', ' + x2 + ' ' + y2, 'marker-end': 'url(#dag-arrow)' }));
        }
    });
    steps.forEach((st, i) => {
        const { state, tally } = stepState((stepCounts || [])[i]);
        const p = at.get(i);
        const leaf = st.leaf || {};
        const g = svgEl('g', { class: 'dag-node st-' + cssName(state) + (selected === i ? ' selected' : ''),
                               'data-step': i, 'data-state': state,
                               transform: 'translate(' + p.x + ',' + p.y + ')', tabindex: 0,
                               role: onOpen ? 'button' : null,
                               'aria-pressed': onOpen ? String(selected === i) : null,
                               'aria-label': onOpen ? 'step ' + i + ' ' + (leaf.name || '') + ': show its cells only'
                                   + (tally.length ? ' (' + tally.map(([s, n]) => n + ' ' + s).join(', ') + ')' : '')
                                   : null });
        const title = svgEl('title');
        title.textContent = '#' + i + ' ' + (leaf.name || '') + ' ' + (leaf.backend || '?') + '.'
            + (leaf.action || '?') + (tally.length ? ': ' + tally.map(([s, n]) => n + ' ' + s).join(', ') : '');
        g.append(title, svgEl('rect', { width: BW, height: BH, rx: 6 }));
        const name = svgEl('text', { x: 8, y: 17, class: 'dag-name' });
        name.textContent = ('#' + i + ' ' + (leaf.name || (leaf.backend || '?') + ' ' + (leaf.action || '?'))).slice(0, 22);
        const sub = svgEl('text', { x: 8, y: 34, class: 'dag-sub' });
        sub.textContent = tally.length ? tally.slice(0, 2).map(([s, n]) => n + ' ' + (CELL_SHORT[s] || s)).join(' \u00b7 ')
                                       : 'no cell';
        g.append(name, sub);
        if (onOpen) {
            g.addEventListener('click', () => onOpen(i));
            g.addEventListener('keydown', (ev) => {
                if (ev.key === 'Enter' || ev.key === ' ') {
                    ev.preventDefault();
                    onOpen(i);
                }
            });
        }
        svg.append(g);
    });
    return h('section', { class: 'dagbox card' }, h('h2', null, 'Task graph'),
        h('div', { class: 'hscroll' }, svg));
}
