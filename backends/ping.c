/*  =========================================================================
    ping backend - reachability from this host

    Runs the system's ping (iputils) as "ping -c COUNT -W 2 -- ADDRESS" and
    reads its summary into data: packets transmitted and received, loss in
    percent, and round-trip min/avg/max/mdev in milliseconds when any reply
    came back.
    =========================================================================
*/
#include "backend.h"

#include <stdio.h>
#include <string.h>

static void
s_parse (const backend_plan_t *plan, const char *output,
         backend_outcome_t *outcome)
{
    const char *line = output;
    while (line && *line) {
        long transmitted = 0, received = 0;
        double loss = 0;
        double rtt [4];
        char text [32];
        if (sscanf (line, "%ld packets transmitted, %ld received",
                    &transmitted, &received) == 2) {
            backend_outcome_data_int (outcome, "transmitted", transmitted);
            backend_outcome_data_int (outcome, "received", received);
            const char *percent = strstr (line, "% packet loss");
            const char *start = percent;
            while (start && start > line && start [-1] != ' ')
                start--;
            if (start && sscanf (start, "%lf", &loss) == 1) {
                snprintf (text, sizeof (text), "%g", loss);
                backend_outcome_data (outcome, "loss_percent", text);
            }
        }
        else
        if ((strncmp (line, "rtt ", 4) == 0 || strncmp (line, "round-trip ",
                                                        11) == 0)
        &&  strchr (line, '=')
        &&  sscanf (strchr (line, '=') + 1, " %lf/%lf/%lf/%lf", &rtt [0],
                    &rtt [1], &rtt [2], &rtt [3]) == 4) {
            static const char *keys [4] = {
                "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_mdev_ms"
            };
            for (int index = 0; index < 4; index++) {
                snprintf (text, sizeof (text), "%.3f", rtt [index]);
                backend_outcome_data (outcome, keys [index], text);
            }
        }
        line = strchr (line, '\n');
        if (line)
            line++;
    }
}

static int
s_plan_ping (backend_plan_t *plan, char *err, size_t err_len)
{
    if (backend_plan_arg (plan, "ping")
    ||  backend_plan_arg (plan, "-c")
    ||  backend_plan_arg (plan, backend_plan_param (plan, "count"))
    ||  backend_plan_arg (plan, "-W")
    ||  backend_plan_arg (plan, "2")
    ||  backend_plan_arg (plan, "--")
    ||  backend_plan_arg (plan, backend_plan_param (plan, "address"))) {
        snprintf (err, err_len, "out of memory");
        return -1;
    }
    plan->parse = s_parse;
    return 0;
}

static const backend_param_t s_ping_params [] = {
    { .name = "address", .type = BACKEND_TYPE_HOST, .required = true,
      .help = "IPv4 or IPv6 address, or host name" },
    { .name = "count", .type = BACKEND_TYPE_INT, .min_value = 1,
      .max_value = 20, .default_value = "3",
      .help = "echo requests to send, 1 to 20 (default 3)" },
};

static const backend_action_t s_actions [] = {
    { "ping", false, "send ICMP echo requests and report loss and rtt",
      s_ping_params, sizeof (s_ping_params) / sizeof (s_ping_params [0]),
      s_plan_ping, .idempotent = false },
};

const backend_ops_t backend_ping_ops = {
    "ping", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.0"
};
