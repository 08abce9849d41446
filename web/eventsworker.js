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
// - {id, record: ArrayBuffer} parses the job's record (the body of its GET,
//   fetched by the page while this worker started) and answers {id,
//   status: 200, head: the record without its results, cells: packCells'
//   columns}, or {id, status: 0, error} when it is not a JSON object;
// - {id, nodes: URL, headers} fetches the node list and answers {id,
//   status, groups: {group: [node, ...]}, labels: {"key=value": [node,
//   ...]}} (an error status: {id, status, body});
// - {id, cell: {step, node}} answers {id, cell: that cell of the last
//   record, whole (output, history, ...), or null}.
import { packCells } from './jobcells.js';

let held = [];
let results = null;      // the last record's cells, parsed

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
    if (q.cell && typeof q.cell === 'object') {
        const cells = results && results[String(q.cell.step)];
        const cell = cells && typeof q.cell.node === 'string' && Object.hasOwn(cells, q.cell.node)
            ? cells[q.cell.node] : null;
        self.postMessage({ id: q.id, cell: cell || null });
        return;
    }
    try {
        if (q.record instanceof ArrayBuffer) {
            let data = null;
            try {
                data = JSON.parse(new TextDecoder().decode(q.record));
            } catch (e) {
                data = null;
            }
            if (!data || typeof data !== 'object' || Array.isArray(data)) {
                self.postMessage({ id: q.id, status: 0, error: 'the record is not a JSON object' });
                return;
            }
            const cells = packCells(data);
            results = data.results && typeof data.results === 'object' ? data.results : {};
            delete data.results;
            const buffers = cells.buffers;
            delete cells.buffers;
            self.postMessage({ id: q.id, status: 200, head: data, cells }, buffers);
            return;
        }
        if (typeof q.nodes === 'string') {
            const { res, data } = await fetchJson(q.nodes, q.headers);
            const groups = {}, labels = {};
            for (const n of (res.ok && data && Array.isArray(data.nodes) ? data.nodes : [])) {
                if (!n || typeof n.id !== 'string')
                    continue;
                for (const g of Array.isArray(n.groups) ? n.groups : [])
                    if (typeof g === 'string')
                        (groups[g] || (groups[g] = [])).push(n.id);
                for (const [k, v] of Object.entries(n.labels && typeof n.labels === 'object' ? n.labels : {}))
                    (labels[k + '=' + v] || (labels[k + '=' + v] = [])).push(n.id);
            }
            self.postMessage(res.ok ? { id: q.id, status: res.status, groups, labels }
                                    : { id: q.id, status: res.status, body: data });
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
