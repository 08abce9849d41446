/*  =========================================================================
    rekey - gridagent's key rotation on disk (see rekey.h)
    =========================================================================
*/
#include "rekey.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../proto/cmdline.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "link.h"

//  The agent's lines (log.h), as agent.c writes them
#define s_log(self, ...) log_write (LOG_LEVEL_INFO, NULL, __VA_ARGS__)

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

int
rekey_paths (const char *key_file, rekey_paths_t *paths)
{
    size_t len = strlen (key_file);
    size_t suffix = strlen ("_secret");
    if (len > suffix && strcmp (key_file + len - suffix, "_secret") == 0)
        len -= suffix;
    if (len + 16 > sizeof paths->pub)
        return -1;
    char *names [4] = {paths->pub, paths->secret, paths->next_pub,
                       paths->next_secret};
    static const char *const suffixes [4] = {"", "_secret", ".next",
                                             ".next_secret"};
    for (int index = 0; index < 4; index++) {
        memcpy (names [index], key_file, len);
        strcpy (names [index] + len, suffixes [index]);
    }
    return 0;
}

//  Flushes PATH (a file just written, or a directory after a rename).
static void
s_sync (const char *path)
{
    int fd = open (path, O_RDONLY);
    if (fd >= 0) {
        fsync (fd);
        close (fd);
    }
}

//  The directory of PATH into BUF.
static const char *
s_dir (const char *path, char *buf, size_t buf_len)
{
    const char *slash = strrchr (path, '/');
    if (!slash)
        snprintf (buf, buf_len, ".");
    else
        snprintf (buf, buf_len, "%.*s", (int) (slash == path ? 1
                                                 : slash - path), path);
    return buf;
}

int
rekey_write_next (const char *key_file, char *public_txt, char *err,
                  size_t err_len)
{
    rekey_paths_t paths;
    if (rekey_paths (key_file, &paths) != 0) {
        s_err (err, err_len, "%s: path too long", key_file);
        return -1;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        s_err (err, err_len, "cannot make a key pair");
        return -1;
    }
    char pub_tmp [1100], secret_tmp [1100];
    snprintf (pub_tmp, sizeof pub_tmp, "%s.tmp", paths.next_pub);
    snprintf (secret_tmp, sizeof secret_tmp, "%s.tmp", paths.next_secret);
    unlink (pub_tmp);
    unlink (secret_tmp);
    //  The secret file never exists with a looser mode, not even briefly
    mode_t old_mask = umask (077);
    int rc = zcert_save_secret (cert, secret_tmp);
    umask (old_mask);
    const char *failed = secret_tmp;
    if (rc == 0)
        rc = chmod (secret_tmp, 0600);
    if (rc == 0) {
        failed = pub_tmp;
        rc = zcert_save_public (cert, pub_tmp);
        if (rc == 0)
            rc = chmod (pub_tmp, 0644);
    }
    if (rc == 0) {
        s_sync (pub_tmp);
        s_sync (secret_tmp);
        //  The public file first: the secret one says the pair is whole
        failed = paths.next_pub;
        rc = rename (pub_tmp, paths.next_pub);
        if (rc == 0) {
            failed = paths.next_secret;
            rc = rename (secret_tmp, paths.next_secret);
        }
    }
    if (rc != 0) {
        s_err (err, err_len, "cannot write %s: %s", failed, strerror (errno));
        unlink (pub_tmp);
        unlink (secret_tmp);
    }
    else {
        char dir [1024];
        s_sync (s_dir (paths.pub, dir, sizeof dir));
        snprintf (public_txt, KEYS_TEXT_SIZE, "%s", zcert_public_txt (cert));
    }
    zcert_destroy (&cert);
    return rc == 0 ? 0 : -1;
}

zcert_t *
rekey_load_next (const char *key_file, char *err, size_t err_len)
{
    if (err_len)
        *err = 0;
    rekey_paths_t paths;
    if (rekey_paths (key_file, &paths) != 0
        || access (paths.next_secret, F_OK) != 0)
        return NULL;
    char why [1024];
    zcert_t *cert = keys_load_pair (paths.next_secret, why, sizeof why);
    if (!cert)
        s_err (err, err_len, "the next key pair cannot be used: %s", why);
    return cert;
}

int
rekey_commit (const char *key_file, char *err, size_t err_len)
{
    rekey_paths_t paths;
    if (rekey_paths (key_file, &paths) != 0) {
        s_err (err, err_len, "%s: path too long", key_file);
        return -1;
    }
    if (rename (paths.next_secret, paths.secret) != 0) {
        s_err (err, err_len, "cannot rename %s to %s: %s", paths.next_secret,
               paths.secret, strerror (errno));
        return -1;
    }
    if (rename (paths.next_pub, paths.pub) != 0 && errno != ENOENT) {
        s_err (err, err_len, "cannot rename %s to %s: %s", paths.next_pub,
               paths.pub, strerror (errno));
        return -1;
    }
    char dir [1024];
    s_sync (s_dir (paths.pub, dir, sizeof dir));
    return 0;
}

