// grid dashboard, #/jobs/ID: one job at fleet size (tallies per step,
// failures first, filters, heat map, histograms, batches, the DAG).

import { ApiError, CELL_SHORT, FINAL, apiRequest, FINAL_CELL, IN_FLIGHT, api, append, badge, cellRank, clear, cssName,
    enc, eventBadge, every, fact, flash, flashError, flattenSteps, fmtBytes, fmtClock,
    fmtDuration, fmtTime, frameWork, h, jobLink, legend, loadOutput, onScrollFrame, pageBytes, progressEls,
    progressText, q, roleButton, sleep, sse, targetText, timeEl, toneColour, virtualRows } from './common.js';
import { CellTable, failuresFirst, packCells } from './jobcells.js';
import { batchesView, dagView } from './jobgraph.js';

export function jobView(ctx, id) {
    const abort = new AbortController();
    let record = null;
    let lastSeq = 0;
    let selected = null;           // {step, node} of the open cell
    let streaming = false;
    let stopPoll = null;
    let refetchTimer = null;
    // The grid's rows: virtualised past VIRTUAL_ROWS (drawRows)
    let rowState = null;           // {nsteps, pending} of the last drawGrid
    let cells = null;              // the record's cells (jobcells.js), moved by the stream
    let details = null;            // without a Worker: the record's cells whole (results)
    let recordVersion = 0;         // counts the records fetched
    const detailCache = new Map(); // step/node -> the cell whole, of this record
    let stepOnly = null;           // the one step shown (a DAG box clicked), or null
    // Two Workers, so that the record and the events (10 MB each at
    // 10,000 nodes) are parsed at once on two cores
    const recordWorker = offThread();
    const eventsWorker = offThread();
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
    let progress = null;           // the job's last progress (job.progress, the stream)
    // The nodes' groups and labels (node.list, read once, in the record's
    // Worker: it answers the choices with their counts, and the rows a
    // choice keeps as a mask): the rows can be filtered by them
    let nodeInfo = null;           // read here (no Worker): Map(node -> {groups: [..], labels: ['k=v', ..]})
    let nodeChoices = null;        // {groups: [[group, nodes of the job], ..], labels: [[label, nodes], ..]}
    let nodeInfoAsked = false;
    let cellsSeq = 0;              // which record the cells are: the Worker's count, or -recordVersion
    let nodeMask = null;           // {key, seq, mask}: the rows the group and label filters keep
    let maskAsked = '';
    const groupSelect = h('select', { id: 'grid-group', 'aria-label': 'nodes of a group', hidden: true });
    const labelSelect = h('select', { id: 'grid-label', 'aria-label': 'nodes with a label', hidden: true });
    let groupFilter = ctx.query.get('group') || '';
    let labelFilter = ctx.query.get('label') || '';
    const shapesBox = h('div', { class: 'shapes' });
    const mapBox = h('div', { class: 'mapbox', id: 'heatmap', hidden: true });
    const forceMap = ctx.query.get('view') === 'map';
    const statusChips = h('nav', { class: 'filters', id: 'cell-filters', 'aria-label': 'cell status filter' });
    // The drawing, spread over frames (frameWork): the rows first, then the
    // heat map's steps, histograms, batches and DAG, filters, one piece at a time
    const work = frameWork(ctx);

    const head = h('div', { class: 'jobhead' });
    const actions = h('div', { class: 'actions' });
    const gridBox = h('div', { class: 'gridbox' });
    const cellBox = h('section', { class: 'cell card', id: 'cell', hidden: true });
    const liveEl = h('span', { class: 'live muted', id: 'live' });
    const eventsBody = h('tbody');
    const eventsNote = h('p', { class: 'muted small', id: 'events-older', hidden: true });
    ctx.main.append(
        h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / ',
          h('span', { class: 'mono', text: id })),
        head, actions,
        shapesBox,
        h('div', { class: 'titlebar' }, h('h2', null, 'Nodes \u00d7 steps ', liveEl),
          h('div', { class: 'gridfilters' }, groupSelect, labelSelect, gridFilter)),
        statusChips, mapBox, gridBox, cellBox,
        h('h2', null, 'Timeline'), eventsNote,
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
        const cell = cellOf(step, node);
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
        if (p && typeof p === 'object')
            progress = p;
        if (record && p && (typeof p.batch === 'number' || typeof p.budget === 'number'))
            drawShapes();
        // The step under way and the status, told without the record
        if (record && p && typeof p.step === 'number' && typeof p.status === 'string'
            && !FINAL.has(record.status) && (p.step !== record.step || p.status !== record.status)) {
            record.step = p.step;
            record.status = p.status;
            work.later('head', drawHead);
        }
        tasks = new Map();
        for (const t of (p && Array.isArray(p.tasks) ? p.tasks : []))
            if (t && typeof t.node === 'string' && typeof t.step === 'number')
                tasks.set(t.step + '/' + t.node, t);
        if (!record)
            return;
        for (const btn of gridBox.querySelectorAll('.cellbtn[data-status="running"]')) {
            const step = Number(btn.dataset.step);
            const cell = cellOf(step, btn.dataset.node);
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

    // The rows in their order, from the cells (derive): every node's index
    // in the table, failures first (failed, timeout, lost, offline,
    // interrupted, then the rest) and by name within; those the filters
    // keep; the counts per status per step and per row.
    let view = null;               // {all, matching: Int32Array of table indices, counts}
    const derive = () => {
        const n = cells.nodes.length;
        // The record's own, made in the Worker, then kept by the cells'
        // moves; the order too, until a cell moves (then a pass over the
        // nodes, not their cells)
        const counts = cells.counts(cellRank);
        const all = cells.derived ? cells.derived.all : failuresFirst(counts.worst);
        if (statusFilter && !counts.rows.has(statusFilter))
            statusFilter = '';
        const needle = gridFilter.value.trim().toLowerCase();
        const bit = statusFilter ? cells.codes.get(statusFilter) : undefined;
        const onStep = stepOnly !== null ? cells.status[stepOnly] || new Uint8Array(n) : null;
        // The group and label choices' rows (null: not known yet, none shown)
        const keep = groupFilter || labelFilter ? keptByNodes() : undefined;
        const matching = !needle && !statusFilter && keep === undefined && !onStep ? all
            : all.filter((i) => (!needle || cells.nodes[i].toLowerCase().includes(needle))
                    && (!statusFilter || (bit < 32 && (counts.masks[i] & (1 << bit)) !== 0))
                    && (!onStep || onStep[i] !== 0)
                    && (keep === undefined || (keep !== null && keep[i] === 1)));
        view = { all, matching, counts };
    };

    // The rows of the cells shown that the group and label choices keep, as
    // a mask over the cells' nodes, or null while it is not known. The
    // Worker that read the record and the node list answers it; without one,
    // it is made here from the node list.
    const filterKey = () => groupFilter + '\n' + labelFilter;
    const keptByNodes = () => {
        const key = filterKey();
        if (nodeMask && nodeMask.key === key && nodeMask.seq === cellsSeq)
            return nodeMask.mask;
        if (nodeInfo || cellsSeq <= 0) {
            if (!nodeInfo)
                return null;
            const mask = new Uint8Array(cells.nodes.length);
            cells.nodes.forEach((node, i) => {
                const info = nodeInfo.get(node);
                mask[i] = info && (!groupFilter || info.groups.includes(groupFilter))
                    && (!labelFilter || info.labels.includes(labelFilter)) ? 1 : 0;
            });
            nodeMask = { key, seq: cellsSeq, mask };
            return mask;
        }
        const asked = key + '\n' + cellsSeq;
        if (maskAsked !== asked && nodeChoices) {
            maskAsked = asked;
            recordWorker.ask({ mask: { group: groupFilter, label: labelFilter } }).then((m) => {
                maskAsked = '';
                if (!ctx.live() || !m || !m.mask)
                    return;
                nodeMask = { key, seq: m.seq, mask: m.mask };
                if (m.seq === cellsSeq && key === filterKey())
                    work.later('grid', drawGrid);
            });
        }
        // Meanwhile, the mask of an earlier record of as many nodes
        return nodeMask && nodeMask.key === key && nodeMask.mask.length === cells.nodes.length
            ? nodeMask.mask : null;
    };

    // The cell of STEP on NODE as the grid shows it (the record's, moved
    // by the stream), or null.
    const cellOf = (step, node) => (cells ? cells.cell(step, node) : null);

    // The steps shown as columns: all, or the one a DAG box chose.
    const columns = (nsteps) => (stepOnly !== null && stepOnly < nsteps ? [stepOnly]
        : Array.from({ length: nsteps }, (_, s) => s));

    const drawGrid = () => {
        const r = record;
        const steps = flattenSteps(r.tasks);
        const nsteps = Math.max(cells.nsteps, steps.length);
        if (stepOnly !== null && stepOnly >= nsteps)
            stepOnly = null;
        // Read before the grid changes, while the layout is still clean
        const top = scrollBox.scrollTop;
        derive();
        drawChips();
        gridFilter.hidden = cells.nodes.length <= 10;
        // The rows now; the heat map and the choices in later pieces: the
        // first screen of rows sooner, and no one long task
        cellChanges.clear();
        mapChanges.clear();
        work.later('map', () => drawMap(nsteps, steps));
        work.later('filters', drawNodeFilters);
        const headRow = h('tr', null, h('th', { class: 'corner' }, 'node \\ step'));
        for (const s of columns(nsteps)) {
            const st = steps[s];
            const leaf = st ? st.leaf : {};
            const label = (leaf.backend || '?') + ' ' + (leaf.action || '?');
            const where = st ? (st.sub !== undefined ? 'phase ' + st.phase + '.' + st.sub : 'phase ' + st.phase) : '';
            const tally = tallyOf(view.counts.steps[s] || new Map());
            headRow.append(h('th', { class: 'step' + (s === r.step && !FINAL.has(r.status) ? ' current' : ''),
                                     title: where + (leaf.condition ? ' \u00b7 ' + leaf.condition : '') },
                h('span', { class: 'stepno', text: '#' + s }), ' ',
                h('span', { text: leaf.name ? leaf.name : label }),
                leaf.name ? h('div', { class: 'small muted', text: label }) : null,
                h('div', { class: 'tallies small', dataset: { step: String(s) }, hidden: !tally.length }, tally)));
        }
        rowState = { nsteps, pending: r.status === 'pending' };
        clear(gridBox);
        clear(scrollBox);
        gridTbody = h('tbody');
        rowCache = new Map();
        scrollBox.append(h('table', { class: 'grid', id: 'grid',
                                      dataset: { step: stepOnly === null ? '' : String(stepOnly) } },
                           h('thead', null, headRow), gridTbody));
        gridBox.append(scrollBox, legend());
        if (top)
            scrollBox.scrollTop = top;   // (which lays the page out at once: not at the top)
        // The rows in view now, those either side in a later piece
        rowPitch.top = top;
        rowPitch.lean = true;
        drawRows();
        work.later('rows', drawRows);
    };

    // A step's counts per status, as tally chips (failures first).
    const tallyOf = (counts) => [...counts.entries()]
        .filter(([, n]) => n > 0)
        .sort((a, b) => cellRank(a[0]) - cellRank(b[0]))
        .map(([status, n]) => h('span', { class: 'tally st-' + cssName(status),
                                         dataset: { status }, text: n + ' ' + (CELL_SHORT[status] || status) }));

    // The stream's events move the cells they name in place (a status
    // only: durations, exit codes and outputs come with the next fetch of
    // the record): a 10,000-node job is not fetched, parsed, counted and
    // redrawn whole for each change. Once a frame (at most every
    // CELL_DRAW_MS, twice that past 2,000 nodes), the cells are counted again (typed arrays: about a
    // millisecond for 30,000), the chips, the tallies, the rows' order
    // (failures first) and the rows in view follow, and the heat map's
    // changed squares are painted (all of them when the order moved).
    const EVENT_CELL = { dispatched: 'dispatched', acknowledged: 'acknowledged', running: 'running',
                         succeeded: 'success', failed: 'failed', timeout: 'timeout', lost: 'lost',
                         interrupted: 'interrupted', cancelled: 'cancelled', offline: 'offline',
                         drained: 'drained', unsupported: 'unsupported', retried: 'retry_wait' };
    let mapState = null;           // the heat map drawn: see drawMap
    const cellChanges = new Map(); // step/node -> {step, node}: not drawn yet
    const mapChanges = new Map();  // step/node -> {step, node}: not painted on the heat map yet
    let cellFrame = 0;
    let cellsStreamed = false;     // the stream moved a cell: the record is fetched less often
    let recentCellEvents = [];     // the cell events of the stream since the last fetch began
    const applyEvent = (e, again) => {
        const status = EVENT_CELL[e.event];
        if (!status || typeof e.node !== 'string' || typeof e.step !== 'number')
            return;
        // Kept even before the first record came: applied to it when it does
        if (!again)
            recentCellEvents.push(e);
        if (!cells || e.step < 0 || e.step >= cells.nsteps)
            return;
        const i = cells.index.get(e.node);
        if (i === undefined)
            return;
        const old = cells.statusAt(e.step, i);
        // An event older than the record fetched does not undo what it says
        if (old === status || (FINAL_CELL.has(old) && !FINAL_CELL.has(status) && status !== 'retry_wait'))
            return;
        if (cells.setStatus(e.step, e.node, status) === undefined)
            return;
        cellsStreamed = true;
        cellChanges.set(e.step + '/' + e.node, { step: e.step, node: e.node });
        // Drawn at the next frame after CELL_DRAW_MS: a burst of events is
        // one redraw of its cells. A large job's redraw counts and paints
        // all its cells: half as often
        if (!cellFrame)
            cellFrame = setTimeout(() => work.later('cells', drawCellChanges),
                                   cells.nodes.length > 2000 ? 2 * CELL_DRAW_MS : CELL_DRAW_MS);
    };
    const CELL_DRAW_MS = 200;
    const sameOrder = (a, b) => {
        if (!a || !b || a.length !== b.length)
            return false;
        for (let i = 0; i < a.length; i++)
            if (a[i] !== b[i])
                return false;
        return true;
    };
    const drawCellChanges = () => {
        cellFrame = 0;
        if (!ctx.live() || !record || !cells || !view || !rowState) {
            cellChanges.clear();
            return;
        }
        const before = view.matching;
        const top = scrollBox.scrollTop;   // read first, while the layout is clean
        derive();
        const moved = !sameOrder(before, view.matching);
        // The rows first: they read the layout (virtualRows), still clean
        for (const c of cellChanges.values()) {
            const tr = rowCache.get(c.node);
            rowCache.delete(c.node);
            if (!moved && tr && tr.parentNode === gridTbody) {
                const fresh = rowOf(c.node, rowState.nsteps);
                rowCache.set(c.node, fresh);
                tr.replaceWith(fresh);
            }
        }
        if (moved) {
            rowPitch.top = top;
            drawRows();
        }
        drawChips();
        for (const box of [...mapBox.querySelectorAll('.tallies[data-step]'),
                           ...gridBox.querySelectorAll('.tallies[data-step]')]) {
            const tally = tallyOf(view.counts.steps[Number(box.dataset.step)] || new Map());
            clear(box);
            box.append(...tally);
            box.hidden = !tally.length;
        }
        // The heat map, the batches and the DAG, the open cell: later pieces
        for (const [key, c] of cellChanges)
            mapChanges.set(key, c);
        cellChanges.clear();
        work.later('map-changes', paintMapChanges);
        work.later('shapes', drawShapes);
        if (selected)
            work.later('cell', drawCell);
    };

    // The heat map's squares the cells' changes moved (all of them when
    // the rows' order moved).
    const paintMapChanges = () => {
        if (mapState && view && sameOrder(mapState.order, view.matching)) {
            const steps = new Set();
            for (const c of mapChanges.values())
                if (paintSquare(c.step, cells.index.get(c.node)))
                    steps.add(c.step);
            for (const s of steps)
                putMap(s);
        } else if (mapState) {
            paintMap();
        }
        mapChanges.clear();
    };

    // One node's row of the grid.
    const rowOf = (node, nsteps) => {
        const row = h('tr', { dataset: { node } }, h('th', { class: 'node mono', text: node }));
        for (const s of columns(nsteps)) {
            const cell = cellOf(s, node);
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
        if (!rowState || !gridTbody || !view) {
            delete rowPitch.top;
            delete rowPitch.lean;
            return;
        }
        const { nsteps, pending } = rowState;
        const matching = view.matching;
        if (!matching.length) {
            delete rowPitch.top;
            delete rowPitch.lean;
            clear(gridTbody);
            gridTbody.append(h('tr', null, h('td', { colspan: nsteps + 1, class: 'muted empty' },
                pending ? 'Waiting to start.' : 'No node took part.')));
            return;
        }
        // A row drawn stays the same element until its cells change: a
        // scroll moves the window without building again the rows kept
        if (rowCache.size > 4 * VIRTUAL_KEEP)
            rowCache.clear();
        virtualRows(scrollBox, gridTbody, matching.length, (i) => {
            const node = cells.nodes[matching[i]];
            let tr = rowCache.get(node);
            if (!tr) {
                tr = rowOf(node, nsteps);
                rowCache.set(node, tr);
            }
            return tr;
        }, rowPitch);
    };
    const VIRTUAL_KEEP = 500;
    let rowCache = new Map();      // node -> its row drawn (drawRows), for this drawGrid's table

    // The heat map: per step, one small square per node (in the rows'
    // order: failures first), coloured by the cell's status, drawn on a
    // canvas so that 10,000 cells are one element; hovering names the cell
    // below the map, a click opens it. Under each step, its durations.
    // Shown from MAP_NODES nodes on (or with ?view=map). The squares are
    // written as pixels (an ImageData per step, one pixel a square, shown
    // scaled up: startSquares), where 30,000 fillRect calls took 25 to 85 ms.
    const MAP_NODES = 40;
    // The page's width, told after each layout that changed it (read, it
    // would lay the page out at once: drawMap comes after the rows)
    let mainWidth = 0;
    const widthWatch = typeof ResizeObserver === 'function' ? new ResizeObserver((entries) => {
        for (const e of entries)
            mainWidth = Math.round(e.contentRect.width);
    }) : null;
    if (widthWatch)
        widthWatch.observe(ctx.main);
    const drawMap = (nsteps, steps) => {
        const nodes = view.matching;
        mapBox.hidden = !(forceMap || nodes.length >= MAP_NODES);
        mapState = null;
        mapChanges.clear();
        if (mapBox.hidden)
            return;
        clear(mapBox);
        const width = Math.max(240, Math.min(960, (mainWidth || ctx.main.clientWidth) - 20));
        const size = nodes.length > 4000 ? 5 : nodes.length > 1000 ? 7 : 10;
        const pitch = size + 1;
        const perRow = Math.max(1, Math.floor(width / pitch));
        const rows = Math.max(1, Math.ceil(nodes.length / perRow));
        const info = h('div', { class: 'small mono mapinfo', id: 'heatmap-info',
                                text: 'hover a square for its cell; click to open it' });
        const m = { order: null, pos: null, images: [], canvases: [], u32: [],
                    colours: new Map(), perRow, rows, pitch, size };
        mapState = m;
        placeMap();
        // Every step's box at once (one layout); its squares and its
        // histogram each a piece of work of their own, in later frames
        const cols = columns(nsteps);
        const slots = [];
        for (const s of cols) {
            const leaf = (steps[s] || {}).leaf || {};
            // One pixel a square, shown PITCH times as large, unsmoothed; the
            // gaps between squares are a box over it (style.css .heatgaps)
            const canvas = h('canvas', { class: 'heat', dataset: { step: String(s), pitch: String(pitch),
                                                                 perRow: String(perRow) },
                                         width: perRow, height: rows });
            canvas.style.width = perRow * pitch + 'px';
            canvas.style.height = rows * pitch + 'px';
            const gaps = h('div', { class: 'heatgaps' });
            gaps.style.setProperty('--pitch', pitch + 'px');
            const at = (ev) => {
                const rect = canvas.getBoundingClientRect();
                const x = Math.floor((ev.clientX - rect.left) / pitch);
                const y = Math.floor((ev.clientY - rect.top) / pitch);
                const p = y * perRow + x;
                return x >= 0 && x < perRow && p >= 0 && m.order && p < m.order.length
                    ? cells.nodes[m.order[p]] : null;
            };
            canvas.addEventListener('mousemove', (ev) => {
                const node = at(ev);
                const cell = node ? cellOf(s, node) : null;
                info.textContent = !node ? '' : node + ' \u00b7 step ' + s + ': '
                    + (cell ? cell.status + (cell.reason ? ' (' + cell.reason + ')' : '')
                              + (typeof cell.duration_ms === 'number' && cell.duration_ms ? ' \u00b7 '
                                 + fmtDuration(cell.duration_ms) : '') : 'no cell');
            });
            canvas.addEventListener('click', (ev) => {
                const node = at(ev);
                if (!node || !cellOf(s, node))
                    return;
                selected = { step: s, node };
                drawCell();
                cellBox.scrollIntoView({ block: 'nearest' });
            });
            // Its name and its counts per status above its squares
            const tally = tallyOf(view.counts.steps[s] || new Map());
            const slot = h('div', { class: 'histslot' });
            slots.push([s, slot]);
            mapBox.append(h('div', { class: 'mapstep' },
                h('div', { class: 'small mapstep-head' },
                    h('span', { text: '#' + s + ' ' + (leaf.name || ((leaf.backend || '?') + ' '
                                                                   + (leaf.action || '?'))) }),
                    h('span', { class: 'tallies', dataset: { step: String(s) }, hidden: !tally.length }, tally)),
                h('div', { class: 'heatwrap' }, canvas, gaps), slot));
            work.later('map-step-' + s, () => {
                if (mapState !== m)
                    return;
                startSquares(s, canvas);
                paintRange(s, 0, m.order.length);
                putMap(s);
            });
        }
        mapBox.append(info);
        // The durations of each step's finished cells that ran (the
        // record's; a skipped cell's 0 is no run's), once the squares are in
        for (const [s, slot] of slots)
            work.later('map-hist-' + s, () => {
                if (mapState !== m)
                    return;
                const durations = new Float64Array(m.order.length);
                let done = 0;
                const col = cells.duration[s];
                for (let p = 0; col && p < m.order.length; p++) {
                    const i = m.order[p];
                    const status = cells.statusAt(s, i);
                    if (!Number.isNaN(col[i]) && FINAL_CELL.has(status) && status !== 'skipped')
                        durations[done++] = col[i];
                }
                const hist = durationHistogram(durations.subarray(0, done), s);
                if (hist)
                    slot.replaceWith(hist);
                else
                    slot.remove();
            });
    };

    // A status's colour as a pixel (the bytes R, G, B, A in memory order).
    let pixelCanvas = null;
    const pixelOf = (status) => {
        const m = mapState;
        let px = m.colours.get(status);
        if (px !== undefined)
            return px;
        pixelCanvas = pixelCanvas || h('canvas', { width: 1, height: 1 }).getContext('2d', { willReadFrequently: true });
        pixelCanvas.clearRect(0, 0, 1, 1);
        pixelCanvas.fillStyle = status ? toneColour(status) : getComputedStyle(
            document.documentElement).getPropertyValue('--line').trim() || '#ddd';
        pixelCanvas.fillRect(0, 0, 1, 1);
        px = new Uint32Array(pixelCanvas.getImageData(0, 0, 1, 1).data.buffer)[0];
        m.colours.set(status, px);
        return px;
    };

    // A step's squares are the pixels of its canvas, one a square (perRow
    // x rows: 10,000 pixels for 10,000 nodes, where a square of its own
    // pixels each was 25 to 100 times as many to write, put and composite).
    const startSquares = (s, canvas) => {
        const m = mapState;
        const g = canvas.getContext('2d');
        m.canvases[s] = g;
        m.images[s] = g.createImageData(m.perRow, m.rows);
        m.u32[s] = new Uint32Array(m.images[s].data.buffer);
    };

    // Writes the squares at positions FROM to TO (of the map's order) of
    // step S as pixels of its image.
    const paintRange = (s, from, to) => {
        const m = mapState;
        const col = cells.status[s];
        const u32 = m.u32[s];
        if (!m.byCode || m.byCode.length !== cells.names.length)
            m.byCode = cells.names.map((name) => pixelOf(name));
        const byCode = m.byCode;
        const order = m.order;
        for (let p = from; p < to; p++)
            u32[p] = byCode[col ? col[order[p]] : 0];
    };

    // Writes the square of the node of table index I on step S. False when
    // the map does not show it.
    const paintSquare = (s, i) => {
        const m = mapState;
        const p = m && m.pos && i !== undefined ? m.pos[i] : -1;
        if (p < 0 || !m.images[s])
            return false;
        paintRange(s, p, p + 1);
        return true;
    };
    const putMap = (s) => {
        const m = mapState;
        if (m && m.images[s])
            m.canvases[s].putImageData(m.images[s], 0, 0);
    };

    // The map's squares in the rows' order now (where each node's is).
    const placeMap = () => {
        const m = mapState;
        m.order = view.matching;
        m.pos = new Int32Array(cells.nodes.length).fill(-1);
        for (let p = 0; p < m.order.length; p++)
            m.pos[m.order[p]] = p;
    };

    // Every square of the map drawn so far, in the rows' order now.
    const paintMap = () => {
        const m = mapState;
        if (!m || !view)
            return;
        placeMap();
        m.images.forEach((img, s) => {
            if (!img)
                return;
            paintRange(s, 0, m.order.length);   // the same squares: all written
            putMap(s);
        });
    };

    // One chip per status some row has (how many rows have it), failures
    // first; a click shows those rows only. Hidden while every row went well.
    const drawChips = () => {
        const counts = view.counts;
        const total = view.all.length;
        const present = [...counts.rows.entries()].sort((a, b) => cellRank(a[0]) - cellRank(b[0]));
        const key = JSON.stringify([present, total, statusFilter]);
        if (statusChips.dataset.drawn === key)
            return;
        statusChips.dataset.drawn = key;
        clear(statusChips);
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

    // The group and label choices: those the job's nodes have, with how
    // many of them (hidden when none has any); a choice keeps the rows of
    // those nodes only.
    const drawNodeFilters = () => {
        const fill = (select, values, current, any) => {
            const key = JSON.stringify([values, current]);
            if (select.dataset.drawn === key)
                return;
            select.dataset.drawn = key;
            clear(select);
            select.append(h('option', { value: '', text: any }));
            for (const [v, n] of values)
                select.append(h('option', { value: v, text: v + ' (' + n + ')', selected: v === current }));
            select.value = current;
            select.hidden = !values.length && !current;
        };
        fill(groupSelect, nodeChoices ? nodeChoices.groups : [], groupFilter, 'any group');
        fill(labelSelect, nodeChoices ? nodeChoices.labels : [], labelFilter, 'any label');
    };
    groupSelect.addEventListener('change', () => {
        groupFilter = groupSelect.value;
        scrollBox.scrollTop = 0;
        if (record)
            drawGrid();
    });
    labelSelect.addEventListener('change', () => {
        labelFilter = labelSelect.value;
        scrollBox.scrollTop = 0;
        if (record)
            drawGrid();
    });
    // The node list (10,000 nodes: megabytes of JSON) is read in the
    // record's Worker, which answers the choices for the job's nodes,
    // counted; without one, here.
    const loadNodeInfo = async () => {
        try {
            const req = apiRequest('/nodes');
            const m = recordWorker.ok() && cellsSeq > 0
                ? await recordWorker.ask({ nodes: req.url, headers: req.headers }) : null;
            let choices = null;
            if (m && m.status === 200 && Array.isArray(m.groups) && Array.isArray(m.labels)) {
                choices = { groups: m.groups, labels: m.labels };
            } else {
                const r = await api('GET', '/nodes', undefined, { signal: abort.signal });
                const info = new Map();
                for (const n of (r && r.nodes) || [])
                    info.set(n.id, { groups: Array.isArray(n.groups) ? n.groups : [],
                                     labels: Object.entries(n.labels || {}).map(([k, v]) => k + '=' + v) });
                const count = (pick) => {
                    const counts = new Map();
                    for (const node of (cells && cells.nodes) || [])
                        for (const v of (info.get(node) || {})[pick] || [])
                            counts.set(v, (counts.get(v) || 0) + 1);
                    return [...counts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
                };
                nodeInfo = info;   // the masks are made here from now on
                choices = { groups: count('groups'), labels: count('labels') };
            }
            if (!ctx.live())
                return;
            nodeChoices = choices;
            // The choices only, unless one is made (the address's): the
            // rows change then
            if (record && cells && (groupFilter || labelFilter))
                work.later('grid', drawGrid);
            else if (record && cells)
                work.later('filters', drawNodeFilters);
        } catch (err) {
            // the filters stay hidden: the grid is whole without them
        }
    };

    // The rolling job's batches and the graph job's DAG, when it has them,
    // in the cells' state now (drawn again when the counts move). A click
    // on a DAG box (or Enter or Space on it) shows that step's column only;
    // on the box shown, all of them again.
    let shapesDrawn = '';
    const drawShapes = () => {
        const r = record;
        if (!r || !cells || !view)
            return;
        const stepCounts = view.counts.steps.map((m) => [...m.entries()]);
        const key = JSON.stringify([r.status, r.updated_at, stepCounts, stepOnly, progress
                                    && [progress.batch, progress.failed, progress.budget, progress.updated_at]]);
        if (key === shapesDrawn)
            return;
        shapesDrawn = key;
        const focused = document.activeElement && shapesBox.contains(document.activeElement)
            ? document.activeElement.getAttribute('data-step') : null;
        clear(shapesBox);
        const batches = batchesView(r, progress || r.progress || null, cells);
        const dag = dagView(r, openStep, view.counts.steps, stepOnly);
        if (batches)
            shapesBox.append(batches);
        if (dag)
            shapesBox.append(dag);
        if (focused !== null) {
            const box = shapesBox.querySelector('[data-step="' + focused + '"]');
            if (box)
                box.focus();
        }
    };
    const openStep = (step) => {
        stepOnly = stepOnly === step ? null : step;
        scrollBox.scrollTop = 0;
        drawGrid();
        drawShapes();
        gridBox.scrollIntoView({ block: 'nearest' });
    };

    // The whole cell of STEP on NODE (its outputs, history, data) of the
    // record fetched last: from the Worker, which keeps them, or from the
    // record here without one. Undefined while it is asked for (drawCell
    // is called again when it comes).
    const detailsAsked = new Set();
    const detailOf = (step, node) => {
        const key = step + '/' + node;
        if (detailCache.has(key))
            return detailCache.get(key);
        if (details || !recordWorker.ok()) {
            const cell = details && details[String(step)] && Object.hasOwn(details[String(step)], node)
                ? details[String(step)][node] : null;
            detailCache.set(key, cell);
            return cell;
        }
        if (!detailsAsked.has(key)) {
            detailsAsked.add(key);
            const version = recordVersion;
            recordWorker.ask({ cell: { step, node } }).then((m) => {
                detailsAsked.delete(key);
                if (version === recordVersion)
                    detailCache.set(key, (m && m.cell) || null);
                if (ctx.live())
                    drawCell();
            });
        }
        return undefined;
    };

    const drawCell = () => {
        if (!selected || !record) {
            cellBox.hidden = true;
            drawnCell = '';
            return;
        }
        const { step, node } = selected;
        // The grid's cell (moved by the stream) over the record's whole one
        const shown = cellOf(step, node);
        const whole = shown ? detailOf(step, node) : null;
        if (whole === undefined)
            return;
        const cell = shown ? Object.assign({}, whole || {}, shown) : null;
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

    let fetchedAt = 0;             // when the record was last asked for
    const refetch = async () => {
        const since = recentCellEvents.length;
        fetchedAt = Date.now();
        // Fetched, parsed and counted in the Worker (its 4 MB at 10,000
        // nodes never reach this thread), the cells handed over as columns;
        // without one (or when it failed, or the broker said no), here,
        // where api() tells what went wrong
        let r = null, packed = null, whole = null, seq = 0, mask = null;
        const filter = { group: groupFilter, label: labelFilter };
        if (recordWorker.ok()) {
            const req = apiRequest('/jobs/' + enc(id));
            const m = await recordWorker.ask({ record: req.url, headers: req.headers, filter });
            if (m && m.status === 200 && m.head && m.cells) {
                r = m.head;
                packed = m.cells;
                if (m.expectedIsNodes)
                    r.expected = packed.nodes;
                seq = m.seq;
                mask = m.mask || null;
            }
        }
        if (!r) {
            whole = await api('GET', '/jobs/' + enc(id), undefined, { signal: abort.signal });
            packed = packCells(whole);
            r = whole;
        }
        if (!ctx.live())
            return;
        details = whole ? whole.results || {} : null;
        delete r.results;
        record = r;
        cells = new CellTable(packed);
        recordVersion++;
        cellsSeq = seq > 0 ? seq : -recordVersion;
        if (mask)
            nodeMask = { key: filter.group + '\n' + filter.label, seq, mask };
        detailCache.clear();
        // The events that came while the record was on its way may be newer
        // than it: applied again (drawGrid draws them), a slice at a time
        // (thousands at a large step's end), the stream's waiting meanwhile
        const later = recentCellEvents.slice(since);
        recentCellEvents = [];
        replaying = true;
        try {
            let start = performance.now();
            for (let k = 0; k < later.length; k++) {
                applyEvent(later[k], true);
                if ((k & 255) === 255 && performance.now() - start > DRAIN_MS) {
                    await sleep(0);
                    if (!ctx.live())
                        return;
                    start = performance.now();
                }
            }
        } finally {
            replaying = false;
        }
        if (r.progress)
            progress = r.progress;
        if (FINAL.has(r.status)) {
            setLive('');
            progress = null;
        }
        if (!nodeInfoAsked && (r.expected || []).length > 1) {
            nodeInfoAsked = true;
            loadNodeInfo();
        }
        drawRecord();
    };

    // The record drawn, in pieces of work (frameWork): the grid's rows,
    // then the head, the batches and DAG, the open cell (the heat map and
    // the choices come after the rows: drawGrid). Once however often it came.
    const drawRecord = () => {
        if (!ctx.live() || !record)
            return;
        work.later('grid', drawGrid);
        work.later('head', drawHead);
        work.later('shapes', drawShapes);
        work.later('cell', drawCell);
        work.later('status', () => {
            document.body.dataset.jobStatus = record.status;
        });
    };

    const scheduleRefetch = () => {
        if (refetchTimer)
            return;
        // A large job's record is large: fetch it less often (at most every
        // 5 s; every 30 s while the stream's events move its cells)
        const cells = record ? (record.expected || []).length * Math.max(1, record.steps || 1) : 0;
        const wait = () => Math.min(5000, 300 + cells * 2) * (cellsStreamed && cells > 2000 ? 6 : 1);
        const due = () => {
            // The stream may have begun moving the cells since: wait longer
            const left = fetchedAt + wait() - Date.now();
            if (left > 50) {
                refetchTimer = setTimeout(due, left);
                return;
            }
            refetchTimer = null;
            refetch().catch(onError);
        };
        refetchTimer = setTimeout(due, wait());
    };

    // The timeline: every event is kept, the newest eventsLimit are rows
    // (a 10,000-node job has some 90,000 events: as rows, 700,000 elements
    // and a page frozen for a minute); "Show older" adds EVENTS_PAGE more.
    // Events wait for the next animation frame: a burst is one DOM change.
    const EVENTS_PAGE = 500;
    const eventsAll = [];          // the job's events (but the eventsHeld oldest), in order
    let eventsHeld = 0;            // the oldest events, kept by the Worker (fetchEvents)
    let eventsLimit = EVENTS_PAGE; // the newest this many are rows
    let eventsDrawn = 0;           // eventsAll[0 .. eventsDrawn) went through flushEvents
    let eventFrame = 0;
    const addEvents = (events) => {
        for (const e of events) {
            if (!e || typeof e !== 'object')
                continue;
            if (typeof e.seq === 'number' && e.seq <= lastSeq)
                continue;
            if (typeof e.seq === 'number')
                lastSeq = e.seq;
            eventsAll.push(e);
        }
        if (!eventFrame && eventsDrawn < eventsAll.length && !work.pending('events'))
            eventFrame = setTimeout(() => {
                eventFrame = 0;
                // The last flush replaced every row (more events came than
                // rows are shown): nobody reads them at that pace; flushed
                // four times less often
                eventsFlooded = eventsAll.length - eventsDrawn >= eventsLimit;
                work.later('events', flushEvents);
            }, eventsFlooded ? 4 * EVENTS_DRAW_MS : EVENTS_DRAW_MS);
    };
    const EVENTS_DRAW_MS = 250;
    const EVENTS_PIECE = 100;      // rows made in one piece of work (flushEvents)
    let eventsFlooded = false;
    const eventRow = (e) => h('tr', { class: 'ev-' + cssName(e.event) },
        h('td', { class: 'muted', text: e.seq }),
        h('td', { class: 'mono', text: fmtClock(e.time), title: fmtTime(e.time) }),
        h('td', null, eventBadge(e)),
        h('td', { class: 'mono', text: e.node || '' }),
        h('td', { text: e.step !== undefined ? e.step : '' }),
        h('td', { class: 'detail', text: e.detail || '' }));
    const drawEventsNote = () => {
        const older = eventsHeld + eventsDrawn - eventsBody.childElementCount;
        clear(eventsNote);
        eventsNote.hidden = older <= 0;
        if (older > 0)
            eventsNote.append(
                h('span', { text: 'The newest ' + eventsBody.childElementCount + ' of ' + (eventsHeld + eventsDrawn)
                            + ' events; ' + older + ' older not shown. ' }),
                h('button', { type: 'button', class: 'link', id: 'events-show-older',
                              text: 'Show ' + Math.min(older, EVENTS_PAGE) + ' older', onclick: showOlder }));
    };
    // The events not drawn yet become rows, EVENTS_PIECE at a time (the
    // rest in the next piece of work): 500 rows at once were a long task
    const flushEvents = () => {
        if (!ctx.live())
            return;
        const rows = document.createDocumentFragment();
        const from = Math.max(eventsDrawn, eventsAll.length - eventsLimit);
        const to = Math.min(eventsAll.length, from + EVENTS_PIECE);
        for (let i = from; i < to; i++)
            rows.append(eventRow(eventsAll[i]));
        eventsDrawn = to;
        if (to < eventsAll.length)
            work.later('events', flushEvents);
        eventsBody.append(rows);
        const excess = eventsBody.childElementCount - eventsLimit;
        if (excess > 0) {
            // The oldest rows go at once (one by one cost more than the new)
            const range = document.createRange();
            range.setStartBefore(eventsBody.firstElementChild);
            range.setEndBefore(eventsBody.children[excess]);
            range.deleteContents();
        }
        drawEventsNote();
    };
    const showOlder = async (ev) => {
        let oldest = eventsDrawn - eventsBody.childElementCount;
        if (oldest < EVENTS_PAGE && eventsHeld > 0 && eventsWorker.ok()) {
            // Those the Worker keeps come first
            ev.target.disabled = true;
            const r = await eventsWorker.ask({ older: EVENTS_PAGE });
            if (!ctx.live())
                return;
            eventsAll.unshift(...r.events);
            eventsDrawn += r.events.length;
            oldest += r.events.length;
            eventsHeld = r.held;
        }
        eventsLimit = eventsBody.childElementCount + EVENTS_PAGE;
        const rows = document.createDocumentFragment();
        for (let i = Math.max(0, oldest - EVENTS_PAGE); i < oldest; i++)
            rows.append(eventRow(eventsAll[i]));
        eventsBody.prepend(rows);
        drawEventsNote();
    };

    // The first answer (all the job's events so far) is fetched and parsed
    // in a Worker, which keeps all but the newest EVENTS_PAGE (eventsHeld)
    // for "Show older"; the page gets those. Without a Worker, here.
    let eventsAsked = false;        // the first events were asked of the Worker
    const fetchEvents = async () => {
        if (!lastSeq && !eventsAsked && eventsWorker.ok()) {
            eventsAsked = true;
            const req = apiRequest('/jobs/' + enc(id) + '/events');
            const r = await eventsWorker.ask({ fetch: req.url, headers: req.headers, keep: EVENTS_PAGE });
            if (r.status === 200 && Array.isArray(r.events)) {
                if (!ctx.live())
                    return;
                eventsHeld = r.held || 0;
                addEvents(r.events);
                applyEvents(r.events);
                return;
            }
            // An error (a refused token, no such job) or no Worker: asked
            // again below, where api() tells them
        }
        const r = await api('GET', '/jobs/' + enc(id) + '/events' + q({ after: lastSeq || undefined }),
                            undefined, { signal: abort.signal });
        if (ctx.live()) {
            addEvents((r && r.events) || []);
            applyEvents((r && r.events) || []);
        }
    };

    // Events fetched (not streamed) move the cells too: the record may have
    // been read before them, and the stream starts after the last of them
    // (the newest EVENTS_PAGE of a first answer: what a record read at the
    // same moment can miss)
    const applyEvents = (events) => {
        for (const e of events)
            if (e && typeof e === 'object')
                applyEvent(e, false);
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

    // The stream's events, parsed and applied a slice at a time: a step's
    // end on 10,000 nodes comes as thousands of events in one read of the
    // stream, which as one task held the page for tens of ms.
    const streamed = [];           // the events' data, in order, not applied yet
    let drainTimer = 0;
    let replaying = false;         // refetch applies the events again: the stream waits
    const DRAIN_MS = 6;
    const drainStream = () => {
        drainTimer = 0;
        if (!ctx.live())
            return;
        if (replaying) {
            drainTimer = setTimeout(drainStream, 10);   // after the record's own (refetch)
            return;
        }
        const start = performance.now();
        const batch = [];
        let k = 0;
        while (k < streamed.length && ((k & 255) || performance.now() - start < DRAIN_MS)) {
            let obj = null;
            try {
                obj = JSON.parse(streamed[k++]);
            } catch (e) {
                continue;
            }
            if (obj && typeof obj === 'object')
                batch.push(obj);
        }
        streamed.splice(0, k);
        addEvents(batch);
        for (const e of batch)
            applyEvent(e, false);
        if (streamed.length)
            drainTimer = setTimeout(drainStream, 0);
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
                    if (name === 'event') {
                        streamed.push(data);
                        if (!drainTimer)
                            drainTimer = setTimeout(drainStream, 0);
                        return;
                    }
                    let obj = null;
                    try {
                        obj = JSON.parse(data);
                    } catch (e) {
                        return;
                    }
                    if (name === 'output')
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
            // What came is applied before the record and the events are read
            while (streamed.length && ctx.live())
                await sleep(10);
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
        if (widthWatch)
            widthWatch.disconnect();
        recordWorker.stop();
        eventsWorker.stop();
        if (stopPoll)
            stopPoll();
        delete document.body.dataset.jobStatus;
        void streaming;
    };
}


// A Worker of eventsworker.js, made when first asked for: ok() says
// whether there is one (false where Workers are missing or it failed),
// ask(msg, transfer) resolves with its answer to MSG (with NO_ANSWER once
// it failed),
// stop() ends it.
function offThread() {
    const NO_ANSWER = { status: 0, events: [], held: 0, cell: null };
    let worker = null;
    let failed = false;
    let calls = 0;
    const waits = new Map();      // call id -> resolve
    const start = () => {
        if (worker || failed)
            return worker;
        try {
            worker = new Worker(new URL('eventsworker.js', import.meta.url), { type: 'module' });
        } catch (err) {
            failed = true;
            return null;
        }
        worker.onmessage = (m) => {
            const resolve = waits.get(m.data && m.data.id);
            waits.delete(m.data && m.data.id);
            if (resolve)
                resolve(m.data);
        };
        // One that cannot load or fails: every call answered "no", and the
        // page does without it
        worker.onerror = () => {
            failed = true;
            worker.terminate();
            worker = null;
            for (const resolve of waits.values())
                resolve(NO_ANSWER);
            waits.clear();
        };
        return worker;
    };
    return {
        ok: () => typeof Worker === 'function' && !!start(),
        ask: (msg, transfer) => new Promise((resolve) => {
            if (!start()) {
                resolve(NO_ANSWER);
                return;
            }
            msg.id = ++calls;
            waits.set(msg.id, resolve);
            worker.postMessage(msg, transfer || []);
        }),
        stop: () => {
            failed = true;
            if (worker)
                worker.terminate();
            worker = null;
        },
    };
}

// The durations of a step's finished cells (a Float64Array, sorted here)
// as a small bar chart (inline SVG, log scale from the fastest to the
// slowest) with p50, p90 and max.
function durationHistogram(durations, step) {
    const svgNS = 'http://www.w3.org/2000/svg';
    const box = h('div', { class: 'histogram small muted', dataset: { step: String(step) } });
    if (!durations.length)
        return null;
    durations.sort();   // a Float64Array: numbers, in order
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
