/*  =========================================================================
    network backend - DNS resolver settings

    dns_get reads the nameservers and search domains of resolv.conf (the
    agent's resolv_conf setting, /etc/resolv.conf by default). dns_update
    rewrites them in-process: it keeps every other line (options,
    comments), writes a temporary file next to the real one (a symlinked
    resolv.conf is followed, not replaced), syncs it and renames it over the
    original, so a reader never sees half a file. Its check (dry run)
    reads the file, makes the text dns_update would write and compares:
    current and desired nameservers and search domains, and the diff.
    =========================================================================
*/
#include "backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MAX_SERVERS 3         //  glibc reads at most three (MAXNS)
#define S_MAX_SEARCH 6          //  A sane bound on search domains
#define S_MAX_FILE (64 * 1024)  //  Largest resolv.conf we rewrite

//  Appends TEXT to the comma list *LIST (grown with realloc).
static int
s_list_add (char **list, const char *text, size_t len)
{
    size_t old = *list ? strlen (*list) : 0;
    char *grown = (char *) realloc (*list, old + len + 2);
    if (!grown)
        return -1;
    if (old)
        grown [old++] = ',';
    memcpy (grown + old, text, len);
    grown [old + len] = 0;
    *list = grown;
    return 0;
}

//  True when LINE starts with KEYWORD followed by a blank.
static bool
s_keyword (const char *line, const char *keyword)
{
    line += strspn (line, " \t");
    size_t len = strlen (keyword);
    return strncmp (line, keyword, len) == 0
        && (line [len] == ' ' || line [len] == '\t');
}

static void
s_dns_get (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    const char *path = plan->context && plan->context->resolv_conf
                     ? plan->context->resolv_conf : BACKEND_RESOLV_CONF;
    FILE *file = fopen (path, "r");
    if (!file) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "%s: %s", path, strerror (errno));
        return;
    }
    char *servers = NULL, *search = NULL, *domain = NULL;
    char line [1024];
    bool ok = true;
    while (ok && fgets (line, sizeof (line), file)) {
        bool is_search = s_keyword (line, "search");
        bool is_domain = s_keyword (line, "domain");
        bool is_server = s_keyword (line, "nameserver");
        if (!is_search && !is_domain && !is_server)
            continue;
        char **list = is_server ? &servers : is_search ? &search : &domain;
        if (!is_server) {
            //  As the resolver reads it: the last search/domain line wins
            free (*list);
            *list = NULL;
        }
        char *cursor = line + strspn (line, " \t");
        cursor += strcspn (cursor, " \t");
        //  nameserver and domain take one word, search every word
        while (ok) {
            cursor += strspn (cursor, " \t\r\n");
            size_t len = strcspn (cursor, " \t\r\n#;");
            if (len == 0)
                break;
            ok = s_list_add (list, cursor, len) == 0;
            cursor += len;
            if (!is_search)
                break;
        }
    }
    fclose (file);
    if (!ok) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "out of memory");
    }
    else {
        //  The resolver uses search when present, else domain
        const char *effective = search ? search : domain ? domain : "";
        backend_outcome_output (outcome, "nameservers: %s\nsearch: %s\n",
                                servers ? servers : "", effective);
        backend_outcome_data (outcome, "nameservers", servers ? servers : "");
        backend_outcome_data (outcome, "search", effective);
        outcome->ok = true;
    }
    free (servers);
    free (search);
    free (domain);
}

//  Reads the whole of PATH into a fresh string; an absent file is empty.
//  *MODE gets its permission bits (0644 when absent). Returns NULL with
//  errno set on failure.
static char *
s_read_file (const char *path, mode_t *mode)
{
    *mode = 0644;
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? strdup ("") : NULL;
    struct stat info;
    if (fstat (fd, &info) == 0)
        *mode = info.st_mode & 07777;
    char *text = (char *) malloc (S_MAX_FILE + 1);
    size_t used = 0;
    while (text && used < S_MAX_FILE) {
        ssize_t got = read (fd, text + used, S_MAX_FILE - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int saved = errno;
            free (text);
            text = NULL;
            errno = saved;
        }
        if (got <= 0)
            break;
        used += (size_t) got;
    }
    close (fd);
    if (text)
        text [used] = 0;
    return text;
}

