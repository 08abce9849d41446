/*  =========================================================================
    blobs - the agent's blob cache and the fetch of blobs from the broker

    The fetches wait in a list, the first one under way: its .part file
    open, the offset it asked for, and when it asked.
    =========================================================================
*/
#include "blobs.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../proto/log.h"
#include "../proto/sha256.h"

typedef struct {
    char sha256 [SHA256_HEX];    //  The blob
    uint64_t size;               //  Its size, as the command said
    zlistx_t *waiters;           //  Opaque waiters (not owned)
} s_fetch_t;

struct _agent_blobs_t {
    char *dir;                   //  The cache
    uint64_t cap_bytes;          //  Its cap
    const char *node;            //  Our node id (blob_get says it)
    link_t *link;                //  Where blob_get goes
    agent_blobs_ready_fn *ready;
    void *arg;
    zlistx_t *fetches;           //  s_fetch_t, the first under way
    bool up;                     //  Welcomed, blobs granted
    bool refused;                //  Welcomed without blobs
    int fd;                      //  The first fetch's .part, or -1
    uint64_t offset;             //  ... the offset asked for
    int64_t asked_ms;            //  ... when (0: nothing asked)
    uint64_t chunks;             //  Chunks taken since start
    uint64_t chunks_refused;     //  Chunks refused since start
};

//  Counts a blob_chunk refused (not asked for, of the wrong size, or
//  completing a content that is not its name) and says so: each of the
//  first ten, then every hundredth, so a hostile peer cannot fill the log
static void
s_refuse (agent_blobs_t *self, const char *sha256, uint64_t offset,
          const char *why)
{
    self->chunks_refused++;
    if (self->chunks_refused <= 10 || self->chunks_refused % 100 == 0)
        log_warn ("refused a blob_chunk of %.12s at %" PRIu64 " (%" PRIu64
                  " refused so far): %s", sha256 ? sha256 : "?", offset,
                  self->chunks_refused, why);
}

static void
s_fetch_free (void **item_p)
{
    s_fetch_t *fetch = (s_fetch_t *) *item_p;
    if (fetch) {
        zlistx_destroy (&fetch->waiters);
        free (fetch);
    }
    *item_p = NULL;
}

static bool
s_name_valid (const char *text)
{
    if (!text || strlen (text) != SHA256_HEX - 1)
        return false;
    for (const char *at = text; *at; at++)
        if (!((*at >= '0' && *at <= '9') || (*at >= 'a' && *at <= 'f')))
            return false;
    return true;
}

agent_blobs_t *
agent_blobs_new (const char *dir, uint64_t cap_bytes, const char *node,
                 link_t *link, agent_blobs_ready_fn *ready,
                 void *arg, char *err, size_t err_len)
{
    if (mkdir (dir, 0700) && errno != EEXIST) {
        snprintf (err, err_len, "cannot make the blob cache %s: %s", dir,
                  strerror (errno));
        return NULL;
    }
    agent_blobs_t *self = (agent_blobs_t *) calloc (1, sizeof (*self));
    if (!self || !(self->dir = strdup (dir))
    ||  !(self->fetches = zlistx_new ())) {
        agent_blobs_destroy (&self);
        snprintf (err, err_len, "out of memory");
        return NULL;
    }
    zlistx_set_destructor (self->fetches, s_fetch_free);
    self->cap_bytes = cap_bytes;
    self->node = node;
    self->link = link;
    self->ready = ready;
    self->arg = arg;
    self->fd = -1;
    return self;
}

void
agent_blobs_destroy (agent_blobs_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    agent_blobs_t *self = *self_p;
    if (self->fd >= 0)
        close (self->fd);
    zlistx_destroy (&self->fetches);
    free (self->dir);
    free (self);
    *self_p = NULL;
}

const char *
agent_blobs_dir (const agent_blobs_t *self)
{
    return self->dir;
}

static void
s_path (const agent_blobs_t *self, const char *sha256, const char *suffix,
        char *path, size_t path_len)
{
    snprintf (path, path_len, "%s/%s%s", self->dir, sha256, suffix);
}

