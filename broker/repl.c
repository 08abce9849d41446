/*  =========================================================================
    repl - a broker cluster's replication (see repl.h)
    =========================================================================
*/
#include "repl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/log.h"
#include "../store/journal.h"

static void
s_put64 (uint8_t *at, uint64_t value)
{
    for (int index = 7; index >= 0; index--) {
        at [index] = (uint8_t) value;
        value >>= 8;
    }
}

static uint64_t
s_get64 (const uint8_t *at)
{
    uint64_t value = 0;
    for (int index = 0; index < 8; index++)
        value = (value << 8) | at [index];
    return value;
}

//  Frame INDEX of MSG as a number: true when it is one (8 bytes).
static bool
s_frame64 (zmsg_t *msg, size_t index, uint64_t *value)
{
    zframe_t *frame = zmsg_first (msg);
    for (size_t at = 0; frame && at < index; at++)
        frame = zmsg_next (msg);
    if (!frame || zframe_size (frame) != 8)
        return false;
    *value = s_get64 (zframe_data (frame));
    return true;
}

static void
s_add64 (zmsg_t *msg, uint64_t value)
{
    uint8_t bytes [8];
    s_put64 (bytes, value);
    zmsg_addmem (msg, bytes, 8);
}

void
repl_store_position (store_t *store, uint64_t *epoch, uint64_t *seq)
{
    *epoch = *seq = 0;
    store_txn_t *txn = store_begin (store, false);
    if (!txn)
        return;
    const void *value;
    size_t size;
    if (store_get (txn, STORE_DB_META, REPL_META_KEY, strlen (REPL_META_KEY),
                   &value, &size) == 0 && size == 16) {
        *epoch = s_get64 ((const uint8_t *) value);
        *seq = s_get64 ((const uint8_t *) value + 8);
    }
    store_abort (&txn);
}

int
repl_store_mark (store_txn_t *txn, uint64_t epoch, uint64_t seq)
{
    uint8_t value [16];
    s_put64 (value, epoch);
    s_put64 (value + 8, seq);
    return store_put (txn, STORE_DB_META, REPL_META_KEY,
                      strlen (REPL_META_KEY), value, sizeof value);
}

//  ---------------------------------------------------------------------
//  Source

typedef struct {
    uint64_t seq;
    int64_t shipped_ms;
    size_t size;
    uint8_t data [];
} s_pass_t;

