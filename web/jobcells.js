// grid dashboard: a job's cells as columns. A 10,000-node job of three
// steps has 30,000 cells; as objects (the record's `results`) they cost a
// parse of 25 to 60 ms and a structured clone as long again. Here each
// step is a few typed arrays indexed by node (the job's nodes sorted by
// name): a status code, the attempts, the duration. The Worker makes them
// from the record it parsed (packCells) and hands them over by transfer;
// the page reads and moves them (CellTable), without a DOM here: this
// module is loaded by the Worker too.

// A cell's statuses in the order a job's rows are drawn: failures first,
// then what is still under way, then what went well.
const CELL_ORDER = ['failed', 'timeout', 'lost', 'offline', 'interrupted', 'unsupported',
                    'cancelled', 'retry_wait', 'running', 'acknowledged', 'dispatched',
                    'pending', 'drained', 'skipped', 'success'];
const CELL_RANK = new Map(CELL_ORDER.map((s, i) => [s, i]));

export function cellRank(status) {
    const rank = CELL_RANK.get(status);
    return rank === undefined ? CELL_ORDER.length : rank;
}

// The table indices of a job's nodes in the rows' order: failures first
// (by WORST, each node's worst status's rank: CellTable.counts), by name
// within (the table's order), as a counting sort.
export function failuresFirst(worst) {
    const n = worst.length;
    const none = cellRank(null);
    const rank = (i) => (worst[i] < 0 ? none : Math.min(none, worst[i]));
    const start = new Uint32Array(none + 2);
    for (let i = 0; i < n; i++)
        start[rank(i) + 1]++;
    for (let k = 1; k < start.length; k++)
        start[k] += start[k - 1];
    const all = new Int32Array(n);
    for (let i = 0; i < n; i++)
        all[start[rank(i)]++] = i;
    return all;
}

// The record's cells as columns: {nodes (sorted), nsteps, names (code ->
// status; 0 is "no cell"), status, attempts, duration (one typed array per
// step), notes: [[step, index, reason, waiting]] for the cells that have
// either, derived: their counts and the rows' order (CellTable.counts by
// cellRank, and `all`: failuresFirst), made where they are packed (the
// Worker) so that the page's first draw needs no pass over the cells}.
// The typed arrays' buffers are listed in `buffers`, to transfer.
export function packCells(record) {
    const results = (record && typeof record.results === 'object' && record.results) || {};
    const seen = new Set(Array.isArray(record && record.expected) ? record.expected : []);
    let nsteps = record && typeof record.steps === 'number' && record.steps > 0 ? record.steps : 0;
    for (const key of Object.keys(results)) {
        const s = Number(key);
        if (!Number.isInteger(s) || s < 0 || s > 65535)
            continue;
        nsteps = Math.max(nsteps, s + 1);
        for (const node of Object.keys(results[key] || {}))
            seen.add(node);
    }
    const nodes = [...seen].filter((n) => typeof n === 'string').sort();
    const index = new Map(nodes.map((n, i) => [n, i]));
    const names = [null];
    const codeOf = new Map();
    const packed = { nodes, nsteps, names, status: [], attempts: [], duration: [], notes: [], buffers: [] };
    for (let s = 0; s < nsteps; s++) {
        const status = new Uint8Array(nodes.length);
        const attempts = new Uint16Array(nodes.length);
        const duration = new Float64Array(nodes.length).fill(NaN);
        const cells = results[String(s)];
        for (const node in cells || {}) {
            const cell = cells[node];
            const i = index.get(node);
            if (i === undefined || !cell || typeof cell.status !== 'string')
                continue;
            let code = codeOf.get(cell.status);
            if (code === undefined) {
                if (names.length > 255)
                    continue;    // more statuses than a byte: dropped, as the page would
                code = names.length;
                names.push(cell.status);
                codeOf.set(cell.status, code);
            }
            status[i] = code;
            attempts[i] = typeof cell.attempts === 'number' ? Math.max(0, Math.min(65535, cell.attempts)) : 0;
            if (typeof cell.duration_ms === 'number')
                duration[i] = cell.duration_ms;
            if (cell.reason || cell.waiting)
                packed.notes.push([s, i, cell.reason || '', cell.waiting || '']);
        }
        packed.status.push(status);
        packed.attempts.push(attempts);
        packed.duration.push(duration);
        packed.buffers.push(status.buffer, attempts.buffer, duration.buffer);
    }
    const counts = new CellTable(packed).counts(cellRank);
    packed.derived = Object.assign(counts, { all: failuresFirst(counts.worst) });
    packed.buffers.push(counts.masks.buffer, counts.worst.buffer, packed.derived.all.buffer);
    return packed;
}

// The cells of one record (packCells' answer), read and moved by the
// stream's events (status only: the attempts, durations and reasons are
// the record's until the next one).
export class CellTable {
    constructor(packed) {
        this.nodes = packed.nodes;
        this.nsteps = packed.nsteps;
        this.names = packed.names.slice();
        this.status = packed.status;
        this.attempts = packed.attempts;
        this.duration = packed.duration;
        this.index = new Map(this.nodes.map((n, i) => [n, i]));
        this.codes = new Map();
        this.names.forEach((n, c) => {
            if (c)
                this.codes.set(n, c);
        });
        // The counts and order packCells made, until a cell moves
        this.derived = packed.derived || null;
        this.notes = new Map();   // step * nodes + index -> [reason, waiting]
        for (const [s, i, reason, waiting] of packed.notes || [])
            this.notes.set(s * this.nodes.length + i, [reason, waiting]);
    }

