/*  =========================================================================
    webfiles - the dashboard's files, built into the broker

    The table itself is generated (web/embed.sh); this file looks it up.
    =========================================================================
*/
#include <string.h>

#include "webfiles.h"

extern const char webfiles_etag_text [];

const char *
webfiles_content_type (const char *path)
{
    static const struct {
        const char *ext;
        const char *type;
    } s_types [] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = path ? strrchr (path, '.') : NULL;
    if (dot && !strchr (dot, '/')) {
        for (size_t i = 0; i < sizeof (s_types) / sizeof (s_types [0]); i++)
            if (strcmp (dot, s_types [i].ext) == 0)
                return s_types [i].type;
    }
    return "application/octet-stream";
}

int
webfiles_find (const char *path, const void **data, size_t *size,
               const char **content_type)
{
    if (!path || path [0] != '/')
        return -1;
    if (strcmp (path, "/") == 0)
        path = "/index.html";
    //  Only the table's own names match: "..", "//" or "%2e" never do.
    for (size_t i = 0; i < webfiles_files_count; i++) {
        const webfiles_file_t *file = &webfiles_files [i];
        if (strcmp (file->path, path) != 0)
            continue;
        if (data)
            *data = file->data;
        if (size)
            *size = file->size;
        if (content_type)
            *content_type = webfiles_content_type (file->path);
        return 0;
    }
    return -1;
}

const char *
webfiles_etag (void)
{
    return webfiles_etag_text;
}
