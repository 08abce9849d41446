// grid dashboard: a job's events, record and nodes' groups and labels
// fetched and parsed off the page's thread (a module Worker).
//
// Events: a 10,000-node job has some 90,000 (10 MB of JSON, a parse of 50
// to 100 ms); the page shows the newest 500. This worker keeps the older
// ones of its first answer and hands them out on demand. The record: its
// 30,000 cells as objects cost a parse as long and a structured clone as
// long again; the page gets them as columns (jobcells.js, transferred) and
// this worker keeps the parsed cells, answering one when the page opens it.
//
// Messages in:
// - {id, fetch: URL, headers, keep: N} fetches the events (GET, JSON
//   {events: [...]}) and answers {id, status, events: the newest KEEP,
//   held: how many older it keeps, error};
// - {id, older: N} answers {id, events: the newest N of those it keeps}
//   and forgets them;
// - {id, record: URL, headers, filter: {group, label}} fetches the job's
//   record (its bytes never reach the page's thread), parses it and
//   answers {id, status: 200, head: the record without its results,
//   cells: packCells' columns, seq: how many records it parsed, mask: see
//   below, when FILTER names a group or label and the nodes were read,
//   expectedIsNodes: true when the record's `expected` was left out of
//   HEAD because it names the cells' nodes, no more, no fewer},
//   {id, status, body} for an error status, or {id, status: 0, error}
//   when it is not a JSON object;
// - {id, nodes: URL, headers} fetches the node list and answers {id,
//   status, groups: [[group, nodes of the last record in it], ...],
//   labels: [["key=value", nodes], ...]} (sorted; an error status: {id,
//   status, body}): the choices of the job page's filters, counted here;
// - {id, mask: {group, label}} answers {id, seq, mask: a Uint8Array over
//   the last record's nodes (packCells' order), 1 for those in GROUP and
//   with LABEL (either empty: any), transferred}, or mask null before the
//   nodes were read;
// - {id, cell: {step, node}} answers {id, cell: that cell of the last
//   record, whole (output, history, ...), or null}.
import { packCells } from './jobcells.js';

let held = [];
let results = null;      // the last record's cells, parsed
let recordNodes = [];    // the last record's nodes, in packCells' order
let seq = 0;             // records parsed
let nodeInfo = null;     // Map(node -> {groups: [...], labels: ['k=v', ...]}) once read

// The nodes of the last record in GROUP and with LABEL ('' for any), as
// a mask in their order; null before the node list was read.
const maskOf = (filter) => {
    if (!nodeInfo)
        return null;
    const group = (filter && filter.group) || '', label = (filter && filter.label) || '';
    const mask = new Uint8Array(recordNodes.length);
    recordNodes.forEach((n, i) => {
        const info = nodeInfo.get(n);
        mask[i] = (!group || (info && info.groups.includes(group)))
            && (!label || (info && info.labels.includes(label))) ? 1 : 0;
    });
    return mask;
};

// The groups and labels of the last record's nodes: [[name, nodes], ...]
const choices = (pick) => {
    const counts = new Map();
    for (const n of recordNodes)
        for (const v of (nodeInfo && nodeInfo.get(n) && nodeInfo.get(n)[pick]) || [])
            counts.set(v, (counts.get(v) || 0) + 1);
    return [...counts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
};

const fetchJson = async (url, headers) => {
    const res = await fetch(url, { headers: headers || {}, cache: 'no-store', credentials: 'omit' });
    const text = await res.text();
    let data = null;
    try {
        data = text ? JSON.parse(text) : null;
    } catch (e) {
        data = null;
    }
    return { res, data };
};

self.onmessage = async (msg) => {
    const q = msg.data || {};
    if (typeof q.older === 'number') {
        const n = Math.max(0, Math.min(held.length, q.older));
        const events = held.slice(held.length - n);
        held.length -= n;
        self.postMessage({ id: q.id, events, held: held.length });
        return;
    }
    if (q.mask && typeof q.mask === 'object') {
        const mask = maskOf(q.mask);
        self.postMessage({ id: q.id, seq, mask }, mask ? [mask.buffer] : []);
        return;
    }
    if (q.cell && typeof q.cell === 'object') {
        const cells = results && results[String(q.cell.step)];
        const cell = cells && typeof q.cell.node === 'string' && Object.hasOwn(cells, q.cell.node)
            ? cells[q.cell.node] : null;
        self.postMessage({ id: q.id, cell: cell || null });
        return;
    }
    try {
        if (typeof q.record === 'string') {
            const { res, data } = await fetchJson(q.record, q.headers);
            if (!res.ok) {
                self.postMessage({ id: q.id, status: res.status, body: data });
                return;
            }
            if (!data || typeof data !== 'object' || Array.isArray(data)) {
                self.postMessage({ id: q.id, status: 0, error: 'the record is not a JSON object' });
                return;
            }
            const cells = packCells(data);
            results = data.results && typeof data.results === 'object' ? data.results : {};
            delete data.results;
            recordNodes = cells.nodes;
            seq++;
            const buffers = cells.buffers;
            delete cells.buffers;
            const f = q.filter || {};
            const mask = f.group || f.label ? maskOf(f) : null;
            if (mask)
                buffers.push(mask.buffer);
            // The expected nodes are (nearly always) the cells' nodes: not
            // sent twice (10,000 names cloned cost the page's thread ms)
            const expected = Array.isArray(data.expected) ? data.expected : null;
            const same = expected && expected.length === cells.nodes.length
                && expected.every((n) => typeof n === 'string') && new Set(expected).size === expected.length;
            if (same)
                delete data.expected;
            self.postMessage({ id: q.id, status: 200, head: data, cells, seq, mask, expectedIsNodes: !!same },
                             buffers);
            return;
        }
        if (typeof q.nodes === 'string') {
            const { res, data } = await fetchJson(q.nodes, q.headers);
            if (!res.ok) {
                self.postMessage({ id: q.id, status: res.status, body: data });
                return;
            }
            const info = new Map();
            for (const n of (data && Array.isArray(data.nodes) ? data.nodes : [])) {
                if (!n || typeof n.id !== 'string')
                    continue;
                info.set(n.id, {
                    groups: (Array.isArray(n.groups) ? n.groups : []).filter((g) => typeof g === 'string'),
                    labels: Object.entries(n.labels && typeof n.labels === 'object' ? n.labels : {})
                        .map(([k, v]) => k + '=' + v),
                });
            }
            nodeInfo = info;
            self.postMessage({ id: q.id, status: res.status, groups: choices('groups'), labels: choices('labels') });
            return;
        }
        const { res, data } = await fetchJson(q.fetch, q.headers);
        if (!res.ok) {
            self.postMessage({ id: q.id, status: res.status, body: data });
            return;
        }
        const events = data && Array.isArray(data.events) ? data.events : [];
        const keep = Math.max(0, q.keep || 0);
        const cut = Math.max(0, events.length - keep);
        held = held.concat(events.slice(0, cut));
        self.postMessage({ id: q.id, status: res.status, events: events.slice(cut), held: held.length });
    } catch (e) {
        self.postMessage({ id: q.id, status: 0, error: String(e && e.message || e) });
    }
};