static void
s_pass_destroy (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

typedef enum {
    S_SNAPSHOT,                  //  Receiving a snapshot
    S_REPLAY,                    //  Receiving passes, behind the last
    S_LIVE                       //  Caught up once: passes as they come
} s_standby_state_t;

typedef struct {
    char name [64];
    uint8_t routing [256];
    size_t routing_size;
    s_standby_state_t state;
    uint64_t acked;              //  Applied through this seq
    uint64_t sent;               //  Passes sent through this seq
    bool sync;                   //  In the sync set
    int64_t heard_ms;            //  Last message from it
    int64_t pinged_ms;           //  Last PING to it
    bool snap_waiting;           //  Waits for the copy being taken
    int snap_fd;                 //  Snapshot being sent, or -1
    uint64_t snap_seq;           //  Its seq (the copy holds this or later)
    uint64_t snap_size;
    uint64_t snap_sent;          //  Bytes sent
    uint64_t snap_acked;         //  Bytes it said it has
} s_standby_t;

//  The copy of the store a snapshot is sent from, taken by a thread of
//  its own (one LMDB read transaction there) while the loop serves on.
typedef struct {
    pthread_t thread;
    bool running;                //  Started, not yet joined
    atomic_bool done;            //  The thread ended: RC and ERR are set
    int rc;                      //  0, or -1 with ERR
    char err [512];
    store_t *store;              //  What it copies
    const char *path;            //  Where to
    uint64_t seq;                //  The last pass when it began
    int64_t began_ms;            //  Monotonic
} s_copy_t;

struct _repl_source_t {
    repl_source_config_t config;
    char *snapshot_path;
    zsock_t *socket;
    store_t *store;
    uint64_t last;               //  Last seq (shipped, or the store's)
    zlistx_t *log;               //  s_pass_t, oldest first
    size_t log_bytes;
    zlistx_t *standbys;          //  s_standby_t
    bool alone_said;             //  Logged that it releases alone
    char asked [REPL_SYNC_NAMES];    //  The sync set last asked of etcd
    uint64_t asked_gen;          //  Its number (0: none asked yet)
    char recorded [REPL_MAX_SYNC][64];   //  What etcd's sync key names
    size_t recorded_count;
    bool recorded_valid;         //  A write of this epoch succeeded
    uint64_t floor;              //  Released so far
    s_copy_t copy;               //  The copy being taken, if running
};

repl_source_t *
repl_source_new (const repl_source_config_t *config, zsock_t **socket_p,
                 store_t *store)
{
    repl_source_t *self = (repl_source_t *) zmalloc (sizeof (repl_source_t));
    self->config = *config;
    self->snapshot_path = strdup (config->snapshot_path);
    self->config.snapshot_path = self->snapshot_path;
    self->socket = *socket_p;
    *socket_p = NULL;
    self->store = store;
    uint64_t epoch;
    repl_store_position (store, &epoch, &self->last);
    //  Passes of earlier leaderships are no longer this one's to hold
    self->floor = self->last;
    self->log = zlistx_new ();
    zlistx_set_destructor (self->log, s_pass_destroy);
    self->standbys = zlistx_new ();
    return self;
}

static void
s_standby_free (s_standby_t **standby_p)
{
    s_standby_t *standby = *standby_p;
    if (standby) {
        if (standby->snap_fd >= 0)
            close (standby->snap_fd);
        free (standby);
        *standby_p = NULL;
    }
}

void
repl_source_destroy (repl_source_t **self_p)
{
    repl_source_t *self = *self_p;
    if (!self)
        return;
    //  The copy reads the store, which the caller closes next
    if (self->copy.running) {
        pthread_join (self->copy.thread, NULL);
        store_apart_end (self->store);
        unlink (self->snapshot_path);
    }
    s_standby_t *standby;
    while ((standby = (s_standby_t *) zlistx_detach (self->standbys, NULL)))
        s_standby_free (&standby);
    zlistx_destroy (&self->standbys);
    zlistx_destroy (&self->log);
    zsock_destroy (&self->socket);
    free (self->snapshot_path);
    free (self);
    *self_p = NULL;
}

zsock_t *
repl_source_socket (repl_source_t *self)
{
    return self->socket;
}

uint64_t
repl_source_next_seq (repl_source_t *self)
{
    return self->last + 1;
}

uint64_t
repl_source_last (repl_source_t *self)
{
    return self->last;
}

//  Sends MSG to STANDBY (destroys MSG). A full or gone peer drops it:
//  acks and silence handle that.
static void
s_send (repl_source_t *self, s_standby_t *standby, zmsg_t **msg_p)
{
    zmsg_pushmem (*msg_p, standby->routing, standby->routing_size);
    if (zmsg_send (msg_p, self->socket) != 0)
        zmsg_destroy (msg_p);
}

static void
s_send_pass (repl_source_t *self, s_standby_t *standby, const s_pass_t *pass)
{
    zmsg_t *msg = zmsg_new ();
    zmsg_addstr (msg, "PASS");
    s_add64 (msg, self->config.epoch);
    s_add64 (msg, pass->seq);
    zmsg_addmem (msg, pass->data, pass->size);
    s_send (self, standby, &msg);
    standby->sent = pass->seq;
}

static void
s_refuse (repl_source_t *self, s_standby_t *standby, const char *why)
{
    zmsg_t *msg = zmsg_new ();
    zmsg_addstr (msg, "REFUSED");
    zmsg_addstr (msg, why);
    s_send (self, standby, &msg);
}

//  True when etcd's sync key names NAME.
static bool
s_recorded (repl_source_t *self, const char *name)
{
    for (size_t index = 0; index < self->recorded_count; index++)
        if (streq (self->recorded [index], name))
            return true;
    return false;
}

//  In the sync set: caught up, and named by etcd's sync key.
static bool
s_in_sync (repl_source_t *self, s_standby_t *standby)
{
    return standby->sync && s_recorded (self, standby->name);
}

static void
s_ping (repl_source_t *self, s_standby_t *standby, int64_t now_ms)
{
    zmsg_t *msg = zmsg_new ();
    zmsg_addstr (msg, "PING");
    s_add64 (msg, self->config.epoch);
    s_add64 (msg, self->last);
    s_add64 (msg, s_in_sync (self, standby) ? 1 : 0);
    s_send (self, standby, &msg);
    standby->pinged_ms = now_ms;
}

void
repl_source_ship (repl_source_t *self, uint64_t seq, const void *journal,
                  size_t size, int64_t now_ms)
{
    assert (seq == self->last + 1);
    s_pass_t *pass = (s_pass_t *) malloc (sizeof (s_pass_t) + size);
    assert (pass);
    pass->seq = seq;
    pass->shipped_ms = now_ms;
    pass->size = size;
    memcpy (pass->data, journal, size);
    zlistx_add_end (self->log, pass);
    self->log_bytes += size;
    self->last = seq;
    //  The log keeps what a standby may still ask for, within its bound
    while (self->log_bytes > REPL_LOG_MAX_BYTES && zlistx_size (self->log) > 1) {
        s_pass_t *oldest = (s_pass_t *) zlistx_first (self->log);
        self->log_bytes -= oldest->size;
        zlistx_delete (self->log, zlistx_cursor (self->log));
    }
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys))
        if (standby->state != S_SNAPSHOT && standby->sent == seq - 1)
            s_send_pass (self, standby, pass);
}

int
repl_source_unship (repl_source_t *self, uint64_t seq)
{
    assert (seq == self->last && seq > 0);
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys))
        if (standby->sent >= seq)
            return -1;
    s_pass_t *pass = (s_pass_t *) zlistx_last (self->log);
    if (pass && pass->seq == seq) {
        self->log_bytes -= pass->size;
        zlistx_delete (self->log, zlistx_cursor (self->log));
    }
    self->last = seq - 1;
    return 0;
}

//  The logged pass SEQ, or NULL.
static s_pass_t *
s_logged (repl_source_t *self, uint64_t seq)
{
    s_pass_t *first = (s_pass_t *) zlistx_first (self->log);
    if (!first || seq < first->seq || seq > self->last)
        return NULL;
    //  Passes are consecutive
    for (s_pass_t *pass = first; pass; pass = (s_pass_t *) zlistx_next (self->log))
        if (pass->seq == seq)
            return pass;
    return NULL;
}

//  Sends STANDBY the passes after what it has, as far as the window of
//  the socket allows (all: passes are small next to the high-water mark).
static void
s_replay (repl_source_t *self, s_standby_t *standby)
{
    while (standby->sent < self->last) {
        s_pass_t *pass = s_logged (self, standby->sent + 1);
        if (!pass)
            break;
        s_send_pass (self, standby, pass);
    }
}

