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
    if (keynext_write (config.key_file, public_txt, why, sizeof why)
        != 0) {
        fprintf (err, "gridagent rotate-key: %s\n", why);
        code = 1;
    }
    else {
        keynext_paths_t paths;
        keynext_paths (config.key_file, &paths);
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
    //  The broker's key rotation (PROTO_FEATURE_BROKER_REKEY)
    bool broker_granted;        //  The last welcome granted broker_rekey
    char broker_old [KEYS_TEXT_SIZE];  //  The broker's key we trusted...
    char broker_new [KEYS_TEXT_SIZE];  //  ...and its next one ("": none)
};

//  The broker's key rotation in the state dir: S_BROKER_NEXT holds "OLD
//  NEW" while one runs; S_BROKER_KEYS a line "OLD NEW" per rotation done,
//  applied in order at start (the config still names the first key).
#define S_BROKER_NEXT "broker.key.next"
#define S_BROKER_KEYS "broker.keys"

//  PATH of NAME in the state dir.
static void
s_state_path (const rekey_t *self, const char *name, char *path,
              size_t path_len)
{
    snprintf (path, path_len, "%s/%s", self->config->state_dir, name);
}

//  True when TEXT is a public key in its Z85 text.
static bool
s_z85_key (const char *text)
{
    uint8_t bytes [32];
    return text && strlen (text) == KEYS_TEXT_SIZE - 1
           && zmq_z85_decode (bytes, text) != NULL;
}

//  Reads "OLD NEW" lines of FILE, calling the link's MAP for each, or
//  the pending pair into SELF when NEXT. Returns the lines taken.
static int
s_broker_read (rekey_t *self, const char *name, bool next)
{
    char path [1100];
    s_state_path (self, name, path, sizeof path);
    FILE *file = fopen (path, "r");
    if (!file)
        return 0;
    char old [64], key [64];
    int taken = 0;
    while (fscanf (file, "%63s %63s", old, key) == 2) {
        if (!s_z85_key (old) || !s_z85_key (key)) {
            log_warn ("%s: a line is not two broker keys: ignored", path);
            continue;
        }
        taken++;
        if (next) {
            //  Both checked: 40 characters and the NUL
            memcpy (self->broker_old, old, KEYS_TEXT_SIZE);
            memcpy (self->broker_new, key, KEYS_TEXT_SIZE);
        }
        else
            link_broker_key_map (self->link, old, key);
    }
    fclose (file);
    return taken;
}

//  Writes TEXT to NAME in the state dir, appended or replacing it whole
//  (a temporary file renamed), flushed. Returns 0, or -1 logged.
static int
s_broker_write (rekey_t *self, const char *name, const char *text,
                bool append)
{
    char path [1100], tmp [1200];
    s_state_path (self, name, path, sizeof path);
    snprintf (tmp, sizeof tmp, "%s.tmp", path);
    FILE *file = fopen (append ? path : tmp, append ? "a" : "w");
    int rc = file ? 0 : -1;
    if (file) {
        if (fputs (text, file) < 0 || fflush (file) != 0
            || fsync (fileno (file)) != 0)
            rc = -1;
        if (fclose (file) != 0)
            rc = -1;
    }
    if (rc == 0 && !append)
        rc = rename (tmp, path);
    if (rc != 0) {
        log_error ("cannot write %s: %s", path, strerror (errno));
        if (!append)
            unlink (tmp);
    }
    return rc;
}

