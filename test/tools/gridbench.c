/*  =========================================================================
    gridbench - the benchmark: a real broker, a swarm, a real agent

    For each agent count it starts a fresh gridbroker on loopback and a
    gridswarm of that many agents, and measures:

      register      time from starting the swarm until every agent is
                    welcomed (registered and committed by the broker)
      broadcast     a `test echo` job on all, from the submit until the
                    swarm holds all N result_acks (the broker acks a result
                    only after committing it, and the job's final status
                    commits in the same pass): p50 and p99 over the rounds
      single-node   many concurrent jobs, each on one node, pipelined over
                    one DEALER: jobs per second from the first submit to
                    the last result_ack
      ingest        several broadcast jobs at once: results per second from
                    the first result sent to the last result_ack
      drain         the broker alone on the same results (runs without
                    relays): the swarm holds its results back, the jobs go
                    out, the broker is stopped (SIGSTOP) and the swarm
                    releases every result into the sockets; results per
                    second and broker CPU per result from the SIGCONT to
                    the last result_ack (see s_drain)
      memory        broker RSS growth per registered agent; the swarm's own
                    RSS per simulated agent
      lost / dup    every job read back (job.get): it must be completed with
                    exactly one success cell per node, first attempt; plus
                    what the swarm saw (results never acknowledged, steps
                    run twice)

    Then, against a broker of its own, one real gridagent: idle RSS, idle
    CPU over a window, and the wall time and CPU (the agent's and its
    children's) of one `system hostname` (in the agent's loop), one `test
    echo` (a function in a forked child) and one `ping` (a program: the
    agent's tool dir maps ping to /bin/true, so that the figure is the
    agent's start of a program and not ping's work).

    With --queue it runs the any-node queue instead: many one-step `any`
    jobs on a swarm, part of which is killed while it holds steps;
    throughput, wait p50/p99, reclaim time, lost and duplicated (see
    s_queue_measure).

    With --live it measures live output instead (s_live_measure): a swarm
    of agents that announce live_output each runs a `test lines` job
    whose lines it streams while the job runs; the broker's CPU per
    streamed MiB, and the round trip of one-node echo jobs on other
    agents before, while and after the fleet streams.

    With --files it measures blob delivery instead (s_files_measure): a
    blob of --files-mib MiB uploaded once, then one `file put` of it to
    a swarm of --files-nodes agents that fetch blobs as gridagent does:
    MiB/s delivered and the broker's peak RSS; then the same put again,
    which fetches nothing (the agents have it cached).

    Past one process. The swarm runs as several gridswarm processes when
    one would pass the open-file limit (four descriptors per simulated
    agent on libzmq, two on zmtp), or when --swarm-procs asks for more; each runs its own range
    of node ids and answers its own control socket, and the figures are
    summed over them. With --relays K, K gridrelays (each with its own
    key pair, enrolled with the broker in the relay role on CURVE runs)
    stand between the broker and the swarm, each swarm process talking to
    one relay (the swarm at nice 10, so that its many threads leave the
    relays and the broker their CPU); before such a run gridsink, a
    ROUTER and an XPUB that keep nothing, takes one relay's share of
    agents, so that each relay's RSS per agent can be set beside libzmq's
    own cost of the two connections.
    --scale is make bench-scale: the first agent count direct, the others
    through relays, with the scale goals printed as met or not met;
    --scale-100k adds 100,000 agents through 16 relays (registration and
    a few broadcast rounds).

    --ha is make bench-ha: the figures of the first agent count twice, a
    broker alone and the same broker as the active of a two-member
    cluster (a standby in sync, one etcd: gridbench_ha.c), without the
    drain, then failover times over --ha-kills kills of the active; the
    ratios cluster / alone are printed, build/bench/ha.json written.

    The swarm speaks ZMTP itself (gridswarm --transport zmtp) on plaintext
    runs, so that the load generator takes as little of the machine as it
    can, and runs on libzmq on CURVE runs; --swarm-transport chooses, and
    the JSON names the one used (swarm_transport).

    It prints a table and writes a JSON list, one object per agent count.
    Every process it starts runs in a temporary directory ($TMPDIR or
    /tmp), is stopped (SIGTERM, then SIGKILL past a deadline) and reaped,
    and the directory is removed. Timing goals are printed next to the
    figures; nothing here passes or fails on them.

    Threading: single-threaded.
    =========================================================================
*/
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../client/client.h"
#include "../../proto/base64.h"
#include "../../proto/keys.h"
#include "../../proto/names.h"
#include "../../proto/proto.h"
#include "../../proto/pv.h"
#include "../../proto/pw.h"
#include "../../proto/sha256.h"
#include "gridbench_ha.h"
#include "gridbench_raw.h"

#define S_MAX_COUNTS 8              //  Agent counts per run
#define S_MAX_SWARMS 32             //  Swarm processes per run
#define S_MAX_RELAYS 16             //  gridrelay processes per run
#define S_MAX_CHILDREN (S_MAX_SWARMS + S_MAX_RELAYS + 4)
                                    //  Processes alive at once
#define S_CALL_TIMEOUT_MS 30000     //  One client request
#define S_STOP_GRACE_MS 60000       //  SIGTERM to SIGKILL (a broker that
                                    //  held 10,000 agents takes ~30 s)
#define S_POLL_MS 20                //  Polling interval while waiting
//  The drain: the broker stays stopped at most this long while the swarm
//  hands out what it held (well under the 15 s of missed heartbeats that
//  take a node offline, and the swarm's ZMTP silence limit)
#define S_DRAIN_HANDOFF_MS 8000
#define S_DRAIN_QUIET_MS 30000      //  Waits for the broker to go idle

//  Goals from the benchmark issue, printed next to the figures
#define S_GOAL_BROADCAST_1K_MS 50
#define S_GOAL_BROADCAST_10K_MS 500
#define S_GOAL_BROADCAST_50K_MS 3000
#define S_GOAL_JOBS_PER_S 5000
#define S_GOAL_RESULTS_PER_S 200000
#define S_GOAL_REGISTER_10K_S 10
#define S_GOAL_BROKER_BYTES 4096
#define S_GOAL_AGENT_KIB 6144        //  Idle RSS of the real agent
#define S_GOAL_AGENT_JOB_CPU_MS 0.5 //  Its CPU per test echo job
#define S_GOAL_RAW_RATIO 1.25       //  Broadcast over raw fan-out + ingest
#define S_GOAL_CLI_WAIT_MS 8        //  gridcli job run --wait, p50
//  ...and from the scale issue (make bench-scale, through relays)
#define S_GOAL_SCALE_REGISTER_S 20
#define S_GOAL_SCALE_BROADCAST_MS 3000
#define S_GOAL_SCALE_RELAY_OVER 0.10    //  Relay RSS per agent over libzmq's
//  --scale starts the swarm behind relays at this many agents a second
//  unless --swarm-ramp says: all 50,000 in 10 s, about what broker,
//  relays and swarm register a second on two cores (400 us of CPU per
//  agent), so that no queue builds up; all at once, 6,250 connections
//  at each relay's two endpoints would pass their listen backlog (4,096)
#define S_SCALE_RAMP 5000
//  Behind relays the swarm runs at this nice value: its dozens of threads
//  must not starve the relays' and the broker's few (a fleet's agents run
//  on hosts of their own)
#define S_SWARM_NICE "10"
//  Extra broker arguments: 16 from --broker-arg, the relays' enrolment
//  (two each, CURVE runs) and the --scale broker flags below
#define S_MAX_BROKER_ARGS (16 + 2 * S_MAX_RELAYS + 6)
//  --scale, through relays: the broker as docs/SIZING.md lays out a fleet
//  of tens of thousands (heartbeats every 15 s instead of 5; a broadcast
//  fans out to every relay before the first acks come back)
#define S_SCALE_HEARTBEAT "15s"
#define S_SCALE_ACK_TIMEOUT "10s"
//  --scale-100k: a row of this many agents through this many relays
//  (6,250 each, the 50,000 row's share: 12,756 open files a relay under
//  the 20,000 of the benchmark machine). Rows this large (any --scale
//  count of 100,000 or more) measure the registration and this many
//  broadcast rounds only, no single-node or ingest phase, so that the
//  run stays a few minutes long; their time goals are the 50,000 row's
//  and are printed as none
#define S_SCALE_XL_AGENTS 100000
#define S_SCALE_XL_RELAYS 16
#define S_SCALE_XL_ROUNDS 5
//  ...brought up at this many agents a second (unless --swarm-ramp says)
//  to a broker at this heartbeat (unless --broker-arg says). Registering
//  takes the chain some 500 us of CPU per agent: 100,000 are 50 s of
//  the two cores, longer than the 45 s in which three missed 15 s
//  heartbeats take a node offline. Started at 5,000 a second the hellos
//  queued in the relays, the first agents' heartbeats waited behind
//  them, nodes went offline 121,618 times and came back with new hellos,
//  and registration never ended; at 1,000 a second the chain kept the
//  pace to about 85,000 (then, on two cores, the relays starved the
//  swarm: BENCHMARKS.md, "100,000 agents"), and at 30 s (docs/SIZING.md
//  for fleets this size) a node is offline after 90 s
#define S_SCALE_XL_RAMP 1000
#define S_SCALE_XL_HEARTBEAT "30s"
#define S_SCALE_XL_LEASE "60s"
//  ...and its swarm runs at this nice value, not S_SWARM_NICE: behind 16
//  relays, on a machine shared with other work, the swarm at nice 10 got
//  2.6 % of the two cores, missed its pings and heartbeats, and
//  registration stopped at about 85,000; at 0 all 100,000 registered
#define S_SCALE_XL_SWARM_NICE "0"
//  --scale runs its first count direct when one broker can hold it (the
//  open-file limit measures 9,800 of 10,000 here); a larger first count
//  goes through relays like the others
#define S_SCALE_DIRECT_MAX 10000

typedef struct {
    size_t counts [S_MAX_COUNTS];   //  Agent counts to measure
    size_t count_total;
    size_t rounds;                  //  Broadcast rounds
    double single_s;                //  Single-node submit window
    size_t window;                  //  Single-node jobs in flight
    size_t ingest_results;          //  Results aimed for in the ingest run
    int idle_s;                     //  Real agent idle window
    size_t agent_runs;              //  Hostname / echo runs
    size_t swarm_threads;           //  Shards, 0 = by size
    bool skip_agent;                //  No real agent phase
    bool agent_only;                //  Only the real agent phase
    bool skip_drain;                //  No drain after the ingest run
    char *bin;                      //  gridbroker, gridagent
    char *swarm;                    //  gridswarm
    char *out;                      //  results.json
    bool curve;                     //  CURVE on every connection
    char *broker_args [S_MAX_BROKER_ARGS];  //  Extra broker arguments
    size_t broker_arg_count;
    char *swarm_args [16];          //  Extra swarm arguments
    size_t swarm_arg_count;
    bool keep;                      //  Keep the temporary directory
    bool queue;                     //  The any-node queue run only
    size_t queue_jobs;              //  Its jobs
    size_t queue_agents;            //  Its agents, killed ones included
    size_t queue_killed;            //  Agents killed mid-lease
    size_t queue_limit;             //  Fleet-wide test.echo limit, 0: none
    size_t swarm_procs;             //  Swarm processes at least, 0: by size
    size_t relays [S_MAX_COUNTS];   //  gridrelays in front of the broker,
                                    //  per agent count (0: direct)
    char *relay;                    //  gridrelay
    char *sink;                     //  gridsink
    char *relay_args [16];          //  Extra gridrelay arguments
    size_t relay_arg_count;
    bool scale;                     //  The bench-scale run
    bool scale_100k;                //  ...with the 100,000-agent row
    const char *swarm_nice;         //  Behind relays, NULL: S_SWARM_NICE
    size_t swarm_ramp;              //  Agents started per second over all
                                    //  swarm processes, 0: all at once
    bool http;                      //  The HTTP face figures only
    size_t http_connections;        //  Their HTTP connections
    double http_s;                  //  Each submit phase, seconds
    size_t cli_runs;                //  gridcli --wait runs
    char *httpload;                 //  httpload
    char *swarm_transport;          //  zmtp or libzmq; NULL: zmtp unless
                                    //  --curve (zmtp speaks no CURVE)
    bool live;                      //  The live output figures only
    size_t live_nodes;              //  Its streaming agents
    size_t live_others;             //  ...and the agents of other jobs
    double live_s;                  //  How long each stream lasts
    int64_t live_interval_ms;       //  One line every
    bool live_aligned;              //  The streaming agents' live rounds
                                    //  line up (gridswarm --live-aligned)
    bool ha;                        //  A broker alone, then a cluster
    size_t ha_kills;                //  Failovers timed
    bool ha_failover_only;          //  The failover part of --ha alone
    bool ha_stop;                   //  SIGTERM the active (it resigns)
                                    //  instead of SIGKILL
    bool files;                     //  The blob delivery figures only
    size_t files_nodes;             //  Agents that fetch the blob
    size_t files_mib;               //  The blob's size
} s_options_t;

//  CPU time of the broker and of every relay together, in ms.
typedef struct {
    double broker_ms;
    double relays_ms;
    double swarms_ms;           //  ...and of the swarm processes
} s_cpu_t;

//  One relay's memory in a run.
typedef struct {
    size_t agents;                  //  Agents the bench pointed at it
    int64_t registry_agents;        //  relay.list's count, -1: not known
    size_t rss_base_kib;            //  Up, before the swarm
    size_t rss_registered_kib;      //  Every agent welcomed
    size_t rss_end_kib;             //  After the jobs
    double bytes_per_agent;         //  (registered - base) / agents
} s_relay_figures_t;

//  Figures for one agent count (negative: not measured).
typedef struct {
    size_t agents;
    size_t requested;               //  The count asked for, when capped
    char error [256];               //  Why the run stopped, "" when it did not
    double register_s;
    double broadcast_p50_ms, broadcast_p99_ms, broadcast_max_ms;
    size_t broadcast_jobs;
    double single_jobs_per_s, single_p50_ms, single_p99_ms;
    size_t single_jobs, single_refused;
    double results_per_s;
    size_t ingest_jobs, ingest_results;
    double results_per_s_drain;     //  The broker alone (s_drain)
    size_t drain_results;
    uint64_t drain_unsent_bytes;    //  Left in the swarm at the SIGCONT
    double broker_bytes_per_agent;
    size_t broker_rss_base_kib, broker_rss_registered_kib, broker_rss_end_kib;
    double swarm_bytes_per_agent;
    uint64_t lost, duplicates;
    uint64_t dup_commands, resent, send_failed, unacked_end;
    double load_before;             //  1-minute load average at the start
    double load_after [3];          //  1, 5, 15-minute loads at the end
    size_t swarm_processes;         //  gridswarm processes started
    size_t swarm_ramp;              //  Agents they started a second, 0: all
    size_t relay_count;             //  gridrelays in front of the broker
    bool broadcast_only;            //  A --scale row of S_SCALE_XL_AGENTS
                                    //  or more: registration and
                                    //  S_SCALE_XL_ROUNDS rounds only
    s_relay_figures_t relays [S_MAX_RELAYS];
    double libzmq_bytes_per_agent;  //  gridsink's RSS per agent, -1: none
    double libzmq_cpu_us_per_agent; //  ...and its CPU to take them in
    size_t libzmq_agents;           //  ...measured with this many agents
    s_cpu_t cpu_register;           //  CPU spent while the swarm registered
    s_cpu_t cpu_broadcast;          //  ...over the broadcast rounds
    s_cpu_t cpu_ingest;             //  ...over the ingest run
    s_cpu_t cpu_drain;              //  ...from the drain's SIGCONT to its end
    const char *swarm_transport;    //  gridswarm --transport
    bench_raw_t raw;                //  libzmq's CURVE limits, same N
} s_run_t;

//  Figures of the real agent.
typedef struct {
    bool measured;
    char error [256];
    size_t idle_rss_kib;            //  Resident, shared libraries included
    size_t idle_anon_kib;           //  Its own memory (RssAnon)
    size_t idle_pss_kib;            //  Proportional share (Pss)
    double idle_cpu_percent;
    int idle_s;
    double hostname_ms, hostname_cpu_ms;
    double echo_ms, echo_cpu_ms;
    double program_ms, program_cpu_ms;  //  ping, a program (/bin/true)
    size_t cli_runs;                //  gridcli --wait runs timed
    double cli_p50_ms, cli_max_ms;  //  Their wall time, process start and
                                    //  CURVE handshake included
} s_agent_figures_t;

static volatile sig_atomic_t s_interrupted = 0;
//  A broker stopped by the drain (SIGSTOP), 0 when none: every way out,
//  a signal to us included, sends it SIGCONT
static volatile sig_atomic_t s_frozen = 0;
static pid_t s_children [S_MAX_CHILDREN];
static char s_tmpdir [256];

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double
s_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

static void
s_say (const char *format, ...) __attribute__ ((format (printf, 1, 2)));

static void
s_say (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    fprintf (stderr, "gridbench: ");
    vfprintf (stderr, format, args);
    fprintf (stderr, "\n");
    va_end (args);
}

static void
s_on_signal (int signo)
{
    s_interrupted = 1;
    if (s_frozen > 0)
        kill ((pid_t) s_frozen, SIGCONT);
}

//  ---------------------------------------------------------------------
//  Processes

//  Starts ARGV with stdout and stderr appended to LOG. Returns the pid or
//  -1. The child dies with us (PR_SET_PDEATHSIG), so nothing outlives an
//  interrupted run.
static pid_t
s_spawn (char *const argv [], const char *log)
{
    size_t slot = 0;
    while (slot < S_MAX_CHILDREN && s_children [slot])
        slot++;
    if (slot == S_MAX_CHILDREN)
        return -1;
    pid_t pid = fork ();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        int fd = open (log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2 (fd, STDOUT_FILENO);
            dup2 (fd, STDERR_FILENO);
            close (fd);
        }
        signal (SIGINT, SIG_DFL);
        signal (SIGTERM, SIG_DFL);
        execv (argv [0], argv);
        fprintf (stderr, "cannot run %s: %s\n", argv [0], strerror (errno));
        _exit (127);
    }
    s_children [slot] = pid;
    return pid;
}

//  True while PID runs (reaps it when it has exited).
static bool
s_alive (pid_t pid)
{
    int status;
    return pid > 0 && waitpid (pid, &status, WNOHANG) == 0;
}

//  SIGTERM, then SIGKILL after GRACE_MS; reaps. NULL-safe on 0.
static void
s_stop (pid_t *pid_p, int grace_ms)
{
    pid_t pid = *pid_p;
    if (pid <= 0)
        return;
    kill (pid, SIGTERM);
    kill (pid, SIGCONT);        //  A stopped process takes it only then
    int64_t deadline = s_now_ms () + grace_ms;
    int status;
    while (waitpid (pid, &status, WNOHANG) == 0) {
        if (s_now_ms () > deadline) {
            s_say ("process %d did not stop within %d ms: killing it",
                   (int) pid, grace_ms);
            kill (pid, SIGKILL);
            waitpid (pid, &status, 0);
            break;
        }
        usleep (10000);
    }
    for (size_t slot = 0; slot < S_MAX_CHILDREN; slot++)
        if (s_children [slot] == pid)
            s_children [slot] = 0;
    *pid_p = 0;
}

//  Drops *PID_P, a child that exited and was reaped (s_alive), so that
//  nothing signals its pid again.
static void
s_forget (pid_t *pid_p)
{
    for (size_t slot = 0; slot < S_MAX_CHILDREN; slot++)
        if (s_children [slot] == *pid_p)
            s_children [slot] = 0;
    *pid_p = 0;
}

static void
s_stop_all (void)
{
    for (size_t slot = 0; slot < S_MAX_CHILDREN; slot++)
        if (s_children [slot]) {
            pid_t pid = s_children [slot];
            s_stop (&pid, 5000);
        }
}

static int
s_remove_entry (const char *path, const struct stat *info, int flag,
                struct FTW *ftw)
{
    return remove (path);
}

static void
s_remove_tree (const char *path)
{
    if (*path)
        nftw (path, s_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

//  A free TCP port on 127.0.0.1 (bound, read, released), or -1.
static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    int port = -1;
    if (fd >= 0 && bind (fd, (struct sockaddr *) &address, sizeof address) == 0
        && getsockname (fd, (struct sockaddr *) &address, &len) == 0)
        port = ntohs (address.sin_port);
    if (fd >= 0)
        close (fd);
    return port;
}

//  The "KEY: N kB" line of /proc/PID/NAME (status, smaps_rollup), in KiB.
static size_t
s_proc_kib (pid_t pid, const char *name, const char *key)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, name);
    FILE *file = fopen (path, "r");
    size_t kib = 0, key_len = strlen (key);
    char line [256];
    while (file && fgets (line, sizeof line, file))
        if (strncmp (line, key, key_len) == 0 && line [key_len] == ':') {
            kib = strtoul (line + key_len + 1, NULL, 10);
            break;
        }
    if (file)
        fclose (file);
    return kib;
}

static size_t
s_rss_kib (pid_t pid)
{
    return s_proc_kib (pid, "status", "VmRSS");
}

//  CPU time of PID in ms: every thread (schedstat, in ns) plus its reaped
//  children (cutime + cstime, in clock ticks).
static double
s_cpu_ms (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/task", (int) pid);
    double ms = 0;
    DIR *dir = opendir (path);
    struct dirent *entry;
    while (dir && (entry = readdir (dir))) {
        if (entry->d_name [0] == '.')
            continue;
        char file_path [300];
        snprintf (file_path, sizeof file_path, "/proc/%d/task/%s/schedstat",
                  (int) pid, entry->d_name);
        FILE *file = fopen (file_path, "r");
        unsigned long long ns = 0;
        if (file && fscanf (file, "%llu", &ns) == 1)
            ms += (double) ns / 1e6;
        if (file)
            fclose (file);
    }
    if (dir)
        closedir (dir);
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *file = fopen (path, "r");
    char line [2048] = "";
    if (file) {
        if (!fgets (line, sizeof line, file))
            line [0] = 0;
        fclose (file);
    }
    //  Fields after the ")" that ends the command name: state is field 3,
    //  cutime and cstime are fields 16 and 17
    char *cursor = strrchr (line, ')');
    long long value [20];
    if (cursor
        && sscanf (cursor + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                   "%*u %*u %lld %lld", &value [0], &value [1]) == 2)
        ms += (double) (value [0] + value [1]) * 1000.0
              / (double) sysconf (_SC_CLK_TCK);
    return ms;
}

//  ---------------------------------------------------------------------
//  Talking to the broker and the swarm

typedef struct {
    client_t *client;           //  Its pipeline (client/client.h), or NULL
    zsock_t *local;             //  A swarm's control: a DEALER of our own
    void *socket;               //  The DEALER (zsock_t), to poll
    pw_t *writer;
    char tag [32];              //  Prefix of request ids
    uint64_t seq;
} s_peer_t;

static int
s_peer_open (s_peer_t *peer, const char *endpoint, const char *tag)
{
    memset (peer, 0, sizeof *peer);
    peer->client = client_new (endpoint);
    if (!peer->client)
        return -1;
    //  Job records of thousands of nodes: no limit on a reply's size
    client_set_max_frame (peer->client, -1);
    peer->socket = client_dealer (peer->client);
    if (!peer->socket) {
        client_destroy (&peer->client);
        return -1;
    }
    peer->writer = pw_new ();
    snprintf (peer->tag, sizeof peer->tag, "%s", tag);
    return 0;
}

//  A swarm process's control socket (ipc://, a child of ours): a DEALER
//  without ZMTP heartbeats. A swarm starved of CPU (nice 10 among dozens
//  of busy threads) may not answer a ping in seconds; a connection
//  dropped for that comes back with a new routing id, and the replies
//  the swarm still owes the old one (watches) would be dropped by its
//  ROUTER. The swarm's liveness is its pid's. Returns 0 or -1.
static int
s_peer_open_local (s_peer_t *peer, const char *endpoint, const char *tag)
{
    memset (peer, 0, sizeof *peer);
    peer->local = zsock_new (ZMQ_DEALER);
    if (!peer->local)
        return -1;
    zsock_set_linger (peer->local, 0);
    zsock_set_sndhwm (peer->local, 0);
    zsock_set_rcvhwm (peer->local, 0);
    zsock_set_maxmsgsize (peer->local, -1);
    if (zsock_connect (peer->local, "%s", endpoint) != 0) {
        zsock_destroy (&peer->local);
        return -1;
    }
    peer->socket = peer->local;
    peer->writer = pw_new ();
    snprintf (peer->tag, sizeof peer->tag, "%s", tag);
    return 0;
}

//  Speaks CURVE with the key pair CERT to the broker whose public key is
//  BROKER_PUBLIC, on a fresh connection. Returns 0 or -1.
static int
s_peer_secure (s_peer_t *peer, zcert_t *cert, const char *broker_public)
{
    if (client_set_curve (peer->client, cert, broker_public) != 0)
        return -1;
    peer->socket = client_dealer (peer->client);
    return peer->socket ? 0 : -1;
}

static void
s_peer_close (s_peer_t *peer)
{
    client_destroy (&peer->client);
    zsock_destroy (&peer->local);
    peer->socket = NULL;
    pw_destroy (&peer->writer);
}

//  Sends the writer's bytes, after an empty delimiter as a REQ would.
static int
s_peer_send (s_peer_t *peer)
{
    if (!peer->local)
        return client_send (peer->client, pw_data (peer->writer),
                            pw_size (peer->writer));
    zmsg_t *msg = zmsg_new ();
    zmsg_addmem (msg, "", 0);
    zmsg_addmem (msg, pw_data (peer->writer), pw_size (peer->writer));
    if (zmsg_send (&msg, peer->local) != 0) {
        zmsg_destroy (&msg);
        return -1;
    }
    return 0;
}

//  Receives one reply body, waiting up to TIMEOUT_MS. Returns a decoded
//  document (caller destroys) or NULL.
static pv_doc_t *
s_peer_recv (s_peer_t *peer, int timeout_ms)
{
    if (!peer->local)
        return client_recv (peer->client, timeout_ms);
    zsock_set_rcvtimeo (peer->local, timeout_ms);
    zmsg_t *msg = zmsg_recv (peer->local);
    zframe_t *body = msg ? zmsg_last (msg) : NULL;
    pv_doc_t *doc = NULL;
    if (body)
        pv_doc_decode (zframe_data (body), zframe_size (body), &doc, NULL, 0);
    zmsg_destroy (&msg);
    return doc;
}

static void
s_next_id (s_peer_t *peer, char *id, size_t id_len)
{
    snprintf (id, id_len, "%s-%" PRIu64, peer->tag, ++peer->seq);
}

//  The id of a reply, as a request number of PEER (0 when not ours).
static uint64_t
s_reply_seq (s_peer_t *peer, const pv_t *root)
{
    size_t len = 0;
    const char *id = pv_str (pv_map_get (root, "id"), &len);
    size_t tag_len = strlen (peer->tag);
    if (!id || len <= tag_len + 1 || memcmp (id, peer->tag, tag_len) != 0
        || id [tag_len] != '-')
        return 0;
    char digits [32];
    snprintf (digits, sizeof digits, "%.*s", (int) (len - tag_len - 1),
              id + tag_len + 1);
    return strtoull (digits, NULL, 10);
}

//  Waits for the reply to request SEQ (dropping others) up to TIMEOUT_MS.
static pv_doc_t *
s_peer_wait (s_peer_t *peer, uint64_t seq, int timeout_ms)
{
    int64_t deadline = s_now_ms () + timeout_ms;
    while (!s_interrupted) {
        int64_t left = deadline - s_now_ms ();
        if (left <= 0)
            return NULL;
        pv_doc_t *doc = s_peer_recv (peer, (int) (left < 200 ? left : 200));
        if (doc && s_reply_seq (peer, pv_doc_root (doc)) == seq)
            return doc;
        pv_doc_destroy (&doc);
    }
    return NULL;
}

//  A broker reply's data when it is ok, else NULL (CODE gets the error
//  code, or "timeout").
static const pv_t *
s_ok_data (const pv_doc_t *doc, char *code, size_t code_len)
{
    if (!doc) {
        snprintf (code, code_len, "timeout");
        return NULL;
    }
    const pv_t *root = pv_doc_root (doc);
    if (pv_str_eq (pv_map_get (root, "type"), "ok"))
        return pv_map_get (root, "data");
    size_t len = 0;
    const char *text = pv_str (pv_map_get (root, "code"), &len);
    snprintf (code, code_len, "%.*s", text ? (int) len : 5,
              text ? text : "error");
    const char *message = pv_str (pv_map_get (root, "message"), &len);
    if (message && strcmp (code, "not_found") != 0)
        s_say ("broker says %s: %.*s", code, (int) len, message);
    return NULL;
}

//  Writes a job.submit of BACKEND ACTION (with MSG as its msg param, or
//  no params) on SCOPE / VALUE, or on one node of it when ANY. Returns
//  the request number.
//  Submits a one-task job with one param KEY (or none, KEY NULL).
static uint64_t
s_submit_job (s_peer_t *broker, const char *scope, const char *value,
              bool any, const char *backend, const char *action,
              const char *key, const char *param)
{
    char id [64];
    s_next_id (broker, id, sizeof id);
    pw_t *writer = broker->writer;
    pw_reset (writer);
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, 1 + (value ? 1 : 0) + (any ? 1 : 0));
    pw_str (writer, "scope");
    pw_str (writer, scope);
    if (value) {
        pw_str (writer, "value");
        pw_str (writer, value);
    }
    if (any) {
        pw_str (writer, "any");
        pw_bool (writer, true);
    }
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, key ? 3 : 2);
    pw_str (writer, "backend");
    pw_str (writer, backend);
    pw_str (writer, "action");
    pw_str (writer, action);
    if (key) {
        pw_str (writer, "params");
        pw_map (writer, 1);
        pw_str (writer, key);
        pw_str (writer, param);
    }
    s_peer_send (broker);
    return broker->seq;
}

static uint64_t
s_submit_to (s_peer_t *broker, const char *scope, const char *value,
             bool any, const char *backend, const char *action,
             const char *msg)
{
    return s_submit_job (broker, scope, value, any, backend, action,
                         msg ? "msg" : NULL, msg);
}

static uint64_t
s_submit (s_peer_t *broker, const char *scope, const char *value,
          const char *backend, const char *action, const char *msg)
{
    return s_submit_to (broker, scope, value, false, backend, action, msg);
}

//  Sends a request with no fields, or with a "job" field. Returns its seq.
static uint64_t
s_request (s_peer_t *broker, const char *type, const char *job)
{
    char id [64];
    s_next_id (broker, id, sizeof id);
    pw_reset (broker->writer);
    proto_request_begin (broker->writer, type, id, job ? 1 : 0);
    if (job) {
        pw_str (broker->writer, "job");
        pw_str (broker->writer, job);
    }
    s_peer_send (broker);
    return broker->seq;
}

//  Swarm control requests: {type, id, ?job, ?count}.
static uint64_t
s_control (s_peer_t *swarm, const char *type, const char *job,
           uint64_t count)
{
    char id [64];
    s_next_id (swarm, id, sizeof id);
    pw_t *writer = swarm->writer;
    pw_reset (writer);
    pw_map (writer, 2 + (job ? 1 : 0) + (count ? 1 : 0));
    pw_str (writer, "type");
    pw_str (writer, type);
    pw_str (writer, "id");
    pw_str (writer, id);
    if (job) {
        pw_str (writer, "job");
        pw_str (writer, job);
    }
    if (count) {
        pw_str (writer, "count");
        pw_int (writer, (int64_t) count);
    }
    s_peer_send (swarm);
    return swarm->seq;
}

static int64_t
s_int (const pv_t *map, const char *key)
{
    int64_t value = 0;
    pv_get_int (pv_map_get (map, key), &value);
    return value;
}

//  The swarm's counters (a decoded "stats" reply) or NULL.
static pv_doc_t *
s_swarm_stats (s_peer_t *swarm)
{
    uint64_t seq = s_control (swarm, "stats", NULL, 0);
    return s_peer_wait (swarm, seq, 5000);
}

//  ---------------------------------------------------------------------
//  A broker and its swarm

//  One gridswarm process: agents FIRST .. FIRST + COUNT - 1.
typedef struct {
    pid_t pid;
    s_peer_t control;           //  Its control socket
    size_t first;               //  Number of its first agent (from 1)
    size_t count;               //  How many agents it runs
} s_swarm_t;

//  One gridrelay process: a broker to its agents, one connection pair
//  upstream.
typedef struct {
    pid_t pid;
    char name [32];             //  relay-N
    char agents_ep [64];        //  What its agents connect to
    char publish_ep [64];
    char key [400];             //  Its key pair (public file), CURVE runs
    char public_txt [41];       //  ...and its public key
} s_relay_t;

typedef struct {
    char dir [300];             //  This run's directory
    char client_ep [64];
    char agents_ep [64];
    char publish_ep [64];
    pid_t broker_pid;
    pid_t agent_pid;
    s_peer_t broker;            //  Client API
    s_swarm_t swarms [S_MAX_SWARMS];
    size_t swarm_count;
    s_relay_t relays [S_MAX_RELAYS];
    size_t relay_count;
} s_stage_t;

