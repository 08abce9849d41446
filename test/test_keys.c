/*  =========================================================================
    test_keys - key pairs on disk, public keys, CURVE sockets that fail
    closed without a ZAP handler, and the keygen command
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "../proto/keys.h"

static char s_dir [256];

static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "%s/grid-keys-XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (s_dir))
        return -1;
    zsys_init ();
    zsys_set_logsender (NULL);
    return 0;
}

static int
s_teardown (void **state)
{
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", s_dir);
    return system (command) == 0 ? 0 : -1;
}

static const char *
s_path (const char *name)
{
    static char path [400];
    snprintf (path, sizeof path, "%s/%s", s_dir, name);
    return path;
}

static mode_t
s_mode (const char *path)
{
    struct stat info;
    assert_int_equal (stat (path, &info), 0);
    return info.st_mode & 07777;
}

static void
test_keys_z85_valid (void **state)
{
    zcert_t *cert = zcert_new ();
    assert_true (keys_z85_valid (zcert_public_txt (cert)));
    assert_true (keys_z85_valid (zcert_secret_txt (cert)));
    zcert_destroy (&cert);
    assert_false (keys_z85_valid (NULL));
    assert_false (keys_z85_valid (""));
    assert_false (keys_z85_valid ("short"));
    //  41 characters
    assert_false (keys_z85_valid ("0123456789012345678901234567890123456789a"));
    //  A character outside the alphabet (a space, a quote)
    assert_false (keys_z85_valid ("012345678901234567890123456789012345678 "));
    assert_false (keys_z85_valid ("0123456789012345678901234567890123456\"78"));
}

static void
test_keys_generate_writes_private_secret (void **state)
{
    char public_txt [KEYS_TEXT_SIZE], err [512];
    const char *meta [] = {"role", "admin", NULL};
    char dir [300];
    snprintf (dir, sizeof dir, "%s/new/keys", s_dir);
    assert_int_equal (keys_generate (dir, "alice", false, meta, public_txt,
                                     err, sizeof err), 0);
    assert_true (keys_z85_valid (public_txt));
    assert_int_equal (s_mode (dir), 0700);
    char path [400];
    snprintf (path, sizeof path, "%s/alice.key", dir);
    assert_int_equal (s_mode (path), 0644);
    snprintf (path, sizeof path, "%s/alice.key_secret", dir);
    assert_int_equal (s_mode (path), 0600);

    //  Never overwritten by accident
    char again [KEYS_TEXT_SIZE];
    assert_int_equal (keys_generate (dir, "alice", false, NULL, again, err,
                                     sizeof err), -1);
    assert_non_null (strstr (err, "--force"));
    assert_int_equal (keys_generate (dir, "alice", true, NULL, again, err,
                                     sizeof err), 0);
    assert_string_not_equal (again, public_txt);
    //  Names are grid names
    assert_int_equal (keys_generate (dir, "../evil", false, NULL, again, err,
                                     sizeof err), -1);
}

static void
test_keys_load_pair_refuses_loose_or_broken_files (void **state)
{
    char public_txt [KEYS_TEXT_SIZE], err [512];
    assert_int_equal (keys_generate (s_dir, "bob", false, NULL, public_txt,
                                     err, sizeof err), 0);
    //  By the public file or by the secret file
    zcert_t *cert = keys_load_pair (s_path ("bob.key"), err, sizeof err);
    assert_non_null (cert);
    assert_string_equal (zcert_public_txt (cert), public_txt);
    zcert_destroy (&cert);
    cert = keys_load_pair (s_path ("bob.key_secret"), err, sizeof err);
    assert_non_null (cert);
    zcert_destroy (&cert);

    //  Readable by the group: refused, with the fix in the sentence
    assert_int_equal (chmod (s_path ("bob.key_secret"), 0640), 0);
    assert_null (keys_load_pair (s_path ("bob.key"), err, sizeof err));
    assert_non_null (strstr (err, "chmod 600"));
    assert_int_equal (chmod (s_path ("bob.key_secret"), 0600), 0);

    //  Missing
    assert_null (keys_load_pair (s_path ("nobody.key"), err, sizeof err));
    assert_non_null (strstr (err, "nobody.key_secret"));

    //  Not a key file
    FILE *file = fopen (s_path ("junk.key_secret"), "w");
    assert_non_null (file);
    fputs ("curve\n    public-key = \"nonsense\"\n", file);
    fclose (file);
    assert_int_equal (chmod (s_path ("junk.key_secret"), 0600), 0);
    assert_null (keys_load_pair (s_path ("junk.key"), err, sizeof err));

    //  A public key that is not the secret key's
    zcert_t *one = zcert_new (), *two = zcert_new ();
    file = fopen (s_path ("mixed.key_secret"), "w");
    assert_non_null (file);
    fprintf (file, "curve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
             zcert_public_txt (one), zcert_secret_txt (two));
    fclose (file);
    zcert_destroy (&one);
    zcert_destroy (&two);
    assert_int_equal (chmod (s_path ("mixed.key_secret"), 0600), 0);
    assert_null (keys_load_pair (s_path ("mixed.key"), err, sizeof err));
    assert_non_null (strstr (err, "does not belong"));
}

static void
test_keys_read_public (void **state)
{
    char public_txt [KEYS_TEXT_SIZE], read [KEYS_TEXT_SIZE], err [512];
    assert_int_equal (keys_generate (s_dir, "carol", false, NULL, public_txt,
                                     err, sizeof err), 0);
    assert_int_equal (keys_read_public (public_txt, read, err, sizeof err), 0);
    assert_string_equal (read, public_txt);
    assert_int_equal (keys_read_public (s_path ("carol.key"), read, err,
                                        sizeof err), 0);
    assert_string_equal (read, public_txt);
    assert_int_equal (keys_read_public (s_path ("carol.key_secret"), read,
                                        err, sizeof err), 0);
    assert_string_equal (read, public_txt);
    assert_int_equal (keys_read_public ("not a key", read, err, sizeof err),
                      -1);
    assert_int_equal (keys_read_public ("", read, err, sizeof err), -1);
    assert_int_equal (keys_read_public (s_path ("none.key"), read, err,
                                        sizeof err), -1);
}

//  A CURVE server whose ZAP handler is missing lets nobody in: the client
//  sees its handshake fail and the server never gets the message.
static void
test_keys_curve_server_fails_closed_without_zap (void **state)
{
    zcert_t *server_cert = zcert_new (), *client_cert = zcert_new ();
    char err [256], endpoint [400];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/closed.ipc", s_dir);
    zsock_t *server = zsock_new (ZMQ_ROUTER);
    assert_int_equal (keys_curve_server (server, server_cert,
                                         KEYS_DOMAIN_CLIENTS, err,
                                         sizeof err), 0);
    assert_int_equal (zsock_bind (server, "%s", endpoint), 0);
    zsock_t *client = zsock_new (ZMQ_DEALER);
    zsock_set_linger (client, 0);
    keys_curve_client (client, client_cert, zcert_public_txt (server_cert));
    zsock_t *monitor = keys_monitor_new (client);
    assert_non_null (monitor);
    assert_int_equal (zsock_connect (client, "%s", endpoint), 0);
    zstr_send (client, "let me in");

    zpoller_t *poller = zpoller_new (monitor, server, NULL);
    void *which = zpoller_wait (poller, 10000);
    assert_true (which == monitor);
    char why [256];
    int event = keys_monitor_read (monitor, why, sizeof why);
    assert_true (event == 1 || event == 2);
    //  Nothing came through, then or since
    assert_false (zsock_events (server) & ZMQ_POLLIN);
    zpoller_destroy (&poller);
    zsock_destroy (&monitor);
    zsock_destroy (&client);
    zsock_destroy (&server);
    zcert_destroy (&server_cert);
    zcert_destroy (&client_cert);
}

static void
test_keys_keygen_command (void **state)
{
    char dir [300];
    snprintf (dir, sizeof dir, "%s/cli", s_dir);
    char *out_text = NULL, *err_text = NULL;
    size_t out_size = 0, err_size = 0;
    FILE *out = open_memstream (&out_text, &out_size);
    FILE *err = open_memstream (&err_text, &err_size);
    char *argv [] = {"keygen", "--out", dir, "--name", "dave", NULL};
    assert_int_equal (keys_keygen_main ("gridcli", "/nowhere", "client", 5,
                                        argv, out, err), 0);
    fflush (out);
    assert_non_null (strstr (out_text, "public key: "));
    assert_non_null (strstr (out_text, "dave.key_secret"));
    //  A second time: refused, the pair is kept
    assert_int_equal (keys_keygen_main ("gridcli", "/nowhere", "client", 5,
                                        argv, out, err), 1);
    char *bad [] = {"keygen", "--bogus", NULL};
    assert_int_equal (keys_keygen_main ("gridcli", "/nowhere", "client", 2,
                                        bad, out, err), 2);
    //  A bad --name is a usage error, like a bad flag, and writes nothing
    char *bad_name [] = {"keygen", "--out", dir, "--name", "../x", NULL};
    assert_int_equal (keys_keygen_main ("gridcli", "/nowhere", "client", 5,
                                        bad_name, out, err), 2);
    char x_path [PATH_MAX];
    snprintf (x_path, sizeof x_path, "%s/../x.key", dir);
    assert_int_equal (access (x_path, F_OK), -1);
    char *help [] = {"keygen", "--help", NULL};
    assert_int_equal (keys_keygen_main ("gridcli", "/nowhere", "client", 2,
                                        help, out, err), 0);
    fclose (out);
    fclose (err);
    free (out_text);
    free (err_text);
}

//  Sends one monitor event (EVENT, VALUE) on WRITER and reads it back
//  from READER with keys_monitor_read.
static int
s_monitor_event (zsock_t *writer, zsock_t *reader, uint16_t event,
                 uint32_t value, char *why, size_t why_len)
{
    uint8_t data [6];
    memcpy (data, &event, 2);
    memcpy (data + 2, &value, 4);
    zmsg_t *msg = zmsg_new ();
    zmsg_addmem (msg, data, sizeof data);
    zmsg_addstr (msg, "tcp://127.0.0.1:7702");
    assert_int_equal (zmsg_send (&msg, writer), 0);
    why [0] = 0;
    return keys_monitor_read (reader, why, why_len);
}

//  A handshake that fails because the connection went away (a broker
//  restart) blames no key; one that fails for another reason does.
static void
test_keys_monitor_reset_blames_no_key (void **state)
{
    zsock_t *reader = zsock_new_pair ("@inproc://keys-monitor-test");
    zsock_t *writer = zsock_new_pair (">inproc://keys-monitor-test");
    assert_non_null (reader);
    assert_non_null (writer);
    char why [512];
    assert_int_equal (s_monitor_event (writer, reader,
                                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                       ECONNRESET, why, sizeof why), 2);
    assert_null (strstr (why, "key"));
    assert_non_null (strstr (why, "connection to the broker was lost"));
    assert_int_equal (s_monitor_event (writer, reader,
                                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                       EPIPE, why, sizeof why), 2);
    assert_null (strstr (why, "key"));
    assert_int_equal (s_monitor_event (writer, reader,
                                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                       EPROTO, why, sizeof why), 2);
    assert_non_null (strstr (why, "--broker-key"));
    assert_int_equal (s_monitor_event (writer, reader,
                                       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400,
                                       why, sizeof why), 1);
    assert_int_equal (s_monitor_event (writer, reader,
                                       ZMQ_EVENT_HANDSHAKE_SUCCEEDED, 0, why,
                                       sizeof why), 3);
    zsock_destroy (&writer);
    zsock_destroy (&reader);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_keys_z85_valid),
        cmocka_unit_test (test_keys_monitor_reset_blames_no_key),
        cmocka_unit_test (test_keys_generate_writes_private_secret),
        cmocka_unit_test (test_keys_load_pair_refuses_loose_or_broken_files),
        cmocka_unit_test (test_keys_read_public),
        cmocka_unit_test (test_keys_curve_server_fails_closed_without_zap),
        cmocka_unit_test (test_keys_keygen_command),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
