/*  =========================================================================
    keys - CurveZMQ key pairs on disk, and CURVE on sockets (see keys.h)
    =========================================================================
*/
#include "keys.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "names.h"

#define S_ZAP_ENFORCE_DOMAIN 93     //  ZMQ_ZAP_ENFORCE_DOMAIN (draft in 4.3)

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

bool
keys_z85_valid (const char *text)
{
    static const char alphabet [] =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        ".-:+=^!/*?&<>()[]{}@%$#";
    if (!text || strlen (text) != KEYS_Z85_LEN)
        return false;
    for (const char *c = text; *c; c++)
        if (!strchr (alphabet, *c))
            return false;
    //  Five characters carry 32 bits; some spellings overflow them
    uint8_t key [32];
    return zmq_z85_decode (key, text) != NULL;
}

const char *
keys_secret_path (const char *path, char *buf, size_t buf_len)
{
    size_t len = strlen (path);
    size_t suffix = strlen ("_secret");
    if (len > suffix && strcmp (path + len - suffix, "_secret") == 0)
        snprintf (buf, buf_len, "%s", path);
    else
        snprintf (buf, buf_len, "%s_secret", path);
    return buf;
}

//  Creates DIR and its missing parents; DIR itself mode 0700.
static int
s_make_dir (const char *dir, char *err, size_t err_len)
{
    char path [PATH_MAX];
    if (snprintf (path, sizeof path, "%s", dir) >= (int) sizeof path) {
        s_err (err, err_len, "%s: path too long", dir);
        return -1;
    }
    for (char *slash = strchr (path + 1, '/'); slash;
         slash = strchr (slash + 1, '/')) {
        *slash = 0;
        if (mkdir (path, 0755) != 0 && errno != EEXIST) {
            s_err (err, err_len, "cannot create %s: %s", path,
                   strerror (errno));
            return -1;
        }
        *slash = '/';
    }
    if (mkdir (path, 0700) != 0 && errno != EEXIST) {
        s_err (err, err_len, "cannot create %s: %s", path, strerror (errno));
        return -1;
    }
    struct stat info;
    if (stat (path, &info) != 0 || !S_ISDIR (info.st_mode)) {
        s_err (err, err_len, "%s is not a directory", path);
        return -1;
    }
    return 0;
}

int
keys_generate (const char *dir, const char *name, bool force,
               const char *const *meta, char *public_txt, char *err,
               size_t err_len)
{
    if (!name_valid (name)) {
        s_err (err, err_len, "'%s' is not a valid key name (letters, digits, "
               "'_' and '-', 1 to %d)", name, NAME_MAX_LEN);
        return -1;
    }
    if (s_make_dir (dir, err, err_len) != 0)
        return -1;
    char public_path [PATH_MAX], secret_path [PATH_MAX];
    snprintf (public_path, sizeof public_path, "%s/%s.key", dir, name);
    snprintf (secret_path, sizeof secret_path, "%s/%s.key_secret", dir, name);
    if (!force
        && (access (public_path, F_OK) == 0
            || access (secret_path, F_OK) == 0)) {
        s_err (err, err_len, "%s already exists: keep it, or pass --force to "
               "replace the pair (every peer that trusts the old public key "
               "must then get the new one)", public_path);
        return -1;
    }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        s_err (err, err_len, "cannot make a key pair");
        return -1;
    }
    for (size_t index = 0; meta && meta [index] && meta [index + 1];
         index += 2)
        zcert_set_meta (cert, meta [index], "%s", meta [index + 1]);
    //  The secret file must never exist with a looser mode, not even for
    //  a moment: create it under umask 077.
    mode_t old_mask = umask (077);
    unlink (secret_path);
    const char *failed = secret_path;
    int rc = zcert_save_secret (cert, secret_path);
    umask (old_mask);
    if (rc == 0)
        rc = chmod (secret_path, 0600);
    if (rc == 0) {
        failed = public_path;
        unlink (public_path);
        rc = zcert_save_public (cert, public_path);
        if (rc == 0)
            rc = chmod (public_path, 0644);
    }
    if (rc != 0)
        s_err (err, err_len, "cannot write %s: %s", failed, strerror (errno));
    else
        snprintf (public_txt, KEYS_TEXT_SIZE, "%s", zcert_public_txt (cert));
    zcert_destroy (&cert);
    return rc == 0 ? 0 : -1;
}