//  What the programs of this build understand, and the keys of a CURVE
//  run (made once per bench run, in the temporary directory).
static struct {
    bool broker_insecure;       //  gridbroker has --insecure
    bool agent_insecure;        //  gridagent has --insecure
    bool curve;                 //  This run uses CURVE
    char broker_key [400];      //  Broker key pair (public file)
    char agent_key [400];       //  Real agent key pair (public file)
    char client_arg [64];       //  admin:<bench public key>
    char client_key [400];      //  ...its pair's public file (for gridcli)
    zcert_t *client;            //  The bench's own key pair
    char broker_public [41];    //  Z85
} s_security;

static bool s_alive (pid_t pid);
static void s_stop (pid_t *pid_p, int grace_ms);
static pid_t s_spawn (char *const argv [], const char *log);

//  The cluster run (--ha): while ON, s_stage_broker starts its broker as
//  the active of a two-member cluster (gridbench_ha.h) and s_stage_stop
//  stops the rest of the cluster with it.
static struct {
    bool on;
    int ttl_s;
    bench_ha_t cluster;
} s_ha = {false, 10, {0}};

static const bench_ha_procs_t s_ha_procs = {
    s_spawn, s_stop, s_alive, &s_interrupted
};

//  True when PROGRAM's --help mentions FLAG.
static bool
s_has_flag (const char *program, const char *flag)
{
    char command [1200];
    snprintf (command, sizeof command, "'%s' --help 2>&1", program);
    FILE *pipe = popen (command, "r");
    if (!pipe)
        return false;
    bool found = false;
    char line [512];
    while (fgets (line, sizeof line, pipe))
        if (strstr (line, flag))
            found = true;
    pclose (pipe);
    return found;
}

//  Makes the key pairs of a CURVE run. Returns 0 or -1.
static int
s_security_keys (void)
{
    char dir [300], err [256];
    snprintf (dir, sizeof dir, "%s/keys", s_tmpdir);
    if (keys_generate (dir, "broker", false, NULL, s_security.broker_public,
                       err, sizeof err) != 0) {
        s_say ("cannot make the broker's keys: %s", err);
        return -1;
    }
    char agent_public [41];
    if (keys_generate (dir, "agent", false, NULL, agent_public, err,
                       sizeof err) != 0) {
        s_say ("cannot make the agent's keys: %s", err);
        return -1;
    }
    snprintf (s_security.broker_key, sizeof s_security.broker_key,
              "%s/broker.key", dir);
    snprintf (s_security.agent_key, sizeof s_security.agent_key,
              "%s/agent.key", dir);
    char client_public [41];
    if (keys_generate (dir, "client", false, NULL, client_public, err,
                       sizeof err) != 0) {
        s_say ("cannot make the client's keys: %s", err);
        return -1;
    }
    snprintf (s_security.client_key, sizeof s_security.client_key,
              "%s/client.key", dir);
    s_security.client = keys_load_pair (s_security.client_key, err,
                                        sizeof err);
    if (!s_security.client) {
        s_say ("cannot read the client's keys: %s", err);
        return -1;
    }
    snprintf (s_security.client_arg, sizeof s_security.client_arg,
              "admin:%s", zcert_public_txt (s_security.client));
    s_security.curve = true;
    return 0;
}

static int
s_stage_broker (s_stage_t *stage, const s_options_t *options,
                const char *name)
{
    snprintf (stage->dir + strlen (stage->dir),
              sizeof stage->dir - strlen (stage->dir), "/%s", name);
    if (mkdir (stage->dir, 0700) != 0)
        return -1;
    int ports [3];
    for (int at = 0; at < 3; at++) {
        ports [at] = s_free_port ();
        if (ports [at] < 0)
            return -1;
    }
    snprintf (stage->client_ep, sizeof stage->client_ep,
              "tcp://127.0.0.1:%d", ports [0]);
    snprintf (stage->agents_ep, sizeof stage->agents_ep,
              "tcp://127.0.0.1:%d", ports [1]);
    snprintf (stage->publish_ep, sizeof stage->publish_ep,
              "tcp://127.0.0.1:%d", ports [2]);
    char program [600], data [400], log [400];
    snprintf (program, sizeof program, "%s/gridbroker", options->bin);
    snprintf (data, sizeof data, "%s/broker-data", stage->dir);
    snprintf (log, sizeof log, "%s/broker.log", stage->dir);
    char *argv [48];
    size_t argc = 0;
    argv [argc++] = program;
    argv [argc++] = "--data-dir";
    argv [argc++] = data;
    argv [argc++] = "--client";
    argv [argc++] = stage->client_ep;
    argv [argc++] = "--agents";
    argv [argc++] = stage->agents_ep;
    argv [argc++] = "--publish";
    argv [argc++] = stage->publish_ep;
    if (s_security.curve) {
        argv [argc++] = "--key";
        argv [argc++] = s_security.broker_key;
        argv [argc++] = "--auto-accept";
        argv [argc++] = "--client-key";
        argv [argc++] = s_security.client_arg;
    }
    else if (s_security.broker_insecure)
        argv [argc++] = "--insecure";
    for (size_t at = 0; at < options->broker_arg_count; at++)
        argv [argc++] = options->broker_args [at];
    //  In a cluster's run, this broker is its member a, the active
    size_t security_at = 9;
    size_t security_end = argc;
    if (s_ha.on) {
        const char *config = NULL;
        if (bench_ha_begin (&s_ha.cluster, &s_ha_procs, options->bin,
                            stage->dir, stage->client_ep, stage->agents_ep,
                            stage->publish_ep, log,
                            s_security.curve ? s_security.broker_key : NULL,
                            s_ha.ttl_s, &config) != 0)
            return -1;
        argv [argc++] = "--config";
        argv [argc++] = (char *) config;
    }
    argv [argc] = NULL;
    stage->broker_pid = s_spawn (argv, log);
    if (stage->broker_pid < 0
        || s_peer_open (&stage->broker, stage->client_ep, "bench") != 0)
        return -1;
    if (s_security.curve
        && s_peer_secure (&stage->broker, s_security.client,
                          s_security.broker_public) != 0)
        return -1;
    //  Up when it answers status
    int64_t deadline = s_now_ms () + 15000;
    while (s_now_ms () < deadline && !s_interrupted
           && s_alive (stage->broker_pid)) {
        uint64_t seq = s_request (&stage->broker, "status", NULL);
        pv_doc_t *doc = s_peer_wait (&stage->broker, seq, 500);
        bool up = doc != NULL;
        //  A cluster's member a answers not_leader until it won the
        //  cold start: member b starts only once a is the active (both
        //  at once, either could win)
        if (up && s_ha.on)
            up = pv_str_eq (pv_map_get (pv_doc_root (doc), "type"), "ok");
        pv_doc_destroy (&doc);
        if (!up && s_ha.on)
            zclock_sleep (100);
        if (up && s_ha.on) {
            //  ... and member b, with the same security, in its sync set
            char *extra [S_MAX_BROKER_ARGS + 1];
            size_t count = 0;
            for (size_t at = security_at; at < security_end; at++)
                extra [count++] = argv [at];
            extra [count] = NULL;
            return bench_ha_standby (&s_ha.cluster, extra);
        }
        if (up)
            return 0;
    }
    s_say ("the broker did not come up (see %s)", log);
    return -1;
}

//  The open-file limit: the soft one after raising it as far as allowed.
static rlim_t
s_fd_limit (void)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0)
        return 1024;
    return limit.rlim_cur;
}

//  ---------------------------------------------------------------------
//  Several swarm processes, and relays in front of the broker

//  gridswarm's --transport: --swarm-transport, else zmtp (the cheap
//  load generator) for plaintext runs and libzmq for CURVE runs.
static const char *
s_swarm_transport (const s_options_t *options)
{
    if (options->swarm_transport)
        return options->swarm_transport;
    return options->curve ? "libzmq" : "zmtp";
}

//  How many swarm processes carry AGENTS: as few as fit under the
//  open-file limit (a simulated agent holds four descriptors on libzmq:
//  two connections and two socket mailboxes; two on zmtp), at least
//  --swarm-procs, and,
//  through relays, a multiple of their count, so that process N talks to
//  relay N % K and every relay gets the same share.
static size_t
s_swarm_processes (const s_stage_t *stage, const s_options_t *options,
                   size_t agents)
{
    rlim_t limit = s_fd_limit ();
    if (limit < 512)
        return 0;
    size_t per_process
        = (size_t) (limit - 256)
          / (strcmp (s_swarm_transport (options), "zmtp") == 0 ? 2 : 4);
    size_t processes = (agents + per_process - 1) / per_process;
    if (processes < options->swarm_procs)
        processes = options->swarm_procs;
    if (stage->relay_count)
        processes = (processes + stage->relay_count - 1) / stage->relay_count
                    * stage->relay_count;
    return processes > agents ? agents : processes;
}

//  Agents a second the swarm starts, 0: all at once.
static size_t
s_swarm_rate (const s_stage_t *stage, const s_options_t *options)
{
    if (options->swarm_ramp)
        return options->swarm_ramp;
    return options->scale && stage->relay_count ? S_SCALE_RAMP : 0;
}

//  Agents the swarm processes of STAGE point at relay AT.
static size_t
s_relay_share (const s_stage_t *stage, size_t at)
{
    size_t agents = 0;
    for (size_t swarm = at; swarm < stage->swarm_count;
         swarm += stage->relay_count)
        agents += stage->swarms [swarm].count;
    return agents;
}

//  The CPU the broker and the relays of STAGE have used so far.
static void
s_cpu_take (s_stage_t *stage, s_cpu_t *cpu)
{
    cpu->broker_ms = stage->broker_pid > 0 ? s_cpu_ms (stage->broker_pid)
                                           : 0;
    cpu->relays_ms = cpu->swarms_ms = 0;
    for (size_t at = 0; at < stage->relay_count; at++)
        if (stage->relays [at].pid > 0)
            cpu->relays_ms += s_cpu_ms (stage->relays [at].pid);
    for (size_t at = 0; at < stage->swarm_count; at++)
        if (stage->swarms [at].pid > 0)
            cpu->swarms_ms += s_cpu_ms (stage->swarms [at].pid);
}

//  The CPU used since BEFORE, into SPENT.
static void
s_cpu_since (s_stage_t *stage, const s_cpu_t *before, s_cpu_t *spent)
{
    s_cpu_t now;
    s_cpu_take (stage, &now);
    spent->broker_ms = now.broker_ms - before->broker_ms;
    spent->relays_ms = now.relays_ms - before->relays_ms;
    spent->swarms_ms = now.swarms_ms - before->swarms_ms;
}

//  SIGTERM to every swarm and relay process at once (each takes seconds
//  to close thousands of connections), then reaps them in turn.
static void
s_stop_swarms_relays (s_stage_t *stage)
{
    for (size_t at = 0; at < stage->swarm_count; at++)
        if (stage->swarms [at].pid > 0)
            kill (stage->swarms [at].pid, SIGTERM);
    for (size_t at = 0; at < stage->swarm_count; at++)
        s_stop (&stage->swarms [at].pid, S_STOP_GRACE_MS);
    for (size_t at = 0; at < stage->relay_count; at++)
        if (stage->relays [at].pid > 0)
            kill (stage->relays [at].pid, SIGTERM);
    for (size_t at = 0; at < stage->relay_count; at++)
        s_stop (&stage->relays [at].pid, S_STOP_GRACE_MS);
}

//  True when something accepts TCP connections at ENDPOINT
//  (tcp://A.B.C.D:PORT).
static bool
s_tcp_listening (const char *endpoint)
{
    unsigned a, b, c, d, port;
    if (sscanf (endpoint, "tcp://%u.%u.%u.%u:%u", &a, &b, &c, &d, &port) != 5)
        return false;
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons ((uint16_t) port);
    address.sin_addr.s_addr = htonl ((a << 24) | (b << 16) | (c << 8) | d);
    bool up = connect (fd, (struct sockaddr *) &address, sizeof address) == 0;
    close (fd);
    return up;
}

//  Makes the key pairs of COUNT relays (relay-1.key ...) into STAGE's
//  relays, once per bench run. Returns 0 or -1.
static int
s_relay_keys (s_stage_t *stage, size_t count)
{
    char dir [300], err [256];
    snprintf (dir, sizeof dir, "%s/keys", s_tmpdir);
    for (size_t at = 0; at < count; at++) {
        s_relay_t *relay = &stage->relays [at];
        snprintf (relay->name, sizeof relay->name, "relay-%zu", at + 1);
        if (!s_security.curve)
            continue;
        snprintf (relay->key, sizeof relay->key, "%s/%s.key", dir,
                  relay->name);
        char public_txt [41] = "";
        if (access (relay->key, R_OK) == 0) {
            if (keys_read_public (relay->key, public_txt, err,
                                  sizeof err) != 0) {
                s_say ("cannot read %s: %s", relay->key, err);
                return -1;
            }
        }
        else
        if (keys_generate (dir, relay->name, false, NULL, public_txt, err,
                           sizeof err) != 0) {
            s_say ("cannot make the keys of %s: %s", relay->name, err);
            return -1;
        }
        snprintf (relay->public_txt, sizeof relay->public_txt, "%s",
                  public_txt);
    }
    return 0;
}

//  The broker arguments that enrol STAGE's relays in the relay role
//  (CURVE runs; a plaintext broker trusts every peer). Adds to OPTIONS's
//  broker arguments; the strings live in STAGE.
static int
s_relay_broker_args (s_stage_t *stage, s_options_t *options)
{
    static char enrol [S_MAX_RELAYS][512];
    for (size_t at = 0; at < stage->relay_count && s_security.curve; at++) {
        if (options->broker_arg_count + 2 > S_MAX_BROKER_ARGS)
            return -1;
        snprintf (enrol [at], sizeof enrol [at], "%s:%s",
                  stage->relays [at].name, stage->relays [at].key);
        options->broker_args [options->broker_arg_count++] = "--relay-key";
        options->broker_args [options->broker_arg_count++] = enrol [at];
    }
    return 0;
}

//  True when ARGS (COUNT of them) hold FLAG, as a flag or as FLAG=VALUE.
static bool
s_args_have (char *const *args, size_t count, const char *flag)
{
    size_t len = strlen (flag);
    for (size_t at = 0; at < count; at++)
        if (strncmp (args [at], flag, len) == 0
            && (args [at][len] == 0 || args [at][len] == '='))
            return true;
    return false;
}

//  --scale through relays: the broker flags of docs/SIZING.md for a fleet
//  of that size, each unless --broker-arg gives it.
static void
s_scale_broker_args (s_options_t *options, bool xl)
{
    if (!s_args_have (options->broker_args, options->broker_arg_count,
                      "--heartbeat")) {
        options->broker_args [options->broker_arg_count++] = "--heartbeat";
        options->broker_args [options->broker_arg_count++]
            = xl ? S_SCALE_XL_HEARTBEAT : S_SCALE_HEARTBEAT;
        //  The any-node lease must outlast two heartbeats (the broker
        //  refuses to start otherwise)
        if (xl && !s_args_have (options->broker_args,
                                options->broker_arg_count, "--lease")) {
            options->broker_args [options->broker_arg_count++] = "--lease";
            options->broker_args [options->broker_arg_count++]
                = S_SCALE_XL_LEASE;
        }
    }
    if (!s_args_have (options->broker_args, options->broker_arg_count,
                      "--ack-timeout")) {
        options->broker_args [options->broker_arg_count++] = "--ack-timeout";
        options->broker_args [options->broker_arg_count++]
            = S_SCALE_ACK_TIMEOUT;
    }
}

//  Relays the broker lists as connected (relay.list), or -1 when it does
//  not answer relay.list. Fills each relay's registry_agents in FIGURES.
static int
s_relay_listed (s_stage_t *stage, s_relay_figures_t *figures)
{
    uint64_t seq = s_request (&stage->broker, "relay.list", NULL);
    pv_doc_t *doc = s_peer_wait (&stage->broker, seq, 5000);
    if (!doc)
        return -1;
    const pv_t *root = pv_doc_root (doc);
    if (!pv_str_eq (pv_map_get (root, "type"), "ok")) {
        pv_doc_destroy (&doc);
        return -1;
    }
    const pv_t *list = pv_map_get (pv_map_get (root, "data"), "relays");
    int connected = 0;
    for (size_t at = 0; at < pv_size (list); at++) {
        const pv_t *entry = pv_array_at (list, at);
        bool up = false;
        if (pv_get_bool (pv_map_get (entry, "connected"), &up) == 0 && up)
            connected++;
        size_t len = 0;
        const char *name = pv_str (pv_map_get (entry, "name"), &len);
        for (size_t relay = 0; name && figures && relay < stage->relay_count;
             relay++)
            if (strlen (stage->relays [relay].name) == len
                && memcmp (stage->relays [relay].name, name, len) == 0)
                figures [relay].registry_agents = s_int (entry, "agents");
    }
    pv_doc_destroy (&doc);
    return connected;
}

//  Starts RELAY (its key made in s_relay_keys), a broker to its agents
//  on two free loopback ports and one connection pair to the broker.
//  Returns 0 or -1.
static int
s_relay_spawn (s_stage_t *stage, const s_options_t *options,
               s_relay_t *relay)
{
    int agents_port = s_free_port ();
    int publish_port = s_free_port ();
    if (agents_port < 0 || publish_port < 0 || agents_port == publish_port)
        return -1;
    snprintf (relay->agents_ep, sizeof relay->agents_ep,
              "tcp://127.0.0.1:%d", agents_port);
    snprintf (relay->publish_ep, sizeof relay->publish_ep,
              "tcp://127.0.0.1:%d", publish_port);
    char log [400];
    snprintf (log, sizeof log, "%s/%s.log", stage->dir, relay->name);
    char *argv [48];
    size_t argc = 0;
    argv [argc++] = options->relay;
    argv [argc++] = "--name";
    argv [argc++] = relay->name;
    argv [argc++] = "--upstream";
    argv [argc++] = stage->agents_ep;
    argv [argc++] = "--upstream-publish";
    argv [argc++] = stage->publish_ep;
    argv [argc++] = "--agents";
    argv [argc++] = relay->agents_ep;
    argv [argc++] = "--publish";
    argv [argc++] = relay->publish_ep;
    if (s_security.curve) {
        argv [argc++] = "--key";
        argv [argc++] = relay->key;
        argv [argc++] = "--upstream-key";
        argv [argc++] = s_security.broker_key;
    }
    else
        argv [argc++] = "--insecure";
    for (size_t arg = 0; arg < options->relay_arg_count; arg++)
        argv [argc++] = options->relay_args [arg];
    argv [argc] = NULL;
    relay->pid = s_spawn (argv, log);
    return relay->pid < 0 ? -1 : 0;
}

//  Starts STAGE's gridrelays (s_relay_spawn); waits until each listens
//  and, when the broker has relay.list, until it lists all of them
//  connected. The ports are free when chosen, not reserved: on a busy
//  host another process's connection may take one before the relay
//  binds it (one of 16 relays met that in the 100,000-agent run), so a
//  relay that exits before it listens starts again on new ports, up to
//  S_RELAY_STARTS times in all. Returns 0 or -1.
#define S_RELAY_STARTS 3
static int
s_stage_relays (s_stage_t *stage, const s_options_t *options, s_run_t *run)
{
    int starts [S_MAX_RELAYS];
    for (size_t at = 0; at < stage->relay_count; at++) {
        if (s_relay_spawn (stage, options, &stage->relays [at]) != 0)
            return -1;
        starts [at] = 1;
    }
    int64_t deadline = s_now_ms () + 20000;
    size_t listening = 0;
    while (listening < stage->relay_count && !s_interrupted) {
        s_relay_t *relay = &stage->relays [listening];
        if (!s_alive (relay->pid) && s_now_ms () <= deadline
            && starts [listening] < S_RELAY_STARTS) {
            s_say ("%s exited before it listened (see %s/%s.log): again on "
                   "new ports", relay->name, stage->dir, relay->name);
            s_forget (&relay->pid);
            starts [listening]++;
            if (s_relay_spawn (stage, options, relay) != 0)
                return -1;
            continue;
        }
        if (!s_alive (relay->pid) || s_now_ms () > deadline) {
            s_say ("%s did not come up (see %s/%s.log)", relay->name,
                   stage->dir, relay->name);
            return -1;
        }
        if (s_tcp_listening (relay->agents_ep)
            && s_tcp_listening (relay->publish_ep))
            listening++;
        else
            usleep (S_POLL_MS * 1000);
    }
    int connected = 0;
    while (!s_interrupted && s_now_ms () < deadline
           && (connected = s_relay_listed (stage, run->relays))
                  >= 0 && connected < (int) stage->relay_count)
        usleep (100 * 1000);
    if (connected >= 0 && connected < (int) stage->relay_count) {
        s_say ("the broker lists %d of %zu relays connected", connected,
               stage->relay_count);
        return -1;
    }
    for (size_t at = 0; at < stage->relay_count; at++)
        run->relays [at].rss_base_kib = s_rss_kib (stage->relays [at].pid);
    return 0;
}

//  Each relay's RSS into RUN: WHEN 0 after registration (with the
//  per-agent figure), 1 at the end.
static void
s_relay_rss (s_stage_t *stage, s_run_t *run, int when)
{
    if (when == 0)
        s_relay_listed (stage, run->relays);
    for (size_t at = 0; at < stage->relay_count; at++) {
        s_relay_figures_t *figures = &run->relays [at];
        size_t rss = s_rss_kib (stage->relays [at].pid);
        if (when) {
            figures->rss_end_kib = rss;
            continue;
        }
        figures->agents = s_relay_share (stage, at);
        figures->rss_registered_kib = rss;
        figures->bytes_per_agent
            = figures->agents
                  ? ((double) rss - (double) figures->rss_base_kib) * 1024.0
                        / (double) figures->agents
                  : -1;
    }
}

//  Starts the swarm for AGENTS: one process when the open-file limit
//  allows (4 descriptors per agent on libzmq, 2 on zmtp), else as few as
//  fit under it.
static int
s_stage_swarm (s_stage_t *stage, const s_options_t *options, size_t agents)
{
    size_t processes = s_swarm_processes (stage, options, agents);
    if (processes == 0 || processes > S_MAX_SWARMS - stage->swarm_count)
        return -1;
    //  After the processes the stage runs already (--live runs two sets)
    size_t start_at = stage->swarm_count;
    size_t first = 1;
    for (size_t at = start_at; at < start_at + processes; at++) {
        s_swarm_t *swarm = &stage->swarms [at];
        swarm->first = first;
        swarm->count = agents / processes
                       + (at - start_at < agents % processes ? 1 : 0);
        first += swarm->count;
        char count [32], start [32], threads [32], log [400], control [400];
        snprintf (count, sizeof count, "%zu", swarm->count);
        snprintf (start, sizeof start, "%zu", swarm->first);
        size_t shards = options->swarm_threads ? options->swarm_threads
                        : swarm->count >= 2000 ? 2 : 1;
        snprintf (threads, sizeof threads, "%zu", shards);
        snprintf (log, sizeof log, "%s/swarm-%zu.log", stage->dir, at + 1);
        snprintf (control, sizeof control, "ipc://%s/swarm-%zu.ctl",
                  stage->dir, at + 1);
        char *argv [52];
        size_t argc = 0;
        const char *niceness = options->swarm_nice ? options->swarm_nice
                                                   : S_SWARM_NICE;
        if (stage->relay_count && strcmp (niceness, "0") != 0
            && access ("/usr/bin/nice", X_OK) == 0) {
            argv [argc++] = "/usr/bin/nice";
            argv [argc++] = "-n";
            argv [argc++] = (char *) niceness;
        }
        argv [argc++] = options->swarm;
        argv [argc++] = "--agents";
        argv [argc++] = count;
        argv [argc++] = "--first";
        argv [argc++] = start;
        argv [argc++] = "--threads";
        argv [argc++] = threads;
        //  Through relays, each process talks to one of them
        s_relay_t *relay = stage->relay_count
                               ? &stage->relays [at % stage->relay_count]
                               : NULL;
        argv [argc++] = "--broker";
        argv [argc++] = relay ? relay->agents_ep : stage->agents_ep;
        argv [argc++] = "--publish";
        argv [argc++] = relay ? relay->publish_ep : stage->publish_ep;
        argv [argc++] = "--control";
        argv [argc++] = control;
        argv [argc++] = "--transport";
        argv [argc++] = (char *) s_swarm_transport (options);
        //  Past ~28,000 connections per broker port one source address
        //  runs out of ephemeral ports; every 127/8 address is loopback
        char sources [256] = "";
        if (swarm->count > 20000) {
            size_t needed = swarm->count / 20000 + 1;
            for (size_t ip = 0; ip < needed && ip < 16; ip++)
                snprintf (sources + strlen (sources),
                          sizeof sources - strlen (sources), "%s127.0.0.%zu",
                          ip ? "," : "", ip + 1);
            argv [argc++] = "--source-ips";
            argv [argc++] = sources;
        }
        if (s_security.curve) {
            argv [argc++] = "--curve";
            argv [argc++] = relay ? relay->key : s_security.broker_key;
        }
        char ramp [32];
        size_t rate = s_swarm_rate (stage, options);
        if (rate) {
            snprintf (ramp, sizeof ramp, "%zu", rate * swarm->count / agents
                                                    + 1);
            argv [argc++] = "--ramp";
            argv [argc++] = ramp;
        }
        for (size_t arg = 0; arg < options->swarm_arg_count; arg++)
            argv [argc++] = options->swarm_args [arg];
        argv [argc] = NULL;
        swarm->pid = s_spawn (argv, log);
        char tag [32];
        snprintf (tag, sizeof tag, "swarm%zu", at + 1);
        if (swarm->pid < 0
            || s_peer_open_local (&swarm->control, control, tag) != 0)
            return -1;
        stage->swarm_count++;
    }
    return 0;
}

static void
s_stage_stop (s_stage_t *stage, bool keep)
{
    s_peer_close (&stage->broker);
    s_stop (&stage->agent_pid, S_STOP_GRACE_MS);
    for (size_t at = 0; at < stage->swarm_count; at++)
        s_peer_close (&stage->swarms [at].control);
    s_stop_swarms_relays (stage);
    s_stop (&stage->broker_pid, S_STOP_GRACE_MS);
    if (s_ha.on)
        bench_ha_end (&s_ha.cluster);
    if (!keep)
        s_remove_tree (stage->dir);
}

//  ---------------------------------------------------------------------
//  Measurements