bool
agent_blobs_have (agent_blobs_t *self, const char *sha256)
{
    if (!s_name_valid (sha256))
        return false;
    char path [PATH_MAX];
    s_path (self, sha256, "", path, sizeof path);
    struct stat info;
    if (lstat (path, &info) || !S_ISREG (info.st_mode))
        return false;
    //  Used now: the last to go when the cache is cut
    utimensat (AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
    return true;
}

//  Asks for the first fetch's chunk at its offset.
static void
s_ask (agent_blobs_t *self, int64_t now_ms)
{
    s_fetch_t *fetch = (s_fetch_t *) zlistx_first (self->fetches);
    if (!fetch || !self->up)
        return;
    proto_msg_t get = {
        .type = PROTO_BLOB_GET, .node = (char *) self->node,
        .sha256 = fetch->sha256, .offset = self->offset
    };
    link_send (self->link, &get);
    self->asked_ms = now_ms ? now_ms : 1;
}

//  Drops the least recently used blobs past the cap (never KEEP).
static void
s_cut (agent_blobs_t *self, const char *keep)
{
    for (int round = 0; round < 64; round++) {
        DIR *dir = opendir (self->dir);
        if (!dir)
            return;
        uint64_t total = 0;
        char oldest [SHA256_HEX] = "";
        struct timespec oldest_at = { 0, 0 };
        struct dirent *entry;
        while ((entry = readdir (dir))) {
            if (!s_name_valid (entry->d_name))
                continue;
            struct stat info;
            if (fstatat (dirfd (dir), entry->d_name, &info,
                         AT_SYMLINK_NOFOLLOW) || !S_ISREG (info.st_mode))
                continue;
            total += (uint64_t) info.st_size;
            if (strcmp (entry->d_name, keep) == 0)
                continue;
            if (!*oldest || info.st_mtim.tv_sec < oldest_at.tv_sec
            ||  (info.st_mtim.tv_sec == oldest_at.tv_sec
                 && info.st_mtim.tv_nsec < oldest_at.tv_nsec)) {
                memcpy (oldest, entry->d_name, SHA256_HEX);
                oldest_at = info.st_mtim;
            }
        }
        closedir (dir);
        if (total <= self->cap_bytes || !*oldest)
            return;
        char path [PATH_MAX];
        s_path (self, oldest, "", path, sizeof path);
        unlink (path);
        log_info ("blob cache over %" PRIu64 " bytes: dropped %.12s",
                  self->cap_bytes, oldest);
    }
}

//  The first fetch ended: its waiters get ERROR (NULL: the blob is in
//  the cache); the next fetch starts.
static void s_start (agent_blobs_t *self, int64_t now_ms);

static void
s_end (agent_blobs_t *self, const char *error, int64_t now_ms)
{
    s_fetch_t *fetch = (s_fetch_t *) zlistx_first (self->fetches);
    if (!fetch)
        return;
    if (self->fd >= 0)
        close (self->fd);
    self->fd = -1;
    self->asked_ms = 0;
    char message [256];
    if (error) {
        char path [PATH_MAX];
        s_path (self, fetch->sha256, ".part", path, sizeof path);
        unlink (path);
        snprintf (message, sizeof message, "blob %s: %s", fetch->sha256,
                  error);
        log_warn ("%s", message);
    }
    else
        log_debug ("blob %.12s fetched (%" PRIu64 " bytes)", fetch->sha256,
                   fetch->size);
    //  Taken off the list first: a waiter's answer may wait for more
    zlistx_t *waiters = fetch->waiters;
    fetch->waiters = NULL;
    zlistx_delete (self->fetches, zlistx_cursor (self->fetches));
    for (void *waiter = zlistx_first (waiters); waiter;
         waiter = zlistx_next (waiters))
        self->ready (self->arg, waiter, error ? message : NULL);
    zlistx_destroy (&waiters);
    s_start (self, now_ms);
}

//  Opens the first fetch's .part and asks from where it ends.
static void
s_start (agent_blobs_t *self, int64_t now_ms)
{
    s_fetch_t *fetch = (s_fetch_t *) zlistx_first (self->fetches);
    if (!fetch || !self->up || self->fd >= 0)
        return;
    if (agent_blobs_have (self, fetch->sha256)) {
        s_end (self, NULL, now_ms);
        return;
    }
    char path [PATH_MAX];
    s_path (self, fetch->sha256, ".part", path, sizeof path);
    self->fd = open (path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat info;
    if (self->fd < 0 || fstat (self->fd, &info)) {
        char error [160];
        snprintf (error, sizeof error, "cannot write the cache: %s",
                  strerror (errno));
        s_end (self, error, now_ms);
        return;
    }
    //  Resumed from the last whole chunk it holds
    uint64_t held = (uint64_t) info.st_size;
    if (held > fetch->size)
        held = 0;
    self->offset = held - held % PROTO_BLOB_CHUNK_BYTES;
    if (ftruncate (self->fd, (off_t) self->offset)) {
        s_end (self, "cannot write the cache", now_ms);
        return;
    }
    if (self->offset)
        log_info ("blob %.12s: fetch goes on from %" PRIu64 " bytes",
                  fetch->sha256, self->offset);
    s_ask (self, now_ms);
}

int
agent_blobs_wait (agent_blobs_t *self, const char *sha256, uint64_t size,
                  void *waiter)
{
    if (!s_name_valid (sha256) || self->refused)
        return -1;
    s_fetch_t *fetch = NULL;
    for (s_fetch_t *at = (s_fetch_t *) zlistx_first (self->fetches); at;
         at = (s_fetch_t *) zlistx_next (self->fetches))
        if (strcmp (at->sha256, sha256) == 0 && at->size == size)
            fetch = at;
    if (!fetch) {
        fetch = (s_fetch_t *) calloc (1, sizeof (*fetch));
        if (!fetch || !(fetch->waiters = zlistx_new ())) {
            free (fetch);
            return -1;
        }
        memcpy (fetch->sha256, sha256, SHA256_HEX);
        fetch->size = size;
        if (!zlistx_add_end (self->fetches, fetch)) {
            void *item = fetch;
            s_fetch_free (&item);
            return -1;
        }
    }
    if (!zlistx_add_end (fetch->waiters, waiter))
        return -1;
    s_start (self, zclock_mono ());
    return 0;
}

//  The digest of the open .part (SIZE bytes) into HEX; -1 on a read error.
static int
s_digest (int fd, char *hex)
{
    sha256_t context;
    sha256_init (&context);
    char buffer [65536];
    off_t at = 0;
    for (;;) {
        ssize_t got = pread (fd, buffer, sizeof buffer, at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        sha256_update (&context, buffer, (size_t) got);
        at += got;
    }
    uint8_t digest [SHA256_BYTES];
    sha256_final (&context, digest);
    sha256_to_hex (digest, hex);
    return 0;
}

//  The first fetch is whole: checked, then named by its digest.
static void
s_whole (agent_blobs_t *self, s_fetch_t *fetch, int64_t now_ms)
{
    char hex [SHA256_HEX];
    if (fsync (self->fd) || s_digest (self->fd, hex)) {
        s_end (self, "cannot write the cache", now_ms);
        return;
    }
    if (strcmp (hex, fetch->sha256) != 0) {
        char error [160];
        snprintf (error, sizeof error, "the content fetched has the sha256 "
                  "%.16s..., not its name: refused", hex);
        s_refuse (self, fetch->sha256, self->offset, error);
        s_end (self, error, now_ms);
        return;
    }
    char part [PATH_MAX], path [PATH_MAX];
    s_path (self, fetch->sha256, ".part", part, sizeof part);
    s_path (self, fetch->sha256, "", path, sizeof path);
    if (rename (part, path)) {
        s_end (self, "cannot write the cache", now_ms);
        return;
    }
    int dir = open (self->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        fsync (dir);
        close (dir);
    }
    s_cut (self, fetch->sha256);
    s_end (self, NULL, now_ms);
}

void
agent_blobs_on_chunk (agent_blobs_t *self, const proto_msg_t *chunk,
                      int64_t now_ms)
{
    s_fetch_t *fetch = (s_fetch_t *) zlistx_first (self->fetches);
    if (!fetch || self->fd < 0 || strcmp (fetch->sha256, chunk->sha256)
    ||  chunk->offset != self->offset) {
        s_refuse (self, chunk->sha256, chunk->offset, "not asked for "
                  "(dropped)");
        return;
    }
    if (chunk->error) {
        s_end (self, chunk->error, now_ms);
        return;
    }
    uint64_t want = fetch->size - self->offset < PROTO_BLOB_CHUNK_BYTES
                  ? fetch->size - self->offset : PROTO_BLOB_CHUNK_BYTES;
    if (chunk->size != fetch->size || chunk->chunk_len != want) {
        char error [160];
        snprintf (error, sizeof error, "the broker's blob is %" PRIu64
                  " bytes, the command said %" PRIu64, chunk->size,
                  fetch->size);
        s_refuse (self, chunk->sha256, chunk->offset,
                  chunk->size != fetch->size ? error
                                             : "a chunk of the wrong size");
        s_end (self, chunk->size != fetch->size ? error
                     : "a chunk of the wrong size", now_ms);
        return;
    }
    size_t done = 0;
    while (done < chunk->chunk_len) {
        ssize_t wrote = pwrite (self->fd, chunk->chunk + done,
                                chunk->chunk_len - done,
                                (off_t) (self->offset + done));
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            char error [160];
            snprintf (error, sizeof error, "cannot write the cache: %s",
                      wrote < 0 ? strerror (errno) : "disk full");
            s_end (self, error, now_ms);
            return;
        }
        done += (size_t) wrote;
    }
    self->chunks++;
    self->offset += chunk->chunk_len;
    if (self->offset == fetch->size)
        s_whole (self, fetch, now_ms);
    else
        s_ask (self, now_ms);
}

void
agent_blobs_welcomed (agent_blobs_t *self, bool welcomed, bool granted,
                      int64_t now_ms)
{
    if (!self)
        return;          //  The link went down before the cache was made
    self->up = welcomed && granted;
    self->refused = welcomed && !granted;
    self->asked_ms = 0;
    if (welcomed && !granted) {
        //  This broker serves no blobs: nothing waits for ever
        while (zlistx_first (self->fetches))
            s_end (self, "the broker did not grant blobs", now_ms);
        return;
    }
    if (!self->up) {
        //  Asked again from the offset after the next welcome
        if (self->fd >= 0)
            close (self->fd);
        self->fd = -1;
        return;
    }
    s_start (self, now_ms);
}

void
agent_blobs_tick (agent_blobs_t *self, int64_t now_ms)
{
    if (self && self->up && self->asked_ms
    &&  now_ms - self->asked_ms >= AGENT_BLOBS_RETRY_MS)
        s_ask (self, now_ms);
}

uint64_t
agent_blobs_chunks (const agent_blobs_t *self)
{
    return self->chunks;
}

uint64_t
agent_blobs_refused (const agent_blobs_t *self)
{
    return self->chunks_refused;
}
