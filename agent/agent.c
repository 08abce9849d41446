/*  =========================================================================
    agent - gridagent: registers with the broker, runs what it is sent,
    reports every result durably

    Life of a command (key = job|step|attempt):

        command --(dedup: spool + work table)--> taken:
            spool ACK (STARTED when it starts at once), hold ack
            check backend / action / params   -> refused result
            plan, queue in the executor
        executor started  -> spool STARTED (unless already), hold started
        executor done     -> spool RESULT, drop what is held, send result
        hold timer        -> send held ack, then held started
        result_ack        -> spool DONE (kept for dedup; on disk with
                             the next commit, or S_SPOOL_FLUSH_MS later)

    The work table holds what is queued or running (the executor owns each
    record and frees it after its done call); the spool holds the rest.

    Acks and starteds are held up to S_PROGRESS_HOLD_MS before they are
    sent: a result implies both (PROTOCOL.md 4.1 rules 4 and 7), so the
    many actions that finish within the hold cost the broker one message
    instead of three. The spool records them at once all the same.

    The link to the broker (the sockets, hello, heartbeats, failover) is
    link.c's: it hands every frame it receives to s_handle, and hears
    from here of a welcome, a refusal and a forgotten node.
    =========================================================================
*/
#include "agent.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "../proto/cmdline.h"
#include "../proto/conf.h"
#include "../proto/epoch.h"
#include "../proto/keys.h"
#include "../proto/names.h"
#include "../proto/log.h"
#include "../proto/service.h"
#include "../proto/text.h"
#include "../proto/trace.h"
#include "../store/store.h"
#include "blobs.h"
#include "executor.h"
#include "facts.h"
#include "held.h"
#include "pieces.h"
#include "link.h"
#include "orphans.h"
#include "rekey.h"
#include "spool.h"

#define S_RESEND_MS 5000            //  Unacknowledged results again
#define S_REKEY_TICK_MS 1000        //  Key rotation: how often to look
#define S_RESEND_BATCH 256          //  Most results re-sent per round
#define S_FLUSH_MS 2000             //  Shutdown: wait for result_acks
#define S_STOP_CHECK_MS 20          //  Shutdown: how often to look
#define S_CANCELLED_KEEP 1024       //  Recently cancelled jobs remembered
#define S_MAX_TIMEOUT_MS (30ULL * 24 * 3600 * 1000)  //  30 days
#define S_LIVE_MS 100               //  Live output: at most one message per
                                    //  task this often
#define S_SPOOL_FLUSH_MS 500        //  result_acks reach the disk this soon
                                    //  when no other commit takes them
#define S_PROGRESS_HOLD_MS 20       //  Acks and starteds wait this long at
                                    //  most for a result that implies them


//  ---------------------------------------------------------------------
//  Sentences and signals

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
agent_signals_block (void)
{
    signal (SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGTERM);
    sigaddset (&mask, SIGINT);
    sigaddset (&mask, SIGHUP);
    if (pthread_sigmask (SIG_BLOCK, &mask, NULL))
        return -1;
    return executor_signals_block ();
}


//  ---------------------------------------------------------------------
//  The agent

typedef struct _s_work_t s_work_t;

struct _agent_t {
    agent_config_t *config;     //  Borrowed; a reload updates it
    char hostname [HOST_NAME_MAX + 1];
    zloop_t *loop;
    link_t *link;               //  To the broker
    executor_t *executor;
    store_lock_t *lock;         //  The state dir's lock (one agent per dir)
    spool_t *spool;
    zhashx_t *unspooled;        //  Spool key -> encoded RESULT (zchunk) that
                                //  the spool could not take (a full disk):
                                //  re-sent like spooled ones until acked
    backend_context_t context;  //  What plans borrow
    int signal_fd;              //  SIGTERM, SIGINT, SIGHUP
    char group_dir [PATH_MAX];  //  Running tasks' process groups (orphans.h)
    char test_dir [PATH_MAX];   //  The test backend's marks
    char instance [17];         //  This process's id in hello (hex)
    char last_notice [512];     //  Last duplicate_node notice logged
    pw_t *writer;               //  Reused for every send
    void *hello;                //  Encoded hello (built once)
    size_t hello_size;
    int resend_timer;
    int progress_timer;         //  Reports running tasks' progress
    zhashx_t *work;             //  key -> s_work_t, queued or running
    held_t *held;               //  Acks and starteds not yet sent
    pieces_t *pieces;           //  When output pieces were last sent
    zhashx_t *cancelled;        //  Recently cancelled job ids
    zlistx_t *cancelled_order;  //  Oldest first (owned strings)
    bool stopping;              //  SIGTERM seen: no new work
    bool cancel_sent;           //  Shutdown: running work was cancelled
    int64_t drain_deadline;     //  Shutdown: monotonic
    int64_t stop_deadline;      //  Shutdown: give up waiting
    uint64_t malformed;         //  Frames that did not decode
    uint64_t stale_acks;        //  result_acks entries for no waiting result
    agent_blobs_t *blobs;       //  The blob cache (<state_dir>/blobs)
    epoch_gate_t *epochs;       //  Refuses what a demoted cluster active
                                //  sends (<state_dir>/epoch)
    bool plain_hello;           //  Say hello without features (an older
                                //  broker refused them)
    bool batch_results;         //  The last welcome granted results
    bool typed_data;            //  The last welcome granted typed_data
    bool trace;                 //  The last welcome granted trace: results
                                //  carry their attempt's traceparent
    bool live_output;           //  The last welcome granted live_output
    bool facts_granted;         //  The last welcome granted facts
    bool facts_sent;            //  This session's broker has them as they are
    agent_facts_t facts;        //  The host's facts as last read
    char facts_why [512];       //  Why facts were last skipped ("": none)
    int facts_timer;            //  Reads them again (-1: none)
    int spool_timer;            //  Commits acknowledgements (-1: none)
    int live_timer;             //  Sends running tasks' new output
    double live_tokens;         //  Live output messages it may send now
                                //  (refilled at config->output_rate)
    int64_t live_refilled_ms;   //  When the tokens were last refilled
    uint64_t live_turn;         //  Live output rounds so far (who goes first)
    pw_t *batch;                //  Entries of the results not yet sent
    size_t batch_count;         //  How many
    pw_t *entry;                //  One entry being encoded
    int batch_timer;            //  Sends the batch after this loop turn,
                                //  -1 when none is armed
    rekey_t *rekey;             //  Key rotation (rekey.h), NULL when insecure
    int rekey_timer;
};

//  One command the executor holds.
struct _s_work_t {
    agent_t *agent;             //  Owner
    char key [SPOOL_KEY_MAX];   //  job|step|attempt
    char *job;
    uint32_t step;
    uint32_t attempt;
    char *what;                 //  "backend.action", for logs
    backend_plan_t *plan;       //  How it runs
    backend_outcome_t outcome;  //  In-loop actions: what they reported
    int64_t started_ms;         //  Monotonic start, 0 before
    bool recorded_started;      //  The spool says started since its take
    backend_progress_t sent;    //  The last progress sent (percent -1, "": none)
    char *traceparent;          //  The command's trace context, or NULL
    executor_task_t *task;      //  While its blob is fetched: its task
    uint64_t live_sent [2];     //  Bytes of stdout, stderr sent live so far
    int64_t live_wait_ms [2];   //  A live piece of stdout, stderr awaits
                                //  its output_ack since then (0: none)
    uint64_t live_wait_at [2];  //  ...its offset
};

//  The agent's lines (log.h): tagged with its node id by log_set_instance;
//  a line naming a job carries its id. What failed or is at risk goes out
//  with log_error and log_warn instead. s_debug lines are written at the
//  debug level (--log-level debug, or --verbose).
#define s_log(self, ...) \
    log_write (LOG_LEVEL_INFO, NULL, __VA_ARGS__)

#define s_debug(self, ...) \
    log_write (LOG_LEVEL_DEBUG, NULL, __VA_ARGS__)

//  ack or started for (job, step, attempt), sent now.
static void
s_send_progress (agent_t *self, proto_type_t type, const char *job,
                 uint32_t step, uint32_t attempt)
{
    proto_msg_t msg = {
        .type = type, .node = self->config->id, .job = (char *) job,
        .step = step, .attempt = attempt
    };
    link_send (self->link, &msg);
}


//  Sends the results gathered in the batch as one results message.
static void
s_batch_flush (agent_t *self)
{
    if (self->batch_count == 0)
        return;
    pw_reset (self->writer);
    if (proto_results_begin (self->config->id, self->batch_count,
                             self->writer) == 0) {
        pw_raw (self->writer, pw_data (self->batch), pw_size (self->batch));
        link_send_bytes (self->link, pw_data (self->writer),
                         pw_size (self->writer));
    }
    s_debug (self, "sent %zu result(s) in one results", self->batch_count);
    pw_reset (self->batch);
    self->batch_count = 0;
}

static int
s_batch_fired (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    if (timer_id == self->batch_timer)
        self->batch_timer = -1;
    s_batch_flush (self);
    return 0;
}