static int
s_compare_doubles (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

//  Nearest-rank percentile P (0..100) of COUNT sorted values.
static double
s_percentile (const double *sorted, size_t count, double p)
{
    if (!count)
        return -1;
    size_t rank = (size_t) ceil (p / 100.0 * (double) count);
    return sorted [rank ? rank - 1 : 0];
}

//  Checks a job record: completed, exactly EXPECTED cells in step 0, each
//  a success at its first attempt. Adds to LOST and DUPS.
static void
s_check_record (const pv_t *record, size_t expected, uint64_t *lost,
                uint64_t *dups)
{
    const pv_t *cells = pv_map_get (pv_map_get (record, "results"), "0");
    if (pv_size (cells) > expected)
        *dups += pv_size (cells) - expected;
    size_t success = 0;
    for (size_t at = 0; at < pv_size (cells); at++) {
        const pv_t *cell = pv_map_value_at (cells, at);
        if (pv_str_eq (pv_map_get (cell, "status"), "success"))
            success++;
        if (s_int (cell, "attempts") > 1)
            (*dups)++;
    }
    if (!pv_str_eq (pv_map_get (record, "status"), "completed")
        || success < expected)
        *lost += expected > success ? expected - success : 1;
}

//  Reads every job in JOBS (COUNT ids, "" for one never accepted) back
//  with job.get, 32 at a time, and checks it.
static void
s_verify (s_stage_t *stage, char (*jobs) [JOB_ID_LEN + 1], size_t count,
          size_t expected, s_run_t *run)
{
    size_t sent = 0, done = 0;
    uint64_t first_seq = stage->broker.seq + 1;
    int64_t deadline = s_now_ms () + 60000 + (int64_t) (count * expected / 50);
    while (done < count && !s_interrupted && s_now_ms () < deadline) {
        while (sent < count && sent - done < 32) {
            if (jobs [sent][0])
                s_request (&stage->broker, "job.get", jobs [sent]);
            else
                s_request (&stage->broker, "status", NULL);
            sent++;
        }
        pv_doc_t *doc = s_peer_recv (&stage->broker, 1000);
        if (!doc)
            continue;
        uint64_t seq = s_reply_seq (&stage->broker, pv_doc_root (doc));
        if (seq >= first_seq && seq < first_seq + count) {
            size_t index = (size_t) (seq - first_seq);
            char code [64];
            const pv_t *data = s_ok_data (doc, code, sizeof code);
            if (!jobs [index][0] || !data)
                run->lost += expected;
            else
                s_check_record (data, expected, &run->lost, &run->duplicates);
            done++;
        }
        pv_doc_destroy (&doc);
    }
    if (done < count)
        run->lost += (count - done) * expected;
}

//  The sum of counter KEY over the swarm's processes, from STATS (one
//  decoded "stats" reply per process; NULL entries count 0).
static int64_t
s_sum (pv_doc_t **stats, size_t count, const char *key)
{
    int64_t sum = 0;
    for (size_t at = 0; at < count; at++)
        if (stats [at])
            sum += s_int (pv_doc_root (stats [at]), key);
    return sum;
}

//  Asks every swarm process for its counters. Returns how many answered.
static size_t
s_stats (s_stage_t *stage, pv_doc_t **stats)
{
    size_t answered = 0;
    for (size_t at = 0; at < stage->swarm_count; at++) {
        stats [at] = s_swarm_stats (&stage->swarms [at].control);
        if (stats [at])
            answered++;
    }
    return answered;
}

static void
s_stats_free (s_stage_t *stage, pv_doc_t **stats)
{
    for (size_t at = 0; at < stage->swarm_count; at++)
        pv_doc_destroy (&stats [at]);
}

static bool
s_swarms_alive (s_stage_t *stage)
{
    for (size_t at = 0; at < stage->swarm_count; at++)
        if (!s_alive (stage->swarms [at].pid))
            return false;
    return true;
}

static int
s_register (s_stage_t *stage, s_run_t *run, size_t agents, int64_t start_ms)
{
    int64_t deadline = s_now_ms () + 30000 + (int64_t) agents * 3;
    while (!s_interrupted && s_now_ms () < deadline) {
        if (!s_swarms_alive (stage) || !s_alive (stage->broker_pid)) {
            snprintf (run->error, sizeof run->error,
                      "the %s exited during registration",
                      s_alive (stage->broker_pid) ? "swarm" : "broker");
            return -1;
        }
        pv_doc_t *stats [S_MAX_SWARMS];
        size_t answered = s_stats (stage, stats);
        int64_t last_ms = 0;
        for (size_t at = 0; at < stage->swarm_count; at++)
            if (stats [at]) {
                int64_t ms = s_int (pv_doc_root (stats [at]),
                                    "last_welcome_ms");
                last_ms = ms > last_ms ? ms : last_ms;
            }
        bool all = answered == stage->swarm_count
                   && s_sum (stats, stage->swarm_count, "welcomed")
                          >= (int64_t) agents;
        if (all) {
            run->register_s = (double) (last_ms - start_ms) / 1000.0;
            run->swarm_bytes_per_agent
                = (double) s_sum (stats, stage->swarm_count, "rss_kib")
                  * 1024.0 / (double) agents;
        }
        s_stats_free (stage, stats);
        if (all)
            return 0;
        usleep (S_POLL_MS * 1000);
    }
    snprintf (run->error, sizeof run->error,
              "not every agent registered in time");
    return -1;
}

//  A job watched on every swarm process: which of them hold all their
//  agents' result_acks of it, and when.
typedef struct {
    const char *job;
    bool done [S_MAX_SWARMS];
    size_t done_count;
    int64_t asked_ms;           //  When the watches last went out
    int64_t first_result_ms;    //  The first result sent, over those done
    int64_t last_ack_ms;        //  The last result_ack, over those done
} s_watch_t;

//  A watch not answered in this long is asked again: a reply is owed to
//  the connection that asked, and one dropped on the way (a ROUTER drops
//  what it cannot route) would otherwise be waited for until the deadline
#define S_REWATCH_MS 5000

//  Asks every swarm process not done with WATCH's job to report when it
//  holds all its agents' result_acks of it (at once when it does).
static void
s_watch_all (s_stage_t *stage, s_watch_t *watch)
{
    for (size_t at = 0; at < stage->swarm_count; at++)
        if (!watch->done [at])
            s_control (&stage->swarms [at].control, "watch", watch->job,
                       stage->swarms [at].count);
    watch->asked_ms = s_now_ms ();
}

//  Starts watching JOB on every swarm process.
static void
s_watch_start (s_stage_t *stage, s_watch_t *watch, const char *job)
{
    memset (watch, 0, sizeof *watch);
    watch->job = job;
    watch->first_result_ms = INT64_MAX;
    s_watch_all (stage, watch);
}

//  A reply of swarm process AT: a job's figures count when they show all
//  its result_acks, whichever request (or repeat) they answer.
static void
s_watch_reply (s_stage_t *stage, size_t at, const pv_t *root,
               s_watch_t *watches, size_t count)
{
    if (!pv_str_eq (pv_map_get (root, "type"), "job"))
        return;
    const pv_t *job = pv_map_get (root, "job");
    for (size_t index = 0; index < count; index++) {
        s_watch_t *watch = &watches [index];
        if (!watch->job || watch->done [at] || !pv_str_eq (job, watch->job)
            || s_int (root, "acked") < (int64_t) stage->swarms [at].count)
            continue;
        watch->done [at] = true;
        watch->done_count++;
        int64_t first = s_int (root, "first_result_ms");
        int64_t last = s_int (root, "last_ack_ms");
        if (first < watch->first_result_ms)
            watch->first_result_ms = first;
        if (last > watch->last_ack_ms)
            watch->last_ack_ms = last;
    }
}

//  Waits up to TIMEOUT_MS until every swarm process holds all the
//  result_acks of every job of WATCHES (COUNT of them; those without a
//  job are skipped), asking again those that are slow to answer.
//  Returns how many jobs finished.
static size_t
s_watch_wait (s_stage_t *stage, s_watch_t *watches, size_t count,
              int timeout_ms)
{
    zpoller_t *poller = zpoller_new (NULL);
    for (size_t at = 0; at < stage->swarm_count; at++)
        zpoller_add (poller, stage->swarms [at].control.socket);
    int64_t deadline = s_now_ms () + timeout_ms;
    size_t finished = 0;
    while (!s_interrupted) {
        finished = 0;
        size_t watched = 0;
        for (size_t index = 0; index < count; index++)
            if (watches [index].job) {
                watched++;
                if (watches [index].done_count == stage->swarm_count)
                    finished++;
            }
        int64_t now_ms = s_now_ms ();
        if (finished == watched || now_ms >= deadline)
            break;
        for (size_t index = 0; index < count; index++) {
            s_watch_t *watch = &watches [index];
            if (watch->job && watch->done_count < stage->swarm_count
                && now_ms - watch->asked_ms >= S_REWATCH_MS)
                s_watch_all (stage, watch);
        }
        void *ready = zpoller_wait (poller, 200);
        for (size_t at = 0; ready && at < stage->swarm_count; at++) {
            s_peer_t *control = &stage->swarms [at].control;
            if (ready != control->socket)
                continue;
            pv_doc_t *doc;
            while ((doc = s_peer_recv (control, 0))) {
                s_watch_reply (stage, at, pv_doc_root (doc), watches, count);
                pv_doc_destroy (&doc);
            }
        }
    }
    zpoller_destroy (&poller);
    return finished;
}

static void
s_broadcast (s_stage_t *stage, const s_options_t *options, s_run_t *run)
{
    size_t rounds = options->rounds;
    double *latency = (double *) calloc (rounds, sizeof (double));
    char (*jobs) [JOB_ID_LEN + 1]
        = (char (*) [JOB_ID_LEN + 1]) calloc (rounds, JOB_ID_LEN + 1);
    assert (latency && jobs);
    size_t done = 0, submitted = 0;
    int timeout_ms = 30000 + (int) (run->agents / 2);
    s_cpu_t cpu_before;
    s_cpu_take (stage, &cpu_before);
    for (size_t round = 0; round < rounds && !s_interrupted; round++) {
        int64_t submit_ms = s_now_ms ();
        uint64_t seq = s_submit (&stage->broker, "all", NULL, "test", "echo",
                                 "bench");
        pv_doc_t *doc = s_peer_wait (&stage->broker, seq, S_CALL_TIMEOUT_MS);
        char code [64];
        const pv_t *data = s_ok_data (doc, code, sizeof code);
        char *job = data ? pv_strdup (pv_map_get (data, "job")) : NULL;
        pv_doc_destroy (&doc);
        if (!job) {
            snprintf (run->error, sizeof run->error,
                      "broadcast submit refused: %s", code);
            run->lost += run->agents;
            break;
        }
        snprintf (jobs [round], JOB_ID_LEN + 1, "%s", job);
        submitted++;
        free (job);
        s_watch_t watch;
        s_watch_start (stage, &watch, jobs [round]);
        if (s_watch_wait (stage, &watch, 1, timeout_ms) != 1) {
            snprintf (run->error, sizeof run->error,
                      "broadcast %s did not finish in %d ms (%zu of %zu "
                      "swarm processes hold all their result_acks)",
                      jobs [round], timeout_ms, watch.done_count,
                      stage->swarm_count);
            break;
        }
        latency [done++] = (double) (watch.last_ack_ms - submit_ms);
    }
    s_cpu_since (stage, &cpu_before, &run->cpu_broadcast);
    qsort (latency, done, sizeof (double), s_compare_doubles);
    run->broadcast_jobs = done;
    run->broadcast_p50_ms = s_percentile (latency, done, 50);
    run->broadcast_p99_ms = s_percentile (latency, done, 99);
    run->broadcast_max_ms = done ? latency [done - 1] : -1;
    s_verify (stage, jobs, submitted, run->agents, run);
    free (latency);
    free (jobs);
}

//  One single-node job in flight.
typedef struct {
    char job [JOB_ID_LEN + 1];
    int64_t submit_ms;
    int64_t done_ms;            //  0 until its result_ack
    int64_t asked_ms;           //  Its watch went out (0: not yet)
    size_t owner;               //  The swarm process of its node
} s_single_t;

//  The swarm process that runs agent NUMBER (from 1).
static size_t
s_owner (s_stage_t *stage, size_t number)
{
    for (size_t at = 0; at < stage->swarm_count; at++)
        if (number < stage->swarms [at].first + stage->swarms [at].count)
            return at;
    return stage->swarm_count - 1;
}

static void
s_single_node (s_stage_t *stage, const s_options_t *options, s_run_t *run)
{
    size_t room = 1024, count = 0;
    s_single_t *jobs = (s_single_t *) calloc (room, sizeof (s_single_t));
    assert (jobs);
    //  "b<broker seq>" and "w<job id>" -> slot + 1
    zhashx_t *slots = zhashx_new ();
    size_t in_flight = 0, completed = 0, refused = 0;
    int64_t first_ms = s_now_ms ();
    int64_t end_ms = first_ms + (int64_t) (options->single_s * 1000);
    int64_t deadline = end_ms + 60000;
    int64_t last_done_ms = first_ms;
    size_t next_node = 0;
    zpoller_t *poller = zpoller_new (stage->broker.socket, NULL);
    for (size_t at = 0; at < stage->swarm_count; at++)
        zpoller_add (poller, stage->swarms [at].control.socket);
    char key [JOB_ID_LEN + 48];
    int64_t rewatch_ms = first_ms + S_REWATCH_MS;
    while (!s_interrupted && !run->error [0] && s_now_ms () < deadline
           && (s_now_ms () < end_ms || in_flight > 0)) {
        //  Watches unanswered for long are asked again (s_watch_wait)
        if (s_now_ms () >= rewatch_ms) {
            int64_t now_ms = s_now_ms ();
            for (size_t at = 0; at < count; at++)
                if (jobs [at].asked_ms && !jobs [at].done_ms
                    && now_ms - jobs [at].asked_ms >= S_REWATCH_MS) {
                    s_control (&stage->swarms [jobs [at].owner].control,
                               "watch", jobs [at].job, 1);
                    jobs [at].asked_ms = now_ms;
                }
            rewatch_ms = now_ms + 1000;
        }
        while (s_now_ms () < end_ms && in_flight < options->window) {
            if (count == room) {
                room *= 2;
                jobs = (s_single_t *) realloc (jobs,
                                               room * sizeof (s_single_t));
                assert (jobs);
            }
            char node [80];
            snprintf (node, sizeof node, "swarm-%06zu",
                      next_node++ % run->agents + 1);
            s_single_t *slot = &jobs [count];
            memset (slot, 0, sizeof *slot);
            slot->submit_ms = s_now_ms ();
            uint64_t seq = s_submit (&stage->broker, "node", node, "test",
                                     "echo", "bench");
            snprintf (key, sizeof key, "b%" PRIu64, seq);
            zhashx_insert (slots, key, (void *) (uintptr_t) (count + 1));
            count++;
            in_flight++;
        }
        void *ready = zpoller_wait (poller, 10);
        if (!ready)
            continue;
        if (ready == stage->broker.socket) {
            pv_doc_t *doc = s_peer_recv (&stage->broker, 0);
            snprintf (key, sizeof key, "b%" PRIu64,
                      doc ? s_reply_seq (&stage->broker, pv_doc_root (doc))
                          : 0);
            size_t index = (size_t) (uintptr_t) zhashx_lookup (slots, key);
            if (doc && index) {
                zhashx_delete (slots, key);
                s_single_t *slot = &jobs [index - 1];
                char code [64];
                const pv_t *data = s_ok_data (doc, code, sizeof code);
                char *job = data ? pv_strdup (pv_map_get (data, "job")) : NULL;
                if (job) {
                    snprintf (slot->job, sizeof slot->job, "%s", job);
                    slot->owner = s_owner (stage,
                                           (index - 1) % run->agents + 1);
                    s_control (&stage->swarms [slot->owner].control, "watch",
                               job, 1);
                    slot->asked_ms = s_now_ms ();
                    snprintf (key, sizeof key, "w%s", job);
                    zhashx_insert (slots, key, (void *) (uintptr_t) index);
                    free (job);
                }
                else {
                    //  Back-pressure (queue_full) is counted, not retried:
                    //  the figure is what the broker took
                    in_flight--;
                    refused++;
                    if (strcmp (code, "queue_full") != 0)
                        snprintf (run->error, sizeof run->error,
                                  "single-node submit refused: %s", code);
                }
            }
            pv_doc_destroy (&doc);
            continue;
        }
        for (size_t owner = 0; owner < stage->swarm_count; owner++) {
            s_peer_t *control = &stage->swarms [owner].control;
            if (ready != control->socket)
                continue;
            pv_doc_t *doc = s_peer_recv (control, 0);
            //  Whichever watch of the job it answers (one asked again too)
            const pv_t *root = doc ? pv_doc_root (doc) : NULL;
            size_t len = 0;
            const char *job = root && pv_str_eq (pv_map_get (root, "type"),
                                                 "job")
                                  ? pv_str (pv_map_get (root, "job"), &len)
                                  : NULL;
            snprintf (key, sizeof key, "w%.*s",
                      job && len <= JOB_ID_LEN ? (int) len : 0,
                      job ? job : "");
            size_t index = (size_t) (uintptr_t) zhashx_lookup (slots, key);
            if (doc && index && s_int (root, "acked") >= 1) {
                zhashx_delete (slots, key);
                s_single_t *slot = &jobs [index - 1];
                slot->done_ms = s_int (pv_doc_root (doc), "last_ack_ms");
                if (slot->done_ms > last_done_ms)
                    last_done_ms = slot->done_ms;
                in_flight--;
                completed++;
            }
            pv_doc_destroy (&doc);
        }
    }
    zpoller_destroy (&poller);
    zhashx_destroy (&slots);
    if (in_flight && !run->error [0])
        snprintf (run->error, sizeof run->error,
                  "%zu single-node jobs did not finish", in_flight);
    double *latency = (double *) calloc (completed + 1, sizeof (double));
    char (*ids) [JOB_ID_LEN + 1]
        = (char (*) [JOB_ID_LEN + 1]) calloc (count + 1, JOB_ID_LEN + 1);
    assert (latency && ids);
    size_t measured = 0, accepted = 0;
    for (size_t at = 0; at < count; at++) {
        if (jobs [at].done_ms)
            latency [measured++] = (double) (jobs [at].done_ms
                                             - jobs [at].submit_ms);
        if (jobs [at].job [0])
            memcpy (ids [accepted++], jobs [at].job, JOB_ID_LEN + 1);
    }
    qsort (latency, measured, sizeof (double), s_compare_doubles);
    run->single_jobs = completed;
    run->single_refused = refused;
    run->single_p50_ms = s_percentile (latency, measured, 50);
    run->single_p99_ms = s_percentile (latency, measured, 99);
    run->single_jobs_per_s = last_done_ms > first_ms
                                 ? (double) completed * 1000.0
                                       / (double) (last_done_ms - first_ms)
                                 : -1;
    s_verify (stage, ids, accepted, 1, run);
    free (latency);
    free (ids);
    free (jobs);
}

//  Jobs of an ingest run: enough broadcasts for the results aimed for,
//  2 to 48.
static size_t
s_ingest_count (const s_options_t *options, const s_run_t *run)
{
    size_t count = (options->ingest_results + run->agents - 1) / run->agents;
    return count < 2 ? 2 : count > 48 ? 48 : count;
}

//  Submits COUNT broadcast `test echo` jobs at once; JOBS gets their ids
//  ("" for one refused) and, when WATCHES is not NULL, each is watched
//  from its reply on. Returns how many the broker took.
static size_t
s_ingest_submit (s_stage_t *stage, size_t count,
                 char (*jobs) [JOB_ID_LEN + 1], s_watch_t *watches)
{
    uint64_t first_seq = stage->broker.seq + 1;
    for (size_t at = 0; at < count; at++)
        s_submit (&stage->broker, "all", NULL, "test", "echo", "ingest");
    size_t accepted = 0;
    for (size_t at = 0; at < count && !s_interrupted; at++) {
        pv_doc_t *doc = s_peer_wait (&stage->broker, first_seq + at,
                                     S_CALL_TIMEOUT_MS);
        char code [64];
        const pv_t *data = s_ok_data (doc, code, sizeof code);
        char *job = data ? pv_strdup (pv_map_get (data, "job")) : NULL;
        if (job) {
            snprintf (jobs [at], JOB_ID_LEN + 1, "%s", job);
            if (watches)
                s_watch_start (stage, &watches [at], jobs [at]);
            accepted++;
        }
        free (job);
        pv_doc_destroy (&doc);
    }
    return accepted;
}

//  The first result sent and the last result_ack over the jobs of
//  WATCHES that every swarm process finished.
static void
s_watch_span (s_stage_t *stage, const s_watch_t *watches, size_t count,
              int64_t *first_ms, int64_t *last_ms)
{
    *first_ms = INT64_MAX;
    *last_ms = 0;
    for (size_t at = 0; at < count; at++) {
        if (!watches [at].job || watches [at].done_count < stage->swarm_count)
            continue;
        if (watches [at].first_result_ms < *first_ms)
            *first_ms = watches [at].first_result_ms;
        if (watches [at].last_ack_ms > *last_ms)
            *last_ms = watches [at].last_ack_ms;
    }
}

static void
s_ingest (s_stage_t *stage, const s_options_t *options, s_run_t *run)
{
    size_t count = s_ingest_count (options, run);
    char (*jobs) [JOB_ID_LEN + 1]
        = (char (*) [JOB_ID_LEN + 1]) calloc (count, JOB_ID_LEN + 1);
    s_watch_t *watches = (s_watch_t *) calloc (count, sizeof (s_watch_t));
    assert (jobs && watches);
    s_ingest_submit (stage, count, jobs, watches);
    //  The jobs run at once: their replies come in any order
    int timeout_ms = 60000 + (int) (count * run->agents / 10);
    size_t finished = s_watch_wait (stage, watches, count, timeout_ms);
    int64_t first_ms, last_ms;
    s_watch_span (stage, watches, count, &first_ms, &last_ms);
    run->ingest_jobs = finished;
    run->ingest_results = finished * run->agents;
    if (finished < count && !run->error [0])
        snprintf (run->error, sizeof run->error,
                  "%zu of %zu ingest jobs did not finish", count - finished,
                  count);
    run->results_per_s = finished && last_ms > first_ms
                             ? (double) run->ingest_results * 1000.0
                                   / (double) (last_ms - first_ms)
                             : -1;
    s_verify (stage, jobs, count, run->agents, run);
    free (jobs);
    free (watches);
}

//  ---------------------------------------------------------------------
//  The drain: the broker alone on the results
//
//  In the ingest run above the swarm makes its results while the broker
//  commits them, on the same two cores, so the figure mixes the load
//  generator's cost into the broker's and swings with the scheduler. Here
//  the swarm holds its results back ("hold"), the same broadcast jobs go
//  out, and once the swarm holds every result and the broker has gone idle
//  (the commands' acks and started taken in) the broker is stopped
//  (SIGSTOP). The swarm then releases every result into its sockets, the
//  kernel's buffers between the two holding them, and once it has handed
//  them all over (or waits on full buffers) and gone idle the broker gets
//  SIGCONT: from then to the last result_ack the broker works through
//  results that are all there already; the swarm only reads the
//  result_acks (and writes what the full buffers held back). Broker CPU
//  per result is taken over the same span.

//  The state letter of process PID (field 3 of /proc/PID/stat), 0 when
//  it cannot be read.
static char
s_proc_state (pid_t pid)
{
    char path [64], line [512] = "";
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *file = fopen (path, "r");
    if (!file)
        return 0;
    if (!fgets (line, sizeof line, file))
        line [0] = 0;
    fclose (file);
    char *cursor = strrchr (line, ')');
    return cursor && cursor [1] == ' ' ? cursor [2] : 0;
}

//  Asks every swarm process TYPE at once ("stats", "hold", "release") and
//  waits for their replies until DEADLINE_MS; DOCS gets each reply (NULL
//  for none; the caller frees them). Returns how many answered.
static size_t
s_swarm_ask (s_stage_t *stage, const char *type, int64_t deadline_ms,
             pv_doc_t **docs)
{
    uint64_t seqs [S_MAX_SWARMS];
    for (size_t at = 0; at < stage->swarm_count; at++)
        seqs [at] = s_control (&stage->swarms [at].control, type, NULL, 0);
    size_t answered = 0;
    for (size_t at = 0; at < stage->swarm_count; at++) {
        int64_t left = deadline_ms - s_now_ms ();
        docs [at] = s_peer_wait (&stage->swarms [at].control, seqs [at],
                                 left > 1 ? (int) left : 1);
        if (docs [at]
            && !pv_str_eq (pv_map_get (pv_doc_root (docs [at]), "type"),
                           type))
            pv_doc_destroy (&docs [at]);
        if (docs [at])
            answered++;
    }
    return answered;
}

//  Sends TYPE ("hold" or "release") to every swarm process. Returns 0
//  when each answered by DEADLINE_MS.
static int
s_swarm_all (s_stage_t *stage, const char *type, int64_t deadline_ms)
{
    pv_doc_t *docs [S_MAX_SWARMS];
    size_t answered = s_swarm_ask (stage, type, deadline_ms, docs);
    s_stats_free (stage, docs);
    return answered == stage->swarm_count ? 0 : -1;
}

//  The sum of stats counter KEY over the swarm processes, -1 when one of
//  them did not answer by DEADLINE_MS.
static int64_t
s_swarm_sum (s_stage_t *stage, const char *key, int64_t deadline_ms)
{
    pv_doc_t *stats [S_MAX_SWARMS];
    size_t answered = s_swarm_ask (stage, "stats", deadline_ms, stats);
    int64_t sum = answered == stage->swarm_count
                      ? s_sum (stats, stage->swarm_count, key)
                      : -1;
    s_stats_free (stage, stats);
    return sum;
}

//  Waits until the broker (or, SWARM, the swarm processes together) used
//  under a tenth of a core over 200 ms, up to TIMEOUT_MS. Returns 0 when
//  it did, -1 when it did not in time.
static int
s_quiet (s_stage_t *stage, bool swarm, int timeout_ms)
{
    int64_t deadline = s_now_ms () + timeout_ms;
    s_cpu_t before;
    s_cpu_take (stage, &before);
    while (!s_interrupted && s_now_ms () < deadline) {
        usleep (200 * 1000);
        s_cpu_t spent;
        s_cpu_since (stage, &before, &spent);
        if ((swarm ? spent.swarms_ms : spent.broker_ms) < 20)
            return 0;
        s_cpu_take (stage, &before);
    }
    return -1;
}

//  How many acks and started the broker has decoded
//  (grid_agent_messages_total in metrics.get), -1 when it did not answer.
static int64_t
s_broker_progress (s_stage_t *stage)
{
    uint64_t seq = s_request (&stage->broker, "metrics.get", NULL);
    pv_doc_t *doc = s_peer_wait (&stage->broker, seq, S_CALL_TIMEOUT_MS);
    char code [64];
    const pv_t *data = s_ok_data (doc, code, sizeof code);
    char *text = data ? pv_strdup (pv_map_get (data, "text")) : NULL;
    pv_doc_destroy (&doc);
    if (!text)
        return -1;
    int64_t count = 0;
    const char *keys [] = {"grid_agent_messages_total{type=\"ack\"} ",
                           "grid_agent_messages_total{type=\"started\"} "};
    for (size_t at = 0; at < 2; at++) {
        const char *line = strstr (text, keys [at]);
        if (line)
            count += strtoll (line + strlen (keys [at]), NULL, 10);
    }
    free (text);
    return count;
}

//  Sends the stopped broker SIGCONT (when it is stopped).
static void
s_thaw (void)
{
    pid_t pid = (pid_t) s_frozen;
    if (pid > 0)
        kill (pid, SIGCONT);
    s_frozen = 0;
}

//  Holds, submits, waits until the swarm holds every result; stops the
//  broker, releases, starts WATCHES on the jobs, resumes the broker.
//  Returns the CLOCK_MONOTONIC ms of the SIGCONT with CPU_BEFORE taken
//  just before it, or -1 with REASON set (the caller resumes the broker
//  and releases the swarm).
static int64_t
s_drain_start (s_stage_t *stage, s_run_t *run, size_t count,
               char (*jobs) [JOB_ID_LEN + 1], s_watch_t *watches,
               s_cpu_t *cpu_before, char *reason, size_t reason_len)
{
    if (s_swarm_all (stage, "hold", s_now_ms () + 10000) != 0) {
        snprintf (reason, reason_len, "a swarm process did not answer hold");
        return -1;
    }
    size_t accepted = s_ingest_submit (stage, count, jobs, NULL);
    if (accepted < count) {
        snprintf (reason, reason_len, "the broker took %zu of %zu jobs",
                  accepted, count);
        return -1;
    }
    //  Every result made and held in the swarm
    int64_t expected = (int64_t) (count * run->agents), held = 0;
    int64_t deadline = s_now_ms () + 30000 + expected / 10;
    while (!s_interrupted && s_now_ms () < deadline) {
        if (!s_alive (stage->broker_pid) || !s_swarms_alive (stage))
            break;
        held = s_swarm_sum (stage, "held", s_now_ms () + 5000);
        if (held >= expected)
            break;
        usleep (S_POLL_MS * 1000);
    }
    if (held < expected) {
        snprintf (reason, reason_len, "the swarm held %" PRId64 " of %"
                  PRId64 " results (the %s)", held, expected,
                  !s_alive (stage->broker_pid) ? "broker exited"
                  : !s_swarms_alive (stage)    ? "swarm exited"
                                               : "deadline passed");
        return -1;
    }
    //  The commands' acks and started taken in (every one the swarm got
    //  out), then the broker idle
    deadline = s_now_ms () + S_DRAIN_QUIET_MS;
    int64_t sent = -1, taken = -1;
    while (!s_interrupted && s_now_ms () < deadline) {
        int64_t acks = s_swarm_sum (stage, "acks", s_now_ms () + 5000);
        int64_t started = s_swarm_sum (stage, "started", s_now_ms () + 5000);
        int64_t failed = s_swarm_sum (stage, "send_failed",
                                      s_now_ms () + 5000);
        sent = acks >= 0 && started >= 0 && failed >= 0
                   ? acks + started - failed
                   : -1;
        taken = s_broker_progress (stage);
        if (sent >= 0 && taken >= sent)
            break;
        usleep (S_POLL_MS * 1000);
    }
    if (sent < 0 || taken < sent)
        s_say ("%zu agents: drain: the broker took %" PRId64 " of %" PRId64
               " acks and started within %d s; stopping it anyway",
               run->agents, taken, sent, S_DRAIN_QUIET_MS / 1000);
    if (s_quiet (stage, false, S_DRAIN_QUIET_MS) != 0)
        s_say ("%zu agents: drain: the broker did not go idle within %d s; "
               "stopping it anyway", run->agents, S_DRAIN_QUIET_MS / 1000);
    //  From here the broker stays stopped S_DRAIN_HANDOFF_MS at most
    s_frozen = stage->broker_pid;
    kill (stage->broker_pid, SIGSTOP);
    deadline = s_now_ms () + S_DRAIN_HANDOFF_MS;
    char state;
    while ((state = s_proc_state (stage->broker_pid)) != 'T' && state != 'Z'
           && state != 0 && s_now_ms () < deadline)
        usleep (1000);
    if (state != 'T') {
        //  A zombie is alive to kill (PID, 0): it exited all the same
        if (state == 'Z' || state == 0 || !s_alive (stage->broker_pid))
            snprintf (reason, reason_len,
                      "the broker exited during the drain");
        else
            snprintf (reason, reason_len,
                      "the broker did not stop (state %c)",
                      state ? state : '-');
        return -1;
    }
    if (s_swarm_all (stage, "release", deadline) != 0) {
        snprintf (reason, reason_len,
                  "a swarm process did not answer release");
        return -1;
    }
    //  Everything handed to the sockets (or waiting on full ones), the
    //  swarm idle
    bool handed = false;
    int64_t unsent = -1;
    while (!s_interrupted && s_now_ms () < deadline && !handed) {
        if (!s_swarms_alive (stage))
            break;
        handed = s_swarm_sum (stage, "held", deadline) == 0
                 && s_quiet (stage, true, (int) (deadline - s_now_ms ())) == 0
                 && (unsent = s_swarm_sum (stage, "unsent_bytes", deadline))
                        >= 0;
        if (!handed)
            usleep (S_POLL_MS * 1000);
    }
    if (!handed) {
        snprintf (reason, reason_len, "the swarm did not hand its results "
                  "to its sockets within %d s of the broker's stop",
                  S_DRAIN_HANDOFF_MS / 1000);
        return -1;
    }
    run->drain_unsent_bytes = unsent > 0 ? (uint64_t) unsent : 0;
    for (size_t at = 0; at < count; at++)
        s_watch_start (stage, &watches [at], jobs [at]);
    s_cpu_take (stage, cpu_before);
    int64_t resumed_ms = s_now_ms ();
    s_thaw ();
    return resumed_ms;
}

//  The drain figure (see above): the same jobs as the ingest run.
static void
s_drain (s_stage_t *stage, const s_options_t *options, s_run_t *run)
{
    size_t count = s_ingest_count (options, run);
    char (*jobs) [JOB_ID_LEN + 1]
        = (char (*) [JOB_ID_LEN + 1]) calloc (count, JOB_ID_LEN + 1);
    s_watch_t *watches = (s_watch_t *) calloc (count, sizeof (s_watch_t));
    assert (jobs && watches);
    char reason [200] = "";
    s_cpu_t cpu_before;
    int64_t resumed_ms = s_drain_start (stage, run, count, jobs, watches,
                                        &cpu_before, reason, sizeof reason);
    //  Whatever happened: the broker runs, the swarm sends
    s_thaw ();
    if (s_swarm_all (stage, "release", s_now_ms () + 10000) != 0
        && !reason [0])
        snprintf (reason, sizeof reason,
                  "a swarm process did not answer release");
    size_t accepted = 0;
    for (size_t at = 0; at < count; at++)
        if (jobs [at][0]) {
            if (!watches [at].job)
                s_watch_start (stage, &watches [at], jobs [at]);
            accepted++;
        }
    //  Until the last result_ack (also after a failure: the jobs are
    //  read back below), the broker's exit or the deadline
    int timeout_ms = 60000 + (int) (count * run->agents / 10);
    int64_t deadline = s_now_ms () + timeout_ms;
    size_t finished = 0;
    bool broker_alive = s_alive (stage->broker_pid);
    while (!s_interrupted && accepted && broker_alive) {
        finished = s_watch_wait (stage, watches, count, 1000);
        if (finished == accepted || s_now_ms () >= deadline)
            break;
        broker_alive = s_alive (stage->broker_pid);
    }
    if (!broker_alive)
        s_forget (&stage->broker_pid);
    if (resumed_ms > 0)
        s_cpu_since (stage, &cpu_before, &run->cpu_drain);
    if (!broker_alive && !reason [0])
        snprintf (reason, sizeof reason, "the broker exited during the "
                  "drain");
    if (finished < count && !reason [0])
        snprintf (reason, sizeof reason, "%zu of %zu jobs did not finish "
                  "within %d s", count - finished, count, timeout_ms / 1000);
    int64_t first_ms, last_ms;
    s_watch_span (stage, watches, count, &first_ms, &last_ms);
    run->drain_results = finished * run->agents;
    run->results_per_s_drain
        = !reason [0] && last_ms > resumed_ms
              ? (double) run->drain_results * 1000.0
                    / (double) (last_ms - resumed_ms)
              : -1;
    if (!reason [0])
        s_say ("%zu agents: drain: %zu results in %" PRId64 " ms from the "
               "SIGCONT (%" PRIu64 " bytes still in the swarm then)",
               run->agents, run->drain_results, last_ms - resumed_ms,
               run->drain_unsent_bytes);
    if (reason [0] && !run->error [0])
        snprintf (run->error, sizeof run->error, "drain: %s", reason);
    if (broker_alive)
        s_verify (stage, jobs, count, run->agents, run);
    else
        run->lost += (count - finished) * run->agents;
    free (jobs);
    free (watches);
}

//  Results still unacknowledged on the swarm's side get the swarm's
//  re-send interval (and a margin) to drain; what remains is lost.
static void
s_swarm_totals (s_stage_t *stage, s_run_t *run)
{
    int64_t deadline = s_now_ms () + 12000;
    while (!s_interrupted) {
        pv_doc_t *stats [S_MAX_SWARMS];
        size_t answered = s_stats (stage, stats);
        int64_t unacked = s_sum (stats, stage->swarm_count, "unacked");
        //  No broker (it exited in the drain): nothing more is acked
        bool over = answered < stage->swarm_count || unacked == 0
                    || s_now_ms () > deadline || !stage->broker_pid;
        if (over) {
            size_t n = stage->swarm_count;
            run->unacked_end = (uint64_t) unacked;
            run->dup_commands = (uint64_t) s_sum (stats, n, "dup_commands");
            run->resent = (uint64_t) s_sum (stats, n, "resent");
            run->send_failed = (uint64_t) s_sum (stats, n, "send_failed");
            //  A rerun shows in the record as a second attempt too: count
            //  the larger of the two views, not both
            uint64_t reruns = (uint64_t) s_sum (stats, n, "reruns");
            if (reruns > run->duplicates)
                run->duplicates = reruns;
            run->lost += run->unacked_end;
            if (answered < n && !run->error [0])
                snprintf (run->error, sizeof run->error,
                          "a swarm process stopped answering");
        }
        s_stats_free (stage, stats);
        if (over)
            break;
        usleep (100 * 1000);
    }
}

//  The 1-minute load average: anything else running skews every figure.
static double
s_load_average (void)
{
    double load = -1;
    FILE *file = fopen ("/proc/loadavg", "r");
    if (file) {
        if (fscanf (file, "%lf", &load) != 1)
            load = -1;
        fclose (file);
    }
    return load;
}

//  The 1, 5 and 15-minute load averages into LOADS (-1 when unknown).
static void
s_load_averages (double *loads)
{
    loads [0] = loads [1] = loads [2] = -1;
    FILE *file = fopen ("/proc/loadavg", "r");
    if (file) {
        if (fscanf (file, "%lf %lf %lf", &loads [0], &loads [1],
                    &loads [2]) != 3)
            loads [0] = loads [1] = loads [2] = -1;
        fclose (file);
    }
}

//  Before a run through relays: checks that gridrelay is there and that
//  each relay's share fits under the open-file limit, makes the relays'
//  keys and adds their enrolment to OPTIONS's broker arguments. Returns
//  0, or -1 with RUN's error set.
static int
s_relay_prepare (s_stage_t *stage, s_options_t *options, s_run_t *run)
{
    if (run->relay_count > S_MAX_RELAYS) {
        snprintf (run->error, sizeof run->error, "at most %d relays",
                  S_MAX_RELAYS);
        return -1;
    }
    if (access (options->relay, X_OK) != 0) {
        snprintf (run->error, sizeof run->error, "cannot run %s (build it, "
                  "or use --relay)", options->relay);
        return -1;
    }
    //  A relay holds two connections per agent, as a broker does
    size_t share = (run->agents + run->relay_count - 1) / run->relay_count;
    rlim_t limit = s_fd_limit ();
    if ((rlim_t) share * 2 + 256 > limit) {
        snprintf (run->error, sizeof run->error, "%zu relays: each would "
                  "hold %zu agents, %zu open files, over the limit of %llu: "
                  "use more relays", run->relay_count, share, share * 2 + 256,
                  (unsigned long long) limit);
        return -1;
    }
    stage->relay_count = run->relay_count;
    if (options->scale)
        s_scale_broker_args (options, run->broadcast_only);
    if (s_relay_keys (stage, stage->relay_count) != 0
        || s_relay_broker_args (stage, options) != 0) {
        snprintf (run->error, sizeof run->error, "cannot set up the relays' "
                  "keys");
        stage->relay_count = 0;
        return -1;
    }
    return 0;
}

//  Open sockets (connections and listeners) of process PID.
static size_t
s_socket_count (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/fd", (int) pid);
    DIR *dir = opendir (path);
    size_t count = 0;
    struct dirent *entry;
    while (dir && (entry = readdir (dir))) {
        char link [340], target [64];
        snprintf (link, sizeof link, "%s/%s", path, entry->d_name);
        ssize_t len = readlink (link, target, sizeof target - 1);
        if (len > 7 && memcmp (target, "socket:", 7) == 0)
            count++;
    }
    if (dir)
        closedir (dir);
    return count;
}

//  libzmq's own memory per agent, in the same run: gridsink (a ROUTER and
//  an XPUB that keep nothing) with AGENTS swarm agents connected, its RSS
//  growth divided by AGENTS. Into RUN's libzmq figures.
static void
s_measure_libzmq (const s_options_t *options, size_t agents, s_run_t *run)
{
    run->libzmq_agents = agents;
    if (access (options->sink, X_OK) != 0) {
        s_say ("cannot run %s: libzmq's own cost not measured",
               options->sink);
        return;
    }
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s/libzmq-%zu", s_tmpdir, agents);
    if (mkdir (stage.dir, 0700) != 0)
        return;
    int agents_port = s_free_port (), publish_port = s_free_port ();
    snprintf (stage.agents_ep, sizeof stage.agents_ep, "tcp://127.0.0.1:%d",
              agents_port);
    snprintf (stage.publish_ep, sizeof stage.publish_ep,
              "tcp://127.0.0.1:%d", publish_port);
    char log [400];
    snprintf (log, sizeof log, "%s/sink.log", stage.dir);
    char *argv [] = {
        options->sink, "--agents", stage.agents_ep, "--publish",
        stage.publish_ep, NULL, NULL, NULL
    };
    if (s_security.curve) {
        argv [5] = "--key";
        argv [6] = s_security.broker_key;
    }
    s_say ("libzmq's own cost: gridsink with %zu agents", agents);
    stage.broker_pid = s_spawn (argv, log);
    int64_t deadline = s_now_ms () + 10000;
    while (stage.broker_pid > 0 && s_alive (stage.broker_pid)
           && s_now_ms () < deadline
           && !(s_tcp_listening (stage.agents_ep)
                && s_tcp_listening (stage.publish_ep)))
        usleep (S_POLL_MS * 1000);
    //  Settled: the probes' connections are gone
    usleep (500 * 1000);
    size_t base_kib = s_rss_kib (stage.broker_pid);
    size_t base_sockets = s_socket_count (stage.broker_pid);
    double base_cpu_ms = s_cpu_ms (stage.broker_pid);
    bool connected = false;
    if (base_kib && s_stage_swarm (&stage, options, agents) == 0) {
        deadline = s_now_ms () + 60000 + (int64_t) agents * 2;
        while (!s_interrupted && s_now_ms () < deadline
               && s_alive (stage.broker_pid) && s_swarms_alive (&stage)
               && !(connected = s_socket_count (stage.broker_pid)
                                >= base_sockets + 2 * agents))
            usleep (100 * 1000);
    }
    if (connected) {
        //  Every agent says hello again every 2 s until welcomed, which
        //  the sink never does: after two, each connection has carried
        //  traffic (subscriptions, hellos), as at a relay
        usleep (2500 * 1000);
        size_t kib = s_rss_kib (stage.broker_pid);
        run->libzmq_bytes_per_agent = ((double) kib - (double) base_kib)
                                      * 1024.0 / (double) agents;
        run->libzmq_cpu_us_per_agent = (s_cpu_ms (stage.broker_pid)
                                        - base_cpu_ms) * 1000.0
                                       / (double) agents;
        s_say ("libzmq's own cost: %.0f B per agent (two connections)",
               run->libzmq_bytes_per_agent);
    }
    else
        s_say ("libzmq's own cost: the %zu agents did not all connect "
               "(logs in %s)", agents, stage.dir);
    s_stage_stop (&stage, options->keep || !connected);
}

static void
s_measure (const s_options_t *options, size_t agents, s_run_t *run)
{
    run->agents = agents;
    run->load_before = s_load_average ();
    if (run->load_before > 0.5)
        s_say ("%zu agents: the load average is %.2f before the run: other "
               "work on this machine skews the figures", agents,
               run->load_before);
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s", s_tmpdir);
    char name [32];
    //  The cluster's run of --ha apart from the broker alone's (whose
    //  directory --keep keeps)
    snprintf (name, sizeof name, "agents-%zu%s", agents,
              s_ha.on ? "-cluster" : "");
    s_options_t relayed = *options;
    if (run->broadcast_only && relayed.rounds > S_SCALE_XL_ROUNDS)
        relayed.rounds = S_SCALE_XL_ROUNDS;
    if (run->broadcast_only && !relayed.swarm_ramp)
        relayed.swarm_ramp = S_SCALE_XL_RAMP;
    if (run->broadcast_only)
        relayed.swarm_nice = S_SCALE_XL_SWARM_NICE;
    if (run->relay_count && s_relay_prepare (&stage, &relayed, run) != 0) {
        s_load_averages (run->load_after);
        return;
    }
    //  libzmq's own cost, at one relay's share of the agents
    if (run->relay_count)
        s_measure_libzmq (options, (agents + run->relay_count - 1)
                                       / run->relay_count, run);
    else {
        //  The raw limits the broadcast and the ingest are judged against
        s_say ("%zu agents: raw CURVE fan-out and ingest, %zu SUBs and %zu "
               "DEALERs", agents, agents, agents);
        bench_raw_curve (agents, options->rounds, &run->raw);
        if (run->raw.error [0])
            s_say ("%zu agents: raw CURVE: %s", agents, run->raw.error);
        else
            s_say ("%zu agents: raw CURVE fan-out p50 %.2f ms, ingest "
                   "%.0f/s (load %.2f)", agents, run->raw.fanout_p50_ms,
                   run->raw.ingest_per_s, s_load_average ());
    }
    char flags [512] = "";
    for (size_t at = 0; at < relayed.broker_arg_count; at++)
        if (strcmp (relayed.broker_args [at], "--relay-key") != 0
            && (at == 0
                || strcmp (relayed.broker_args [at - 1], "--relay-key") != 0))
            snprintf (flags + strlen (flags), sizeof flags - strlen (flags),
                      " %s", relayed.broker_args [at]);
    s_say ("%zu agents: starting a broker%s%s", agents,
           flags [0] ? ":" : "", flags);
    if (s_stage_broker (&stage, &relayed, name) != 0) {
        //  Its log says why: it stays
        snprintf (run->error, sizeof run->error, "the broker did not start");
        s_stage_stop (&stage, true);
        return;
    }
    if (run->relay_count) {
        s_say ("%zu agents: starting %zu relays", agents, run->relay_count);
        if (s_stage_relays (&stage, options, run) != 0) {
            snprintf (run->error, sizeof run->error,
                      "the relays did not start");
            s_stage_stop (&stage, true);
            return;
        }
    }
    run->broker_rss_base_kib = s_rss_kib (stage.broker_pid);
    s_cpu_t cpu_before;
    s_cpu_take (&stage, &cpu_before);
    int64_t start_ms = s_now_ms ();
    if (s_stage_swarm (&stage, &relayed, agents) != 0) {
        snprintf (run->error, sizeof run->error, "the swarm did not start");
        s_stage_stop (&stage, options->keep);
        return;
    }
    run->swarm_processes = stage.swarm_count;
    run->swarm_ramp = s_swarm_rate (&stage, &relayed);
    run->swarm_transport = s_swarm_transport (options);
    s_say ("%zu agents: registering (%zu swarm process%s)", agents,
           stage.swarm_count, stage.swarm_count == 1 ? "" : "es");
    if (s_register (&stage, run, agents, start_ms) == 0) {
        s_cpu_since (&stage, &cpu_before, &run->cpu_register);
        s_relay_rss (&stage, run, 0);
        run->broker_rss_registered_kib = s_rss_kib (stage.broker_pid);
        run->broker_bytes_per_agent
            = ((double) run->broker_rss_registered_kib
               - (double) run->broker_rss_base_kib)
              * 1024.0 / (double) agents;
        s_say ("%zu agents: registered in %.2f s; %zu broadcast rounds",
               agents, run->register_s, relayed.rounds);
        s_broadcast (&stage, &relayed, run);
        if (!run->error [0] && !s_interrupted && !run->broadcast_only) {
            s_say ("%zu agents: single-node jobs for %.0f s", agents,
                   options->single_s);
            s_single_node (&stage, options, run);
        }
        if (!run->error [0] && !s_interrupted && !run->broadcast_only) {
            s_say ("%zu agents: result ingest", agents);
            s_cpu_t cpu_ingest;
            s_cpu_take (&stage, &cpu_ingest);
            s_ingest (&stage, options, run);
            s_cpu_since (&stage, &cpu_ingest, &run->cpu_ingest);
        }
        //  Through relays the results would wait in the relays' queues,
        //  not the broker's sockets: the drain runs direct only
        if (!run->error [0] && !s_interrupted && !run->relay_count
            && !options->skip_drain) {
            s_say ("%zu agents: result ingest, the broker alone (drain)",
                   agents);
            s_drain (&stage, options, run);
        }
        s_swarm_totals (&stage, run);
        run->broker_rss_end_kib = s_rss_kib (stage.broker_pid);
        s_relay_rss (&stage, run, 1);
    }
    s_load_averages (run->load_after);
    if (run->error [0])
        s_say ("%zu agents: %s (logs in %s)", agents, run->error, stage.dir);
    s_stage_stop (&stage, options->keep || run->error [0]);
}

//  ---------------------------------------------------------------------
//  The real agent

//  Runs one job (with param KEY=PARAM, or none) on the agent RUNS times;
//  wall time median and mean CPU.
static int
s_agent_job (s_stage_t *stage, const s_options_t *options,
             const char *backend, const char *action, const char *key,
             const char *param, double *wall_ms, double *cpu_ms)
{
    size_t runs = options->agent_runs;
    double *walls = (double *) calloc (runs, sizeof (double));
    assert (walls);
    double cpu_before = s_cpu_ms (stage->agent_pid);
    size_t done = 0;
    for (size_t run = 0; run < runs && !s_interrupted; run++) {
        double start_us = s_now_us ();
        uint64_t seq = s_submit_job (&stage->broker, "node", "bench-agent",
                                     false, backend, action, key, param);
        pv_doc_t *doc = s_peer_wait (&stage->broker, seq, S_CALL_TIMEOUT_MS);
        char code [64];
        const pv_t *data = s_ok_data (doc, code, sizeof code);
        char *job = data ? pv_strdup (pv_map_get (data, "job")) : NULL;
        pv_doc_destroy (&doc);
        if (!job)
            break;
        //  Polls the job record: with one agent the broker has time to
        //  spare, and no swarm is there to report the ack
        bool finished = false;
        int64_t deadline = s_now_ms () + 30000;
        while (!finished && s_now_ms () < deadline && !s_interrupted) {
            seq = s_request (&stage->broker, "job.get", job);
            doc = s_peer_wait (&stage->broker, seq, 5000);
            data = s_ok_data (doc, code, sizeof code);
            const pv_t *status = data ? pv_map_get (data, "status") : NULL;
            finished = pv_str_eq (status, "completed");
            bool over = finished || pv_str_eq (status, "failed")
                        || pv_str_eq (status, "partial_failure")
                        || pv_str_eq (status, "cancelled");
            pv_doc_destroy (&doc);
            if (over)
                break;
            usleep (1000);
        }
        free (job);
        if (!finished)
            break;
        walls [done++] = (s_now_us () - start_us) / 1000.0;
    }
    double cpu_after = s_cpu_ms (stage->agent_pid);
    qsort (walls, done, sizeof (double), s_compare_doubles);
    *wall_ms = s_percentile (walls, done, 50);
    *cpu_ms = done ? (cpu_after - cpu_before) / (double) done : -1;
    free (walls);
    return done == runs ? 0 : -1;
}

//  gridcli job run --wait of a one-node echo on the real agent, RUNS
//  times over CURVE (a plaintext run makes keys for it): the whole
//  process, start to exit. Wall times into FIGURES.
static void
s_measure_cli (const s_options_t *options, size_t runs,
               s_agent_figures_t *figures)
{
    bool was_curve = s_security.curve;
    if (!s_security.client && s_security_keys () != 0) {
        snprintf (figures->error, sizeof figures->error,
                  "no keys for the gridcli --wait runs");
        return;
    }
    s_security.curve = true;
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s", s_tmpdir);
    s_say ("gridcli --wait: a CURVE broker, one gridagent, %zu runs", runs);
    if (s_stage_broker (&stage, options, "cli") != 0) {
        snprintf (figures->error, sizeof figures->error,
                  "the broker of the gridcli runs did not start");
        s_stage_stop (&stage, options->keep);
        s_security.curve = was_curve;
        return;
    }
    char program [600], state [400], log [400], cli [600], cli_log [400];
    snprintf (program, sizeof program, "%s/gridagent", options->bin);
    snprintf (state, sizeof state, "%s/agent-state", stage.dir);
    snprintf (log, sizeof log, "%s/agent.log", stage.dir);
    snprintf (cli, sizeof cli, "%s/gridcli", options->bin);
    snprintf (cli_log, sizeof cli_log, "%s/gridcli.log", stage.dir);
    char *agent [] = {
        program, "--id", "bench-agent", "--state-dir", state, "--broker",
        stage.agents_ep, "--publish", stage.publish_ep, "--key",
        s_security.agent_key, "--broker-key", s_security.broker_key, NULL
    };
    stage.agent_pid = s_spawn (agent, log);
    double *walls = (double *) calloc (runs, sizeof (double));
    assert (walls);
    size_t done = 0;
    //  The first run waits for the agent to come online: a node it does
    //  not know yet is refused, so it is tried again until then
    int64_t deadline = s_now_ms () + 20000;
    while (done < runs && !s_interrupted && stage.agent_pid > 0) {
        char *argv [] = {
            cli, "--broker", stage.client_ep, "--key",
            s_security.client_key, "--broker-key", s_security.broker_key,
            "job", "run", "--target", "node:bench-agent", "test", "echo",
            "--msg", "bench", "--wait", NULL
        };
        double start_us = s_now_us ();
        pid_t pid = s_spawn (argv, cli_log);
        int status = -1;
        if (pid > 0 && waitpid (pid, &status, 0) == pid)
            s_forget (&pid);
        double wall_ms = (s_now_us () - start_us) / 1000.0;
        bool ok = WIFEXITED (status) && WEXITSTATUS (status) == 0;
        if (ok && figures->cli_runs++ > 0)
            //  The first is a probe: the agent may not be online yet
            walls [done++] = wall_ms;
        else if (!ok && (figures->cli_runs > 0 || s_now_ms () > deadline)) {
            snprintf (figures->error, sizeof figures->error,
                      "gridcli --wait failed (see its gridcli.log)");
            break;
        }
        else if (!ok)
            usleep (100 * 1000);
    }
    figures->cli_runs = done;
    qsort (walls, done, sizeof (double), s_compare_doubles);
    figures->cli_p50_ms = s_percentile (walls, done, 50);
    figures->cli_max_ms = done ? walls [done - 1] : -1;
    free (walls);
    s_say ("gridcli --wait: p50 %.1f ms over %zu runs (load %.2f)",
           figures->cli_p50_ms, done, s_load_average ());
    s_stage_stop (&stage, options->keep || figures->error [0]);
    s_security.curve = was_curve;
}

static void
s_measure_agent (const s_options_t *options, s_agent_figures_t *figures)
{
    memset (figures, 0, sizeof *figures);
    figures->idle_s = options->idle_s;
    figures->idle_cpu_percent = figures->hostname_ms = -1;
    figures->hostname_cpu_ms = figures->echo_ms = figures->echo_cpu_ms = -1;
    figures->program_ms = figures->program_cpu_ms = -1;
    figures->cli_p50_ms = figures->cli_max_ms = -1;
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s", s_tmpdir);
    s_say ("real agent: starting a broker and one gridagent");
    if (s_stage_broker (&stage, options, "agent") != 0) {
        snprintf (figures->error, sizeof figures->error,
                  "the broker did not start");
        s_stage_stop (&stage, options->keep);
        return;
    }
    char program [600], state [400], log [400], tools [400], ping [450];
    snprintf (program, sizeof program, "%s/gridagent", options->bin);
    snprintf (state, sizeof state, "%s/agent-state", stage.dir);
    snprintf (log, sizeof log, "%s/agent.log", stage.dir);
    //  Its programs: ping is /bin/true (the cost of starting a program)
    snprintf (tools, sizeof tools, "%s/agent-tools", stage.dir);
    snprintf (ping, sizeof ping, "%s/ping", tools);
    if ((mkdir (tools, 0700) != 0 && errno != EEXIST)
    ||  (symlink ("/bin/true", ping) != 0 && errno != EEXIST)) {
        snprintf (figures->error, sizeof figures->error,
                  "cannot make the agent's tool dir: %s", strerror (errno));
        s_stage_stop (&stage, options->keep);
        return;
    }
    char *argv [] = {
        program, "--id", "bench-agent", "--state-dir", state, "--broker",
        stage.agents_ep, "--publish", stage.publish_ep, "--tool-dir", tools,
        NULL, NULL, NULL, NULL, NULL
    };
    if (s_security.curve) {
        argv [11] = "--key";
        argv [12] = s_security.agent_key;
        argv [13] = "--broker-key";
        argv [14] = s_security.broker_key;
    }
    else if (s_security.agent_insecure)
        argv [11] = "--insecure";
    stage.agent_pid = s_spawn (argv, log);
    //  Online when node.get says so
    bool online = false;
    int64_t deadline = s_now_ms () + 20000;
    while (!online && stage.agent_pid > 0 && s_now_ms () < deadline
           && !s_interrupted) {
        char id [64];
        s_next_id (&stage.broker, id, sizeof id);
        pw_reset (stage.broker.writer);
        proto_request_begin (stage.broker.writer, "node.get", id, 1);
        pw_str (stage.broker.writer, "node");
        pw_str (stage.broker.writer, "bench-agent");
        s_peer_send (&stage.broker);
        pv_doc_t *doc = s_peer_wait (&stage.broker, stage.broker.seq, 2000);
        char code [64];
        const pv_t *data = doc ? s_ok_data (doc, code, sizeof code) : NULL;
        online = data && pv_str_eq (pv_map_get (data, "status"), "online");
        pv_doc_destroy (&doc);
        if (!online)
            usleep (S_POLL_MS * 1000);
    }
    if (!online) {
        snprintf (figures->error, sizeof figures->error,
                  "the agent did not come online (see its agent.log)");
        s_say ("real agent: %s", figures->error);
        s_stage_stop (&stage, true);
        return;
    }
    s_say ("real agent: idle for %d s", options->idle_s);
    double cpu_before = s_cpu_ms (stage.agent_pid);
    double start_us = s_now_us ();
    size_t rss_max = 0;
    while (!s_interrupted
           && s_now_us () - start_us < (double) options->idle_s * 1e6) {
        size_t rss = s_rss_kib (stage.agent_pid);
        if (rss > rss_max)
            rss_max = rss;
        usleep (250 * 1000);
    }
    double elapsed_s = (s_now_us () - start_us) / 1e6;
    figures->idle_cpu_percent = (s_cpu_ms (stage.agent_pid) - cpu_before)
                                / 10.0 / elapsed_s;
    figures->idle_rss_kib = rss_max;
    figures->idle_anon_kib = s_proc_kib (stage.agent_pid, "status", "RssAnon");
    figures->idle_pss_kib = s_proc_kib (stage.agent_pid, "smaps_rollup", "Pss");
    s_say ("real agent: %zu runs each of system hostname, test echo and "
           "ping (/bin/true)", options->agent_runs);
    if (s_agent_job (&stage, options, "system", "hostname", NULL, NULL,
                     &figures->hostname_ms, &figures->hostname_cpu_ms)
        || s_agent_job (&stage, options, "test", "echo", "msg", "bench",
                        &figures->echo_ms, &figures->echo_cpu_ms)
        || s_agent_job (&stage, options, "ping", "ping", "address",
                        "127.0.0.1", &figures->program_ms,
                        &figures->program_cpu_ms))
        snprintf (figures->error, sizeof figures->error,
                  "a job on the real agent did not complete");
    figures->measured = true;
    s_stage_stop (&stage, options->keep || figures->error [0]);
    if (!figures->error [0] && !s_interrupted)
        s_measure_cli (options, options->cli_runs, figures);
}

//  ---------------------------------------------------------------------
//  Report

static void
s_machine (char *cpu, size_t cpu_len, long *cores, double *mem_gib,
           char *kernel, size_t kernel_len)
{
    snprintf (cpu, cpu_len, "unknown");
    FILE *file = fopen ("/proc/cpuinfo", "r");
    char line [512];
    while (file && fgets (line, sizeof line, file))
        if (strncmp (line, "model name", 10) == 0) {
            char *colon = strchr (line, ':');
            if (colon) {
                snprintf (cpu, cpu_len, "%s", colon + 2);
                cpu [strcspn (cpu, "\n")] = 0;
            }
            break;
        }
    if (file)
        fclose (file);
    *cores = sysconf (_SC_NPROCESSORS_ONLN);
    *mem_gib = (double) sysconf (_SC_PHYS_PAGES)
               * (double) sysconf (_SC_PAGESIZE) / (1024.0 * 1024 * 1024);
    struct utsname name;
    if (uname (&name) == 0)
        snprintf (kernel, kernel_len, "%s %s", name.sysname, name.release);
    else
        snprintf (kernel, kernel_len, "unknown");
}

static void
s_json_number (FILE *file, const char *key, double value, bool integer)
{
    if (value < 0)
        fprintf (file, ",\n    \"%s\": null", key);
    else if (integer)
        fprintf (file, ",\n    \"%s\": %.0f", key, value);
    else
        fprintf (file, ",\n    \"%s\": %.3f", key, value);
}

static void
s_json_string (FILE *file, const char *key, const char *value)
{
    fprintf (file, ",\n    \"%s\": \"", key);
    for (const char *cursor = value; *cursor; cursor++)
        if (*cursor == '"' || *cursor == '\\')
            fprintf (file, "\\%c", *cursor);
        else if ((unsigned char) *cursor >= 0x20)
            fputc (*cursor, file);
    fputc ('"', file);
}

static void s_cell (char *cell, size_t len, const char *format,
                    double value);

//  The scale goals of a run through relays: each is 1 (met), 0 (not met),
//  -1 (not measured) or -2 (none at this size: the time goals are the
//  50,000 row's; a row of S_SCALE_XL_AGENTS records its times).
typedef struct {
    int registered;             //  Every agent in under 20 s
    int broadcast;              //  p50 under 3 s
    int exact;                  //  0 lost, 0 duplicated
    int relay_memory;           //  Largest relay's RSS per agent within
                                //  libzmq's own cost plus 10 %
    double relay_max_bytes;     //  ...that figure, -1: none
    double relay_ratio;         //  ...over libzmq's, -1: none
} s_scale_goals_t;

static void
s_scale_goals (const s_run_t *run, s_scale_goals_t *goals)
{
    bool ran = run->register_s >= 0;
    goals->registered = run->broadcast_only ? -2
                        : ran ? run->register_s < S_GOAL_SCALE_REGISTER_S : -1;
    goals->broadcast = run->broadcast_only ? -2
                       : run->broadcast_p50_ms < 0 ? -1
                       : run->broadcast_p50_ms < S_GOAL_SCALE_BROADCAST_MS;
    goals->exact = ran && run->broadcast_jobs
                       ? run->lost == 0 && run->duplicates == 0 : -1;
    goals->relay_max_bytes = -1;
    for (size_t at = 0; at < run->relay_count; at++)
        if (run->relays [at].bytes_per_agent > goals->relay_max_bytes)
            goals->relay_max_bytes = run->relays [at].bytes_per_agent;
    goals->relay_ratio = goals->relay_max_bytes >= 0
                                 && run->libzmq_bytes_per_agent > 0
                             ? goals->relay_max_bytes
                                   / run->libzmq_bytes_per_agent
                             : -1;
    goals->relay_memory = goals->relay_ratio < 0 ? -1
                          : goals->relay_ratio <= 1 + S_GOAL_SCALE_RELAY_OVER;
}

//  CPU per agent in µs: per registration, per broadcast round; -1 when
//  not measured.
static void
s_cpu_per_agent (const s_run_t *run, double *figures)
{
    //  0, 1: broker, relays while registering; 2, 3: the same per round;
    //  4, 5: the swarm's, while registering and per round
    bool registered = run->register_s >= 0 && run->agents;
    bool rounds = run->broadcast_jobs && run->agents;
    double per_round = rounds ? 1000.0 / (double) run->broadcast_jobs
                                    / (double) run->agents : 0;
    figures [0] = registered ? run->cpu_register.broker_ms * 1000.0
                                   / (double) run->agents : -1;
    figures [1] = registered && run->relay_count
                      ? run->cpu_register.relays_ms * 1000.0
                            / (double) run->agents : -1;
    figures [2] = rounds ? run->cpu_broadcast.broker_ms * per_round : -1;
    figures [3] = rounds && run->relay_count
                      ? run->cpu_broadcast.relays_ms * per_round : -1;
    figures [4] = registered ? run->cpu_register.swarms_ms * 1000.0
                                   / (double) run->agents : -1;
    figures [5] = rounds ? run->cpu_broadcast.swarms_ms * per_round : -1;
}

static const char *
s_met (int goal)
{
    return goal == -2 ? "no goal at this size"
           : goal < 0 ? "not measured" : goal ? "met" : "NOT MET";
}

//  The fields of several processes and relays in a run's JSON object.
static void
s_json_scale (FILE *file, const s_run_t *run)
{
    s_json_number (file, "swarm_processes", (double) run->swarm_processes,
                   true);
    s_json_number (file, "relays", (double) run->relay_count, true);
    s_json_number (file, "swarm_ramp_per_s", (double) run->swarm_ramp, true);
    fprintf (file, ",\n    \"load_average_after\": [%.2f, %.2f, %.2f]",
             run->load_after [0], run->load_after [1], run->load_after [2]);
    double cpu [6];
    s_cpu_per_agent (run, cpu);
    s_json_number (file, "broker_cpu_register_us_per_agent", cpu [0], false);
    s_json_number (file, "relays_cpu_register_us_per_agent", cpu [1], false);
    s_json_number (file, "broker_cpu_broadcast_us_per_agent", cpu [2], false);
    s_json_number (file, "relays_cpu_broadcast_us_per_agent", cpu [3], false);
    s_json_number (file, "swarm_cpu_register_us_per_agent", cpu [4], false);
    s_json_number (file, "swarm_cpu_broadcast_us_per_agent", cpu [5], false);
    if (!run->relay_count)
        return;
    fprintf (file, ",\n    \"relay_memory\": [");
    for (size_t at = 0; at < run->relay_count; at++) {
        const s_relay_figures_t *relay = &run->relays [at];
        fprintf (file, "%s\n      {\"name\": \"relay-%zu\", \"agents\": %zu, "
                 "\"listed_agents\": %" PRId64 ", \"rss_base_kib\": %zu, "
                 "\"rss_registered_kib\": %zu, \"rss_end_kib\": %zu, "
                 "\"rss_bytes_per_agent\": %.0f}", at ? "," : "", at + 1,
                 relay->agents, relay->registry_agents, relay->rss_base_kib,
                 relay->rss_registered_kib, relay->rss_end_kib,
                 relay->bytes_per_agent);
    }
    fprintf (file, "\n    ]");
    s_json_number (file, "libzmq_bytes_per_agent", run->libzmq_bytes_per_agent,
                   true);
    s_json_number (file, "libzmq_cpu_us_per_agent",
                   run->libzmq_cpu_us_per_agent, false);
    s_json_number (file, "libzmq_agents", (double) run->libzmq_agents, true);
    s_scale_goals_t goals;
    s_scale_goals (run, &goals);
    fprintf (file, ",\n    \"goals\": {\"registered_under_%d_s\": %s, "
             "\"broadcast_p50_under_%d_ms\": %s, \"none_lost_or_duplicated\": "
             "%s, \"relay_memory_within_libzmq_plus_%d_percent\": %s}",
             S_GOAL_SCALE_REGISTER_S,
             goals.registered < 0 ? "null" : goals.registered ? "true"
                                                              : "false",
             S_GOAL_SCALE_BROADCAST_MS,
             goals.broadcast < 0 ? "null" : goals.broadcast ? "true" : "false",
             goals.exact < 0 ? "null" : goals.exact ? "true" : "false",
             (int) (S_GOAL_SCALE_RELAY_OVER * 100),
             goals.relay_memory < 0 ? "null"
             : goals.relay_memory   ? "true" : "false");
}

//  After the table: processes, relays, their memory, the machine's load,
//  and for each run through relays the scale goals, met or not.
static void
s_print_scale (const s_run_t *runs, size_t count)
{
    printf ("%-34s", "swarm processes");
    for (size_t at = 0; at < count; at++)
        printf (" %12zu", runs [at].swarm_processes);
    printf ("\n%-34s", "relays");
    for (size_t at = 0; at < count; at++)
        printf (" %12zu", runs [at].relay_count);
    printf ("\n%-34s", "swarm started per s (0: at once)");
    for (size_t at = 0; at < count; at++)
        printf (" %12zu", runs [at].swarm_ramp);
    const char *names [] = {
        "broker CPU/agent, register (us)",
        "relays CPU/agent, register (us)",
        "broker CPU/agent, broadcast (us)",
        "relays CPU/agent, broadcast (us)",
        "swarm CPU/agent, register (us)",
        "swarm CPU/agent, broadcast (us)"
    };
    for (size_t row = 0; row < 6; row++) {
        printf ("\n%-34s", names [row]);
        for (size_t at = 0; at < count; at++) {
            double cpu [6];
            char cell [32];
            s_cpu_per_agent (&runs [at], cpu);
            s_cell (cell, sizeof cell, "%.1f", cpu [row]);
            printf (" %12s", cell);
        }
    }
    printf ("\n");
    for (size_t at = 0; at < count; at++) {
        const s_run_t *run = &runs [at];
        printf ("\n%zu agents, %s: load average %.2f before, %.2f %.2f %.2f "
                "after (1, 5, 15 min)\n", run->agents,
                run->relay_count ? "through relays" : "direct",
                run->load_before, run->load_after [0], run->load_after [1],
                run->load_after [2]);
        if (!run->relay_count)
            continue;
        char cell [32];
        for (size_t relay = 0; relay < run->relay_count; relay++) {
            const s_relay_figures_t *figures = &run->relays [relay];
            if (!figures->rss_base_kib)
                continue;
            char listed [32] = "";
            if (figures->registry_agents >= 0)
                snprintf (listed, sizeof listed, " (%" PRId64 " listed)",
                          figures->registry_agents);
            s_cell (cell, sizeof cell, "%.0f", figures->bytes_per_agent);
            printf ("  relay-%-2zu %6zu agents%s: RSS %zu KiB up, %zu KiB "
                    "registered, %zu KiB at the end; %s B per agent\n",
                    relay + 1, figures->agents, listed, figures->rss_base_kib,
                    figures->rss_registered_kib, figures->rss_end_kib, cell);
        }
        s_cell (cell, sizeof cell, "%.0f", run->libzmq_bytes_per_agent);
        char cpu [32];
        s_cell (cpu, sizeof cpu, "%.0f", run->libzmq_cpu_us_per_agent);
        printf ("  libzmq's own cost: %s B and %s us of CPU per agent "
                "(gridsink, %zu agents, two connections each)\n", cell, cpu,
                run->libzmq_agents);
        s_scale_goals_t goals;
        s_scale_goals (run, &goals);
        printf ("  goals:\n");
        s_cell (cell, sizeof cell, "%.2f s", run->register_s);
        printf ("    all %zu registered in under %d s     %14s   %s\n",
                run->agents, S_GOAL_SCALE_REGISTER_S, cell,
                s_met (goals.registered));
        s_cell (cell, sizeof cell, "%.0f ms", run->broadcast_p50_ms);
        printf ("    broadcast round trip p50 under %d s  %14s   %s\n",
                S_GOAL_SCALE_BROADCAST_MS / 1000, cell,
                s_met (goals.broadcast));
        snprintf (cell, sizeof cell, "%" PRIu64 " / %" PRIu64, run->lost,
                  run->duplicates);
        printf ("    0 lost, 0 duplicated results        %14s   %s\n", cell,
                s_met (goals.exact));
        s_cell (cell, sizeof cell, "%.2f x", goals.relay_ratio);
        printf ("    relay RSS per agent <= libzmq + %d%%  %14s   %s\n",
                (int) (S_GOAL_SCALE_RELAY_OVER * 100), cell,
                s_met (goals.relay_memory));
    }
    printf ("\n");
}

//  Grid's broadcast p50 over the raw CURVE fan-out p50 plus the raw
//  ingest of one result per agent (the round trip with nothing of grid
//  in it), or -1.
static double
s_raw_ratio (const s_run_t *run)
{
    if (run->broadcast_p50_ms < 0 || run->raw.fanout_p50_ms < 0
        || run->raw.ingest_per_s <= 0)
        return -1;
    double raw_ms = run->raw.fanout_p50_ms
                    + (double) run->agents / run->raw.ingest_per_s * 1000.0;
    return raw_ms > 0 ? run->broadcast_p50_ms / raw_ms : -1;
}

static int
s_write_json (const char *path, const s_run_t *runs, size_t count,
              const s_agent_figures_t *agent)
{
    //  mkdir -p of the file's directory
    char dir [1024];
    snprintf (dir, sizeof dir, "%s", path);
    for (char *slash = strchr (dir + 1, '/'); slash;
         slash = strchr (slash + 1, '/')) {
        *slash = 0;
        if (mkdir (dir, 0755) != 0 && errno != EEXIST)
            return -1;
        *slash = '/';
    }
    FILE *file = fopen (path, "w");
    if (!file)
        return -1;
    char cpu [256], kernel [256];
    long cores;
    double mem_gib;
    s_machine (cpu, sizeof cpu, &cores, &mem_gib, kernel, sizeof kernel);
    fprintf (file, "[");
    for (size_t at = 0; at < count; at++) {
        const s_run_t *run = &runs [at];
        fprintf (file, "%s\n  {\n    \"agents\": %zu", at ? "," : "",
                 run->agents);
        if (run->requested)
            fprintf (file, ",\n    \"agents_requested\": %zu",
                     run->requested);
        s_json_number (file, "register_s", run->register_s, false);
        s_json_number (file, "broadcast_p50_ms", run->broadcast_p50_ms, true);
        s_json_number (file, "broadcast_p99_ms", run->broadcast_p99_ms, true);
        s_json_number (file, "broadcast_max_ms", run->broadcast_max_ms, true);
        s_json_number (file, "broadcast_jobs", (double) run->broadcast_jobs,
                       true);
        s_json_number (file, "single_node_jobs_per_s", run->single_jobs_per_s,
                       true);
        s_json_number (file, "single_node_jobs", (double) run->single_jobs,
                       true);
        s_json_number (file, "single_node_refused",
                       (double) run->single_refused, true);
        s_json_number (file, "single_node_p50_ms", run->single_p50_ms, true);
        s_json_number (file, "single_node_p99_ms", run->single_p99_ms, true);
        s_json_number (file, "results_per_s", run->results_per_s, true);
        s_json_number (file, "ingest_results", (double) run->ingest_results,
                       true);
        //  CPU per result over the ingest run (its submits included)
        double results = (double) run->ingest_results;
        s_json_number (file, "broker_cpu_ingest_us_per_result",
                       results > 0 ? run->cpu_ingest.broker_ms * 1000.0
                                         / results
                                   : -1,
                       false);
        s_json_number (file, "relays_cpu_ingest_us_per_result",
                       results > 0 && run->relay_count
                           ? run->cpu_ingest.relays_ms * 1000.0 / results
                           : -1,
                       false);
        s_json_number (file, "swarm_cpu_ingest_us_per_result",
                       results > 0 ? run->cpu_ingest.swarms_ms * 1000.0
                                         / results
                                   : -1,
                       false);
        //  The broker alone (the drain): from the SIGCONT to the last
        //  result_ack
        s_json_number (file, "results_per_s_drain", run->results_per_s_drain,
                       true);
        double drained = (double) run->drain_results;
        bool drain_ran = run->results_per_s_drain >= 0 && drained > 0;
        s_json_number (file, "drain_results",
                       drain_ran ? drained : -1, true);
        s_json_number (file, "broker_cpu_drain_us_per_result",
                       drain_ran ? run->cpu_drain.broker_ms * 1000.0 / drained
                                 : -1,
                       false);
        s_json_number (file, "swarm_cpu_drain_us_per_result",
                       drain_ran ? run->cpu_drain.swarms_ms * 1000.0 / drained
                                 : -1,
                       false);
        s_json_number (file, "drain_unsent_bytes",
                       drain_ran ? (double) run->drain_unsent_bytes : -1,
                       true);
        if (run->swarm_transport)
            s_json_string (file, "swarm_transport", run->swarm_transport);
        s_json_number (file, "broker_rss_bytes_per_agent",
                       run->broker_bytes_per_agent, true);
        s_json_number (file, "broker_rss_base_kib",
                       (double) run->broker_rss_base_kib, true);
        s_json_number (file, "broker_rss_registered_kib",
                       (double) run->broker_rss_registered_kib, true);
        s_json_number (file, "broker_rss_end_kib",
                       (double) run->broker_rss_end_kib, true);
        s_json_number (file, "swarm_rss_bytes_per_agent",
                       run->swarm_bytes_per_agent, true);
        s_json_number (file, "agent_idle_rss_kib",
                       agent->measured ? (double) agent->idle_rss_kib : -1,
                       true);
        s_json_number (file, "agent_idle_anon_kib",
                       agent->measured ? (double) agent->idle_anon_kib : -1,
                       true);
        s_json_number (file, "agent_idle_pss_kib",
                       agent->measured ? (double) agent->idle_pss_kib : -1,
                       true);
        s_json_number (file, "agent_idle_cpu_percent",
                       agent->measured ? agent->idle_cpu_percent : -1, false);
        s_json_number (file, "agent_idle_window_s",
                       agent->measured ? agent->idle_s : -1, true);
        s_json_number (file, "agent_hostname_ms", agent->hostname_ms, false);
        s_json_number (file, "agent_hostname_cpu_ms", agent->hostname_cpu_ms,
                       false);
        s_json_number (file, "agent_echo_ms", agent->echo_ms, false);
        s_json_number (file, "agent_echo_cpu_ms", agent->echo_cpu_ms, false);
        s_json_number (file, "agent_program_ms", agent->program_ms, false);
        s_json_number (file, "agent_program_cpu_ms", agent->program_cpu_ms,
                       false);
        bool ran = run->register_s >= 0;
        s_json_number (file, "lost_results", ran ? (double) run->lost : -1,
                       true);
        s_json_number (file, "duplicate_results",
                       ran ? (double) run->duplicates : -1, true);
        s_json_number (file, "duplicate_commands",
                       ran ? (double) run->dup_commands : -1, true);
        s_json_number (file, "resent_results",
                       ran ? (double) run->resent : -1, true);
        s_json_number (file, "swarm_send_failed",
                       ran ? (double) run->send_failed : -1, true);
        s_json_number (file, "raw_curve_fanout_p50_ms",
                       run->raw.fanout_p50_ms, false);
        s_json_number (file, "raw_curve_fanout_p99_ms",
                       run->raw.fanout_p99_ms, false);
        s_json_number (file, "raw_curve_ingest_per_s", run->raw.ingest_per_s,
                       true);
        s_json_number (file, "broadcast_to_raw_ratio", s_raw_ratio (run),
                       false);
        s_json_number (file, "ingest_to_raw_ratio",
                       run->results_per_s > 0 && run->raw.ingest_per_s > 0
                           ? run->results_per_s / run->raw.ingest_per_s
                           : -1,
                       false);
        s_json_number (file, "cli_wait_p50_ms", agent->cli_p50_ms, false);
        s_json_number (file, "cli_wait_max_ms", agent->cli_max_ms, false);
        s_json_number (file, "cli_wait_runs",
                       agent->cli_p50_ms >= 0 ? (double) agent->cli_runs : -1,
                       true);
        s_json_number (file, "load_average_before", run->load_before, false);
        s_json_number (file, "cores", (double) cores, true);
        s_json_number (file, "mem_gib", mem_gib, false);
        s_json_string (file, "cpu", cpu);
        s_json_string (file, "kernel", kernel);
        s_json_scale (file, run);
        if (run->error [0])
            s_json_string (file, "error", run->error);
        fprintf (file, "\n  }");
    }
    fprintf (file, "\n]\n");
    return fclose (file) == 0 ? 0 : -1;
}

//  One table cell: VALUE with FORMAT, or "-".
static void
s_cell (char *cell, size_t len, const char *format, double value)
{
    if (value < 0)
        snprintf (cell, len, "-");
    else
        snprintf (cell, len, format, value);
}

static void
s_print_row (const char *name, const s_run_t *runs, size_t count,
             size_t field, const char *format, const char *goal)
{
    printf ("%-34s", name);
    for (size_t at = 0; at < count; at++) {
        const s_run_t *run = &runs [at];
        //  Counts mean nothing for a run that never got to its jobs
        bool ran = run->register_s >= 0;
        double values [] = {
            run->register_s, run->broadcast_p50_ms, run->broadcast_p99_ms,
            run->single_jobs_per_s, run->single_p50_ms, run->results_per_s,
            run->broker_bytes_per_agent, run->swarm_bytes_per_agent,
            ran ? (double) run->lost : -1, ran ? (double) run->duplicates : -1,
            ran ? (double) run->dup_commands : -1,
            run->results_per_s_drain,
            run->results_per_s_drain >= 0 && run->drain_results
                ? run->cpu_drain.broker_ms * 1000.0
                      / (double) run->drain_results
                : -1,
            run->raw.fanout_p50_ms, run->raw.ingest_per_s,
            s_raw_ratio (run),
            run->results_per_s > 0 && run->raw.ingest_per_s > 0
                ? run->results_per_s / run->raw.ingest_per_s
                : -1
        };
        char cell [32];
        s_cell (cell, sizeof cell, format, values [field]);
        printf (" %12s", cell);
    }
    printf ("   %s\n", goal);
}

static void
s_print (const s_run_t *runs, size_t count, const s_agent_figures_t *agent)
{
    char cpu [256], kernel [256];
    long cores;
    double mem_gib;
    s_machine (cpu, sizeof cpu, &cores, &mem_gib, kernel, sizeof kernel);
    printf ("\ngrid benchmark on %s, %ld cores, %.1f GiB, %s\n\n", cpu, cores,
            mem_gib, kernel);
    printf ("%-34s", "agents");
    for (size_t at = 0; at < count; at++)
        printf (" %12zu", runs [at].agents);
    printf ("   goal\n");
    char goal [128];
    snprintf (goal, sizeof goal, "10k under %d s", S_GOAL_REGISTER_10K_S);
    s_print_row ("registration, all online (s)", runs, count, 0, "%.2f", goal);
    snprintf (goal, sizeof goal, "1k <%d, 10k <%d, 50k <%d",
              S_GOAL_BROADCAST_1K_MS, S_GOAL_BROADCAST_10K_MS,
              S_GOAL_BROADCAST_50K_MS);
    s_print_row ("broadcast round trip p50 (ms)", runs, count, 1, "%.0f",
                 goal);
    s_print_row ("broadcast round trip p99 (ms)", runs, count, 2, "%.0f", "");
    s_print_row ("  raw CURVE fan-out p50 (ms)", runs, count, 13, "%.2f",
                 "libzmq alone, same N");
    snprintf (goal, sizeof goal, "within %.2fx", S_GOAL_RAW_RATIO);
    s_print_row ("  ratio to raw fan-out + ingest", runs, count, 15, "%.2fx",
                 goal);
    snprintf (goal, sizeof goal, "over %d, durable", S_GOAL_JOBS_PER_S);
    s_print_row ("single-node jobs per second", runs, count, 3, "%.0f", goal);
    s_print_row ("single-node job p50 (ms)", runs, count, 4, "%.0f", "");
    snprintf (goal, sizeof goal, "over %d", S_GOAL_RESULTS_PER_S);
    s_print_row ("results committed per second", runs, count, 5, "%.0f",
                 goal);
    s_print_row ("  the broker alone (drain)", runs, count, 11, "%.0f",
                 goal);
    s_print_row ("  raw CURVE ingest (msgs/s)", runs, count, 14, "%.0f",
                 "libzmq alone, same N");
    s_print_row ("  ratio to raw ingest", runs, count, 16, "%.2fx", "");
    s_print_row ("  broker CPU per result (us)", runs, count, 12, "%.2f",
                 "");
    snprintf (goal, sizeof goal, "under %d", S_GOAL_BROKER_BYTES);
    s_print_row ("broker RSS per agent (bytes)", runs, count, 6, "%.0f", goal);
    s_print_row ("swarm RSS per simulated agent (B)", runs, count, 7, "%.0f",
                 "");
    s_print_row ("lost results", runs, count, 8, "%.0f", "0");
    s_print_row ("duplicated results", runs, count, 9, "%.0f", "0");
    s_print_row ("commands re-sent by the broker", runs, count, 10, "%.0f",
                 "");
    for (size_t at = 0; at < count; at++) {
        if (runs [at].requested && !runs [at].error [0])
            printf ("  %zu agents asked for: %zu measured, the most the "
                    "open-file limit allows one broker\n",
                    runs [at].requested, runs [at].agents);
        if (runs [at].error [0])
            printf ("  %zu agents: %s\n", runs [at].agents, runs [at].error);
    }
    if (agent->measured || agent->error [0]) {
        printf ("\nreal gridagent\n");
        char cell [32];
        s_cell (cell, sizeof cell, "%.0f",
                agent->measured ? (double) agent->idle_rss_kib : -1);
        printf ("  idle RSS (KiB)                    %12s   under %d\n", cell,
                S_GOAL_AGENT_KIB);
        s_cell (cell, sizeof cell, "%.0f",
                agent->measured ? (double) agent->idle_anon_kib : -1);
        printf ("    of which its own (RssAnon, KiB) %12s\n", cell);
        s_cell (cell, sizeof cell, "%.0f",
                agent->measured ? (double) agent->idle_pss_kib : -1);
        printf ("    proportional share (Pss, KiB)   %12s\n", cell);
        s_cell (cell, sizeof cell, "%.3f",
                agent->measured ? agent->idle_cpu_percent : -1);
        printf ("  idle CPU over %3d s (%%)           %12s\n", agent->idle_s,
                cell);
        s_cell (cell, sizeof cell, "%.1f", agent->hostname_ms);
        printf ("  system hostname, p50 wall (ms)    %12s\n", cell);
        s_cell (cell, sizeof cell, "%.2f", agent->hostname_cpu_ms);
        printf ("  system hostname, agent CPU (ms)   %12s\n", cell);
        s_cell (cell, sizeof cell, "%.1f", agent->echo_ms);
        printf ("  test echo, p50 wall (ms)          %12s\n", cell);
        s_cell (cell, sizeof cell, "%.2f", agent->echo_cpu_ms);
        printf ("  test echo, agent CPU (ms)         %12s   under %.1f\n", cell,
                S_GOAL_AGENT_JOB_CPU_MS);
        s_cell (cell, sizeof cell, "%.1f", agent->program_ms);
        printf ("  a program, p50 wall (ms)          %12s   (ping as /bin/true)\n",
                cell);
        s_cell (cell, sizeof cell, "%.2f", agent->program_cpu_ms);
        printf ("  a program, agent CPU (ms)         %12s\n", cell);
        s_cell (cell, sizeof cell, "%.1f", agent->cli_p50_ms);
        printf ("  gridcli job run --wait, p50 (ms)  %12s   under %d "
                "(CURVE, process start included; %zu runs)\n", cell,
                S_GOAL_CLI_WAIT_MS, agent->cli_runs);
        if (agent->error [0])
            printf ("  %s\n", agent->error);
    }
    printf ("\n");
}

//  ---------------------------------------------------------------------
//  The any-node queue run (--queue)
//
//  A broker, a steady swarm that answers at once and a doomed swarm
//  whose agents take every step and never answer. Jobs of one `test
//  echo` step on `any` go in over one DEALER, as fast as the broker
//  takes them; when half are in, the doomed swarm is killed (SIGKILL)
//  while its agents hold their steps. The broker must notice them gone
//  (missed heartbeats) and give those steps to steady agents. Figures:
//  steps per second (first submit to the last job's end), wait p50/p99
//  (queue.stats: submit to start), and reclaim time (the kill to the end
//  of each step a doomed agent held), with every job read back: lost
//  (not completed, or no success) and duplicated (more than one success,
//  or a step the swarm ran twice) must be 0.

typedef struct {
    size_t jobs;                //  Jobs asked for
    size_t agents;              //  Swarm agents, doomed ones included
    size_t doomed;              //  Agents killed mid-lease
    size_t limit;               //  The broker's test.echo limit, 0: none
    int64_t limit_running;      //  What it covered at the kill, or -1
    size_t accepted;            //  Jobs the broker took
    size_t refused;             //  Submits refused (queue_full)
    double seconds;             //  First submit to the last job's end
    double steps_per_s;         //  Jobs (one step each) per second
    int64_t wait_p50_ms;        //  queue.stats wait_ms, last 5 minutes
    int64_t wait_p99_ms;
    int64_t run_p50_ms;         //  queue.stats run_ms, last 5 minutes
    int64_t held;               //  Steps the doomed agents held at the kill
    size_t reclaimed;           //  Jobs with an attempt on a doomed agent
    double reclaim_p50_ms;      //  Kill to that job's end
    double reclaim_max_ms;
    int64_t claims;             //  status.queue, when the broker has it
    int64_t reclaims;
    int64_t lease_expirations;
    uint64_t lost;
    uint64_t duplicates;
    const char *swarm_transport;    //  gridswarm --transport
    char error [256];
} s_queue_run_t;

//  Wall-clock ms of an RFC 3339 time ("2026-11-21T07:00:51.123Z"), or -1.
static int64_t
s_time_ms (const pv_t *value)
{
    char text [TIME_TEXT_LEN + 8];
    size_t len = 0;
    const char *bytes = pv_str (value, &len);
    if (!bytes || len >= sizeof text)
        return -1;
    memcpy (text, bytes, len);
    text [len] = 0;
    struct tm tm;
    memset (&tm, 0, sizeof tm);
    int millis = 0;
    if (sscanf (text, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                &millis) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t) timegm (&tm) * 1000 + millis;
}

//  Starts one swarm process of COUNT agents named PREFIX-NNNNNN that
//  answer after DELAY_MS, into stage->swarms.
static int
s_queue_swarm (s_stage_t *stage, const s_options_t *options, size_t count,
               const char *prefix, int64_t delay_ms)
{
    if (stage->swarm_count == S_MAX_SWARMS)
        return -1;
    size_t at = stage->swarm_count;
    s_swarm_t *swarm = &stage->swarms [at];
    swarm->first = 1;
    swarm->count = count;
    char agents [32], delay [32], log [400], control [400];
    snprintf (agents, sizeof agents, "%zu", count);
    snprintf (delay, sizeof delay, "%" PRId64, delay_ms);
    snprintf (log, sizeof log, "%s/swarm-%s.log", stage->dir, prefix);
    snprintf (control, sizeof control, "ipc://%s/swarm-%s.ctl", stage->dir,
              prefix);
    char *argv [40];
    size_t argc = 0;
    argv [argc++] = options->swarm;
    argv [argc++] = "--agents";
    argv [argc++] = agents;
    argv [argc++] = "--prefix";
    argv [argc++] = (char *) prefix;
    argv [argc++] = "--delay-ms";
    argv [argc++] = delay;
    argv [argc++] = "--broker";
    argv [argc++] = stage->agents_ep;
    argv [argc++] = "--publish";
    argv [argc++] = stage->publish_ep;
    argv [argc++] = "--control";
    argv [argc++] = control;
    argv [argc++] = "--transport";
    argv [argc++] = (char *) s_swarm_transport (options);
    if (s_security.curve) {
        argv [argc++] = "--curve";
        argv [argc++] = s_security.broker_key;
    }
    for (size_t arg = 0; arg < options->swarm_arg_count; arg++)
        argv [argc++] = options->swarm_args [arg];
    argv [argc] = NULL;
    swarm->pid = s_spawn (argv, log);
    if (swarm->pid < 0
        || s_peer_open_local (&swarm->control, control, (char *) prefix)
               != 0)
        return -1;
    stage->swarm_count++;
    return 0;
}

//  Waits until every swarm process has all its agents welcomed.
static int
s_queue_welcomed (s_stage_t *stage, int64_t timeout_ms)
{
    int64_t deadline = s_now_ms () + timeout_ms;
    while (s_now_ms () < deadline && !s_interrupted) {
        size_t ready = 0;
        for (size_t at = 0; at < stage->swarm_count; at++) {
            pv_doc_t *doc = s_swarm_stats (&stage->swarms [at].control);
            if (doc && s_int (pv_doc_root (doc), "welcomed")
                           >= (int64_t) stage->swarms [at].count)
                ready++;
            pv_doc_destroy (&doc);
        }
        if (ready == stage->swarm_count)
            return 0;
        zclock_sleep (100);
    }
    return -1;
}

//  The broker's `status` reply (decoded), or NULL.
static pv_doc_t *
s_queue_status (s_stage_t *stage)
{
    uint64_t seq = s_request (&stage->broker, "status", NULL);
    return s_peer_wait (&stage->broker, seq, 5000);
}

//  queue.stats over PEER (a connection of its own, so that no submit's
//  reply is read in its place): the decoded reply, or NULL.
static pv_doc_t *
s_queue_stats (s_peer_t *peer)
{
    char id [64];
    s_next_id (peer, id, sizeof id);
    pw_reset (peer->writer);
    proto_request_begin (peer->writer, "queue.stats", id, 0);
    s_peer_send (peer);
    return s_peer_wait (peer, peer->seq, 10000);
}

//  The cells the broker's first limit covers, from a queue.stats reply,
//  or -1.
static int64_t
s_queue_limit_running (const pv_doc_t *doc)
{
    const pv_t *limits = doc ? pv_map_get (pv_map_get (pv_doc_root (doc),
                                                       "data"), "limits")
                             : NULL;
    return pv_size (limits) ? s_int (pv_array_at (limits, 0), "running") : -1;
}

//  Jobs that ended, from a status reply.
static int64_t
s_queue_ended (const pv_t *status)
{
    const pv_t *jobs = pv_map_get (status, "jobs");
    return s_int (jobs, "completed") + s_int (jobs, "partial_failure")
           + s_int (jobs, "failed") + s_int (jobs, "cancelled");
}

//  Checks one any job's record: completed with one success; whether a
//  doomed agent held it; when it ended.
static void
s_queue_check (const pv_t *record, s_queue_run_t *run, bool *reclaimed_p,
               int64_t *ended_ms_p)
{
    *reclaimed_p = false;
    *ended_ms_p = s_time_ms (pv_map_get (record, "updated_at"));
    const pv_t *cells = pv_map_get (pv_map_get (record, "results"), "0");
    size_t success = 0;
    for (size_t at = 0; at < pv_size (cells); at++) {
        const pv_t *cell = pv_map_value_at (cells, at);
        if (pv_str_eq (pv_map_get (cell, "status"), "success"))
            success++;
        const pv_t *history = pv_map_get (cell, "history");
        for (size_t entry = 0; entry < pv_size (history); entry++) {
            const pv_t *attempt = pv_array_at (history, entry);
            size_t len = 0;
            const char *node = pv_str (pv_map_get (attempt, "node"), &len);
            if (node && len > 7 && memcmp (node, "doomed-", 7) == 0)
                *reclaimed_p = true;
            if (pv_str_eq (pv_map_get (attempt, "status"), "success"))
                success++;
        }
    }
    if (!pv_str_eq (pv_map_get (record, "status"), "completed")
        || success == 0)
        run->lost++;
    if (success > 1)
        run->duplicates += success - 1;
}

static void
s_queue_measure (const s_options_t *options, s_queue_run_t *run)
{
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s", s_tmpdir);
    size_t steady = run->agents - run->doomed;
    if (s_stage_broker (&stage, options, "queue") != 0
        || s_queue_swarm (&stage, options, steady, "swarm", 0) != 0
        || s_queue_swarm (&stage, options, run->doomed, "doomed",
                          3600 * 1000) != 0
        || s_queue_welcomed (&stage, 120000) != 0) {
        snprintf (run->error, sizeof run->error,
                  "the broker or the swarm did not come up");
        s_stage_stop (&stage, true);
        return;
    }
    s_say ("queue: %zu agents (%zu to be killed) registered; %zu any jobs",
           run->agents, run->doomed, run->jobs);
    pv_doc_t *doc = s_queue_status (&stage);
    int64_t ended_before = doc ? s_queue_ended (pv_doc_root (doc)) : 0;
    pv_doc_destroy (&doc);

    char (*ids) [JOB_ID_LEN + 1]
        = (char (*) [JOB_ID_LEN + 1]) calloc (run->jobs + 1, JOB_ID_LEN + 1);
    assert (ids);
    uint64_t first_seq = stage.broker.seq + 1;
    size_t sent = 0, answered = 0;
    int64_t first_ms = s_now_ms ();
    int64_t first_wall_ms = 0;
    int64_t kill_wall_ms = 0, kill_ms = 0;
    int64_t next_status_ms = 0, ended = 0;
    s_peer_t side;
    memset (&side, 0, sizeof side);
    if (s_peer_open (&side, stage.client_ep, "side") != 0) {
        snprintf (run->error, sizeof run->error, "cannot connect to the broker");
        s_stage_stop (&stage, true);
        free (ids);
        return;
    }
    if (s_security.curve
        && s_peer_secure (&side, s_security.client,
                          s_security.broker_public) != 0) {
        snprintf (run->error, sizeof run->error, "cannot connect to the broker");
        s_peer_close (&side);
        s_stage_stop (&stage, true);
        free (ids);
        return;
    }
    int64_t deadline = first_ms + 120000 + (int64_t) run->jobs;
    while (!s_interrupted && s_now_ms () < deadline
           && (answered < run->jobs
               || ended < (int64_t) run->accepted)) {
        //  Submits, pipelined over one DEALER
        while (sent < run->jobs && sent - answered < options->window) {
            if (!first_wall_ms) {
                struct timespec ts;
                clock_gettime (CLOCK_REALTIME, &ts);
                first_wall_ms = (int64_t) ts.tv_sec * 1000
                                + ts.tv_nsec / 1000000;
            }
            s_submit_to (&stage.broker, "all", NULL, true, "test", "echo",
                         "q");
            sent++;
        }
        pv_doc_t *reply = s_peer_recv (&stage.broker, 10);
        if (reply) {
            uint64_t seq = s_reply_seq (&stage.broker, pv_doc_root (reply));
            if (seq >= first_seq && seq < first_seq + run->jobs) {
                char code [64];
                const pv_t *data = s_ok_data (reply, code, sizeof code);
                char *job = data ? pv_strdup (pv_map_get (data, "job")) : NULL;
                if (job && job_id_valid (job)) {
                    memcpy (ids [seq - first_seq], job, JOB_ID_LEN + 1);
                    run->accepted++;
                }
                else
                    run->refused++;
                free (job);
                answered++;
            }
            else
            if (pv_map_get (pv_map_get (pv_doc_root (reply), "data"),
                            "jobs"))
                ended = s_queue_ended (pv_map_get (pv_doc_root (reply),
                                                   "data"))
                        - ended_before;
            pv_doc_destroy (&reply);
        }
        //  Half in: kill the doomed agents while they hold their steps
        if (!kill_ms && answered >= run->jobs / 2) {
            s_swarm_t *doomed = &stage.swarms [1];
            pv_doc_t *stats = s_swarm_stats (&doomed->control);
            run->held = stats ? s_int (pv_doc_root (stats), "commands")
                                    - s_int (pv_doc_root (stats), "results")
                              : -1;
            pv_doc_destroy (&stats);
            kill (doomed->pid, SIGKILL);
            kill_ms = s_now_ms ();
            struct timespec ts;
            clock_gettime (CLOCK_REALTIME, &ts);
            kill_wall_ms = (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
            s_say ("queue: killed %zu agents holding %" PRId64 " steps",
                   run->doomed, run->held);
            pv_doc_t *figures = s_queue_stats (&side);
            run->limit_running = s_queue_limit_running (figures);
            pv_doc_destroy (&figures);
        }
        if (answered >= run->jobs && s_now_ms () >= next_status_ms) {
            s_request (&stage.broker, "status", NULL);
            next_status_ms = s_now_ms () + 100;
        }
    }
    if (answered < run->jobs || ended < (int64_t) run->accepted)
        snprintf (run->error, sizeof run->error,
                  "%zu of %zu jobs answered, %" PRId64 " of %zu ended",
                  answered, run->jobs, ended, run->accepted);
    //  Figures the broker keeps
    doc = s_queue_stats (&side);
    const pv_t *stats = doc ? pv_map_get (pv_doc_root (doc), "data") : NULL;
    run->wait_p50_ms = s_int (pv_map_get (pv_map_get (stats, "wait_ms"), "5m"),
                              "p50");
    run->wait_p99_ms = s_int (pv_map_get (pv_map_get (stats, "wait_ms"), "5m"),
                              "p99");
    run->run_p50_ms = s_int (pv_map_get (pv_map_get (stats, "run_ms"), "5m"),
                             "p50");
    pv_doc_destroy (&doc);
    doc = s_queue_status (&stage);
    const pv_t *queue = doc ? pv_map_get (pv_map_get (pv_doc_root (doc),
                                                      "data"), "queue")
                            : NULL;
    run->claims = queue ? s_int (queue, "claims") : -1;
    run->reclaims = queue ? s_int (queue, "reclaims") : -1;
    run->lease_expirations = queue ? s_int (queue, "lease_expirations") : -1;
    pv_doc_destroy (&doc);

    //  Every job read back
    double *reclaim = (double *) calloc (run->accepted + 1, sizeof (double));
    assert (reclaim);
    int64_t last_wall_ms = first_wall_ms;
    size_t got = 0, asked = 0, at = 0;
    first_seq = stage.broker.seq + 1;
    uint64_t *seq_job = (uint64_t *) calloc (run->jobs + 1, sizeof (uint64_t));
    assert (seq_job);
    int64_t read_deadline = s_now_ms () + 60000 + (int64_t) run->jobs;
    while (got < asked || at < run->jobs) {
        if (s_interrupted || s_now_ms () > read_deadline)
            break;
        while (at < run->jobs && asked - got < 64) {
            if (ids [at][0]) {
                s_request (&stage.broker, "job.get", ids [at]);
                seq_job [asked++] = at;
            }
            at++;
        }
        pv_doc_t *reply = s_peer_recv (&stage.broker, 1000);
        if (!reply)
            continue;
        uint64_t seq = s_reply_seq (&stage.broker, pv_doc_root (reply));
        if (seq >= first_seq && seq < first_seq + asked) {
            char code [64];
            const pv_t *data = s_ok_data (reply, code, sizeof code);
            bool reclaimed = false;
            int64_t ended_ms = -1;
            if (data)
                s_queue_check (data, run, &reclaimed, &ended_ms);
            else
                run->lost++;
            if (ended_ms > last_wall_ms)
                last_wall_ms = ended_ms;
            if (reclaimed && ended_ms > 0)
                reclaim [run->reclaimed++] = (double) (ended_ms - kill_wall_ms);
            got++;
        }
        pv_doc_destroy (&reply);
    }
    if (got < asked) {
        run->lost += asked - got;
        if (!run->error [0])
            snprintf (run->error, sizeof run->error,
                      "%zu job records could not be read", asked - got);
    }
    qsort (reclaim, run->reclaimed, sizeof (double), s_compare_doubles);
    run->reclaim_p50_ms = s_percentile (reclaim, run->reclaimed, 50);
    run->reclaim_max_ms = run->reclaimed ? reclaim [run->reclaimed - 1] : -1;
    run->seconds = (double) (last_wall_ms - first_wall_ms) / 1000.0;
    run->steps_per_s = run->seconds > 0 ? (double) run->accepted
                                              / run->seconds
                                        : -1;
    //  What the steady swarm ran twice
    pv_doc_t *swarm_stats = s_swarm_stats (&stage.swarms [0].control);
    if (swarm_stats)
        run->duplicates += (uint64_t) s_int (pv_doc_root (swarm_stats),
                                             "reruns");
    pv_doc_destroy (&swarm_stats);
    free (seq_job);
    free (reclaim);
    free (ids);
    s_peer_close (&side);
    s_stage_stop (&stage, run->error [0] || options->keep);
}

static void s_queue_print (const s_queue_run_t *run);
static int s_queue_json (const char *path, const s_queue_run_t *run);
static rlim_t s_raise_fd_limit (size_t agents);
static void s_run_init (s_run_t *run, size_t agents);

//  gridbench --queue: the queue run alone. Returns the exit code.
static int
s_queue_main (const s_options_t *options)
{
    s_raise_fd_limit (options->queue_agents);
    //  A queue this deep must be admitted whole, and a killed agent
    //  noticed within about a second and a half
    s_options_t queue_options = *options;
    static char pending [32], running [32];
    snprintf (pending, sizeof pending, "%zu", options->queue_jobs + 1024);
    snprintf (running, sizeof running, "%zu", options->queue_jobs + 1024);
    char *extra [] = {"--max-pending", pending, "--max-concurrent", running,
                      "--heartbeat", "500ms", "--missed-heartbeats", "3",
                      "--retention", "30d"};
    for (size_t at = 0; at < sizeof extra / sizeof extra [0]
                        && queue_options.broker_arg_count
                               < S_MAX_BROKER_ARGS; at++)
        queue_options.broker_args [queue_options.broker_arg_count++]
            = extra [at];
    //  The limit, in a config file of its own
    static char config [400];
    if (options->queue_limit) {
        snprintf (config, sizeof config, "%s/queue-broker.yaml", s_tmpdir);
        FILE *file = fopen (config, "w");
        if (!file) {
            s_say ("cannot write %s", config);
            return 1;
        }
        fprintf (file, "limits:\n  test.echo: %zu\n", options->queue_limit);
        fclose (file);
        if (queue_options.broker_arg_count + 2 <= S_MAX_BROKER_ARGS) {
            queue_options.broker_args [queue_options.broker_arg_count++]
                = "--config";
            queue_options.broker_args [queue_options.broker_arg_count++]
                = config;
        }
    }
    s_queue_run_t run;
    memset (&run, 0, sizeof run);
    run.jobs = options->queue_jobs;
    run.agents = options->queue_agents;
    run.doomed = options->queue_killed;
    run.limit = options->queue_limit;
    run.limit_running = -1;
    run.wait_p50_ms = run.wait_p99_ms = run.run_p50_ms = -1;
    run.reclaim_p50_ms = run.reclaim_max_ms = -1;
    run.swarm_transport = s_swarm_transport (options);
    s_queue_measure (&queue_options, &run);
    s_stop_all ();
    if (run.error [0] || options->keep)
        s_say ("logs kept in %s", s_tmpdir);
    else
        s_remove_tree (s_tmpdir);
    if (s_interrupted) {
        s_say ("interrupted: no results written");
        return 1;
    }
    s_queue_print (&run);
    const char *out = strcmp (options->out, "build/bench/results.json") == 0
                          ? "build/bench/queue.json" : options->out;
    if (s_queue_json (out, &run) != 0) {
        s_say ("cannot write %s", out);
        return 1;
    }
    s_say ("results in %s", out);
    return run.error [0] || run.lost || run.duplicates ? 1 : 0;
}

static void
s_queue_print (const s_queue_run_t *run)
{
    printf ("\nany-node queue: %zu jobs of one `test echo` step on `any`, "
            "%zu agents, %zu killed mid-lease\n", run->jobs, run->agents,
            run->doomed);
    if (run->limit)
        printf ("  limit               test.echo %zu fleet-wide (%" PRId64
                " running at the kill)\n", run->limit, run->limit_running);
    if (run->error [0])
        printf ("  error: %s\n", run->error);
    printf ("  accepted            %zu (%zu refused)\n", run->accepted,
            run->refused);
    printf ("  throughput          %.0f steps/s (%.1f s, first submit to "
            "last end)\n", run->steps_per_s, run->seconds);
    printf ("  wait p50 / p99      %" PRId64 " / %" PRId64 " ms (submit to "
            "start)\n", run->wait_p50_ms, run->wait_p99_ms);
    printf ("  run p50             %" PRId64 " ms\n", run->run_p50_ms);
    printf ("  held when killed    %" PRId64 " steps; %zu jobs ran on a "
            "killed agent first\n", run->held, run->reclaimed);
    printf ("  reclaim p50 / max   %.0f / %.0f ms (kill to the step's end "
            "elsewhere)\n", run->reclaim_p50_ms, run->reclaim_max_ms);
    printf ("  claims / reclaims   %" PRId64 " / %" PRId64 " (lease "
            "expirations %" PRId64 ")\n", run->claims, run->reclaims,
            run->lease_expirations);
    printf ("  lost / duplicated   %" PRIu64 " / %" PRIu64 "\n", run->lost,
            run->duplicates);
}

static int
s_queue_json (const char *path, const s_queue_run_t *run)
{
    char *copy = strdup (path);
    char *dir = dirname (copy);
    char command [600];
    snprintf (command, sizeof command, "mkdir -p '%s'", dir);
    int rc = system (command);
    free (copy);
    FILE *file = rc == 0 ? fopen (path, "w") : NULL;
    if (!file)
        return -1;
    fprintf (file,
             "{\"queue\": {\"jobs\": %zu, \"agents\": %zu, \"killed\": %zu, "
             "\"limit\": %zu, \"limit_running\": %" PRId64 ", "
             "\"accepted\": %zu, \"refused\": %zu, \"seconds\": %.3f, "
             "\"steps_per_s\": %.1f, \"wait_p50_ms\": %" PRId64 ", "
             "\"wait_p99_ms\": %" PRId64 ", \"run_p50_ms\": %" PRId64 ", "
             "\"held\": %" PRId64 ", \"reclaimed\": %zu, "
             "\"reclaim_p50_ms\": %.0f, \"reclaim_max_ms\": %.0f, "
             "\"claims\": %" PRId64 ", \"reclaims\": %" PRId64 ", "
             "\"lease_expirations\": %" PRId64 ", \"lost\": %" PRIu64 ", "
             "\"duplicated\": %" PRIu64 ", \"swarm_transport\": \"%s\", "
             "\"error\": \"%s\"}}\n",
             run->jobs, run->agents, run->doomed, run->limit,
             run->limit_running, run->accepted, run->refused,
             run->seconds, run->steps_per_s, run->wait_p50_ms,
             run->wait_p99_ms, run->run_p50_ms, run->held, run->reclaimed,
             run->reclaim_p50_ms, run->reclaim_max_ms, run->claims,
             run->reclaims, run->lease_expirations, run->lost,
             run->duplicates, run->swarm_transport, run->error);
    return fclose (file) == 0 ? 0 : -1;
}

//  ---------------------------------------------------------------------
//  HTTP figures (--http)
//
//  One broker with its HTTP face on loopback, a swarm of a few agents and
//  one real gridagent. Three figures, one after the other, with the
//  machine's load before each:
//
//    http submits    POST /api/v1/jobs with an operator token over
//                    HTTP_CONNECTIONS keep-alive connections for HTTP_S
//                    seconds (httpload): answers per second, latency
//    zmq submits     the same job.submit over one DEALER, HTTP_CONNECTIONS
//                    in flight, for as long: replies per second, latency
//    gridcli --wait  `gridcli job run --wait` of one `test echo` on the
//                    real agent, CLI_RUNS times: wall time of the whole
//                    command (start, connect, submit, watch, exit)
//
//  The submitted jobs run on one swarm agent; the broker works them off
//  between the phases, so each phase starts with an empty queue.

#define S_HTTP_AGENTS 10            //  Swarm agents of the --http run
#define S_HTTP_NODE "swarm-000001"  //  The node the submitted jobs run on

typedef struct {
    char error [256];               //  Why the run stopped, "" when it did not
    size_t connections;             //  Concurrent HTTP connections / ZeroMQ window
    double seconds;                 //  Each submit phase
    double http_per_s, http_p50_ms, http_p99_ms;
    uint64_t http_answers, http_ok;
    uint64_t http_reconnects;       //  Connections opened again (keep-alive lost)
    double zmq_per_s, zmq_p50_ms, zmq_p99_ms;
    uint64_t zmq_ok, zmq_refused;
    size_t cli_runs;
    double cli_p50_ms, cli_p99_ms, cli_max_ms;
    double load [3];                //  1-minute load before each phase
} s_http_run_t;

//  Runs ARGV with stdout to OUT (NULL: /dev/null) and stderr to LOG,
//  waits up to TIMEOUT_MS. Returns its exit code, or -1 (killed when it
//  ran too long).
static int
s_http_exec (char *const argv [], const char *out, const char *log,
             int timeout_ms)
{
    pid_t pid = fork ();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        int fd = open (out ? out : "/dev/null",
                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open (log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2 (fd, STDOUT_FILENO);
        if (err >= 0)
            dup2 (err, STDERR_FILENO);
        execv (argv [0], argv);
        _exit (127);
    }
    int64_t deadline = s_now_ms () + timeout_ms;
    int status = 0;
    while (waitpid (pid, &status, WNOHANG) == 0) {
        if (s_now_ms () > deadline || s_interrupted) {
            kill (pid, SIGKILL);
            waitpid (pid, &status, 0);
            return -1;
        }
        usleep (1000);
    }
    return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

//  The whole file at PATH (caller frees), or NULL.
static char *
s_http_slurp (const char *path)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return NULL;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    char buffer [4096];
    size_t got;
    while (out && (got = fread (buffer, 1, sizeof buffer, file)) > 0)
        fwrite (buffer, 1, got, out);
    fclose (file);
    if (out)
        fclose (out);
    return text;
}

//  The number after "KEY": in the JSON text TEXT, or -1.
static double
s_http_number (const char *text, const char *key)
{
    char quoted [64];
    snprintf (quoted, sizeof quoted, "\"%s\": ", key);
    const char *at = text ? strstr (text, quoted) : NULL;
    return at ? strtod (at + strlen (quoted), NULL) : -1;
}

//  status: nodes online, jobs pending and running. Returns 0 or -1.
static int
s_http_status (s_stage_t *stage, int64_t *online, int64_t *live)
{
    uint64_t seq = s_request (&stage->broker, "status", NULL);
    pv_doc_t *doc = s_peer_wait (&stage->broker, seq, S_CALL_TIMEOUT_MS);
    char code [64];
    const pv_t *data = s_ok_data (doc, code, sizeof code);
    if (data) {
        *online = s_int (pv_map_get (data, "nodes"), "online");
        const pv_t *jobs = pv_map_get (data, "jobs");
        *live = s_int (jobs, "pending") + s_int (jobs, "running");
    }
    pv_doc_destroy (&doc);
    return data ? 0 : -1;
}

//  Waits until ONLINE nodes are online and no job is pending or running.
static int
s_http_settle (s_stage_t *stage, int64_t online, int timeout_ms)
{
    int64_t deadline = s_now_ms () + timeout_ms;
    while (s_now_ms () < deadline && !s_interrupted) {
        int64_t now_online = 0, live = 0;
        if (s_http_status (stage, &now_online, &live) == 0
            && now_online >= online && live == 0)
            return 0;
        usleep (50 * 1000);
    }
    return -1;
}

//  token.add of an operator token into TOKEN. Returns 0 or -1.
static int
s_http_token (s_stage_t *stage, char *token, size_t token_len)
{
    char id [64];
    s_next_id (&stage->broker, id, sizeof id);
    pw_reset (stage->broker.writer);
    proto_request_begin (stage->broker.writer, "token.add", id, 2);
    pw_str (stage->broker.writer, "name");
    pw_str (stage->broker.writer, "bench");
    pw_str (stage->broker.writer, "role");
    pw_str (stage->broker.writer, "operator");
    s_peer_send (&stage->broker);
    pv_doc_t *doc = s_peer_wait (&stage->broker, stage->broker.seq,
                                 S_CALL_TIMEOUT_MS);
    char code [64];
    const pv_t *data = s_ok_data (doc, code, sizeof code);
    char *text = data ? pv_strdup (pv_map_get (data, "token")) : NULL;
    if (text)
        snprintf (token, token_len, "%s", text);
    free (text);
    pv_doc_destroy (&doc);
    return text ? 0 : -1;
}

//  The HTTP submit phase: httpload against the face on PORT.
static void
s_http_submits (s_stage_t *stage, const s_options_t *options, int port,
                const char *token, s_http_run_t *run)
{
    char body [400], out [400], log [400], url [128], auth [400], conns [32],
         seconds [32], program [600];
    snprintf (body, sizeof body, "%s/job.json", stage->dir);
    snprintf (out, sizeof out, "%s/httpload.json", stage->dir);
    snprintf (log, sizeof log, "%s/httpload.log", stage->dir);
    FILE *file = fopen (body, "w");
    if (!file) {
        snprintf (run->error, sizeof run->error, "cannot write job.json");
        return;
    }
    fprintf (file, "{\"target\": \"node:%s\", \"tasks\": [{\"backend\": "
             "\"test\", \"action\": \"echo\", \"params\": {\"msg\": "
             "\"bench\"}}]}\n", S_HTTP_NODE);
    fclose (file);
    snprintf (url, sizeof url, "http://127.0.0.1:%d/api/v1/jobs", port);
    snprintf (auth, sizeof auth, "Authorization: Bearer %s", token);
    snprintf (conns, sizeof conns, "%zu", options->http_connections);
    snprintf (seconds, sizeof seconds, "%.3f", options->http_s);
    snprintf (program, sizeof program, "%s", options->httpload);
    char *argv [] = {program, "--url", url, "--method", "POST", "--header",
                     auth, "--header", "Content-Type: application/json",
                     "--body-file", body, "--connections", conns,
                     "--duration", seconds, "--json", NULL};
    int code = s_http_exec (argv, out, log,
                            (int) (options->http_s * 1000) + 60000);
    char *json = s_http_slurp (out);
    run->http_answers = (uint64_t) s_http_number (json, "answers");
    run->http_ok = (uint64_t) s_http_number (json, "ok");
    run->http_reconnects = (uint64_t) s_http_number (json, "reconnects");
    run->http_per_s = s_http_number (json, "per_second");
    run->http_p50_ms = s_http_number (json, "p50_ms");
    run->http_p99_ms = s_http_number (json, "p99_ms");
    if (code != 0 || !json || run->http_ok == 0)
        snprintf (run->error, sizeof run->error, "httpload: %s (see "
                  "httpload.log)", code == 1 ? "some answers were not 2xx"
                                             : "it failed");
    free (json);
}

//  The ZeroMQ submit phase: job.submit pipelined over one DEALER, as many
//  in flight as HTTP has connections, for as long.
static void
s_http_zmq_submits (s_stage_t *stage, const s_options_t *options,
                    s_http_run_t *run)
{
    size_t room = 65536, count = 0, in_flight = 0;
    double *latency = (double *) calloc (room, sizeof (double));
    zhashx_t *sent = zhashx_new ();     //  seq -> submit time (us, boxed)
    zhashx_set_destructor (sent, (zhashx_destructor_fn *) zstr_free);
    assert (latency && sent);
    double start_us = s_now_us ();
    double end_us = start_us + options->http_s * 1e6;
    double last_us = start_us;
    char key [32];
    while (!s_interrupted && (s_now_us () < end_us || in_flight > 0)
           && s_now_us () < end_us + 60e6) {
        while (s_now_us () < end_us && in_flight < options->http_connections) {
            uint64_t seq = s_submit (&stage->broker, "node", S_HTTP_NODE,
                                     "test", "echo", "bench");
            snprintf (key, sizeof key, "%" PRIu64, seq);
            zhashx_insert (sent, key, zsys_sprintf ("%.0f", s_now_us ()));
            in_flight++;
        }
        pv_doc_t *doc = s_peer_recv (&stage->broker, 10);
        if (!doc)
            continue;
        snprintf (key, sizeof key, "%" PRIu64,
                  s_reply_seq (&stage->broker, pv_doc_root (doc)));
        char *at = (char *) zhashx_lookup (sent, key);
        if (at) {
            double now_us = s_now_us ();
            char code [64];
            if (s_ok_data (doc, code, sizeof code)) {
                if (count == room) {
                    room *= 2;
                    latency = (double *) realloc (latency,
                                                  room * sizeof (double));
                    assert (latency);
                }
                latency [count++] = (now_us - atof (at)) / 1000.0;
                last_us = now_us;
            }
            else
                run->zmq_refused++;
            zhashx_delete (sent, key);
            in_flight--;
        }
        pv_doc_destroy (&doc);
    }
    if (in_flight && !run->error [0])
        snprintf (run->error, sizeof run->error,
                  "%zu ZeroMQ submits got no reply", in_flight);
    qsort (latency, count, sizeof (double), s_compare_doubles);
    run->zmq_ok = count;
    run->zmq_per_s = last_us > start_us
                         ? (double) count / ((last_us - start_us) / 1e6) : -1;
    run->zmq_p50_ms = s_percentile (latency, count, 50);
    run->zmq_p99_ms = s_percentile (latency, count, 99);
    zhashx_destroy (&sent);
    free (latency);
}

//  The gridcli --wait phase: one real gridagent, CLI_RUNS one-node jobs.
static void
s_http_cli_wait (s_stage_t *stage, const s_options_t *options,
                 s_http_run_t *run)
{
    char program [600], state [400], log [400], cli [600], cli_log [400];
    snprintf (program, sizeof program, "%s/gridagent", options->bin);
    snprintf (state, sizeof state, "%s/agent-state", stage->dir);
    snprintf (log, sizeof log, "%s/agent.log", stage->dir);
    snprintf (cli, sizeof cli, "%s/gridcli", options->bin);
    snprintf (cli_log, sizeof cli_log, "%s/gridcli.log", stage->dir);
    char *agent [] = {program, "--id", "bench-agent", "--state-dir", state,
                      "--broker", stage->agents_ep, "--publish",
                      stage->publish_ep, "--insecure", NULL};
    stage->agent_pid = s_spawn (agent, log);
    if (stage->agent_pid < 0
        || s_http_settle (stage, S_HTTP_AGENTS + 1, 30000) != 0) {
        snprintf (run->error, sizeof run->error,
                  "the real agent did not come online (see agent.log)");
        return;
    }
    double *walls = (double *) calloc (options->cli_runs, sizeof (double));
    assert (walls);
    size_t done = 0;
    for (size_t at = 0; at < options->cli_runs && !s_interrupted; at++) {
        char *argv [] = {cli, "--broker", stage->client_ep, "--insecure",
                         "job", "run", "--target", "node:bench-agent", "test",
                         "echo", "--msg", "bench", "--wait", NULL};
        double start_us = s_now_us ();
        int code = s_http_exec (argv, NULL, cli_log, 30000);
        if (code != 0) {
            snprintf (run->error, sizeof run->error,
                      "gridcli --wait exited %d (see gridcli.log)", code);
            break;
        }
        walls [done++] = (s_now_us () - start_us) / 1000.0;
    }
    qsort (walls, done, sizeof (double), s_compare_doubles);
    run->cli_runs = done;
    run->cli_p50_ms = s_percentile (walls, done, 50);
    run->cli_p99_ms = s_percentile (walls, done, 99);
    run->cli_max_ms = done ? walls [done - 1] : -1;
    free (walls);
}

static void
s_http_measure (const s_options_t *options, s_http_run_t *run)
{
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s", s_tmpdir);
    int port = s_free_port ();
    static char listen [64];
    snprintf (listen, sizeof listen, "127.0.0.1:%d", port);
    //  Every submit is admitted: the figure is what the face takes
    s_options_t http_options = *options;
    char *extra [] = {"--http", listen, "--max-pending", "10000000"};
    for (size_t at = 0; at < sizeof extra / sizeof extra [0]
                        && http_options.broker_arg_count
                               < S_MAX_BROKER_ARGS; at++)
        http_options.broker_args [http_options.broker_arg_count++]
            = extra [at];
    s_say ("http: starting a broker with its HTTP face on %s, %d swarm "
           "agents", listen, S_HTTP_AGENTS);
    char token [128];
    if (port < 0 || s_stage_broker (&stage, &http_options, "http") != 0
        || s_stage_swarm (&stage, &http_options, S_HTTP_AGENTS) != 0
        || s_http_settle (&stage, S_HTTP_AGENTS, 30000) != 0
        || s_http_token (&stage, token, sizeof token) != 0) {
        snprintf (run->error, sizeof run->error,
                  "the broker, its HTTP face or the swarm did not start (see "
                  "broker.log)");
        s_stage_stop (&stage, true);
        return;
    }
    run->load [0] = s_load_average ();
    s_say ("http: %zu connections for %.1f s (load %.2f)",
           options->http_connections, options->http_s, run->load [0]);
    s_http_submits (&stage, options, port, token, run);
    if (!run->error [0] && s_http_settle (&stage, 0, 300000) != 0)
        snprintf (run->error, sizeof run->error,
                  "the jobs submitted over HTTP did not end");
    run->load [1] = s_load_average ();
    if (!run->error [0]) {
        s_say ("zmq: %zu in flight for %.1f s (load %.2f)",
               options->http_connections, options->http_s, run->load [1]);
        s_http_zmq_submits (&stage, options, run);
    }
    if (!run->error [0] && s_http_settle (&stage, 0, 300000) != 0)
        snprintf (run->error, sizeof run->error,
                  "the jobs submitted over ZeroMQ did not end");
    run->load [2] = s_load_average ();
    if (!run->error [0]) {
        s_say ("gridcli --wait: %zu runs on a real agent (load %.2f)",
               options->cli_runs, run->load [2]);
        s_http_cli_wait (&stage, options, run);
    }
    s_stage_stop (&stage, options->keep || run->error [0]);
}

static void
s_http_print (const s_http_run_t *run)
{
    printf ("\nHTTP face: %zu keep-alive connections (ZeroMQ: as many "
            "requests in flight on one DEALER), %.1f s each\n",
            run->connections, run->seconds);
    if (run->error [0])
        printf ("  error: %s\n", run->error);
    printf ("  http submits        %.0f jobs/s (%" PRIu64 " of %" PRIu64
            " answers 2xx, %" PRIu64 " connections reopened); latency p50 "
            "%.2f ms, p99 %.2f ms; load %.2f\n", run->http_per_s,
            run->http_ok, run->http_answers, run->http_reconnects,
            run->http_p50_ms, run->http_p99_ms, run->load [0]);
    printf ("  zmq submits         %.0f jobs/s (%" PRIu64 " ok, %" PRIu64
            " refused); latency p50 %.2f ms, p99 %.2f ms; load %.2f\n",
            run->zmq_per_s, run->zmq_ok, run->zmq_refused, run->zmq_p50_ms,
            run->zmq_p99_ms, run->load [1]);
    printf ("  gridcli --wait      p50 %.1f ms, p99 %.1f ms, max %.1f ms "
            "over %zu one-node jobs; load %.2f\n", run->cli_p50_ms,
            run->cli_p99_ms, run->cli_max_ms, run->cli_runs, run->load [2]);
}

static int
s_http_json (const char *path, const s_http_run_t *run)
{
    char *copy = strdup (path);
    char command [600];
    snprintf (command, sizeof command, "mkdir -p '%s'", dirname (copy));
    int rc = system (command);
    free (copy);
    FILE *file = rc == 0 ? fopen (path, "w") : NULL;
    if (!file)
        return -1;
    char cpu [256], kernel [256];
    long cores = 0;
    double mem_gib = 0;
    s_machine (cpu, sizeof cpu, &cores, &mem_gib, kernel, sizeof kernel);
    fprintf (file,
             "{\"http\": {\"connections\": %zu, \"seconds\": %.3f, "
             "\"http_submits_per_s\": %.1f, \"http_answers\": %" PRIu64 ", "
             "\"http_ok\": %" PRIu64 ", \"http_reconnects\": %" PRIu64 ", "
             "\"http_p50_ms\": %.3f, "
             "\"http_p99_ms\": %.3f, \"zmq_submits_per_s\": %.1f, "
             "\"zmq_ok\": %" PRIu64 ", \"zmq_refused\": %" PRIu64 ", "
             "\"zmq_p50_ms\": %.3f, \"zmq_p99_ms\": %.3f, "
             "\"cli_wait_runs\": %zu, \"cli_wait_p50_ms\": %.1f, "
             "\"cli_wait_p99_ms\": %.1f, \"cli_wait_max_ms\": %.1f, "
             "\"load_http\": %.2f, \"load_zmq\": %.2f, \"load_cli\": %.2f, "
             "\"cpu\": \"%s\", \"cores\": %ld, \"error\": \"%s\"}}\n",
             run->connections, run->seconds, run->http_per_s,
             run->http_answers, run->http_ok, run->http_reconnects,
             run->http_p50_ms,
             run->http_p99_ms, run->zmq_per_s, run->zmq_ok, run->zmq_refused,
             run->zmq_p50_ms, run->zmq_p99_ms, run->cli_runs,
             run->cli_p50_ms, run->cli_p99_ms, run->cli_max_ms,
             run->load [0], run->load [1], run->load [2], cpu, cores,
             run->error);
    return fclose (file) == 0 ? 0 : -1;
}

//  gridbench --http. Returns the exit code.
static int
s_http_main (const s_options_t *options)
{
    if (access (options->httpload, X_OK) != 0) {
        s_say ("cannot find %s (build it, or use --httpload)",
               options->httpload);
        return 2;
    }
    if (options->curve)
        s_say ("--http runs in plaintext: --curve is not used");
    s_http_run_t run;
    memset (&run, 0, sizeof run);
    run.connections = options->http_connections;
    run.seconds = options->http_s;
    run.http_per_s = run.http_p50_ms = run.http_p99_ms = -1;
    run.zmq_per_s = run.zmq_p50_ms = run.zmq_p99_ms = -1;
    run.cli_p50_ms = run.cli_p99_ms = run.cli_max_ms = -1;
    s_http_measure (options, &run);
    s_stop_all ();
    if (run.error [0] || options->keep)
        s_say ("logs kept in %s", s_tmpdir);
    else
        s_remove_tree (s_tmpdir);
    if (s_interrupted) {
        s_say ("interrupted: no results written");
        return 1;
    }
    s_http_print (&run);
    const char *out = strcmp (options->out, "build/bench/results.json") == 0
                          ? "build/bench/http.json" : options->out;
    if (s_http_json (out, &run) != 0) {
        s_say ("cannot write %s", out);
        return 1;
    }
    s_say ("results in %s", out);
    return run.error [0] ? 1 : 0;
}

//  ---------------------------------------------------------------------
//  Live output (--live): the broker's cost of streamed output, and how
//  much the streams slow the results of other jobs

#define S_LIVE_GROUP "stream"       //  The streaming agents' group
#define S_LIVE_OTHER "other"        //  The other agents' prefix and group
#define S_LIVE_GOAL_SLOWDOWN 1.10   //  Other jobs' results at most 10 %
                                    //  slower while the fleet streams
#define S_LIVE_SETTLE_MS 1000       //  Streams start (and end) this long
                                    //  outside the measured window

//  Figures of the --live run (negative: not measured).
typedef struct {
    char error [256];
    size_t nodes;                   //  Streaming agents
    size_t others;                  //  Agents of the other jobs
    double stream_s;                //  How long each stream lasts
    int64_t interval_ms;            //  One line every
    bool aligned;                   //  The agents' live rounds line up
    uint64_t lines;                 //  Lines per stream
    uint64_t bytes_expected;        //  Bytes of all the streams
    uint64_t live_bytes;            //  Sent while the tasks ran
    uint64_t output_bytes;          //  Sent in all (live, then the rest)
    uint64_t acked_bytes;           //  ...and acknowledged (committed)
    uint64_t live_pieces, pieces, acked_pieces;
    uint64_t lost;                  //  Stream cells not a success
    double stream_wall_s;           //  Submit to the last result_ack
    double cpu_s;                   //  Broker CPU over it
    double cpu_s_per_mib;
    double mib_per_s;
    double pieces_per_s;
    double cpu_idle_percent;        //  Broker CPU, other jobs alone
    double cpu_stream_percent;      //  ...and while the fleet streams
    double cpu_swarm_percent;       //  The streaming swarm's, streams alone
    double wait_s;                  //  The broker's threads waiting for a
                                    //  CPU over the streams alone
    size_t other_idle, other_streaming;     //  Other jobs measured
    double idle_p50_ms, idle_p99_ms;        //  Before and after the
                                            //  streams together
    double before_p50_ms, after_p50_ms;     //  ...each window's own
    double streaming_p50_ms, streaming_p99_ms;
    double slowdown_ratio;          //  p50 streaming / p50 idle
    double slowdown_p99_ratio;
    double load [2];                //  Before the idle phase, at the end
} s_live_run_t;

//  Writes a job.submit of `test lines` (COUNT lines, one every
//  INTERVAL_MS) on GROUP. Returns the request number.
static uint64_t
s_live_submit (s_peer_t *broker, const char *group, uint64_t count,
               int64_t interval_ms)
{
    char id [64], count_text [32], interval_text [32];
    snprintf (count_text, sizeof count_text, "%" PRIu64, count);
    snprintf (interval_text, sizeof interval_text, "%" PRId64 "ms",
              interval_ms);
    s_next_id (broker, id, sizeof id);
    pw_t *writer = broker->writer;
    pw_reset (writer);
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, 2);
    pw_str (writer, "scope");
    pw_str (writer, "group");
    pw_str (writer, "value");
    pw_str (writer, group);
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, "test");
    pw_str (writer, "action");
    pw_str (writer, "lines");
    pw_str (writer, "params");
    pw_map (writer, 2);
    pw_str (writer, "count");
    pw_str (writer, count_text);
    pw_str (writer, "interval");
    pw_str (writer, interval_text);
    s_peer_send (broker);
    return broker->seq;
}

//  The job id of a job.submit's reply to SEQ, or NULL (CODE says why).
static char *
s_live_job (s_peer_t *broker, uint64_t seq, char *code, size_t code_len)
{
    pv_doc_t *doc = s_peer_wait (broker, seq, S_CALL_TIMEOUT_MS);
    snprintf (code, code_len, "no answer");
    const pv_t *data = s_ok_data (doc, code, code_len);
    char *job = data ? pv_strdup (pv_map_get (data, "job")) : NULL;
    pv_doc_destroy (&doc);
    return job;
}

//  Waits until swarm process AT holds COUNT result_acks of JOB. Returns
//  0, or -1 past TIMEOUT_MS.
static int
s_live_wait (s_stage_t *stage, size_t at, const char *job, size_t count,
             int timeout_ms)
{
    s_peer_t *control = &stage->swarms [at].control;
    int64_t deadline = s_now_ms () + timeout_ms;
    while (!s_interrupted && s_now_ms () < deadline) {
        uint64_t seq = s_control (control, "watch", job, count);
        int64_t left = deadline - s_now_ms ();
        pv_doc_t *doc = s_peer_wait (control, seq, left < S_REWATCH_MS
                                                       ? (int) left
                                                       : S_REWATCH_MS);
        bool done = doc && s_int (pv_doc_root (doc), "acked")
                               >= (int64_t) count;
        pv_doc_destroy (&doc);
        if (done)
            return 0;
    }
    return -1;
}

//  One-node `test echo` jobs on the other agents (swarm process OTHER),
//  one after the other, from now until END_MS: the round trip of each,
//  from its submit until the swarm holds its result_ack, into *SAMPLES
//  (grown as needed; *COUNT of them). Returns 0, or -1 with RUN's error
//  set.
static int
s_live_others (s_stage_t *stage, size_t other, int64_t end_ms,
               double **samples, size_t *count, s_live_run_t *run)
{
    size_t room = 1024;
    *samples = (double *) malloc (room * sizeof (double));
    assert (*samples);
    *count = 0;
    size_t nodes = stage->swarms [other].count;
    while (!s_interrupted && s_now_ms () < end_ms) {
        char node [64], code [64];
        snprintf (node, sizeof node, "%s-%06zu", S_LIVE_OTHER,
                  *count % nodes + 1);
        double start_us = s_now_us ();
        uint64_t seq = s_submit (&stage->broker, "node", node, "test", "echo",
                                 "bench");
        char *job = s_live_job (&stage->broker, seq, code, sizeof code);
        if (!job) {
            snprintf (run->error, sizeof run->error,
                      "a job on %s was refused: %s", node, code);
            return -1;
        }
        int rc = s_live_wait (stage, other, job, 1, 30000);
        free (job);
        if (rc != 0) {
            snprintf (run->error, sizeof run->error,
                      "a job on %s did not end within 30 s", node);
            return -1;
        }
        if (*count == room) {
            room *= 2;
            *samples = (double *) realloc (*samples, room * sizeof (double));
            assert (*samples);
        }
        (*samples) [(*count)++] = (s_now_us () - start_us) / 1000.0;
    }
    qsort (*samples, *count, sizeof (double), s_compare_doubles);
    return 0;
}

//  The sum of counter KEY over swarm processes FROM .. TO - 1.
static int64_t
s_live_sum (s_stage_t *stage, size_t from, size_t to, const char *key)
{
    int64_t sum = 0;
    for (size_t at = from; at < to; at++) {
        pv_doc_t *doc = s_swarm_stats (&stage->swarms [at].control);
        if (doc)
            sum += s_int (pv_doc_root (doc), key);
        pv_doc_destroy (&doc);
    }
    return sum;
}

//  How long the threads of PID have waited for a CPU while runnable, in
//  ms (the second figure of each thread's schedstat): on a machine whose
//  other work takes the cores, the broker's figures are its share.
static double
s_cpu_wait_ms (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/task", (int) pid);
    double ms = 0;
    DIR *dir = opendir (path);
    struct dirent *entry;
    while (dir && (entry = readdir (dir))) {
        if (entry->d_name [0] == '.')
            continue;
        char file_path [300];
        snprintf (file_path, sizeof file_path, "/proc/%d/task/%s/schedstat",
                  (int) pid, entry->d_name);
        FILE *file = fopen (file_path, "r");
        unsigned long long run_ns = 0, wait_ns = 0;
        if (file && fscanf (file, "%llu %llu", &run_ns, &wait_ns) == 2)
            ms += (double) wait_ns / 1e6;
        if (file)
            fclose (file);
    }
    if (dir)
        closedir (dir);
    return ms;
}

//  Bytes of "line 1\n" .. "line LINES\n", what `test lines` prints.
static uint64_t
s_live_lines_len (uint64_t lines)
{
    uint64_t total = 0;
    uint64_t low = 1;
    for (uint64_t digits = 1; low <= lines; digits++, low *= 10) {
        uint64_t high = low * 10 - 1 < lines ? low * 10 - 1 : lines;
        total += (high - low + 1) * (5 + digits + 1);
    }
    return total;
}

//  Waits (up to 10 s) until the streaming swarm processes (0 ..
//  STREAMERS - 1) hold the output_acks of every piece they sent, then
//  reads their output counters into RUN.
static void
s_live_counters (s_stage_t *stage, size_t streamers, s_live_run_t *run)
{
    int64_t until = s_now_ms () + 10000;
    do {
        run->acked_bytes = (uint64_t) s_live_sum (stage, 0, streamers,
                                                  "output_acked_bytes");
        run->output_bytes = (uint64_t) s_live_sum (stage, 0, streamers,
                                                   "output_bytes");
        if (run->acked_bytes >= run->output_bytes)
            break;
        usleep (50 * 1000);
    } while (s_now_ms () < until && !s_interrupted);
    run->live_bytes = (uint64_t) s_live_sum (stage, 0, streamers,
                                             "live_bytes");
    run->pieces = (uint64_t) s_live_sum (stage, 0, streamers, "outputs");
    run->live_pieces = (uint64_t) s_live_sum (stage, 0, streamers,
                                              "live_outputs");
    run->acked_pieces = (uint64_t) s_live_sum (stage, 0, streamers,
                                               "output_acks");
}

//  Reads JOB back: every streaming cell a success at its first attempt,
//  else counted in RUN's lost.
static void
s_live_verify (s_stage_t *stage, const char *job, s_live_run_t *run)
{
    s_run_t check;
    s_run_init (&check, run->nodes);
    char (*jobs) [JOB_ID_LEN + 1]
        = (char (*) [JOB_ID_LEN + 1]) calloc (1, JOB_ID_LEN + 1);
    assert (jobs);
    snprintf (jobs [0], JOB_ID_LEN + 1, "%s", job);
    s_verify (stage, jobs, 1, run->nodes, &check);
    free (jobs);
    run->lost += check.lost + check.duplicates;
}

//  One `test lines` job on every streaming agent (swarm processes 0 ..
//  STREAMERS - 1), from its submit until the swarm holds all its
//  result_acks: its span into *WALL_S, the broker's CPU over it into
//  *CPU_S and the streaming swarm's into *SWARM_CPU_S. With SAMPLES,
//  the other jobs (on swarm process OTHER) run from S_LIVE_SETTLE_MS
//  after the submit for WINDOW_MS, their round trips into *SAMPLES
//  (*COUNT of them) and the broker's share of a core over that window
//  into RUN. Returns 0, or -1 with RUN's error set.
static int
s_live_stream (s_stage_t *stage, size_t streamers, size_t other,
               int64_t window_ms, double **samples, size_t *count,
               double *wall_s, double *cpu_s, double *swarm_cpu_s,
               s_live_run_t *run)
{
    double cpu_ms = s_cpu_ms (stage->broker_pid), swarm_ms = 0;
    double wait_ms = s_cpu_wait_ms (stage->broker_pid);
    for (size_t at = 0; at < streamers; at++)
        swarm_ms += s_cpu_ms (stage->swarms [at].pid);
    double submit_us = s_now_us ();
    char code [64];
    char *job = s_live_job (&stage->broker,
                            s_live_submit (&stage->broker, S_LIVE_GROUP,
                                           run->lines, run->interval_ms),
                            code, sizeof code);
    if (!job) {
        snprintf (run->error, sizeof run->error,
                  "the streaming job was refused: %s", code);
        return -1;
    }
    int rc = 0;
    if (samples) {
        int64_t begin_ms = s_now_ms () + S_LIVE_SETTLE_MS;
        while (!s_interrupted && s_now_ms () < begin_ms)
            usleep (S_POLL_MS * 1000);
        double window_cpu_ms = s_cpu_ms (stage->broker_pid);
        int64_t window_start_ms = s_now_ms ();
        rc = s_live_others (stage, other, begin_ms + window_ms, samples,
                            count, run);
        run->cpu_stream_percent = (s_cpu_ms (stage->broker_pid)
                                   - window_cpu_ms) * 100.0
                                  / (double) (s_now_ms () - window_start_ms);
    }
    int timeout_ms = (int) (run->stream_s * 1000) + 60000
                     + (int) run->nodes * 10;
    for (size_t at = 0; rc == 0 && at < streamers; at++)
        if (s_live_wait (stage, at, job, stage->swarms [at].count,
                         timeout_ms) != 0) {
            snprintf (run->error, sizeof run->error,
                      "the streaming job %s did not end in time", job);
            rc = -1;
        }
    if (rc == 0) {
        *wall_s = (s_now_us () - submit_us) / 1e6;
        *cpu_s = (s_cpu_ms (stage->broker_pid) - cpu_ms) / 1000.0;
        if (!samples)
            run->wait_s = (s_cpu_wait_ms (stage->broker_pid) - wait_ms)
                          / 1000.0;
        double swarm_end_ms = 0;
        for (size_t at = 0; at < streamers; at++)
            swarm_end_ms += s_cpu_ms (stage->swarms [at].pid);
        *swarm_cpu_s = (swarm_end_ms - swarm_ms) / 1000.0;
        s_live_verify (stage, job, run);
    }
    free (job);
    return rc;
}

//  The --live run: a broker, a swarm of OPTIONS->live_nodes agents that
//  announce live_output, and one of OPTIONS->live_others agents. First
//  the other agents alone run one-node echo jobs, one after the other,
//  for the measured window; then every streaming agent runs one `test
//  lines` job (a line every interval for the stream's length, sent live)
//  alone: the broker's CPU over it and the bytes the swarm had
//  acknowledged give the cost per MiB; then a second such job, with the
//  echo jobs running again within it; then the echo jobs alone once
//  more. The round trips within the stream against those of both windows
//  alone give the slowdown.
static void
s_live_measure (const s_options_t *options, s_live_run_t *run)
{
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s", s_tmpdir);
    s_options_t streaming = *options, others = *options;
    char *stream_args [] = {"--live-output", "--groups", S_LIVE_GROUP,
                            "--live-aligned"};
    char *other_args [] = {"--prefix", S_LIVE_OTHER, "--groups",
                           S_LIVE_OTHER};
    size_t stream_arg_count = run->aligned ? 4 : 3;
    for (size_t at = 0;
         at < stream_arg_count && streaming.swarm_arg_count < 16; at++)
        streaming.swarm_args [streaming.swarm_arg_count++] = stream_args [at];
    for (size_t at = 0; at < 4 && others.swarm_arg_count < 16; at++)
        others.swarm_args [others.swarm_arg_count++] = other_args [at];
    s_say ("live: starting a broker, %zu streaming agents and %zu others",
           run->nodes, run->others);
    if (s_stage_broker (&stage, options, "live") != 0
        || s_stage_swarm (&stage, &streaming, run->nodes) != 0) {
        snprintf (run->error, sizeof run->error,
                  "the broker or the streaming swarm did not start (see "
                  "broker.log)");
        s_stage_stop (&stage, true);
        return;
    }
    size_t streamers = stage.swarm_count;
    if (s_stage_swarm (&stage, &others, run->others) != 0
        || stage.swarm_count != streamers + 1) {
        snprintf (run->error, sizeof run->error,
                  "the other agents' swarm did not start");
        s_stage_stop (&stage, true);
        return;
    }
    size_t other = streamers;
    int64_t deadline = s_now_ms () + 30000 + (int64_t) run->nodes * 3;
    while (!s_interrupted
           && s_live_sum (&stage, 0, stage.swarm_count, "welcomed")
                  < (int64_t) (run->nodes + run->others)) {
        if (s_now_ms () > deadline || !s_swarms_alive (&stage)
            || !s_alive (stage.broker_pid)) {
            snprintf (run->error, sizeof run->error,
                      "not every agent registered in time");
            s_stage_stop (&stage, true);
            return;
        }
        usleep (S_POLL_MS * 1000);
    }
    //  The measured window: the stream less a settling time at each end
    int64_t window_ms = (int64_t) (run->stream_s * 1000)
                        - 2 * S_LIVE_SETTLE_MS;
    if (window_ms < 500)
        window_ms = 500;
    run->load [0] = s_load_average ();

    //  The other jobs alone, after half a second of them unmeasured
    //  (the first jobs of a fresh broker and swarm are slower)
    s_say ("live: other jobs alone for %.1f s (load %.2f)",
           (double) window_ms / 1000.0, run->load [0]);
    double *idle = NULL, *busy = NULL;
    size_t idle_count = 0, busy_count = 0;
    int rc = s_live_others (&stage, other, s_now_ms () + 500, &idle,
                            &idle_count, run);
    free (idle);
    idle = NULL;
    double cpu_ms = s_cpu_ms (stage.broker_pid);
    int64_t start_ms = s_now_ms ();
    if (rc == 0)
        rc = s_live_others (&stage, other, start_ms + window_ms, &idle,
                            &idle_count, run);
    run->cpu_idle_percent = (s_cpu_ms (stage.broker_pid) - cpu_ms) * 100.0
                            / (double) (s_now_ms () - start_ms);

    //  The streams alone: the cost per MiB
    if (rc == 0) {
        s_say ("live: %zu agents stream %" PRIu64 " lines, one every %"
               PRId64 " ms", run->nodes, run->lines, run->interval_ms);
        double swarm_cpu_s = 0;
        rc = s_live_stream (&stage, streamers, other, 0, NULL, NULL,
                            &run->stream_wall_s, &run->cpu_s, &swarm_cpu_s,
                            run);
        if (rc == 0) {
            s_live_counters (&stage, streamers, run);
            double mib = (double) run->acked_bytes / 1048576.0;
            run->cpu_s_per_mib = mib > 0 ? run->cpu_s / mib : -1;
            run->mib_per_s = mib / run->stream_wall_s;
            run->pieces_per_s = (double) run->acked_pieces
                                / run->stream_wall_s;
            run->cpu_swarm_percent = swarm_cpu_s * 100.0
                                     / run->stream_wall_s;
            if (run->acked_bytes != run->bytes_expected)
                snprintf (run->error, sizeof run->error,
                          "the broker acknowledged %" PRIu64 " bytes of "
                          "output, %" PRIu64 " expected", run->acked_bytes,
                          run->bytes_expected);
        }
    }
    //  ...and again, with the other jobs within
    double *after = NULL;
    size_t after_count = 0;
    if (rc == 0 && !run->error [0]) {
        s_say ("live: again, with the other jobs for %.1f s",
               (double) window_ms / 1000.0);
        double wall_s = 0, cpu_s = 0, swarm_cpu_s = 0;
        uint64_t first_bytes = run->acked_bytes;
        rc = s_live_stream (&stage, streamers, other, window_ms, &busy,
                            &busy_count, &wall_s, &cpu_s, &swarm_cpu_s, run);
        if (rc == 0) {
            s_live_run_t again = *run;
            s_live_counters (&stage, streamers, &again);
            if (again.acked_bytes - first_bytes != run->bytes_expected)
                snprintf (run->error, sizeof run->error,
                          "the broker acknowledged %" PRIu64 " bytes of "
                          "output in the second stream, %" PRIu64
                          " expected", again.acked_bytes - first_bytes,
                          run->bytes_expected);
        }
    }
    //  The other jobs alone once more, after the streams: the baseline is
    //  both windows, so that a machine whose load drifts over the run
    //  moves it as it moves the streaming window between them
    if (rc == 0 && !run->error [0]) {
        s_say ("live: other jobs alone again for %.1f s",
               (double) window_ms / 1000.0);
        rc = s_live_others (&stage, other, s_now_ms () + window_ms, &after,
                            &after_count, run);
    }
    run->before_p50_ms = s_percentile (idle, idle_count, 50);
    run->after_p50_ms = s_percentile (after, after_count, 50);
    if (after_count) {
        idle = (double *) realloc (idle, (idle_count + after_count)
                                             * sizeof (double));
        assert (idle);
        memcpy (idle + idle_count, after, after_count * sizeof (double));
        idle_count += after_count;
        qsort (idle, idle_count, sizeof (double), s_compare_doubles);
    }
    free (after);
    run->other_idle = idle_count;
    run->other_streaming = busy_count;
    run->idle_p50_ms = s_percentile (idle, idle_count, 50);
    run->idle_p99_ms = s_percentile (idle, idle_count, 99);
    run->streaming_p50_ms = s_percentile (busy, busy_count, 50);
    run->streaming_p99_ms = s_percentile (busy, busy_count, 99);
    if (run->idle_p50_ms > 0 && run->streaming_p50_ms > 0)
        run->slowdown_ratio = run->streaming_p50_ms / run->idle_p50_ms;
    if (run->idle_p99_ms > 0 && run->streaming_p99_ms > 0)
        run->slowdown_p99_ratio = run->streaming_p99_ms / run->idle_p99_ms;
    run->load [1] = s_load_average ();
    free (idle);
    free (busy);
    s_stage_stop (&stage, options->keep || run->error [0]);
}

static void
s_live_print (const s_live_run_t *run)
{
    printf ("\nLive output: %zu agents stream %" PRIu64 " lines each (one "
            "every %" PRId64 " ms, %.1f s; live rounds %s), alone, then "
            "again beside one-node echo jobs on %zu other agents\n",
            run->nodes, run->lines, run->interval_ms, run->stream_s,
            run->aligned ? "lined up" : "each agent's own", run->others);
    if (run->error [0])
        printf ("  error: %s\n", run->error);
    printf ("  streamed            %.2f MiB in %" PRIu64 " pieces (%.0f %% "
            "live), %.2f MiB/s, %.0f pieces/s; lost cells %" PRIu64 "\n",
            (double) run->acked_bytes / 1048576.0, run->acked_pieces,
            run->output_bytes ? 100.0 * (double) run->live_bytes
                                    / (double) run->output_bytes
                              : 0.0,
            run->mib_per_s, run->pieces_per_s, run->lost);
    printf ("  broker CPU          %.3f s per streamed MiB (%.2f s over "
            "%.1f s, %.0f us a piece); the swarm's: %.0f %% of a core\n",
            run->cpu_s_per_mib, run->cpu_s, run->stream_wall_s,
            run->acked_pieces ? run->cpu_s * 1e6 / (double) run->acked_pieces
                              : -1.0,
            run->cpu_swarm_percent);
    printf ("  broker waiting      %.2f s for a CPU over the streams (its "
            "threads runnable, not running: the machine's other work)\n",
            run->wait_s);
    printf ("  broker CPU, others  %.0f %% of a core with the other jobs "
            "alone, %.0f %% with them while streaming\n",
            run->cpu_idle_percent, run->cpu_stream_percent);
    printf ("  other jobs idle     p50 %.2f ms, p99 %.2f ms over %zu jobs "
            "(p50 %.2f ms before the streams, %.2f ms after)\n",
            run->idle_p50_ms, run->idle_p99_ms, run->other_idle,
            run->before_p50_ms, run->after_p50_ms);
    printf ("  other jobs stream   p50 %.2f ms, p99 %.2f ms over %zu jobs\n",
            run->streaming_p50_ms, run->streaming_p99_ms,
            run->other_streaming);
    printf ("  slowdown            p50 x%.2f: %s, p99 x%.2f: %s (goal: at "
            "most x%.2f); load %.2f -> %.2f\n", run->slowdown_ratio,
            run->slowdown_ratio < 0 ? "not measured"
            : run->slowdown_ratio <= S_LIVE_GOAL_SLOWDOWN ? "met"
                                                          : "NOT met",
            run->slowdown_p99_ratio,
            run->slowdown_p99_ratio < 0 ? "not measured"
            : run->slowdown_p99_ratio <= S_LIVE_GOAL_SLOWDOWN ? "met"
                                                              : "NOT met",
            S_LIVE_GOAL_SLOWDOWN, run->load [0], run->load [1]);
}

static int
s_live_json (const char *path, const s_live_run_t *run)
{
    char *copy = strdup (path);
    char command [600];
    snprintf (command, sizeof command, "mkdir -p '%s'", dirname (copy));
    int rc = system (command);
    free (copy);
    FILE *file = rc == 0 ? fopen (path, "w") : NULL;
    if (!file)
        return -1;
    char cpu [256], kernel [256];
    long cores = 0;
    double mem_gib = 0;
    s_machine (cpu, sizeof cpu, &cores, &mem_gib, kernel, sizeof kernel);
    fprintf (file, "{\"live\": {\"live_nodes\": %zu, \"live_other_nodes\": "
             "%zu, \"live_stream_s\": %.3f, \"live_interval_ms\": %" PRId64
             ", \"live_aligned\": %s, \"live_lines\": %" PRIu64 ", \"live_bytes_expected\": %"
             PRIu64 ", \"live_bytes_acked\": %" PRIu64 ", "
             "\"live_bytes_sent_live\": %" PRIu64 ", \"live_pieces\": %"
             PRIu64 ", \"live_pieces_live\": %" PRIu64 ", "
             "\"live_lost_cells\": %" PRIu64 ", \"live_stream_wall_s\": "
             "%.3f, \"live_broker_cpu_s\": %.3f, \"live_cpu_s_per_mib\": "
             "%.4f, \"live_mib_per_s\": %.3f, \"live_pieces_per_s\": %.1f, "
             "\"live_broker_cpu_idle_percent\": %.1f, "
             "\"live_broker_cpu_streaming_percent\": %.1f, "
             "\"live_swarm_cpu_percent\": %.1f, "
             "\"live_broker_cpu_wait_s\": %.3f, "
             "\"live_other_jobs_idle\": %zu, "
             "\"live_other_jobs_streaming\": %zu, "
             "\"live_other_p50_ms_idle\": %.3f, "
             "\"live_other_p99_ms_idle\": %.3f, "
             "\"live_other_p50_ms_before\": %.3f, "
             "\"live_other_p50_ms_after\": %.3f, "
             "\"live_other_p50_ms_streaming\": %.3f, "
             "\"live_other_p99_ms_streaming\": %.3f, "
             "\"live_slowdown_ratio\": %.3f, "
             "\"live_slowdown_p99_ratio\": %.3f, "
             "\"live_slowdown_goal\": %.2f, \"live_slowdown_met\": %s, "
             "\"live_slowdown_p99_met\": %s, "
             "\"load_before\": %.2f, \"load_after\": %.2f, "
             "\"cpu\": \"%s\", \"cores\": %ld, \"error\": \"%s\"}}\n",
             run->nodes, run->others, run->stream_s, run->interval_ms,
             run->aligned ? "true" : "false", run->lines, run->bytes_expected, run->acked_bytes,
             run->live_bytes, run->acked_pieces, run->live_pieces, run->lost,
             run->stream_wall_s, run->cpu_s, run->cpu_s_per_mib,
             run->mib_per_s, run->pieces_per_s, run->cpu_idle_percent,
             run->cpu_stream_percent, run->cpu_swarm_percent, run->wait_s,
             run->other_idle, run->other_streaming,
             run->idle_p50_ms, run->idle_p99_ms, run->before_p50_ms,
             run->after_p50_ms, run->streaming_p50_ms,
             run->streaming_p99_ms, run->slowdown_ratio,
             run->slowdown_p99_ratio, S_LIVE_GOAL_SLOWDOWN,
             run->slowdown_ratio > 0
                 && run->slowdown_ratio <= S_LIVE_GOAL_SLOWDOWN
                 ? "true" : "false",
             run->slowdown_p99_ratio > 0
                 && run->slowdown_p99_ratio <= S_LIVE_GOAL_SLOWDOWN
                 ? "true" : "false",
             run->load [0], run->load [1], cpu, cores, run->error);
    return fclose (file) == 0 ? 0 : -1;
}

//  ---------------------------------------------------------------------
//  --files: one blob to a fleet

#define S_FILES_GROUP "files"

//  One request of the broker peer, its data's integer KEY (or -1), and
//  in CODE what went wrong.
static int64_t
s_files_call (s_stage_t *stage, pw_t *writer, const char *key, char *code,
              size_t code_len)
{
    (void) writer;
    s_peer_send (&stage->broker);
    pv_doc_t *doc = s_peer_wait (&stage->broker, stage->broker.seq,
                                 S_CALL_TIMEOUT_MS);
    const pv_t *data = s_ok_data (doc, code, code_len);
    int64_t value = data ? (key ? s_int (data, key) : 0) : -1;
    pv_doc_destroy (&doc);
    return value;
}

//  Uploads SIZE bytes of a pattern as a blob; its name into SHA256.
//  Returns 0, or -1 with CODE.
static int
s_files_upload (s_stage_t *stage, size_t size, char *sha256, char *code,
                size_t code_len)
{
    uint8_t *data = (uint8_t *) malloc (size + 1);
    char *text = (char *) malloc (BASE64_LEN (PROTO_BLOB_CHUNK_BYTES) + 1);
    if (!data || !text) {
        free (data);
        free (text);
        return -1;
    }
    for (size_t at = 0; at < size; at++)
        data [at] = (uint8_t) ((at * 2654435761u) >> 13);
    sha256_hex (data, size, sha256);
    int rc = 0;
    for (size_t offset = 0; rc == 0 && offset < size;
         offset += PROTO_BLOB_CHUNK_BYTES) {
        size_t len = size - offset < PROTO_BLOB_CHUNK_BYTES
                   ? size - offset : PROTO_BLOB_CHUNK_BYTES;
        base64_encode (data + offset, len, text);
        char id [64];
        s_next_id (&stage->broker, id, sizeof id);
        pw_t *writer = stage->broker.writer;
        pw_reset (writer);
        proto_request_begin (writer, "blob.put", id, 4);
        pw_str (writer, "sha256");
        pw_str (writer, sha256);
        pw_str (writer, "size");
        pw_int (writer, (int64_t) size);
        pw_str (writer, "offset");
        pw_int (writer, (int64_t) offset);
        pw_str (writer, "data");
        pw_str (writer, text);
        rc = s_files_call (stage, writer, NULL, code, code_len) < 0 ? -1 : 0;
    }
    free (data);
    free (text);
    return rc;
}

//  Submits the put of SHA256 (SIZE bytes) to the group; the job id, or
//  NULL with CODE.
static char *
s_files_submit (s_stage_t *stage, const char *sha256, size_t size, char *code,
                size_t code_len)
{
    char id [64], size_text [32];
    snprintf (size_text, sizeof size_text, "%zu", size);
    s_next_id (&stage->broker, id, sizeof id);
    pw_t *writer = stage->broker.writer;
    pw_reset (writer);
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, 2);
    pw_str (writer, "scope");
    pw_str (writer, "group");
    pw_str (writer, "value");
    pw_str (writer, S_FILES_GROUP);
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, "file");
    pw_str (writer, "action");
    pw_str (writer, "put");
    pw_str (writer, "params");
    pw_map (writer, 3);
    pw_str (writer, "path");
    pw_str (writer, "/srv/bench/blob.bin");
    pw_str (writer, "sha256");
    pw_str (writer, sha256);
    pw_str (writer, "size");
    pw_str (writer, size_text);
    s_peer_send (&stage->broker);
    return s_live_job (&stage->broker, stage->broker.seq, code, code_len);
}

