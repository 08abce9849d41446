/*  =========================================================================
    webfiles - the dashboard's files, built into the broker

    The files of web/ (HTML, CSS, JavaScript, SVG) are turned into a C
    table at build time (web/embed.sh writes build/gen/webfiles_data.c), so
    the broker serves its dashboard with nothing installed beside it and no
    network. The HTTP face calls webfiles_find for every GET path outside
    the API; "/" is index.html.

    Threading: the table is constant; every function is reentrant.
    =========================================================================
*/
#ifndef GRID_WEBFILES_H
#define GRID_WEBFILES_H

#include <stddef.h>

//  One embedded file (the generated table's row).
typedef struct {
    const char *path;                //  URL path, "/app.js"
    const unsigned char *data;       //  Its bytes (a NUL follows them)
    size_t size;                     //  Byte count, the NUL not counted
} webfiles_file_t;

//  The generated table, sorted by path, and its length.
extern const webfiles_file_t webfiles_files [];
extern const size_t webfiles_files_count;

//  Looks up the file served at PATH (the URL path without its query, as
//  the client sent it: "/", "/app.js"). On success sets *DATA, *SIZE and
//  *CONTENT_TYPE (a MIME type with its charset where it has one; any of
//  the three may be NULL) and returns 0; the memory is static and lives as
//  long as the program. Returns -1 for a path that names no embedded file
//  (NULL, relative, "..", a directory, anything not in the table).
int webfiles_find (const char *path, const void **data, size_t *size,
                   const char **content_type);

//  The MIME type served for PATH, by its extension
//  ("application/octet-stream" for an unknown one).
const char *webfiles_content_type (const char *path);

//  A strong ETag for the whole set ("\"1234567890\"", with its quotes): it
//  changes whenever any file of web/ changes, for the Cache-Control and
//  If-None-Match of the HTTP face.
const char *webfiles_etag (void);

#endif