static int
s_write_all (int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t wrote = write (fd, text, len);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote < 0)
            return -1;
        text += wrote;
        len -= (size_t) wrote;
    }
    return 0;
}

//  Writes TEXT to PATH atomically: a temporary file in the same directory,
//  fsync, rename, fsync of the directory. Returns 0 or -1 with errno.
static int
s_replace_file (const char *path, const char *text, mode_t mode)
{
    char *dir_copy = strdup (path);
    char *base_copy = strdup (path);
    char *temp = NULL;
    int rc = -1;
    //  mkostemp replaces the last six characters, which must be 'X'
    char unique [7];
    memset (unique, 'X', 6);
    unique [6] = 0;
    if (!dir_copy || !base_copy
    ||  asprintf (&temp, "%s/.%s.%s", dirname (dir_copy),
                  basename (base_copy), unique) < 0) {
        temp = NULL;
        errno = ENOMEM;
    }
    int fd = temp ? mkostemp (temp, O_CLOEXEC) : -1;
    if (fd >= 0) {
        if (fchmod (fd, mode) == 0 && s_write_all (fd, text, strlen (text)) == 0
        &&  fsync (fd) == 0) {
            rc = close (fd);
            fd = -1;
            if (rc == 0)
                rc = rename (temp, path);
        }
        int saved = errno;
        if (fd >= 0)
            close (fd);
        if (rc)
            unlink (temp);
        errno = saved;
    }
    if (rc == 0) {
        strcpy (dir_copy, path);
        int dir_fd = open (dirname (dir_copy), O_RDONLY | O_DIRECTORY
                                                | O_CLOEXEC);
        if (dir_fd >= 0) {
            fsync (dir_fd);
            close (dir_fd);
        }
    }
    free (temp);
    free (dir_copy);
    free (base_copy);
    return rc;
}

//  Splits the comma list TEXT into a fresh array of up to MAX words,
//  checking each with VALID. Returns the count, or -1 with ERR.
static int
s_split (const char *text, char ***words_p, int max,
         bool (*valid) (const char *), const char *what, char *err,
         size_t err_len)
{
    char **words = (char **) calloc ((size_t) max + 1, sizeof (char *));
    int count = 0;
    const char *cursor = text;
    while (words && cursor) {
        const char *comma = strchr (cursor, ',');
        size_t len = comma ? (size_t) (comma - cursor) : strlen (cursor);
        if (count == max) {
            snprintf (err, err_len, "at most %d %s", max, what);
            goto failed;
        }
        words [count] = strndup (cursor, len);
        if (!words [count])
            goto failed;
        if (!valid (words [count++])) {
            snprintf (err, err_len, "'%.*s' is not a valid %s",
                      (int) (len < 64 ? len : 64), cursor, what);
            goto failed;
        }
        cursor = comma ? comma + 1 : NULL;
    }
    if (!words)
        snprintf (err, err_len, "out of memory");
    *words_p = words;
    return words ? count : -1;
failed:
    for (int index = 0; index < count; index++)
        free (words [index]);
    free (words);
    *words_p = NULL;
    return -1;
}

static bool
s_ip_valid (const char *text)
{
    unsigned char buf [sizeof (struct in6_addr)];
    return inet_pton (AF_INET, text, buf) == 1
        || inet_pton (AF_INET6, text, buf) == 1;
}