static void
s_snapshot_pump (repl_source_t *self, s_standby_t *standby)
{
    static uint8_t chunk [REPL_SNAP_CHUNK];
    while (standby->snap_fd >= 0 && standby->snap_sent < standby->snap_size
           && standby->snap_sent - standby->snap_acked
                  < (uint64_t) REPL_SNAP_WINDOW * REPL_SNAP_CHUNK) {
        ssize_t got = pread (standby->snap_fd, chunk, REPL_SNAP_CHUNK,
                             (off_t) standby->snap_sent);
        if (got <= 0) {
            log_error ("cluster: cannot read the snapshot for standby %s: "
                       "%s", standby->name, got < 0 ? strerror (errno)
                                                   : "short file");
            close (standby->snap_fd);
            standby->snap_fd = -1;
            s_refuse (self, standby, "the active could not read its snapshot");
            return;
        }
        zmsg_t *msg = zmsg_new ();
        zmsg_addstr (msg, "SNAP");
        s_add64 (msg, self->config.epoch);
        s_add64 (msg, standby->snap_seq);
        s_add64 (msg, standby->snap_sent);
        zmsg_addmem (msg, chunk, (size_t) got);
        s_send (self, standby, &msg);
        standby->snap_sent += (uint64_t) got;
    }
    if (standby->snap_fd >= 0 && standby->snap_sent == standby->snap_size) {
        zmsg_t *msg = zmsg_new ();
        zmsg_addstr (msg, "SNAPEND");
        s_add64 (msg, self->config.epoch);
        s_add64 (msg, standby->snap_seq);
        s_add64 (msg, standby->snap_size);
        s_send (self, standby, &msg);
        close (standby->snap_fd);
        standby->snap_fd = -1;
        //  What follows the snapshot comes as passes once it acks
        standby->sent = standby->snap_seq;
    }
}

static void *
s_copy_run (void *arg)
{
    s_copy_t *copy = (s_copy_t *) arg;
    copy->rc = store_copy_apart (copy->store, copy->path, copy->err,
                                 sizeof copy->err);
    atomic_store (&copy->done, true);
    return NULL;
}

//  Starts the copy the waiting standbys will get. Returns 0, or -1 (said
//  in COPY's ERR).
static int
s_copy_begin (repl_source_t *self, int64_t now_ms)
{
    s_copy_t *copy = &self->copy;
    copy->store = self->store;
    copy->path = self->snapshot_path;
    copy->seq = self->last;
    copy->began_ms = now_ms;
    copy->rc = 0;
    copy->err [0] = 0;
    atomic_store (&copy->done, false);
    store_apart_begin (self->store);
    int rc = pthread_create (&copy->thread, NULL, s_copy_run, copy);
    if (rc != 0) {
        store_apart_end (self->store);
        snprintf (copy->err, sizeof copy->err, "cannot start a thread: %s",
                  strerror (rc));
        return -1;
    }
    copy->running = true;
    return 0;
}

//  The copy ended: the standbys that wait for it get it (each from its
//  own open file: the next copy may replace the name), or are refused.
static void
s_copy_end (repl_source_t *self, int64_t now_ms)
{
    s_copy_t *copy = &self->copy;
    pthread_join (copy->thread, NULL);
    copy->running = false;
    store_apart_end (self->store);
    struct stat info = {.st_size = 0};
    if (copy->rc == 0) {
        int fd = open (copy->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat (fd, &info) != 0) {
            copy->rc = -1;
            snprintf (copy->err, sizeof copy->err, "cannot open %s: %s",
                      copy->path, strerror (errno));
        }
        if (fd >= 0)
            close (fd);
    }
    if (copy->rc == 0)
        log_info ("cluster: a snapshot of the store at pass %" PRIu64 " or "
                  "later (%" PRIu64 " bytes) was taken in %" PRId64 " ms "
                  "while the active served on (%" PRIu64 " passes shipped "
                  "meanwhile)", copy->seq, (uint64_t) info.st_size,
                  now_ms - copy->began_ms, self->last - copy->seq);
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys)) {
        if (!standby->snap_waiting)
            continue;
        standby->snap_waiting = false;
        int fd = copy->rc == 0 ? open (copy->path, O_RDONLY | O_CLOEXEC) : -1;
        if (fd < 0) {
            log_error ("cluster: cannot take a snapshot for standby %s: %s",
                       standby->name, copy->rc == 0 ? strerror (errno)
                                                    : copy->err);
            s_refuse (self, standby, "the active could not take a snapshot");
            continue;
        }
        standby->snap_fd = fd;
        standby->snap_seq = copy->seq;
        standby->snap_size = (uint64_t) info.st_size;
        standby->snap_sent = standby->snap_acked = 0;
        s_snapshot_pump (self, standby);
    }
    unlink (copy->path);
}

//  Ends the copy if its thread is done.
static void
s_copy_poll (repl_source_t *self, int64_t now_ms)
{
    if (self->copy.running && atomic_load (&self->copy.done))
        s_copy_end (self, now_ms);
}

//  STANDBY catches up from a snapshot: the copy being taken, or a new
//  one. Until it is sent, the standby is out of the sync set.
static void
s_snapshot_start (repl_source_t *self, s_standby_t *standby, int64_t now_ms)
{
    if (standby->snap_fd >= 0) {
        close (standby->snap_fd);
        standby->snap_fd = -1;
    }
    standby->state = S_SNAPSHOT;
    standby->sync = false;
    standby->snap_waiting = true;
    standby->snap_sent = standby->snap_acked = 0;
    if (!self->copy.running && s_copy_begin (self, now_ms) != 0) {
        log_error ("cluster: cannot take a snapshot for standby %s: %s",
                   standby->name, self->copy.err);
        standby->snap_waiting = false;
        s_refuse (self, standby, "the active could not take a snapshot");
        return;
    }
    log_info ("cluster: standby %s catches up from a snapshot of the store "
              "at pass %" PRIu64 " or later (taken apart from the loop)",
              standby->name, self->copy.seq);
    //  It hears at once that it is no longer in the sync set
    s_ping (self, standby, now_ms);
}

