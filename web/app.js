// grid dashboard: plain ES modules, no framework, no build step. This one
// loads the pages (each registers its views in common.js's table) and
// starts the router. common.js holds what every page shares.
//
// It talks to the broker's REST API under /api/v1 with the token the user
// logged in with (kept in sessionStorage, so it goes when the tab closes),
// and renders its views behind a hash router: #/jobs, #/jobs/ID, #/nodes,
// #/run, #/keys, #/audit, #/notify and #/login. Everything that came from
// the broker reaches the DOM as text (textContent, attribute values): never
// as markup.

import { route, loggedOut, checkLeader } from './common.js';
import './overview.js';
import './jobs.js';
import './job.js';
import './nodes.js';
import './run.js';
import './admin.js';

document.getElementById('logout').addEventListener('click', () => {
    loggedOut('');
});
window.addEventListener('hashchange', route);
checkLeader();
route();