//  Adds RESULT to the batch that goes out once this loop turn has run
//  (results that finish together travel together). A batch stays within
//  PROTO_MAX_RESULTS entries and PROTO_RESULTS_BYTES; a result that would
//  pass either sends the batch first. Returns 0, -1 when RESULT does not
//  encode.
static int
s_batch_add (agent_t *self, const proto_msg_t *result)
{
    pw_reset (self->entry);
    if (proto_results_entry_encode (result, self->entry)) {
        log_error ("internal: the result of %s step %u does not encode",
                   result->job, result->step);
        return -1;
    }
    //  Room for the envelope: its keys, the node and the array's header
    size_t envelope = 64 + strlen (self->config->id);
    if (self->batch_count == PROTO_MAX_RESULTS
        || pw_size (self->batch) + pw_size (self->entry) + envelope
               > PROTO_RESULTS_BYTES)
        s_batch_flush (self);
    pw_raw (self->batch, pw_data (self->entry), pw_size (self->entry));
    self->batch_count++;
    if (self->batch_timer < 0)
        self->batch_timer = zloop_timer (self->loop, 0, 1, s_batch_fired,
                                         self);
    return 0;
}

//  Sends a spooled result or output piece again: a result joins the
//  batch when the broker takes batches, anything else goes as it is. An
//  output piece sent within the re-send interval is passed over: its ack
//  may be on its way (the broker paces them). True when it sent.
static bool
s_resend_one (void *arg, const char *key, const void *data, size_t size)
{
    agent_t *self = (agent_t *) arg;
    if (key && spool_key_is_output (key)) {
        int64_t now = zclock_mono ();
        if (!pieces_due (self->pieces, key, now))
            return false;
        pieces_sent (self->pieces, key, now);
    }
    proto_msg_t *result = NULL;
    if (self->batch_results
        && proto_msg_decode (data, size, &result, NULL, 0) == 0
        && result->type == PROTO_RESULT && s_batch_add (self, result) == 0) {
        proto_msg_destroy (&result);
        return true;
    }
    proto_msg_destroy (&result);
    link_send_bytes (self->link, data, size);
    return true;
}

//  Sends PIECE, an output piece, and notes when it went.
static void
s_piece_send (agent_t *self, const proto_msg_t *piece)
{
    char key [SPOOL_KEY_MAX];
    spool_output_key (piece->job, piece->step, piece->attempt, piece->stream,
                      piece->offset, key, sizeof (key));
    pieces_sent (self->pieces, key, zclock_mono ());
    link_send (self->link, piece);
}

//  Results not yet acknowledged: the spool's and those kept in memory.
static size_t
s_unacked (agent_t *self)
{
    return spool_unacked (self->spool) + zhashx_size (self->unspooled);
}

static void
s_resend_results (agent_t *self)
{
    //  What waits in the batch goes first (it is in the spool as well: the
    //  broker takes a repeat as a duplicate)
    s_batch_flush (self);
    pieces_prune (self->pieces, zclock_mono ());
    size_t count = spool_each_result (self->spool, s_resend_one, self,
                                      S_RESEND_BATCH);
    for (zchunk_t *kept = (zchunk_t *) zhashx_first (self->unspooled); kept;
         kept = (zchunk_t *) zhashx_next (self->unspooled)) {
        s_resend_one (self, NULL, zchunk_data (kept), zchunk_size (kept));
        count++;
    }
    //  Output pieces went as they came, so before the results they belong to
    s_batch_flush (self);
    if (count)
        s_debug (self, "re-sent %zu unacknowledged result(s)", count);
}

static void
s_send_hello (agent_t *self)
{
    link_send_bytes (self->link, self->hello, self->hello_size);
}

//  Sends the facts when the broker granted them and does not have them
//  as they are: after each welcome, and when they change.
static void
s_facts_send (agent_t *self)
{
    if (!self->facts_granted || self->facts_sent
        || !link_welcomed (self->link))
        return;
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = PROTO_FACTS;
    msg.node = self->config->id;
    msg.facts = self->facts.facts;
    msg.fact_count = self->facts.count;
    if (link_send (self->link, &msg) == 0)
        self->facts_sent = true;
}

//  Reads the facts again; a change goes to the broker.
static void
s_facts_read (agent_t *self)
{
    if (!agent_facts_refresh (self->config, &self->facts, self->facts_why,
                              sizeof self->facts_why))
        return;
    self->facts_sent = false;
    s_debug (self, "facts: %zu, changed", self->facts.count);
    s_facts_send (self);
}

static int
s_facts_fired (zloop_t *loop, int timer_id, void *arg)
{
    s_facts_read ((agent_t *) arg);
    return 0;
}

//  (Re)arms the facts timer at the configured interval.
static void
s_facts_arm (agent_t *self)
{
    if (self->facts_timer >= 0)
        zloop_timer_end (self->loop, self->facts_timer);
    self->facts_timer = -1;
    if (self->config->facts_ms > 0)
        self->facts_timer = zloop_timer (
            self->loop, link_jitter ((uint32_t) self->config->facts_ms), 0,
            s_facts_fired, self);
}

static int
s_resend_fired (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    if (link_welcomed (self->link))
        s_resend_results (self);
    agent_blobs_tick (self->blobs, zclock_mono ());
    return 0;
}

//  The broker does not know us (any more): register again.
static void
s_unwelcome (agent_t *self)
{
    s_batch_flush (self);
    link_unwelcome (self->link);
}


//  ---------------------------------------------------------------------
//  Results

//  The text RESULT carries for one stream (BYTES, LEN; DROPPED bytes lost
//  from its middle): the stream itself when it is short, valid UTF-8 and
//  whole; else its first PROTO_OUTPUT_HEAD bytes made valid text, while
//  the stream goes, byte for byte, in spooled `output` pieces, and *SIZE_P
//  and *DROPPED_P say so.
static char *
s_stream_head (agent_t *self, const proto_msg_t *result, const char *stream,
               const char *bytes, size_t len, size_t dropped,
               uint64_t live_sent, uint64_t *size_p, uint64_t *dropped_p)
{
    size_t head_len = len < PROTO_OUTPUT_HEAD ? len : PROTO_OUTPUT_HEAD;
    char *head = (char *) malloc (head_len + 1);
    assert (head);
    if (head_len)
        memcpy (head, bytes, head_len);
    bool cut = false;
    head = proto_text_clean (head, head_len, PROTO_OUTPUT_HEAD, &cut);
    if (len <= PROTO_OUTPUT_HEAD && dropped == 0 && live_sent == 0
        && strlen (head) == len && memcmp (head, bytes, len) == 0)
        return head;
    *size_p = len;
    *dropped_p = dropped;
    char err [256];
    //  What went live is in the spool already: the rest follows it (the
    //  live bytes are the stream's head, which the cap never moves)
    size_t from = live_sent < len ? (size_t) live_sent : len;
    for (size_t offset = from; offset < len; offset += PROTO_MAX_CHUNK) {
        size_t take = len - offset < PROTO_MAX_CHUNK ? len - offset
                                                     : PROTO_MAX_CHUNK;
        proto_msg_t piece = {
            .type = PROTO_OUTPUT, .node = result->node, .job = result->job,
            .step = result->step, .attempt = result->attempt,
            .stream = (char *) stream, .offset = offset,
            .chunk = (uint8_t *) bytes + offset, .chunk_len = take,
            .size = len
        };
        if (spool_put (self->spool, &piece, err, sizeof (err)))
            s_log (self, "cannot record the %s of %s step %u: %s (sent "
                   "anyway, not kept)", stream, result->job, result->step,
                   err);
        s_piece_send (self, &piece);
    }
    return head;
}

//  Records RESULT in the spool, then sends it in place of the ack and
//  started still held for it.
static void
s_finish (agent_t *self, proto_msg_t *result)
{
    char err [256];
    //  The spool keeps what the previous release reads (a downgrade): a
    //  result sent again from it has no traceparent and its data as text
    bool spooled = spool_put (self->spool, result, err, sizeof (err)) == 0;
    if (!spooled)
        log_warn ("cannot record the result of %s step %u: %s (kept in "
               "memory and sent until the broker has it)", result->job,
               result->step, err);
    char key [SPOOL_KEY_MAX];
    spool_key (result->job, result->step, result->attempt, key,
               sizeof (key));
    held_drop (self->held, key);
    if (self->batch_results && link_welcomed (self->link)) {
        //  Kept in memory in the single form, which a re-send batches
        pw_reset (self->writer);
        if (!spooled && proto_msg_encode (result, self->writer) == 0)
            zhashx_update (self->unspooled, key,
                           zchunk_new (pw_data (self->writer),
                                       pw_size (self->writer)));
        s_batch_add (self, result);
    }
    else
    if (link_send (self->link, result) == 0 && !spooled)
        zhashx_update (self->unspooled, key,
                       zchunk_new (pw_data (self->writer),
                                   pw_size (self->writer)));
    char trace_id [TRACE_ID_HEX + 1];
    bool traced = trace_job_lookup (result->job, trace_id);
    log_write (LOG_LEVEL_DEBUG,
               &(log_ctx_t) {result->job, NULL, NULL,
                             traced ? trace_id : NULL},
               "job %s step %u attempt %u: %s%s%s%s%s", result->job,
               result->step, result->attempt, result->status,
               result->error && *result->error ? ": " : "",
               result->error ? result->error : "",
               result->traceparent ? ", result traceparent " : "",
               result->traceparent ? result->traceparent : "");
}

