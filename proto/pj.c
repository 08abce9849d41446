/*  =========================================================================
    pj - JSON <-> msgpack values (see pj.h)
    =========================================================================
*/
#include "pj.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
s_write (pw_t *writer, const json_t *value, int depth, char *why,
         size_t why_len)
{
    if (depth > PV_MAX_DEPTH) {
        snprintf (why, why_len, "the JSON is nested deeper than %d levels",
                  PV_MAX_DEPTH);
        return -2;
    }
    switch (json_typeof (value)) {
        case JSON_OBJECT: {
            pw_map (writer, json_object_size (value));
            const char *key;
            size_t key_len;
            json_t *item;
            json_object_keylen_foreach ((json_t *) value, key, key_len, item) {
                pw_strn (writer, key, key_len);
                if (s_write (writer, item, depth + 1, why, why_len) != 0)
                    return -2;
            }
            return 0;
        }
        case JSON_ARRAY: {
            size_t count = json_array_size (value);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                if (s_write (writer, json_array_get (value, index), depth + 1,
                             why, why_len) != 0)
                    return -2;
            return 0;
        }
        case JSON_STRING:
            pw_strn (writer, json_string_value (value),
                     json_string_length (value));
            return 0;
        case JSON_INTEGER:
            pw_int (writer, (int64_t) json_integer_value (value));
            return 0;
        case JSON_REAL:
            pw_float (writer, json_real_value (value));
            return 0;
        case JSON_TRUE:
            pw_bool (writer, true);
            return 0;
        case JSON_FALSE:
            pw_bool (writer, false);
            return 0;
        default:
            pw_nil (writer);
            return 0;
    }
}

int
pj_write (pw_t *writer, const json_t *value, char *why, size_t why_len)
{
    return s_write (writer, value, 1, why, why_len);
}

//  A JSON string of TEXT (LEN bytes). A decoded pv string is UTF-8 text
//  without NUL (pv refuses anything else), which jansson takes as it is.
static json_t *
s_string (const char *text, size_t len)
{
    json_t *string = json_stringn (text, len);
    return string ? string : json_null ();
}

static json_t *
s_base64 (const unsigned char *data, size_t len)
{
    static const char digits [] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *text = (char *) malloc ((len + 2) / 3 * 4 + 1);
    if (!text)
        return json_null ();
    size_t used = 0;
    for (size_t index = 0; index < len; index += 3) {
        uint32_t chunk = (uint32_t) data [index] << 16;
        if (index + 1 < len)
            chunk |= (uint32_t) data [index + 1] << 8;
        if (index + 2 < len)
            chunk |= data [index + 2];
        text [used++] = digits [(chunk >> 18) & 63];
        text [used++] = digits [(chunk >> 12) & 63];
        text [used++] = index + 1 < len ? digits [(chunk >> 6) & 63] : '=';
        text [used++] = index + 2 < len ? digits [chunk & 63] : '=';
    }
    json_t *string = json_stringn (text, used);
    free (text);
    return string ? string : json_null ();
}

json_t *
pj_from_pv (const pv_t *value)
{
    switch (pv_type (value)) {
        case PV_BOOL: {
            bool flag = false;
            pv_get_bool (value, &flag);
            return json_boolean (flag);
        }
        case PV_INT: {
            int64_t number = 0;
            pv_get_int (value, &number);
            return json_integer ((json_int_t) number);
        }
        case PV_FLOAT: {
            double number = 0;
            pv_get_float (value, &number);
            json_t *real = json_real (number);
            return real ? real : json_null ();
        }
        case PV_STR: {
            size_t len = 0;
            const char *text = pv_str (value, &len);
            return s_string (text, len);
        }
        case PV_BIN: {
            size_t len = 0;
            const char *data = pv_str (value, &len);
            return s_base64 ((const unsigned char *) data, len);
        }
        case PV_ARRAY: {
            json_t *array = json_array ();
            size_t count = pv_size (value);
            for (size_t index = 0; index < count; index++)
                json_array_append_new (array,
                                       pj_from_pv (pv_array_at (value, index)));
            return array;
        }
        case PV_MAP: {
            json_t *object = json_object ();
            size_t count = pv_size (value);
            for (size_t index = 0; index < count; index++) {
                const char *key = NULL;
                size_t key_len = 0;
                const pv_t *item = pv_map_entry (value, index, &key, &key_len);
                json_object_setn_new (object, key, key_len, pj_from_pv (item));
            }
            return object;
        }
        default:
            return json_null ();
    }
}
