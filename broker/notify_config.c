/*  =========================================================================
    notify_config - the `notify:` part of gridbroker's configuration
    (see notify.h): broker-wide webhooks, the allow-list of job-level
    webhooks, the secret, the timings; and the allow-list check at submit
    =========================================================================
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/conf.h"
#include "notify.h"

//  ---------------------------------------------------------------------
//  Configuration

void
notify_config_defaults (notify_config_t *config)
{
    memset (config, 0, sizeof *config);
    config->timeout_ms = 10000;
    config->retry_base_ms = 1000;
    config->retry_cap_ms = 300000;
    config->retry_for_ms = (int64_t) 24 * 3600 * 1000;
    config->retention_ms = (int64_t) 7 * 24 * 3600 * 1000;
    config->workers = 2;
}

void
notify_config_clear (notify_config_t *config)
{
    for (size_t i = 0; i < config->target_count; i++)
        free (config->targets [i].url);
    free (config->targets);
    for (size_t i = 0; i < config->allow_count; i++)
        free (config->allow [i]);
    free (config->allow);
    if (config->secret)
        memset (config->secret, 0, strlen (config->secret));
    free (config->secret);
    free (config->public_url);
    config->targets = NULL;
    config->allow = NULL;
    config->secret = config->public_url = NULL;
    config->target_count = config->allow_count = 0;
}

int
notify_config_copy (notify_config_t *dest, const notify_config_t *src)
{
    *dest = *src;
    dest->targets = NULL;
    dest->allow = NULL;
    dest->target_count = dest->allow_count = 0;
    dest->secret = src->secret ? strdup (src->secret) : NULL;
    dest->public_url = src->public_url ? strdup (src->public_url) : NULL;
    if (src->target_count) {
        dest->targets = (job_notify_t *) calloc (src->target_count,
                                                 sizeof (job_notify_t));
        if (!dest->targets)
            return -1;
        dest->target_count = src->target_count;
        for (size_t i = 0; i < src->target_count; i++) {
            dest->targets [i].on = src->targets [i].on;
            dest->targets [i].url = strdup (src->targets [i].url);
        }
    }
    if (src->allow_count) {
        dest->allow = (char **) calloc (src->allow_count, sizeof (char *));
        if (!dest->allow)
            return -1;
        dest->allow_count = src->allow_count;
        for (size_t i = 0; i < src->allow_count; i++)
            dest->allow [i] = strdup (src->allow [i]);
    }
    return 0;
}

//  The secret file: its first line, without the line end.
static int
s_read_secret_file (const char *path, char **secret_p, char *why,
                    size_t why_len)
{
    FILE *file = fopen (path, "r");
    if (!file) {
        snprintf (why, why_len, "notify.secret_file: cannot read %s: %s", path,
                  strerror (errno));
        return -1;
    }
    char line [NOTIFY_SECRET_MAX + 2] = "";
    bool read = fgets (line, sizeof line, file) != NULL;
    fclose (file);
    line [strcspn (line, "\r\n")] = '\0';
    if (!read || !*line || strlen (line) > NOTIFY_SECRET_MAX) {
        snprintf (why, why_len, "notify.secret_file: %s must hold the secret "
                  "(1 to %d bytes) on its first line", path, NOTIFY_SECRET_MAX);
        memset (line, 0, sizeof line);
        return -1;
    }
    free (*secret_p);
    *secret_p = strdup (line);
    memset (line, 0, sizeof line);
    return 0;
}

//  targets: [{url, ?on}, ...]
static int
s_read_targets (notify_config_t *config, const pv_t *targets, char *why,
                size_t why_len)
{
    if (pv_type (targets) != PV_ARRAY || pv_size (targets) > NOTIFY_MAX_TARGETS) {
        snprintf (why, why_len, "notify.targets: expected a list of at most "
                  "%d webhooks ({url, on})", NOTIFY_MAX_TARGETS);
        return -1;
    }
    size_t count = pv_size (targets);
    if (count == 0)
        return 0;
    config->targets = (job_notify_t *) calloc (count, sizeof (job_notify_t));
    if (!config->targets) {
        snprintf (why, why_len, "notify.targets: out of memory");
        return -1;
    }
    config->target_count = count;
    static const char *known [] = {"url", "on", NULL};
    for (size_t i = 0; i < count; i++) {
        const pv_t *entry = pv_array_at (targets, i);
        job_notify_t *target = &config->targets [i];
        target->on = JOB_NOTIFY_ALL;
        char reason [256];
        if (pv_type (entry) != PV_MAP) {
            snprintf (why, why_len, "notify.targets[%zu]: expected a map "
                      "(url, on)", i);
            return -1;
        }
        if (conf_check_keys (entry, known, reason, sizeof reason) != 0) {
            snprintf (why, why_len, "notify.targets[%zu]: %s", i, reason);
            return -1;
        }
        target->url = pv_strdup (pv_map_get (entry, "url"));
        if (!target->url) {
            snprintf (why, why_len, "notify.targets[%zu].url: required (a "
                      "string)", i);
            return -1;
        }
        if (job_notify_url_check (target->url, reason, sizeof reason) != 0) {
            snprintf (why, why_len, "notify.targets[%zu].url: %s", i, reason);
            return -1;
        }
        const pv_t *on = pv_map_get (entry, "on");
        if (on && job_notify_on_read (on, &target->on, reason, sizeof reason)) {
            snprintf (why, why_len, "notify.targets[%zu].on: %s", i, reason);
            return -1;
        }
    }
    return 0;
}

//  allow: [prefix, ...], each an http(s) URL prefix with a host and a
//  path (at least the "/" after the host), so "https://a.example" cannot
//  allow "https://a.example.evil".
static int
s_read_allow (notify_config_t *config, const pv_t *allow, char *why,
              size_t why_len)
{
    if (pv_type (allow) != PV_ARRAY || pv_size (allow) > NOTIFY_MAX_ALLOW) {
        snprintf (why, why_len, "notify.allow: expected a list of at most %d "
                  "URL prefixes", NOTIFY_MAX_ALLOW);
        return -1;
    }
    size_t count = pv_size (allow);
    if (count == 0)
        return 0;
    config->allow = (char **) calloc (count, sizeof (char *));
    if (!config->allow) {
        snprintf (why, why_len, "notify.allow: out of memory");
        return -1;
    }
    config->allow_count = count;
    for (size_t i = 0; i < count; i++) {
        char *prefix = pv_strdup (pv_array_at (allow, i));
        config->allow [i] = prefix;
        char reason [256];
        const char *host = !prefix ? NULL
                           : strncmp (prefix, "https://", 8) == 0 ? prefix + 8
                           : strncmp (prefix, "http://", 7) == 0 ? prefix + 7
                                                                 : NULL;
        if (!prefix || job_notify_url_check (prefix, reason, sizeof reason)
            || !host || !strchr (host, '/')) {
            snprintf (why, why_len, "notify.allow[%zu]: expected a URL prefix "
                      "with its host and path, like https://hooks.example.com/",
                      i);
            return -1;
        }
    }
    return 0;
}

int
notify_config_load (notify_config_t *config, const pv_t *root, char *why,
                    size_t why_len)
{
    static const char *known [] = {
        "targets", "allow", "secret", "secret_file", "public_url", "timeout",
        "retry_base", "retry_cap", "retry_for", "retention", "workers", NULL};
    const pv_t *notify = pv_map_get (root, "notify");
    if (!notify)
        return 0;
    char reason [400];
    if (pv_type (notify) != PV_MAP) {
        snprintf (why, why_len, "notify: expected a mapping (targets, allow, "
                  "secret_file, retry_for, ...)");
        return -1;
    }
    notify_config_clear (config);
    if (conf_check_keys (notify, known, reason, sizeof reason) != 0) {
        snprintf (why, why_len, "notify: %s", reason);
        return -1;
    }
    const pv_t *targets = pv_map_get (notify, "targets");
    if (targets && s_read_targets (config, targets, why, why_len) != 0)
        return -1;
    const pv_t *allow = pv_map_get (notify, "allow");
    if (allow && s_read_allow (config, allow, why, why_len) != 0)
        return -1;
    int rc = 0;
    const char *durations [] = {"timeout", "retry_base", "retry_cap",
                                "retry_for", "retention"};
    int64_t *fields [] = {&config->timeout_ms, &config->retry_base_ms,
                          &config->retry_cap_ms, &config->retry_for_ms,
                          &config->retention_ms};
    for (size_t i = 0; rc == 0 && i < 5; i++) {
        rc = conf_get_duration (notify, durations [i], fields [i], reason,
                                sizeof reason);
        if (rc == 0 && (*fields [i] < 0 || (i < 3 && *fields [i] < 1))) {
            snprintf (reason, sizeof reason, "%s: a duration of at least 1ms",
                      durations [i]);
            rc = -1;
        }
    }
    if (rc == 0)
        rc = conf_get_int (notify, "workers", &config->workers, reason,
                           sizeof reason);
    if (rc == 0 && (config->workers < 1 || config->workers > NOTIFY_MAX_WORKERS)) {
        snprintf (reason, sizeof reason, "workers: 1 to %d",
                  NOTIFY_MAX_WORKERS);
        rc = -1;
    }
    if (rc == 0)
        rc = conf_get_str (notify, "public_url", &config->public_url, reason,
                           sizeof reason);
    if (rc == 0 && config->public_url
        && job_notify_url_check (config->public_url, reason, sizeof reason))
        rc = -1;
    if (rc == 0)
        rc = conf_get_str (notify, "secret", &config->secret, reason,
                           sizeof reason);
    if (rc == 0 && config->secret
        && (!*config->secret || strlen (config->secret) > NOTIFY_SECRET_MAX)) {
        snprintf (reason, sizeof reason, "secret: 1 to %d bytes",
                  NOTIFY_SECRET_MAX);
        rc = -1;
    }
    if (rc != 0) {
        snprintf (why, why_len, "notify.%s", reason);
        return -1;
    }
    const pv_t *file = pv_map_get (notify, "secret_file");
    if (file) {
        char *path = pv_strdup (file);
        if (!path) {
            snprintf (why, why_len, "notify.secret_file: expected a path");
            return -1;
        }
        rc = s_read_secret_file (path, &config->secret, why, why_len);
        free (path);
    }
    return rc;
}

int
notify_spec_check (const notify_config_t *config, const job_spec_t *spec,
                   char *why, size_t why_len)
{
    for (size_t i = 0; i < spec->notify_count; i++) {
        const char *url = spec->notify [i].url;
        bool allowed = false;
        for (size_t at = 0; at < config->allow_count && !allowed; at++)
            allowed = strncmp (url, config->allow [at],
                               strlen (config->allow [at])) == 0;
        if (!allowed) {
            char shown [256];
            notify_url_show (url, shown, sizeof shown);
            if (config->allow_count == 0)
                snprintf (why, why_len, "notify[%zu].url: this broker takes "
                          "no job-level webhooks (its notify.allow lists no "
                          "URL prefix)", i);
            else
                snprintf (why, why_len, "notify[%zu].url: %s is not under a "
                          "prefix this broker allows (notify.allow)", i, shown);
            return -1;
        }
    }
    return 0;
}
