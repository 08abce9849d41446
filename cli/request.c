/*  =========================================================================
    cli - requests: ids, the request of each command, calls through the
    client library, the reply envelope (see cli.h, request.h)
    =========================================================================
*/
#include "request.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/proto.h"
#include "jobopts.h"
#include "render.h"

void
cli_request_id_make (char *buf, size_t buf_len)
{
    client_request_id (buf, buf_len);
}

int
cli_request_build_cmd (const cli_cmd_t *cmd, const cli_args_t *args,
                       const job_spec_t *file_spec, const char *id,
                       pw_t *writer, job_errors_t *errors)
{
    if (!cmd || !cmd->build)
        return -1;               //  Help and version send nothing
    job_errors_t local = { .count = 0 };
    int rc = cmd->build (args, file_spec, id, writer, errors ? errors
                                                             : &local);
    job_errors_clear (&local);
    return rc;
}

//  ---------------------------------------------------------------------
//  Transport: the client library, with gridcli's exit codes and hints

//  The exit code of a client library failure RC, with the sentence for
//  ERR; KEYS NULL or without a cert: plaintext.
static int
s_exit_code (const client_t *client, int rc, const cli_keys_t *keys,
             char *err, size_t err_len)
{
    const char *why = client_error (client);
    switch (rc) {
        case CLIENT_OK:
            return CLI_EXIT_OK;
        case CLIENT_ERR_ENDPOINT:
            snprintf (err, err_len, "%s", why);
            return CLI_EXIT_USAGE;
        case CLIENT_ERR_REFUSED:
            snprintf (err, err_len, "%s", why);
            return CLI_EXIT_REFUSED;
        case CLIENT_ERR_INTERRUPTED:
            snprintf (err, err_len, "%s", why);
            return CLI_EXIT_INTERRUPTED;
        case CLIENT_ERR_NO_ANSWER:
            if (*client_handshake_error (client))
                snprintf (err, err_len, "%s", why);
            else
                snprintf (err, err_len, "%s; check that gridbroker is "
                          "running and that this is its --client endpoint "
                          "(set --broker or GRID_BROKER)%s", why,
                          keys && !keys->cert
                              ? ". This client runs --insecure: a broker "
                                "with CURVE keys does not answer plaintext"
                              : "");
            return CLI_EXIT_UNREACHABLE;
        default:
            snprintf (err, err_len, "%s", why);
            return CLI_EXIT_UNREACHABLE;
    }
}

//  A client for ENDPOINT with KEYS (NULL or no cert: plaintext).
static client_t *
s_client_new (const cli_keys_t *keys, const char *endpoint,
              int64_t timeout_ms)
{
    client_t *client = client_new (endpoint);
    if (!client) {
        fprintf (stderr, "gridcli: out of memory\n");
        abort ();
    }
    if (keys && keys->cert)
        client_set_curve (client, keys->cert, keys->broker_key);
    client_set_timeout (client, timeout_ms);
    client_set_tries (client, CLI_REQUEST_TRIES);
    return client;
}

int
cli_exchange (const char *endpoint, const void *request, size_t size,
              int64_t timeout_ms, pv_doc_t **reply_p, char *err,
              size_t err_len)
{
    return cli_exchange_keys (NULL, endpoint, request, size, timeout_ms,
                              reply_p, err, err_len);
}

int
cli_exchange_keys (const cli_keys_t *keys, const char *endpoint,
                   const void *request, size_t size, int64_t timeout_ms,
                   pv_doc_t **reply_p, char *err, size_t err_len)
{
    client_t *client = s_client_new (keys, endpoint, timeout_ms);
    int rc = client_exchange (client, request, size, reply_p);
    rc = s_exit_code (client, rc, keys, err, err_len);
    client_destroy (&client);
    return rc;
}

//  ---------------------------------------------------------------------
//  The reply envelope

//  For a detail "...params.NAME: unknown param ...", where --NAME is an
//  option of job run or a global one given after BACKEND ACTION (so read
//  as a param), prints where it goes instead.
static void
s_print_option_hint (const char *detail, FILE *err)
{
    static const char *const globals [] = {
        "output", "broker", "request-timeout", "config", "key", "broker-key",
        "insecure", NULL
    };
    const char *start = strstr (detail, ".params.");
    const char *colon = start ? strchr (start, ':') : NULL;
    if (!colon || strncmp (colon, ": unknown param", 15) != 0)
        return;
    start += strlen (".params.");
    size_t len = (size_t) (colon - start);
    bool option = false;
    for (size_t index = 0; !option && cli_run_options [index].name; index++)
        option = strlen (cli_run_options [index].name) == len
                 && strncmp (cli_run_options [index].name, start, len) == 0;
    for (size_t index = 0; !option && globals [index]; index++)
        option = strlen (globals [index]) == len
                 && strncmp (globals [index], start, len) == 0;
    if (option)
        fprintf (err, "  (--%.*s after BACKEND ACTION is read as a param: "
                 "give job run's options before BACKEND)\n", (int) len,
                 start);
}