//  The traceparent RESULT carries when the broker granted trace: the
//  command's TRACEPARENT with this attempt's span as its parent (the id
//  the broker gives the attempt's span, trace_span_id), or NULL.
static char *
s_result_trace (agent_t *self, const proto_msg_t *result,
                const char *traceparent)
{
    trace_ctx_t ctx;
    char why [160];
    if (!self->trace || !traceparent
        || trace_parse (traceparent, &ctx, why, sizeof why) != 0)
        return NULL;
    trace_span_id (&ctx, result->job, result->step, self->config->id,
                   result->attempt, ctx.parent_id);
    char text [TRACE_PARENT_LEN + 1];
    return strdup (trace_format (&ctx, text));
}

//  A result for work that did not run: refused, cancelled before it
//  started, or impossible to start.
static void
s_finish_unrun (agent_t *self, const proto_msg_t *command, const char *status,
                const char *error)
{
    proto_msg_t *result = proto_msg_new (PROTO_RESULT);
    result->node = strdup (self->config->id);
    result->job = strdup (command->job);
    result->step = command->step;
    result->attempt = command->attempt;
    result->status = strdup (status);
    result->output = strdup ("");
    bool cut = false;
    result->error = proto_text_clean (strdup (error), strlen (error),
                                  PROTO_MAX_TEXT, &cut);
    result->exit_code = -1;
    result->traceparent = s_result_trace (self, result, command->traceparent);
    s_finish (self, result);
    proto_msg_destroy (&result);
}

static void
s_work_free (void *arg)
{
    s_work_t *work = (s_work_t *) arg;
    backend_plan_destroy (&work->plan);
    backend_outcome_clear (&work->outcome);
    free (work->job);
    free (work->what);
    free (work->traceparent);
    free (work->task);
    free (work);
}

static int
s_child_run (void *arg)
{
    s_work_t *work = (s_work_t *) arg;
    return work->plan->child (work->plan);
}

static void
s_inproc_run (void *arg, executor_result_t *result)
{
    s_work_t *work = (s_work_t *) arg;
    work->plan->inproc (work->plan, &work->outcome);
    result->status = work->outcome.ok ? EXECUTOR_SUCCESS : EXECUTOR_FAILED;
    result->exit_code = work->outcome.exit_code;
    if (work->outcome.ok && result->exit_code < 0)
        result->exit_code = 0;
    result->output = work->outcome.output;
    result->error = work->outcome.error;
    work->outcome.output = NULL;
    work->outcome.error = NULL;
}

//  The progress and live timers run while there is work in hand: an
//  idle agent wakes only for its heartbeats, re-sends and key checks.
//  When there is none, ends TIMER_ID, the timer that fired, and forgets
//  it in *TIMER_P. Returns true then.
static bool
s_ended_when_idle (agent_t *self, int timer_id, int *timer_p)
{
    if (zhashx_size (self->work) > 0)
        return false;
    zloop_timer_end (self->loop, timer_id);
    if (*timer_p == timer_id)
        *timer_p = -1;
    return true;
}

static int s_progress_fired (zloop_t *loop, int timer_id, void *arg);
static int s_live_fired (zloop_t *loop, int timer_id, void *arg);

//  Work was taken: the timers that follow it run.
static void
s_work_timers_arm (agent_t *self)
{
    if (self->progress_timer < 0)
        self->progress_timer = zloop_timer (
            self->loop, (size_t) self->config->progress_ms, 0,
            s_progress_fired, self);
    if (self->live_timer < 0)
        self->live_timer = zloop_timer (self->loop, S_LIVE_MS, 0,
                                        s_live_fired, self);
}

//  Every progress interval: each running task's progress (its backend's
//  reporter, or its last line of output), sent when it changed since the
//  last one sent. So a task sends at most one per interval.
static int
s_progress_fired (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    if (s_ended_when_idle (self, timer_id, &self->progress_timer))
        return 0;
    if (!link_welcomed (self->link))
        return 0;
    int64_t now = zclock_mono ();
    for (s_work_t *work = (s_work_t *) zhashx_first (self->work); work;
         work = (s_work_t *) zhashx_next (self->work)) {
        //  Not before its ack and started, which may still be held
        if (work->started_ms <= 0 || !work->plan
            || held_holds (self->held, work->key))
            continue;
        char line [PROTO_MAX_PROGRESS * 2];
        executor_last_line (self->executor, work, line, sizeof (line));
        backend_progress_t progress;
        memset (&progress, 0, sizeof (progress));
        progress.percent = -1;
        if (!backend_progress (work->plan, now - work->started_ms, line,
                               &progress)
            || (progress.percent == work->sent.percent
                && strcmp (progress.kind, work->sent.kind) == 0
                && strcmp (progress.message, work->sent.message) == 0))
            continue;
        proto_msg_t msg = {
            .type = PROTO_PROGRESS, .node = self->config->id,
            .job = work->job, .step = work->step, .attempt = work->attempt,
            .percent = progress.percent,
            .kind = progress.kind [0] && name_valid (progress.kind)
                        ? progress.kind
                        : NULL,
            .message = progress.message [0] ? progress.message : NULL
        };
        link_send (self->link, &msg);
        work->sent = progress;
    }
    return 0;
}

//  Sends the next piece of WORK's output that came since the last, of
//  stdout or else stderr: from where the last ended to what the task has
//  written so far (at most a piece's bytes), spooled first like the
//  pieces that follow a result. A stream whose last piece awaits its
//  output_ack sends nothing until the ack comes or the re-send interval
//  passes (the spool sends that piece again): what the task writes
//  meanwhile goes in its next piece, so a slow broker gets fewer, larger
//  pieces. Returns true when it sent one.
static bool
s_live_send (agent_t *self, s_work_t *work, int64_t now)
{
    for (int index = 0; index < 2; index++) {
        if (work->live_wait_ms [index]
            && now - work->live_wait_ms [index] < S_RESEND_MS)
            continue;
        const char *data = NULL;
        size_t len = 0;
        executor_head (self->executor, work, index == 1, &data, &len);
        if (len <= work->live_sent [index])
            continue;
        uint64_t offset = work->live_sent [index];
        size_t take = len - offset < PROTO_MAX_CHUNK ? len - offset
                                                     : PROTO_MAX_CHUNK;
        const char *stream = index == 1 ? "stderr" : "stdout";
        proto_msg_t piece = {
            .type = PROTO_OUTPUT, .node = self->config->id, .job = work->job,
            .step = work->step, .attempt = work->attempt,
            .stream = (char *) stream, .offset = offset,
            .chunk = (uint8_t *) data + offset, .chunk_len = take,
            .size = offset + take
        };
        char err [256];
        if (spool_put (self->spool, &piece, err, sizeof (err)))
            s_log (self, "cannot record the %s of %s step %u: %s (sent "
                   "anyway, not kept)", stream, work->job, work->step, err);
        s_piece_send (self, &piece);
        work->live_sent [index] = offset + take;
        work->live_wait_ms [index] = now > 0 ? now : 1;
        work->live_wait_at [index] = offset;
        return true;
    }
    return false;
}

//  The broker acknowledged the output piece of JOB, STEP, ATTEMPT at
//  OFFSET of STREAM: when it is the live piece its running attempt waits
//  for, that stream may send its next.
static void
s_live_acked (agent_t *self, const char *job, uint32_t step,
              uint32_t attempt, const char *stream, uint64_t offset)
{
    char key [SPOOL_KEY_MAX];
    spool_output_key (job, step, attempt, stream, offset, key, sizeof (key));
    pieces_acked (self->pieces, key);
    spool_key (job, step, attempt, key, sizeof (key));
    s_work_t *work = (s_work_t *) zhashx_lookup (self->work, key);
    int index = strcmp (stream, "stderr") == 0 ? 1 : 0;
    if (work && work->live_wait_ms [index]
        && work->live_wait_at [index] == offset)
        work->live_wait_ms [index] = 0;
}

//  Every S_LIVE_MS, to a broker that granted live_output: each running
//  task's new output, one message per task at most, and no more than
//  output_rate a second for the whole agent (what waits goes later, or
//  with the result).
static int
s_live_fired (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    if (s_ended_when_idle (self, timer_id, &self->live_timer))
        return 0;
    int64_t rate = self->config->output_rate;
    if (!self->live_output || rate <= 0 || !link_welcomed (self->link))
        return 0;
    int64_t now = zclock_mono ();
    int64_t elapsed_ms = self->live_refilled_ms ? now - self->live_refilled_ms
                                                : 1000;
    self->live_refilled_ms = now;
    self->live_tokens += (double) elapsed_ms * (double) rate / 1000.0;
    if (self->live_tokens > (double) rate)
        self->live_tokens = (double) rate;
    //  Each turn starts one task further, so that when the rate holds
    //  back some, the same ones do not always go first
    size_t count = zhashx_size (self->work);
    s_work_t **works = count ? (s_work_t **) malloc (count * sizeof (s_work_t *))
                             : NULL;
    if (!works)
        return 0;
    size_t at = 0;
    for (s_work_t *work = (s_work_t *) zhashx_first (self->work);
         work && at < count; work = (s_work_t *) zhashx_next (self->work))
        works [at++] = work;
    size_t first = at ? (size_t) (self->live_turn++ % at) : 0;
    for (size_t index = 0; index < at && self->live_tokens >= 1.0; index++) {
        s_work_t *work = works [(first + index) % at];
        if (work->started_ms > 0 && work->plan
            && s_live_send (self, work, now))
            self->live_tokens -= 1.0;
    }
    free (works);
    return 0;
}

