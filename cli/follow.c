/*  =========================================================================
    follow - gridcli's live output (follow.h)
    =========================================================================
*/
#include "follow.h"

#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../proto/names.h"
#include "../proto/proto.h"
#include "render.h"
#include "render_job.h"
#include "request.h"
#include "util.h"

#define S_PAGE (1024 * 1024)     //  Bytes asked per job.output
#define S_POLL_MS 1000           //  A broker without job.watch: how often
#define S_WATCH_MAX_MS 10000     //  Longest a job.watch is parked

//  One (step, node) being followed.
typedef struct {
    char node [NAME_MAX_LEN + 1];
    int step;
    int attempt;                 //  The attempt followed, 0 until known
    int64_t offset;              //  Bytes of it written so far
    bool done;                   //  The step ended on the node
    bool succeeded;              //  ... with status success
    char *line;                  //  Prefixed: the start of a line not yet
    size_t line_len;             //  ended (owned)
    char reason [600];           //  The broker's last not_found sentence
} s_cell_t;

typedef struct {
    const cli_settings_t *settings;
    const char *job;
    bool stderr_;
    bool prefix;                 //  Lines start with "node | "
    FILE *out;
    FILE *err;
    int64_t version;             //  job.watch: the version last seen
    bool watch;                  //  The broker has job.watch
} s_follow_t;

//  Writes LEN bytes of CELL's output: as they are, or, prefixed, each
//  whole line after its node. Returns 0 or -1 (OUT failed).
static int
s_write (s_follow_t *self, s_cell_t *cell, const char *bytes, size_t len)
{
    //  Written at once, also into a pipe (gridcli ... --follow | grep)
    if (!self->prefix) {
        if (len && fwrite (bytes, 1, len, self->out) != len)
            return -1;
        return fflush (self->out) ? -1 : 0;
    }
    while (len > 0) {
        const char *end = memchr (bytes, '\n', len);
        size_t take = end ? (size_t) (end - bytes) + 1 : len;
        cell->line = (char *) cli_realloc (cell->line, cell->line_len + take);
        memcpy (cell->line + cell->line_len, bytes, take);
        cell->line_len += take;
        if (end) {
            fprintf (self->out, "%s | ", cell->node);
            fwrite (cell->line, 1, cell->line_len, self->out);
            cell->line_len = 0;
        }
        bytes += take;
        len -= take;
    }
    fflush (self->out);
    return ferror (self->out) ? -1 : 0;
}

//  The last line of CELL, when it did not end with a newline.
static void
s_flush_line (s_follow_t *self, s_cell_t *cell)
{
    if (self->prefix && cell->line_len) {
        fprintf (self->out, "%s | ", cell->node);
        fwrite (cell->line, 1, cell->line_len, self->out);
        fputc ('\n', self->out);
    }
    cell->line_len = 0;
}

//  True for the statuses of an attempt in flight.
static bool
s_in_flight (const char *status)
{
    return streq (status, "dispatched") || streq (status, "acknowledged")
           || streq (status, "running");
}

//  Writes what has arrived of CELL since last time. Returns CLI_EXIT_OK
//  (also when nothing has: then CELL->reason says why), or an exit code
//  after a sentence on ERR.
static int
s_pull (s_follow_t *self, s_cell_t *cell)
{
    client_t *client = self->settings->client;
    const char *stream = self->stderr_ ? "stderr" : "stdout";
    while (!cell->done) {
        client_reply_t reply;
        int sent = cell->attempt
            ? client_job_output_attempt (client, self->job, cell->node,
                                         cell->step, stream, cell->attempt,
                                         cell->offset, S_PAGE, &reply)
            : client_job_output (client, self->job, cell->node, cell->step,
                                 stream, cell->offset, S_PAGE, &reply);
        if (sent == CLIENT_OK && !reply.ok
            && streq (reply.code, PROTO_ERR_NOT_FOUND)) {
            //  Not started yet (or never to run): the job's end says
            snprintf (cell->reason, sizeof cell->reason, "%s",
                      reply.message ? reply.message : "not found");
            client_reply_clear (&reply);
            return CLI_EXIT_OK;
        }
        int rc = cli_answer (self->settings, sent, &reply, self->err);
        if (rc != CLI_EXIT_OK) {
            client_reply_clear (&reply);
            return rc;
        }
        const pv_t *data = reply.data;
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (data, "data"), &len);
        int64_t next = cli_field_int (data, "next", -1);
        int64_t size = cli_field_int (data, "size", -1);
        int64_t attempt = cli_field_int (data, "attempt", 0);
        char status [64] = "";
        cli_field (data, "status", status, sizeof status);
        //  A broker before live output serves finished steps only
        bool complete = true;
        pv_get_bool (pv_map_get (data, "complete"), &complete);
        if (pv_type (pv_map_get (data, "data")) != PV_BIN || size < 0
            || next != cell->offset + (int64_t) len || attempt < 1
            || attempt > PROTO_MAX_ATTEMPT) {
            fprintf (self->err, "gridcli: the broker's answer to job.output "
                     "is malformed\n");
            client_reply_clear (&reply);
            return CLI_EXIT_UNREACHABLE;
        }
        cell->attempt = (int) attempt;
        if (s_write (self, cell, bytes, len)) {
            fprintf (self->err, "gridcli: cannot write the output: %s\n",
                     strerror (errno));
            client_reply_clear (&reply);
            return CLI_EXIT_UNREACHABLE;
        }
        cell->offset = next;
        client_reply_clear (&reply);
        if (len > 0 && next < size)
            continue;            //  More has arrived than one page
        if (next < size)
            return CLI_EXIT_OK;  //  A piece is on its way
        if (complete) {
            cell->done = true;
            cell->succeeded = !*status || streq (status, "success");
            s_flush_line (self, cell);
        }
        else
        if (!s_in_flight (status)) {
            //  That attempt ended; the step is retried
            s_flush_line (self, cell);
            fprintf (self->err, "gridcli: %s step %d attempt %d ended %s; "
                     "following attempt %d\n", cell->node, cell->step,
                     cell->attempt, *status ? status : "?",
                     cell->attempt + 1);
            cell->attempt++;
            cell->offset = 0;
        }
        return CLI_EXIT_OK;
    }
    return CLI_EXIT_OK;
}

