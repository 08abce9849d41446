/*  =========================================================================
    fuzz_seeds - writes the seed corpora of the fuzz targets

        fuzz_seeds DIR

    writes DIR/fuzz_proto (one valid body of every message type, and client
    requests), DIR/fuzz_job (job specs and key records as msgpack) and
    DIR/fuzz_yaml (job files and config files as YAML) and DIR/fuzz_text
    (target and cron expressions). libFuzzer starts
    from these, so it reaches deep into each decoder at once instead of
    first having to guess what a hello looks like.
    =========================================================================
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../broker/auth.h"
#include "../../proto/conf.h"
#include "../../proto/job.h"
#include "../../proto/proto.h"

static const char *s_dir;
static int s_written;

static void
s_write (const char *target, const char *name, const void *data, size_t size)
{
    char path [1024];
    snprintf (path, sizeof path, "%s/%s", s_dir, target);
    if (mkdir (path, 0755) != 0 && errno != EEXIST) {
        perror (path);
        exit (1);
    }
    snprintf (path, sizeof path, "%s/%s/%s", s_dir, target, name);
    FILE *file = fopen (path, "wb");
    if (!file || fwrite (data, 1, size, file) != size) {
        perror (path);
        exit (1);
    }
    fclose (file);
    s_written++;
}

static void
s_write_msg (const proto_msg_t *msg)
{
    pw_t *writer = pw_new ();
    if (proto_msg_encode (msg, writer) != 0) {
        fprintf (stderr, "fuzz_seeds: a %s seed does not encode\n",
                 proto_type_name (msg->type));
        exit (1);
    }
    //  One file per seed, also for two seeds of one type
    static int seq = 0;
    char name [64];
    snprintf (name, sizeof name, "%s-%d", proto_type_name (msg->type), ++seq);
    s_write ("fuzz_proto", name, pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
}

static const char *s_jobs [] = {
    "target: all\n"
    "tasks:\n"
    "  - { backend: test, action: echo, params: { msg: hello } }\n",

    "target: { scope: group, value: web }\n"
    "strategy: continue\n"
    "timeout: 30m\n"
    "priority: 5\n"
    "idempotency_key: deploy-42\n"
    "tasks:\n"
    "  - tasks:\n"
    "      - { backend: apt, action: update }\n"
    "      - { backend: apt, action: install, params: { package: nginx },\n"
    "          timeout: 5m, max_retries: 2 }\n"
    "  - { backend: systemd, action: start, params: { unit: nginx },\n"
    "      condition: on_success }\n"
    "  - { backend: systemd, action: stop, params: { unit: nginx },\n"
    "      condition: on_failure }\n",

    "target: { scope: label, value: tier=web.dev, any: true }\n"
    "tasks:\n"
    "  - { backend: ping, action: host, params: { host: example.net,\n"
    "      count: 3 } }\n",

    "target: node:web-01,web-02\n"
    "tasks:\n"
    "  - { backend: test, action: sleep, params: { seconds: 1 } }\n",
};

static const char *s_configs [] = {
    "data_dir: /var/lib/grid/broker\n"
    "client: tcp://127.0.0.1:7701\n"
    "heartbeat: 5s\n"
    "auto_accept: false\n"
    "clients:\n"
    "  - { key: /etc/grid/keys/alice.key, role: admin, name: alice }\n"
    "allow: [test.*, \"system.*\", apt.install]\n",

    "id: web-01\n"
    "groups: [web, prod]\n"
    "labels: { tier: web.dev, dc: us-east }\n"
    "concurrency: 4\n"
    "disabled_backends: []\n",
};

int
main (int argc, char *argv [])
{
    if (argc != 2) {
        fprintf (stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    s_dir = argv [1];
    if (mkdir (s_dir, 0755) != 0 && errno != EEXIST) {
        perror (s_dir);
        return 1;
    }

    //  Every message type
    char *groups [] = {"web", "prod"};
    proto_kv_t labels [] = {{"tier", "web.dev.us-east", false}};
    proto_param_spec_t params [] = {
        {"package", true, "string", "^[a-z0-9.+-]+$", NULL, "Package name",
         0, 0},
        {"count", false, "int", NULL, "3", "Echo requests", 1, 20},
    };
    proto_action_spec_t actions [] = {
        {"install", true, "Install a package", params, 1, true},
        {"host", false, "Ping a host", params + 1, 1, false},
    };
    proto_backend_spec_t backends [] = {{"apt", actions, 2, "1.0"}};
    char *nodes [] = {"web-01", "web-02"};
    proto_kv_t command_params [] = {{"package", "nginx", false}};
    proto_kv_t facts [] = {{"uptime", "12345", false}};
    proto_ack_t acks [] = {
        {.job = "j-0193a1b2c3d4-0001", .step = 2, .attempt = 1},
        {.job = "j-0193a1b2c3d4-0002", .step = 0, .attempt = 3}};
    proto_ack_t output_acks [] = {
        {.job = "j-0193a1b2c3d4-0001", .step = 2, .attempt = 1,
         .stream = "stdout", .offset = 0},
        {.job = "j-0193a1b2c3d4-0002", .step = 0, .attempt = 3,
         .stream = "stderr", .offset = 1048576}};
    char *features [] = {PROTO_FEATURE_RESULT_ACKS, PROTO_FEATURE_RESULTS};
    char *granted [] = {PROTO_FEATURE_RESULTS};
    proto_msg_t entries [] = {
        {.type = PROTO_RESULT, .job = "j-0193a1b2c3d4-0001", .step = 2,
         .attempt = 1, .status = "success", .output = "done\n", .error = "",
         .exit_code = 0, .duration_ms = 812, .data = facts, .data_count = 1},
        {.type = PROTO_RESULT, .job = "j-0193a1b2c3d4-0002", .step = 0,
         .attempt = 3, .status = "failed", .output = "head", .error = "E",
         .exit_code = 1, .duration_ms = 5, .truncated = true,
         .output_size = 3000000, .output_dropped = 1000},
    };
    proto_kv_t host_facts [] = {{.key = "mem_mb", .value = "8192"},
                                {.key = "os", .value = "debian"},
                                {.key = "os_version", .value = "12"}};
    proto_msg_t messages [] = {
        {.type = PROTO_HELLO, .node = "web-01", .hostname = "web-01.lan",
         .groups = groups, .group_count = 2, .labels = labels,
         .label_count = 1, .backends = backends, .backend_count = 1,
         .version = "0.1.0", .concurrency = 4, .features = features,
         .feature_count = 2},
        {.type = PROTO_HEARTBEAT, .node = "web-01", .running = 1, .queued = 2},
        {.type = PROTO_ACK, .node = "web-01", .job = "j-0193a1b2c3d4-0001",
         .step = 2, .attempt = 1},
        {.type = PROTO_STARTED, .node = "web-01",
         .job = "j-0193a1b2c3d4-0001", .step = 2, .attempt = 1},
        {.type = PROTO_PROGRESS, .node = "web-01",
         .job = "j-0193a1b2c3d4-0001", .step = 2, .attempt = 1,
         .percent = 42, .kind = "downloading",
         .message = "downloading nginx"},
        {.type = PROTO_RESULT, .node = "web-01", .job = "j-0193a1b2c3d4-0001",
         .step = 2, .attempt = 1, .status = "success", .output = "done\n",
         .error = "", .exit_code = 0, .duration_ms = 812, .data = facts,
         .data_count = 1},
        {.type = PROTO_BYE, .node = "web-01", .reason = "shutdown"},
        {.type = PROTO_WELCOME, .node = "web-01", .heartbeat_ms = 5000},
        {.type = PROTO_RESULT_ACK, .job = "j-0193a1b2c3d4-0001", .step = 2,
         .attempt = 1},
        {.type = PROTO_COMMAND, .job = "j-0193a1b2c3d4-0001", .step = 2,
         .attempt = 1, .backend = "apt", .action = "install",
         .params = command_params, .param_count = 1, .timeout_ms = 300000,
         .nodes = nodes, .node_count = 2},
        {.type = PROTO_CANCEL, .job = "j-0193a1b2c3d4-0001",
         .reason = "cancelled by operator"},
        {.type = PROTO_ERROR, .code = "pending",
         .message = "key waits for acceptance"},
        {.type = PROTO_RESULT, .node = "web-01", .job = "j-0193a1b2c3d4-0001",
         .step = 2, .attempt = 1, .status = "success", .output = "head",
         .error = "", .exit_code = 0, .duration_ms = 812, .truncated = true,
         .output_size = 3000000, .error_size = 1048576,
         .error_dropped = 2000000},
        {.type = PROTO_WELCOME, .node = "web-01", .heartbeat_ms = 5000,
         .max_output = 16777216},
        {.type = PROTO_OUTPUT, .node = "web-01", .job = "j-0193a1b2c3d4-0001",
         .step = 2, .attempt = 1, .stream = "stdout", .offset = 1048576,
         .chunk = (uint8_t *) "a\0\xff\xfe", .chunk_len = 4,
         .size = 3000000},
        {.type = PROTO_OUTPUT_ACK, .job = "j-0193a1b2c3d4-0001", .step = 2,
         .attempt = 1, .stream = "stderr", .offset = 0},
        {.type = PROTO_RESULT_ACKS, .acks = acks, .ack_count = 2},
        {.type = PROTO_OUTPUT_ACKS, .acks = output_acks, .ack_count = 2},
        {.type = PROTO_RESULTS, .node = "web-01", .results = entries,
         .result_count = 2},
        {.type = PROTO_WELCOME, .node = "web-01", .heartbeat_ms = 5000,
         .max_output = 16777216, .features = granted, .feature_count = 1},
        {.type = PROTO_FACTS, .node = "web-01", .facts = host_facts,
         .fact_count = 3},
        {.type = PROTO_BLOB_GET, .node = "web-01", .sha256 =
         "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
         .offset = 262144},
        {.type = PROTO_BLOB_CHUNK, .sha256 =
         "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
         .offset = 0, .size = 4, .chunk = (uint8_t *) "test",
         .chunk_len = 4},
        {.type = PROTO_BROKER_KEY, .node = "web-01",
         .key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"},
        {.type = PROTO_BROKER_KEY_ACK, .node = "web-01",
         .key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"},
    };
    for (size_t index = 0; index < sizeof messages / sizeof messages [0];
         index++)
        s_write_msg (&messages [index]);

    //  Job specs (msgpack) and the same as job files (YAML)
    for (size_t index = 0; index < sizeof s_jobs / sizeof s_jobs [0];
         index++) {
        char name [32];
        snprintf (name, sizeof name, "job-%zu.yaml", index);
        s_write ("fuzz_yaml", name, s_jobs [index], strlen (s_jobs [index]));
        pv_doc_t *doc = NULL;
        char err [256];
        if (conf_parse (s_jobs [index], strlen (s_jobs [index]), &doc, err,
                        sizeof err) != 0) {
            fprintf (stderr, "fuzz_seeds: job %zu: %s\n", index, err);
            return 1;
        }
        job_spec_t *spec = NULL;
        job_errors_t errors;
        memset (&errors, 0, sizeof errors);
        if (job_spec_decode (pv_doc_root (doc), &spec, &errors) != 0) {
            fprintf (stderr, "fuzz_seeds: job %zu: %s\n", index,
                     errors.count ? errors.items [0] : "invalid");
            return 1;
        }
        pw_t *writer = pw_new ();
        job_spec_encode (spec, writer);
        snprintf (name, sizeof name, "job-%zu", index);
        s_write ("fuzz_job", name, pw_data (writer), pw_size (writer));
        //  And inside a submit request
        pw_t *request = pw_new ();
        proto_request_begin (request, "job.submit", "seed-1", 1);
        pw_str (request, "job");
        pw_raw (request, pw_data (writer), pw_size (writer));
        snprintf (name, sizeof name, "submit-%zu", index);
        s_write ("fuzz_proto", name, pw_data (request), pw_size (request));
        pw_destroy (&request);
        pw_destroy (&writer);
        job_spec_destroy (&spec);
        pv_doc_destroy (&doc);
    }
    for (size_t index = 0; index < sizeof s_configs / sizeof s_configs [0];
         index++) {
        char name [32];
        snprintf (name, sizeof name, "config-%zu.yaml", index);
        s_write ("fuzz_yaml", name, s_configs [index],
                 strlen (s_configs [index]));
    }

    //  Key records
    auth_key_t key = {.status = AUTH_KEY_ACCEPTED, .node = "web-01",
                      .hostname = "web-01.lan", .first_seen_ms = 1700000000000,
                      .accepted_at_ms = 1700000001000,
                      .updated_at_ms = 1700000001000};
    pw_t *writer = pw_new ();
    auth_key_encode (&key, writer);
    s_write ("fuzz_job", "key-accepted", pw_data (writer), pw_size (writer));
    pw_reset (writer);
    key.status = AUTH_KEY_PENDING;
    key.hostname = NULL;
    auth_key_encode (&key, writer);
    s_write ("fuzz_job", "key-pending", pw_data (writer), pw_size (writer));

    //  Other client requests
    const char *types [] = {"job.get", "job.list", "key.list", "key.accept",
                            "status"};
    for (size_t index = 0; index < sizeof types / sizeof types [0]; index++) {
        pw_reset (writer);
        bool with_node = strcmp (types [index], "key.accept") == 0;
        bool with_job = strcmp (types [index], "job.get") == 0;
        proto_request_begin (writer, types [index], "seed-2",
                             with_node || with_job ? 1 : 0);
        if (with_node) {
            pw_str (writer, "node");
            pw_str (writer, "web-01");
        }
        if (with_job) {
            pw_str (writer, "job");
            pw_str (writer, "j-0193a1b2c3d4-0001");
        }
        char name [64];
        snprintf (name, sizeof name, "request-%s", types [index]);
        s_write ("fuzz_proto", name, pw_data (writer), pw_size (writer));
    }

    //  A job.output page request
    pw_reset (writer);
    proto_request_begin (writer, "job.output", "seed-4", 7);
    pw_str (writer, "job");
    pw_str (writer, "j-0193a1b2c3d4-0001");
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    pw_str (writer, "step");
    pw_int (writer, 2);
    pw_str (writer, "stream");
    pw_str (writer, "stderr");
    pw_str (writer, "attempt");
    pw_int (writer, 1);
    pw_str (writer, "offset");
    pw_int (writer, 1048576);
    pw_str (writer, "limit");
    pw_int (writer, 65536);
    s_write ("fuzz_proto", "request-job.output", pw_data (writer),
             pw_size (writer));

    //  Text at the edges of UTF-8: valid multibyte forms and the invalid
    //  ones the decoder must refuse (overlong, surrogate, past U+10FFFF,
    //  cut, NUL), in a request id, a key and a param value
    static const char *texts [] = {
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82 \xf4\x8f\xbf\xbf",
        "\xc0\x80", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xe2\x82", "a\0b",
    };
    for (size_t index = 0; index < sizeof texts / sizeof texts [0]; index++) {
        size_t len = index == 6 ? 3 : strlen (texts [index]);
        pw_reset (writer);
        pw_map (writer, 4);
        pw_str (writer, "v");
        pw_int (writer, 1);
        pw_str (writer, "type");
        pw_str (writer, "node.get");
        pw_str (writer, "id");
        pw_strn (writer, texts [index], len);
        pw_str (writer, "node");
        pw_str (writer, "web-01");
        char name [64];
        snprintf (name, sizeof name, "text-id-%zu", index);
        s_write ("fuzz_proto", name, pw_data (writer), pw_size (writer));
        pw_reset (writer);
        proto_request_begin (writer, "job.submit", "seed-3", 1);
        pw_str (writer, "job");
        pw_map (writer, 1);
        pw_str (writer, "tasks");
        pw_array (writer, 1);
        pw_map (writer, 3);
        pw_str (writer, "backend");
        pw_str (writer, "test");
        pw_str (writer, "action");
        pw_str (writer, "echo");
        pw_str (writer, "params");
        pw_map (writer, 1);
        pw_strn (writer, texts [index], len);
        pw_strn (writer, texts [index], len);
        snprintf (name, sizeof name, "text-param-%zu", index);
        s_write ("fuzz_proto", name, pw_data (writer), pw_size (writer));
    }
    pw_destroy (&writer);

    //  Texts: target expressions, good and bad
    const char *expressions [] = {
        "group:web and label:tier=prod and not node:web-03",
        "any:(group:web or group:db) and not label:env=test.a",
        "not (node:a,b,c or all) and ((group:x))",
        "group:web and", "(group:a or", "group:a) or x", "any:any:all"};
    for (size_t index = 0;
         index < sizeof expressions / sizeof expressions [0]; index++) {
        char name [32];
        snprintf (name, sizeof name, "target-%zu", index);
        s_write ("fuzz_text", name, expressions [index],
                 strlen (expressions [index]));
    }
    //  Texts: cron expressions, good and bad
    const char *crons [] = {"*/5 * * * *", "30 2 * * *", "0 0 13 * fri",
                            "0 9-17/2 * jan-mar,DEC mon-fri", "@weekly",
                            "0 0 30 2 *", "5/15 * * * *", "60 * * * *"};
    for (size_t index = 0; index < sizeof crons / sizeof crons [0]; index++) {
        char name [32];
        snprintf (name, sizeof name, "cron-%zu", index);
        s_write ("fuzz_text", name, crons [index], strlen (crons [index]));
    }
    printf ("fuzz_seeds: wrote %d seeds in %s\n", s_written, s_dir);
    return 0;
}