//  Reads the Z85 text under KEY ("curve/public-key") of the zcert file
//  PATH into OUT; returns 0 or -1.
static int
s_read_field (zconfig_t *root, const char *key, char *out)
{
    const char *text = zconfig_get (root, key, NULL);
    if (!text || !keys_z85_valid (text))
        return -1;
    snprintf (out, KEYS_TEXT_SIZE, "%s", text);
    return 0;
}

zcert_t *
keys_load_pair (const char *path, char *err, size_t err_len)
{
    char secret_path [PATH_MAX];
    keys_secret_path (path, secret_path, sizeof secret_path);
    struct stat info;
    if (stat (secret_path, &info) != 0) {
        s_err (err, err_len, "cannot read the secret key %s: %s", secret_path,
               strerror (errno));
        return NULL;
    }
    if (!S_ISREG (info.st_mode)) {
        s_err (err, err_len, "%s is not a regular file", secret_path);
        return NULL;
    }
    if (info.st_mode & 077) {
        s_err (err, err_len, "%s is readable by others (mode %04o): run "
               "'chmod 600 %s', and replace the key pair if anyone may "
               "have copied it", secret_path,
               (unsigned) (info.st_mode & 07777), secret_path);
        return NULL;
    }
    zconfig_t *root = zconfig_load (secret_path);
    if (!root) {
        s_err (err, err_len, "cannot read the secret key %s: %s",
               secret_path, errno ? strerror (errno) : "not a key file");
        return NULL;
    }
    char public_txt [KEYS_TEXT_SIZE], secret_txt [KEYS_TEXT_SIZE];
    char derived [KEYS_TEXT_SIZE];
    int rc = s_read_field (root, "curve/public-key", public_txt);
    if (rc == 0)
        rc = s_read_field (root, "curve/secret-key", secret_txt);
    zconfig_destroy (&root);
    if (rc != 0) {
        s_err (err, err_len, "%s is not a secret key file (it needs "
               "curve/public-key and curve/secret-key, 40 characters of "
               "Z85 each)", secret_path);
        return NULL;
    }
    if (zmq_curve_public (derived, secret_txt) != 0
        || strcmp (derived, public_txt) != 0) {
        s_err (err, err_len, "%s: its public key does not belong to its "
               "secret key", secret_path);
        return NULL;
    }
    uint8_t public_key [32], secret_key [32];
    zmq_z85_decode (public_key, public_txt);
    zmq_z85_decode (secret_key, secret_txt);
    zcert_t *cert = zcert_new_from (public_key, secret_key);
    memset (secret_txt, 0, sizeof secret_txt);
    memset (secret_key, 0, sizeof secret_key);
    if (!cert)
        s_err (err, err_len, "cannot use the key pair %s", secret_path);
    return cert;
}

int
keys_read_public (const char *text, char *public_txt, char *err,
                  size_t err_len)
{
    if (!text || !*text) {
        s_err (err, err_len, "no public key given");
        return -1;
    }
    if (keys_z85_valid (text) && access (text, F_OK) != 0) {
        snprintf (public_txt, KEYS_TEXT_SIZE, "%s", text);
        return 0;
    }
    zconfig_t *root = access (text, R_OK) == 0 ? zconfig_load (text) : NULL;
    if (!root) {
        s_err (err, err_len, "'%s' is neither a public key (40 characters "
               "of Z85) nor a readable key file", text);
        return -1;
    }
    int rc = s_read_field (root, "curve/public-key", public_txt);
    zconfig_destroy (&root);
    if (rc != 0)
        s_err (err, err_len, "%s is not a key file (no curve/public-key of "
               "40 characters of Z85)", text);
    return rc;
}