typedef struct {
    size_t nodes;                //  Agents
    size_t mib;                  //  The blob's size
    double wall_s;               //  Submit to every result acknowledged
    double mib_per_s;            //  Delivered: nodes * size / wall
    double again_s;              //  The same put again (cached)
    int64_t chunks;              //  Chunks the broker sent
    int64_t chunks_again;        //  ... in the second put
    size_t rss_base_kib;         //  Broker RSS with the agents registered
    size_t rss_peak_kib;         //  ... its peak over the put
    double cpu_s;                //  Broker CPU over the put
    char error [256];
} s_files_run_t;

//  Runs the put of SHA256 and waits for every acknowledged result,
//  sampling the broker's RSS. Returns 0, or -1 with RUN's error.
static int
s_files_put (s_stage_t *stage, const char *sha256, size_t size,
             s_files_run_t *run, double *wall_s)
{
    char code [64];
    double start_us = s_now_us ();
    char *job = s_files_submit (stage, sha256, size, code, sizeof code);
    if (!job) {
        snprintf (run->error, sizeof run->error, "the put was refused: %s",
                  code);
        return -1;
    }
    int64_t deadline = s_now_ms () + 600000;
    int rc = -1;
    while (!s_interrupted && s_now_ms () < deadline) {
        size_t rss = s_rss_kib (stage->broker_pid);
        if (rss > run->rss_peak_kib)
            run->rss_peak_kib = rss;
        int64_t acked = 0;
        for (size_t at = 0; at < stage->swarm_count; at++) {
            uint64_t seq = s_control (&stage->swarms [at].control, "job", job,
                                      0);
            pv_doc_t *doc = s_peer_wait (&stage->swarms [at].control, seq,
                                         S_CALL_TIMEOUT_MS);
            acked += doc ? s_int (pv_doc_root (doc), "acked") : 0;
            pv_doc_destroy (&doc);
        }
        if (acked >= (int64_t) run->nodes) {
            rc = 0;
            break;
        }
        usleep (20 * 1000);
    }
    *wall_s = (s_now_us () - start_us) / 1e6;
    if (rc != 0)
        snprintf (run->error, sizeof run->error, "job %s did not end in "
                  "time", job);
    free (job);
    return rc;
}

