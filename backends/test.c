/*  =========================================================================
    test backend - echo, sleep, fail, flaky, bulk output, paced lines

    For exercising the whole path (dispatch, capture, truncation, timeout,
    cancel, retries) without touching the host. Every action runs in a real
    forked child, so timeouts and cancels take the same kill path as
    programs. flaky fails while the command's attempt number is at most
    its `failures` param, then succeeds: a retry that works on attempt
    failures + 1 is the whole point. lines prints `count` numbered lines
    ("line 1", "line 2", ...), one every `interval` (e.g. "100ms",
    "0.5s"), then exits 0: output that comes while the task runs.
    The child functions run after fork in a process that had threads: they
    use only async-signal-safe calls (write, nanosleep) and never allocate.

    mark is the one action that modifies something, for exercising dry
    runs: it writes `text` and a newline to the file `name` of the agent's
    test directory (<state_dir>/test, made when first needed) and nothing
    else; it runs in the agent's loop. Its check reads the file and says
    whether it would change, with the diff.
    =========================================================================
*/
#include "backend.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_SLEEP_S 86400
#define S_MAX_OUTPUT_BYTES 67108864
#define S_MAX_FAILURES 10
#define S_MAX_LINES 100000

//  Writes LEN bytes of BUF to FD, riding over short writes and EINTR.
static int
s_write_all (int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t wrote = write (fd, buf, len);
        if (wrote < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += wrote;
        len -= (size_t) wrote;
    }
    return 0;
}

static int
s_echo_child (const backend_plan_t *plan)
{
    if (s_write_all (STDOUT_FILENO, plan->text, plan->text_len)
    ||  s_write_all (STDOUT_FILENO, "\n", 1))
        return 1;
    return 0;
}

static int
s_sleep_child (const backend_plan_t *plan)
{
    //  spawn: helpers that sleep as long, in the task's process group, as
    //  the processes a real program starts (they outlive a dead agent)
    const char *spawn = backend_plan_param (plan, "spawn");
    int helpers = spawn && spawn [0] >= '0' && spawn [0] <= '9'
                  ? spawn [0] - '0' : 0;
    for (int index = 0; index < helpers; index++)
        if (fork () == 0) {
            struct timespec left = { (time_t) plan->number, 0 };
            while (nanosleep (&left, &left) == -1 && errno == EINTR)
                ;
            _exit (0);
        }
    struct timespec left = { (time_t) plan->number, 0 };
    while (nanosleep (&left, &left) == -1 && errno == EINTR)
        ;
    if (plan->text
    && (s_write_all (STDOUT_FILENO, plan->text, plan->text_len)
    ||  s_write_all (STDOUT_FILENO, "\n", 1)))
        return 1;
    return 0;
}

static int
s_fail_child (const backend_plan_t *plan)
{
    const char *text = plan->text ? plan->text : "failed as asked";
    size_t len = plan->text ? plan->text_len : strlen (text);
    s_write_all (STDERR_FILENO, text, len);
    return 1;
}

//  Writes "TEXT<N>" for a non-negative N without allocating or calling
//  stdio (a forked child of a threaded process may do neither).
static int
s_write_number (int fd, const char *text, uint64_t number)
{
    char digits [24];
    size_t at = sizeof (digits);
    do {
        digits [--at] = (char) ('0' + number % 10);
        number /= 10;
    } while (number > 0 && at > 0);
    return s_write_all (fd, text, strlen (text))
        || s_write_all (fd, digits + at, sizeof (digits) - at);
}

static int
s_flaky_child (const backend_plan_t *plan)
{
    //  A plan made outside a command (no attempt known) is a first run
    uint64_t attempt = plan->attempt ? plan->attempt : 1;
    uint64_t failures = (uint64_t) plan->number;
    bool fail = attempt <= failures;
    int fd = fail ? STDERR_FILENO : STDOUT_FILENO;
    if (s_write_number (fd, "attempt ", attempt)
    ||  s_write_number (fd, fail ? ": failing as asked, failures "
                                 : ": succeeded, failures ", failures)
    ||  s_write_all (fd, "\n", 1))
        return 1;
    return fail ? 1 : 0;
}