//  Prints an error reply: "gridcli: <message> (<code>)" and each detail
//  indented.
static void
s_print_refusal (const client_reply_t *reply, FILE *err)
{
    char *message = cli_printable (reply->message, strlen (reply->message),
                                   CLI_PRINTABLE_ALL, false);
    fprintf (err, "gridcli: %s (%s)\n", message, reply->code);
    free (message);
    for (size_t index = 0; index < pv_size (reply->details); index++) {
        size_t len = 0;
        const char *bytes = pv_str (pv_array_at (reply->details, index),
                                    &len);
        char *detail = cli_printable (bytes, len, CLI_PRINTABLE_ALL, false);
        fprintf (err, "  %s\n", detail);
        s_print_option_hint (detail, err);
        free (detail);
    }
    //  A broker of another release: say what to do about it
    if (streq (reply->code, PROTO_ERR_VERSION))
        fprintf (err, "  (this gridcli is release %s, protocol %d: use the "
                 "gridcli of the broker's release, or upgrade gridbroker)\n",
                 GRID_VERSION, PROTO_VERSION);
}

int
cli_reply_data (const pv_doc_t *reply, const char *id, const pv_t **data_p,
                FILE *err)
{
    *data_p = NULL;
    client_reply_t decoded;
    char why [512] = "";
    int rc = CLI_EXIT_OK;
    if (client_reply_decode (reply, id, &decoded, why, sizeof why)
        != CLIENT_OK) {
        fprintf (err, "gridcli: %s\n", why);
        rc = CLI_EXIT_UNREACHABLE;
    }
    else
    if (!decoded.ok) {
        s_print_refusal (&decoded, err);
        rc = CLI_EXIT_REFUSED;
    }
    else
        *data_p = decoded.data;
    client_reply_clear (&decoded);
    return rc;
}

int
cli_answer (const cli_settings_t *settings, int rc,
            const client_reply_t *reply, FILE *err)
{
    if (rc == CLIENT_OK && reply->ok)
        return CLI_EXIT_OK;
    if (rc == CLIENT_OK) {
        s_print_refusal (reply, err);
        return CLI_EXIT_REFUSED;
    }
    if (rc == CLIENT_ERR_MALFORMED && reply->doc) {
        //  An answer came, with the wrong envelope
        fprintf (err, "gridcli: %s\n", client_error (settings->client));
        return CLI_EXIT_UNREACHABLE;
    }
    char why [1200];
    rc = s_exit_code (settings->client, rc, &settings->keys, why, sizeof why);
    fprintf (err, "gridcli: %s\n", why);
    return rc;
}

int
cli_call (const cli_settings_t *settings, const pw_t *request,
          const char *id, pv_doc_t **reply_p, const pv_t **data_p,
          FILE *err)
{
    *data_p = NULL;
    *reply_p = NULL;
    int rc = client_exchange (settings->client, pw_data (request),
                              pw_size (request), reply_p);
    if (rc != CLIENT_OK) {
        char why [1200];
        rc = s_exit_code (settings->client, rc, &settings->keys, why,
                          sizeof why);
        fprintf (err, "gridcli: %s\n", why);
        return rc;
    }
    return cli_reply_data (*reply_p, id, data_p, err);
}

int
cli_request_cmd (const cli_cmd_t *cmd, const cli_args_t *args,
                 const job_spec_t *file_spec, const cli_settings_t *settings,
                 pv_doc_t **reply_p, const pv_t **data_p, FILE *err)
{
    *reply_p = NULL;
    *data_p = NULL;
    char id [CLI_REQUEST_ID_LEN];
    cli_request_id_make (id, sizeof id);
    pw_t *writer = pw_new ();
    job_errors_t errors = { .count = 0 };
    int rc;
    if (cli_request_build_cmd (cmd, args, file_spec, id, writer, &errors)
        != 0) {
        cli_print_job_errors (err, NULL, &errors);
        rc = CLI_EXIT_USAGE;
    }
    else
        rc = cli_call (settings, writer, id, reply_p, data_p, err);
    job_errors_clear (&errors);
    pw_destroy (&writer);
    return rc;
}

int
cli_show_cmd (const cli_cmd_t *cmd, const cli_args_t *args,
              const cli_settings_t *settings, const pv_t *data, FILE *out,
              FILE *err)
{
    int rc = cli_render_cmd (cmd, data, settings->output, out);
    if (rc == -2) {
        fprintf (err, "gridcli: the broker's answer is malformed (its data "
                 "does not have the shape of a %s answer)\n",
                 args->command_name);
        return CLI_EXIT_UNREACHABLE;
    }
    if (rc != 0) {
        fprintf (err, "gridcli: cannot write the output: %s\n",
                 strerror (errno));
        return CLI_EXIT_UNREACHABLE;
    }
    return CLI_EXIT_OK;
}