static void
s_work_started (void *arg, pid_t pid)
{
    s_work_t *work = (s_work_t *) arg;
    agent_t *self = work->agent;
    work->started_ms = zclock_mono ();
    work->sent.percent = -1;
    proto_msg_t started = {
        .type = PROTO_STARTED, .node = self->config->id, .job = work->job,
        .step = work->step, .attempt = work->attempt
    };
    char err [256];
    if (!work->recorded_started
        && spool_put (self->spool, &started, err, sizeof (err)))
        log_warn ("cannot record the start of %s step %u: %s", work->job,
               work->step, err);
    held_hold (self->held, PROTO_STARTED, work->key, work->job, work->step,
            work->attempt);
    s_debug (self, "job %s step %u attempt %u: %s started", work->job,
             work->step, work->attempt, work->what);
}

static void
s_work_done (void *arg, executor_result_t *done)
{
    s_work_t *work = (s_work_t *) arg;
    agent_t *self = work->agent;
    proto_msg_t *result = proto_msg_new (PROTO_RESULT);
    result->node = strdup (self->config->id);
    result->job = strdup (work->job);
    result->step = work->step;
    result->attempt = work->attempt;
    result->exit_code = done->exit_code;
    result->duration_ms = done->duration_ms;
    result->truncated = done->truncated;
    result->traceparent = s_result_trace (self, result, work->traceparent);
    const char *status = executor_status_name (done->status);

    backend_outcome_t *outcome = &work->outcome;
    if (work->plan->run == BACKEND_RUN_PROGRAM && work->plan->parse
    && (done->status == EXECUTOR_SUCCESS || done->status == EXECUTOR_FAILED)) {
        //  The program's own answer decides (e.g. "inactive" is fine)
        outcome->ok = done->status == EXECUTOR_SUCCESS;
        outcome->exit_code = done->exit_code;
        work->plan->parse (work->plan, done->output ? done->output : "",
                           outcome);
        status = outcome->ok ? "success" : "failed";
    }
    if (work->plan->check_query && strcmp (status, "success") == 0)
        //  A query in a dry run ran as usual and changed nothing
        backend_outcome_data (outcome, "would_change", "false");
    if (work->plan->checking && work->plan->run == BACKEND_RUN_PROGRAM
        && outcome->output && work->live_sent [0] == 0) {
        //  A check's parser says what the program's answer means
        free (done->output);
        done->output = outcome->output;
        done->output_len = strlen (outcome->output);
        outcome->output = NULL;
        if (outcome->ok) {
            free (done->error);
            done->error = outcome->error ? outcome->error : strdup ("");
            done->error_len = done->error ? strlen (done->error) : 0;
            outcome->error = NULL;
        }
    }
    result->status = strdup (status);
    if (outcome->data_count) {
        result->data = outcome->data;
        result->data_count = outcome->data_count < PROTO_MAX_LIST
                           ? outcome->data_count : PROTO_MAX_LIST;
        //  Facts parsed from a program's output are text on the wire too
        for (size_t index = 0; index < result->data_count; index++) {
            proto_kv_t *fact = &result->data [index];
            bool cut_fact = false;
            //  Numbers as ints only to a broker that takes them
            if (!self->typed_data)
                fact->number = false;
            if (fact->key)
                fact->key = proto_text_clean (fact->key, strlen (fact->key),
                                          PROTO_MAX_TEXT, &cut_fact);
            if (fact->value)
                fact->value = proto_text_clean (fact->value,
                                            strlen (fact->value),
                                            PROTO_MAX_TEXT, &cut_fact);
        }
        for (size_t index = result->data_count;
             index < outcome->data_count; index++) {
            free (outcome->data [index].key);
            free (outcome->data [index].value);
        }
        outcome->data = NULL;
        outcome->data_count = 0;
    }
    //  A stream that went live goes whole in pieces: the broker shows
    //  what it holds of it until the result comes
    result->output = s_stream_head (self, result, "stdout", done->output,
                                    done->output_len, done->output_dropped,
                                    work->live_sent [0],
                                    &result->output_size,
                                    &result->output_dropped);
    result->error = s_stream_head (self, result, "stderr", done->error,
                                   done->error_len, done->error_dropped,
                                   work->live_sent [1],
                                   &result->error_size,
                                   &result->error_dropped);
    free (done->output);
    free (done->error);
    done->output = done->error = NULL;
    zhashx_delete (self->work, work->key);
    s_finish (self, result);
    proto_msg_destroy (&result);
}

//  True when COMMAND, taken now, would start on the loop's next pass: the
//  executor has a slot for it and it waits for no blob.
static bool
s_starts_at_once (agent_t *self, const proto_msg_t *command)
{
    for (size_t index = 0; index < command->param_count; index++)
        if (command->params [index].key
            && strcmp (command->params [index].key, "sha256") == 0)
            return false;
    return executor_starts_at_once (self->executor, command->job,
                                    command->parallel);
}

//  A new command: record it (started when it starts at once, else
//  acked), check it, queue it.
static void
s_take (agent_t *self, const proto_msg_t *command, const char *key)
{
    char err [512];
    //  A task that starts at once is recorded started at once: one
    //  durable commit instead of two, and a crash before its start reads
    //  "while the task ran", the safe claim (s_starts_at_once)
    bool at_once = s_starts_at_once (self, command);
    proto_msg_t ack = {
        .type = at_once ? PROTO_STARTED : PROTO_ACK,
        .node = self->config->id, .job = command->job,
        .step = command->step, .attempt = command->attempt
    };
    if (spool_put (self->spool, &ack, err, sizeof (err))) {
        //  Taking work we cannot account for would break the promise
        //  that nothing is lost: leave it to the broker's re-send
        s_log (self, "not taking job %s step %u: %s", command->job,
               command->step, err);
        return;
    }
    held_hold (self->held, PROTO_ACK, key, command->job, command->step,
            command->attempt);
    //  Every line about the job carries its trace id from now on
    char trace_id [TRACE_ID_HEX + 1] = "";
    if (command->traceparent) {
        memcpy (trace_id, command->traceparent + 3, TRACE_ID_HEX);
        trace_id [TRACE_ID_HEX] = 0;
        trace_job_remember (command->job, trace_id);
    }
    log_write (LOG_LEVEL_DEBUG,
               &(log_ctx_t) {command->job, NULL, NULL,
                             *trace_id ? trace_id : NULL},
               "job %s step %u attempt %u: %s.%s taken%s%s", command->job,
               command->step, command->attempt, command->backend,
               command->action, command->traceparent ? ", traceparent " : "",
               command->traceparent ? command->traceparent : "");

    if (zhashx_lookup (self->cancelled, command->job)) {
        s_finish_unrun (self, command, "cancelled",
                        "the job was cancelled before this step started");
        return;
    }
    const backend_ops_t *ops = backend_find (command->backend);
    const backend_action_t *action = backend_action_find (ops,
                                                          command->action);
    backend_plan_t *plan = NULL;
    if (!ops)
        s_err (err, sizeof (err), "unknown backend '%s'", command->backend);
    else
    if (agent_config_disabled (self->config, command->backend))
        s_err (err, sizeof (err), "backend '%s' is disabled on this node",
               command->backend);
    else
    if (!action)
        s_err (err, sizeof (err), "unknown action '%s' for backend '%s'",
               command->action, command->backend);
    else
    if (command->check)
        //  A dry run: the action's check (or the query itself, or an
        //  answer of "unknown"), never the modify action
        plan = backend_check_plan_new (action, &self->context,
                                       command->params, command->param_count,
                                       err, sizeof (err));
    else
        plan = backend_plan_new (action, &self->context, command->params,
                                 command->param_count, err, sizeof (err));
    if (plan)
        plan->attempt = command->attempt;
    if (!plan) {
        s_log (self, "refused job %s step %u (%s.%s): %s", command->job,
               command->step, command->backend, command->action, err);
        s_finish_unrun (self, command, "refused", err);
        return;
    }
    char path [PATH_MAX];
    if (plan->run == BACKEND_RUN_PROGRAM
    &&  backend_tool_path (self->config->tool_dir, plan->argv [0], path,
                           sizeof (path), err, sizeof (err))) {
        log_error ("cannot run job %s step %u: %s", command->job,
               command->step, err);
        s_finish_unrun (self, command, "failed", err);
        backend_plan_destroy (&plan);
        return;
    }
    s_work_t *work = (s_work_t *) calloc (1, sizeof (s_work_t));
    if (work) {
        work->agent = self;
        snprintf (work->key, sizeof (work->key), "%s", key);
        work->job = strdup (command->job);
        work->traceparent = command->traceparent
                                ? strdup (command->traceparent) : NULL;
        work->step = command->step;
        work->attempt = command->attempt;
        work->plan = plan;
        work->recorded_started = at_once;
        if (asprintf (&work->what, "%s.%s", command->backend,
                      command->action) < 0)
            work->what = NULL;
    }
    if (!work || !work->job || !work->what) {
        if (work)
            s_work_free (work);
        else
            backend_plan_destroy (&plan);
        s_finish_unrun (self, command, "failed", "out of memory");
        return;
    }
    //  Any timeout the wire allows, bounded so timer arithmetic holds
    int64_t timeout_ms = command->timeout_ms > S_MAX_TIMEOUT_MS
                       ? (int64_t) S_MAX_TIMEOUT_MS
                       : (int64_t) command->timeout_ms;
    executor_task_t task = {
        .job = command->job, .step = command->step,
        .attempt = command->attempt, .timeout_ms = timeout_ms,
        .parallel = command->parallel, .arg = work, .arg_free = s_work_free
    };
    if (plan->run == BACKEND_RUN_PROGRAM) {
        task.path = path;
        task.argv = plan->argv;
        task.env = plan->env;
    }
    else
    if (plan->run == BACKEND_RUN_CHILD)
        task.child = s_child_run;
    else
        task.inproc = s_inproc_run;
    //  A put of a blob not in the cache waits for its fetch (s_blob_ready)
    const char *sha256 = backend_plan_param (plan, "sha256");
    if (sha256 && !command->check && !agent_blobs_have (self->blobs, sha256)
        && (work->task = malloc (sizeof task))) {
        task.job = work->job;
        *work->task = task;
        if (agent_blobs_wait (self->blobs, sha256, strtoull (
                backend_plan_param (plan, "size"), NULL, 10), work) == 0) {
            zhashx_insert (self->work, key, work);
            s_work_timers_arm (self);
            return;
        }
    }
    if (executor_submit (self->executor, &task)) {
        s_work_free (work);
        s_finish_unrun (self, command, "failed", "cannot queue the task");
        return;
    }
    zhashx_insert (self->work, key, work);
    s_work_timers_arm (self);
}