int
rekey_drop (const char *key_file)
{
    rekey_paths_t paths;
    if (rekey_paths (key_file, &paths) != 0)
        return -1;
    int rc = unlink (paths.next_secret);
    unlink (paths.next_pub);
    return rc == 0 || errno == ENOENT ? 0 : -1;
}

//  The public key in the key file PATH (public or secret) into OUT.
static int
s_public_of (const char *path, char *out)
{
    char why [256];
    return access (path, R_OK) == 0
           && keys_read_public (path, out, why, sizeof why) == 0 ? 0 : -1;
}

int
rekey_recover (const char *key_file, char *err, size_t err_len)
{
    rekey_paths_t paths;
    if (rekey_paths (key_file, &paths) != 0
        || access (paths.next_pub, F_OK) != 0
        || access (paths.next_secret, F_OK) == 0)
        return 0;
    char current [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE];
    if (s_public_of (paths.secret, current) == 0
        && s_public_of (paths.next_pub, next) == 0
        && strcmp (current, next) == 0) {
        //  The commit renamed the secret file, not yet the public one
        if (rename (paths.next_pub, paths.pub) != 0) {
            s_err (err, err_len, "cannot rename %s to %s: %s", paths.next_pub,
                   paths.pub, strerror (errno));
            return -1;
        }
        return 1;
    }
    //  Its secret file was never written: the pair was not whole
    if (unlink (paths.next_pub) != 0) {
        s_err (err, err_len, "cannot remove %s: %s", paths.next_pub,
               strerror (errno));
        return -1;
    }
    return 1;
}

int64_t
rekey_key_age_ms (const char *key_file)
{
    rekey_paths_t paths;
    struct stat info;
    if (rekey_paths (key_file, &paths) != 0
        || stat (paths.secret, &info) != 0)
        return -1;
    int64_t written_ms = (int64_t) info.st_mtim.tv_sec * 1000
                         + info.st_mtim.tv_nsec / 1000000;
    int64_t now_ms = zclock_time ();
    return now_ms > written_ms ? now_ms - written_ms : 0;
}