static void
s_files_measure (const s_options_t *options, s_files_run_t *run)
{
    s_stage_t stage;
    memset (&stage, 0, sizeof stage);
    snprintf (stage.dir, sizeof stage.dir, "%s", s_tmpdir);
    s_options_t fetching = *options;
    char *args [] = {"--blobs", "--groups", S_FILES_GROUP};
    for (size_t at = 0; at < 3 && fetching.swarm_arg_count < 16; at++)
        fetching.swarm_args [fetching.swarm_arg_count++] = args [at];
    s_say ("files: starting a broker and %zu agents that fetch blobs",
           run->nodes);
    if (s_stage_broker (&stage, options, "files") != 0
        || s_stage_swarm (&stage, &fetching, run->nodes) != 0) {
        snprintf (run->error, sizeof run->error, "the broker or the swarm "
                  "did not start (see broker.log)");
        s_stage_stop (&stage, true);
        return;
    }
    int64_t deadline = s_now_ms () + 30000 + (int64_t) run->nodes * 3;
    while (!s_interrupted
           && s_live_sum (&stage, 0, stage.swarm_count, "welcomed")
                  < (int64_t) run->nodes) {
        if (s_now_ms () > deadline || !s_swarms_alive (&stage)) {
            snprintf (run->error, sizeof run->error,
                      "not every agent registered in time");
            s_stage_stop (&stage, true);
            return;
        }
        usleep (S_POLL_MS * 1000);
    }
    char sha256 [SHA256_HEX], code [64];
    size_t size = run->mib << 20;
    s_say ("files: uploading %zu MiB", run->mib);
    if (s_files_upload (&stage, size, sha256, code, sizeof code) != 0) {
        snprintf (run->error, sizeof run->error, "the upload failed: %s",
                  code);
        s_stage_stop (&stage, true);
        return;
    }
    run->rss_base_kib = s_rss_kib (stage.broker_pid);
    run->rss_peak_kib = run->rss_base_kib;
    s_say ("files: a put of it to %zu agents", run->nodes);
    double cpu_ms = s_cpu_ms (stage.broker_pid);
    int rc = s_files_put (&stage, sha256, size, run, &run->wall_s);
    run->cpu_s = (s_cpu_ms (stage.broker_pid) - cpu_ms) / 1000.0;
    run->chunks = s_live_sum (&stage, 0, stage.swarm_count, "blob_chunks");
    if (rc == 0) {
        run->mib_per_s = (double) (run->nodes * run->mib) / run->wall_s;
        s_say ("files: the same put again (cached on every agent)");
        rc = s_files_put (&stage, sha256, size, run, &run->again_s);
        run->chunks_again = s_live_sum (&stage, 0, stage.swarm_count,
                                        "blob_chunks") - run->chunks;
    }
    int64_t expected = (int64_t) run->nodes
                       * (int64_t) ((size + PROTO_BLOB_CHUNK_BYTES - 1)
                                    / PROTO_BLOB_CHUNK_BYTES);
    if (rc == 0 && run->chunks != expected)
        snprintf (run->error, sizeof run->error, "the swarm took %" PRId64
                  " chunks, %" PRId64 " expected", run->chunks, expected);
    s_stage_stop (&stage, options->keep || run->error [0]);
}

