/*  =========================================================================
    epoch - the fence a broker cluster's epoch puts at agents and relays
    (epoch.h)
    =========================================================================
*/
#include "epoch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mpscan.h"

struct _epoch_gate_t {
    char *path;                 //  Where the highest is kept, or NULL
    uint64_t highest;           //  Highest epoch seen
    uint64_t warned;            //  Last refused epoch warned of (0: none)
    uint64_t refused;           //  Messages refused
    int64_t welcome_refused_ms; //  First refused welcome since the last
                                //  accepted one (0: none)
};

//  Reads the highest epoch from the gate's file: a missing file is 0,
//  anything but one decimal line is logged and taken as 0.
static void
s_load (epoch_gate_t *self)
{
    FILE *file = fopen (self->path, "r");
    if (!file) {
        if (errno != ENOENT)
            log_warn ("cannot read %s: %s: taking epoch 0", self->path,
                      strerror (errno));
        return;
    }
    char line [32] = "";
    size_t got = fread (line, 1, sizeof line - 1, file);
    fclose (file);
    line [got] = 0;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull (line, &end, 10);
    if (got == 0 || strlen (line) != got || line [0] < '0' || line [0] > '9'
        || errno
        || (*end && strcmp (end, "\n") != 0) || value > INT64_MAX) {
        log_warn ("%s does not hold an epoch: taking epoch 0", self->path);
        return;
    }
    self->highest = value;
}

//  Writes the highest epoch to the gate's file, through a temporary file
//  so that a crash leaves the old value or the new, never half of one.
static void
s_save (epoch_gate_t *self)
{
    if (!self->path)
        return;
    char temp [4096];
    if (snprintf (temp, sizeof temp, "%s.tmp", self->path)
        >= (int) sizeof temp)
        return;
    FILE *file = fopen (temp, "w");
    bool written = file
                   && fprintf (file, "%" PRIu64 "\n", self->highest) > 0;
    if (file) {
        written = fflush (file) == 0 && written;
        written = fsync (fileno (file)) == 0 && written;
        written = fclose (file) == 0 && written;
    }
    if (!written || rename (temp, self->path) != 0) {
        log_warn ("cannot write epoch %" PRIu64 " to %s: %s (kept in "
                  "memory)", self->highest, self->path, strerror (errno));
        unlink (temp);
    }
}

epoch_gate_t *
epoch_gate_new (const char *path)
{
    epoch_gate_t *self = (epoch_gate_t *) calloc (1, sizeof (epoch_gate_t));
    if (!self)
        return NULL;
    if (path) {
        self->path = strdup (path);
        if (!self->path) {
            free (self);
            return NULL;
        }
        s_load (self);
    }
    return self;
}

void
epoch_gate_destroy (epoch_gate_t **self_p)
{
    epoch_gate_t *self = *self_p;
    if (self) {
        free (self->path);
        free (self);
        *self_p = NULL;
    }
}

epoch_verdict_t
epoch_gate_judge (epoch_gate_t *self, uint64_t epoch, bool welcome,
                  int64_t now_ms)
{
    if (epoch == 0)
        return EPOCH_PASS;
    if (epoch >= self->highest) {
        if (welcome)
            self->welcome_refused_ms = 0;
        if (epoch > self->highest) {
            self->highest = epoch;
            s_save (self);
        }
        return EPOCH_PASS;
    }
    if (welcome) {
        if (!self->welcome_refused_ms)
            self->welcome_refused_ms = now_ms ? now_ms : 1;
        else
        if (now_ms - self->welcome_refused_ms >= EPOCH_WELCOME_HOLD_MS) {
            self->welcome_refused_ms = 0;
            self->highest = epoch;
            self->warned = 0;
            s_save (self);
            return EPOCH_RESET;
        }
    }
    self->refused++;
    if (self->warned == epoch)
        return EPOCH_REFUSE;
    self->warned = epoch;
    return EPOCH_REFUSE_WARN;
}

uint64_t
epoch_gate_highest (const epoch_gate_t *self)
{
    return self->highest;
}

uint64_t
epoch_gate_refused (const epoch_gate_t *self)
{
    return self->refused;
}

uint64_t
epoch_of_body (const void *data, size_t size)
{
    size_t at = 0, len = 0;
    if (mpscan_map_find (data, size, "epoch", false, &at, &len) != 0
        || len == 0)
        return 0;
    const uint8_t *value = (const uint8_t *) data + at;
    uint8_t head = value [0];
    if (head <= 0x7f)
        return len == 1 ? head : 0;
    size_t width = head == 0xcc || head == 0xd0 ? 1
                 : head == 0xcd || head == 0xd1 ? 2
                 : head == 0xce || head == 0xd2 ? 4
                 : head == 0xcf || head == 0xd3 ? 8 : 0;
    if (!width || len != 1 + width)
        return 0;
    //  A signed int that is negative is no epoch
    if (head >= 0xd0 && (value [1] & 0x80))
        return 0;
    uint64_t epoch = 0;
    for (size_t index = 1; index <= width; index++)
        epoch = (epoch << 8) | value [index];
    return epoch;
}
