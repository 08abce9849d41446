/*  =========================================================================
    apt backend - Debian packages

    install, remove, update, upgrade through apt-get, always non-interactive
    (-y, DEBIAN_FRONTEND=noninteractive) and always with "--" before a
    package name, so a name can never be read as an option. Package names
    follow Debian policy: lower case letters, digits and + . - , starting
    with a letter or digit.
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

static const backend_param_t s_package_params [] = {
    { .name = "package", .type = BACKEND_TYPE_STRING, .required = true,
      .pattern = S_PACKAGE_PATTERN, .help = "a Debian package name" },
};
#define S_PACKAGE s_package_params, \
    sizeof (s_package_params) / sizeof (s_package_params [0])

static const backend_action_t s_actions [] = {
    { "install", true, "install a package", S_PACKAGE, s_plan_install,
      .idempotent = true },
    { "remove", true, "remove a package", S_PACKAGE, s_plan_remove,
      .idempotent = true },
    { "update", true, "refresh the package lists", NULL, 0, s_plan_update,
      .idempotent = true },
    { "upgrade", true, "upgrade every installed package", NULL, 0,
      s_plan_upgrade, false },
};

const backend_ops_t backend_apt_ops = {
    "apt", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.0"
};
