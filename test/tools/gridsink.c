/*  =========================================================================
    gridsink - libzmq's own cost of an agent's connections, for comparison

    Binds what a broker or a relay binds for its agents, a ROUTER (agent
    endpoint) and an XPUB (commands endpoint), with the broker's socket
    options, and reads and drops everything that arrives. It keeps no state
    per peer. Point a gridswarm of N agents at it and the growth of its RSS
    divided by N is what libzmq itself costs per agent (one DEALER and one
    SUB connection, their pipes and buffers): the floor a relay's memory
    per agent is compared with (gridbench --scale).

    With --key FILE both sockets are CURVE servers with that key pair and
    no ZAP handler (every client key is let in): the handshake and the
    per-connection CURVE state cost what they cost at a relay.

    Threading: single-threaded (plus libzmq's I/O threads).
    =========================================================================
*/
#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>

#include "../../proto/keys.h"
#include "../../proto/proto.h"

static volatile sig_atomic_t s_stopping = 0;

static void
s_on_signal (int signo)
{
    s_stopping = 1;
}

static const char *s_usage =
    "usage: gridsink --agents EP --publish EP [options]\n"
    "\n"
    "Binds a ROUTER on the agent endpoint and an XPUB on the commands\n"
    "endpoint, as a broker or relay does, and drops everything it reads:\n"
    "its RSS growth per connected gridswarm agent is libzmq's own cost.\n"
    "\n"
    "options:\n"
    "  --agents EP          agent endpoint (ROUTER)\n"
    "  --publish EP         commands endpoint (XPUB)\n"
    "  --key FILE           CURVE server with this key pair (default:\n"
    "                       plaintext)\n"
    "  --io-threads N       ZeroMQ I/O threads                     [1]\n"
    "  -h, --help           this text\n";

//  As the broker's s_bind (broker/broker.c): the options that shape the
//  memory of a connection.
static void *
s_bind (void *context, int type, const char *endpoint, zcert_t *cert)
{
    void *socket = zmq_socket (context, type);
    if (!socket)
        return NULL;
    int64_t max_size = PROTO_MAX_FRAME;
    zmq_setsockopt (socket, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size);
    int value = 100000;
    zmq_setsockopt (socket, ZMQ_SNDHWM, &value, sizeof value);
    zmq_setsockopt (socket, ZMQ_RCVHWM, &value, sizeof value);
    value = 0;
    zmq_setsockopt (socket, ZMQ_LINGER, &value, sizeof value);
    value = 10000;
    zmq_setsockopt (socket, ZMQ_HANDSHAKE_IVL, &value, sizeof value);
    value = 4096;
    zmq_setsockopt (socket, ZMQ_BACKLOG, &value, sizeof value);
    if (cert) {
        value = 1;
        zmq_setsockopt (socket, ZMQ_CURVE_SERVER, &value, sizeof value);
        zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY, zcert_secret_key (cert),
                        32);
    }
    if (zmq_bind (socket, endpoint) != 0) {
        fprintf (stderr, "gridsink: cannot bind %s: %s\n", endpoint,
                 zmq_strerror (errno));
        zmq_close (socket);
        return NULL;
    }
    return socket;
}

//  Reads SOCKET until it is empty; returns the messages read.
static size_t
s_drain (void *socket)
{
    size_t count = 0;
    zmq_msg_t part;
    zmq_msg_init (&part);
    while (zmq_msg_recv (&part, socket, ZMQ_DONTWAIT) >= 0)
        if (!zmq_msg_more (&part))
            count++;
    zmq_msg_close (&part);
    return count;
}

int
main (int argc, char *argv [])
{
    static const struct option table [] = {
        {"agents", required_argument, NULL, 'a'},
        {"publish", required_argument, NULL, 'p'},
        {"key", required_argument, NULL, 'k'},
        {"io-threads", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    const char *agents_ep = NULL, *publish_ep = NULL, *key = NULL;
    int io_threads = 1;
    int option;
    while ((option = getopt_long (argc, argv, "h", table, NULL)) != -1) {
        char *end = NULL;
        switch (option) {
            case 'a':
                agents_ep = optarg;
                break;
            case 'p':
                publish_ep = optarg;
                break;
            case 'k':
                key = optarg;
                break;
            case 't':
                io_threads = (int) strtol (optarg, &end, 10);
                if (*end || io_threads < 1 || io_threads > 64) {
                    fprintf (stderr, "gridsink: --io-threads: expected "
                             "1..64\n");
                    return 2;
                }
                break;
            case 'h':
                fputs (s_usage, stdout);
                return 0;
            default:
                fprintf (stderr, "run 'gridsink --help' for the options\n");
                return 2;
        }
    }
    if (optind < argc || !agents_ep || !publish_ep) {
        fprintf (stderr, "gridsink: --agents and --publish are needed, and "
                 "nothing else (run 'gridsink --help')\n");
        return 2;
    }
    zcert_t *cert = NULL;
    if (key) {
        char err [256];
        cert = keys_load_pair (key, err, sizeof err);
        if (!cert) {
            fprintf (stderr, "gridsink: --key: %s\n", err);
            return 2;
        }
    }
    //  The same room for sockets as the broker: two per agent
    void *context = zmq_ctx_new ();
    zmq_ctx_set (context, ZMQ_IO_THREADS, io_threads);
    zmq_ctx_set (context, ZMQ_MAX_SOCKETS, 65536);
    void *router = s_bind (context, ZMQ_ROUTER, agents_ep, cert);
    void *xpub = router ? s_bind (context, ZMQ_XPUB, publish_ep, cert) : NULL;
    zcert_destroy (&cert);
    if (!xpub) {
        if (router)
            zmq_close (router);
        zmq_ctx_term (context);
        return 1;
    }
    struct sigaction action;
    memset (&action, 0, sizeof action);
    action.sa_handler = s_on_signal;
    sigaction (SIGTERM, &action, NULL);
    sigaction (SIGINT, &action, NULL);
    printf ("gridsink: ROUTER on %s, XPUB on %s%s\n", agents_ep, publish_ep,
            key ? ", CURVE" : "");
    fflush (stdout);
    size_t messages = 0, subscriptions = 0;
    zmq_pollitem_t items [] = {
        {router, 0, ZMQ_POLLIN, 0},
        {xpub, 0, ZMQ_POLLIN, 0}
    };
    while (!s_stopping) {
        if (zmq_poll (items, 2, 1000) < 0 && errno != EINTR)
            break;
        messages += s_drain (router);
        subscriptions += s_drain (xpub);
    }
    printf ("gridsink: %zu messages and %zu subscriptions dropped\n",
            messages, subscriptions);
    zmq_close (router);
    zmq_close (xpub);
    zmq_ctx_term (context);
    return 0;
}