static bool
s_domain_valid (const char *text)
{
    size_t len = strlen (text);
    if (len == 0 || len > 253 || text [0] == '.' || text [0] == '-'
    ||  text [len - 1] == '.' || text [len - 1] == '-' || strstr (text, ".."))
        return false;
    for (size_t index = 0; index < len; index++) {
        char c = text [index];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        ||    (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static void
s_free_words (char **words)
{
    for (size_t index = 0; words && words [index]; index++)
        free (words [index]);
    free (words);
}

//  The resolv.conf that dns_update would write: PLAN's nameservers (and
//  search domains), then every other line of the file now. *PATH_P gets
//  the file written (a symlink followed), *OLD_P its text now (both
//  fresh). Returns the new text, or NULL with OUTCOME's error set.
static char *
s_dns_new_text (const backend_plan_t *plan, backend_outcome_t *outcome,
                char **path_p, char **old_p)
{
    const char *configured = plan->context && plan->context->resolv_conf
                           ? plan->context->resolv_conf : BACKEND_RESOLV_CONF;
    char err [256] = "";
    char **servers = NULL, **search = NULL;
    const char *servers_text = backend_plan_param (plan, "servers");
    const char *search_text = backend_plan_param (plan, "search");
    char *text = NULL;
    *path_p = NULL;
    *old_p = NULL;
    //  The plan checked both lists already; only memory can fail here
    if (s_split (servers_text, &servers, S_MAX_SERVERS, s_ip_valid,
                 "nameserver address", err, sizeof (err)) < 0
    || (search_text
    &&  s_split (search_text, &search, S_MAX_SEARCH, s_domain_valid,
                 "search domain", err, sizeof (err)) < 0)) {
        backend_outcome_error (outcome, "%s", err);
        goto done;
    }
    //  Follow a symlink to the file it names
    char real [PATH_MAX];
    const char *path = realpath (configured, real) ? real : configured;
    mode_t mode = 0644;
    char *old = s_read_file (path, &mode);
    if (!old) {
        backend_outcome_error (outcome, "%s: %s", path, strerror (errno));
        goto done;
    }
    size_t size = strlen (old) + 1024;
    text = (char *) calloc (1, size);
    *path_p = strdup (path);
    if (!text || !*path_p) {
        free (old);
        free (text);
        text = NULL;
        free (*path_p);
        *path_p = NULL;
        backend_outcome_error (outcome, "out of memory");
        goto done;
    }
    size_t used = 0;
    for (size_t index = 0; servers [index]; index++)
        used += (size_t) snprintf (text + used, size - used,
                                   "nameserver %s\n", servers [index]);
    if (search) {
        used += (size_t) snprintf (text + used, size - used, "search");
        for (size_t index = 0; search [index]; index++)
            used += (size_t) snprintf (text + used, size - used, " %s",
                                       search [index]);
        used += (size_t) snprintf (text + used, size - used, "\n");
    }
    //  Keep every other line; drop old nameservers, and the old search or
    //  domain line only when a new search list replaces it
    char *line = old;
    while (line && *line) {
        char *next = strchr (line, '\n');
        size_t len = next ? (size_t) (next - line) + 1 : strlen (line);
        bool drop = s_keyword (line, "nameserver")
                 || (search && (s_keyword (line, "search")
                             || s_keyword (line, "domain")));
        if (!drop && used + len + 2 < size) {
            memcpy (text + used, line, len);
            used += len;
            if (!next)
                text [used++] = '\n';
            text [used] = 0;
        }
        line = next ? next + 1 : NULL;
    }
    *old_p = old;
done:
    s_free_words (servers);
    s_free_words (search);
    return text;
}

static void
s_dns_update (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    const char *servers_text = backend_plan_param (plan, "servers");
    const char *search_text = backend_plan_param (plan, "search");
    outcome->exit_code = 1;
    char *path = NULL, *old = NULL;
    char *text = s_dns_new_text (plan, outcome, &path, &old);
    if (!text)
        return;
    struct stat info;
    mode_t mode = stat (path, &info) == 0 ? info.st_mode & 07777 : 0644;
    if (s_replace_file (path, text, mode)) {
        backend_outcome_error (outcome, "%s: %s", path, strerror (errno));
        goto done;
    }
    outcome->ok = true;
    outcome->exit_code = 0;
    backend_outcome_output (outcome, "%s: nameservers %s%s%s\n", path,
                            servers_text, search_text ? ", search " : "",
                            search_text ? search_text : "");
    backend_outcome_data (outcome, "nameservers", servers_text);
    if (search_text)
        backend_outcome_data (outcome, "search", search_text);
done:
    free (text);
    free (old);
    free (path);
}

//  The check of dns_update: the nameservers and search domains now, those
//  asked for, and the diff of the file it would write
static void
s_dns_update_check (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    const char *servers_text = backend_plan_param (plan, "servers");
    const char *search_text = backend_plan_param (plan, "search");
    char *path = NULL, *old = NULL;
    char *text = s_dns_new_text (plan, outcome, &path, &old);
    if (!text) {
        outcome->exit_code = 1;
        return;
    }
    //  What the resolver reads now, as dns_get says it
    backend_outcome_t now;
    memset (&now, 0, sizeof now);
    s_dns_get (plan, &now);
    const char *servers_now = "", *search_now = "";
    for (size_t index = 0; index < now.data_count; index++) {
        if (strcmp (now.data [index].key, "nameservers") == 0)
            servers_now = now.data [index].value;
        if (strcmp (now.data [index].key, "search") == 0)
            search_now = now.data [index].value;
    }
    char *current = NULL, *desired = NULL;
    if (asprintf (&current, "nameservers %s; search %s",
                  *servers_now ? servers_now : "(none)",
                  *search_now ? search_now : "(none)") < 0)
        current = NULL;
    if (asprintf (&desired, "nameservers %s; search %s", servers_text,
                  search_text ? search_text
                  : *search_now ? search_now : "(none)") < 0)
        desired = NULL;
    bool differs = strcmp (old, text) != 0;
    backend_check_verdict (outcome, differs, current, desired);
    backend_outcome_data (outcome, "path", path);
    if (backend_check_diff (outcome, path, old, strlen (old), text,
                            strlen (text))) {
        outcome->ok = false;
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "out of memory");
    }
    backend_outcome_clear (&now);
    free (current);
    free (desired);
    free (text);
    free (old);
    free (path);
}

static int
s_plan_dns_get (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_INPROC;
    plan->inproc = s_dns_get;
    return 0;
}

static int
s_plan_dns_update (backend_plan_t *plan, char *err, size_t err_len)
{
    //  Check every address and domain now, so a bad one is refused
    //  before anything runs
    char **words = NULL;
    const char *search = backend_plan_param (plan, "search");
    if (s_split (backend_plan_param (plan, "servers"), &words,
                 S_MAX_SERVERS, s_ip_valid, "nameserver address", err,
                 err_len) < 0)
        return -1;
    s_free_words (words);
    words = NULL;
    if (search
    &&  s_split (search, &words, S_MAX_SEARCH, s_domain_valid,
                 "search domain", err, err_len) < 0)
        return -1;
    s_free_words (words);
    plan->run = BACKEND_RUN_INPROC;
    plan->inproc = s_dns_update;
    return 0;
}

static int
s_check_dns_update (backend_plan_t *plan, char *err, size_t err_len)
{
    //  The same checks of the lists as the action's own plan
    if (s_plan_dns_update (plan, err, err_len))
        return -1;
    plan->inproc = s_dns_update_check;
    return 0;
}

static const backend_param_t s_update_params [] = {
    { .name = "servers", .type = BACKEND_TYPE_STRING, .required = true,
      .pattern = "^[0-9A-Fa-f:.]{2,45}(,[0-9A-Fa-f:.]{2,45}){0,2}$",
      .help = "comma list of up to 3 nameserver IP addresses" },
    { .name = "search", .type = BACKEND_TYPE_STRING,
      .pattern = "^[A-Za-z0-9.-]{1,253}(,[A-Za-z0-9.-]{1,253}){0,5}$",
      .help = "comma list of up to 6 search domains" },
};

static const backend_action_t s_actions [] = {
    { "dns_get", false, "nameservers and search domains in resolv.conf",
      NULL, 0, s_plan_dns_get, .idempotent = false },
    { "dns_update", true, "rewrite the nameservers (and search domains) "
      "of resolv.conf", s_update_params,
      sizeof (s_update_params) / sizeof (s_update_params [0]),
      s_plan_dns_update, .idempotent = true,
      .check = s_check_dns_update },
};

const backend_ops_t backend_network_ops = {
    "network", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.1"
};
