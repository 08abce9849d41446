/*  =========================================================================
    test_relay_upstream - gridrelay's list of upstreams (relay/upstream.h):
    the lists read and refused, the redirects followed (only into the
    list, not to the one in use, a few a minute), the failover order, and
    the broker key of a rotation tried on loss and settled on handshake;
    and the record of the rotations in the state dir (relay/brokerkeys.h):
    written whole with mode 0600, taken up at start, and refused when it
    is damaged (truncated, garbage, too large, a directory or a link)
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../proto/log.h"
#include "../relay/brokerkeys.h"
#include "../relay/upstream.h"

#define S_KEY_A "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
#define S_KEY_B "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
#define S_KEY_C "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs"

static void
test_upstream_lists (void **state)
{
    char err [512];
    relay_upstream_t *list = relay_upstream_new ("tcp://a:1, tcp://b:1",
                                                 "tcp://a:2,tcp://b:2",
                                                 S_KEY_A, err, sizeof err);
    assert_non_null (list);
    assert_int_equal (relay_upstream_count (list), 2);
    assert_string_equal (relay_upstream_endpoint (list, 1), "tcp://b:1");
    assert_string_equal (relay_upstream_publish (list, 1), "tcp://b:2");
    //  One key for all
    assert_string_equal (relay_upstream_key (list, 1), S_KEY_A);
    assert_null (relay_upstream_endpoint (list, 2));
    relay_upstream_destroy (&list);
    assert_null (list);
    relay_upstream_destroy (&list);
    //  One key each
    list = relay_upstream_new ("tcp://a:1,tcp://b:1", "tcp://a:2,tcp://b:2",
                               S_KEY_A "," S_KEY_B, err, sizeof err);
    assert_non_null (list);
    assert_string_equal (relay_upstream_key (list, 1), S_KEY_B);
    relay_upstream_destroy (&list);
    //  Insecure: no keys
    list = relay_upstream_new ("tcp://a:1", "tcp://a:2", NULL, err,
                               sizeof err);
    assert_non_null (list);
    assert_string_equal (relay_upstream_key (list, 0), "");
    relay_upstream_destroy (&list);
    //  Refused, with a sentence
    struct { const char *ends, *pubs, *keys, *says; } bad [] = {
        {"tcp://a:1,tcp://b:1", "tcp://a:2", NULL, "one commands endpoint"},
        {"tcp://a:1,,tcp://b:1", "x,y,z", NULL, "none empty"},
        {"", "", NULL, "none empty"},
        {"a,b,c", "a,b,c", S_KEY_A "," S_KEY_B, "one per endpoint"},
        {"a", "b", "not-a-key", "upstream key"},
        {"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,"
         "o,p,q", NULL, "1 to 16"},
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        *err = 0;
        assert_null (relay_upstream_new (bad [index].ends, bad [index].pubs,
                                         bad [index].keys, err, sizeof err));
        if (!strstr (err, bad [index].says))
            fprintf (stderr, "case %zu: %s\n", index, err);
        assert_non_null (strstr (err, bad [index].says));
    }
    //  The check reads no key file
    assert_int_equal (relay_upstream_check ("a,b", "c,d", "/nonexistent",
                                            err, sizeof err), 0);
    assert_int_equal (relay_upstream_check ("a,b", "c", NULL, err,
                                            sizeof err), -1);
}

static void
test_upstream_redirects (void **state)
{
    char err [512];
    relay_upstream_t *list = relay_upstream_new ("ipc://a,ipc://b,ipc://c",
                                                 "ipc://pa,ipc://pb,ipc://pc",
                                                 NULL, err, sizeof err);
    assert_non_null (list);
    assert_int_equal (relay_upstream_index (list), 0);
    assert_int_equal (relay_upstream_next (list), 1);
    size_t index = 99;
    const char *why = NULL;
    //  Only into the list, and not to the one in use
    assert_int_equal (relay_upstream_redirect (list, "ipc://elsewhere", 1000,
                                               &index, &why), -1);
    assert_non_null (strstr (why, "not one of"));
    assert_int_equal (relay_upstream_redirect (list, "ipc://a", 1000, &index,
                                               &why), -1);
    assert_non_null (strstr (why, "in use"));
    assert_int_equal (relay_upstream_redirect (list, NULL, 1000, &index,
                                               &why), -1);
    //  Followed, four times a minute at most (two standbys naming each
    //  other do not keep the relay moving)
    int64_t now_ms = 1000;
    for (int count = 0; count < RELAY_UPSTREAM_REDIRECTS_MAX; count++) {
        const char *to = relay_upstream_index (list) == 1 ? "ipc://c"
                                                          : "ipc://b";
        assert_int_equal (relay_upstream_redirect (list, to, now_ms, &index,
                                                   &why), 0);
        relay_upstream_use (list, index);
        now_ms += 1000;
    }
    assert_int_equal (relay_upstream_redirect (list, "ipc://a", now_ms,
                                               &index, &why), -1);
    assert_non_null (strstr (why, "too many"));
    //  A minute later, again
    now_ms += RELAY_UPSTREAM_REDIRECT_WINDOW_MS + 1;
    assert_int_equal (relay_upstream_redirect (list, "ipc://a", now_ms,
                                               &index, &why), 0);
    assert_int_equal (index, 0);
    //  A welcome counts them from zero
    relay_upstream_use (list, 2);
    assert_int_equal (relay_upstream_next (list), 0);
    relay_upstream_welcomed (list);
    for (int count = 0; count < RELAY_UPSTREAM_REDIRECTS_MAX; count++)
        assert_int_equal (relay_upstream_redirect (list, "ipc://a", now_ms,
                                                   &index, &why), 0);
    relay_upstream_destroy (&list);
}

static void
test_upstream_broker_key (void **state)
{
    char err [512];
    relay_upstream_t *list = relay_upstream_new ("ipc://a,ipc://b,ipc://c",
                                                 "ipc://pa,ipc://pb,ipc://pc",
                                                 S_KEY_A "," S_KEY_A ","
                                                 S_KEY_C, err, sizeof err);
    assert_non_null (list);
    //  Nothing to swap without a rotation
    assert_false (relay_upstream_swap (list));
    assert_false (relay_upstream_settle (list));
    assert_null (relay_upstream_next_key_of (list));
    //  Bad announcements
    assert_int_equal (relay_upstream_next_key (list, NULL), -1);
    assert_int_equal (relay_upstream_next_key (list, "short"), -1);
    assert_int_equal (relay_upstream_next_key (list, S_KEY_A), -1);
    //  The next key: news once
    assert_int_equal (relay_upstream_next_key (list, S_KEY_B), 1);
    assert_int_equal (relay_upstream_next_key (list, S_KEY_B), 0);
    assert_string_equal (relay_upstream_next_key_of (list), S_KEY_B);
    //  A handshake on the old key settles nothing
    assert_false (relay_upstream_settle (list));
    //  Each loss tries the other key
    assert_true (relay_upstream_swap (list));
    assert_string_equal (relay_upstream_key (list, 0), S_KEY_B);
    assert_true (relay_upstream_swap (list));
    assert_string_equal (relay_upstream_key (list, 0), S_KEY_A);
    assert_true (relay_upstream_swap (list));
    //  Through on the new key: every endpoint of the old key takes it,
    //  the others keep theirs
    assert_true (relay_upstream_settle (list));
    assert_string_equal (relay_upstream_key (list, 0), S_KEY_B);
    assert_string_equal (relay_upstream_key (list, 1), S_KEY_B);
    assert_string_equal (relay_upstream_key (list, 2), S_KEY_C);
    assert_null (relay_upstream_next_key_of (list));
    assert_false (relay_upstream_swap (list));
    relay_upstream_destroy (&list);
    //  Insecure: no key is learnt
    list = relay_upstream_new ("ipc://a", "ipc://pa", NULL, err, sizeof err);
    assert_int_equal (relay_upstream_next_key (list, S_KEY_B), -1);
    relay_upstream_destroy (&list);
}

//  Writes TEXT (LEN bytes) to NAME in DIR.
static void
s_put (const char *dir, const char *name, const char *text, size_t len)
{
    char path [600];
    snprintf (path, sizeof path, "%s/%s", dir, name);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    assert_int_equal (fwrite (text, 1, len, file), len);
    fclose (file);
}

//  A list trusting S_KEY_A on two endpoints, the record in DIR loaded.
//  Returns what brokerkeys_load returned in *TAKEN_P.
static relay_upstream_t *
s_loaded (const char *dir, int *taken_p)
{
    char err [512];
    relay_upstream_t *list = relay_upstream_new ("tcp://a:1,tcp://b:1",
                                                 "tcp://a:2,tcp://b:2",
                                                 S_KEY_A, err, sizeof err);
    assert_non_null (list);
    *taken_p = brokerkeys_load (dir, list);
    return list;
}

static void
test_upstream_record (void **state)
{
    (void) state;
    log_init ("test");
    log_set_level (LOG_LEVEL_ERROR);
    char dir [] = "/tmp/grid-brokerkeys-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char sub [600], path [700];
    snprintf (sub, sizeof sub, "%s/state", dir);
    //  Nothing recorded: nothing taken up, nothing made
    int taken = 0;
    relay_upstream_t *list = s_loaded (sub, &taken);
    assert_int_equal (taken, 0);
    assert_null (relay_upstream_next_key_of (list));
    relay_upstream_destroy (&list);
    //  A rotation under way: the directory made, the file 0600, whole
    assert_int_equal (brokerkeys_save_next (sub, S_KEY_A, S_KEY_B), 0);
    struct stat info;
    assert_int_equal (stat (sub, &info), 0);
    assert_int_equal (info.st_mode & 0777, 0700);
    snprintf (path, sizeof path, "%s/" BROKERKEYS_NEXT, sub);
    assert_int_equal (stat (path, &info), 0);
    assert_int_equal (info.st_mode & 0777, 0600);
    assert_int_equal (info.st_size, 2 * 40 + 2);
    snprintf (path, sizeof path, "%s/" BROKERKEYS_NEXT ".tmp", sub);
    assert_int_not_equal (access (path, F_OK), 0);
    //  Taken up at start: lost, the next key is tried
    list = s_loaded (sub, &taken);
    assert_int_equal (taken, 1);
    assert_string_equal (relay_upstream_next_key_of (list), S_KEY_B);
    assert_string_equal (relay_upstream_old_key_of (list), S_KEY_A);
    assert_true (relay_upstream_swap (list));
    assert_string_equal (relay_upstream_key (list, 0), S_KEY_B);
    assert_true (relay_upstream_settle (list));
    relay_upstream_destroy (&list);
    //  Ended: broker.keys maps the old key at start, the next one went
    assert_int_equal (brokerkeys_save_done (sub, S_KEY_A, S_KEY_B), 0);
    snprintf (path, sizeof path, "%s/" BROKERKEYS_NEXT, sub);
    assert_int_not_equal (access (path, F_OK), 0);
    list = s_loaded (sub, &taken);
    assert_int_equal (taken, 0);
    assert_string_equal (relay_upstream_key (list, 0), S_KEY_B);
    assert_string_equal (relay_upstream_key (list, 1), S_KEY_B);
    relay_upstream_destroy (&list);
    //  A second rotation appends: applied in order
    assert_int_equal (brokerkeys_save_done (sub, S_KEY_B, S_KEY_C), 0);
    list = s_loaded (sub, &taken);
    assert_string_equal (relay_upstream_key (list, 1), S_KEY_C);
    relay_upstream_destroy (&list);
    snprintf (path, sizeof path, "%s/" BROKERKEYS_DONE, sub);
    unlink (path);

    //  Damaged records of a rotation under way: each ignored
    const char *damaged [] = {
        S_KEY_A " " "Yne@$w-vo<fVvi]a<NY6",               //  Truncated
        S_KEY_A,                                          //  One key
        S_KEY_A "  " S_KEY_B "\n",                        //  Two blanks
        S_KEY_A " " S_KEY_B "\n" S_KEY_B " " S_KEY_C "\n", //  Two lines
        S_KEY_A " " S_KEY_A "\n",                         //  No change
        S_KEY_B " " S_KEY_C "\n",                         //  Not trusted
        "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf\x01 " S_KEY_B "\n",
        "\x80\xff garbage \x00\x00\n\n\n",
        "",
    };
    for (size_t index = 0; index < sizeof damaged / sizeof damaged [0];
         index++) {
        size_t len = strlen (damaged [index]);
        if (index == 7)
            len = 16;                   //  With its NULs
        s_put (sub, BROKERKEYS_NEXT, damaged [index], len);
        list = s_loaded (sub, &taken);
        assert_int_equal (taken, 0);
        assert_null (relay_upstream_next_key_of (list));
        assert_string_equal (relay_upstream_key (list, 0), S_KEY_A);
        relay_upstream_destroy (&list);
    }
    //  Too large, a directory, a symbolic link: refused
    char *big = (char *) malloc (BROKERKEYS_MAX_BYTES + 100);
    assert_non_null (big);
    for (size_t at = 0; at + 82 <= BROKERKEYS_MAX_BYTES + 100; at += 82)
        snprintf (big + at, 83, "%s %s\n", S_KEY_A, S_KEY_B);
    size_t big_len = (BROKERKEYS_MAX_BYTES / 82 + 1) * 82;
    s_put (sub, BROKERKEYS_NEXT, big, big_len);
    list = s_loaded (sub, &taken);
    assert_int_equal (taken, 0);
    relay_upstream_destroy (&list);
    s_put (sub, BROKERKEYS_DONE, big, big_len);
    list = s_loaded (sub, &taken);
    assert_string_equal (relay_upstream_key (list, 0), S_KEY_A);
    relay_upstream_destroy (&list);
    free (big);
    snprintf (path, sizeof path, "%s/" BROKERKEYS_NEXT, sub);
    unlink (path);
    assert_int_equal (mkdir (path, 0700), 0);
    list = s_loaded (sub, &taken);
    assert_int_equal (taken, 0);
    relay_upstream_destroy (&list);
    rmdir (path);
    char target [700];
    snprintf (target, sizeof target, "%s/elsewhere", dir);
    s_put (dir, "elsewhere", S_KEY_A " " S_KEY_B "\n", 82);
    assert_int_equal (symlink (target, path), 0);
    list = s_loaded (sub, &taken);
    assert_int_equal (taken, 0);
    relay_upstream_destroy (&list);
    unlink (path);
    //  broker.keys: a bad line among good ones is skipped, the others
    //  apply in order
    s_put (sub, BROKERKEYS_DONE, "junk\n" S_KEY_A " " S_KEY_B "\nmore junk\n",
           strlen ("junk\n" S_KEY_A " " S_KEY_B "\nmore junk\n"));
    list = s_loaded (sub, &taken);
    assert_string_equal (relay_upstream_key (list, 0), S_KEY_B);
    relay_upstream_destroy (&list);
    //  Appending after damage keeps the good lines
    assert_int_equal (brokerkeys_save_done (sub, S_KEY_B, S_KEY_C), 0);
    snprintf (path, sizeof path, "%s/" BROKERKEYS_DONE, sub);
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    char text [400] = "";
    size_t got = fread (text, 1, sizeof text - 1, file);
    fclose (file);
    text [got] = 0;
    assert_string_equal (text, S_KEY_A " " S_KEY_B "\n" S_KEY_B " " S_KEY_C
                         "\n");
    //  An unwritable state dir: said, no file left
    assert_int_equal (brokerkeys_save_next ("/proc/no-such-dir", S_KEY_A,
                                            S_KEY_B), -1);
    assert_int_equal (brokerkeys_save_next (sub, "short", S_KEY_B), -1);
    unlink (path);
    rmdir (sub);
    snprintf (path, sizeof path, "%s/elsewhere", dir);
    unlink (path);
    assert_int_equal (rmdir (dir), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_upstream_lists),
        cmocka_unit_test (test_upstream_redirects),
        cmocka_unit_test (test_upstream_broker_key),
        cmocka_unit_test (test_upstream_record),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
