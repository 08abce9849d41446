/*  =========================================================================
    apt backend - Debian packages

    install, remove, update, upgrade through apt-get, always non-interactive
    (-y, DEBIAN_FRONTEND=noninteractive) and always with "--" before a
    package name, so a name can never be read as an option. Package names
    follow Debian policy: lower case letters, digits and + . - , starting
    with a letter or digit.

    Checks (dry runs): install and remove ask dpkg-query for the package's
    status and version ("dpkg-query -W -f=FORMAT -- PACKAGE": exit 1 when
    dpkg knows no such package) and say whether the package is installed
    and at which version; update and upgrade have no check (cannot tell).
    =========================================================================
*/
#include "backend.h"

#include <string.h>
#include <stdio.h>

#define S_PACKAGE_PATTERN "^[a-z0-9][a-z0-9+.-]{0,127}$"
#define S_APT_ENV "DEBIAN_FRONTEND=noninteractive"

//  argv: apt-get VERB -y [-- PACKAGE]
//  apt-get's phases, from its last line: "Get:1 http://... nginx ..." is
//  downloading, "Unpacking nginx (...)" unpacking, "Setting up nginx
//  (...)" configuring; "Reading package lists..." and the like reading.
static bool
s_apt_progress (const backend_plan_t *plan, int64_t elapsed_ms,
                const char *last_line, backend_progress_t *progress)
{
    (void) elapsed_ms;
    static const struct {
        const char *prefix;
        const char *kind;
    } phases [] = {
        {"Get:", "downloading"},      {"Hit:", "reading"},
        {"Ign:", "reading"},          {"Reading ", "reading"},
        {"Building ", "reading"},     {"Unpacking ", "unpacking"},
        {"Preparing to unpack ", "unpacking"},
        {"Selecting previously", "unpacking"},
        {"Setting up ", "configuring"}, {"Processing triggers", "configuring"},
        {"Removing ", "removing"},    {"Calculating upgrade", "reading"},
    };
    const char *package = backend_plan_param (plan,
                                              "package");
    for (size_t index = 0; index < sizeof (phases) / sizeof (phases [0]);
         index++)
        if (strncmp (last_line, phases [index].prefix,
                     strlen (phases [index].prefix)) == 0) {
            snprintf (progress->kind, sizeof (progress->kind), "%s",
                      phases [index].kind);
            char text [PROTO_MAX_PROGRESS + 1];
            snprintf (text, sizeof (text), "%s%s%s", phases [index].kind,
                      package ? " " : "", package ? package : "");
            backend_progress_say (progress, text);
            return true;
        }
    if (!*last_line)
        return false;
    snprintf (progress->kind, sizeof (progress->kind), "output");
    backend_progress_say (progress, last_line);
    return true;
}

static int
s_plan (backend_plan_t *plan, const char *verb, bool with_package,
        char *err, size_t err_len)
{
    plan->env = S_APT_ENV;
    plan->progress = s_apt_progress;
    if (backend_plan_arg (plan, "apt-get")
    ||  backend_plan_arg (plan, verb)
    ||  backend_plan_arg (plan, "-y")
    || (with_package
    && (backend_plan_arg (plan, "--")
    ||  backend_plan_arg (plan, backend_plan_param (plan, "package"))))) {
        snprintf (err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

static int
s_plan_install (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan (plan, "install", true, err, err_len);
}

static int
s_plan_remove (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan (plan, "remove", true, err, err_len);
}

static int
s_plan_update (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan (plan, "update", false, err, err_len);
}

static int
s_plan_upgrade (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan (plan, "upgrade", false, err, err_len);
}

//  dpkg-query's answer: "STATUS<TAB>VERSION" (STATUS as "install ok
//  installed"; exit 1 when dpkg knows no such package). Installed when the
//  status's last word is "installed" (not "config-files", "half-installed"
//  and the like). INSTALL: the check of install, else of remove.
static void
s_parse_check (const backend_plan_t *plan, const char *output,
               backend_outcome_t *outcome, bool install)
{
    const char *package = backend_plan_param (plan, "package");
    bool known = outcome->exit_code == 0;
    if (!known && outcome->exit_code != 1) {
        backend_outcome_error (outcome, "dpkg-query failed (exit code %d)",
                               outcome->exit_code);
        outcome->ok = false;
        return;
    }
    char status [128] = "", version [128] = "";
    if (known) {
        size_t tab = strcspn (output, "\t\n");
        snprintf (status, sizeof status, "%.*s",
                  (int) (tab < sizeof status - 1 ? tab : sizeof status - 1),
                  output);
        if (output [tab] == '\t') {
            const char *rest = output + tab + 1;
            size_t len = strcspn (rest, "\r\n");
            snprintf (version, sizeof version, "%.*s",
                      (int) (len < sizeof version - 1
                                 ? len : sizeof version - 1), rest);
        }
    }
    const char *last = strrchr (status, ' ');
    last = last ? last + 1 : status;
    bool installed = known && strcmp (last, "installed") == 0;
    char current [300];
    if (installed)
        snprintf (current, sizeof current, "%s installed, version %s",
                  package, *version ? version : "?");
    else
        snprintf (current, sizeof current, "%s not installed", package);
    char desired [200];
    snprintf (desired, sizeof desired, "%s %s", package,
              install ? "installed" : "not installed");
    backend_outcome_clear (outcome);
    backend_check_verdict (outcome, installed != install, current, desired);
    backend_outcome_data (outcome, "installed", installed ? "true" : "false");
    if (installed)
        backend_outcome_data (outcome, "version", version);
}

static void
s_parse_check_install (const backend_plan_t *plan, const char *output,
                       backend_outcome_t *outcome)
{
    s_parse_check (plan, output, outcome, true);
}

static void
s_parse_check_remove (const backend_plan_t *plan, const char *output,
                      backend_outcome_t *outcome)
{
    s_parse_check (plan, output, outcome, false);
}

//  argv: dpkg-query -W -f=STATUS<TAB>VERSION<NL> -- PACKAGE
static int
s_plan_check (backend_plan_t *plan, backend_parse_fn *parse, char *err,
              size_t err_len)
{
    plan->parse = parse;
    if (backend_plan_arg (plan, "dpkg-query")
    ||  backend_plan_arg (plan, "-W")
    ||  backend_plan_arg (plan, "-f=${Status}\t${Version}\n")
    ||  backend_plan_arg (plan, "--")
    ||  backend_plan_arg (plan, backend_plan_param (plan, "package"))) {
        snprintf (err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

static int
s_check_install (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan_check (plan, s_parse_check_install, err, err_len);
}

static int
s_check_remove (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan_check (plan, s_parse_check_remove, err, err_len);
}

static const backend_param_t s_package_params [] = {
    { .name = "package", .type = BACKEND_TYPE_STRING, .required = true,
      .pattern = S_PACKAGE_PATTERN, .help = "a Debian package name" },
};
#define S_PACKAGE s_package_params, \
    sizeof (s_package_params) / sizeof (s_package_params [0])

static const backend_action_t s_actions [] = {
    { "install", true, "install a package", S_PACKAGE, s_plan_install,
      .idempotent = true, .check = s_check_install },
    { "remove", true, "remove a package", S_PACKAGE, s_plan_remove,
      .idempotent = true, .check = s_check_remove },
    { "update", true, "refresh the package lists", NULL, 0, s_plan_update,
      .idempotent = true },
    { "upgrade", true, "upgrade every installed package", NULL, 0,
      s_plan_upgrade, .idempotent = false },
};

const backend_ops_t backend_apt_ops = {
    "apt", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.1"
};