void
keys_curve_client (zsock_t *sock, zcert_t *cert, const char *server_txt)
{
    zcert_apply (cert, sock);
    zsock_set_curve_serverkey (sock, server_txt);
}

int
keys_curve_server (zsock_t *sock, zcert_t *cert, const char *domain,
                   char *err, size_t err_len)
{
    zsock_set_zap_domain (sock, domain);
    zsock_set_curve_server (sock, 1);
    zcert_apply (cert, sock);
    int enforce = 1, check = 0;
    size_t check_len = sizeof check;
    void *handle = zsock_resolve (sock);
    if (zmq_setsockopt (handle, S_ZAP_ENFORCE_DOMAIN, &enforce,
                        sizeof enforce) != 0
        || zmq_getsockopt (handle, S_ZAP_ENFORCE_DOMAIN, &check,
                           &check_len) != 0
        || check != 1) {
        s_err (err, err_len, "this libzmq cannot enforce ZAP (option %d: %s): "
               "refusing to serve CURVE without it",
               S_ZAP_ENFORCE_DOMAIN, zmq_strerror (zmq_errno ()));
        return -1;
    }
    if (zsock_curve_server (sock) != 1) {
        s_err (err, err_len, "this libzmq has no CURVE support");
        return -1;
    }
    return 0;
}

static zsock_t *
s_monitor_new (zsock_t *sock, int events)
{
    static int sequence = 0;
    char endpoint [128];
    snprintf (endpoint, sizeof endpoint, "inproc://grid-keys-monitor-%d-%d",
              (int) getpid (), ++sequence);
    if (zmq_socket_monitor (zsock_resolve (sock), endpoint, events) != 0)
        return NULL;
    zsock_t *monitor = zsock_new (ZMQ_PAIR);
    if (monitor && zsock_connect (monitor, "%s", endpoint) != 0)
        zsock_destroy (&monitor);
    return monitor;
}

#define S_HANDSHAKE_EVENTS (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH \
                            | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL \
                            | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL \
                            | ZMQ_EVENT_HANDSHAKE_SUCCEEDED)

zsock_t *
keys_monitor_new (zsock_t *sock)
{
    return s_monitor_new (sock, S_HANDSHAKE_EVENTS);
}

zsock_t *
keys_monitor_new_lossy (zsock_t *sock)
{
    return s_monitor_new (sock, S_HANDSHAKE_EVENTS | ZMQ_EVENT_DISCONNECTED
                                | ZMQ_EVENT_CONNECTED
                                | ZMQ_EVENT_CONNECT_RETRIED);
}

//  An errno that says the connection itself failed, not the handshake's
//  content.
static bool
s_transport_error (int code)
{
    return code == ECONNRESET || code == EPIPE || code == ECONNABORTED
           || code == ETIMEDOUT || code == ENETDOWN || code == ENETUNREACH
           || code == EHOSTUNREACH || code == ECONNREFUSED;
}

int
keys_monitor_read (zsock_t *monitor, char *why, size_t why_len)
{
    zmsg_t *msg = zmsg_recv (monitor);
    if (!msg)
        return -1;
    zframe_t *frame = zmsg_first (msg);
    int rc = 0;
    if (frame && zframe_size (frame) == 6) {
        uint16_t event;
        uint32_t value;
        memcpy (&event, zframe_data (frame), 2);
        memcpy (&value, zframe_data (frame) + 2, 4);
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            rc = 3;
        else
        if (event == ZMQ_EVENT_DISCONNECTED)
            rc = 4;
        else
        if (event == ZMQ_EVENT_CONNECTED)
            rc = 5;
        else
        if (event == ZMQ_EVENT_CONNECT_RETRIED)
            rc = 6;
        else
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
            s_err (why, why_len, "the broker refused this key (ZAP status "
                   "%u): it is unknown to the broker, or it was revoked",
                   value);
            rc = 1;
        }
        else
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
            && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
            s_err (why, why_len, "the broker and this program disagree on "
                   "encryption: one side runs with --insecure (plaintext), "
                   "the other with CURVE keys");
            rc = 2;
        }
        else
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
            s_err (why, why_len, "the CURVE handshake with the broker failed "
                   "(protocol error 0x%x): check the broker's public key "
                   "(--broker-key)", value);
            rc = 2;
        }
        else
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
            && s_transport_error ((int) value)) {
            //  The connection went away mid-handshake (a broker that
            //  restarts, a network that drops): no key is to blame
            s_err (why, why_len, "the connection to the broker was lost "
                   "during the handshake (%s): retrying",
                   strerror ((int) value));
            rc = 2;
        }
        else
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            s_err (why, why_len, "the handshake with the broker failed (%s): "
                   "check the broker's public key (--broker-key)",
                   strerror ((int) value));
            rc = 2;
        }
    }
    zmsg_destroy (&msg);
    return rc;
}