//  WORK's blob is in the cache (ERROR NULL), or cannot be had: it is
//  queued, or ends failed (or cancelled, when its job was meanwhile)
static void
s_blob_ready (void *arg, void *waiter, const char *error)
{
    agent_t *self = (agent_t *) arg;
    s_work_t *work = (s_work_t *) waiter;
    proto_msg_t command = { .job = work->job, .step = work->step,
                            .attempt = work->attempt,
                            .traceparent = work->traceparent };
    bool cancelled = zhashx_lookup (self->cancelled, work->job) != NULL;
    if (!error && !cancelled
        && executor_submit (self->executor, work->task) == 0)
        return;
    zhashx_delete (self->work, work->key);
    s_finish_unrun (self, &command, cancelled ? "cancelled" : "failed",
                    cancelled ? "the job was cancelled while its blob was "
                    "fetched" : error ? error : "cannot queue the task");
    s_work_free (work);
}



//  ---------------------------------------------------------------------
//  Incoming messages

static void
s_on_command (agent_t *self, const proto_msg_t *command)
{
    if (!agent_config_names_us (self->config, command->nodes,
                                command->node_count))
        return;
    if (!link_welcomed (self->link) || self->stopping) {
        s_debug (self, "job %s step %u: ignored (%s)", command->job,
                 command->step, self->stopping ? "stopping"
                                               : "not welcomed yet");
        return;
    }
    char key [SPOOL_KEY_MAX];
    spool_key (command->job, command->step, command->attempt, key,
               sizeof (key));
    if (zhashx_lookup (self->work, key)) {
        //  Queued or running: the ack was lost, or is still held
        held_ack_sent (self->held, key);
        s_send_progress (self, PROTO_ACK, command->job, command->step,
                         command->attempt);
        return;
    }
    zchunk_t *kept = (zchunk_t *) zhashx_lookup (self->unspooled, key);
    if (kept) {
        //  Finished, its result only in memory: never run again
        s_send_progress (self, PROTO_ACK, command->job, command->step,
                         command->attempt);
        link_send_bytes (self->link, zchunk_data (kept),
                         zchunk_size (kept));
        return;
    }
    spool_state_t state = spool_state (self->spool, command->job,
                                       command->step, command->attempt);
    if (state == SPOOL_NONE) {
        s_take (self, command, key);
        return;
    }
    //  Seen before: never run again
    s_send_progress (self, PROTO_ACK, command->job, command->step,
                     command->attempt);
    if (state == SPOOL_RESULT) {
        void *data = NULL;
        size_t size = 0;
        if (spool_result (self->spool, command->job, command->step,
                          command->attempt, &data, &size) == 0)
            link_send_bytes (self->link, data, size);
        free (data);
    }
    s_debug (self, "job %s step %u attempt %u: duplicate, not run again",
             command->job, command->step, command->attempt);
}

static void
s_on_cancel (agent_t *self, const proto_msg_t *cancel)
{
    if (!agent_config_names_us (self->config, cancel->nodes,
                                cancel->node_count))
        return;
    if (cancel->attempt > 0) {
        //  One attempt taken back (a reclaim): the job goes on, and a later
        //  attempt of this step or another step may still come here
        int count = executor_cancel_attempt (self->executor, cancel->job,
                                             cancel->step, cancel->attempt,
                                             cancel->reason);
        s_log (self, "cancel of job %s step %u attempt %u (%s): %d task(s) "
               "stopped", cancel->job, cancel->step, cancel->attempt,
               cancel->reason, count);
        return;
    }
    if (!zhashx_lookup (self->cancelled, cancel->job)) {
        char *copy = strdup (cancel->job);
        if (copy) {
            zhashx_insert (self->cancelled, copy, copy);
            zlistx_add_end (self->cancelled_order, copy);
        }
        while (zlistx_size (self->cancelled_order) > S_CANCELLED_KEEP) {
            char *oldest = (char *) zlistx_first (self->cancelled_order);
            zhashx_delete (self->cancelled, oldest);
            zlistx_delete (self->cancelled_order,
                           zlistx_cursor (self->cancelled_order));
        }
    }
    int count = executor_cancel_job (self->executor, cancel->job,
                                     cancel->reason);
    s_log (self, "cancel of job %s (%s): %d task(s) stopped", cancel->job,
           cancel->reason, count);
}

static void
s_on_welcome (agent_t *self, const proto_msg_t *welcome)
{
    if (strcmp (welcome->node, self->config->id)) {
        s_log (self, "ignored a welcome for node '%s'", welcome->node);
        return;
    }
    link_welcome (self->link, welcome->heartbeat_ms);
    //  Keep no more output per stream than the broker keeps
    size_t cap = self->config->output_cap_bytes;
    if (welcome->max_output && welcome->max_output < cap)
        cap = (size_t) welcome->max_output;
    executor_set_output_cap (self->executor, cap);
    //  Results in batches only when this broker said it takes them
    s_batch_flush (self);
    self->batch_results = proto_msg_has_feature (welcome,
                                                 PROTO_FEATURE_RESULTS);
    self->typed_data = proto_msg_has_feature (welcome,
                                              PROTO_FEATURE_TYPED_DATA);
    self->trace = proto_msg_has_feature (welcome, PROTO_FEATURE_TRACE);
    self->live_output = proto_msg_has_feature (welcome,
                                               PROTO_FEATURE_LIVE_OUTPUT);
    //  A new session: its broker may know nothing of them
    self->facts_granted = proto_msg_has_feature (welcome,
                                                 PROTO_FEATURE_FACTS);
    self->facts_sent = false;
    s_facts_send (self);
    if (self->rekey)
        rekey_welcomed (self->rekey, welcome);
    agent_blobs_welcomed (self->blobs, true, proto_msg_has_feature (
                              welcome, PROTO_FEATURE_BLOBS), zclock_mono ());
    //  The spool sends every unacknowledged piece again below: the live
    //  streams need not wait for the acks of those sent before
    for (s_work_t *work = (s_work_t *) zhashx_first (self->work); work;
         work = (s_work_t *) zhashx_next (self->work))
        work->live_wait_ms [0] = work->live_wait_ms [1] = 0;
    pieces_reset (self->pieces);
    s_log (self, "welcomed by the broker (heartbeat every %u ms, %zu "
           "result(s) to deliver%s)", link_heartbeat_ms (self->link),
           s_unacked (self), self->batch_results ? ", in batches" : "");
    s_resend_results (self);
}

static int s_build_hello (agent_t *self, char *err, size_t err_len);

static void
s_on_error (agent_t *self, const proto_msg_t *error)
{
    //  A second agent that claims this node was refused: say so once
    if (strcmp (error->code, PROTO_ERR_DUPLICATE_NODE) == 0
    &&  link_welcomed (self->link)) {
        if (strcmp (self->last_notice, error->message) != 0)
            s_log (self, "%s", error->message);
        snprintf (self->last_notice, sizeof self->last_notice, "%s",
                  error->message);
        return;
    }
    link_refused (self->link, error->code, error->message, error->endpoint);
    if (strcmp (error->code, "pending") == 0)
        return;
    //  A broker older than hello's features refuses the key: say hello
    //  without it, and take one result_ack per result
    if (!link_welcomed (self->link) && !self->plain_hello
        && strcmp (error->code, PROTO_ERR_MALFORMED) == 0
        && strstr (error->message, "'features'")) {
        char why [256];
        self->plain_hello = true;
        if (s_build_hello (self, why, sizeof why) == 0) {
            s_log (self, "the broker does not know hello's features: "
                   "registering without them");
            s_send_hello (self);
        }
        return;
    }
    if (strcmp (error->code, "unknown_node") == 0) {
        s_log (self, "the broker does not know this node: registering again");
        s_unwelcome (self);
    }
    else
    if (strcmp (error->code, PROTO_ERR_UNAUTHORIZED) == 0
        && link_welcomed (self->link)) {
        s_log (self, "this node's key is no longer enrolled: registering "
               "again");
        s_unwelcome (self);
    }
}

