/*  =========================================================================
    cli - gridcli file: upload, list, delete the broker's blobs

    A blob is a file's content stored once in the broker by its sha256;
    file.put of a sha256 sends nodes to fetch it. upload sends it in
    pieces of 256 KiB (blob.put), skipping what the broker has: all of
    it (the same content uploaded before) or the start of an upload cut
    short.
    =========================================================================
*/
#include "cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/base64.h"
#include "../proto/proto.h"
#include "../proto/sha256.h"
#include "render.h"
#include "request.h"
#include "util.h"

static const char s_help_file [] =
"gridcli file - file contents (blobs) stored in the broker for file put\n"
"\n"
"Usage:\n"
"  gridcli file upload PATH\n"
"  gridcli file list\n"
"  gridcli file delete SHA256\n"
"\n"
"file upload   stores the local file PATH in the broker, named by its\n"
"              sha256, and prints that name. Content the broker has is\n"
"              not sent again; an upload cut short goes on where it\n"
"              stopped. At most the broker's blobs.max_size (64MiB by\n"
"              default). Then: gridcli job run --target T file put\n"
"              --sha256 SHA256 --size N --path /etc/x (or simply\n"
"              --src PATH --dest /etc/x: a file over 4 KiB is uploaded\n"
"              first, and the nodes fetch it once each, over their own\n"
"              connection, into their cache)\n"
"file list     SHA256 SIZE COMPLETE CREATED USED SENT (chunks of it sent\n"
"              to agents since the broker started), then what the broker\n"
"              sent agents in all\n"
"file delete   removes a blob (blobs unused for blobs.retention go by\n"
"              themselves)\n"
"\n"
"Global options and exit codes: gridcli --help. See docs/CLI.md.\n"
"\n"
"Examples:\n"
"  gridcli file upload ./nginx.conf\n"
"  gridcli job run --target group:web file put --src ./nginx.conf \\\n"
"      --dest /etc/nginx/nginx.conf\n";

//  Reads the SIZE and sha256 of the local file PATH. Returns 0, or -1
//  with ERR.
static int
s_digest (const char *path, char *sha256, uint64_t *size_p, char *err,
          size_t err_len)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return cli_fail (err, err_len, "%s: %s", path, strerror (errno));
    sha256_t context;
    sha256_init (&context);
    uint64_t size = 0;
    char buffer [65536];
    size_t got;
    while ((got = fread (buffer, 1, sizeof buffer, file)) > 0) {
        sha256_update (&context, buffer, got);
        size += got;
    }
    bool failed = ferror (file) != 0;
    fclose (file);
    if (failed)
        return cli_fail (err, err_len, "%s: cannot read it", path);
    uint8_t digest [SHA256_BYTES];
    sha256_final (&context, digest);
    sha256_to_hex (digest, sha256);
    *size_p = size;
    return 0;
}

int
cli_file_digest (const char *path, char *sha256, uint64_t *size_p, char *err,
                 size_t err_len)
{
    return s_digest (path, sha256, size_p, err, err_len);
}

//  One request NAME with SHA256 (and, for blob.put, the piece) through
//  the settings' client. Returns as cli_call.
static int
s_call (const cli_settings_t *settings, const char *name, const char *sha256,
        uint64_t size, uint64_t offset, const char *data, pv_doc_t **reply_p,
        const pv_t **data_p, bool quiet, FILE *err)
{
    char id [64];
    cli_request_id_make (id, sizeof id);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, name, id, data ? 4 : 1);
    pw_str (writer, "sha256");
    pw_str (writer, sha256);
    if (data) {
        pw_str (writer, "size");
        pw_int (writer, (int64_t) size);
        pw_str (writer, "offset");
        pw_int (writer, (int64_t) offset);
        pw_str (writer, "data");
        pw_str (writer, data);
    }
    FILE *sink = quiet ? fopen ("/dev/null", "w") : NULL;
    int rc = cli_call (settings, writer, id, reply_p, data_p,
                       sink ? sink : err);
    if (sink)
        fclose (sink);
    pw_destroy (&writer);
    return rc;
}

int
cli_file_upload (const cli_settings_t *settings, const char *path,
                 char *sha256, uint64_t *size_p, bool *stored_p, FILE *err)
{
    char why [512];
    *stored_p = false;
    if (s_digest (path, sha256, size_p, why, sizeof why)) {
        fprintf (err, "gridcli: %s\n", why);
        return CLI_EXIT_USAGE;
    }
    uint64_t size = *size_p;
    //  What the broker has of it already
    pv_doc_t *reply = NULL;
    const pv_t *data = NULL;
    uint64_t offset = 0;
    if (s_call (settings, "blob.stat", sha256, 0, 0, NULL, &reply, &data,
                true, err) == CLI_EXIT_OK) {
        int64_t blob_size = -1, received = 0;
        pv_get_int (pv_map_get (data, "size"), &blob_size);
        pv_get_int (pv_map_get (data, "received"), &received);
        if ((uint64_t) blob_size == size)
            offset = (uint64_t) received;
    }
    pv_doc_destroy (&reply);
    if (offset == size && size > 0)
        return CLI_EXIT_OK;
    FILE *file = fopen (path, "rb");
    if (!file) {
        fprintf (err, "gridcli: %s: %s\n", path, strerror (errno));
        return CLI_EXIT_USAGE;
    }
    uint8_t *piece = (uint8_t *) malloc (PROTO_BLOB_CHUNK_BYTES);
    char *text = (char *) malloc (BASE64_LEN (PROTO_BLOB_CHUNK_BYTES) + 1);
    int rc = piece && text ? CLI_EXIT_OK : CLI_EXIT_UNREACHABLE;
    if (rc == CLI_EXIT_OK && fseeko (file, (off_t) offset, SEEK_SET))
        rc = CLI_EXIT_USAGE;
    do {
        if (rc != CLI_EXIT_OK)
            break;
        size_t want = size - offset < PROTO_BLOB_CHUNK_BYTES
                    ? (size_t) (size - offset) : PROTO_BLOB_CHUNK_BYTES;
        if (fread (piece, 1, want, file) != want) {
            fprintf (err, "gridcli: %s: changed while it was uploaded\n",
                     path);
            rc = CLI_EXIT_USAGE;
            break;
        }
        base64_encode (piece, want, text);
        rc = s_call (settings, "blob.put", sha256, size, offset, text,
                     &reply, &data, false, err);
        pv_doc_destroy (&reply);
        offset += want;
        *stored_p = true;
    } while (offset < size);
    fclose (file);
    free (piece);
    free (text);
    return rc;
}

