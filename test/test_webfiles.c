/*  =========================================================================
    test_webfiles - the dashboard's files built into the broker
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../broker/webfiles.h"

//  Reads FILE of the source tree's web/ folder (GRID_SRC, else the current
//  directory) into a malloc'd buffer; NULL when it cannot.
static char *
s_read_source (const char *file, size_t *size_p)
{
    const char *src = getenv ("GRID_SRC");
    char path [4096];
    snprintf (path, sizeof (path), "%s/web/%s", src ? src : ".", file);
    FILE *f = fopen (path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, size = 0;
    char *buf = malloc (cap);
    size_t n;
    while (buf && (n = fread (buf + size, 1, cap - size, f)) > 0) {
        size += n;
        if (size == cap) {
            char *bigger = realloc (buf, cap * 2);
            if (!bigger) {
                free (buf);
                buf = NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose (f);
    *size_p = size;
    return buf;
}

static void
test_webfiles_root_is_index (void **state)
{
    const void *root, *index;
    size_t root_size, index_size;
    const char *type = NULL;
    assert_int_equal (webfiles_find ("/", &root, &root_size, &type), 0);
    assert_string_equal (type, "text/html; charset=utf-8");
    assert_int_equal (webfiles_find ("/index.html", &index, &index_size, NULL), 0);
    assert_ptr_equal (root, index);
    assert_int_equal (root_size, index_size);
    assert_non_null (strstr ((const char *) root, "<script type=\"module\" src=\"app.js\">"));
}

static void
test_webfiles_types (void **state)
{
    const char *type;
    assert_int_equal (webfiles_find ("/app.js", NULL, NULL, &type), 0);
    assert_string_equal (type, "text/javascript; charset=utf-8");
    assert_int_equal (webfiles_find ("/style.css", NULL, NULL, &type), 0);
    assert_string_equal (type, "text/css; charset=utf-8");
    assert_int_equal (webfiles_find ("/favicon.svg", NULL, NULL, &type), 0);
    assert_string_equal (type, "image/svg+xml");
    assert_string_equal (webfiles_content_type ("/x.tar.gz"), "application/octet-stream");
    assert_string_equal (webfiles_content_type ("/a.js/b"), "application/octet-stream");
    assert_string_equal (webfiles_content_type (NULL), "application/octet-stream");
}

static void
test_webfiles_refuses_other_paths (void **state)
{
    const char *bad [] = {
        "", "app.js", "index.html", "/nope", "/api/v1/jobs", "//", "//index.html",
        "/../index.html", "/./index.html", "/web/index.html", "/index.html/",
        "/%61pp.js", "/app.js?x=1", "/APP.JS", "/index.htm", "/embed.sh",
        "/.", "/..", "/../../etc/passwd",
    };
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad [0]); i++) {
        const void *data = (const void *) 1;
        size_t size = 7;
        if (webfiles_find (bad [i], &data, &size, NULL) != -1)
            fail_msg ("'%s' was found", bad [i]);
        //  A miss touches nothing
        assert_ptr_equal (data, (const void *) 1);
        assert_int_equal (size, 7);
    }
    assert_int_equal (webfiles_find (NULL, NULL, NULL, NULL), -1);
}

//  Every embedded file is byte for byte the one in web/, NUL-terminated,
//  and the table is sorted with unique names.
static void
test_webfiles_match_the_sources (void **state)
{
    assert_true (webfiles_files_count >= 4);
    for (size_t i = 0; i < webfiles_files_count; i++) {
        const webfiles_file_t *file = &webfiles_files [i];
        if (i > 0)
            assert_true (strcmp (webfiles_files [i - 1].path, file->path) < 0);
        size_t size = 0;
        char *source = s_read_source (file->path + 1, &size);
        if (!source)
            fail_msg ("cannot read web%s (set GRID_SRC)", file->path);
        assert_int_equal (file->size, size);
        assert_memory_equal (file->data, source, size);
        assert_int_equal (file->data [file->size], 0);
        free (source);
    }
}

static void
test_webfiles_etag_is_quoted (void **state)
{
    const char *etag = webfiles_etag ();
    size_t len = strlen (etag);
    assert_true (len >= 3);
    assert_int_equal (etag [0], '"');
    assert_int_equal (etag [len - 1], '"');
    for (size_t i = 1; i < len - 1; i++)
        assert_true (etag [i] >= '0' && etag [i] <= '9');
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_webfiles_root_is_index),
        cmocka_unit_test (test_webfiles_types),
        cmocka_unit_test (test_webfiles_refuses_other_paths),
        cmocka_unit_test (test_webfiles_match_the_sources),
        cmocka_unit_test (test_webfiles_etag_is_quoted),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