static int
s_files_main (const s_options_t *options)
{
    s_files_run_t run;
    memset (&run, 0, sizeof run);
    run.nodes = options->files_nodes;
    run.mib = options->files_mib;
    s_raise_fd_limit (run.nodes);
    s_files_measure (options, &run);
    s_stop_all ();
    if (run.error [0] || options->keep)
        s_say ("logs kept in %s", s_tmpdir);
    else
        s_remove_tree (s_tmpdir);
    if (s_interrupted)
        return 1;
    printf ("\nBlobs: one file put of a %zu MiB blob to %zu swarm agents "
            "(each fetches it in 256 KiB chunks over its connection)\n",
            run.mib, run.nodes);
    if (run.error [0])
        printf ("  error: %s\n", run.error);
    printf ("  delivered           %zu MiB in %.2f s: %.1f MiB/s\n",
            run.nodes * run.mib, run.wall_s, run.mib_per_s);
    printf ("  chunks sent         %" PRId64 " (again, cached: %" PRId64
            ", %.2f s)\n", run.chunks, run.chunks_again, run.again_s);
    printf ("  broker RSS          %.1f MiB with the agents registered, "
            "peak %.1f MiB during the put\n",
            (double) run.rss_base_kib / 1024.0,
            (double) run.rss_peak_kib / 1024.0);
    printf ("  broker CPU          %.2f s over the put\n", run.cpu_s);
    if (options->out) {
        FILE *file = fopen (options->out, "w");
        if (file) {
            fprintf (file, "{\"files\": {\"nodes\": %zu, \"mib\": %zu, "
                     "\"wall_s\": %.3f, \"mib_per_s\": %.1f, "
                     "\"chunks\": %" PRId64 ", \"chunks_again\": %" PRId64
                     ", \"again_s\": %.3f, \"broker_rss_base_kib\": %zu, "
                     "\"broker_rss_peak_kib\": %zu, \"broker_cpu_s\": %.2f, "
                     "\"error\": \"%s\"}}\n", run.nodes, run.mib,
                     run.wall_s, run.mib_per_s, run.chunks, run.chunks_again,
                     run.again_s, run.rss_base_kib, run.rss_peak_kib,
                     run.cpu_s, run.error);
            fclose (file);
        }
    }
    return run.error [0] ? 1 : 0;
}