static void
s_keygen_usage (const char *program, const char *default_dir,
                const char *default_name, FILE *out)
{
    fprintf (out,
             "usage: %s keygen [--out DIR] [--name NAME] [--force]\n"
             "\n"
             "Writes a new CurveZMQ key pair: DIR/NAME.key (the public key,\n"
             "safe to copy to other hosts) and DIR/NAME.key_secret (mode\n"
             "0600; it never leaves this host). Prints the public key.\n"
             "\n"
             "  --out DIR     directory for the pair        [%s]\n"
             "  --name NAME   file name of the pair          [%s]\n"
             "  --force       replace an existing pair\n"
             "  -h, --help    this text\n"
             "\n"
             "See docs/SECURITY.md for enrolling, rotating and revoking "
             "keys.\n",
             program, default_dir, default_name);
}

int
keys_keygen_main (const char *program, const char *default_dir,
                  const char *default_name, int argc, char **argv,
                  FILE *out, FILE *err)
{
    const char *dir = default_dir;
    const char *name = default_name;
    bool force = false;
    for (int index = 1; index < argc; index++) {
        const char *arg = argv [index];
        const char *value = NULL;
        if (strcmp (arg, "-h") == 0 || strcmp (arg, "--help") == 0) {
            s_keygen_usage (program, default_dir, default_name, out);
            return 0;
        }
        if (strcmp (arg, "--force") == 0) {
            force = true;
            continue;
        }
        bool is_out = strncmp (arg, "--out", 5) == 0
                      && (arg [5] == 0 || arg [5] == '=');
        bool is_name = strncmp (arg, "--name", 6) == 0
                       && (arg [6] == 0 || arg [6] == '=');
        if (!is_out && !is_name) {
            fprintf (err, "%s keygen: unknown argument '%s' (see %s keygen "
                     "--help)\n", program, arg, program);
            return 2;
        }
        const char *equals = strchr (arg, '=');
        if (equals)
            value = equals + 1;
        else
        if (index + 1 < argc)
            value = argv [++index];
        if (!value || !*value) {
            fprintf (err, "%s keygen: %s needs a value\n", program,
                     is_out ? "--out" : "--name");
            return 2;
        }
        if (is_out)
            dir = value;
        else
            name = value;
    }
    if (!dir || !*dir) {
        fprintf (err, "%s keygen: no directory: pass --out DIR\n", program);
        return 2;
    }
    if (!name_valid (name)) {
        fprintf (err, "%s keygen: --name: '%s' is not a valid key name "
                 "(letters, digits, '_' and '-', 1 to %d)\n", program, name,
                 NAME_MAX_LEN);
        return 2;
    }
    char public_txt [KEYS_TEXT_SIZE];
    char why [PATH_MAX + 256];
    const char *meta [] = {"program", program, NULL};
    if (keys_generate (dir, name, force, meta, public_txt, why,
                       sizeof why) != 0) {
        fprintf (err, "%s keygen: %s\n", program, why);
        return 1;
    }
    fprintf (out, "wrote %s/%s.key (public key: copy it where it is "
             "needed)\n", dir, name);
    fprintf (out, "wrote %s/%s.key_secret (secret, mode 0600: keep it on "
             "this host)\n", dir, name);
    fprintf (out, "public key: %s\n", public_txt);
    return 0;
}