static s_standby_t *
s_standby_of (repl_source_t *self, zframe_t *routing)
{
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys))
        if (standby->routing_size == zframe_size (routing)
            && memcmp (standby->routing, zframe_data (routing),
                       standby->routing_size) == 0)
            return standby;
    return NULL;
}

static void
s_forget (repl_source_t *self, s_standby_t *standby, const char *why)
{
    if (standby->sync)
        log_warn ("cluster: standby %s leaves the sync set: %s (it counts "
                  "until the sync key no longer names it)", standby->name,
                  why);
    else
        log_info ("cluster: standby %s is gone: %s", standby->name, why);
    void *handle = zlistx_find (self->standbys, standby);
    if (handle)
        zlistx_detach (self->standbys, handle);
    s_standby_free (&standby);
}

static void
s_on_hello (repl_source_t *self, zframe_t *routing, zmsg_t *msg,
            int64_t now_ms)
{
    char *name = NULL;
    uint64_t epoch, seq;
    zframe_t *name_frame = zmsg_first (msg);
    name_frame = zmsg_next (msg);
    if (!name_frame || zframe_size (name_frame) == 0
        || zframe_size (name_frame) >= 64 || !s_frame64 (msg, 2, &epoch)
        || !s_frame64 (msg, 3, &seq) || zmsg_size (msg) != 4
        || zframe_size (routing) > 256)
        return;
    name = zframe_strdup (name_frame);
    s_standby_t *standby = s_standby_of (self, routing);
    //  A name seen on another connection: that one is gone
    for (s_standby_t *other = (s_standby_t *) zlistx_first (self->standbys);
         other; other = (s_standby_t *) zlistx_next (self->standbys))
        if (other != standby && streq (other->name, name)) {
            s_forget (self, other, "it connected again");
            break;
        }
    if (!standby) {
        standby = (s_standby_t *) zmalloc (sizeof (s_standby_t));
        standby->snap_fd = -1;
        memcpy (standby->routing, zframe_data (routing), zframe_size (routing));
        standby->routing_size = zframe_size (routing);
        zlistx_add_end (self->standbys, standby);
    }
    snprintf (standby->name, sizeof standby->name, "%s", name);
    free (name);
    standby->heard_ms = now_ms;
    standby->sync = false;
    //  What it holds counts only when it is of this leadership
    standby->acked = epoch == self->config.epoch && seq <= self->last ? seq : 0;
    if (epoch == self->config.epoch && seq <= self->last
        && (seq == self->last || s_logged (self, seq + 1))) {
        //  Of this leadership, and what follows is in the log
        if (standby->snap_fd >= 0) {
            close (standby->snap_fd);
            standby->snap_fd = -1;
        }
        standby->snap_waiting = false;
        standby->state = S_REPLAY;
        standby->sent = seq;
        log_info ("cluster: standby %s follows from pass %" PRIu64 " (%" PRIu64
                  " behind)", standby->name, seq, self->last - seq);
        s_replay (self, standby);
    }
    else
        s_snapshot_start (self, standby, now_ms);
    s_ping (self, standby, now_ms);
}

//  Moves STANDBY's state after an ack.
static void
s_on_acked (repl_source_t *self, s_standby_t *standby)
{
    if (standby->state == S_SNAPSHOT && standby->snap_fd < 0
        && !standby->snap_waiting && standby->acked >= standby->snap_seq) {
        standby->state = S_REPLAY;
        standby->sent = standby->acked;
    }
    if (standby->state == S_REPLAY) {
        s_replay (self, standby);
        if (standby->sent < self->last && !s_logged (self, standby->sent + 1)) {
            log_warn ("cluster: standby %s fell behind the log: a new "
                      "snapshot", standby->name);
            s_snapshot_start (self, standby, zclock_mono ());
            return;
        }
    }
    if (standby->state != S_SNAPSHOT && standby->acked == self->last
        && !standby->sync) {
        standby->state = S_LIVE;
        standby->sync = true;
        //  Its acks count from now; it is in the sync set (and may stand
        //  for election) once the sync key names it
        log_info ("cluster: standby %s caught up at pass %" PRIu64,
                  standby->name, standby->acked);
    }
}

void
repl_source_read (repl_source_t *self, int64_t now_ms)
{
    s_copy_poll (self, now_ms);
    for (int count = 0; count < 1000; count++) {
        zmsg_t *msg = zmsg_recv_nowait (self->socket);
        if (!msg)
            break;
        zframe_t *routing = zmsg_pop (msg);
        char *type = zmsg_size (msg) ? zframe_strdup (zmsg_first (msg)) : NULL;
        s_standby_t *standby = routing ? s_standby_of (self, routing) : NULL;
        uint64_t value;
        if (type && streq (type, "HELLO"))
            s_on_hello (self, routing, msg, now_ms);
        else
        if (!standby)
            ;   //  Not introduced: dropped
        else
        if (type && streq (type, "ACK") && s_frame64 (msg, 1, &value)) {
            standby->heard_ms = now_ms;
            if (value >= standby->acked && value <= self->last) {
                standby->acked = value;
                s_on_acked (self, standby);
            }
        }
        else
        if (type && streq (type, "SNAPACK") && s_frame64 (msg, 1, &value)) {
            standby->heard_ms = now_ms;
            if (value <= standby->snap_sent && value > standby->snap_acked)
                standby->snap_acked = value;
            s_snapshot_pump (self, standby);
        }
        free (type);
        zframe_destroy (&routing);
        zmsg_destroy (&msg);
    }
}