//  file upload: one request at a time, then a line (or the JSON)
static int
s_run_upload (const cli_args_t *args, const job_spec_t *file_spec,
              const cli_settings_t *settings, FILE *out, FILE *err)
{
    char sha256 [SHA256_HEX];
    uint64_t size = 0;
    bool stored = false;
    int rc = cli_file_upload (settings, args->id, sha256, &size, &stored,
                              err);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (settings->output == CLI_OUTPUT_JSON)
        fprintf (out, "{\n  \"sha256\": \"%s\",\n  \"size\": %" PRIu64
                 ",\n  \"stored\": %s\n}\n", sha256, size,
                 stored ? "true" : "false");
    else
        fprintf (out, "%s  %" PRIu64 " bytes%s\n", sha256, size,
                 stored ? "" : " (the broker had it already)");
    return CLI_EXIT_OK;
}

static int
s_check_upload (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id)
        return cli_fail (err, err_len, "file upload needs a PATH");
    return 0;
}

static int
s_check_name (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id || strlen (args->id) != SHA256_HEX - 1
        || strspn (args->id, "0123456789abcdef") != SHA256_HEX - 1)
        return cli_fail (err, err_len, "file delete needs a blob's SHA256 "
                         "(64 lowercase hex digits)");
    return 0;
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "blob.list", id, 0);
    return 0;
}

static int
s_build_delete (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "blob.delete", id, 1);
    pw_str (writer, "sha256");
    pw_str (writer, args->id);
    return 0;
}

//  file list: SHA256 SIZE COMPLETE CREATED USED SENT, then the figures
static int
s_render_list (const pv_t *data, FILE *out)
{
    const pv_t *blobs = pv_map_get (data, "blobs");
    if (pv_type (blobs) != PV_ARRAY)
        return -2;
    if (pv_size (blobs) == 0)
        fprintf (out, "no blobs (store one with gridcli file upload PATH)\n");
    else {
        const char *headers [] = {"SHA256", "SIZE", "COMPLETE", "CREATED",
                                  "USED", "SENT"};
        cli_table_t *table = cli_table_new (6, false, headers);
        for (size_t index = 0; index < pv_size (blobs); index++) {
            const pv_t *blob = pv_array_at (blobs, index);
            char name [80], size [32], created [64], used [64], sent [32];
            int64_t bytes = 0, received = 0, chunks = 0;
            pv_get_int (pv_map_get (blob, "size"), &bytes);
            pv_get_int (pv_map_get (blob, "received"), &received);
            snprintf (size, sizeof size, "%" PRId64, bytes);
            //  A broker that does not count them: "-"
            if (pv_get_int (pv_map_get (blob, "chunks_sent"), &chunks) == 0)
                snprintf (sent, sizeof sent, "%" PRId64, chunks);
            else
                snprintf (sent, sizeof sent, "-");
            const char *row [] = {
                cli_field (blob, "sha256", name, sizeof name), size,
                received == bytes ? "yes" : "no",
                cli_time (pv_map_get (blob, "created"), false, created,
                          sizeof created),
                cli_time (pv_map_get (blob, "used"), false, used,
                          sizeof used),
                sent
            };
            cli_table_add (table, false, row);
        }
        cli_table_print (table, out, false);
        cli_table_destroy (&table);
    }
    int64_t chunks = 0, bytes = 0, refused = 0;
    pv_get_int (pv_map_get (data, "chunks_sent"), &chunks);
    pv_get_int (pv_map_get (data, "bytes_sent"), &bytes);
    pv_get_int (pv_map_get (data, "refused"), &refused);
    fprintf (out, "sent to agents since the broker started: %" PRId64
             " chunk(s), %" PRId64 " bytes; %" PRId64 " request(s) "
             "refused\n", chunks, bytes, refused);
    return 0;
}

static int
s_render_deleted (const pv_t *data, FILE *out)
{
    char name [80];
    if (pv_type (pv_map_get (data, "sha256")) != PV_STR)
        return -2;
    fprintf (out, "blob %s deleted\n",
             cli_field (data, "sha256", name, sizeof name));
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "upload", .command = CLI_CMD_FILE_UPLOAD, .args = CLI_ARG_ID,
     .check = s_check_upload, .run = s_run_upload},
    {.name = "list", .command = CLI_CMD_FILE_LIST, .build = s_build_list,
     .render = s_render_list},
    {.name = "delete", .command = CLI_CMD_FILE_DELETE, .args = CLI_ARG_ID,
     .check = s_check_name, .build = s_build_delete,
     .render = s_render_deleted},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_file = {"file", s_help_file, s_cmds};
