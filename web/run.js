// grid dashboard, #/run: the form that starts a job.

import { api, can, clear, enc, errorText, h, views } from './common.js';

// ------------------------------------------------------------------
// #/run

views.run = (ctx) => {
    const catalog = new Map();   // backend -> Map(action -> {kind, help, params})
    const targets = new Set(['all', 'any:all']);
    const form = h('form', { class: 'card runform', id: 'run-form', novalidate: true });
    const note = h('p', { class: 'muted', text: 'Reading what the nodes offer\u2026' });
    ctx.main.append(h('h1', null, 'Run a job'), note, form);

    const targetInput = h('input', { name: 'target', id: 'target', list: 'target-list', required: true,
                                     value: ctx.query.get('target') || 'all', spellcheck: 'false' });
    const targetList = h('datalist', { id: 'target-list' });
    const backendSel = h('select', { name: 'backend', id: 'backend', required: true });
    const actionSel = h('select', { name: 'action', id: 'action', required: true });
    const actionHelp = h('p', { class: 'muted small', id: 'action-help' });
    const paramsBox = h('fieldset', { class: 'params', id: 'params' });
    const strategySel = h('select', { name: 'strategy', id: 'strategy' },
        h('option', { value: 'fail-fast' }, 'fail-fast'), h('option', { value: 'continue' }, 'continue'));
    const jobTimeout = h('input', { name: 'timeout', id: 'job-timeout', placeholder: 'e.g. 10m', size: 8 });
    const taskTimeout = h('input', { name: 'task_timeout', id: 'task-timeout', placeholder: 'e.g. 30s', size: 8 });
    const retries = h('input', { name: 'max_retries', id: 'max-retries', type: 'number', min: 0, max: 10, placeholder: '0' });
    const priority = h('input', { name: 'priority', id: 'priority', type: 'number', min: -100, max: 100, placeholder: '0' });
    const idem = h('input', { name: 'idempotency_key', id: 'idempotency-key', placeholder: 'optional' });
    const submit = h('button', { type: 'submit', id: 'run-submit' }, 'Run');
    const check = h('button', { type: 'button', id: 'run-check-button', class: 'secondary',
                                title: 'a dry run: where the job would run, nothing is started' }, 'Check');
    const result = h('div', { id: 'run-result' });

    form.append(
        row('Target', targetInput, h('span', { class: 'muted small' },
            'all, group:G, node:A,B, label:K=V, any:\u2026, or an expression (group:web and not node:web-03)')),
        targetList,
        row('Backend', backendSel),
        row('Action', actionSel, actionHelp),
        paramsBox,
        h('fieldset', { class: 'options' }, h('legend', null, 'Options'),
          row('Strategy', strategySel),
          row('Job timeout', jobTimeout),
          row('Task timeout', taskTimeout),
          row('Retries', retries),
          row('Priority', priority),
          row('Idempotency key', idem)),
        h('div', { class: 'actions' }, submit, check),
        result);

    function row(label, ...controls) {
        const id = controls[0] && controls[0].id;
        return h('div', { class: 'row' }, h('label', { for: id || null }, label), h('div', null, controls));
    }

    const currentAction = () => {
        const acts = catalog.get(backendSel.value);
        return acts ? acts.get(actionSel.value) : null;
    };

    const drawActions = () => {
        clear(actionSel);
        const acts = catalog.get(backendSel.value) || new Map();
        for (const name of [...acts.keys()].sort())
            actionSel.append(h('option', { value: name }, name));
        const want = ctx.query.get('action');
        if (want && acts.has(want))
            actionSel.value = want;
        else {
            // Unasked, the form starts on an action that changes nothing
            const query = [...acts.keys()].sort().find((a) => acts.get(a).kind !== 'modify');
            if (query)
                actionSel.value = query;
        }
        drawParams();
    };

    const drawParams = () => {
        clear(paramsBox);
        const act = currentAction();
        actionHelp.textContent = act ? (act.kind + (act.help ? ' \u00b7 ' + act.help : '')) : '';
        submit.disabled = !!act && act.kind === 'modify' && !can('operator');
        submit.title = submit.disabled ? 'modify actions need the operator role' : '';
        paramsBox.append(h('legend', null, 'Parameters'));
        if (!act || !act.params.length) {
            paramsBox.append(h('p', { class: 'muted small' }, 'This action takes no parameters.'));
            return;
        }
        for (const p of act.params) {
            const id = 'param-' + p.name;
            let input;
            if (p.type === 'bool') {
                input = h('select', { id, name: p.name, dataset: { param: p.name } },
                    h('option', { value: '' }, p.default !== undefined ? '(default: ' + p.default + ')' : '(not set)'),
                    h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
            } else {
                input = h('input', {
                    id, name: p.name, dataset: { param: p.name, type: p.type },
                    type: p.type === 'int' ? 'number' : 'text',
                    min: p.min, max: p.max,
                    placeholder: p.default !== undefined ? 'default: ' + p.default : p.type,
                    required: !!p.required, spellcheck: 'false',
                });
            }
            paramsBox.append(h('div', { class: 'row' },
                h('label', { for: id }, p.name, p.required ? h('span', { class: 'req', text: ' *' }) : null),
                h('div', null, input, h('span', { class: 'muted small',
                    text: ' ' + [p.type, p.pattern ? 'pattern ' + p.pattern : '',
                                 p.min !== undefined ? p.min + '..' + p.max : '', p.help || '']
                        .filter(Boolean).join(' \u00b7 ') }))));
        }
    };

    backendSel.addEventListener('change', drawActions);
    actionSel.addEventListener('change', drawParams);

    // The job the form describes, or null (with a message) when it lacks a part.
    const buildJob = () => {
        clear(result);
        const task = { backend: backendSel.value, action: actionSel.value };
        const params = {};
        for (const el of paramsBox.querySelectorAll('[data-param]')) {
            if (el.value === '')
                continue;
            params[el.dataset.param] = el.dataset.type === 'int' && /^-?\d+$/.test(el.value)
                ? Number(el.value) : el.value;
        }
        if (Object.keys(params).length)
            task.params = params;
        if (taskTimeout.value.trim())
            task.timeout = taskTimeout.value.trim();
        if (retries.value !== '')
            task.max_retries = Number(retries.value);
        const job = { target: targetInput.value.trim(), tasks: [task] };
        if (strategySel.value !== 'fail-fast')
            job.strategy = strategySel.value;
        if (jobTimeout.value.trim())
            job.timeout = jobTimeout.value.trim();
        if (priority.value !== '')
            job.priority = Number(priority.value);
        if (idem.value.trim())
            job.idempotency_key = idem.value.trim();
        if (!job.target || !task.backend || !task.action) {
            result.append(h('p', { class: 'error', text: 'A target, a backend and an action are needed.' }));
            return null;
        }
        return job;
    };

    const showError = (err) => {
        if (!ctx.live())
            return;
        result.append(h('div', { class: 'error', role: 'alert', id: 'run-error' },
            h('p', { text: errorText(err) }),
            err.details && err.details.length ? h('ul', null, err.details.map((d) => h('li', { text: d }))) : null));
    };

    // A modify action runs only after its check was shown (job.check, a
    // dry run): the first Run shows where it would run, the second sends
    // the very job checked. A change to the form asks for a new check.
    let checked = '';
    const resetSubmit = () => {
        checked = '';
        submit.textContent = 'Run';
        submit.classList.remove('confirm');
    };
    form.addEventListener('input', resetSubmit);
    form.addEventListener('change', resetSubmit);
    form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const job = buildJob();
        if (!job)
            return;
        const act = currentAction();
        const key = JSON.stringify(job);
        if (act && act.kind === 'modify' && checked !== key) {
            const r = await doCheck(job);
            if (!r || !ctx.live())
                return;
            checked = key;
            const n = (r.nodes || []).length;
            submit.textContent = n ? 'Confirm: run on ' + (r.any ? 'one of ' : '') + n + ' node'
                                     + (n === 1 ? '' : 's') : 'Run anyway';
            submit.classList.add('confirm');
            submit.focus();
            return;
        }
        submit.disabled = true;
        try {
            const r = await api('POST', '/jobs', job);
            location.hash = '#/jobs/' + enc(r.job);
        } catch (err) {
            showError(err);
        } finally {
            submit.disabled = false;
        }
    });

    // A dry run (job.check): where it would run, and where not, and why.
    // Returns the check's answer, or null (its error shown).
    const doCheck = async (job) => {
        check.disabled = true;
        try {
            const r = await api('POST', '/jobs/check', job);
            if (!ctx.live())
                return null;
            const nodes = r.nodes || [];
            const notRun = r.not_run || [];
            for (const old of result.querySelectorAll('#run-check'))
                old.remove();
            result.append(h('div', { class: 'card check', id: 'run-check' },
                h('p', null, h('strong', null, 'Check: '), nodes.length
                    ? (r.any ? 'one of ' : '') + nodes.length + ' node' + (nodes.length === 1 ? '' : 's')
                      + ' would run it: ' : 'no node would run it.',
                  h('span', { class: 'mono', text: nodes.join(', ') })),
                notRun.length ? h('ul', null, notRun.map((n) => h('li', null,
                    h('span', { class: 'mono', text: n.node }), ': ' + (n.reason || n.status)))) : null));
            return r;
        } catch (err) {
            showError(err);
            return null;
        } finally {
            check.disabled = false;
        }
    };
    check.addEventListener('click', () => {
        const job = buildJob();
        if (job)
            doCheck(job);
    });

    (async () => {
        let list;
        try {
            list = await api('GET', '/nodes');
        } catch (err) {
            note.textContent = errorText(err);
            return;
        }
        const nodes = (list && list.nodes) || [];
        for (const n of nodes) {
            targets.add('node:' + n.id);
            for (const g of n.groups || [])
                targets.add('group:' + g);
            for (const [k, v] of Object.entries(n.labels || {}))
                targets.add('label:' + k + '=' + v);
        }
        for (const t of [...targets].sort())
            targetList.append(h('option', { value: t }));
        // What the nodes declare: ask the online ones (at most 32) for their backends.
        const online = nodes.filter((n) => n.status === 'online' && !n.drained).slice(0, 32);
        const details = await Promise.all(online.map((n) =>
            api('GET', '/nodes/' + enc(n.id)).catch(() => null)));
        if (!ctx.live())
            return;
        for (const d of details) {
            for (const b of (d && d.backends) || []) {
                if (!catalog.has(b.name))
                    catalog.set(b.name, new Map());
                const acts = catalog.get(b.name);
                for (const a of b.actions || [])
                    if (!acts.has(a.name))
                        acts.set(a.name, { kind: a.kind, help: a.help, params: a.params || [] });
            }
        }
        if (!catalog.size) {
            note.textContent = 'No online node declares any action: start an agent first.';
            submit.disabled = true;
            return;
        }
        note.textContent = 'Actions and parameters as ' + online.length + ' online node'
            + (online.length === 1 ? '' : 's') + ' declare them.';
        for (const name of [...catalog.keys()].sort())
            backendSel.append(h('option', { value: name }, name));
        const want = ctx.query.get('backend');
        if (want && catalog.has(want))
            backendSel.value = want;
        else {
            // Unasked, a backend with an action that changes nothing (system
            // when there is one), not the first in the alphabet (apt)
            const queries = (b) => [...catalog.get(b).values()].some((a) => a.kind !== 'modify');
            const first = catalog.has('system') && queries('system') ? 'system'
                        : [...catalog.keys()].sort().find(queries);
            if (first)
                backendSel.value = first;
        }
        drawActions();
    })();
};