//  Several results committed at once: they leave the spool in one
//  transaction. Entries for no waiting result (acknowledged already, never
//  sent, repeated) change nothing and are counted.
static void
s_on_result_acks (agent_t *self, const proto_msg_t *msg)
{
    for (size_t index = 0; index < msg->ack_count; index++) {
        char key [SPOOL_KEY_MAX];
        spool_key (msg->acks [index].job, msg->acks [index].step,
                   msg->acks [index].attempt, key, sizeof (key));
        zhashx_delete (self->unspooled, key);
    }
    size_t unknown = 0;
    if (spool_ack_many (self->spool, msg->acks, msg->ack_count, &unknown)) {
        log_warn ("cannot record a result_acks of %zu results",
                  msg->ack_count);
        return;
    }
    s_debug (self, "%zu results acknowledged", msg->ack_count - unknown);
    if (unknown) {
        self->stale_acks += unknown;
        //  Hostile input must not flood the log: the first, then every 100th
        if (self->stale_acks == unknown || self->stale_acks / 100
                                               != (self->stale_acks - unknown) / 100)
            log_warn ("result_acks named %zu results this agent does not "
                      "wait for (%llu so far)", unknown,
                      (unsigned long long) self->stale_acks);
    }
}

//  Several output pieces committed at once (a welcome granted
//  output_acks): each leaves the spool as with its own output_ack.
static void
s_on_output_acks (agent_t *self, const proto_msg_t *msg)
{
    for (size_t index = 0; index < msg->ack_count; index++) {
        const proto_ack_t *ack = &msg->acks [index];
        if (spool_ack_output (self->spool, ack->job, ack->step, ack->attempt,
                              ack->stream, ack->offset))
            s_log (self, "cannot record the output_ack of %s step %u",
                   ack->job, ack->step);
        s_live_acked (self, ack->job, ack->step, ack->attempt, ack->stream,
                      ack->offset);
    }
}

static void
s_malformed (agent_t *self, const char *why)
{
    self->malformed++;
    //  Hostile input must not flood the log: the first, then every 100th
    if (self->malformed == 1 || self->malformed % 100 == 0)
        log_warn ("dropped a malformed message (%llu so far): %s",
               (unsigned long long) self->malformed, why);
}

//  Whether MSG may be taken: not from a broker cluster's active of an
//  epoch lower than the highest seen (a demoted one that woke up).
static bool
s_epoch_passes (agent_t *self, const proto_msg_t *msg, bool from_sub)
{
    uint64_t highest = epoch_gate_highest (self->epochs);
    epoch_verdict_t verdict = epoch_gate_judge (
        self->epochs, msg->epoch, msg->type == PROTO_WELCOME && !from_sub,
        zclock_mono ());
    if (verdict == EPOCH_REFUSE_WARN)
        log_warn ("dropped a %s of epoch %" PRIu64 ": a broker of epoch %"
                  PRIu64 " leads the cluster now (%" PRIu64 " dropped so "
                  "far)", proto_type_name (msg->type), msg->epoch, highest,
                  epoch_gate_refused (self->epochs));
    else
    if (verdict == EPOCH_RESET)
        log_warn ("taking the welcome of epoch %" PRIu64 ", lower than the %"
                  PRIu64 " seen: no broker of a later epoch welcomed this "
                  "agent for %d s (was the cluster's etcd rebuilt?)",
                  msg->epoch, highest, EPOCH_WELCOME_HOLD_MS / 1000);
    return verdict == EPOCH_PASS || verdict == EPOCH_RESET;
}

static int
s_spool_fired (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    if (timer_id == self->spool_timer)
        self->spool_timer = -1;
    if (spool_flush (self->spool))
        log_warn ("cannot record %zu acknowledgement(s) in the spool yet",
                  spool_unflushed (self->spool));
    return 0;
}

static void
s_handle (agent_t *self, const void *data, size_t size, bool from_sub)
{
    proto_msg_t *msg = NULL;
    char why [256];
    if (proto_msg_decode (data, size, &msg, why, sizeof (why))) {
        s_malformed (self, why);
        return;
    }
    //  The next key's session says only welcome, or why not (rekey.h)
    if (!from_sub && link_from_next (self->link)
        && msg->type != PROTO_WELCOME) {
        if (self->rekey)
            rekey_on_next_session (self->rekey, msg);
        proto_msg_destroy (&msg);
        return;
    }
    if (!s_epoch_passes (self, msg, from_sub)) {
        proto_msg_destroy (&msg);
        return;
    }
    switch (msg->type) {
        case PROTO_COMMAND:
            s_on_command (self, msg);
            break;
        case PROTO_CANCEL:
            s_on_cancel (self, msg);
            break;
        case PROTO_WELCOME:
            if (!from_sub)
                s_on_welcome (self, msg);
            break;
        case PROTO_RESULT_ACK:
            if (!from_sub) {
                char key [SPOOL_KEY_MAX];
                spool_key (msg->job, msg->step, msg->attempt, key,
                           sizeof (key));
                zhashx_delete (self->unspooled, key);
                if (spool_ack (self->spool, msg->job, msg->step,
                               msg->attempt))
                    log_warn ("cannot record the result_ack of %s step "
                           "%u", msg->job, msg->step);
                else
                    s_debug (self, "job %s step %u attempt %u: result "
                             "acknowledged", msg->job, msg->step,
                             msg->attempt);
            }
            break;
        case PROTO_RESULT_ACKS:
            if (!from_sub)
                s_on_result_acks (self, msg);
            break;
        case PROTO_OUTPUT_ACK:
            if (from_sub)
                break;
            if (spool_ack_output (self->spool, msg->job, msg->step,
                                  msg->attempt, msg->stream, msg->offset))
                s_log (self, "cannot record the output_ack of %s step %u",
                       msg->job, msg->step);
            s_live_acked (self, msg->job, msg->step, msg->attempt,
                          msg->stream, msg->offset);
            break;
        case PROTO_OUTPUT_ACKS:
            if (!from_sub)
                s_on_output_acks (self, msg);
            break;
        case PROTO_ERROR:
            if (!from_sub)
                s_on_error (self, msg);
            break;
        case PROTO_REKEY_ACK:
            if (!from_sub && self->rekey)
                rekey_on_ack (self->rekey, msg);
            break;
        case PROTO_BLOB_CHUNK:
            if (!from_sub)
                agent_blobs_on_chunk (self->blobs, msg, zclock_mono ());
            break;
        case PROTO_BROKER_KEY:
            if (!from_sub && self->rekey)
                rekey_on_broker_key (self->rekey, msg);
            break;
        default:
            s_malformed (self, proto_type_name (msg->type));
            break;
    }
    proto_msg_destroy (&msg);
    //  Acknowledgements reach the disk with the next commit, or soon
    if (spool_unflushed (self->spool) && self->spool_timer < 0)
        self->spool_timer = zloop_timer (self->loop, S_SPOOL_FLUSH_MS, 1,
                                         s_spool_fired, self);
}


//  ---------------------------------------------------------------------
//  What the link asks

static const void *
s_link_hello (void *arg, size_t *size_p)
{
    agent_t *self = (agent_t *) arg;
    *size_p = self->hello_size;
    return self->hello;
}

static void
s_link_load (void *arg, uint32_t *running_p, uint32_t *queued_p)
{
    agent_t *self = (agent_t *) arg;
    *running_p = (uint32_t) executor_running (self->executor);
    *queued_p = (uint32_t) executor_queued (self->executor);
}

//  What waits in the batch goes before the session ends
static void
s_link_down (void *arg)
{
    s_batch_flush ((agent_t *) arg);
    agent_blobs_welcomed (((agent_t *) arg)->blobs, false, false, 0);
}

static void
s_link_message (void *arg, const void *data, size_t size, bool from_sub)
{
    s_handle ((agent_t *) arg, data, size, from_sub);
}

static void
s_link_malformed (void *arg, const char *why)
{
    s_malformed ((agent_t *) arg, why);
}

static int
s_signal_ready (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    agent_t *self = (agent_t *) arg;
    struct signalfd_siginfo info;
    int signo = 0;
    bool hangup = false;
    while (read (self->signal_fd, &info, sizeof (info)) == sizeof (info)) {
        if (info.ssi_signo == SIGHUP)
            hangup = true;
        else
            signo = (int) info.ssi_signo;
    }
    if (hangup && !self->stopping) {
        agent_reload (self);
        if (self->rekey)
            rekey_poke (self->rekey);
    }
    if (signo == 0)
        return 0;
    if (!self->stopping) {
        s_log (self, "%s: stopping", strsignal (signo));
        self->stopping = true;
        link_stop (self->link);
        return -1;
    }
    s_log (self, "%s again: cancelling running work now", strsignal (signo));
    executor_cancel_all (self->executor, "agent stopping");
    self->cancel_sent = true;
    return 0;
}