//  gridbench --live. Returns the exit code.
static int
s_live_main (const s_options_t *options)
{
    s_live_run_t run;
    memset (&run, 0, sizeof run);
    run.nodes = options->live_nodes;
    run.others = options->live_others;
    run.stream_s = options->live_s;
    run.interval_ms = options->live_interval_ms;
    run.aligned = options->live_aligned;
    run.lines = (uint64_t) (options->live_s * 1000.0
                            / (double) options->live_interval_ms) + 1;
    run.bytes_expected = (uint64_t) run.nodes * s_live_lines_len (run.lines);
    run.stream_wall_s = run.cpu_s = run.cpu_s_per_mib = -1;
    run.mib_per_s = run.pieces_per_s = -1;
    run.cpu_idle_percent = run.cpu_stream_percent = -1;
    run.cpu_swarm_percent = run.wait_s = -1;
    run.idle_p50_ms = run.idle_p99_ms = -1;
    run.before_p50_ms = run.after_p50_ms = -1;
    run.streaming_p50_ms = run.streaming_p99_ms = -1;
    run.slowdown_ratio = run.slowdown_p99_ratio = -1;
    s_raise_fd_limit (run.nodes + run.others);
    s_live_measure (options, &run);
    s_stop_all ();
    if (run.error [0] || options->keep)
        s_say ("logs kept in %s", s_tmpdir);
    else
        s_remove_tree (s_tmpdir);
    if (s_interrupted) {
        s_say ("interrupted: no results written");
        return 1;
    }
    s_live_print (&run);
    const char *out = strcmp (options->out, "build/bench/results.json") == 0
                          ? "build/bench/live.json" : options->out;
    if (s_live_json (out, &run) != 0) {
        s_say ("cannot write %s", out);
        return 1;
    }
    s_say ("results in %s", out);
    return run.error [0] ? 1 : 0;
}

//  The cluster run (--ha): a broker alone, then the same figures with it
//  the active of a two-member cluster (a standby in its sync set, on one
//  etcd), then failover times (gridbench_ha.c)

static double
s_ratio (double cluster, double alone)
{
    return alone > 0 && cluster >= 0 ? cluster / alone : -1;
}

static void s_ha_print_runs (const s_run_t *runs);

static void
s_ha_print (const s_run_t *runs, const bench_ha_failover_t *failover,
            bool stop, bool failover_only)
{
    if (!failover_only)
        s_ha_print_runs (runs);
    printf ("\nfailover (%s of the active to the first job completed "
            "on the new one, ttl 10 s)\n", stop ? "SIGTERM" : "SIGKILL");
    printf ("  kills %zu, timed %zu: p50 %.1f s, min %.1f s, max %.1f s "
            "(goal p50 < 15 s)\n", failover->kills, failover->measured,
            failover->p50_s, failover->min_s, failover->max_s);
    printf ("  jobs acknowledged %zu: lost %zu, duplicated %zu\n",
            failover->jobs, failover->lost, failover->duplicated);
    if (failover->error [0])
        printf ("  stopped early: %s\n", failover->error);
}