//  Waits until the job changes (job.watch), or a second with a broker
//  that has no job.watch. *FINISHED_P says whether the job has ended.
static int
s_wait_change (s_follow_t *self, bool *finished_p)
{
    client_t *client = self->settings->client;
    int64_t watch_ms = self->settings->request_timeout_ms
                       / CLI_REQUEST_TRIES / 2;
    if (watch_ms > S_WATCH_MAX_MS)
        watch_ms = S_WATCH_MAX_MS;
    client_reply_t reply;
    int sent = self->watch
        ? client_job_watch (client, self->job, self->version, watch_ms,
                            &reply)
        : client_job_get (client, self->job, &reply);
    if (self->watch && sent == CLIENT_OK && !reply.ok
        && streq (reply.code, PROTO_ERR_UNKNOWN_TYPE)) {
        client_reply_clear (&reply);
        self->watch = false;
        sent = client_job_get (client, self->job, &reply);
    }
    int rc = cli_answer (self->settings, sent, &reply, self->err);
    const pv_t *record = rc == CLI_EXIT_OK ? reply.data : NULL;
    if (record && self->watch) {
        self->version = cli_field_int (record, "version", -1);
        record = pv_map_get (record, "progress");
    }
    *finished_p = record && cli_job_finished (record);
    client_reply_clear (&reply);
    if (rc == CLI_EXIT_OK && !self->watch && !*finished_p) {
        int64_t deadline_ms = zclock_mono () + S_POLL_MS;
        while (!zsys_interrupted && zclock_mono () < deadline_ms)
            zclock_sleep (50);
        if (zsys_interrupted)
            rc = CLI_EXIT_INTERRUPTED;
    }
    return rc;
}

//  Follows COUNT cells until each is done, or the job has ended and one
//  more pull found nothing new. *ENDED_P says the job ended first.
static int
s_follow (s_follow_t *self, s_cell_t *cells, size_t count, bool *ended_p)
{
    bool finished = false;
    *ended_p = false;
    int rc = CLI_EXIT_OK;
    while (rc == CLI_EXIT_OK) {
        bool all_done = true;
        for (size_t index = 0; index < count && rc == CLI_EXIT_OK; index++) {
            rc = s_pull (self, &cells [index]);
            all_done = all_done && cells [index].done;
        }
        if (rc != CLI_EXIT_OK || all_done)
            break;
        if (finished) {
            *ended_p = true;
            break;
        }
        rc = s_wait_change (self, &finished);
    }
    for (size_t index = 0; index < count; index++) {
        s_flush_line (self, &cells [index]);
        free (cells [index].line);
        cells [index].line = NULL;
    }
    fflush (self->out);
    return rc;
}

int
cli_follow_output (const cli_settings_t *settings, const char *job,
                   const char *node, int step, bool stderr_, FILE *out,
                   FILE *err)
{
    s_follow_t self = {
        .settings = settings, .job = job, .stderr_ = stderr_, .out = out,
        .err = err, .version = -1, .watch = true
    };
    s_cell_t cell;
    memset (&cell, 0, sizeof cell);
    snprintf (cell.node, sizeof cell.node, "%s", node);
    cell.step = step;
    bool ended = false;
    int rc = s_follow (&self, &cell, 1, &ended);
    if (rc == CLI_EXIT_INTERRUPTED)
        fprintf (err, "gridcli: stopped following; job %s goes on\n", job);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (!cell.done) {
        //  The job ended without this step on this node
        fprintf (err, "gridcli: %s\n", *cell.reason ? cell.reason
                                                    : "the step never ran");
        return CLI_EXIT_REFUSED;
    }
    return cell.succeeded ? CLI_EXIT_OK : CLI_EXIT_JOB_FAILED;
}

int
cli_follow_job (const cli_settings_t *settings, const char *job, FILE *out,
                FILE *err)
{
    client_reply_t reply;
    int rc = cli_answer (settings, client_job_get (settings->client, job,
                                                   &reply),
                         &reply, err);
    if (rc != CLI_EXIT_OK) {
        client_reply_clear (&reply);
        return rc;
    }
    const pv_t *expected = pv_map_get (reply.data, "expected");
    int64_t steps = cli_step_count (reply.data);
    size_t nodes = pv_size (expected);
    size_t count = steps > 0 ? (size_t) steps * nodes : 0;
    s_cell_t *cells = (s_cell_t *) calloc (count ? count : 1,
                                           sizeof (s_cell_t));
    assert (cells);
    for (size_t index = 0; index < count; index++) {
        cells [index].step = (int) (index / nodes);
        cli_scalar (pv_array_at (expected, index % nodes),
                    cells [index].node, sizeof cells [index].node);
    }
    client_reply_clear (&reply);
    s_follow_t self = {
        .settings = settings, .job = job, .prefix = nodes > 1, .out = out,
        .err = err, .version = -1, .watch = true
    };
    bool ended = false;
    rc = count ? s_follow (&self, cells, count, &ended) : CLI_EXIT_OK;
    free (cells);
    return rc;
}
