/*  =========================================================================
    facts - the facts a gridagent reports about its host (see facts.h)
    =========================================================================
*/
#include "facts.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../backends/hostinfo.h"
#include "../proto/log.h"
#include "../proto/names.h"

#define S_FACT_FILE_MAX 4096     //  Bytes of a facts_dir file read at most

static void
s_why (char *why, size_t why_len, const char *format, ...)
{
    if (!why || why_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (why, why_len, format, args);
    va_end (args);
}

//  Sets NAME to VALUE in FACTS (replacing an earlier value). Returns 0,
//  1 when FACTS is full (the fact is left out), -1 when out of memory.
static int
s_set (agent_facts_t *facts, const char *name, const char *value)
{
    for (size_t index = 0; index < facts->count; index++)
        if (strcmp (facts->facts [index].key, name) == 0) {
            char *copy = strdup (value);
            if (!copy)
                return -1;
            free (facts->facts [index].value);
            facts->facts [index].value = copy;
            return 0;
        }
    if (facts->count >= FACT_MAX_COUNT)
        return 1;
    proto_kv_t *grown = (proto_kv_t *) realloc (
        facts->facts, (facts->count + 1) * sizeof (proto_kv_t));
    if (!grown)
        return -1;
    facts->facts = grown;
    proto_kv_t *fact = &grown [facts->count];
    memset (fact, 0, sizeof *fact);
    fact->key = strdup (name);
    fact->value = strdup (value);
    facts->count++;
    return fact->key && fact->value ? 0 : -1;
}

//  Sets a built-in fact when VALUE is one (an empty or odd reading of the
//  host is left out rather than reported).
static int
s_set_read (agent_facts_t *facts, const char *name, const char *value)
{
    if (!fact_value_valid (value))
        return 0;
    return s_set (facts, name, value) < 0 ? -1 : 0;
}

static int
s_set_int (agent_facts_t *facts, const char *name, long long value)
{
    char text [32];
    snprintf (text, sizeof text, "%lld", value);
    return s_set_read (facts, name, text);
}

//  The host's fully qualified name: the host name when it holds a dot,
//  else its canonical name from the resolver (/etc/hosts first, as NSS
//  says), else the host name.
static void
s_fqdn (const char *hostname, char *buf, size_t buf_len)
{
    snprintf (buf, buf_len, "%s", hostname);
    if (strchr (hostname, '.'))
        return;
    struct addrinfo hints, *found = NULL;
    memset (&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = AI_CANONNAME;
    if (getaddrinfo (hostname, NULL, &hints, &found) == 0 && found) {
        if (found->ai_canonname && *found->ai_canonname)
            snprintf (buf, buf_len, "%s", found->ai_canonname);
        freeaddrinfo (found);
    }
}

static int
s_builtin (agent_facts_t *facts, const char *root)
{
    char text [512];
    int rc = 0;
    if (hostinfo_os_release (root, "ID", text, sizeof text) == 0)
        rc |= s_set_read (facts, "os", text);
    if (hostinfo_os_release (root, "VERSION_ID", text, sizeof text) == 0)
        rc |= s_set_read (facts, "os_version", text);
    hostinfo_os_family (root, text, sizeof text);
    rc |= s_set_read (facts, "os_family", text);
    struct utsname names;
    if (uname (&names) == 0) {
        rc |= s_set_read (facts, "arch", names.machine);
        rc |= s_set_read (facts, "kernel", names.release);
        if (!facts->count || !agent_facts_get (facts, "os")) {
            //  No os-release: the kernel's name stands for the os
            snprintf (text, sizeof text, "%s", names.sysname);
            for (char *p = text; *p; p++)
                *p = (char) tolower ((unsigned char) *p);
            rc |= s_set_read (facts, "os", text);
        }
    }
    long cpus = sysconf (_SC_NPROCESSORS_ONLN);
    if (cpus > 0)
        rc |= s_set_int (facts, "cpus", cpus);
    long long total_kib = 0, available_kib = 0;
    if (hostinfo_meminfo (root, &total_kib, &available_kib) == 0)
        rc |= s_set_int (facts, "mem_mb", total_kib / 1024);
    rc |= s_set_read (facts, "virtual", hostinfo_virtual (root));
    char hostname [HOST_NAME_MAX + 1];
    if (gethostname (hostname, sizeof hostname) == 0) {
        hostname [HOST_NAME_MAX] = 0;
        rc |= s_set_read (facts, "hostname", hostname);
        s_fqdn (hostname, text, sizeof text);
        rc |= s_set_read (facts, "fqdn", text);
    }
    int64_t boot = hostinfo_boot_time (root);
    if (boot > 0)
        rc |= s_set_int (facts, "boot_time", (long long) boot);
    rc |= s_set_read (facts, "agent_version", GRID_VERSION);
    return rc ? -1 : 0;
}

//  Reads the fact of file NAME in DIR into VALUE (its first line,
//  trimmed). Returns 0, or -1 with WHY.
static int
s_read_fact_file (const char *dir, const char *name, char *value,
                  size_t value_len, char *why, size_t why_len)
{
    if (!name_valid (name)) {
        s_why (why, why_len, "%s/%s: not a valid fact name (letters, "
               "digits, '_' and '-', 1 to %d)", dir, name, NAME_MAX_LEN);
        return -1;
    }
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    struct stat info;
    if (stat (path, &info) != 0 || !S_ISREG (info.st_mode)) {
        s_why (why, why_len, "%s: not a regular file", path);
        return -1;
    }
    FILE *file = fopen (path, "r");
    if (!file) {
        s_why (why, why_len, "%s: cannot be read", path);
        return -1;
    }
    char text [S_FACT_FILE_MAX + 1];
    size_t size = fread (text, 1, S_FACT_FILE_MAX, file);
    fclose (file);
    text [size] = 0;
    text [strcspn (text, "\n")] = 0;
    char *start = text;
    while (*start == ' ' || *start == '\t')
        start++;
    size_t len = strlen (start);
    while (len > 0 && (start [len - 1] == ' ' || start [len - 1] == '\t'
                       || start [len - 1] == '\r'))
        start [--len] = 0;
    if (!fact_value_valid (start) || len >= value_len) {
        s_why (why, why_len, "%s: the value must be 1 to %d bytes without "
               "control bytes", path, FACT_MAX_VALUE_LEN);
        return -1;
    }
    memcpy (value, start, len + 1);
    return 0;
}

static int
s_compare_facts (const void *a, const void *b)
{
    return strcmp (((const proto_kv_t *) a)->key, ((const proto_kv_t *) b)->key);
}

int
agent_facts_collect (const agent_config_t *config, const char *root,
                     agent_facts_t *facts, char *why, size_t why_len)
{
    agent_facts_clear (facts);
    if (why && why_len)
        why [0] = 0;
    if (s_builtin (facts, root) != 0)
        return -1;
    for (size_t index = 0; index < config->fact_count; index++)
        if (s_set (facts, config->facts [index].key,
                   config->facts [index].value) < 0)
            return -1;
    int skipped = 0;
    DIR *dir = config->facts_dir ? opendir (config->facts_dir) : NULL;
    if (config->facts_dir && !dir) {
        s_why (why, why_len, "facts_dir %s cannot be read", config->facts_dir);
        skipped++;
    }
    struct dirent *entry;
    while (dir && (entry = readdir (dir)) != NULL) {
        if (entry->d_name [0] == '.')
            continue;           //  ., .. and hidden files (editors' too)
        char value [FACT_MAX_VALUE_LEN + 1];
        char reason [PATH_MAX + 128];
        int rc = s_read_fact_file (config->facts_dir, entry->d_name, value,
                                   sizeof value, reason, sizeof reason);
        if (rc == 0) {
            rc = s_set (facts, entry->d_name, value);
            if (rc < 0) {
                closedir (dir);
                return -1;
            }
            if (rc > 0)
                snprintf (reason, sizeof reason, "%s/%s: more than %d facts",
                          config->facts_dir, entry->d_name, FACT_MAX_COUNT);
        }
        if (rc != 0) {
            if (skipped++ == 0)
                s_why (why, why_len, "%s", reason);
        }
    }
    if (dir)
        closedir (dir);
    if (facts->count > 1)
        qsort (facts->facts, facts->count, sizeof (proto_kv_t),
               s_compare_facts);
    return skipped;
}

const char *
agent_facts_get (const agent_facts_t *facts, const char *name)
{
    for (size_t index = 0; index < facts->count; index++)
        if (strcmp (facts->facts [index].key, name) == 0)
            return facts->facts [index].value;
    return NULL;
}

bool
agent_facts_equal (const agent_facts_t *a, const agent_facts_t *b)
{
    if (a->count != b->count)
        return false;
    for (size_t index = 0; index < a->count; index++)
        if (strcmp (a->facts [index].key, b->facts [index].key) != 0
            || strcmp (a->facts [index].value, b->facts [index].value) != 0)
            return false;
    return true;
}

void
agent_facts_clear (agent_facts_t *facts)
{
    for (size_t index = 0; facts->facts && index < facts->count; index++) {
        free (facts->facts [index].key);
        free (facts->facts [index].value);
    }
    free (facts->facts);
    memset (facts, 0, sizeof *facts);
}

bool
agent_facts_refresh (const agent_config_t *config, agent_facts_t *facts,
                     char *last_why, size_t last_len)
{
    agent_facts_t fresh = {0};
    char why [512];
    int skipped = agent_facts_collect (config, "", &fresh, why, sizeof why);
    if (skipped < 0) {
        log_warn ("facts: out of memory: the facts stay as they were");
        agent_facts_clear (&fresh);
        return false;
    }
    //  Each reason once, not at every reading
    if (skipped > 0 && strcmp (why, last_why) != 0)
        log_warn ("facts: %d skipped: %s", skipped, why);
    snprintf (last_why, last_len, "%s", skipped ? why : "");
    if (agent_facts_equal (&fresh, facts)) {
        agent_facts_clear (&fresh);
        return false;
    }
    agent_facts_clear (facts);
    *facts = fresh;
    return true;
}
