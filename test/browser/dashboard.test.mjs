// The grid dashboard in a real browser: Debian's headless Chromium, driven
// by playwright-core, against a real gridbroker (CURVE on ipc://, its HTTP
// face on a free loopback port) and three real gridagents (test backend).
//
// Run by `make test` through test/browser.sh with GRID_BIN (the programs),
// GRID_SRC (the source tree) and GRID_ARTIFACTS (where the screenshots go).
// Tokens are made as an admin makes them, with gridcli token add (the admin
// key's CURVE client). Every process started is killed by pid.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const SRC = process.env.GRID_SRC || fileURLToPath(new URL('../..', import.meta.url));
const BIN = process.env.GRID_BIN || path.join(SRC, 'build', 'bin');
const TOOLS = process.env.GRID_TOOLS || path.join(BIN, '..', 'test', 'tools');
const ARTIFACTS = process.env.GRID_ARTIFACTS || path.join(SRC, 'build', 'test-artifacts');
const CHROMIUM = process.env.GRID_CHROMIUM || '/usr/bin/chromium';
const WAIT_MS = 60000;            // the longest wait for one thing to show
const LIMIT = { timeout: 180000 }; // a test that hangs fails instead

const procs = [];
let dir;
let base;
let browser;
let page;
const tokens = {};
let deadHook;             // a webhook URL on a closed port
const pageErrors = [];   // uncaught script errors and CSP refusals, on any page

