/*  =========================================================================
    conf - YAML documents as decoded values

    The one module that includes <yaml.h>. It turns a YAML document (a
    config file or a job file) into the same pv_t tree the wire decoder
    gives, so job files and wire job specs are checked by one code path.

    Mapping: a YAML mapping becomes a PV_MAP (keys must be scalars; duplicate
    keys are an error), a sequence a PV_ARRAY. Plain (unquoted) scalars that
    read as a decimal integer become PV_INT, true/false become PV_BOOL,
    null/~ and empty plain scalars PV_NIL; every other scalar, and every
    quoted scalar, is a PV_STR. Anchors and aliases are refused. An empty
    document is an empty map.

    Threading: reentrant.
    =========================================================================
*/
#ifndef GRID_CONF_H
#define GRID_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pv.h"

//  Parses LEN bytes of YAML TEXT. Returns 0 and a new document in *DOC_P,
//  or -1 with "line L, column C: reason" in ERR.
int conf_parse (const char *text, size_t len, pv_doc_t **doc_p,
                char *err, size_t err_len);

//  Reads and parses the file at PATH (at most 4 MiB). Returns 0, or -1
//  with "PATH: reason" (or "PATH: line L, column C: reason") in ERR.
int conf_load_file (const char *path, pv_doc_t **doc_p,
                    char *err, size_t err_len);

//  Helpers for config readers: read a string / int / bool / duration under
//  KEY of MAP into *OUT when present. Return 0 (present and well-typed, or
//  absent: *OUT untouched), -1 with "KEY: expected ..." in ERR otherwise.
//  conf_get_str gives a fresh copy (caller frees the old *OUT first if it
//  owns one: conf_get_str frees *OUT before replacing it).
int conf_get_str (const pv_t *map, const char *key, char **out,
                  char *err, size_t err_len);
int conf_get_int (const pv_t *map, const char *key, int64_t *out,
                  char *err, size_t err_len);
int conf_get_bool (const pv_t *map, const char *key, bool *out,
                   char *err, size_t err_len);
int conf_get_duration (const pv_t *map, const char *key, int64_t *ms_out,
                       char *err, size_t err_len);

//  Parses a size: a whole number of bytes, optionally followed by a unit
//  B, K/KiB, M/MiB, G/GiB or T/TiB (powers of 1024; KB, MB, GB, TB are
//  read the same), e.g. 512MiB, 8GiB, 4096. Returns 0, or -1 when TEXT is
//  not a size or overflows.
int conf_size_parse (const char *text, uint64_t *bytes);

//  Reads a size (an integer of bytes, or a string conf_size_parse reads)
//  under KEY of MAP into *OUT, as the other conf_get_ helpers.
int conf_get_size (const pv_t *map, const char *key, uint64_t *out,
                   char *err, size_t err_len);

//  Checks that every key of MAP is in the NULL-terminated list KNOWN.
//  Returns 0, or -1 with "unknown key 'x' (known: a, b, c)" in ERR.
int conf_check_keys (const pv_t *map, const char *const *known,
                     char *err, size_t err_len);

//  Called by conf_get_string_maps for one item: VALUES holds its fields'
//  strings in the order of FIELDS (NULL where absent), lent for the call.
//  Returns 0, or -1 with the reason in WHY.
typedef int (conf_item_fn) (void *arg, char **values, char *why,
                            size_t why_len);

//  Reads LIST, the config's NAME (NULL when absent: nothing), as a list of
//  maps of strings with the keys FIELDS (NULL-terminated, at most 8; no
//  other key is allowed), the first REQUIRED of them required, and calls
//  EACH for every item in order. Returns 0, or -1 with "NAME: expected a
//  list of {a, b, c}" or "NAME[I]: reason" in ERR (as the clients: and
//  relays: sections read).
int conf_get_string_maps (const pv_t *list, const char *name,
                          const char *const *fields, size_t required,
                          conf_item_fn *each, void *arg, char *err,
                          size_t err_len);

//  --print-config: where a program's settings came from. One is made per
//  run, from the config file that was read (or none) and the flags given.
typedef struct {
    FILE *out;                   //  Where lines go
    const pv_t *file_root;       //  The config file's map, or NULL
    const char *file_path;       //  Its path, or NULL
} conf_origin_t;

//  Writes "KEY: VALUE  # ORIGIN": ORIGIN is "flag FLAG" when FLAG_GIVEN
//  (FLAG as it is when it does not start with '-': "env GRID_BROKER"),
//  else "file PATH" when the file sets KEY (a dotted KEY, "store.max_size",
//  looks into nested maps), else "default". VALUE is written as YAML: a
//  string in double quotes (QUOTE true), else as it is (numbers, bools,
//  lists already in YAML form); a nested key is written dotted.
void conf_print_setting (const conf_origin_t *origin, const char *key,
                         const char *value, bool quote, const char *flag,
                         bool flag_given);

//  The same for an int64 and a duration in ms.
void conf_print_int (const conf_origin_t *origin, const char *key,
                     int64_t value, const char *flag, bool flag_given);
void conf_print_duration (const conf_origin_t *origin, const char *key,
                          int64_t ms, const char *flag, bool flag_given);

#endif