void
repl_source_tick (repl_source_t *self, int64_t now_ms)
{
    s_copy_poll (self, now_ms);
    s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
    while (standby) {
        s_standby_t *next = (s_standby_t *) zlistx_next (self->standbys);
        //  One that waits for the copy waits for this broker, not silent
        if (standby->snap_waiting)
            standby->heard_ms = now_ms;
        if (now_ms - standby->heard_ms > REPL_SILENT_MS) {
            s_forget (self, standby, "silent");
            //  The list changed under the cursor: start over
            standby = (s_standby_t *) zlistx_first (self->standbys);
            continue;
        }
        if (standby->sync && standby->acked < self->last) {
            s_pass_t *waiting = s_logged (self, standby->acked + 1);
            if (waiting && now_ms - waiting->shipped_ms
                               > self->config.sync_timeout_ms) {
                standby->sync = false;
                standby->state = S_REPLAY;
                log_warn ("cluster: standby %s leaves the sync set: pass %"
                          PRIu64 " unacknowledged after %" PRId64 " ms (it "
                          "counts until the sync key no longer names it)",
                          standby->name, standby->acked + 1,
                          now_ms - waiting->shipped_ms);
                s_ping (self, standby, now_ms);
            }
        }
        if (now_ms - standby->pinged_ms >= REPL_PING_MS)
            s_ping (self, standby, now_ms);
        standby = next;
    }
}

//  The standby named NAME, or NULL.
static s_standby_t *
s_named (repl_source_t *self, const char *name)
{
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys))
        if (streq (standby->name, name))
            return standby;
    return NULL;
}

uint64_t
repl_source_released (repl_source_t *self)
{
    //  Until this leadership wrote the sync key, it may name members that
    //  lack this leader's passes: nothing is released
    if (!self->recorded_valid)
        return self->floor;
    uint64_t released = self->last;
    size_t named_live = 0;
    //  Every member the sync key names must hold what is released (one
    //  gone holds it back, until the key no longer names it)...
    for (size_t index = 0; index < self->recorded_count; index++) {
        s_standby_t *standby = s_named (self, self->recorded [index]);
        uint64_t acked = standby ? standby->acked : self->floor;
        if (acked < released)
            released = acked;
        if (standby && standby->sync)
            named_live++;
    }
    //  ... and so must one being added (the key may name it any moment)
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys))
        if (standby->sync && standby->acked < released)
            released = standby->acked;
    if (named_live == 0 && self->config.strict)
        released = self->floor;
    else
    if (self->recorded_count == 0) {
        if (!self->alone_said && zlistx_size (self->log)) {
            log_warn ("cluster: no standby is in sync: this broker "
                      "acknowledges alone (a failover now could lose what "
                      "it acknowledged since)");
            self->alone_said = true;
        }
    }
    if (released > self->floor)
        self->floor = released;
    return self->floor;
}

static int
s_compare_names (const void *one, const void *two)
{
    return strcmp (*(const char *const *) one, *(const char *const *) two);
}

bool
repl_source_sync_wanted (repl_source_t *self, char *buf, size_t len,
                         uint64_t *gen_p)
{
    const char *names [REPL_MAX_SYNC];
    size_t count = 0;
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby && count < REPL_MAX_SYNC;
         standby = (s_standby_t *) zlistx_next (self->standbys))
        if (standby->sync)
            names [count++] = standby->name;
    qsort (names, count, sizeof names [0], s_compare_names);
    char wanted [REPL_SYNC_NAMES] = "";
    size_t used = 0;
    for (size_t index = 0; index < count; index++) {
        int wrote = snprintf (wanted + used, sizeof wanted - used, "%s%s",
                              used ? "," : "", names [index]);
        if (wrote > 0 && (size_t) wrote < sizeof wanted - used)
            used += (size_t) wrote;
    }
    snprintf (buf, len, "%s", wanted);
    *gen_p = self->asked_gen;
    if (self->asked_gen && streq (wanted, self->asked))
        return false;
    snprintf (self->asked, sizeof self->asked, "%s", wanted);
    *gen_p = ++self->asked_gen;
    return true;
}

void
repl_source_sync_recorded (repl_source_t *self, const char *names,
                           int64_t now_ms)
{
    char recorded [REPL_MAX_SYNC][64];
    size_t count = 0;
    const char *at = names ? names : "";
    while (*at && count < REPL_MAX_SYNC) {
        const char *end = strchr (at, ',');
        size_t len = end ? (size_t) (end - at) : strlen (at);
        if (len && len < 64)
            snprintf (recorded [count++], 64, "%.*s", (int) len, at);
        at += len;
        if (*at == ',')
            at++;
    }
    for (size_t index = 0; index < count; index++)
        if (!s_recorded (self, recorded [index]))
            log_info ("cluster: standby %s is in sync (the sync key names "
                      "it)", recorded [index]);
    for (size_t index = 0; index < self->recorded_count; index++) {
        bool kept = false;
        for (size_t other = 0; other < count; other++)
            kept = kept || streq (recorded [other], self->recorded [index]);
        if (!kept)
            log_warn ("cluster: the sync key no longer names standby %s: "
                      "the active goes on without it", self->recorded [index]);
    }
    if (count)
        self->alone_said = false;
    memcpy (self->recorded, recorded, sizeof recorded);
    self->recorded_count = count;
    self->recorded_valid = true;
    //  Standbys hear at once whether they are in the set
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys))
        s_ping (self, standby, now_ms);
}

bool
repl_source_sync_written (repl_source_t *self)
{
    return self->recorded_valid;
}

size_t
repl_source_standbys (repl_source_t *self)
{
    return zlistx_size (self->standbys);
}

size_t
repl_source_sync_count (repl_source_t *self)
{
    size_t sync = 0;
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby; standby = (s_standby_t *) zlistx_next (self->standbys))
        sync += s_in_sync (self, standby);
    return sync;
}

