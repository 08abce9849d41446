/*  =========================================================================
    cli - gridcli metrics: the broker's figures in the Prometheus text
    format
    =========================================================================
*/
#include "cmd.h"

#include <string.h>

#include "../proto/proto.h"

static const char s_help_metrics [] =
"gridcli metrics - the broker's figures in the Prometheus text format\n"
"\n"
"Usage: gridcli metrics\n"
"\n"
"Prints what the broker's metrics.get answers (viewer role): its\n"
"counters, gauges and histograms (nodes, jobs, steps, requests, the\n"
"store, latencies) in the Prometheus text exposition format, the same\n"
"text its HTTP face serves at GET /metrics. --output json prints\n"
"{\"text\": ...} instead.\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli metrics | grep '^grid_nodes'\n";

static int
s_build (const cli_args_t *args, const job_spec_t *file_spec,
         const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "metrics.get", id, 0);
    return 0;
}

//  The text as it came, line breaks and tabs kept; other control
//  characters, which could drive the terminal, become '?'.
static int
s_render (const pv_t *data, FILE *out)
{
    const pv_t *text = pv_map_get (data, "text");
    if (pv_type (text) != PV_STR)
        return -2;
    size_t len = 0;
    const char *bytes = pv_str (text, &len);
    for (size_t index = 0; index < len; index++) {
        unsigned char c = (unsigned char) bytes [index];
        bool control = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7F;
        if (fputc (control ? '?' : c, out) == EOF)
            return -1;
    }
    if (len && bytes [len - 1] != '\n')
        fputc ('\n', out);
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.command = CLI_CMD_METRICS, .build = s_build, .render = s_render},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_metrics = {"metrics", s_help_metrics, s_cmds};
