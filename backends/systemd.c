/*  =========================================================================
    systemd backend - services

    start, stop, restart, enable, disable and status of one unit through
    systemctl, as "systemctl VERB -- UNIT". status is a query: systemctl
    answers 3 for a unit that is not running, which is a fine answer, not a
    failure; data reports active (yes|no) and the unit's Active: line.
    =========================================================================
*/
#include "backend.h"

#include <stdio.h>
#include <string.h>

#define S_UNIT_PATTERN "^[A-Za-z0-9:_.@-]{1,255}$"

//  systemctl status: 0 running, 3 not running; anything else failed
//  (4 is "no such unit").
static void
s_parse_status (const backend_plan_t *plan, const char *output,
                backend_outcome_t *outcome)
{
    if (outcome->exit_code == 0 || outcome->exit_code == 3) {
        outcome->ok = true;
        backend_outcome_data (outcome, "active",
                              outcome->exit_code == 0 ? "yes" : "no");
    }
    const char *active = output ? strstr (output, "Active: ") : NULL;
    if (active) {
        active += 8;
        size_t len = strcspn (active, "\r\n");
        char text [256];
        snprintf (text, sizeof (text), "%.*s",
                  (int) (len < sizeof (text) - 1 ? len : sizeof (text) - 1),
                  active);
        backend_outcome_data (outcome, "state", text);
    }
}

//  argv: systemctl VERB -- UNIT
static int
s_plan (backend_plan_t *plan, const char *verb, char *err, size_t err_len)
{
    if (backend_plan_arg (plan, "systemctl")
    ||  backend_plan_arg (plan, verb)
    ||  backend_plan_arg (plan, "--")
    ||  backend_plan_arg (plan, backend_plan_param (plan, "unit"))) {
        snprintf (err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

#define S_PLAN(verb) \
    static int \
    s_plan_##verb (backend_plan_t *plan, char *err, size_t err_len) \
    { \
        return s_plan (plan, #verb, err, err_len); \
    }

S_PLAN (start)
S_PLAN (stop)
S_PLAN (restart)
S_PLAN (enable)
S_PLAN (disable)

static int
s_plan_status (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->parse = s_parse_status;
    return s_plan (plan, "status", err, err_len);
}

static const backend_param_t s_unit_params [] = {
    { .name = "unit", .type = BACKEND_TYPE_STRING, .required = true,
      .pattern = S_UNIT_PATTERN,
      .help = "a unit name, e.g. nginx or nginx.service" },
};
#define S_UNIT s_unit_params, \
    sizeof (s_unit_params) / sizeof (s_unit_params [0])

static const backend_action_t s_actions [] = {
    { "start", true, "start a unit", S_UNIT, s_plan_start,
      .idempotent = true },
    { "stop", true, "stop a unit", S_UNIT, s_plan_stop,
      .idempotent = true },
    { "restart", true, "restart a unit", S_UNIT, s_plan_restart, false },
    { "enable", true, "enable a unit at boot", S_UNIT, s_plan_enable,
      .idempotent = true },
    { "disable", true, "disable a unit at boot", S_UNIT, s_plan_disable,
      .idempotent = true },
    { "status", false, "whether a unit is running", S_UNIT, s_plan_status, false },
};

const backend_ops_t backend_systemd_ops = {
    "systemd", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.0"
};