bool
repl_source_standby_at (repl_source_t *self, size_t index, int64_t now_ms,
                        repl_standby_info_t *info)
{
    static const char *states [] = {"snapshot", "replay", "live"};
    s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
    for (size_t at = 0; standby && at < index; at++)
        standby = (s_standby_t *) zlistx_next (self->standbys);
    if (!standby)
        return false;
    memset (info, 0, sizeof *info);
    snprintf (info->name, sizeof info->name, "%s", standby->name);
    info->state = states [standby->state];
    info->sync = s_in_sync (self, standby);
    info->acked = standby->acked;
    info->heard_ms = standby->heard_ms;
    s_pass_t *waiting = standby->acked < self->last
                      ? s_logged (self, standby->acked + 1) : NULL;
    info->lag_ms = waiting ? now_ms - waiting->shipped_ms : 0;
    return true;
}

void
repl_source_describe (repl_source_t *self, char *buf, size_t len)
{
    static const char *states [] = {"snapshot", "replay", "live"};
    size_t used = 0;
    buf [0] = 0;
    for (s_standby_t *standby = (s_standby_t *) zlistx_first (self->standbys);
         standby && used < len; standby = (s_standby_t *) zlistx_next (self->standbys)) {
        int wrote = snprintf (buf + used, len - used, "%s%s:%s:%" PRIu64,
                              used ? "," : "", standby->name,
                              s_in_sync (self, standby) ? "sync"
                                                        : states [standby->state],
                              standby->acked);
        if (wrote < 0)
            break;
        used += (size_t) wrote;
    }
}

//  ---------------------------------------------------------------------
//  Sink

struct _repl_sink_t {
    char name [64];
    char *dir;
    size_t map_bytes;
    size_t max_map_bytes;
    store_t **store_p;
    zsock_t *socket;
    char *endpoint;
    uint64_t epoch_seen;         //  Highest epoch heard
    uint64_t epoch;              //  Of the last pass applied
    uint64_t seq;
    bool in_sync;
    int64_t heard_ms;
    int64_t hello_ms;
    store_txn_t *batch;          //  The passes read in one go, applied
    uint64_t batch_epoch;        //  in one transaction: through this
    uint64_t batch_seq;          //  pass (committed by s_batch_commit)
    unsigned failures;           //  Passes that failed in a row
    int64_t retry_ms;            //  Monotonic: ask again then (0: not
                                 //  waiting); no pass is read meanwhile
    int snap_fd;                 //  Snapshot being received, or -1
    uint64_t snap_seq;
    uint64_t snap_epoch;
    uint64_t snap_got;
    char snap_path [4096];
};

repl_sink_t *
repl_sink_new (const char *name, const char *dir, size_t map_bytes,
               size_t max_map_bytes, store_t **store_p)
{
    repl_sink_t *self = (repl_sink_t *) zmalloc (sizeof (repl_sink_t));
    snprintf (self->name, sizeof self->name, "%s", name);
    self->dir = strdup (dir);
    self->map_bytes = map_bytes;
    self->max_map_bytes = max_map_bytes;
    self->store_p = store_p;
    self->snap_fd = -1;
    snprintf (self->snap_path, sizeof self->snap_path, "%s/snapshot.mdb.tmp",
              dir);
    repl_store_position (*store_p, &self->epoch, &self->seq);
    self->epoch_seen = self->epoch;
    return self;
}

static void
s_snap_drop (repl_sink_t *self)
{
    if (self->snap_fd >= 0) {
        close (self->snap_fd);
        self->snap_fd = -1;
        unlink (self->snap_path);
    }
}

void
repl_sink_destroy (repl_sink_t **self_p)
{
    repl_sink_t *self = *self_p;
    if (!self)
        return;
    repl_sink_unfollow (self);
    free (self->dir);
    free (self);
    *self_p = NULL;
}

static void
s_hello (repl_sink_t *self, int64_t now_ms)
{
    s_snap_drop (self);
    zmsg_t *msg = zmsg_new ();
    zmsg_addstr (msg, "HELLO");
    zmsg_addstr (msg, self->name);
    s_add64 (msg, self->epoch);
    s_add64 (msg, self->seq);
    if (zmsg_send (&msg, self->socket) != 0)
        zmsg_destroy (&msg);
    self->hello_ms = now_ms;
    self->heard_ms = now_ms;
}

//  A pass could not be applied or committed (logged by the caller): the
//  first time the standby asks again at once (a map that may grow has
//  grown when the next transaction begins); then it says why, once, and
//  waits REPL_RETRY_MS, doubling up to REPL_RETRY_MAX_MS, reading no
//  pass meanwhile (repl.h).
static void
s_failed (repl_sink_t *self, int64_t now_ms)
{
    self->in_sync = false;
    if (++self->failures == 1) {
        s_hello (self, now_ms);
        return;
    }
    int64_t wait_ms = REPL_RETRY_MS;
    for (unsigned round = 2; round < self->failures
                             && wait_ms < REPL_RETRY_MAX_MS; round++)
        wait_ms *= 2;
    if (wait_ms > REPL_RETRY_MAX_MS)
        wait_ms = REPL_RETRY_MAX_MS;
    self->retry_ms = now_ms + wait_ms;
    s_snap_drop (self);
    if (self->failures > 2)
        return;
    store_info_t info;
    store_info (*self->store_p, &info);
    log_error ("cluster: this standby cannot take the active's passes after "
               "pass %" PRIu64 " (its store's map: %.1f MiB in use of %zu "
               "MiB, %zu MiB at most%s; %" PRIu64 " MiB free on its disk): it "
               "leaves the sync set and asks again every %d s at most; give "
               "it room (a larger --max-map-size-mb, or disk space) and "
               "restart it, and it catches up", self->seq,
               (double) info.used_bytes / (1 << 20), info.map_bytes >> 20,
               info.max_bytes >> 20,
               info.map_bytes >= info.max_bytes ? ", reached" : "",
               info.disk_free_bytes >> 20, REPL_RETRY_MAX_MS / 1000);
}