//  Encodes the hello: once at start, and again when a reload changes
//  what it offers.
static int
s_build_hello (agent_t *self, char *err, size_t err_len)
{
    free (self->hello);
    self->hello = NULL;
    const agent_config_t *config = self->config;
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    hello->node = strdup (config->id);
    hello->hostname = strdup (self->hostname);
    hello->version = strdup (GRID_VERSION);
    hello->instance = strdup (self->instance);
    hello->concurrency = config->concurrency;
    //  Every message it understands beyond the base set, some of them
    //  once a welcome grants them (PROTOCOL.md 4.2, hello features)
    const char *features [] = { PROTO_FEATURE_RESULT_ACKS,
                                PROTO_FEATURE_RESULTS,
                                PROTO_FEATURE_TYPED_DATA,
                                PROTO_FEATURE_TRACE,
                                PROTO_FEATURE_LIVE_OUTPUT,
                                PROTO_FEATURE_FACTS,
                                PROTO_FEATURE_CHECK,
                                PROTO_FEATURE_EPOCH,
                                PROTO_FEATURE_REKEY, PROTO_FEATURE_OUTPUT_ACKS,
                                PROTO_FEATURE_REDIRECT, PROTO_FEATURE_BLOBS,
                                PROTO_FEATURE_BROKER_REKEY };
    size_t count = sizeof features / sizeof features [0];
    if (!self->plain_hello) {
        hello->features = (char **) calloc (count, sizeof (char *));
        bool all = hello->features != NULL;
        for (size_t index = 0; all && index < count; index++)
            all = (hello->features [index] = strdup (features [index]))
                  != NULL;
        hello->feature_count = all ? count : 0;
    }
    for (size_t index = 0; index < config->group_count; index++)
        agent_config_list_add (&hello->groups, &hello->group_count,
                    config->groups [index]);
    for (size_t index = 0; index < config->label_count; index++)
        agent_config_label_add (&hello->labels, &hello->label_count,
                     config->labels [index].key,
                     config->labels [index].value);
    int rc = backends_hello_specs (config->disabled, config->disabled_count,
                                   &hello->backends, &hello->backend_count);
    pw_t *writer = pw_new ();
    if (rc == 0 && proto_msg_encode (hello, writer) == 0) {
        self->hello_size = pw_size (writer);
        self->hello = malloc (self->hello_size);
        if (self->hello)
            memcpy (self->hello, pw_data (writer), self->hello_size);
    }
    pw_destroy (&writer);
    proto_msg_destroy (&hello);
    if (!self->hello) {
        s_err (err, err_len, "the hello message does not encode");
        return -1;
    }
    return 0;
}

agent_t *
agent_new (agent_config_t *config, char *err, size_t err_len)
{
    agent_t *self = (agent_t *) calloc (1, sizeof (agent_t));
    if (!self) {
        s_err (err, err_len, "out of memory");
        return NULL;
    }
    self->config = config;
    self->signal_fd = -1;
    self->resend_timer = -1;
    self->rekey_timer = -1;
    self->facts_timer = -1;
    self->spool_timer = -1;
    self->progress_timer = -1;
    self->live_timer = -1;
    self->context.tool_dir = config->tool_dir;
    self->context.resolv_conf = config->resolv_conf;
    self->context.file_roots = config->file_roots;
    self->context.file_root_count = config->file_root_count;
    if (config->state_dir) {
        snprintf (self->test_dir, sizeof (self->test_dir), "%s/test",
                  config->state_dir);
        self->context.test_dir = self->test_dir;
    }
    //  Tells this process from a restarted one in hello (duplicate_node)
    uint8_t random_bytes [8];
    if (getrandom (random_bytes, sizeof (random_bytes), 0)
        != (ssize_t) sizeof (random_bytes))
        for (size_t index = 0; index < sizeof (random_bytes); index++)
            random_bytes [index] = (uint8_t) random ();
    for (size_t index = 0; index < sizeof (random_bytes); index++)
        snprintf (self->instance + 2 * index, 3, "%02x", random_bytes [index]);
    if (gethostname (self->hostname, sizeof (self->hostname)))
        snprintf (self->hostname, sizeof (self->hostname), "%s", config->id);
    self->hostname [HOST_NAME_MAX] = 0;
    //  The wire takes only UTF-8 text: a stray byte becomes '?'
    bool cut_name = false;
    char *clean = proto_text_clean (strdup (self->hostname),
                                strlen (self->hostname), HOST_NAME_MAX,
                                &cut_name);
    if (clean)
        snprintf (self->hostname, sizeof (self->hostname), "%s", clean);
    free (clean);
    //  CZMQ's own SIGINT/SIGTERM handler would stop the loop behind our
    //  back; we read those signals through a signalfd instead
    zsys_handler_set (NULL);
    //  Every jitter comes from random (): seeded per process, after
    //  zsys_init, which seeds it with the time in seconds (agents started
    //  in the same second would otherwise draw the same jitter, and a
    //  fleet would retry, fail over and come back in lockstep)
    zsys_init ();
    unsigned seed = 0;
    if (getrandom (&seed, sizeof seed, 0) != (ssize_t) sizeof seed)
        seed = (unsigned) (getpid () ^ zclock_time ());
    srandom (seed);

    //  One agent per state dir: two would share one spool and run every
    //  command twice.
    self->lock = store_lock (config->state_dir, "gridagent", "state dir",
                             err, err_len);
    if (!self->lock) {
        agent_destroy (&self);
        return NULL;
    }
    //  What tasks of an agent that died left running stops first, before
    //  they are reported interrupted and may run again (orphans.h)
    snprintf (self->group_dir, sizeof (self->group_dir), "%s/groups",
              config->state_dir);
    if (mkdir (self->group_dir, 0700) && errno != EEXIST) {
        s_err (err, err_len, "cannot create %s: %s", self->group_dir,
               strerror (errno));
        agent_destroy (&self);
        return NULL;
    }
    char stopped [256];
    int groups = orphans_stop (self->group_dir, config->kill_grace_ms,
                               stopped, sizeof (stopped));
    if (groups > 0)
        s_log (self, "stopped what %d task(s) of the previous run left "
               "running (process group%s %s)", groups,
               groups == 1 ? "" : "s", stopped);
    else
    if (groups < 0)
        s_log (self, "cannot read %s: %s", self->group_dir,
               strerror (errno));
    char path [PATH_MAX];
    snprintf (path, sizeof (path), "%s/spool", config->state_dir);
    self->spool = spool_open (path, SPOOL_DONE_KEEP, err, err_len);
    if (!self->spool) {
        agent_destroy (&self);
        return NULL;
    }
    //  The highest epoch of a broker cluster seen, kept across restarts
    snprintf (path, sizeof (path), "%s/epoch", config->state_dir);
    self->epochs = epoch_gate_new (path);
    if (!self->epochs) {
        s_err (err, err_len, "out of memory");
        agent_destroy (&self);
        return NULL;
    }
    const char *migrated;
    for (size_t index = 0;
         (migrated = spool_migration (self->spool, index)); index++)
        s_log (self, "spool %s: %s", path, migrated);
    int recovered = spool_recover (self->spool, config->id);
    if (recovered > 0)
        s_log (self, "%d task(s) were cut short by a restart: reporting "
               "them interrupted", recovered);
    else
    if (recovered < 0)
        log_error ("cannot record interrupted tasks in the spool");

    self->writer = pw_new ();
    self->batch = pw_new ();
    self->entry = pw_new ();
    self->batch_timer = -1;
    self->unspooled = zhashx_new ();
    zhashx_set_destructor (self->unspooled,
                           (zhashx_destructor_fn *) zchunk_destroy);
    self->work = zhashx_new ();
    self->cancelled = zhashx_new ();
    self->cancelled_order = zlistx_new ();
    self->loop = zloop_new ();
    if (!self->writer || !self->work
    ||  !self->cancelled || !self->cancelled_order || !self->loop
    ||  s_build_hello (self, err, err_len)) {
        if (err && !*err)
            s_err (err, err_len, "out of memory");
        agent_destroy (&self);
        return NULL;
    }
    zlistx_set_destructor (self->cancelled_order,
                           (zlistx_destructor_fn *) zstr_free);

    executor_config_t executor_config = {
        .concurrency = config->concurrency,
        .output_cap_bytes = config->output_cap_bytes,
        .kill_grace_ms = config->kill_grace_ms,
        .started = s_work_started,
        .done = s_work_done,
        .group_dir = self->group_dir
    };
    self->executor = executor_new (self->loop, &executor_config);
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGTERM);
    sigaddset (&mask, SIGINT);
    sigaddset (&mask, SIGHUP);
    self->signal_fd = signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (!self->executor || self->signal_fd < 0) {
        s_err (err, err_len, "cannot set up the executor or signals: %s",
               strerror (errno));
        agent_destroy (&self);
        return NULL;
    }
    zmq_pollitem_t item = { NULL, self->signal_fd, ZMQ_POLLIN, 0 };
    zloop_poller (self->loop, &item, s_signal_ready, self);
    zloop_poller_set_tolerant (self->loop, &item);
    link_callbacks_t callbacks = {
        .on_message = s_link_message,
        .on_malformed = s_link_malformed,
        .on_down = s_link_down,
        .hello = s_link_hello,
        .load = s_link_load
    };
    self->link = link_new (self->loop, config, &callbacks, self, err,
                           err_len);
    self->held = !self->link ? NULL
               : held_new (self->loop, self->link, config->id,
                           S_PROGRESS_HOLD_MS);
    self->pieces = !self->held ? NULL : pieces_new (S_RESEND_MS);
    if (self->link && !self->pieces)
        s_err (err, err_len, "out of memory");
    snprintf (path, sizeof (path), "%s/" AGENT_BLOBS_DIR, config->state_dir);
    self->blobs = !self->pieces ? NULL
                : agent_blobs_new (path, config->blob_cache_bytes, config->id,
                                   self->link, s_blob_ready, self, err,
                                   err_len);
    if (!self->blobs) {
        agent_destroy (&self);
        return NULL;
    }
    self->context.blob_dir = agent_blobs_dir (self->blobs);
    if (!config->insecure)
        self->rekey = rekey_new (config, self->link);
    return self;
}

