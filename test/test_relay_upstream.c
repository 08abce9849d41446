/*  =========================================================================
    test_relay_upstream - gridrelay's list of upstreams (relay/upstream.h):
    the lists read and refused, the redirects followed (only into the
    list, not to the one in use, a few a minute), the failover order, and
    the broker key of a rotation tried on loss and settled on handshake
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

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

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_upstream_lists),
        cmocka_unit_test (test_upstream_redirects),
        cmocka_unit_test (test_upstream_broker_key),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