function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.on('error', reject);
        srv.listen(0, '127.0.0.1', () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

function start(name, program, args) {
    const log = fs.openSync(path.join(dir, name + '.log'), 'w');
    const child = spawn(path.isAbsolute(program) ? program : path.join(BIN, program), args,
                        { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    child.logName = name;
    procs.push(child);
    return child;
}

function run(program, args) {
    execFileSync(path.join(BIN, program), args, { stdio: ['ignore', 'ignore', 'inherit'] });
}

async function until(what, fn, ms = WAIT_MS) {
    const deadline = Date.now() + ms;
    let last;
    while (Date.now() < deadline) {
        try {
            const v = await fn();
            if (v)
                return v;
        } catch (e) {
            last = e;
        }
        await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('timed out waiting for ' + what + (last ? ': ' + last.message : ''));
}

async function api(method, route, token, body) {
    const res = await fetch(base + '/api/v1' + route, {
        method,
        headers: Object.assign({ Authorization: 'Bearer ' + token },
                               body ? { 'Content-Type': 'application/json' } : {}),
        body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
}

// gridcli with the admin key: its answer's data (--output json).
function gridcli(...args) {
    const out = execFileSync(path.join(BIN, 'gridcli'), ['--broker', 'ipc://' + path.join(dir, 'client'),
        '--broker-key', path.join(dir, 'keys', 'broker.key'), '--key', path.join(dir, 'keys', 'admin.key'),
        '--output', 'json', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    return out.trim() ? JSON.parse(out) : null;
}

// The public key (Z85) of a CZMQ certificate file.
function publicKey(file) {
    const m = /public-key\s*=\s*"(.{40})"/.exec(fs.readFileSync(file, 'utf8'));
    assert.ok(m, file + ' holds no public key');
    return m[1];
}

async function shot(name) {
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-' + name + '.png'), fullPage: true });
}

async function login(token) {
    await page.goto(base + '/#/login');
    await page.waitForSelector('#token');
    await page.fill('#token', token);
    await page.click('#login-submit');
}

function logs() {
    let text = '';
    for (const p of procs) {
        try {
            const t = fs.readFileSync(path.join(dir, p.logName + '.log'), 'utf8');
            text += '--- ' + p.logName + '\n' + t.split('\n').slice(-15).join('\n') + '\n';
        } catch (e) { /* no log */ }
    }
    return text;
}

before(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grid-web-'));
    const keys = path.join(dir, 'keys');
    run('gridbroker', ['keygen', '--out', keys]);
    run('gridcli', ['keygen', '--out', keys, '--name', 'admin']);
    const port = await freePort();
    base = 'http://127.0.0.1:' + port;
    // Job-level webhooks may go to a port nobody listens on, and give up
    // fast: a job's delivery there is dead within seconds.
    deadHook = 'http://127.0.0.1:' + await freePort() + '/hook';
    const conf = path.join(dir, 'broker.yaml');
    fs.writeFileSync(conf, 'notify:\n  timeout: 1s\n  retry_base: 100ms\n  retry_cap: 300ms\n'
        + '  retry_for: 2s\n  allow: ["' + deadHook.replace(/hook$/, '') + '"]\n');
    const agents = 'ipc://' + path.join(dir, 'agents');
    const publish = 'ipc://' + path.join(dir, 'publish');
    start('broker', 'gridbroker', ['--data-dir', path.join(dir, 'data'),
        '--client', 'ipc://' + path.join(dir, 'client'), '--agents', agents,
        '--publish', publish, '--heartbeat', '300ms',
        '--key', path.join(keys, 'broker.key'),
        '--client-key', 'admin:' + path.join(keys, 'admin.key'),
        '--http', '127.0.0.1:' + port, '--config', conf]);
    await until('the HTTP face', async () => (await fetch(base + '/readyz')).status === 200);
    // Three agents enrolled ahead (key.accept of their keys), one left pending
    for (const [node, group, tier] of [['web-01', 'web', 'web.prod'], ['web-02', 'web', 'web.dev'],
                                       ['db-01', 'db', 'db.prod'], ['late-01', 'late', 'late.x']]) {
        run('gridagent', ['keygen', '--out', keys, '--name', node]);
        if (node !== 'late-01')
            gridcli('key', 'accept', publicKey(path.join(keys, node + '.key')));
        start(node, 'gridagent', ['--id', node, '--groups', group, '--labels', 'tier=' + tier,
            '--broker', agents, '--publish', publish, '--state-dir', path.join(dir, node),
            '--key', path.join(keys, node + '.key'), '--broker-key', path.join(keys, 'broker.key')]);
    }
    tokens.admin = gridcli('token', 'add', 'dash-admin', '--role', 'admin').token;
    tokens.viewer = gridcli('token', 'add', 'dash-viewer', '--role', 'viewer').token;
    tokens.doomed = gridcli('token', 'add', 'dash-doomed', '--role', 'operator').token;
    await until('three online nodes', async () => {
        const r = await api('GET', '/nodes', tokens.admin);
        return r.status === 200 && r.body.nodes.filter((n) => n.status === 'online').length === 3;
    });
    // A fresh profile in the temporary directory (--user-data-dir)
    browser = await chromium.launchPersistentContext(path.join(dir, 'chromium'), {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
               '--disable-background-networking', '--disable-component-update', '--disable-sync'],
        viewport: { width: 1280, height: 860 },
    });
    page = browser.pages()[0] || await browser.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => {
        if (m.type() === 'error' && /Content Security Policy|Uncaught/.test(m.text()))
            pageErrors.push(m.text());
    });
}, { timeout: 180000 });

after(async () => {
    if (browser)
        await browser.close().catch(() => {});
    for (const p of procs)
        if (p.exitCode === null)
            p.kill('SIGTERM');
    await Promise.all(procs.map((p) => p.exitCode !== null ? null : new Promise((resolve) => {
        const t = setTimeout(() => {
            p.kill('SIGKILL');
        }, 10000);
        p.once('exit', () => {
            clearTimeout(t);
            resolve();
        });
    })));
    if (process.exitCode)
        console.log(logs());
    if (dir)
        fs.rmSync(dir, { recursive: true, force: true });
});

test('without a token the dashboard asks for one, and a wrong token is refused', LIMIT, async () => {
    await page.goto(base + '/');
    await page.waitForSelector('#token');
    assert.equal(await page.locator('#logout').isVisible(), false);
    await shot('login');
    await page.fill('#token', 'grid_' + '0'.repeat(64));
    await page.click('#login-submit');
    await page.waitForSelector('#login-error:not([hidden])');
    assert.match(await page.textContent('#login-error'), /does not know this token/);
    assert.ok(page.url().includes('#/login'));
    assert.equal(await page.evaluate(() => sessionStorage.getItem('grid.token')), null);
});

test('the jobs page lists jobs and filters them by status', LIMIT, async () => {
    const submitted = await api('POST', '/jobs', tokens.admin,
        { target: 'group:db', tasks: [{ backend: 'test', action: 'echo', params: { msg: 'listed' } }] });
    assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
    const id = submitted.body.job;
    await until('the first job to end', async () =>
        (await api('GET', '/jobs/' + id, tokens.admin)).body.status === 'completed');
    await login(tokens.admin);
    // The landing page: the fleet at a glance
    await page.waitForSelector('#overview #ov-nodes');
    assert.match(await page.textContent('#ov-nodes .tile-main'), /^3 \/ \d+ online$/);
    await page.waitForSelector('#ov-recent .tally[data-status="completed"]');
    assert.equal(await page.locator('#ov-dlq .tile-main').textContent(), '0');
    assert.equal(await page.locator('#overview svg.spark').count() >= 4, true);
    // A trend line from the first read on (a level line until a second sample)
    assert.equal(await page.locator('#ov-nodes svg.spark polyline').count(), 1);
    assert.doesNotMatch(await page.textContent('#overview'), /null|undefined|NaN/);
    await shot('overview');
    await page.click('#nav a[data-view="jobs"]');
    await page.waitForSelector(`#jobs tr[data-job="${id}"]`);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('grid.token') !== null), true);
    assert.equal(await page.textContent('#role'), 'admin');
    // A broker alone: the header names no cluster
    await page.waitForSelector('#broker-state:has-text("nodes online")');
    assert.equal(await page.locator('#broker-cluster').count(), 0);
    await page.click('.filters a[data-status="failed"]');
    await page.waitForSelector('#jobs td.empty');
    assert.equal(await page.locator(`#jobs tr[data-job="${id}"]`).count(), 0);
    await page.click('.filters a[data-status="completed"]');
    await page.waitForSelector(`#jobs tr[data-job="${id}"][data-status="completed"]`);
    await page.click('.filters a[data-status="all"]');
    await page.waitForSelector(`#jobs tr[data-job="${id}"]`);
    assert.equal(await page.locator('#more-jobs').isVisible(), false, 'one job, nothing older');
    // Pushed, not polled: a job submitted now is listed long before the
    // list's own 10 s timer could have fetched it
    const pushed = await api('POST', '/jobs', tokens.admin,
        { target: 'group:db', tasks: [{ backend: 'test', action: 'echo', params: { msg: 'pushed' } }] });
    assert.equal(pushed.status, 201, JSON.stringify(pushed.body));
    await page.waitForSelector(`#jobs tr[data-job="${pushed.body.job}"]`, { timeout: 5000 });
    assert.equal(await page.locator('#logout').isVisible(), true);
    await shot('jobs');
});

test('the header names the broker cluster when the broker is in one', LIMIT, async () => {
    // This broker is alone (the route's answer is checked by test_it_http);
    // the answer of an active is stood in for here, to see how it reads.
    const active = { role: 'active', cluster: 'grid-ha', name: 'ctl-a', epoch: 3, pass: 120,
        released: 120, lease_left_ms: 4000, strict: false, sync_timeout_ms: 5000,
        standbys: [{ name: 'ctl-b', state: 'live', sync: true, pass: 120, lag_passes: 0, lag_ms: 0 },
                   { name: 'ctl-c', state: 'snapshot', sync: false, pass: 0, lag_passes: 120, lag_ms: 0 }] };
    await page.route('**/api/v1/cluster', (r) => r.fulfill({ status: 200,
        contentType: 'application/json', body: JSON.stringify(active) }));
    try {
        await page.reload();
        await page.waitForSelector('#broker-cluster');
        assert.equal(await page.textContent('#broker-cluster'),
                     'cluster grid-ha: ctl-a active, 1/2 standbys in sync');
        // The overview's tile: its members and their roles
        await page.goto(base + '/#/overview');
        await page.waitForSelector('#overview #ov-cluster');
        assert.equal(await page.textContent('#ov-cluster h2'), 'Cluster grid-ha');
        assert.equal(await page.textContent('#ov-cluster .tile-main'), 'ctl-a active, epoch 3');
        assert.deepEqual(await page.locator('#ov-cluster .tile-detail div').allTextContents(),
                         ['ctl-b: live, in sync', 'ctl-c: snapshot']);
    } finally {
        await page.unroute('**/api/v1/cluster');
    }
    await page.reload();
    await page.waitForSelector('#broker-state:has-text("nodes online")');
    assert.equal(await page.locator('#broker-cluster').count(), 0);
    // A broker alone: the overview has no cluster tile
    await page.waitForSelector('#overview #ov-nodes');
    assert.equal(await page.locator('#overview #ov-cluster').count(), 0);
});

test('the status chips count the stored jobs: a deleted one is gone from its chip', LIMIT, async () => {
    const ids = [];
    for (const msg of ['kept', 'deleted']) {
        const r = await api('POST', '/jobs', tokens.admin,
            { target: 'node:db-01', tasks: [{ backend: 'test', action: 'echo', params: { msg } }] });
        assert.equal(r.status, 201, JSON.stringify(r.body));
        ids.push(r.body.job);
    }
    for (const id of ids)
        await until(id + ' to end', async () =>
            (await api('GET', '/jobs/' + id, tokens.admin)).body.status === 'completed');
    assert.equal((await api('DELETE', '/jobs/' + ids[1], tokens.admin)).status, 200);
    await page.goto(base + '/#/jobs?status=completed');
    await page.waitForSelector(`#jobs tr[data-job="${ids[0]}"]`);
    // The chips and the rows come from the same answer
    const rows = await page.locator('#jobs tbody tr[data-job]').count();
    assert.equal(await page.locator(`#jobs tr[data-job="${ids[1]}"]`).count(), 0);
    assert.equal(await page.textContent('.filters a[data-status="completed"] .count'), String(rows));
    assert.equal(await page.textContent('.filters a[data-status="failed"] .count'), '0');
});

let jobId;
const MESSAGE = 'hello <b>grid</b> <img src=x onerror="window.__pwned=1">';

test('a job run from the form turns completed on its page without a reload', LIMIT, async () => {
    await page.click('#nav a[data-view="run"]');
    await page.waitForSelector('#backend option[value="test"]', { state: 'attached' });
    await page.fill('#target', 'group:web');
    await page.selectOption('#backend', 'test');
    await page.selectOption('#action', 'sleep');
    await page.fill('#param-seconds', '2');
    await page.fill('#param-msg', MESSAGE);
    await shot('run');
    await page.evaluate(() => {
        window.__sameDocument = true;
    });
    await page.click('#run-submit');
    await page.waitForURL(/#\/jobs\/j-/);
    jobId = decodeURIComponent(page.url().split('#/jobs/')[1]);
    // Live: it is seen running, then completed, in the same document.
    await page.waitForSelector('#grid .cellbtn[data-status="running"], #grid .cellbtn[data-status="acknowledged"], body[data-job-status="completed"]');
    await page.waitForSelector('body[data-job-status="completed"]');
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was reloaded');
    await page.waitForSelector('#events tr.ev-finished');
    assert.equal(await page.locator('#grid .cellbtn[data-status="success"]').count(), 2);
    assert.deepEqual(await page.locator('#grid th.node').allTextContents(), ['web-01', 'web-02']);
    assert.match(await page.textContent('.jobhead .badge'), /completed/);
    // The operator's buttons for a finished job
    assert.equal(await page.locator('#retry').isEnabled(), true);
});

test('a cell opens its output, shown as text', LIMIT, async () => {
    await page.click('#grid .cellbtn[data-node="web-02"][data-step="0"]');
    await page.waitForSelector('#output-stdout');
    const out = await page.textContent('#output-stdout');
    assert.ok(out.includes(MESSAGE), 'output: ' + out);
    assert.equal(await page.locator('#cell b, #cell img').count(), 0);
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.match(await page.textContent('#cell'), /Attempts\s*1/);
    // Its trace, made by the broker (no traceparent was given)
    assert.match(await page.textContent('#trace'), /^[0-9a-f]{32} \(generated\)$/);
    await shot('job');
});

test('a large output shows its start, and all of it on demand', LIMIT, async () => {
    const r = await api('POST', '/jobs', tokens.admin, { target: 'node:web-01',
        tasks: [{ backend: 'test', action: 'output', params: { bytes: 300000 } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(r.body.job));
    await page.waitForSelector('body[data-job-status="completed"]');
    await page.click('#grid .cellbtn[data-node="web-01"]');
    await page.waitForSelector('#output-stdout');
    const shown = (await page.textContent('#output-stdout')).length;
    assert.ok(shown > 0 && shown < 300000, 'inline: ' + shown);
    assert.match(await page.textContent('#cell .stream p'), /Showing the first .* of 293\.0 KiB/);
    await page.click('#cell .stream button');
    await page.waitForFunction(() => document.querySelector('#output-stdout').textContent.length === 300000);
    assert.match(await page.textContent('#cell .stream p'), /All 293\.0 KiB/);
});

test('the nodes page shows every agent, and an admin drains and resumes one', LIMIT, async () => {
    await page.click('#nav a[data-view="nodes"]');
    await page.waitForSelector('#nodes tr[data-node="db-01"]');
    assert.deepEqual(await page.locator('#nodes tr[data-node]').evaluateAll(
        (rows) => rows.map((r) => r.dataset.node)), ['db-01', 'web-01', 'web-02']);
    assert.match(await page.textContent('#nodes tr[data-node="web-02"]'), /online.*web.*tier=web\.dev/s);
    await shot('nodes');
    page.once('dialog', (d) => d.accept());
    await page.click('#nodes tr[data-node="db-01"] button[data-action="drain"]');
    await page.waitForSelector('#nodes tr[data-node="db-01"][data-state="drained"]');
    const drained = await api('GET', '/nodes/db-01', tokens.admin);
    assert.equal(drained.body.drained, true);
    await page.click('#nodes tr[data-node="db-01"] button[data-action="resume"]');
    await page.waitForSelector('#nodes tr[data-node="db-01"][data-state="online"]');
    assert.equal((await api('GET', '/nodes/db-01', tokens.admin)).body.drained, false);
    // A node's own page: what it offers
    await page.click('#nodes a[href="#/nodes/web-01"]');
    await page.waitForSelector('#backends');
    assert.match(await page.textContent('#backends'), /test.*echo.*print a message/s);
    // And what it reports about its host
    await page.waitForSelector('#node-facts');
    assert.match(await page.textContent('#node-facts'), /agent_version=\d/);
    await shot('node');
});

test('the header and the overview count the nodes online, and follow one going offline and a job starting', LIMIT, async () => {
    // A page that polls nothing of its own: the header keeps itself current.
    await page.click('#nav a[data-view="run"]');
    await page.waitForSelector('#run-submit');
    await page.evaluate(() => {
        window.__sameDocument = true;
    });
    const keys = path.join(dir, 'keys');
    run('gridagent', ['keygen', '--out', keys, '--name', 'extra-01']);
    gridcli('key', 'accept', publicKey(path.join(keys, 'extra-01.key')));
    const agent = start('extra-01', 'gridagent', ['--id', 'extra-01', '--groups', 'extra',
        '--broker', 'ipc://' + path.join(dir, 'agents'), '--publish', 'ipc://' + path.join(dir, 'publish'),
        '--state-dir', path.join(dir, 'extra-01'), '--key', path.join(keys, 'extra-01.key'),
        '--broker-key', path.join(keys, 'broker.key')]);
    const header = async (online) => {
        const st = (await api('GET', '/status', tokens.admin)).body;
        if (st.nodes.online !== online)
            return false;
        const text = await page.textContent('#broker-state');
        return text.includes(' ' + st.nodes.online + '/' + st.nodes.total + ' nodes online') ? text : false;
    };
    await until('extra-01 online', async () =>
        (await api('GET', '/nodes/extra-01', tokens.admin)).body.status === 'online');
    const online = (await api('GET', '/status', tokens.admin)).body.nodes.online;
    await until('the header to count extra-01', () => header(online));
    // The overview follows the event feeds too, without a reload: its
    // nodes tile, and its jobs tile when a job starts
    await page.click('#nav a[data-view="overview"]');
    const tile = async (online) => {
        const st = (await api('GET', '/status', tokens.admin)).body;
        const text = await page.textContent('#ov-nodes .tile-main').catch(() => '');
        return st.nodes.online === online && text === online + ' / ' + st.nodes.total + ' online';
    };
    await until('the overview to count extra-01', () => tile(online));
    const running = async (n) => /^(\d+) running/.exec(await page.textContent('#ov-jobs .tile-main')
        .catch(() => ''))?.[1] === String(n);
    await until('the overview to show no job running', () => running(0));
    const slow = await api('POST', '/jobs', tokens.admin, { target: 'node:db-01',
        tasks: [{ backend: 'test', action: 'sleep', params: { seconds: 3, msg: 'tile' } }] });
    assert.equal(slow.status, 201, JSON.stringify(slow.body));
    await until('the overview to show the job running', () => running(1));
    agent.kill('SIGTERM');
    await until('extra-01 offline', async () =>
        (await api('GET', '/nodes/extra-01', tokens.admin)).body.status === 'offline');
    await until('the header to see extra-01 go', () => header(online - 1));
    await until('the overview to see extra-01 go', () => tile(online - 1));
    await until('the overview to see the job end', () => running(0));
    // On the nodes page, the header counts what the list shows
    await page.click('#nav a[data-view="nodes"]');
    await page.waitForSelector('#nodes tr[data-node="extra-01"][data-state="offline"]');
    const shown = await page.locator('#nodes tr[data-node]').count();
    const up = await page.locator('#nodes tr[data-node][data-state="online"]').count();
    assert.match(await page.textContent('#broker-state'), new RegExp(' ' + up + '/' + shown + ' nodes online'));
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was reloaded');
});

test('a running cell shows its progress, and it moves on live', LIMIT, async () => {
    const r = await api('POST', '/jobs', tokens.admin, { target: 'node:web-02',
        tasks: [{ backend: 'test', action: 'sleep', params: { seconds: 30, msg: 'slow' } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(r.body.job));
    const cell = '#grid .cellbtn[data-node="web-02"][data-step="0"]';
    await page.waitForSelector(cell + '[data-status="running"] .cprogress');
    await page.evaluate(() => {
        window.__sameDocument = true;
    });
    const first = Number(await page.getAttribute(cell, 'data-percent'));
    assert.match(await page.textContent(cell + ' .cprogress'), /^\d+% · sleeping \d+ of 30 s$/);
    assert.equal(await page.locator(cell + ' progress').count(), 1);
    await page.waitForFunction(([sel, was]) => {
        const el = document.querySelector(sel);
        return el && el.dataset.percent !== '' && Number(el.dataset.percent) > was;
    }, [cell, first]);
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was reloaded');
    await page.click(cell);
    await page.waitForSelector('#cell dd');
    assert.match(await page.textContent('#cell'), /Progress\s*\d+% · sleeping/);
    assert.equal((await api('POST', '/jobs/' + r.body.job + '/cancel', tokens.admin, {})).status, 200);
    await page.waitForSelector('body[data-job-status="cancelled"]');
    assert.equal(await page.locator('#grid .cprogress').count(), 0);
});

test('a running cell shows its output as it comes, each line once', LIMIT, async () => {
    const r = await api('POST', '/jobs', tokens.admin, { target: 'node:web-01',
        tasks: [{ backend: 'test', action: 'lines', params: { count: 40, interval: '100ms' } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(r.body.job));
    const cell = '#grid .cellbtn[data-node="web-01"][data-step="0"]';
    await page.waitForSelector(cell + '[data-status="running"]');
    await page.evaluate(() => {
        window.__sameDocument = true;
    });
    await page.click(cell);
    await page.waitForSelector('#output-stdout');
    // Part of it while the job still runs
    await page.waitForFunction(() => {
        const out = document.querySelector('#output-stdout');
        return out && /^line 1\nline 2\nline 3\n/.test(out.textContent)
            && document.body.dataset.jobStatus === 'running';
    });
    const partial = await page.textContent('#output-stdout');
    assert.ok(!partial.includes('line 40\n'), 'all of it already: ' + partial);
    await page.waitForSelector('body[data-job-status="completed"]');
    await page.waitForFunction(() => document.querySelector('#output-stdout').textContent.includes('line 40\n'));
    const out = await page.textContent('#output-stdout');
    const want = Array.from({ length: 40 }, (_, i) => 'line ' + (i + 1) + '\n').join('');
    assert.equal(out, want);
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was reloaded');
    await shot('live-output');
});

test('a failed job shows its reason and the failing cell its stderr', LIMIT, async () => {
    const r = await api('POST', '/jobs', tokens.admin, { target: 'node:db-01',
        tasks: [{ backend: 'test', action: 'fail', params: { msg: 'disk on fire' } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(r.body.job));
    await page.waitForSelector('body[data-job-status="failed"]');
    await page.waitForSelector('#reason');
    assert.match(await page.textContent('#reason'), /Failed: .+/);
    await page.click('#grid .cellbtn[data-node="db-01"][data-status="failed"]');
    await page.waitForSelector('#output-stderr');
    assert.match(await page.textContent('#output-stderr'), /disk on fire/);
    assert.equal(await page.locator('#retry-failed').count(), 1);
});

test('a job\'s grid counts its cells per status, filters its rows by one, and ends in its colour', LIMIT, async () => {
    const r = await api('POST', '/jobs', tokens.admin, { target: 'group:web',
        tasks: [{ backend: 'test', action: 'echo', params: { msg: 'fine' } },
                { backend: 'test', action: 'fail', params: { msg: 'broken' } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(r.body.job));
    await page.waitForSelector('body[data-job-status="failed"]');
    await page.waitForSelector('#cell-filters button[data-status="failed"]');
    // Chips: every node, then the failures first, each with its count
    assert.deepEqual(await page.locator('#cell-filters button').evaluateAll(
        (els) => els.map((e) => e.dataset.status)), ['all', 'failed', 'success']);
    assert.match(await page.textContent('#cell-filters button[data-status="failed"] .count'), /^2$/);
    // Each step's counts under its name
    assert.match(await page.textContent('.tallies[data-step="0"]'), /2 ok/);
    assert.match(await page.textContent('.tallies[data-step="1"]'), /2 failed/);
    await page.click('#cell-filters button[data-status="failed"]');
    await page.waitForSelector('#cell-filters button.active[data-status="failed"]');
    assert.equal(await page.locator('#grid th.node').count(), 2);
    await shot('job-counts');
    // The end of a failed job is not a green badge
    await page.waitForSelector('#events tr.ev-finished .badge.st-failed');
    // The heat map (drawn from 40 nodes on, or asked for): a square per
    // cell per step, the cell named on hover and opened on a click, and
    // each step's durations
    await page.goto(base + '/#/jobs/' + encodeURIComponent(r.body.job) + '?view=map');
    await page.waitForSelector('#heatmap canvas.heat[data-step="1"]');
    assert.equal(await page.locator('#heatmap canvas.heat').count(), 2);
    await page.waitForSelector('#heatmap .histogram[data-step="0"]');
    assert.match(await page.textContent('#heatmap .histogram[data-step="0"]'), /2 done/);
    await page.hover('#heatmap canvas.heat[data-step="1"]', { position: { x: 3, y: 3 } });
    await page.waitForSelector('#heatmap-info:has-text("step 1: failed")');
    assert.match(await page.textContent('#heatmap-info'), /^web-0[12] /);
    await page.click('#heatmap canvas.heat[data-step="1"]', { position: { x: 3, y: 3 } });
    await page.waitForSelector('#cell:not([hidden]) #output-stderr');
    assert.match(await page.textContent('#output-stderr'), /broken/);
    await shot('heatmap');
});

test('a job of 2,000 nodes draws only the rows in view, failures first, and scrolls through all', LIMIT, async () => {
    // A real job's record, grown to 2,000 nodes and served in its place:
    // the page at fleet size without a fleet
    const real = await api('POST', '/jobs', tokens.admin, { target: 'node:web-01',
        tasks: [{ backend: 'test', action: 'echo', params: { msg: 'x' } }] });
    assert.equal(real.status, 201, JSON.stringify(real.body));
    let record;
    await until('the job to end', async () => {
        record = (await api('GET', '/jobs/' + real.body.job, tokens.admin)).body;
        return record.status === 'completed';
    });
    const cell = record.results['0']['web-01'];
    const nodes = [];
    const cells = {};
    for (let i = 0; i < 2000; i++) {
        const node = 'n-' + String(i).padStart(4, '0');
        nodes.push(node);
        cells[node] = Object.assign({}, cell, i % 100 === 37
            ? { status: 'failed', exit_code: 1, duration_ms: 5 + i } : { duration_ms: 3 + (i % 50) });
    }
    const fake = 'j-ffffffffffff-0001';
    const big = Object.assign({}, record, { id: fake, status: 'partial_failure', expected: nodes,
                                            results: { 0: cells } });
    await page.route(new RegExp('/api/v1/jobs/' + fake + '(/.*)?(\\?.*)?$'), (route) => {
        const url = new URL(route.request().url());
        const body = url.pathname.endsWith('/events') ? { job: fake, events: [] }
                   : url.pathname.endsWith('/progress') ? { id: fake, status: 'partial_failure', tasks: [] }
                   : big;
        route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });
    });
    try {
        await page.goto(base + '/#/jobs/' + fake);
        await page.waitForSelector('#grid tr[data-node]');
        const drawn = await page.locator('#grid tr[data-node]').count();
        assert.ok(drawn > 0 && drawn < 200, drawn + ' rows in the DOM');
        // Failures first: the 20 failed nodes lead
        const firstRows = await page.locator('#grid tr[data-node]').evaluateAll(
            (rows) => rows.slice(0, 20).map((r) => r.dataset.node));
        assert.ok(firstRows.every((n) => Number(n.slice(2)) % 100 === 37), firstRows.join(','));
        assert.match(await page.textContent('.tallies[data-step="0"]'), /20 failed/);
        // The heat map draws them all, and its histogram counts them
        await page.waitForSelector('#heatmap canvas.heat[data-step="0"]');
        assert.match(await page.textContent('#heatmap .histogram[data-step="0"]'), /2000 done/);
        // Each step's counts per status above its squares, failures first
        assert.match(await page.textContent('#heatmap .tallies[data-step="0"]'), /^20 failed\s*1980 ok$/);
        // Its squares are the API's cells: in the rows' order (the failed
        // first), each in its status's colour
        const colours = await page.evaluate(() => {
            const canvas = document.querySelector('#heatmap canvas.heat[data-step="0"]');
            const pitch = Number(canvas.dataset.pitch), perRow = Number(canvas.dataset.perRow);
            const scale = canvas.width / canvas.clientWidth;
            const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
            const tone = (name) => {
                const g = document.createElement('canvas').getContext('2d');
                g.fillStyle = getComputedStyle(document.documentElement).getPropertyValue('--' + name).trim();
                g.fillRect(0, 0, 1, 1);
                return g.getImageData(0, 0, 1, 1).data.join();
            };
            const ok = tone('ok'), bad = tone('bad');
            const out = [];
            for (let p = 0; p < 2000; p++) {
                const x = Math.floor(((p % perRow) * pitch + 1) * scale);
                const y = Math.floor((Math.floor(p / perRow) * pitch + 1) * scale);
                const at = (y * canvas.width + x) * 4;
                const c = [px[at], px[at + 1], px[at + 2], px[at + 3]].join();
                out.push(c === ok ? 'ok' : c === bad ? 'bad' : c);
            }
            return out;
        });
        assert.deepEqual(colours, nodes.map((n, i) => (i < 20 ? 'bad' : 'ok')));
        // Scrolled to the end: the last node is drawn, still a window of rows
        await page.evaluate(() => {
            const box = document.querySelector('.gridscroll');
            box.scrollTop = box.scrollHeight;
        });
        await page.waitForSelector('#grid tr[data-node="n-1999"]');
        assert.ok(await page.locator('#grid tr[data-node]').count() < 200);
        await shot('job-2000');
    } finally {
        await page.unroute(new RegExp('/api/v1/jobs/' + fake + '(/.*)?(\\?.*)?$'));
    }
});

test('a job\'s timeline shows its newest 500 events, says how many older it left out, and shows them on demand', LIMIT, async () => {
    const real = await api('POST', '/jobs', tokens.admin, { target: 'node:web-01',
        tasks: [{ backend: 'test', action: 'echo', params: { msg: 'x' } }] });
    assert.equal(real.status, 201, JSON.stringify(real.body));
    let record;
    await until('the job to end', async () => {
        record = (await api('GET', '/jobs/' + real.body.job, tokens.admin)).body;
        return record.status === 'completed';
    });
    const fake = 'j-ffffffffffff-0002';
    const events = [];
    for (let seq = 1; seq <= 1200; seq++)
        events.push({ seq, time: '2026-12-03T10:00:00.000Z', event: 'succeeded', node: 'web-01', step: 0,
                      detail: 'event ' + seq });
    const route = new RegExp('/api/v1/jobs/' + fake + '(/.*)?(\\?.*)?$');
    await page.route(route, (r) => {
        const url = new URL(r.request().url());
        const body = url.pathname.endsWith('/events') ? { job: fake, events }
                   : url.pathname.endsWith('/progress') ? { id: fake, status: 'completed', tasks: [] }
                   : Object.assign({}, record, { id: fake });
        r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });
    });
    try {
        await page.goto(base + '/#/jobs/' + fake);
        await page.waitForSelector('#events-older:not([hidden])');
        assert.equal(await page.locator('#events tbody tr').count(), 500);
        assert.match(await page.textContent('#events-older'), /newest 500 of 1200 events; 700 older not shown/);
        assert.equal(await page.textContent('#events tbody tr:first-child td:first-child'), '701');
        assert.equal(await page.textContent('#events tbody tr:last-child td:first-child'), '1200');
        await page.click('#events-show-older');
        await page.waitForSelector('#events-older:has-text("200 older not shown")');
        assert.equal(await page.locator('#events tbody tr').count(), 1000);
        assert.equal(await page.textContent('#events tbody tr:first-child td:first-child'), '201');
        await page.click('#events-show-older');
        await page.waitForSelector('#events-older', { state: 'hidden' });
        assert.equal(await page.locator('#events tbody tr').count(), 1200);
        assert.equal(await page.textContent('#events tbody tr:first-child td:first-child'), '1');
    } finally {
        await page.unroute(route);
    }
});

test('a nodes page of 3,000 draws only the rows in view, and filters all of them', LIMIT, async () => {
    const real = (await api('GET', '/nodes', tokens.admin)).body.nodes;
    const one = real.find((n) => n.id === 'web-01');
    const fleet = [];
    for (let i = 0; i < 3000; i++)
        fleet.push(Object.assign({}, one, { id: 'host-' + String(i).padStart(4, '0'),
                                            hostname: 'host-' + i, status: i % 10 ? 'online' : 'offline' }));
    const only = /\/api\/v1\/nodes(\?.*)?$/;
    await page.route(only, (route) => route.fulfill({ status: 200, contentType: 'application/json',
                                                      body: JSON.stringify({ nodes: fleet }) }));
    try {
        await page.goto(base + '/#/nodes');
        await page.waitForSelector('#nodes tr[data-node="host-0000"]');
        assert.ok(await page.locator('#nodes tr[data-node]').count() < 200);
        await page.evaluate(() => {
            const box = document.querySelector('.vscroll');
            box.scrollTop = box.scrollHeight;
        });
        await page.waitForSelector('#nodes tr[data-node="host-2999"]');
        assert.ok(await page.locator('#nodes tr[data-node]').count() < 200);
        await page.fill('#node-filter', 'host-2998');
        // The filtered list is drawn at the next animation frame, and the
        // row of host-2998 was on screen already: wait for the one row
        await page.waitForFunction(() =>
            document.querySelectorAll('#nodes tr[data-node]').length === 1);
        assert.equal(await page.getAttribute('#nodes tr[data-node]', 'data-node'), 'host-2998');
    } finally {
        await page.unroute(only);
    }
});

test('the run form starts on an action that changes nothing', LIMIT, async () => {
    await page.goto(base + '/#/run');
    await page.waitForSelector('#backend option[value="system"]', { state: 'attached' });
    assert.equal(await page.inputValue('#backend'), 'system');
    assert.notEqual(await page.inputValue('#action'), '');
});

test('an operator cancels a running job, then retries it', LIMIT, async () => {
    const r = await api('POST', '/jobs', tokens.admin, { target: 'node:web-01',
        tasks: [{ backend: 'test', action: 'sleep', params: { seconds: 60, msg: 'long' } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(r.body.job));
    await page.waitForSelector('#grid .cellbtn[data-node="web-01"][data-status="running"]');
    page.once('dialog', (d) => d.accept());
    await page.click('#cancel');
    await page.waitForSelector('body[data-job-status="cancelled"]');
    await page.waitForSelector('#events tr.ev-cancelled');
    await page.click('#retry');
    await page.waitForURL((url) => url.hash.startsWith('#/jobs/') && !url.hash.endsWith(r.body.job));
    await page.waitForSelector('.jobhead dd a');
    assert.equal(await page.textContent('.jobhead dd a'), r.body.job);
    const retried = decodeURIComponent(page.url().split('#/jobs/')[1]);
    await until('the retry to run', async () =>
        (await api('GET', '/jobs/' + retried, tokens.admin)).body.status === 'running');
    assert.equal((await api('POST', '/jobs/' + retried + '/cancel', tokens.admin, {})).status, 200);
});

test('an admin accepts a pending agent key on the keys page, then rejects it', LIMIT, async () => {
    await page.click('#nav a[data-view="keys"]');
    await page.waitForSelector('table[data-keys="pending"] tr[data-key]');
    const enrolled = await page.textContent('table[data-keys="accepted"]');
    for (const node of ['web-01', 'web-02', 'db-01'])
        assert.ok(enrolled.includes(node), node + ' missing from: ' + enrolled);
    const row = page.locator('table[data-keys="pending"] tr[data-key]', { hasText: 'late-01' });
    assert.equal(await row.count(), 1);
    const key = await row.getAttribute('data-key');
    await shot('keys');
    await row.locator('button', { hasText: 'Accept' }).click();
    await page.waitForSelector(`table[data-keys="accepted"] tr[data-key="${key}"]`);
    await until('late-01 online', async () =>
        (await api('GET', '/nodes/late-01', tokens.admin)).body.status === 'online');
    page.once('dialog', (d) => d.accept());
    await page.locator(`table[data-keys="accepted"] tr[data-key="${key}"] button`, { hasText: 'Reject' }).click();
    await page.waitForSelector(`table[data-keys="rejected"] tr[data-key="${key}"]`);
    await until('late-01 offline', async () =>
        (await api('GET', '/nodes/late-01', tokens.admin)).body.status === 'offline');
});

test('the audit page lists what the dashboard changed, by whom, and filters it', LIMIT, async () => {
    await page.click('#nav a[data-view="audit"]');
    const row = '#audit tr[data-type="key.reject"]';
    await page.waitForSelector(row);
    const cells = await page.locator(row).first().locator('td').allTextContents();
    assert.equal(cells[1], 'dash-admin', cells.join(' | '));
    assert.equal(cells[2], 'admin');
    assert.equal(cells[3], 'dashboard');
    assert.equal(cells[6], 'ok');
    await shot('audit');
    await page.fill('#audit-filters input[name="type"]', 'key.');
    await page.click('#audit-filters button[type="submit"]');
    await page.waitForURL((url) => url.hash.includes('type=key.'));
    await page.waitForSelector('#audit tr[data-type="key.accept"]');
    const types = await page.locator('#audit tr[data-entry]').evaluateAll(
        (rows) => rows.map((r) => r.dataset.type));
    assert.ok(types.length >= 2 && types.every((t) => t.startsWith('key.')), types.join(','));
});

test('the notifications page lists a dead delivery, counts it, and an admin retries it', LIMIT, async () => {
    const r = await api('POST', '/jobs', tokens.admin, { target: 'node:db-01', notify: [{ url: deadHook }],
        tasks: [{ backend: 'test', action: 'echo', params: { msg: 'told nobody' } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const id = r.body.job;
    const delivery = await until('the delivery to die', async () => {
        const list = await api('GET', '/notify?job=' + id, tokens.admin);
        const d = list.body.deliveries[0];
        return d && d.status === 'dead' ? d : null;
    });
    await page.click('#nav a[data-view="notify"]');
    const row = `#notify tr[data-delivery="${delivery.id}"]`;
    await page.waitForSelector(row + '[data-status="dead"]');
    const cells = await page.locator(row).locator('td').allTextContents();
    assert.equal(cells[1], id, cells.join(' | '));
    assert.equal(cells[2], 'dead');
    assert.ok(Number(cells[3]) >= 1, cells.join(' | '));
    assert.equal(cells[5], deadHook);
    assert.ok(cells[6].length > 0, 'the last error is shown');
    assert.ok(Number(await page.textContent('#notify-dead-count')) >= 1);
    await shot('notify');
    await page.click('#notify-filters a[data-status="sent"]');
    await page.waitForURL((url) => url.hash.includes('status=sent'));
    await page.waitForSelector('#notify td.empty');
    assert.equal(await page.locator(row).count(), 0);
    await page.click('#notify-filters a[data-status="dead"]');
    await page.waitForSelector(row);
    await page.click(row + ' button[data-action="retry"]');
    await page.waitForSelector('#flash.ok');
    assert.match(await page.textContent('#flash'), /sent again/);
    await until('the notify_retried event', async () => {
        const ev = await api('GET', '/jobs/' + id + '/events', tokens.admin);
        return ev.body.events.some((e) => e.event === 'notify_retried');
    });
});

// A job on three named nodes (two groups, three labels) that has ended.
const FINAL_JOB = new Set(['completed', 'failed', 'partial_failure', 'cancelled']);

async function finishedJob(spec) {
    const r = await api('POST', '/jobs', tokens.admin, Object.assign({ target: 'node:web-01,web-02,db-01' }, spec));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await until('the job to end', async () =>
        ['completed', 'failed', 'partial_failure'].includes((await api('GET', '/jobs/' + r.body.job, tokens.admin)).body.status));
    return r.body.job;
}

test('a job\'s rows filter by group and by label', LIMIT, async () => {
    const id = await finishedJob({ tasks: [{ backend: 'test', action: 'echo', params: { msg: 'groups' } }] });
    await page.goto(base + '/#/jobs/' + encodeURIComponent(id));
    await page.waitForSelector('#grid-group option[value="db"]', { state: 'attached' });
    const rows = () => page.locator('#grid th.node').allTextContents();
    assert.deepEqual((await rows()).sort(), ['db-01', 'web-01', 'web-02']);
    await page.selectOption('#grid-group', 'web');
    await until('the web rows', async () => (await rows()).sort().join() === 'web-01,web-02');
    await page.selectOption('#grid-label', 'tier=web.dev');
    await until('web-02 only', async () => (await rows()).join() === 'web-02');
    await page.selectOption('#grid-group', '');
    await page.selectOption('#grid-label', 'tier=db.prod');
    await until('db-01 only', async () => (await rows()).join() === 'db-01');
    // Each choice says how many of the job's nodes it keeps
    assert.deepEqual(await page.locator('#grid-group option').allTextContents(),
                     ['any group', 'db (1)', 'web (2)']);
    await shot('job-label-filter');
    // A choice in the address: its rows from the first draw on
    await page.goto(base + '/#/jobs/' + encodeURIComponent(id) + '?group=web');
    await until('the web rows at once', async () => (await rows()).sort().join() === 'web-01,web-02');
    assert.equal(await page.inputValue('#grid-group'), 'web');
});

test('a rolling job shows its batches and where its failure budget stands', LIMIT, async () => {
    const id = await finishedJob({ batch: 1, max_failures: 1,
        tasks: [{ backend: 'test', action: 'echo', params: { msg: 'rolled' } }] });
    const progress = (await api('GET', '/jobs/' + id + '/progress', tokens.admin)).body;
    assert.equal(progress.batches, 3, JSON.stringify(progress));
    assert.equal(progress.budget, 1, JSON.stringify(progress));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(id));
    await page.waitForSelector('#batches li.batch[data-batch="3"]');
    assert.equal(await page.getAttribute('#batches', 'data-batches'), '3');
    assert.equal(await page.getAttribute('#batches', 'data-budget'), '1');
    assert.equal(await page.getAttribute('#batches', 'data-used'), String(progress.failed));
    assert.deepEqual(await page.locator('#batches li.batch').evaluateAll((els) => els.map((e) => e.dataset.state)),
                     ['done', 'done', 'done']);
    assert.match(await page.textContent('#batches-line'), /3 batches of 1 node .*failure budget: 0 of 1 used, 1 left/);
    await shot('job-batches');
});

test('a graph job draws its DAG: a box per task in its state, an arrow per need', LIMIT, async () => {
    const echo = (name, needs) => ({ name, needs, backend: 'test', action: 'echo', params: { msg: name } });
    const id = await finishedJob({ tasks: [echo('fetch', undefined), echo('build', ['fetch']),
        { name: 'check', needs: ['fetch'], backend: 'test', action: 'fail', params: { msg: 'no' } },
        echo('ship', ['build', 'check'])] });
    const record = (await api('GET', '/jobs/' + id, tokens.admin)).body;
    await page.goto(base + '/#/jobs/' + encodeURIComponent(id));
    await page.waitForSelector('#dag g.dag-node[data-step="3"]', { state: 'attached' });
    assert.equal(await page.locator('#dag g.dag-node').count(), record.tasks.length);
    // Each box in the state of its step's cells, failures first, as the API has them
    for (let s = 0; s < record.tasks.length; s++) {
        const statuses = Object.values(record.results[String(s)] || {}).map((c) => c.status);
        const shown = await page.getAttribute(`#dag g.dag-node[data-step="${s}"]`, 'data-state');
        assert.ok(statuses.includes(shown), 'step ' + s + ': ' + shown + ' of ' + statuses.join());
    }
    assert.equal(await page.getAttribute('#dag g.dag-node[data-step="2"]', 'data-state'), 'failed');
    // The arrows: fetch -> build, fetch -> check, build -> ship, check -> ship
    const edges = await page.locator('#dag path.dag-edge').evaluateAll(
        (els) => els.map((e) => e.dataset.from + '>' + e.dataset.to).sort());
    assert.deepEqual(edges, ['0>1', '0>2', '1>3', '2>3']);
    await shot('job-dag');
    // A box clicked shows its task's cells only, as the API has them; a
    // box is a button for the keyboard too (Enter, Space), and the box
    // shown clicked again shows every step
    const stepColumns = () => page.locator('#grid thead th.step .stepno').allTextContents();
    await page.click('#dag g.dag-node[data-step="2"]');
    await page.waitForSelector('#grid[data-step="2"]');
    assert.deepEqual(await stepColumns(), ['#2']);
    assert.equal(await page.getAttribute('#dag g.dag-node[data-step="2"]', 'aria-pressed'), 'true');
    const shown = await page.locator('#grid .cellbtn').evaluateAll(
        (els) => els.map((e) => e.dataset.step + ' ' + e.dataset.node + ' ' + e.dataset.status).sort());
    assert.deepEqual(shown, Object.entries(record.results['2']).map(([n, c]) => '2 ' + n + ' ' + c.status).sort());
    await page.focus('#dag g.dag-node[data-step="1"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#grid[data-step="1"]');
    assert.deepEqual(await stepColumns(), ['#1']);
    await page.focus('#dag g.dag-node[data-step="1"]');
    await page.keyboard.press(' ');
    await page.waitForSelector('#grid[data-step=""]');
    assert.deepEqual(await stepColumns(), ['#0', '#1', '#2', '#3']);
    // Its heat map: each step's counts above its squares; a skipped step
    // has no durations (none of its cells ran)
    await page.goto(base + '/#/jobs/' + encodeURIComponent(id) + '?view=map');
    await page.waitForSelector('#heatmap canvas.heat[data-step="3"]');
    assert.match(await page.textContent('#heatmap .tallies[data-step="3"]'), /skipped/);
    assert.equal(await page.locator('#heatmap .histogram[data-step="3"]').count(), 0);
    assert.equal(await page.locator('#heatmap .histogram[data-step="0"]').count(), 1);
});

// The API's counts of a job's cells: per status, the nodes with a cell of
// it (the chips); per step, the cells of each status (the tallies).
function apiCounts(record) {
    const rows = new Map();
    const steps = {};
    for (const [s, cells] of Object.entries(record.results || {})) {
        steps[s] = {};
        for (const [node, cell] of Object.entries(cells)) {
            steps[s][cell.status] = (steps[s][cell.status] || 0) + 1;
            rows.set(node, (rows.get(node) || new Set()).add(cell.status));
        }
    }
    const chips = {};
    for (const set of rows.values())
        for (const status of set)
            chips[status] = (chips[status] || 0) + 1;
    return { chips, steps };
}

// A value's JSON with every object's keys sorted: counts compared whatever
// the order they were counted in.
function canon(v) {
    return JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));
}

// What the job page shows of the same.
function shownCounts() {
    return page.evaluate(() => {
        const chips = {};
        for (const b of document.querySelectorAll('#cell-filters button[data-status]'))
            if (b.dataset.status !== 'all')
                chips[b.dataset.status] = Number(b.querySelector('.count').textContent);
        const steps = {};
        for (const box of document.querySelectorAll('.tallies[data-step]')) {
            steps[box.dataset.step] = {};
            for (const t of box.querySelectorAll('.tally'))
                steps[box.dataset.step][t.dataset.status] = parseInt(t.textContent, 10);
        }
        return { chips, steps };
    });
}

test('a job\'s chips, tallies and row order follow its event stream while it runs and when it ends', LIMIT, async () => {
    // A graph job: one branch fails at once, the other sleeps. While it
    // runs, the page gets its record once: every later fetch of it is held
    // until the job ended, so whatever moves on the page meanwhile moves
    // by the stream's events
    const echo = (name, needs) => ({ name, needs, backend: 'test', action: 'echo', params: { msg: name } });
    const r = await api('POST', '/jobs', tokens.admin, { target: 'node:web-01,web-02,db-01', strategy: 'continue',
        tasks: [echo('ok'), { name: 'bad', backend: 'test', action: 'fail', params: { msg: 'no' } },
                { name: 'slow', needs: ['ok'], backend: 'test', action: 'sleep', params: { seconds: 5, msg: 'z' } }] });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const id = r.body.job;
    const route = new RegExp('/api/v1/jobs/' + id + '(\\?.*)?$');
    let served = 0;
    let frozen = true;
    const held = [];
    await page.route(route, (req) => {
        if (frozen && served++ > 0)
            held.push(req);
        else
            req.continue();
    });
    try {
        await page.goto(base + '/#/jobs/' + encodeURIComponent(id));
        await page.waitForSelector('#grid tr[data-node]');
        // The record and the events are read in Workers, off the page's thread
        assert.ok(page.workers().length >= 2, page.workers().length + ' workers');
        // While it runs: the chips and tallies are the API's at that moment
        let running = null;
        let seen = null;
        await until('the counts of the running job', async () => {
            const rec = (await api('GET', '/jobs/' + id, tokens.admin)).body;
            const slow = Object.values((rec.results || {})['2'] || {});
            seen = [rec.status, apiCounts(rec), await shownCounts()];
            if (rec.status !== 'running' || slow.length !== 3 || slow.some((c) => c.status !== 'running'))
                return false;
            running = seen[1];
            assert.deepEqual(running.chips, { success: 3, failed: 3, running: 3 });
            return canon(seen[2]) === canon(running);
        }).catch((e) => {
            throw new Error(e.message + '; last seen (status, API, page): ' + JSON.stringify(seen));
        });
        // Failures first: each row has a failed cell, so by name
        assert.deepEqual(await page.locator('#grid th.node').allTextContents(), ['db-01', 'web-01', 'web-02']);
        // When it ended (the record served as it is again): the API's final counts
        let done = null;
        await until('the job to end', async () => {
            done = (await api('GET', '/jobs/' + id, tokens.admin)).body;
            return FINAL_JOB.has(done.status);
        });
        frozen = false;
        for (const req of held.splice(0))
            await req.continue();
        const final = apiCounts(done);
        assert.deepEqual(final.chips, { success: 3, failed: 3 });
        await until('the final counts', async () => canon(await shownCounts()) === canon(final));
        await shot('job-live-counts');
    } finally {
        frozen = false;
        for (const req of held.splice(0))
            await req.continue().catch(() => {});
        await page.unroute(route);
    }
});

test('a node that stops turns offline on the nodes page, pushed, without a poll', LIMIT, async () => {
    await page.goto(base + '/#/nodes');
    await page.waitForSelector('#nodes tr[data-node="db-01"]');
    // What the page asks from here on: the node list is read only after
    // node.changes said a node changed (its timer waits 30 s)
    const asked = [];
    const onResponse = (res) => {
        const url = new URL(res.url());
        if (url.pathname === '/api/v1/nodes/changes') {
            // Its place in the order now, its answer when the body is read
            const at = asked.push('?') - 1;
            res.json().then((body) => {
                asked[at] = body && body.changed ? 'changed' : 'same';
            }, () => {});
        } else if (url.pathname === '/api/v1/nodes')
            asked.push('list');
    };
    page.on('response', onResponse);
    try {
        const keys = path.join(dir, 'keys');
        run('gridagent', ['keygen', '--out', keys, '--name', 'push-01']);
        gridcli('key', 'accept', publicKey(path.join(keys, 'push-01.key')));
        const agent = start('push-01', 'gridagent', ['--id', 'push-01', '--groups', 'push',
            '--broker', 'ipc://' + path.join(dir, 'agents'), '--publish', 'ipc://' + path.join(dir, 'publish'),
            '--state-dir', path.join(dir, 'push-01'), '--key', path.join(keys, 'push-01.key'),
            '--broker-key', path.join(keys, 'broker.key')]);
        await page.waitForSelector('#nodes tr[data-node="push-01"][data-state="online"]');
        agent.kill('SIGTERM');
        await page.waitForSelector('#nodes tr[data-node="push-01"][data-state="offline"]');
        await until('the answers read', () => !asked.includes('?'));
        // Each read of the list follows a change of its own
        assert.ok(asked.filter((a) => a === 'list').length >= 2, asked.join());
        asked.forEach((a, i) => {
            const upTo = asked.slice(0, i + 1);
            assert.ok(upTo.filter((b) => b === 'changed').length >= upTo.filter((b) => b === 'list').length,
                      'a list read without a change: ' + asked.join());
        });
    } finally {
        page.off('response', onResponse);
    }
    await shot('nodes-pushed');
});

test('the lists move with j and k, open with Enter, and / goes to the filter', LIMIT, async () => {
    await page.goto(base + '/#/jobs');
    await page.waitForSelector('#jobs tr[data-key]');
    const ids = await page.locator('#jobs tr[data-key]').evaluateAll((els) => els.map((e) => e.dataset.key));
    assert.ok(ids.length >= 2);
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    await page.waitForSelector(`#jobs tr.kbd[data-key="${ids[1]}"]`);
    await page.keyboard.press('k');
    await page.waitForSelector(`#jobs tr.kbd[data-key="${ids[0]}"]`);
    assert.equal(await page.locator('#jobs tr.kbd').count(), 1);
    await page.keyboard.press('Enter');
    await page.waitForURL((url) => decodeURIComponent(url.hash) === '#/jobs/' + ids[0]);
    await page.goto(base + '/#/jobs');
    await page.waitForSelector('#jobs tr[data-key]');
    await page.keyboard.press('/');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'job-filter');
    await page.keyboard.type('test.fail');
    await until('the failing jobs only', async () => {
        const runs = await page.locator('#jobs td.runs').allTextContents();
        return runs.length && runs.every((t) => t === 'test.fail');
    });
});

test('a modify action shows its check before it is sent', LIMIT, async () => {
    await page.goto(base + '/#/run');
    await page.waitForSelector('#backend option[value="test"]', { state: 'attached' });
    await page.fill('#target', 'node:web-01');
    await page.selectOption('#backend', 'test');
    await page.selectOption('#action', 'mark');
    await page.fill('#param-name', 'checked');
    const before = (await api('GET', '/jobs?limit=1', tokens.admin)).body.total;
    await page.click('#run-submit');
    await page.waitForSelector('#run-check');
    assert.match(await page.textContent('#run-check'), /1 node would run it: web-01/);
    assert.match(await page.textContent('#run-submit'), /Confirm: run on 1 node/);
    assert.ok(page.url().endsWith('#/run'));
    assert.equal((await api('GET', '/jobs?limit=1', tokens.admin)).body.total, before, 'nothing was sent');
    await shot('run-check');
    await page.click('#run-submit');
    await page.waitForURL(/#\/jobs\/j-/);
});

test('the dead letters page lists a failed cell and retries it', LIMIT, async () => {
    const id = await finishedJob({ target: 'node:db-01', dead_letter: true,
        tasks: [{ backend: 'test', action: 'fail', params: { msg: 'dead letter' } }] });
    const entry = await until('the dead letter', async () =>
        (await api('GET', '/dlq?job=' + id, tokens.admin)).body.entries[0]);
    await page.click('#nav a[data-view="dlq"]');
    const row = `#dlq tr[data-entry="${entry.id}"]`;
    await page.waitForSelector(row);
    assert.match(await page.textContent(row), new RegExp(entry.node));
    await shot('dlq');
    await page.click(row + ' button[data-action="retry"]');
    await page.waitForSelector('#flash.ok');
    assert.match(await page.textContent('#flash'), /new job j-/);
    await until('the entry to name its retry', async () =>
        (await api('GET', '/dlq', tokens.admin)).body.entries.find((e) => e.id === entry.id).retry_job);
    await page.waitForSelector(row + ' a[href^="#/jobs/"]');
});

// The squares of a step's heat map by colour: how many in the colour of
// success, of failure, and any other.
function squareTally(step) {
    return page.evaluate((s) => {
        const canvas = document.querySelector(`#heatmap canvas.heat[data-step="${s}"]`);
        const pitch = Number(canvas.dataset.pitch), perRow = Number(canvas.dataset.perRow);
        const scale = canvas.width / canvas.clientWidth;
        const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        const tone = (name) => {
            const g = document.createElement('canvas').getContext('2d');
            g.fillStyle = getComputedStyle(document.documentElement).getPropertyValue('--' + name).trim();
            g.fillRect(0, 0, 1, 1);
            return g.getImageData(0, 0, 1, 1).data.join();
        };
        const ok = tone('ok'), bad = tone('bad');
        const out = { success: 0, failed: 0, other: 0 };
        const rows = canvas.height / scale / pitch;
        for (let p = 0; p < perRow * rows; p++) {
            const x = Math.floor(((p % perRow) * pitch + 1) * scale);
            const y = Math.floor((Math.floor(p / perRow) * pitch + 1) * scale);
            const at = (y * canvas.width + x) * 4;
            if (px[at + 3] === 0)
                continue;   // past the last square
            const c = [px[at], px[at + 1], px[at + 2], px[at + 3]].join();
            out[c === ok ? 'success' : c === bad ? 'failed' : 'other']++;
        }
        return out;
    }, step);
}

test('a job on a swarm of 400 agents: counts, failures first and heat map squares as the API has them', LIMIT, async () => {
    // The swarm's keys are made in memory: enrolled as they come while it
    // joins (auto_accept, read again on SIGHUP), then no more
    const SWARM = 400;
    const conf = path.join(dir, 'broker.yaml');
    const kept = fs.readFileSync(conf, 'utf8');
    fs.writeFileSync(conf, kept + 'auto_accept: true\n');
    procs[0].kill('SIGHUP');
    await new Promise((r) => setTimeout(r, 300));
    start('swarm', path.join(TOOLS, 'gridswarm'), ['--agents', String(SWARM), '--prefix', 'swarm',
        '--groups', 'swarm', '--labels', 'rack=r1', '--broker', 'ipc://' + path.join(dir, 'agents'),
        '--publish', 'ipc://' + path.join(dir, 'publish'), '--curve', path.join(dir, 'keys', 'broker.key'),
        '--delay-ms', '20', '--fail-rate', '0.03', '--test-only']);
    try {
        await until(SWARM + ' swarm agents online', async () => {
            const r = await api('GET', '/nodes', tokens.admin);
            return r.status === 200 && r.body.nodes.filter((n) => n.id.startsWith('swarm-')
                                                              && n.status === 'online').length === SWARM;
        }, 120000);
    } finally {
        fs.writeFileSync(conf, kept);
        procs[0].kill('SIGHUP');
    }
    const id = await finishedJob({ target: 'group:swarm', strategy: 'continue',
        tasks: [{ backend: 'test', action: 'echo', params: { msg: 'one' } },
                { backend: 'test', action: 'echo', params: { msg: 'two' } }] });
    const record = (await api('GET', '/jobs/' + id, tokens.admin)).body;
    const want = apiCounts(record);
    assert.ok(want.chips.failed > 0 && want.chips.success > 0, JSON.stringify(want));
    await page.goto(base + '/#/jobs/' + encodeURIComponent(id));
    await page.waitForSelector('#heatmap canvas.heat[data-step="1"]');
    await page.waitForSelector('#heatmap .histogram[data-step="1"]');
    // The chips and each step's tallies (over the map and the grid) are the API's
    assert.equal(canon(await shownCounts()), canon(want));
    // Failures first: the rows drawn begin with every node that failed
    const failedNodes = new Set(Object.values(record.results).flatMap((cells) =>
        Object.entries(cells).filter(([, c]) => c.status === 'failed').map(([n]) => n)));
    const first = await page.locator('#grid tr[data-node]').evaluateAll((rows) => rows.map((r) => r.dataset.node));
    const lead = Math.min(first.length, failedNodes.size);
    assert.ok(first.slice(0, lead).every((n) => failedNodes.has(n)), first.slice(0, lead).join());
    // Each step's squares: as many in the colours of success and failure as
    // the API has such cells; the rest (a node that failed before the step
    // has no run of it) in others
    for (const s of ['0', '1']) {
        const { success = 0, failed = 0 } = want.steps[s];
        assert.deepEqual(await squareTally(s), { success, failed, other: SWARM - success - failed },
                         'step ' + s + ': ' + JSON.stringify(want.steps[s]));
    }
    await shot('job-swarm');
});

test('dark by the system\'s choice; the overview fits 1280 x 720 and a phone', LIMIT, async () => {
    await page.setViewportSize({ width: 1280, height: 720 });
    await page.goto(base + '/#/overview');
    await page.waitForSelector('#overview #ov-nodes');
    const fits = () => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1);
    // The trend goes on from the first visit's samples (kept in the tab)
    await until('the trend drawn with a second sample', () => page.evaluate(() => {
        const kept = JSON.parse(sessionStorage.getItem('grid.overview.trend') || 'null');
        const line = document.querySelector('#ov-nodes svg.spark polyline');
        return kept && kept.trend.online.length >= 2 && line
            && line.getAttribute('points').split(' ').length === kept.trend.online.length;
    }));
    assert.equal(await fits(), true, 'overflows at 1280');
    const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await page.emulateMedia({ colorScheme: 'dark' });
    const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.notEqual(dark, light);
    const level = (rgb) => rgb.match(/\d+/g).slice(0, 3).reduce((a, b) => a + Number(b), 0) / 3;
    assert.ok(level(dark) < 60 && level(light) > 200, light + ' / ' + dark);
    await shot('overview-dark');
    await page.goto(base + '/#/jobs');
    await page.waitForSelector('#jobs tr[data-key]');
    await shot('jobs-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 390, height: 800 });
    await page.goto(base + '/#/overview');
    await page.waitForSelector('#overview #ov-nodes');
    assert.equal(await fits(), true, 'overflows at a phone\'s width');
    await shot('overview-phone');
    await page.setViewportSize({ width: 1280, height: 860 });
});

test('a viewer can read but not act: buttons off or a clear 403', LIMIT, async () => {
    await page.click('#logout');
    await page.waitForSelector('#token');
    await login(tokens.viewer);
    await page.waitForSelector('#overview #ov-jobs');
    await page.goto(base + '/#/jobs/' + encodeURIComponent(jobId));
    await page.waitForSelector('#retry');
    assert.equal(await page.textContent('#role'), 'viewer');
    for (const button of ['#retry', '#delete'])
        assert.equal(await page.locator(button).isDisabled(), true, button);
    // The broker is what enforces: a refused request says so
    await page.evaluate(() => {
        document.querySelector('#retry').disabled = false;
    });
    await page.click('#retry');
    await page.waitForSelector('#flash.error');
    assert.match(await page.textContent('#flash'), /Forbidden \(your role: viewer\)/);
    await page.click('#nav a[data-view="nodes"]');
    await page.waitForSelector('#nodes tr[data-node="db-01"] button[data-action="drain"]');
    assert.equal(await page.locator('#nodes button[data-action="drain"]:enabled').count(), 0);
    await page.click('#nav a[data-view="keys"]');
    await page.waitForSelector('#keys-forbidden');
    assert.match(await page.textContent('#keys-forbidden'), /admin role/);
    await page.click('#nav a[data-view="audit"]');
    await page.waitForSelector('#audit-forbidden');
    assert.match(await page.textContent('#audit-forbidden'), /admin role/);
    await page.click('#nav a[data-view="notify"]');
    await page.waitForSelector('#notify-forbidden');
    assert.match(await page.textContent('#notify-forbidden'), /admin role/);
    assert.equal(await page.locator('#notify button[data-action="retry"]').count(), 0);
});

test('a revoked token sends the dashboard back to the login page', LIMIT, async () => {
    await page.click('#logout');
    await login(tokens.doomed);
    await page.waitForSelector('#overview #ov-jobs');
    assert.equal(await page.textContent('#role'), 'operator');
    gridcli('token', 'revoke', 'dash-doomed');
    await page.click('#nav a[data-view="nodes"]');
    await page.waitForSelector('#login-error:not([hidden])');
    assert.match(await page.textContent('#login-error'), /refused the token/);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('grid.token')), null);
});

test('no page threw a script error or broke its content security policy', LIMIT, () => {
    assert.deepEqual(pageErrors, []);
});