    // The code of STATUS, made when new (-1 past 255 statuses).
    codeOf(status) {
        let code = this.codes.get(status);
        if (code === undefined) {
            if (this.names.length > 255)
                return -1;
            code = this.names.length;
            this.names.push(status);
            this.codes.set(status, code);
        }
        return code;
    }

    // The status of the cell of step S on the node of index I, or null.
    statusAt(s, i) {
        const col = this.status[s];
        return col && col[i] ? this.names[col[i]] : null;
    }

    // The cell of step S on NODE as the grid shows it ({status, attempts,
    // duration_ms, reason, waiting}: a new object), or null.
    cell(s, node) {
        const i = this.index.get(node);
        if (i === undefined)
            return null;
        const status = this.statusAt(s, i);
        if (!status)
            return null;
        const note = this.notes.get(s * this.nodes.length + i);
        const cell = { status, attempts: this.attempts[s][i] };
        if (!Number.isNaN(this.duration[s][i]))
            cell.duration_ms = this.duration[s][i];
        if (note && note[0])
            cell.reason = note[0];
        if (note && note[1])
            cell.waiting = note[1];
        return cell;
    }

    // Moves the cell of step S on NODE to STATUS (a node the record did
    // not name is passed over). Returns its status before (null for no
    // cell), or undefined when nothing changed.
    setStatus(s, node, status) {
        const i = this.index.get(node);
        const col = this.status[s];
        const code = this.codeOf(status);
        if (i === undefined || !col || code < 0 || col[i] === code)
            return undefined;
        const old = col[i] ? this.names[col[i]] : null;
        const was = col[i];
        col[i] = code;
        this.derived = null;
        if (this.tally)
            this.moveTally(s, i, was, code);
        if (!old)
            this.attempts[s][i] = 1;
        return old;
    }

    // The counts of the cells: {steps: [Map(status -> cells)], rows:
    // Map(status -> nodes with a cell of it), masks: Uint32Array (node ->
    // bit per status code, codes past 31 left out), worst: Int16Array
    // (node -> its worst status's rank by RANK(status), -1 for none)}.
    // Made once (packCells' when it made them, else one pass over the
    // columns), then kept true by setStatus cell by cell: a burst of
    // events costs its cells, not a pass over all of them. The same object
    // each call: read it, do not keep it as it is now.
    counts(rank) {
        if (!this.tally || this.tallyRank !== rank) {
            const d = this.derived;
            this.tally = d ? { steps: d.steps, rows: d.rows, masks: d.masks, worst: d.worst } : this.countAll(rank);
            this.tallyRank = rank;
            this.rankOf = [];
        }
        return this.tally;
    }

    // The rank of status code C (by the counts' RANK), kept.
    rankOfCode(c) {
        let r = this.rankOf[c];
        if (r === undefined)
            r = this.rankOf[c] = this.names[c] ? this.tallyRank(this.names[c]) : 0;
        return r;
    }

    // The counts moved by the cell of step S on node I going from code
    // FROM (0: none) to TO.
    moveTally(s, i, from, to) {
        const t = this.tally;
        const step = t.steps[s];
        const bump = (map, name, by) => {
            const k = (map.get(name) || 0) + by;
            if (k > 0)
                map.set(name, k);
            else
                map.delete(name);
        };
        if (step && from)
            bump(step, this.names[from], -1);
        if (step)
            bump(step, this.names[to], 1);
        let mask = 0;
        for (let x = 0; x < this.nsteps; x++) {
            const c = this.status[x][i];
            if (c && c < 32)
                mask |= 1 << c;
        }
        mask >>>= 0;
        const before = t.masks[i];
        if (mask === before)
            return;
        for (let m = (before & ~mask) >>> 0; m; m = (m & (m - 1)) >>> 0)
            bump(t.rows, this.names[31 - Math.clz32(m & -m)], -1);
        for (let m = (mask & ~before) >>> 0; m; m = (m & (m - 1)) >>> 0)
            bump(t.rows, this.names[31 - Math.clz32(m & -m)], 1);
        t.masks[i] = mask;
        let w = -1;
        for (let m = mask; m; m = (m & (m - 1)) >>> 0) {
            const r = this.rankOfCode(31 - Math.clz32(m & -m));
            if (w < 0 || r < w)
                w = r;
        }
        t.worst[i] = w;
    }

    // The counts, in one pass over the columns (counts).
    countAll(rank) {
        const n = this.nodes.length;
        const masks = new Uint32Array(n);
        const steps = [];
        const perCode = new Uint32Array(this.names.length);
        for (let s = 0; s < this.nsteps; s++) {
            const col = this.status[s];
            perCode.fill(0);
            for (let i = 0; i < n; i++) {
                const c = col[i];
                if (!c)
                    continue;
                perCode[c]++;
                if (c < 32)
                    masks[i] |= 1 << c;
            }
            const counts = new Map();
            perCode.forEach((k, c) => {
                if (k)
                    counts.set(this.names[c], k);
            });
            steps.push(counts);
        }
        const rankOf = this.names.map((name) => (name ? rank(name) : 0));
        const worst = new Int16Array(n);
        const perBit = new Uint32Array(32);
        for (let i = 0; i < n; i++) {
            let w = -1;
            for (let m = masks[i]; m; m &= m - 1) {
                const bit = 31 - Math.clz32(m & -m);
                perBit[bit]++;
                if (w < 0 || rankOf[bit] < w)
                    w = rankOf[bit];
            }
            worst[i] = w;
        }
        const rows = new Map();
        perBit.forEach((k, bit) => {
            if (k)
                rows.set(this.names[bit], k);
        });
        return { steps, rows, masks, worst };
    }
}