//  The pid of the agent that holds STATE_DIR's lock, or 0 when none does.
static pid_t
s_running_agent (const char *state_dir)
{
    char path [1100];
    snprintf (path, sizeof path, "%s/owner.lock", state_dir);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    pid_t pid = 0;
    //  A lock we can take is held by no one
    if (flock (fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        char text [128];
        ssize_t size = pread (fd, text, sizeof text - 1, 0);
        char program [64];
        long number = 0;
        if (size > 0) {
            text [size] = 0;
            if (sscanf (text, "%63s %ld", program, &number) == 2
                && strcmp (program, "gridagent") == 0 && number > 0)
                pid = (pid_t) number;
        }
    }
    close (fd);
    return pid;
}

int
rekey_main (int argc, char **argv, FILE *out, FILE *err)
{
    //  --no-signal is ours; the rest is the agent's command line
    bool signal_agent = true;
    char **args = (char **) calloc ((size_t) argc + 1, sizeof (char *));
    if (!args)
        return 1;
    int count = 0;
    for (int index = 0; index < argc; index++) {
        if (index > 0 && strcmp (argv [index], "--no-signal") == 0)
            signal_agent = false;
        else
        if (index > 0 && strcmp (argv [index], "--help") == 0) {
            fprintf (out,
"usage: gridagent rotate-key [--config FILE] [--key FILE] [--state-dir DIR]\n"
"                            [--no-signal]\n"
"Writes a new key pair beside this agent's key (KEY.next, KEY.next_secret,\n"
"mode 0600) and tells the running agent (SIGHUP to the pid of the state\n"
"dir's lock) to rotate to it: it sends the new public key over its\n"
"session, the broker binds it to the node (at once with rekey: auto, else\n"
"after gridcli key accept NODE), and the agent switches to it without its\n"
"node going offline. --no-signal: only write the pair (the agent takes it\n"
"at its next SIGHUP, or within a minute).\n");
            free (args);
            return 0;
        }
        else
            args [count++] = argv [index];
    }
    agent_config_t config;
    agent_config_init (&config);
    char why [1024] = "";
    int rc = agent_config_parse (&config, count, args, out, why, sizeof why);
    if (rc != 0) {
        if (rc == -2)
            cmdline_usage_sentence (err, "gridagent rotate-key", NULL, why);
        else
        if (rc < 0)
            fprintf (err, "gridagent rotate-key: %s\n", why);
        agent_config_clear (&config);
        free (args);
        return rc < 0 ? 2 : 0;
    }
    int code = 0;
    char public_txt [KEYS_TEXT_SIZE];
    zcert_t *current = config.insecure ? NULL
                     : keys_load_pair (config.key_file, why, sizeof why);
    if (config.insecure) {
        fprintf (err, "gridagent rotate-key: this agent runs insecure: it "
                 "has no key to rotate\n");
        code = 1;
    }
    else
    if (!current) {
        fprintf (err, "gridagent rotate-key: %s\n", why);
        code = 1;
    }
    else
    if (rekey_write_next (config.key_file, public_txt, why, sizeof why)
        != 0) {
        fprintf (err, "gridagent rotate-key: %s\n", why);
        code = 1;
    }
    else {
        rekey_paths_t paths;
        rekey_paths (config.key_file, &paths);
        fprintf (out, "wrote the next key pair %s (public key %s)\n",
                 paths.next_secret, public_txt);
        pid_t pid = signal_agent ? s_running_agent (config.state_dir) : 0;
        if (pid > 0 && kill (pid, SIGHUP) == 0)
            fprintf (out, "told the running agent (pid %ld): it sends the "
                     "key to the broker and switches once it is accepted\n",
                     (long) pid);
        else
        if (signal_agent)
            fprintf (out, "no agent runs on %s: it rotates at its next "
                     "start\n", config.state_dir);
        else
            fprintf (out, "the running agent takes it at its next SIGHUP, "
                     "or within a minute\n");
    }
    zcert_destroy (&current);
    agent_config_clear (&config);
    free (args);
    return code;
}

//  ---------------------------------------------------------------------
//  The running agent's rotation (PROTOCOL.md 4.2): the next pair on disk,
//  rekey over the session until the broker took it, then a second session
//  with the next key; its welcome switches the link, and the files follow

#define S_LOOK_MS 60000             //  A next pair on disk looked for (and SIGHUP)
#define S_ASK_MS 5000               //  rekey again while no answer or pending
#define S_SWITCH_MS 30000           //  The next key's session: welcome by then

struct _rekey_t {
    agent_config_t *config;     //  Borrowed from the agent
    link_t *link;               //  Borrowed from the agent
    bool granted;               //  The last welcome granted rekey
    bool poke;                  //  SIGHUP: look for a next pair now
    char next_key [KEYS_TEXT_SIZE];  //  The next pair's public key, "": none
    int64_t looked_ms;          //  Monotonic: files last looked at
    int64_t sent_ms;            //  Monotonic: rekey last sent, 0: never
    int64_t switch_ms;          //  Monotonic: the next key's session opened
    char said [1024];           //  The last rotation notice logged
};

//  Logs TEXT at LEVEL once while it stays the same.
static void
s_rekey_say (rekey_t *self, log_level_t level, const char *text)
{
    if (strcmp (self->said, text) == 0)
        return;
    snprintf (self->said, sizeof self->said, "%s", text);
    log_write (level, NULL, "%s", text);
}

//  Looks for a next pair (rotate-key wrote one), or writes one when the
//  key is older than key_rotate_days.
static void
s_rekey_look (rekey_t *self)
{
    const agent_config_t *config = self->config;
    char why [1024] = "";
    zcert_t *next = rekey_load_next (config->key_file, why, sizeof why);
    if (!next && *why) {
        s_rekey_say (self, LOG_LEVEL_WARN, why);
        return;
    }
    int64_t age_ms = next || config->key_rotate_days <= 0
                     ? -1 : rekey_key_age_ms (config->key_file);
    if (age_ms > config->key_rotate_days * 86400000) {
        char public_txt [KEYS_TEXT_SIZE];
        if (rekey_write_next (config->key_file, public_txt, why, sizeof why)) {
            s_rekey_say (self, LOG_LEVEL_ERROR, why);
            return;
        }
        s_log (self, "this node's key is older than key_rotate_days (%lld): "
               "wrote a next key pair", (long long) config->key_rotate_days);
        next = rekey_load_next (config->key_file, why, sizeof why);
    }
    if (!next)
        return;
    snprintf (self->next_key, sizeof self->next_key, "%s",
              zcert_public_txt (next));
    zcert_destroy (&next);
    self->sent_ms = 0;
    s_log (self, "rotating this node's key to %s", self->next_key);
}

void
rekey_tick (rekey_t *self)
{
    int64_t now_ms = zclock_mono ();
    if (!*self->next_key) {
        if (!self->poke && self->looked_ms
            && now_ms - self->looked_ms < S_LOOK_MS)
            return;
        self->poke = false;
        self->looked_ms = now_ms;
        s_rekey_look (self);
        if (!*self->next_key)
            return;
    }
    if (!link_welcomed (self->link))
        return;
    if (!self->granted) {
        char text [600];
        snprintf (text, sizeof text, "this broker cannot rotate keys (its "
                  "welcome did not grant rekey: it is of an earlier release, "
                  "runs --insecure, or this agent connects through relays): "
                  "the next key %s waits beside %s", self->next_key,
                  self->config->key_file);
        s_rekey_say (self, LOG_LEVEL_WARN, text);
        return;
    }
    if (link_rekeying (self->link)) {
        if (now_ms - self->switch_ms >= S_SWITCH_MS) {
            s_rekey_say (self, LOG_LEVEL_WARN, "the session with the next "
                         "key was not welcomed in time: asking again");
            link_rekey_abort (self->link);
            self->sent_ms = 0;
        }
        return;
    }
    if (self->sent_ms && now_ms - self->sent_ms < S_ASK_MS)
        return;
    proto_msg_t msg = {
        .type = PROTO_REKEY, .node = self->config->id, .key = self->next_key
    };
    if (link_send (self->link, &msg) == 0)
        self->sent_ms = now_ms;
    return;
}

//  Where the broker put our next key.
void
rekey_on_ack (rekey_t *self, const proto_msg_t *ack)
{
    if (!*self->next_key || strcmp (ack->key, self->next_key) != 0
        || strcmp (ack->node, self->config->id) != 0)
        return;
    char text [700];
    if (strcmp (ack->status, "accepted") == 0) {
        if (link_rekeying (self->link))
            return;
        char why [1024];
        zcert_t *next = rekey_load_next (self->config->key_file, why,
                                         sizeof why);
        if (!next || strcmp (zcert_public_txt (next), self->next_key) != 0) {
            //  The files changed under us: look again
            zcert_destroy (&next);
            self->next_key [0] = 0;
            self->poke = true;
            return;
        }
        s_log (self, "the broker took the next key %s: connecting with it",
               self->next_key);
        self->switch_ms = zclock_mono ();
        link_rekey_connect (self->link, &next);
    }
    else
    if (strcmp (ack->status, "pending") == 0) {
        snprintf (text, sizeof text, "the next key %s waits for acceptance "
                  "(an admin runs gridcli key accept %s)", self->next_key,
                  self->config->id);
        s_rekey_say (self, LOG_LEVEL_INFO, text);
    }
    else {
        snprintf (text, sizeof text, "the broker refused the next key %s: "
                  "%s; the pair is removed (gridagent rotate-key makes "
                  "another)", self->next_key,
                  ack->message ? ack->message : ack->status);
        s_rekey_say (self, LOG_LEVEL_ERROR, text);
        rekey_drop (self->config->key_file);
        self->next_key [0] = 0;
    }
}

//  A frame of the next key's session that is no welcome: an error means
//  the broker refused that session; ask again where the key stands.
void
rekey_on_next_session (rekey_t *self, const proto_msg_t *msg)
{
    if (msg->type != PROTO_ERROR)
        return;
    char text [700];
    snprintf (text, sizeof text, "the broker refused the session with the "
              "next key: %s: %s", msg->code, msg->message);
    s_rekey_say (self, LOG_LEVEL_WARN, text);
    link_rekey_abort (self->link);
    self->sent_ms = 0;
}

//  After a welcome: when it came on the next key's session, the files
//  follow (the next pair becomes the pair).
void
rekey_welcomed (rekey_t *self, bool granted)
{
    self->granted = granted;
    const char *key = link_key (self->link);
    if (!*self->next_key || !key || strcmp (key, self->next_key) != 0)
        return;
    char why [1024];
    if (rekey_commit (self->config->key_file, why, sizeof why) != 0) {
        //  Restarted, the agent falls back to the next pair still on disk
        log_error ("switched to key %s, but %s", self->next_key, why);
        return;
    }
    s_log (self, "this node's key is now %s (the broker retired the old "
           "one)", self->next_key);
    self->next_key [0] = 0;
    self->said [0] = 0;
    self->sent_ms = 0;
}



rekey_t *
rekey_new (agent_config_t *config, link_t *link)
{
    rekey_t *self = (rekey_t *) zmalloc (sizeof (rekey_t));
    self->config = config;
    self->link = link;
    char why [1024] = "";
    if (rekey_recover (self->config->key_file, why, sizeof why) < 0)
        log_warn ("%s", why);
    zcert_t *next = rekey_load_next (self->config->key_file, why, sizeof why);
    if (!next) {
        if (*why)
            log_warn ("%s", why);
        return self;
    }
    snprintf (self->next_key, sizeof self->next_key, "%s",
              zcert_public_txt (next));
    s_log (self, "a rotation to key %s is under way", self->next_key);
    link_rekey_fallback (self->link, &next);
    return self;
}

void
rekey_destroy (rekey_t **self_p)
{
    if (self_p && *self_p) {
        free (*self_p);
        *self_p = NULL;
    }
}

void
rekey_poke (rekey_t *self)
{
    self->poke = true;
}

