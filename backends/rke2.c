/*  =========================================================================
    rke2 backend - the RKE2 Kubernetes services

    start and stop the rke2 server or agent service through systemctl:
    "systemctl start -- rke2-server.service". The mode picks the unit; no
    free-form name reaches the command line.
    =========================================================================
*/
#include "backend.h"

#include <stdio.h>
#include <string.h>

static int
s_plan (backend_plan_t *plan, const char *verb, char *err, size_t err_len)
{
    const char *mode = backend_plan_param (plan, "mode");
    const char *unit = strcmp (mode, "agent") == 0
                     ? "rke2-agent.service" : "rke2-server.service";
    if (backend_plan_arg (plan, "systemctl")
    ||  backend_plan_arg (plan, verb)
    ||  backend_plan_arg (plan, "--")
    ||  backend_plan_arg (plan, unit)) {
        snprintf (err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

static int
s_plan_start (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan (plan, "start", err, err_len);
}

static int
s_plan_stop (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan (plan, "stop", err, err_len);
}

static const backend_param_t s_mode_params [] = {
    { .name = "mode", .type = BACKEND_TYPE_STRING, .required = true,
      .pattern = "^(server|agent)$",
      .help = "server or agent: which rke2 service" },
};
#define S_MODE s_mode_params, \
    sizeof (s_mode_params) / sizeof (s_mode_params [0])

static const backend_action_t s_actions [] = {
    { "start", true, "start the rke2 server or agent service", S_MODE,
      s_plan_start, .idempotent = false },
    { "stop", true, "stop the rke2 server or agent service", S_MODE,
      s_plan_stop, .idempotent = false },
};

const backend_ops_t backend_rke2_ops = {
    "rke2", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.0"
};