//  Writes plan->number bytes to stdout (or stderr): 'x's, or with a seed
//  the bytes of a xorshift32 sequence (every byte value, NULs included),
//  so a reader can check that each byte arrived in its place.
static int
s_output_child (const backend_plan_t *plan)
{
    const char *seed_text = backend_plan_param (plan, "seed");
    const char *stream = backend_plan_param (plan, "stream");
    int fd = stream && strcmp (stream, "stderr") == 0 ? STDERR_FILENO
                                                      : STDOUT_FILENO;
    uint32_t state = seed_text ? (uint32_t) strtoul (seed_text, NULL, 10) : 0;
    char block [4096];
    memset (block, 'x', sizeof (block));
    int64_t left = plan->number;
    while (left > 0) {
        size_t take = left < (int64_t) sizeof (block)
                    ? (size_t) left : sizeof (block);
        for (size_t index = 0; state && index < take; index++) {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            block [index] = (char) (state & 0xff);
        }
        if (s_write_all (fd, block, take))
            return 1;
        left -= (int64_t) take;
    }
    return 0;
}

//  Writes "line 1" .. "line N" (N = plan->number), one every
//  plan->interval_ms (the first at once).
static int
s_lines_child (const backend_plan_t *plan)
{
    int64_t interval_ms = plan->interval_ms;
    for (int64_t line = 1; line <= plan->number; line++) {
        if (line > 1 && interval_ms > 0) {
            struct timespec left = { (time_t) (interval_ms / 1000),
                                     (long) (interval_ms % 1000) * 1000000L };
            while (nanosleep (&left, &left) == -1 && errno == EINTR)
                ;
        }
        if (s_write_number (STDOUT_FILENO, "line ", (uint64_t) line)
        ||  s_write_all (STDOUT_FILENO, "\n", 1))
            return 1;
    }
    return 0;
}

//  Reads an interval the param's pattern let through: "250ms", "2s",
//  "0.5s" (at most three decimals). Returns milliseconds, or -1.
static int64_t
s_interval_ms (const char *text)
{
    if (!text)
        return -1;
    char *end = NULL;
    int64_t whole = strtoll (text, &end, 10);
    if (end == text || whole < 0)
        return -1;
    if (strcmp (end, "ms") == 0)
        return whole;
    int64_t fraction_ms = 0;
    if (*end == '.') {
        int64_t scale = 100;
        for (end++; *end >= '0' && *end <= '9' && scale > 0; end++) {
            fraction_ms += (*end - '0') * scale;
            scale /= 10;
        }
    }
    return strcmp (end, "s") == 0 ? whole * 1000 + fraction_ms : -1;
}

//  Points the plan's text argument at param NAME (when given).
static void
s_text_arg (backend_plan_t *plan, const char *name)
{
    plan->text = backend_plan_param (plan, name);
    plan->text_len = plan->text ? strlen (plan->text) : 0;
}

static int
s_plan_echo (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_CHILD;
    plan->child = s_echo_child;
    s_text_arg (plan, "msg");
    return 0;
}

//  test sleep: how much of its time has passed.
static bool
s_sleep_progress (const backend_plan_t *plan, int64_t elapsed_ms,
                  const char *last_line, backend_progress_t *progress)
{
    (void) last_line;
    int64_t total_ms = plan->number * 1000;
    if (total_ms <= 0)
        return false;
    int64_t done_ms = elapsed_ms < total_ms ? elapsed_ms : total_ms;
    progress->percent = (int32_t) (done_ms * 100 / total_ms);
    snprintf (progress->kind, sizeof (progress->kind), "sleeping");
    snprintf (progress->message, sizeof (progress->message),
              "sleeping %" PRId64 " of %" PRId64 " s", done_ms / 1000,
              plan->number);
    return true;
}

static int
s_plan_sleep (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_CHILD;
    plan->child = s_sleep_child;
    plan->progress = s_sleep_progress;
    plan->number = strtoll (backend_plan_param (plan, "seconds"), NULL, 10);
    s_text_arg (plan, "msg");
    return 0;
}

static int
s_plan_fail (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_CHILD;
    plan->child = s_fail_child;
    s_text_arg (plan, "msg");
    return 0;
}

static int
s_plan_flaky (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_CHILD;
    plan->child = s_flaky_child;
    plan->number = strtoll (backend_plan_param (plan, "failures"), NULL, 10);
    return 0;
}

static int
s_plan_output (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_CHILD;
    plan->child = s_output_child;
    plan->number = strtoll (backend_plan_param (plan, "bytes"), NULL, 10);
    return 0;
}