int
agent_reload (agent_t *self)
{
    agent_config_t *running = self->config;
    agent_config_t fresh;
    agent_config_init (&fresh);
    char err [1024] = "";
    if (agent_config_parse (&fresh, running->argc, running->argv, stdout,
                            err, sizeof (err)) != 0) {
        log_error ("SIGHUP: reload failed, the running configuration stays: "
                   "%s", *err ? err : "unexpected --help or --version");
        agent_config_clear (&fresh);
        return -1;
    }
    char later [512];
    agent_config_restart_only (running, &fresh, later, sizeof (later));
    bool offers = agent_config_lists_differ (running->disabled, running->disabled_count,
                                  fresh.disabled, fresh.disabled_count);
    if (offers) {
        char **disabled = running->disabled;
        size_t disabled_count = running->disabled_count;
        running->disabled = fresh.disabled;
        running->disabled_count = fresh.disabled_count;
        fresh.disabled = disabled;
        fresh.disabled_count = disabled_count;
        if (s_build_hello (self, err, sizeof (err))) {
            //  Cannot happen with checked names; keep the old offer
            s_log (self, "SIGHUP: %s: disabled_backends stay as they were",
                   err);
            fresh.disabled = running->disabled;
            fresh.disabled_count = running->disabled_count;
            running->disabled = disabled;
            running->disabled_count = disabled_count;
            s_build_hello (self, err, sizeof (err));
            offers = false;
        }
    }
    //  Operator facts: read again at once, sent when they changed
    proto_kv_t *facts = running->facts;
    size_t fact_count = running->fact_count;
    running->facts = fresh.facts;
    running->fact_count = fresh.fact_count;
    fresh.facts = facts;
    fresh.fact_count = fact_count;
    char *facts_dir = running->facts_dir;
    running->facts_dir = fresh.facts_dir;
    fresh.facts_dir = facts_dir;
    bool rearm = running->facts_ms != fresh.facts_ms;
    running->facts_ms = fresh.facts_ms;
    s_facts_read (self);
    if (rearm)
        s_facts_arm (self);
    running->verbose = fresh.verbose;
    running->drain_ms = fresh.drain_ms;
    running->output_rate = fresh.output_rate;
    char *level = running->log_level;
    running->log_level = fresh.log_level;
    fresh.log_level = level;
    if (log_configure (running->log_level ? running->log_level : "info",
                       NULL, running->verbose, err, sizeof (err)))
        log_warn ("SIGHUP: %s: the log level stays %s", err,
                  log_level_name (log_level ()));
    char names [512] = "";
    size_t used = 0;
    for (size_t index = 0; index < running->disabled_count; index++)
        used += (size_t) snprintf (names + used, sizeof (names) - used,
                                   "%s%s", index ? ", " : "",
                                   running->disabled [index]);
    s_log (self, "SIGHUP: configuration reloaded: disabled backends %s, "
           "log level %s, drain %lld ms, output rate %lld/s",
           *names ? names : "none", log_level_name (log_level ()),
           (long long) running->drain_ms, (long long) running->output_rate);
    if (*later)
        log_warn ("SIGHUP: changed settings that take effect at the next "
                  "start: %s", later);
    //  The broker learns the new offer from a hello on the live session
    if (offers && link_welcomed (self->link))
        s_send_hello (self);
    agent_config_clear (&fresh);
    return 0;
}

static int
s_drain_check (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    int64_t now = zclock_mono ();
    if (executor_idle (self->executor) || now >= self->stop_deadline)
        return -1;
    if (!self->cancel_sent && now >= self->drain_deadline) {
        s_log (self, "%zu task(s) still running: cancelling them",
               executor_running (self->executor));
        executor_cancel_all (self->executor,
                             "agent stopping: the task did not finish in "
                             "time");
        self->cancel_sent = true;
    }
    return 0;
}

static int
s_flush_check (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    return s_unacked (self) == 0
        || zclock_mono () >= self->stop_deadline ? -1 : 0;
}

static int
s_rekey_fired (zloop_t *loop, int timer_id, void *arg)
{
    agent_t *self = (agent_t *) arg;
    if (self->rekey && !self->stopping)
        rekey_tick (self->rekey);
    return 0;
}

int
agent_run (agent_t *self)
{
    const agent_config_t *config = self->config;
    s_log (self, "starting %s: broker %s, commands %s, concurrency %u%s%s",
           GRID_VERSION, config->broker, config->publish,
           config->concurrency, config->tool_dir ? ", tools in " : "",
           config->tool_dir ? config->tool_dir : "");
    link_hello (self->link);
    self->resend_timer = zloop_timer (self->loop, link_jitter (S_RESEND_MS), 0,
                                      s_resend_fired, self);
    s_facts_read (self);
    s_facts_arm (self);
    self->rekey_timer = zloop_timer (self->loop, S_REKEY_TICK_MS, 0,
                                     s_rekey_fired, self);
    //  Spool opened, sockets connected: the agent serves from here on
    service_notify_ready ("running");
    if (service_watchdog_attach (self->loop) < 0)
        log_warn ("cannot arm the service watchdog timer");
    //  zloop_start returns when a handler asks (the signal handler, on
    //  SIGTERM) or, should it ever happen, when a poll is interrupted
    while (!self->stopping)
        zloop_start (self->loop);

    //  No new work; queued work is handed back; running work may finish
    service_notify_stopping ();
    int dropped = executor_cancel_queued (self->executor,
                                          "agent stopping before the task "
                                          "started");
    s_log (self, "stopping: %zu task(s) running, %d queued task(s) "
           "cancelled", executor_running (self->executor), dropped);
    int64_t now = zclock_mono ();
    self->drain_deadline = now + config->drain_ms;
    self->stop_deadline = self->drain_deadline + config->kill_grace_ms
                        + S_FLUSH_MS;
    int check = zloop_timer (self->loop, S_STOP_CHECK_MS, 0, s_drain_check,
                             self);
    zloop_start (self->loop);
    zloop_timer_end (self->loop, check);
    //  Whatever is still held belongs to work that has no result: the
    //  broker hears that it was taken before it hears bye
    held_flush (self->held);

    //  Flush: results not yet acknowledged, then a short wait for acks
    if (s_unacked (self)) {
        s_resend_results (self);
        self->stop_deadline = zclock_mono () + S_FLUSH_MS;
        check = zloop_timer (self->loop, S_STOP_CHECK_MS, 0, s_flush_check,
                             self);
        zloop_start (self->loop);
        zloop_timer_end (self->loop, check);
    }
    s_batch_flush (self);
    proto_msg_t bye = {
        .type = PROTO_BYE, .node = config->id, .reason = "shutdown"
    };
    link_send (self->link, &bye);
    s_log (self, "stopped (%zu result(s) not yet acknowledged stay in the "
           "spool)", spool_unacked (self->spool));
    if (zhashx_size (self->unspooled))
        log_error ("%zu result(s) the spool could not take are lost with "
               "this stop; their steps will read interrupted or lost",
               zhashx_size (self->unspooled));
    return 0;
}

void
agent_destroy (agent_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    agent_t *self = *self_p;
    executor_destroy (&self->executor);
    if (self->loop) {
        if (self->signal_fd >= 0) {
            zmq_pollitem_t item = { NULL, self->signal_fd, ZMQ_POLLIN, 0 };
            zloop_poller_end (self->loop, &item);
        }
    }
    if (self->signal_fd >= 0)
        close (self->signal_fd);
    rekey_destroy (&self->rekey);
    held_destroy (&self->held);
    pieces_destroy (&self->pieces);
    link_destroy (&self->link);
    zloop_destroy (&self->loop);
    zhashx_destroy (&self->work);
    zhashx_destroy (&self->cancelled);
    zlistx_destroy (&self->cancelled_order);
    spool_destroy (&self->spool);
    agent_blobs_destroy (&self->blobs);
    epoch_gate_destroy (&self->epochs);
    zhashx_destroy (&self->unspooled);
    store_unlock (&self->lock);
    pw_destroy (&self->writer);
    pw_destroy (&self->batch);
    pw_destroy (&self->entry);
    free (self->hello);
    agent_facts_clear (&self->facts);
    free (self);
    *self_p = NULL;
}