//  The throughput table of the --ha run.
static void
s_ha_print_runs (const s_run_t *runs)
{
    printf ("\n%zu agents                 alone      cluster    cluster/alone\n",
            runs [0].agents);
    struct {
        const char *name;
        double alone, cluster;
        const char *goal;
    } rows [] = {
        {"results/s (ingest)", runs [0].results_per_s, runs [1].results_per_s,
         ">= 0.80"},
        {"single-node jobs/s", runs [0].single_jobs_per_s,
         runs [1].single_jobs_per_s, ">= 0.80"},
        {"broadcast p50 (ms)", runs [0].broadcast_p50_ms,
         runs [1].broadcast_p50_ms, ""},
        {"broadcast p99 (ms)", runs [0].broadcast_p99_ms,
         runs [1].broadcast_p99_ms, ""},
    };
    for (size_t at = 0; at < sizeof rows / sizeof rows [0]; at++) {
        double ratio = s_ratio (rows [at].cluster, rows [at].alone);
        printf ("  %-22s %-10.1f %-10.1f %.2f %s\n", rows [at].name,
                rows [at].alone, rows [at].cluster, ratio, rows [at].goal);
    }
    printf ("  %-22s %-10" PRIu64 " %-10" PRIu64 "\n", "lost",
            runs [0].lost, runs [1].lost);
    printf ("  %-22s %-10" PRIu64 " %-10" PRIu64 "\n", "duplicated",
            runs [0].duplicates, runs [1].duplicates);
}

static int
s_ha_json (const char *path, const s_run_t *runs,
           const bench_ha_failover_t *failover)
{
    char dir [1024];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (slash) {
        *slash = 0;
        zsys_dir_create ("%s", dir);
    }
    FILE *file = fopen (path, "w");
    if (!file)
        return -1;
    fprintf (file, "{\n");
    const char *names [2] = {"alone", "cluster"};
    for (size_t at = 0; at < 2; at++)
        fprintf (file, "  \"%s\": {\"agents\": %zu, \"results_per_s\": %.1f, "
                 "\"single_jobs_per_s\": %.1f, \"broadcast_p50_ms\": %.2f, "
                 "\"broadcast_p99_ms\": %.2f, \"lost\": %" PRIu64 ", "
                 "\"duplicates\": %" PRIu64 ", \"error\": \"%s\"},\n",
                 names [at], runs [at].agents, runs [at].results_per_s,
                 runs [at].single_jobs_per_s, runs [at].broadcast_p50_ms,
                 runs [at].broadcast_p99_ms, runs [at].lost,
                 runs [at].duplicates, runs [at].error);
    fprintf (file, "  \"failover\": {\"kills\": %zu, \"measured\": %zu, "
             "\"p50_s\": %.2f, \"min_s\": %.2f, \"max_s\": %.2f, "
             "\"jobs\": %zu, \"lost\": %zu, \"duplicated\": %zu, "
             "\"error\": \"%s\"}\n}\n", failover->kills, failover->measured,
             failover->p50_s, failover->min_s, failover->max_s,
             failover->jobs, failover->lost, failover->duplicated,
             failover->error);
    return fclose (file) == 0 ? 0 : -1;
}

static void s_run_init (s_run_t *run, size_t agents);

static int
s_ha_main (s_options_t *options)
{
    //  The drain stops the broker (SIGSTOP) past any lease: not here
    options->skip_drain = true;
    size_t agents = options->counts [0];
    s_raise_fd_limit (agents);
    s_run_t runs [2];
    memset (runs, 0, sizeof runs);
    for (size_t at = 0; at < 2 && !s_interrupted; at++) {
        s_run_init (&runs [at], agents);
        if (options->ha_failover_only)
            continue;
        s_ha.on = at == 1;
        s_say ("%s", at == 0 ? "a broker alone"
                             : "a cluster: the same broker as the active, "
                               "a standby in sync, one etcd");
        s_measure (options, agents, &runs [at]);
    }
    s_ha.on = false;
    bench_ha_failover_t failover;
    memset (&failover, 0, sizeof failover);
    if (!s_interrupted) {
        s_say ("failover: %zu %s of the active (ttl 10 s, 3 agents)",
               options->ha_kills, options->ha_stop ? "stops (SIGTERM)"
                                                   : "kills");
        bench_ha_failover (&s_ha_procs, options->bin, s_tmpdir,
                           options->ha_kills,
                           options->ha_stop ? SIGTERM : SIGKILL, &failover);
    }
    s_stop_all ();
    bool keep = options->keep || runs [0].error [0] || runs [1].error [0]
                || failover.error [0];
    if (keep)
        s_say ("logs kept in %s", s_tmpdir);
    else
        s_remove_tree (s_tmpdir);
    if (s_interrupted) {
        s_say ("interrupted: no results written");
        return 1;
    }
    s_ha_print (runs, &failover, options->ha_stop,
                options->ha_failover_only);
    const char *out = strcmp (options->out, "build/bench/results.json") == 0
                          ? "build/bench/ha.json" : options->out;
    if (s_ha_json (out, runs, &failover) != 0) {
        s_say ("cannot write %s", out);
        return 1;
    }
    s_say ("results in %s", out);
    return 0;
}

//  ---------------------------------------------------------------------
//  Main

static const char *s_usage =
    "usage: gridbench [options]\n"
    "\n"
    "Starts gridbroker and gridswarm on loopback for each agent count and\n"
    "measures registration, broadcast round trips, single-node job\n"
    "throughput, result ingest, memory and lost/duplicated results; then\n"
    "one real gridagent's idle cost and the cost of one job. Prints a\n"
    "table and writes a JSON list.\n"
    "\n"
    "options:\n"
    "  --agents N,N,...     agent counts              [1000,10000,50000]\n"
    "  --quick              1000 agents, shorter windows (under 2 minutes)\n"
    "  --rounds N           broadcast rounds per count             [30]\n"
    "  --single-s S         single-node submit window (seconds)    [5]\n"
    "  --window N           single-node jobs in flight             [256]\n"
    "  --ingest-results N   results aimed for in the ingest run    [20000]\n"
    "  --idle-s S           real agent idle window (seconds)       [60]\n"
    "  --agent-runs N       jobs of each kind on the real agent    [20]\n"
    "  --no-agent           skip the real agent\n"
    "  --agent-only         only the real agent: idle CPU and RSS, CPU\n"
    "                       per job, gridcli --wait (a few minutes less)\n"
    "  --no-drain           skip the drain (the broker alone on the ingest\n"
    "                       run's results, while the swarm holds them and\n"
    "                       the broker is stopped; direct runs only)\n"
    "  --swarm-threads N    swarm shard threads (0: by size)       [0]\n"
    "  --bin DIR            gridbroker and gridagent [<this dir>/../../bin]\n"
    "  --swarm PATH         gridswarm                [<this dir>/gridswarm]\n"
    "  --out FILE           JSON results       [build/bench/results.json]\n"
    "  --curve              CURVE on every connection: fresh keys, the\n"
    "                       broker in --auto-accept (default: plaintext,\n"
    "                       --insecure when the programs have it)\n"
    "  --broker-arg ARG     one more gridbroker argument (repeatable)\n"
    "  --swarm-arg ARG      one more gridswarm argument (repeatable)\n"
    "  --keep               keep the temporary directory and its logs\n"
    "  --queue              only the any-node queue run: QUEUE-JOBS `any`\n"
    "                       jobs on QUEUE-AGENTS agents, QUEUE-KILL of them\n"
    "                       killed mid-lease (about a minute by default)\n"
    "  --queue-jobs N       any jobs in the queue run             [20000]\n"
    "  --queue-agents N     swarm agents in the queue run          [1000]\n"
    "  --queue-kill N       agents killed while they hold steps      [50]\n"
    "  --queue-limit N      broker limit on test.echo cells running\n"
    "                       at once across the fleet, 0: none       [800]\n"
    "  --swarm-procs N      swarm processes at least (0: as few as the\n"
    "                       open-file limit allows, 4 per agent on\n"
    "                       libzmq, 2 on zmtp)                       [0]\n"
    "  --relays K           K gridrelays in front of the broker, each\n"
    "                       swarm process talking to one; then first\n"
    "                       libzmq's own cost per agent (gridsink)   [0]\n"
    "  --relay PATH         gridrelay                [<bin>/gridrelay]\n"
    "  --relay-arg ARG      one more gridrelay argument (repeatable)\n"
    "  --sink PATH          gridsink                 [<this dir>/gridsink]\n"
    "  --swarm-transport T  gridswarm's transport: zmtp (ZMTP spoken by\n"
    "                       the swarm itself, cheap) or libzmq   [zmtp;\n"
    "                       libzmq with --curve]\n"
    "  --swarm-ramp N       start N agents a second over all swarm\n"
    "                       processes (0: all at once; --scale behind\n"
    "                       relays: 5000)                            [0]\n"
    "  --scale              the bench-scale run: the first count direct\n"
    "                       (when 10,000 or fewer), the others through\n"
    "                       --relays (default 8) to a broker at\n"
    "                       --heartbeat 15s --ack-timeout 10s\n"
    "                       (docs/SIZING.md; --broker-arg overrides),\n"
    "                       no real agent; scale goals; writes\n"
    "                       build/bench/scale.json   [--agents 10000,50000]\n"
    "                       A count of 100,000 or more: registration and\n"
    "                       5 broadcast rounds only; its swarm started at\n"
    "                       1000 a second and not niced, --heartbeat\n"
    "                       30s --lease 60s\n"
    "  --scale-100k         --scale, and after its counts a row of\n"
    "                       100,000 agents through 16 relays\n"
    "  --http               only the HTTP figures: job submits per second\n"
    "                       over the broker's HTTP face (keep-alive,\n"
    "                       httpload) and over ZeroMQ, and the time of\n"
    "                       gridcli --wait on a real agent; writes\n"
    "                       build/bench/http.json\n"
    "  --http-connections N HTTP connections (ZeroMQ: requests in flight) [64]\n"
    "  --http-s S           each submit phase (seconds)             [5]\n"
    "  --cli-runs N         gridcli --wait runs                    [20]\n"
    "  --httpload PATH      httpload             [<this dir>/httpload]\n"
    "  --live               only the live output figures: LIVE-NODES\n"
    "                       agents stream a `test lines` job's output\n"
    "                       while it runs (live_output); the broker's CPU\n"
    "                       per streamed MiB, and the round trip of\n"
    "                       one-node echo jobs on LIVE-OTHERS other agents\n"
    "                       before, while and after they stream; writes\n"
    "                       build/bench/live.json\n"
    "  --live-nodes N       streaming agents                     [1000]\n"
    "  --live-others N      agents of the other jobs               [10]\n"
    "  --live-s S           how long each stream lasts (seconds)   [10]\n"
    "  --live-interval-ms MS  one line every MS                    [10]\n"
    "  --live-aligned       the streaming agents' live rounds line up\n"
    "                       (all pieces of a round at once: the worst\n"
    "                       case); else each agent's round has its own\n"
    "                       phase, as gridagents'\n"
    "  --ha                 the cluster run: the figures of a broker alone\n"
    "                       and of the same broker as a cluster's active\n"
    "                       (a standby in sync, one etcd), at the first\n"
    "                       agent count, no drain; then failover times\n"
    "                       over HA-KILLS kills of the active (ttl 10 s,\n"
    "                       3 real agents); writes build/bench/ha.json\n"
    "  --ha-kills N         kills of the active in the --ha run     [20]\n"
    "  --ha-failover-only   the --ha run's failover times alone\n"
    "  --ha-stop            stop the active with SIGTERM (it resigns its\n"
    "                       key) instead of SIGKILL: a handover's time\n"
    "  -h, --help           this text\n";

static int
s_parse_counts (const char *text, s_options_t *options)
{
    options->count_total = 0;
    char *copy = strdup (text);
    char *save = NULL;
    for (char *item = strtok_r (copy, ",", &save); item;
         item = strtok_r (NULL, ",", &save)) {
        char *end = NULL;
        unsigned long value = strtoul (item, &end, 10);
        if (*end || value < 1 || options->count_total == S_MAX_COUNTS) {
            free (copy);
            return -1;
        }
        options->counts [options->count_total++] = value;
    }
    free (copy);
    return options->count_total ? 0 : -1;
}

//  After the options: the relays of each agent count. --scale runs the
//  first count direct and the others through RELAYS (8 when not given);
//  otherwise every count goes through RELAYS (none when not given).
static int
s_parse_scale (s_options_t *options, bool counts_given, long relays)
{
    if (options->scale_100k)
        options->scale = true;
    if (options->scale) {
        if (!counts_given) {
            options->counts [0] = 10000;
            options->counts [1] = 50000;
            options->count_total = 2;
        }
        options->skip_agent = true;
        for (size_t at = 0; at < options->count_total; at++)
            options->relays [at]
                = at == 0 && options->counts [at] <= S_SCALE_DIRECT_MAX ? 0
                : relays < 0 ? 8 : (size_t) relays;
        if (options->scale_100k) {
            if (options->count_total == S_MAX_COUNTS) {
                fprintf (stderr, "gridbench: --scale-100k adds a count: "
                         "give at most %d with --agents\n",
                         S_MAX_COUNTS - 1);
                return -1;
            }
            options->counts [options->count_total] = S_SCALE_XL_AGENTS;
            options->relays [options->count_total++] = S_SCALE_XL_RELAYS;
        }
        if (strcmp (options->out, "build/bench/results.json") == 0) {
            free (options->out);
            options->out = strdup ("build/bench/scale.json");
        }
    }
    else
        for (size_t at = 0; at < options->count_total; at++)
            options->relays [at] = relays < 0 ? 0 : (size_t) relays;
    if (!options->relay)
        options->relay = zsys_sprintf ("%s/gridrelay", options->bin);
    return 0;
}

//  The long options without a letter (getopt_long's codes past a byte)
enum {
    S_OPT_HA = 0x101,
    S_OPT_HA_KILLS,
    S_OPT_FILES,
    S_OPT_FILES_NODES,
    S_OPT_FILES_MIB,
    S_OPT_LIVE_ALIGNED,
    S_OPT_HA_FAILOVER_ONLY,
    S_OPT_HA_STOP,
    S_OPT_AGENT_ONLY,
    S_OPT_SCALE_100K
};

static int
s_parse (s_options_t *options, int argc, char *argv [])
{
    static const struct option table [] = {
        {"agents", required_argument, NULL, 'a'},
        {"quick", no_argument, NULL, 'q'},
        {"rounds", required_argument, NULL, 'r'},
        {"single-s", required_argument, NULL, 's'},
        {"window", required_argument, NULL, 'w'},
        {"ingest-results", required_argument, NULL, 'i'},
        {"idle-s", required_argument, NULL, 'I'},
        {"agent-runs", required_argument, NULL, 'R'},
        {"no-agent", no_argument, NULL, 'N'},
        {"no-drain", no_argument, NULL, 'D'},
        {"swarm-threads", required_argument, NULL, 't'},
        {"bin", required_argument, NULL, 'b'},
        {"swarm", required_argument, NULL, 'S'},
        {"out", required_argument, NULL, 'o'},
        {"curve", no_argument, NULL, 'c'},
        {"broker-arg", required_argument, NULL, 'B'},
        {"swarm-arg", required_argument, NULL, 'W'},
        {"keep", no_argument, NULL, 'k'},
        {"queue", no_argument, NULL, 'Q'},
        {"queue-jobs", required_argument, NULL, 'J'},
        {"queue-agents", required_argument, NULL, 'A'},
        {"queue-kill", required_argument, NULL, 'K'},
        {"queue-limit", required_argument, NULL, 'L'},
        {"swarm-procs", required_argument, NULL, 'P'},
        {"relays", required_argument, NULL, 'X'},
        {"relay", required_argument, NULL, 'Y'},
        {"relay-arg", required_argument, NULL, 'Z'},
        {"sink", required_argument, NULL, 'G'},
        {"scale", no_argument, NULL, 'C'},
        {"swarm-ramp", required_argument, NULL, 'M'},
        {"http", no_argument, NULL, 'H'},
        {"http-connections", required_argument, NULL, 'O'},
        {"http-s", required_argument, NULL, 'T'},
        {"cli-runs", required_argument, NULL, 'U'},
        {"httpload", required_argument, NULL, 'V'},
        {"swarm-transport", required_argument, NULL, 'x'},
        {"live", no_argument, NULL, 'E'},
        {"live-nodes", required_argument, NULL, 'e'},
        {"live-others", required_argument, NULL, 'f'},
        {"live-s", required_argument, NULL, 'g'},
        {"live-interval-ms", required_argument, NULL, 'j'},
        {"files", no_argument, NULL, S_OPT_FILES},
        {"files-nodes", required_argument, NULL, S_OPT_FILES_NODES},
        {"files-mib", required_argument, NULL, S_OPT_FILES_MIB},
        {"live-aligned", no_argument, NULL, S_OPT_LIVE_ALIGNED},
        {"ha", no_argument, NULL, S_OPT_HA},
        {"ha-kills", required_argument, NULL, S_OPT_HA_KILLS},
        {"ha-failover-only", no_argument, NULL, S_OPT_HA_FAILOVER_ONLY},
        {"ha-stop", no_argument, NULL, S_OPT_HA_STOP},
        {"agent-only", no_argument, NULL, S_OPT_AGENT_ONLY},
        {"scale-100k", no_argument, NULL, S_OPT_SCALE_100K},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    int option;
    bool counts_given = false;
    long relays = -1;
    while ((option = getopt_long (argc, argv, "h", table, NULL)) != -1) {
        char *end = NULL;
        switch (option) {
            case 'P':
                options->swarm_procs = strtoul (optarg, &end, 10);
                break;
            case 'X':
                relays = strtol (optarg, &end, 10);
                if (!*end && (relays < 0 || relays > S_MAX_RELAYS)) {
                    fprintf (stderr, "gridbench: --relays: 0 to %d\n",
                             S_MAX_RELAYS);
                    return -1;
                }
                break;
            case 'Y':
                free (options->relay);
                options->relay = strdup (optarg);
                break;
            case 'Z':
                if (options->relay_arg_count == 16)
                    return -1;
                options->relay_args [options->relay_arg_count++] = optarg;
                break;
            case 'G':
                free (options->sink);
                options->sink = strdup (optarg);
                break;
            case 'C':
                options->scale = true;
                break;
            case 'M':
                options->swarm_ramp = strtoul (optarg, &end, 10);
                break;
            case 'H':
                options->http = true;
                break;
            case 'E':
                options->live = true;
                break;
            case 'e':
                options->live_nodes = strtoul (optarg, &end, 10);
                break;
            case 'f':
                options->live_others = strtoul (optarg, &end, 10);
                break;
            case 'g':
                options->live_s = strtod (optarg, &end);
                break;
            case 'j':
                options->live_interval_ms = strtoll (optarg, &end, 10);
                break;
            case S_OPT_HA:
                options->ha = true;
                break;
            case S_OPT_FILES:
                options->files = true;
                break;
            case S_OPT_FILES_NODES:
                options->files_nodes = strtoul (optarg, &end, 10);
                break;
            case S_OPT_LIVE_ALIGNED:
                options->live_aligned = true;
                break;
            case S_OPT_FILES_MIB:
                options->files_mib = strtoul (optarg, &end, 10);
                break;
            case S_OPT_AGENT_ONLY:
                options->agent_only = true;
                break;
            case S_OPT_SCALE_100K:
                options->scale_100k = true;
                break;
            case S_OPT_HA_KILLS:
                options->ha_kills = strtoul (optarg, &end, 10);
                break;
            case S_OPT_HA_FAILOVER_ONLY:
                options->ha_failover_only = true;
                options->ha = true;
                break;
            case S_OPT_HA_STOP:
                options->ha_stop = true;
                break;
            case 'O':
                options->http_connections = strtoul (optarg, &end, 10);
                break;
            case 'T':
                options->http_s = strtod (optarg, &end);
                break;
            case 'U':
                options->cli_runs = strtoul (optarg, &end, 10);
                break;
            case 'V':
                free (options->httpload);
                options->httpload = strdup (optarg);
                break;
            case 'a':
                counts_given = true;
                if (s_parse_counts (optarg, options) != 0) {
                    fprintf (stderr, "gridbench: --agents: expected counts "
                             "like 1000,10000 (at most %d)\n", S_MAX_COUNTS);
                    return -1;
                }
                break;
            case 'q':
                options->counts [0] = 1000;
                options->count_total = 1;
                options->single_s = 3;
                options->idle_s = 10;
                options->ingest_results = 20000;
                break;
            case 'r':
                options->rounds = strtoul (optarg, &end, 10);
                break;
            case 's':
                options->single_s = strtod (optarg, &end);
                break;
            case 'w':
                options->window = strtoul (optarg, &end, 10);
                break;
            case 'i':
                options->ingest_results = strtoul (optarg, &end, 10);
                break;
            case 'I':
                options->idle_s = (int) strtol (optarg, &end, 10);
                break;
            case 'R':
                options->agent_runs = strtoul (optarg, &end, 10);
                break;
            case 'N':
                options->skip_agent = true;
                break;
            case 'D':
                options->skip_drain = true;
                break;
            case 't':
                options->swarm_threads = strtoul (optarg, &end, 10);
                break;
            case 'b':
                free (options->bin);
                options->bin = strdup (optarg);
                break;
            case 'S':
                free (options->swarm);
                options->swarm = strdup (optarg);
                break;
            case 'o':
                free (options->out);
                options->out = strdup (optarg);
                break;
            case 'c':
                options->curve = true;
                break;
            case 'B':
                //  Room is kept for what --scale and the relays add
                if (options->broker_arg_count == 16)
                    return -1;
                options->broker_args [options->broker_arg_count++] = optarg;
                break;
            case 'W':
                if (options->swarm_arg_count == 16)
                    return -1;
                options->swarm_args [options->swarm_arg_count++] = optarg;
                break;
            case 'k':
                options->keep = true;
                break;
            case 'Q':
                options->queue = true;
                break;
            case 'J':
                options->queue_jobs = strtoul (optarg, &end, 10);
                break;
            case 'A':
                options->queue_agents = strtoul (optarg, &end, 10);
                break;
            case 'K':
                options->queue_killed = strtoul (optarg, &end, 10);
                break;
            case 'L':
                options->queue_limit = strtoul (optarg, &end, 10);
                break;
            case 'x':
                if (strcmp (optarg, "zmtp") != 0
                    && strcmp (optarg, "libzmq") != 0) {
                    fprintf (stderr, "gridbench: --swarm-transport: zmtp "
                             "or libzmq\n");
                    return -1;
                }
                options->swarm_transport = optarg;
                break;
            case 'h':
                fputs (s_usage, stdout);
                exit (0);
            default:
                fprintf (stderr, "run 'gridbench --help' for the options\n");
                return -1;
        }
        if (end && *end) {
            fprintf (stderr, "gridbench: '%s' is not a number\n", optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "gridbench: unexpected argument '%s'\n",
                 argv [optind]);
        return -1;
    }
    if (s_parse_scale (options, counts_given, relays) != 0)
        return -1;
    if (options->curve && options->swarm_transport
        && strcmp (options->swarm_transport, "zmtp") == 0) {
        fprintf (stderr, "gridbench: --swarm-transport zmtp speaks no "
                 "CURVE; --curve runs use libzmq\n");
        return -1;
    }
    if (options->queue_jobs < 1 || options->queue_killed < 1
        || options->queue_agents <= options->queue_killed) {
        fprintf (stderr, "gridbench: --queue-jobs and --queue-kill must be "
                 "positive, and --queue-agents more than --queue-kill\n");
        return -1;
    }
    //  A `test lines` job prints at most 100,000 lines, one every
    //  99,999 ms at most
    if (options->live_nodes < 1 || options->live_others < 1
        || options->live_s <= 0 || options->live_interval_ms < 1
        || options->live_interval_ms > 99999
        || options->live_s * 1000.0 / (double) options->live_interval_ms
               >= 100000) {
        fprintf (stderr, "gridbench: --live-nodes, --live-others, --live-s "
                 "and --live-interval-ms (up to 99999) must be positive, "
                 "and a stream at most 100,000 lines\n");
        return -1;
    }
    if (options->http_connections < 1 || options->http_s <= 0
        || options->cli_runs < 1) {
        fprintf (stderr, "gridbench: --http-connections, --http-s and "
                 "--cli-runs must be positive\n");
        return -1;
    }
    if (options->rounds < 1 || options->window < 1 || options->single_s <= 0
        || options->idle_s < 1 || options->agent_runs < 1) {
        fprintf (stderr, "gridbench: --rounds, --window, --single-s, "
                 "--idle-s and --agent-runs must be positive\n");
        return -1;
    }
    return 0;
}

//  Raises the open-file limit (inherited by the broker and the swarm) to
//  fit AGENTS: the swarm holds 4 descriptors per agent, the broker 2. When
//  the hard limit cannot be raised (no CAP_SYS_RESOURCE), takes the soft
//  limit up to it. Returns the limit now in force.
static rlim_t
s_raise_fd_limit (size_t agents)
{
    rlim_t wanted = (rlim_t) agents * 4 + 1024;
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0)
        return 1024;
    if (limit.rlim_cur >= wanted)
        return limit.rlim_cur;
    struct rlimit raised = {wanted, limit.rlim_max > wanted ? limit.rlim_max
                                                            : wanted};
    if (setrlimit (RLIMIT_NOFILE, &raised) == 0)
        return wanted;
    limit.rlim_cur = limit.rlim_max;
    setrlimit (RLIMIT_NOFILE, &limit);
    return s_fd_limit ();
}

static void
s_run_init (s_run_t *run, size_t agents)
{
    memset (run, 0, sizeof *run);
    run->agents = agents;
    run->register_s = run->broadcast_p50_ms = run->broadcast_p99_ms = -1;
    run->broadcast_max_ms = run->single_jobs_per_s = run->results_per_s = -1;
    run->results_per_s_drain = -1;
    run->single_p50_ms = run->single_p99_ms = -1;
    run->broker_bytes_per_agent = run->swarm_bytes_per_agent = -1;
    run->libzmq_bytes_per_agent = run->libzmq_cpu_us_per_agent = -1;
    run->raw = (bench_raw_t) {
        .fanout_p50_ms = -1, .fanout_p99_ms = -1, .ingest_per_s = -1,
        .connect_s = -1
    };
    run->load_after [0] = run->load_after [1] = run->load_after [2] = -1;
    for (size_t at = 0; at < S_MAX_RELAYS; at++) {
        run->relays [at].bytes_per_agent = -1;
        run->relays [at].registry_agents = -1;
    }
}

int
main (int argc, char *argv [])
{
    s_options_t options;
    memset (&options, 0, sizeof options);
    options.counts [0] = 1000;
    options.counts [1] = 10000;
    options.counts [2] = 50000;
    options.count_total = 3;
    options.rounds = 30;
    options.single_s = 5;
    options.window = 256;
    options.ingest_results = 20000;
    options.idle_s = 60;
    options.agent_runs = 20;
    options.queue_jobs = 20000;
    options.queue_agents = 1000;
    options.queue_killed = 50;
    options.queue_limit = 800;
    options.http_connections = 64;
    options.http_s = 5;
    options.cli_runs = 20;
    options.files_nodes = 1000;
    options.files_mib = 4;
    options.live_nodes = 1000;
    options.live_others = 10;
    options.live_s = 10;
    options.live_interval_ms = 10;
    options.ha_kills = 20;
    char self [1024];
    ssize_t len = readlink ("/proc/self/exe", self, sizeof self - 1);
    self [len > 0 ? len : 0] = 0;
    char *here = dirname (self);
    options.bin = zsys_sprintf ("%s/../../bin", here);
    options.swarm = zsys_sprintf ("%s/gridswarm", here);
    options.sink = zsys_sprintf ("%s/gridsink", here);
    options.httpload = zsys_sprintf ("%s/httpload", here);
    options.out = strdup ("build/bench/results.json");
    if (s_parse (&options, argc, argv) != 0) {
        free (options.bin);
        free (options.swarm);
        free (options.sink);
        free (options.httpload);
        free (options.relay);
        free (options.out);
        return 2;
    }
    char broker [1200], agent [1200];
    snprintf (broker, sizeof broker, "%s/gridbroker", options.bin);
    snprintf (agent, sizeof agent, "%s/gridagent", options.bin);
    if (access (broker, X_OK) || access (agent, X_OK)
        || access (options.swarm, X_OK)) {
        fprintf (stderr, "gridbench: cannot find %s, %s and %s (build them, "
                 "or use --bin and --swarm)\n", broker, agent, options.swarm);
        return 2;
    }
    //  Plaintext runs pass --insecure to programs that have it
    s_security.broker_insecure = s_has_flag (broker, "--insecure");
    s_security.agent_insecure = s_has_flag (agent, "--insecure");

    signal (SIGPIPE, SIG_IGN);
    zsys_init ();
    //  Ours, not CZMQ's (zsys_init puts its own in place)
    zsys_handler_set (s_on_signal);
    zsys_set_logsender (NULL);
    const char *tmp = getenv ("TMPDIR");
    snprintf (s_tmpdir, sizeof s_tmpdir, "%s/gridbench-XXXXXX",
              tmp && *tmp && strlen (tmp) < 128 ? tmp : "/tmp");
    if (!mkdtemp (s_tmpdir)) {
        fprintf (stderr, "gridbench: cannot make a temporary directory\n");
        return 1;
    }
    if (options.curve && s_security_keys () != 0) {
        s_remove_tree (s_tmpdir);
        return 1;
    }
    if (options.http) {
        int rc = s_http_main (&options);
        free (options.bin);
        free (options.swarm);
        free (options.out);
        free (options.relay);
        free (options.sink);
        free (options.httpload);
        return rc;
    }
    if (options.files) {
        int rc = s_files_main (&options);
        free (options.bin);
        free (options.swarm);
        free (options.out);
        free (options.relay);
        free (options.sink);
        free (options.httpload);
        return rc;
    }
    if (options.live) {
        int rc = s_live_main (&options);
        free (options.bin);
        free (options.swarm);
        free (options.out);
        free (options.relay);
        free (options.sink);
        free (options.httpload);
        return rc;
    }
    if (options.ha) {
        int rc = s_ha_main (&options);
        free (options.bin);
        free (options.swarm);
        free (options.out);
        free (options.relay);
        free (options.sink);
        free (options.httpload);
        return rc;
    }
    if (options.queue) {
        int rc = s_queue_main (&options);
        free (options.bin);
        free (options.swarm);
        free (options.out);
        free (options.relay);
        free (options.sink);
        free (options.httpload);
        return rc;
    }
    s_run_t runs [S_MAX_COUNTS];
    memset (runs, 0, sizeof runs);
    size_t measured = 0;
    size_t largest = 0;
    for (size_t at = 0; at < options.count_total; at++)
        largest = options.counts [at] > largest ? options.counts [at]
                                                : largest;
    rlim_t limit = s_raise_fd_limit (largest);
    //  The broker holds two connections per agent in one process: past
    //  its open-file limit only fewer agents can be measured
    size_t broker_max = limit > 512 ? (size_t) (limit - 256) / 2 / 100 * 100
                                    : 0;
    size_t previous = 0;
    if (options.agent_only)
        options.count_total = 0;
    for (size_t at = 0; at < options.count_total && !s_interrupted; at++) {
        size_t agents = options.counts [at];
        s_run_t *run = &runs [measured++];
        s_run_init (run, agents);
        run->relay_count = options.relays [at];
        run->broadcast_only = options.scale && run->relay_count
                              && agents >= S_SCALE_XL_AGENTS;
        if (run->relay_count) {
            //  Through relays the broker holds two connections per relay
            s_measure (&options, agents, run);
            continue;
        }
        if (agents > broker_max) {
            run->requested = agents;
            if (broker_max <= previous) {
                snprintf (run->error, sizeof run->error,
                          "not measured: the broker needs %zu open files for "
                          "%zu agents, the limit is %llu and cannot be "
                          "raised here", agents * 2 + 256, agents,
                          (unsigned long long) limit);
                s_say ("%zu agents: %s", agents, run->error);
                continue;
            }
            s_say ("%zu agents: the open-file limit (%llu, cannot be raised "
                   "here) holds %zu agents in one broker; measuring %zu",
                   agents, (unsigned long long) limit, broker_max, broker_max);
            agents = broker_max;
        }
        s_measure (&options, agents, run);
        previous = agents;
    }
    s_agent_figures_t agent_figures;
    memset (&agent_figures, 0, sizeof agent_figures);
    agent_figures.idle_cpu_percent = agent_figures.hostname_ms = -1;
    agent_figures.hostname_cpu_ms = agent_figures.echo_ms = -1;
    agent_figures.echo_cpu_ms = -1;
    agent_figures.program_ms = agent_figures.program_cpu_ms = -1;
    agent_figures.cli_p50_ms = agent_figures.cli_max_ms = -1;
    if (!options.skip_agent && !s_interrupted)
        s_measure_agent (&options, &agent_figures);
    s_stop_all ();
    bool keep = options.keep;
    for (size_t at = 0; at < measured; at++)
        keep = keep || runs [at].error [0];
    keep = keep || agent_figures.error [0];
    if (!keep)
        s_remove_tree (s_tmpdir);
    else
        s_say ("logs kept in %s", s_tmpdir);
    if (s_interrupted) {
        s_say ("interrupted: no results written");
        return 1;
    }
    s_print (runs, measured, &agent_figures);
    if (options.scale || options.swarm_procs)
        s_print_scale (runs, measured);
    else
        for (size_t at = 0; at < measured; at++)
            if (runs [at].relay_count) {
                s_print_scale (runs, measured);
                break;
            }
    int rc = s_write_json (options.out, runs, measured, &agent_figures);
    if (rc == 0)
        s_say ("results in %s", options.out);
    else
        s_say ("cannot write %s", options.out);
    free (options.bin);
    free (options.swarm);
    free (options.out);
    free (options.relay);
    free (options.sink);
    free (options.httpload);
    return rc == 0 ? 0 : 1;
}
