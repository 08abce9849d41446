// grid dashboard: a job's events fetched and parsed off the page's thread.
// A 10,000-node job has some 90,000 events (10 MB of JSON, a parse of
// 50 to 100 ms); the page shows the newest 500. This worker keeps the
// older ones of its first answer and hands them out on demand.
//
// Messages in: {id, fetch: URL, headers, keep: N} fetches the events
// (GET, JSON {events: [...]}) and answers {id, status, events: the newest
// KEEP, held: how many older it keeps, error}; {id, older: N} answers
// {id, events: the newest N of those it keeps} and forgets them.
'use strict';

let held = [];

self.onmessage = async (msg) => {
    const q = msg.data || {};
    if (typeof q.older === 'number') {
        const n = Math.max(0, Math.min(held.length, q.older));
        const events = held.slice(held.length - n);
        held.length -= n;
        self.postMessage({ id: q.id, events, held: held.length });
        return;
    }
    try {
        const res = await fetch(q.fetch, { headers: q.headers || {}, cache: 'no-store', credentials: 'omit' });
        const text = await res.text();
        let data = null;
        try {
            data = text ? JSON.parse(text) : null;
        } catch (e) {
            data = null;
        }
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
