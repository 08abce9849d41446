/*  =========================================================================
    test_it_json - gridcli's JSON is a superset of its text: for job
    status, job list, node list, node info, key list, queue stats and dlq
    list, every value the text form prints is in the JSON form of the same
    state; and the JSON says what the text says of a running job (its
    batch, its tasks' progress), of skipped and lost cells, of typed
    params and of a submit an idempotency key answered
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <ctype.h>

#include "../proto/pv.h"
#include "lib/harness.h"

#define S_CLI_MS 20000

static grid_t s_grid;
static char s_done [64];        //  A finished job: a failure, then skips
static char s_running [64];     //  A job in its first of two batches

//  Words of the text's layout (labels, headers, sentences), not values
static const char *s_prose [] = {
    "last", "seen", "registered", "created", "updated", "no", "job",
    "pending", "samples", "entry", "entries", "in", "the", "dead-letter",
    "queue", "marked", "steps", "step", "failed", "of", "nodes", "node",
    "at", "a", "time", "required", "param", "max_failures", "none",
    "=", "retry", "retried", "by", "more", "not", "run", "5m", "1h",
    //  An action's kind (query or modify) in node info
    "query", "modify",
    NULL
};

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0
        || grid_start_agent (&s_grid, "web-01", "web", NULL, NULL) < 0
        || grid_start_agent (&s_grid, "web-02", "web", NULL, NULL) < 0
        || grid_start_agent (&s_grid, "db-01", "db", "tier=db", NULL) < 0) {
        grid_dump_logs (&s_grid);
        return -1;
    }
    //  A job that fails at its second step: the third is skipped
    char *id = grid_submit_id (&s_grid,
                               "target: group:web\n"
                               "tasks:\n"
                               "  - {backend: test, action: echo,"
                               " params: {msg: first}}\n"
                               "  - {backend: test, action: fail,"
                               " params: {msg: broken}}\n"
                               "  - {backend: test, action: echo,"
                               " params: {msg: never}}\n");
    if (!id)
        return -1;
    snprintf (s_done, sizeof s_done, "%s", id);
    free (id);
    pv_doc_t *reply = grid_wait_job (&s_grid, s_done, S_CLI_MS);
    pv_doc_destroy (&reply);
    //  A failed any-node job goes to the dead-letter queue
    id = grid_submit_id (&s_grid,
                         "target: any:node:db-01\n"
                         "tasks:\n"
                         "  - {backend: test, action: fail,"
                         " params: {msg: lettered}}\n");
    if (!id)
        return -1;
    reply = grid_wait_job (&s_grid, id, S_CLI_MS);
    pv_doc_destroy (&reply);
    free (id);
    //  A long job, one node at a time: web-01 runs, web-02 waits
    id = grid_submit_id (&s_grid,
                         "target: group:web\n"
                         "batch: 1\n"
                         "tasks:\n"
                         "  - {backend: test, action: sleep,"
                         " params: {seconds: 300}}\n");
    if (!id)
        return -1;
    snprintf (s_running, sizeof s_running, "%s", id);
    free (id);
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

static bool
s_is_prose (const char *word)
{
    for (size_t index = 0; s_prose [index]; index++)
        if (strcasecmp (word, s_prose [index]) == 0)
            return true;
    //  Column headers: upper case words (NODE, LAST-SEEN, JOBS-PENDING)
    bool upper = true, letters = false;
    for (const char *at = word; *at; at++) {
        if (islower ((unsigned char) *at))
            upper = false;
        if (isalpha ((unsigned char) *at))
            letters = true;
    }
    return letters && upper && strlen (word) > 1;
}

//  True when JSON holds a whole number within TOLERANCE of VALUE.
static bool
s_json_has_number (const char *json, double value, double tolerance)
{
    for (const char *at = json; *at; at++) {
        if (!isdigit ((unsigned char) *at)
            || (at > json && (isdigit ((unsigned char) at [-1])
                              || at [-1] == '.')))
            continue;
        double number = strtod (at, NULL);
        if (number >= value - tolerance && number <= value + tolerance)
            return true;
    }
    return false;
}

//  A duration as gridcli prints it ("850ms", "1.5s", "42s", "3m05s",
//  "2h10m") in ms, or -1.
static double
s_duration_ms (const char *word)
{
    char *end = NULL;
    double first = strtod (word, &end);
    if (end == word)
        return -1;
    if (strcmp (end, "ms") == 0)
        return first;
    if (strcmp (end, "s") == 0)
        return first * 1000;
    int second = 0;
    if (sscanf (end, "m%ds", &second) == 1)
        return first * 60000 + second * 1000;
    if (sscanf (end, "h%dm", &second) == 1)
        return first * 3600000 + second * 60000;
    return -1;
}

//  True when the text's WORD is in JSON: as it is, as the numbers of
//  "i/n", or as the ms of a duration.
static bool
s_word_in_json (const char *word, const char *json)
{
    if (strstr (json, word))
        return true;
    long first = 0, second = 0;
    char rest = 0;
    if (sscanf (word, "%ld/%ld%c", &first, &second, &rest) == 2)
        return s_json_has_number (json, (double) first, 0)
               && s_json_has_number (json, (double) second, 0);
    double ms = s_duration_ms (word);
    //  Rounded for people: "4.1s" is 4103 ms
    if (ms >= 0)
        return s_json_has_number (json, ms, ms * 0.05 + 1);
    return false;
}

//  Every value of TEXT (but those of lines holding SKIP, when not NULL)
//  is in JSON; prints the words that are not.
static void
s_assert_superset (const char *what, const char *text, const char *json,
                   const char *skip)
{
    char *copy = strdup (text);
    assert_non_null (copy);
    size_t missing = 0;
    char *line_save = NULL;
    for (char *line = strtok_r (copy, "\n", &line_save); line;
         line = strtok_r (NULL, "\n", &line_save)) {
        if (skip && strstr (line, skip))
            continue;
        char *word_save = NULL;
        for (char *word = strtok_r (line, " ", &word_save); word;
             word = strtok_r (NULL, " ", &word_save)) {
            //  Separators around a value: "web,db", "(failed)", "msg*"
            char *part_save = NULL;
            for (char *part = strtok_r (word, ",()*;=", &part_save); part;
                 part = strtok_r (NULL, ",()*;=", &part_save)) {
                size_t len = strlen (part);
                while (len && (part [len - 1] == ':' || part [len - 1] == '.'))
                    part [--len] = 0;
                bool value = false;
                for (const char *at = part; *at; at++)
                    if (isalnum ((unsigned char) *at))
                        value = true;
                if (!value || s_is_prose (part) || s_word_in_json (part, json))
                    continue;
                fprintf (stderr, "%s: the text's '%s' is not in the JSON\n",
                         what, part);
                missing++;
            }
        }
    }
    free (copy);
    if (missing)
        fprintf (stderr, "--- text\n%s--- json\n%s", text, json);
    assert_int_equal (missing, 0);
}

//  Runs the command both ways; checks the JSON holds the text's values.
static void
s_compare (const char *skip, const char *a, const char *b, const char *c)
{
    char *text = NULL, *json = NULL, *err = NULL;
    char what [128];
    snprintf (what, sizeof what, "%s %s%s%s", a, b ? b : "", c ? " " : "",
              c ? c : "");
    int rc = grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output", "json",
                       a, b, c, NULL);
    free (err);
    int text_rc = grid_cli (&s_grid, &text, &err, S_CLI_MS, a, b, c, NULL);
    if (rc != text_rc)
        fprintf (stderr, "%s: %s\n", what, err);
    assert_int_equal (rc, text_rc);
    s_assert_superset (what, text, json, skip);
    free (text);
    free (json);
    free (err);
}

static void
test_json_superset_of_text (void **state)
{
    s_compare (NULL, "job", "status", s_done);
    //  The skipped step says why in both forms
    char *text = NULL, *json = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &text, &err, S_CLI_MS, "job",
                                "status", s_done, NULL), 1);
    free (err);
    assert_true (grid_line_with (text, "web-01", "2", "skipped",
                                 "fail-fast: an earlier step failed", NULL));
    assert_int_equal (grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output",
                                "json", "job", "status", s_done, NULL), 1);
    assert_non_null (strstr (json, "\"error\": \"fail-fast: an earlier step "
                                   "failed\""));
    free (text);
    free (json);
    free (err);
    //  A running task's percent moves between the two calls: its line is
    //  checked by test_json_running_job, the rest here
    s_compare ("progress", "job", "status", s_running);
    s_compare (NULL, "job", "list", NULL);
    s_compare (NULL, "queue", "stats", NULL);
    s_compare (NULL, "dlq", "list", NULL);
    //  An online node's last-seen moves with each heartbeat: the nodes
    //  stop first, so that both forms read the same
    for (int slot = 0; slot < 3; slot++)
        grid_stop_agent (&s_grid, slot, false);
    assert_true (grid_wait_node (&s_grid, "web-01", "offline", S_CLI_MS));
    assert_true (grid_wait_node (&s_grid, "web-02", "offline", S_CLI_MS));
    assert_true (grid_wait_node (&s_grid, "db-01", "offline", S_CLI_MS));
    s_compare (NULL, "node", "list", NULL);
    s_compare (NULL, "node", "info", "db-01");
    s_compare (NULL, "key", "list", NULL);
}

//  The running job: its batch and its task's progress in both forms
static void
test_json_running_job (void **state)
{
    //  Until web-01 reports progress
    bool reporting = false;
    for (int tries = 0; tries < 400 && !reporting; tries++) {
        pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", s_running,
                                   NULL);
        const pv_t *data = NULL;
        assert_true (grid_reply_ok (doc, &data));
        reporting = pv_size (pv_map_get (pv_map_get (data, "progress"),
                                         "tasks")) > 0;
        pv_doc_destroy (&doc);
        if (!reporting)
            zclock_sleep (50);
    }
    assert_true (reporting);
    char *json = NULL, *text = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output",
                                "json", "job", "status", s_running, NULL), 0);
    free (err);
    const char *progress = strstr (json, "\"progress\": {");
    assert_non_null (progress);
    assert_non_null (strstr (progress, "\"batch\": 1,"));
    assert_non_null (strstr (progress, "\"batches\": 2,"));
    assert_non_null (strstr (progress, "\"node\": \"web-01\""));
    assert_non_null (strstr (progress, "\"percent\": "));
    assert_int_equal (grid_cli (&s_grid, &text, &err, S_CLI_MS, "job",
                                "status", s_running, NULL), 0);
    assert_true (grid_line_with (text, "batch", "1/2", NULL));
    assert_true (grid_line_with (text, "progress", "web-01", NULL));
    free (text);
    free (json);
    free (err);
}

//  A second job run with the same --idempotency-key makes no job: the
//  text says so, the JSON says existing; params keep their type
static void
test_json_idempotency_and_params (void **state)
{
    char *first = NULL, *second = NULL, *json = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &first, &err, S_CLI_MS, "job",
                                "run", "--idempotency-key", "deploy-7",
                                "--target", "node:db-01", "test", "echo",
                                "--msg", "once", NULL), 0);
    free (err);
    assert_true (grid_line_with (first, "submitted", NULL));
    assert_false (grid_line_with (first, "already", NULL));
    assert_int_equal (grid_cli (&s_grid, &second, &err, S_CLI_MS, "job",
                                "run", "--idempotency-key", "deploy-7",
                                "--target", "node:db-01", "test", "echo",
                                "--msg", "once", NULL), 0);
    free (err);
    assert_true (grid_line_with (second, "already", "submitted", "with",
                                 "key", "deploy-7", NULL));
    //  The same job id both times
    char job [64];
    assert_int_equal (sscanf (first, "job %63s", job), 1);
    assert_non_null (strstr (second, job));
    assert_int_equal (grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output",
                                "json", "job", "run", "--idempotency-key",
                                "deploy-7", "--target", "node:db-01", "test",
                                "echo", "--msg", "once", NULL), 0);
    free (err);
    assert_non_null (strstr (json, "\"existing\": true"));
    assert_non_null (strstr (json, "\"idempotency_key\": \"deploy-7\""));
    free (first);
    free (second);
    free (json);
    //  The job file said seconds: 300, a number
    assert_int_equal (grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output",
                                "json", "job", "status", s_running, NULL), 0);
    assert_non_null (strstr (json, "\"seconds\": 300"));
    free (json);
    free (err);
}

//  Output that is not UTF-8 text says so: output_binary; text does not
static void
test_json_binary_output (void **state)
{
    char *json = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output",
                                "json", "job", "run", "--target",
                                "node:db-01", "--wait", "test", "output",
                                "--bytes", "64", "--seed", "7", NULL), 0);
    assert_non_null (strstr (json, "\"output_binary\": true"));
    free (json);
    free (err);
    char *text = NULL;
    assert_int_equal (grid_cli (&s_grid, &text, &err, S_CLI_MS, "job", "run",
                                "--target", "node:db-01", "--wait", "test",
                                "output", "--bytes", "64", "--seed", "7",
                                NULL), 0);
    assert_true (grid_line_with (text, "(binary output, 64 B:", NULL));
    free (text);
    free (err);
    assert_int_equal (grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output",
                                "json", "job", "run", "--target",
                                "node:db-01", "--wait", "test", "output",
                                "--bytes", "64", NULL), 0);
    assert_null (strstr (json, "output_binary"));
    free (json);
    free (err);
}

//  A backend's numbers stay numbers: system memory's data
static void
test_json_data_numbers (void **state)
{
    char *json = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &json, &err, S_CLI_MS, "--output",
                                "json", "job", "run", "--target",
                                "node:db-01", "--wait", "system", "memory",
                                NULL), 0);
    const char *value = strstr (json, "\"available_kib\": ");
    assert_non_null (value);
    assert_true (isdigit ((unsigned char) value [strlen ("\"available_kib\": ")]));
    free (json);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_json_running_job),
        cmocka_unit_test (test_json_idempotency_and_params),
        cmocka_unit_test (test_json_binary_output),
        cmocka_unit_test (test_json_data_numbers),
        cmocka_unit_test (test_json_superset_of_text),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