void
rekey_on_broker_key (rekey_t *self, const proto_msg_t *msg)
{
    const char *trusted = link_broker_key (self->link);
    if (!self->broker_granted || !trusted || !s_z85_key (msg->key)) {
        log_warn ("a broker_key message %s: dropped", !s_z85_key (msg->key)
                  ? "without a valid key" : "that the welcome did not grant");
        return;
    }
    if (!streq (msg->key, self->broker_new) && !streq (msg->key, trusted)) {
        char line [2 * KEYS_TEXT_SIZE + 2];
        snprintf (line, sizeof line, "%s %s\n", trusted, msg->key);
        if (s_broker_write (self, S_BROKER_NEXT, line, false) != 0)
            return;
        snprintf (self->broker_old, sizeof self->broker_old, "%s", trusted);
        snprintf (self->broker_new, sizeof self->broker_new, "%s", msg->key);
        link_broker_key_next (self->link, self->broker_old, self->broker_new);
        s_log (self, "the broker's next key is %s (kept in %s/%s): it "
               "replaces %s when the broker retires it", msg->key,
               self->config->state_dir, S_BROKER_NEXT, trusted);
    }
    proto_msg_t ack = {.type = PROTO_BROKER_KEY_ACK,
                       .node = self->config->id,
                       .key = msg->key};
    link_send (self->link, &ack);
}

//  Welcomed on the broker's next key: the rotation is done here.
static void
s_broker_welcomed (rekey_t *self)
{
    const char *trusted = link_broker_key (self->link);
    if (!*self->broker_new || !trusted || !streq (trusted, self->broker_new))
        return;
    char line [2 * KEYS_TEXT_SIZE + 2];
    snprintf (line, sizeof line, "%s %s\n", self->broker_old,
              self->broker_new);
    if (s_broker_write (self, S_BROKER_KEYS, line, true) != 0)
        return;
    char path [1100];
    s_state_path (self, S_BROKER_NEXT, path, sizeof path);
    unlink (path);
    link_broker_key_map (self->link, self->broker_old, self->broker_new);
    link_broker_key_next (self->link, NULL, NULL);
    s_log (self, "the broker's key is now %s (it retired %s; kept in %s/%s)",
           self->broker_new, self->broker_old, self->config->state_dir,
           S_BROKER_KEYS);
    self->broker_old [0] = self->broker_new [0] = 0;
}

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
    zcert_t *next = keynext_load (config->key_file, why, sizeof why);
    if (!next && *why) {
        s_rekey_say (self, LOG_LEVEL_WARN, why);
        return;
    }
    int64_t age_ms = next || config->key_rotate_days <= 0
                     ? -1 : keynext_age_ms (config->key_file);
    if (age_ms > config->key_rotate_days * 86400000) {
        char public_txt [KEYS_TEXT_SIZE];
        if (keynext_write (config->key_file, public_txt, why, sizeof why)) {
            s_rekey_say (self, LOG_LEVEL_ERROR, why);
            return;
        }
        s_log (self, "this node's key is older than key_rotate_days (%lld): "
               "wrote a next key pair", (long long) config->key_rotate_days);
        next = keynext_load (config->key_file, why, sizeof why);
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
        zcert_t *next = keynext_load (self->config->key_file, why,
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
        keynext_drop (self->config->key_file);
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
rekey_welcomed (rekey_t *self, const proto_msg_t *welcome)
{
    self->granted = proto_msg_has_feature (welcome, PROTO_FEATURE_REKEY);
    self->broker_granted = proto_msg_has_feature (welcome,
                                                  PROTO_FEATURE_BROKER_REKEY);
    s_broker_welcomed (self);
    const char *key = link_key (self->link);
    if (!*self->next_key || !key || strcmp (key, self->next_key) != 0)
        return;
    char why [1024];
    if (keynext_commit (self->config->key_file, why, sizeof why) != 0) {
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
    //  The broker's key: the rotations done, then the one under way
    s_broker_read (self, S_BROKER_KEYS, false);
    if (s_broker_read (self, S_BROKER_NEXT, true)) {
        link_broker_key_next (self->link, self->broker_old, self->broker_new);
        s_log (self, "the broker's key %s has a next key %s", self->broker_old,
               self->broker_new);
    }
    char why [1024] = "";
    if (keynext_recover (self->config->key_file, why, sizeof why) < 0)
        log_warn ("%s", why);
    zcert_t *next = keynext_load (self->config->key_file, why, sizeof why);
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