//  A pass (or a snapshot) went in: the failures are over.
static void
s_succeeded (repl_sink_t *self)
{
    if (self->failures > 1)
        log_warn ("cluster: this standby takes the active's passes again "
                  "(at pass %" PRIu64 ")", self->seq);
    self->failures = 0;
}

int
repl_sink_follow (repl_sink_t *self, const char *endpoint, zcert_t *cert,
                  const char *server_key, char *err, size_t err_len)
{
    repl_sink_unfollow (self);
    zsock_t *socket = zsock_new (ZMQ_DEALER);
    if (!socket) {
        snprintf (err, err_len, "cannot create a socket");
        return -1;
    }
    zsock_set_linger (socket, 0);
    zsock_set_sndhwm (socket, 10000);
    zsock_set_rcvhwm (socket, 100000);
    zsock_set_maxmsgsize (socket, (int64_t) REPL_SNAP_CHUNK * 64 + 1024);
    if (cert)
        keys_curve_client (socket, cert, server_key);
    if (zsock_connect (socket, "%s", endpoint) != 0) {
        snprintf (err, err_len, "cannot connect to %s", endpoint);
        zsock_destroy (&socket);
        return -1;
    }
    self->socket = socket;
    self->endpoint = strdup (endpoint);
    s_hello (self, zclock_mono ());
    return 0;
}

void
repl_sink_unfollow (repl_sink_t *self)
{
    s_snap_drop (self);
    zsock_destroy (&self->socket);
    free (self->endpoint);
    self->endpoint = NULL;
}

zsock_t *
repl_sink_socket (repl_sink_t *self)
{
    return self->socket;
}

static void
s_ack (repl_sink_t *self, const char *type, uint64_t value)
{
    zmsg_t *msg = zmsg_new ();
    zmsg_addstr (msg, type);
    s_add64 (msg, value);
    if (zmsg_send (&msg, self->socket) != 0)
        zmsg_destroy (&msg);
}

//  Applies pass SEQ of EPOCH (its JOURNAL) into the batch's transaction,
//  begun when none is. Nothing is durable, or acknowledged, before
//  s_batch_commit. Returns 0, or -1 (the batch is undone).
static int
s_apply (repl_sink_t *self, uint64_t epoch, uint64_t seq, zframe_t *journal)
{
    if (!self->batch)
        self->batch = store_begin (*self->store_p, true);
    char err [256] = "";
    int rc = self->batch ? store_apply (self->batch, zframe_data (journal),
                                        zframe_size (journal), err,
                                        sizeof err)
                         : STORE_EIO;
    if (rc < 0) {
        log_error ("cluster: cannot apply pass %" PRIu64 ": %s", seq,
                   *err ? err : store_last_error (*self->store_p));
        store_abort (&self->batch);
        return -1;
    }
    self->batch_epoch = epoch;
    self->batch_seq = seq;
    return 0;
}

//  Commits the passes of the batch with the last one's sequence, in one
//  transaction (one fsync for all the passes that came together), then
//  acknowledges the last: the active counts every pass up to it as held.
//  Returns 0 (also with no batch), or -1 (none of them is applied).
static int
s_batch_commit (repl_sink_t *self)
{
    if (!self->batch)
        return 0;
    int rc = repl_store_mark (self->batch, self->batch_epoch,
                              self->batch_seq);
    if (rc >= 0)
        rc = store_commit (&self->batch);
    else
        store_abort (&self->batch);
    if (rc != 0) {
        log_error ("cluster: cannot commit passes %" PRIu64 " to %" PRIu64
                   ": %s", self->seq + 1, self->batch_seq,
                   store_last_error (*self->store_p));
        return -1;
    }
    self->epoch = self->batch_epoch;
    self->seq = self->batch_seq;
    s_succeeded (self);
    s_ack (self, "ACK", self->seq);
    return 0;
}

//  The snapshot is whole: it becomes the store.
static int
s_install (repl_sink_t *self, uint64_t size)
{
    if (self->snap_got != size || fsync (self->snap_fd) != 0) {
        log_error ("cluster: the snapshot is not whole (%" PRIu64 " of %"
                   PRIu64 " bytes)", self->snap_got, size);
        s_snap_drop (self);
        return -1;
    }
    close (self->snap_fd);
    self->snap_fd = -1;
    store_destroy (self->store_p);
    char data [4200];
    snprintf (data, sizeof data, "%s/data.mdb", self->dir);
    char err [1024];
    bool installed = rename (self->snap_path, data) == 0;
    if (!installed) {
        log_error ("cluster: cannot install the snapshot as %s: %s", data,
                   strerror (errno));
        unlink (self->snap_path);
    }
    int fd = open (self->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        if (fsync (fd) != 0)
            log_warn ("cluster: cannot sync %s: %s", self->dir,
                      strerror (errno));
        close (fd);
    }
    *self->store_p = store_open (self->dir, self->map_bytes,
                                 self->max_map_bytes, err, sizeof err);
    if (!*self->store_p) {
        log_error ("cluster: cannot open the store after a snapshot: %s",
                   err);
        return -1;
    }
    repl_store_position (*self->store_p, &self->epoch, &self->seq);
    if (!installed)
        return -1;
    log_info ("cluster: installed a snapshot at pass %" PRIu64 " (%" PRIu64
              " bytes)", self->seq, size);
    return 0;
}

