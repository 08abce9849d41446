/*  =========================================================================
    systemd backend - services

    start, stop, restart, enable, disable and status of one unit through
    systemctl, as "systemctl VERB -- UNIT". status is a query: systemctl
    answers 3 for a unit that is not running, which is a fine answer, not a
    failure; data reports active (yes|no) and the unit's Active: line.

    Checks (dry runs): start, stop and restart ask "systemctl is-active --
    UNIT" (active, inactive, failed, activating...), enable and disable
    "systemctl is-enabled -- UNIT" (enabled, disabled, static, masked...).
    start would change a unit that is not active, stop one that is (or is
    on its way), restart always; enable would change a unit that is not
    enabled (static, alias, indirect and generated units cannot be and
    need not be: no change), disable one that is; a masked unit or one
    systemctl does not know cannot tell.
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

//  What "systemctl is-active|is-enabled" printed: its first line, or ""
static void
s_first_line (const char *output, char *state, size_t size)
{
    size_t len = strcspn (output ? output : "", "\r\n");
    snprintf (state, size, "%.*s", (int) (len < size - 1 ? len : size - 1),
              output ? output : "");
}

static bool
s_in (const char *word, const char *const *list)
{
    for (size_t index = 0; list [index]; index++)
        if (strcmp (word, list [index]) == 0)
            return true;
    return false;
}

//  VERB: "start", "stop" or "restart"; the answer of is-active
static void
s_parse_active (const backend_plan_t *plan, const char *output,
                backend_outcome_t *outcome, const char *verb)
{
    static const char *const running [] = {
        "active", "reloading", "activating", "refreshing", NULL
    };
    char state [64];
    s_first_line (output, state, sizeof state);
    const char *unit = backend_plan_param (plan, "unit");
    if (!*state) {
        outcome->ok = false;
        backend_outcome_error (outcome, "systemctl is-active -- %s said "
                               "nothing (exit code %d)", unit,
                               outcome->exit_code);
        return;
    }
    bool active = s_in (state, running);
    int would_change = strcmp (verb, "restart") == 0 ? 1
                     : strcmp (verb, "start") == 0 ? !active : active;
    char current [128], desired [128];
    snprintf (current, sizeof current, "%s %s", unit, state);
    snprintf (desired, sizeof desired, "%s %s", unit,
              strcmp (verb, "stop") == 0 ? "inactive"
              : strcmp (verb, "start") == 0 ? "active" : "restarted");
    backend_outcome_clear (outcome);
    backend_check_verdict (outcome, would_change, current, desired);
    backend_outcome_data (outcome, "active", active ? "yes" : "no");
    backend_outcome_data (outcome, "state", state);
}

//  ENABLE: the check of enable, else of disable; the answer of is-enabled
static void
s_parse_enabled (const backend_plan_t *plan, const char *output,
                 backend_outcome_t *outcome, bool enable)
{
    static const char *const enabled [] = {
        "enabled", "enabled-runtime", NULL
    };
    static const char *const fixed [] = {
        "static", "alias", "indirect", "generated", "transient", NULL
    };
    char state [64];
    s_first_line (output, state, sizeof state);
    const char *unit = backend_plan_param (plan, "unit");
    char current [128], desired [128];
    snprintf (current, sizeof current, "%s %s", unit,
              *state ? state : "unknown");
    snprintf (desired, sizeof desired, "%s %s", unit,
              enable ? "enabled" : "disabled");
    int would_change = -1;
    if (s_in (state, enabled))
        would_change = !enable;
    else
    if (s_in (state, fixed))
        would_change = 0;
    else
    if (strcmp (state, "disabled") == 0)
        would_change = enable;
    if (!*state && outcome->exit_code != 0 && outcome->exit_code != 1) {
        outcome->ok = false;
        backend_outcome_error (outcome, "systemctl is-enabled -- %s failed "
                               "(exit code %d)", unit, outcome->exit_code);
        return;
    }
    backend_outcome_clear (outcome);
    backend_check_verdict (outcome, would_change, current, desired);
    backend_outcome_data (outcome, "state", *state ? state : "unknown");
    if (would_change < 0)
        backend_outcome_data (outcome, "reason", *state
                              ? "systemctl names a state enable/disable "
                                "does not settle (masked, bad...)"
                              : "systemctl does not know the unit");
}

#define S_PARSE_ACTIVE(verb) \
    static void \
    s_parse_##verb (const backend_plan_t *plan, const char *output, \
                    backend_outcome_t *outcome) \
    { \
        s_parse_active (plan, output, outcome, #verb); \
    }

S_PARSE_ACTIVE (start)
S_PARSE_ACTIVE (stop)
S_PARSE_ACTIVE (restart)

static void
s_parse_enable (const backend_plan_t *plan, const char *output,
                backend_outcome_t *outcome)
{
    s_parse_enabled (plan, output, outcome, true);
}

static void
s_parse_disable (const backend_plan_t *plan, const char *output,
                 backend_outcome_t *outcome)
{
    s_parse_enabled (plan, output, outcome, false);
}

#define S_CHECK(verb, query) \
    static int \
    s_check_##verb (backend_plan_t *plan, char *err, size_t err_len) \
    { \
        plan->parse = s_parse_##verb; \
        return s_plan (plan, query, err, err_len); \
    }

S_CHECK (start, "is-active")
S_CHECK (stop, "is-active")
S_CHECK (restart, "is-active")
S_CHECK (enable, "is-enabled")
S_CHECK (disable, "is-enabled")

static const backend_param_t s_unit_params [] = {
    { .name = "unit", .type = BACKEND_TYPE_STRING, .required = true,
      .pattern = S_UNIT_PATTERN,
      .help = "a unit name, e.g. nginx or nginx.service" },
};
#define S_UNIT s_unit_params, \
    sizeof (s_unit_params) / sizeof (s_unit_params [0])

static const backend_action_t s_actions [] = {
    { "start", true, "start a unit", S_UNIT, s_plan_start,
      .idempotent = true, .check = s_check_start },
    { "stop", true, "stop a unit", S_UNIT, s_plan_stop,
      .idempotent = true, .check = s_check_stop },
    { "restart", true, "restart a unit", S_UNIT, s_plan_restart,
      .idempotent = false, .check = s_check_restart },
    { "enable", true, "enable a unit at boot", S_UNIT, s_plan_enable,
      .idempotent = true, .check = s_check_enable },
    { "disable", true, "disable a unit at boot", S_UNIT, s_plan_disable,
      .idempotent = true, .check = s_check_disable },
    { "status", false, "whether a unit is running", S_UNIT, s_plan_status,
      .idempotent = false },
};

const backend_ops_t backend_systemd_ops = {
    "systemd", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.1"
};