static int
s_plan_lines (backend_plan_t *plan, char *err, size_t err_len)
{
    int64_t interval_ms = s_interval_ms (backend_plan_param (plan,
                                                             "interval"));
    if (interval_ms < 0) {
        snprintf (err, err_len, "param 'interval': expected a duration "
                  "such as 100ms or 0.5s");
        return -1;
    }
    plan->run = BACKEND_RUN_CHILD;
    plan->child = s_lines_child;
    plan->number = strtoll (backend_plan_param (plan, "count"), NULL, 10);
    plan->interval_ms = interval_ms;
    return 0;
}

//  ---------------------------------------------------------------------
//  mark: a file of the test directory

#define S_MARK_MAX 65536        //  Largest mark file read back

//  The path of PLAN's mark in PATH. Returns 0, or -1 with OUTCOME's error.
static int
s_mark_path (const backend_plan_t *plan, char *path, size_t size,
             backend_outcome_t *outcome)
{
    const char *dir = plan->context ? plan->context->test_dir : NULL;
    if (!dir) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "this agent has no test directory");
        return -1;
    }
    snprintf (path, size, "%s/%s", dir, backend_plan_param (plan, "name"));
    return 0;
}

//  The mark's content: TEXT and a newline, fresh
static char *
s_mark_text (const backend_plan_t *plan)
{
    const char *text = backend_plan_param (plan, "text");
    char *content = NULL;
    if (asprintf (&content, "%s\n", text ? text : "") < 0)
        return NULL;
    return content;
}

static void
s_mark (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    char path [4096], temp [4200];
    if (s_mark_path (plan, path, sizeof path, outcome))
        return;
    char *content = s_mark_text (plan);
    mkdir (plan->context->test_dir, 0700);
    snprintf (temp, sizeof temp, "%s.new", path);
    int fd = content ? open (temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                             0600) : -1;
    bool ok = fd >= 0
           && s_write_all (fd, content, strlen (content)) == 0;
    if (fd >= 0 && close (fd) != 0)
        ok = false;
    if (ok && rename (temp, path) != 0)
        ok = false;
    if (!ok) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "%s: %s", path,
                               content ? strerror (errno) : "out of memory");
        if (fd >= 0)
            unlink (temp);
    }
    else {
        outcome->ok = true;
        outcome->exit_code = 0;
        backend_outcome_output (outcome, "%s written\n", path);
    }
    free (content);
}

//  The first line of TEXT, at most 60 bytes, into BUF
static void
s_mark_show (const char *text, char *buf, size_t size)
{
    size_t len = strcspn (text, "\n");
    snprintf (buf, size, "\"%.*s%s\"", (int) (len > 60 ? 60 : len), text,
              len > 60 ? "..." : "");
}

static void
s_mark_check (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    char path [4096];
    if (s_mark_path (plan, path, sizeof path, outcome))
        return;
    char *content = s_mark_text (plan);
    char *old = (char *) calloc (1, S_MARK_MAX + 1);
    if (!content || !old) {
        free (content);
        free (old);
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "out of memory");
        return;
    }
    size_t used = 0;
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    bool absent = fd < 0 && errno == ENOENT;
    if (fd < 0 && !absent) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "%s: %s", path, strerror (errno));
        free (content);
        free (old);
        return;
    }
    while (fd >= 0 && used < S_MARK_MAX) {
        ssize_t got = read (fd, old + used, S_MARK_MAX - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        used += (size_t) got;
    }
    if (fd >= 0)
        close (fd);
    char current [128], desired [128], shown [80];
    if (absent)
        snprintf (current, sizeof current, "%s absent",
                  backend_plan_param (plan, "name"));
    else {
        s_mark_show (old, shown, sizeof shown);
        snprintf (current, sizeof current, "%s holds %s",
                  backend_plan_param (plan, "name"), shown);
    }
    s_mark_show (content, shown, sizeof shown);
    snprintf (desired, sizeof desired, "%s holds %s",
              backend_plan_param (plan, "name"), shown);
    bool differs = absent || used != strlen (content)
                || memcmp (old, content, used) != 0;
    backend_check_verdict (outcome, differs, current, desired);
    if (backend_check_diff (outcome, backend_plan_param (plan, "name"), old,
                            used, content, strlen (content))) {
        outcome->ok = false;
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "out of memory");
    }
    free (content);
    free (old);
}

static int
s_plan_mark (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_INPROC;
    plan->inproc = s_mark;
    return 0;
}