int
repl_sink_read (repl_sink_t *self, int64_t now_ms)
{
    int rc = 0;
    for (int count = 0; count < 1000 && self->socket && rc == 0; count++) {
        zmsg_t *msg = zmsg_recv_nowait (self->socket);
        if (!msg)
            break;
        char *type = zmsg_size (msg) ? zframe_strdup (zmsg_first (msg)) : NULL;
        uint64_t epoch = 0, seq = 0, value = 0;
        bool numbered = s_frame64 (msg, 1, &epoch) && s_frame64 (msg, 2, &seq);
        //  The passes that follow one another are applied together;
        //  anything else first sees them committed
        bool batchable = type && streq (type, "PASS") && numbered
                         && epoch >= self->epoch_seen
                         && (!self->batch || epoch == self->batch_epoch);
        if (!batchable && self->batch && s_batch_commit (self) != 0) {
            s_failed (self, now_ms);
            rc = -1;
        }
        if (rc != 0)
            ;
        else
        if (self->retry_ms && type && !streq (type, "REFUSED")
            && !streq (type, "PING"))
            ;   //  Waiting to ask again (s_failed): no pass is read
        else
        if (!type)
            ;
        else
        if (streq (type, "REFUSED")) {
            zframe_t *why = zmsg_next (msg);
            char *text = why ? zframe_strdup (why) : strdup ("");
            log_error ("cluster: the active refused this standby: %s", text);
            free (text);
        }
        else
        if (!numbered || epoch < self->epoch_seen)
            ;   //  Malformed, or of an older leadership: refused
        else {
            self->epoch_seen = epoch;
            self->heard_ms = now_ms;
            uint64_t held = self->batch ? self->batch_seq : self->seq;
            if (streq (type, "PASS") && zmsg_size (msg) == 4) {
                if (seq == held + 1) {
                    zframe_t *journal = zmsg_last (msg);
                    rc = s_apply (self, epoch, seq, journal);
                    if (rc != 0)
                        s_failed (self, now_ms);
                }
                else
                if (seq > held + 1) {
                    //  A gap: what came before it is kept, then start over
                    if (s_batch_commit (self) != 0) {
                        rc = -1;
                        s_failed (self, now_ms);
                    }
                    else
                        s_hello (self, now_ms);
                }
            }
            else
            if (streq (type, "SNAP") && zmsg_size (msg) == 5
                && s_frame64 (msg, 3, &value)) {
                if (value == 0) {
                    //  Until it is whole, this store is behind
                    self->in_sync = false;
                    s_snap_drop (self);
                    self->snap_fd = open (self->snap_path, O_WRONLY | O_CREAT
                                          | O_TRUNC | O_CLOEXEC, 0600);
                    self->snap_seq = seq;
                    self->snap_epoch = epoch;
                    self->snap_got = 0;
                    if (self->snap_fd < 0) {
                        log_error ("cluster: cannot write %s: %s",
                                   self->snap_path, strerror (errno));
                        rc = -1;
                    }
                }
                zframe_t *bytes = zmsg_last (msg);
                if (self->snap_fd >= 0 && value == self->snap_got
                    && seq == self->snap_seq) {
                    ssize_t wrote = pwrite (self->snap_fd, zframe_data (bytes),
                                            zframe_size (bytes), (off_t) value);
                    if (wrote != (ssize_t) zframe_size (bytes)) {
                        log_error ("cluster: cannot write %s: %s",
                                   self->snap_path, strerror (errno));
                        s_snap_drop (self);
                        rc = -1;
                    }
                    else {
                        self->snap_got += (uint64_t) wrote;
                        s_ack (self, "SNAPACK", self->snap_got);
                    }
                }
            }
            else
            if (streq (type, "SNAPEND") && zmsg_size (msg) == 4
                && s_frame64 (msg, 3, &value) && self->snap_fd >= 0
                && seq == self->snap_seq) {
                rc = s_install (self, value);
                if (rc == 0) {
                    s_succeeded (self);
                    s_ack (self, "ACK", self->seq);
                }
                else
                    s_failed (self, now_ms);
            }
            else
            if (streq (type, "PING") && zmsg_size (msg) == 4
                && s_frame64 (msg, 3, &value)) {
                //  The active releases nothing a sync standby has not
                //  acknowledged: in sync, this one holds all it released
                self->in_sync = value == 1;
                //  Answered with what it holds of this leadership, so an
                //  idle active hears its standbys (silent ones are gone)
                if (self->snap_fd < 0 && self->seq <= seq
                    && (self->epoch == epoch || self->seq == 0))
                    s_ack (self, "ACK", self->seq);
            }
        }
        free (type);
        zmsg_destroy (&msg);
    }
    if (rc == 0 && s_batch_commit (self) != 0) {
        s_failed (self, now_ms);
        rc = -1;
    }
    return rc;
}

void
repl_sink_tick (repl_sink_t *self, int64_t now_ms)
{
    if (self->socket && self->retry_ms && now_ms >= self->retry_ms) {
        self->retry_ms = 0;
        s_hello (self, now_ms);
        return;
    }
    if (self->socket && self->retry_ms)
        return;
    if (self->socket && now_ms - self->heard_ms > REPL_SILENT_MS
        && now_ms - self->hello_ms > REPL_SILENT_MS)
        s_hello (self, now_ms);
}

bool
repl_sink_in_sync (repl_sink_t *self)
{
    return self->in_sync;
}

uint64_t
repl_sink_epoch_seen (repl_sink_t *self)
{
    return self->epoch_seen;
}

void
repl_sink_position (repl_sink_t *self, uint64_t *epoch, uint64_t *seq)
{
    *epoch = self->epoch;
    *seq = self->seq;
}

int64_t
repl_sink_heard_ms (repl_sink_t *self)
{
    return self->heard_ms;
}