static int
s_check_mark (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_INPROC;
    plan->inproc = s_mark_check;
    return 0;
}

static const backend_param_t s_mark_params [] = {
    { .name = "name", .type = BACKEND_TYPE_STRING, .required = true,
      .pattern = "^[A-Za-z0-9_-]{1,64}$",
      .help = "the mark's file name in the agent's test directory" },
    { .name = "text", .type = BACKEND_TYPE_TEXT, .default_value = "",
      .help = "what to write (a newline is added)" },
};

static const backend_param_t s_echo_params [] = {
    { .name = "msg", .type = BACKEND_TYPE_TEXT, .required = true,
      .help = "text to print (a newline is added)" },
};

static const backend_param_t s_sleep_params [] = {
    { .name = "seconds", .type = BACKEND_TYPE_INT, .required = true,
      .min_value = 0, .max_value = S_MAX_SLEEP_S,
      .help = "how long to sleep, 0 to 86400" },
    { .name = "msg", .type = BACKEND_TYPE_TEXT,
      .help = "text to print after sleeping" },
    { .name = "spawn", .type = BACKEND_TYPE_INT, .min_value = 0,
      .max_value = 4, .default_value = "0",
      .help = "helper processes that sleep alongside, 0 to 4" },
};

static const backend_param_t s_fail_params [] = {
    { .name = "msg", .type = BACKEND_TYPE_TEXT,
      .help = "error text to print on stderr" },
};

static const backend_param_t s_flaky_params [] = {
    { .name = "failures", .type = BACKEND_TYPE_INT, .required = true,
      .min_value = 0, .max_value = S_MAX_FAILURES,
      .help = "attempts that fail before one succeeds, 0 to 10" },
};

static const backend_param_t s_output_params [] = {
    { .name = "bytes", .type = BACKEND_TYPE_INT, .required = true,
      .min_value = 0, .max_value = S_MAX_OUTPUT_BYTES,
      .help = "how many bytes to write, 0 to 67108864" },
    { .name = "seed", .type = BACKEND_TYPE_INT, .required = false,
      .min_value = 1, .max_value = 2147483647,
      .help = "write the bytes of a xorshift32 sequence from this seed "
              "instead of 'x's" },
    { .name = "stream", .type = BACKEND_TYPE_STRING, .required = false,
      .pattern = "^(stdout|stderr)$", .default_value = "stdout",
      .help = "stdout (default) or stderr" },
};

static const backend_param_t s_lines_params [] = {
    { .name = "count", .type = BACKEND_TYPE_INT, .required = true,
      .min_value = 1, .max_value = S_MAX_LINES,
      .help = "how many lines to print, 1 to 100000" },
    { .name = "interval", .type = BACKEND_TYPE_STRING, .required = false,
      .pattern = "^([0-9]{1,5}ms|[0-9]{1,2}(\\.[0-9]{1,3})?s)$",
      .default_value = "1s",
      .help = "time between two lines, as 100ms, 2s or 0.5s: at most "
              "99999ms or 99.999s (default 1s)" },
};

#define S_PARAMS(list) list, sizeof (list) / sizeof (list [0])

static const backend_action_t s_actions [] = {
    { "echo", false, "print a message", S_PARAMS (s_echo_params),
      s_plan_echo, .idempotent = false },
    { "sleep", false, "sleep a number of seconds, then print msg",
      S_PARAMS (s_sleep_params), s_plan_sleep, .idempotent = false },
    { "fail", false, "exit with code 1 and msg on stderr",
      S_PARAMS (s_fail_params), s_plan_fail, .idempotent = false },
    { "flaky", false, "fail while the attempt number is at most failures, "
      "then succeed (to test retries)", S_PARAMS (s_flaky_params),
      s_plan_flaky, .idempotent = false },
    { "output", false, "write bulk output (to test whole outputs and caps)",
      S_PARAMS (s_output_params), s_plan_output, .idempotent = false },
    { "lines", false, "print count numbered lines, one every interval, "
      "then exit 0 (to test live output)", S_PARAMS (s_lines_params),
      s_plan_lines, .idempotent = false },
    { "mark", true, "write text to a file of the agent's test directory "
      "(to test dry runs: its check says whether it would change)",
      S_PARAMS (s_mark_params), s_plan_mark, .idempotent = true,
      .check = s_check_mark },
};

const backend_ops_t backend_test_ops = {
    "test", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.1"
};
