/*  =========================================================================
    names - names, targets, topics, durations, ids and timestamps

    Every name segment (node id, group, label key, label segment, backend,
    action, parameter name) matches [A-Za-z0-9_-]{1,64}; it is checked at
    every boundary (config, hello, submit) with name_valid.

    Target forms (CLI and API):
        all                      every registered node
        group:<g>                nodes in group g
        node:<id>[,<id>...]      one node, or a list
        label:<key>=<v1>[.<v2>...]  nodes whose label <key> has the dotted
                                 value or one below it (tier=web.dev.us-east
                                 is in label:tier=web and label:tier=web.dev)
        fact:<key><op><value>    nodes whose fact compares so (facts.h):
                                 fact:os=debian, fact:mem_mb>=4096,
                                 fact:os_version~=12.* (a glob); ops
                                 = != >= <= > < ~=
        any  /  any:<target>     one node of the set takes the work
    On the wire a target is a map {scope: "all"|"group"|"node"|"label"|"fact",
    value: "<text after the colon>", any: bool (optional)}.

    Target expressions combine those terms (all but any) with "not",
    "and", "or" and parentheses; not binds tighter than and, and tighter
    than or:
        group:web and label:tier=prod and not node:web-03
        (group:web or group:db) and not label:env=test
        any:group:web and not node:web-03     any applies to the whole
    A text is read as an expression when it holds a space, a tab or a
    parenthesis. An expression that is a single term reads as that term
    (scope group, node, ...); any other is scope TARGET_EXPR, whose value
    is the canonical text (one space around each operator, parentheses
    only where precedence needs them), and on the wire {scope: "expr",
    value: "<expression>"}. Bounds: TARGET_EXPR_MAX_LEN bytes,
    TARGET_EXPR_MAX_DEPTH nested parentheses or nots, TARGET_EXPR_MAX_TERMS
    terms. Errors name the column (from 1) of the offending token:
    "bad target at column 15: expected a term after 'and'".

    Topics on the commands socket end in '/': "all/", "group/<g>/",
    "node/<id>/", "label/<key>/<v1>.<v2>/". The trailing '/' makes prefix
    matching exact.

    Threading: all functions are reentrant.
    =========================================================================
*/
#ifndef GRID_NAMES_H
#define GRID_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "facts.h"

#define NAME_MAX_LEN 64          //  Longest name segment
#define TARGET_MAX_NODES 4096    //  Most ids in a node:<a>,<b>,... list
#define JOB_ID_LEN 20            //  Longest job id (they are 19: "j-0193a1b2c3d4-0001")
#define TARGET_EXPR_MAX_LEN 4096   //  Longest target expression text
#define TARGET_EXPR_MAX_DEPTH 16   //  Most nested parentheses and nots
#define TARGET_EXPR_MAX_TERMS 64   //  Most terms in one expression
#define TIME_TEXT_LEN 25         //  strlen of "2026-11-21T07:00:51.123Z" + NUL

//  True when TEXT is a valid name segment: [A-Za-z0-9_-]{1,64}.
bool name_valid (const char *text);

//  True when TEXT is a valid dotted label value: segments that are each
//  valid names, joined by '.', at most 8 segments.
bool name_label_value_valid (const char *text);

typedef enum {
    TARGET_ALL,
    TARGET_GROUP,
    TARGET_NODE,     //  One id or a list
    TARGET_LABEL,
    TARGET_FACT,     //  One fact compared with a value
    TARGET_EXPR      //  An expression of the others (not/and/or)
} target_scope_t;

typedef struct target_expr_s target_expr_t;   //  Opaque expression tree

typedef struct {
    target_scope_t scope;  //  What kind of set
    bool any;              //  One node of the set takes the work
    char *value;           //  Group name, "a,b,c" node list, "key=v1.v2", or NULL for all
    char *label_key;       //  TARGET_LABEL: the key (owned)
    char *label_value;     //  TARGET_LABEL: the dotted value (owned)
    char **nodes;          //  TARGET_NODE: the ids, in order, no duplicates (owned)
    size_t node_count;     //  TARGET_NODE: how many ids
    target_expr_t *expr;   //  TARGET_EXPR: the tree (owned); value is its text
    char *fact_key;        //  TARGET_FACT: the fact's name (owned)
    fact_test_t fact;      //  TARGET_FACT: the comparison (its value
                           //  points into value)
} target_t;

//  Parses a CLI/API target text ("group:web", "any:label:tier=web").
//  Returns 0 and fills *TARGET (release with target_clear), or -1 with a
//  sentence in ERR that names the problem.
int target_parse (const char *text, target_t *target, char *err, size_t err_len);

//  Builds a target from the wire/job-file form: SCOPE "all"|"group"|"node"|
//  "label"|"expr", VALUE (may be NULL for all; for expr the expression,
//  without "any:"), ANY. Same returns as target_parse.
int target_from_parts (const char *scope, const char *value, bool any,
                       target_t *target, char *err, size_t err_len);

//  Frees what a target owns and zeroes it; safe on a zeroed target.
void target_clear (target_t *target);

//  Deep copy; returns 0 or -1 (out of memory).
int target_copy (target_t *dest, const target_t *src);

//  The node ids TARGET names: a node list's ids, or those of every node:
//  term of an expression (under "not" too), in the order written; an id
//  two terms name comes twice. Returns how many and sets *IDS_P to a new
//  array (caller frees the array only: the ids are lent, valid while
//  TARGET is), or NULL when there are none.
size_t target_named_nodes (const target_t *target, const char ***ids_p);

//  Calls FN for each fact: term of TARGET (TARGET itself when it is one;
//  every term of an expression, under "not" too), with ARG.
void target_each_fact (const target_t *target,
                       void (*fn) (const target_t *term, void *arg),
                       void *arg);

//  An expression's tree, for a resolver that answers its terms from an
//  index: the operator at EXPR, its kids (one for not, two or more for
//  and/or, none for a term), and a term's plain target. All lent, valid
//  while the target that holds EXPR is.
typedef enum {
    TARGET_EXPR_TERM,
    TARGET_EXPR_NOT,
    TARGET_EXPR_AND,
    TARGET_EXPR_OR
} target_expr_op_t;
target_expr_op_t target_expr_op (const target_expr_t *expr);
size_t target_expr_kid_count (const target_expr_t *expr);
const target_expr_t *target_expr_kid (const target_expr_t *expr, size_t index);
//  The term at EXPR (TARGET_EXPR_TERM), or NULL for an operator.
const target_t *target_expr_term (const target_expr_t *expr);

//  "all", "group", "node", "label", "fact" or "expr".
const char *target_scope_name (target_scope_t scope);

//  The text form ("group:web", "any:all"); caller frees.
char *target_format (const target_t *target);

//  The commands-socket topic for a group/label/all target ("group/web/");
//  NULL for node targets and expressions (they are published to each
//  resolved node's own topic, never wider). Caller frees.
char *target_topic (const target_t *target);

//  The topic of one node: "node/<id>/". Caller frees.
char *topic_for_node (const char *node_id);

//  What a target is matched against: one node's id, groups, labels and
//  facts. FACT gives the value of a fact of the node, or NULL when it has
//  none (FACT NULL: the node has no facts).
typedef struct {
    const char *node_id;             //  Its id
    char *const *groups;             //  Its groups
    size_t group_count;
    char *const *label_keys;         //  Its labels, as two parallel arrays
    char *const *label_values;
    size_t label_count;
    const char *(*fact) (const void *arg, const char *key);
    const void *fact_arg;            //  FACT's first argument
} target_subject_t;

//  Does SUBJECT match TARGET (ignoring "any")?
bool target_matches_subject (const target_t *target,
                             const target_subject_t *subject);

//  Does a node with these groups and labels match TARGET (ignoring "any")?
//  (A node without facts: target_matches_subject.)
//  LABEL_KEYS/LABEL_VALUES are parallel arrays of LABEL_COUNT entries.
bool target_matches (const target_t *target, const char *node_id,
                     char *const *groups, size_t group_count,
                     char *const *label_keys, char *const *label_values,
                     size_t label_count);

//  Parses a duration: an unsigned integer and a unit, ms|s|m|h|d, or a
//  sequence of those ("1h30m"). Returns 0 and *MS_P, or -1 when malformed
//  or over 30 days.
int duration_parse (const char *text, int64_t *ms_p);

//  Writes the shortest exact form of MS ("1500ms", "10s", "2m", "1h30m")
//  into BUF (at least 32 bytes).
void duration_format (int64_t ms, char *buf, size_t buf_len);

//  A key that sorts by time: wall ms (8 bytes) then a sequence (4 bytes),
//  big-endian (the audit trail's and the notifications' records).
#define STAMP_KEY_LEN 12

//  Writes the key of (MS, SEQ) into KEY (STAMP_KEY_LEN bytes).
void stamp_key_make (int64_t ms, uint32_t seq, uint8_t *key);

//  Reads KEY (KEY_LEN bytes) into *MS_P and *SEQ_P. Returns 0, or -1 when
//  it is not such a key (another length, a time past INT64_MAX).
int stamp_key_parse (const void *key, size_t key_len, int64_t *ms_p,
                     uint32_t *seq_p);

//  Writes SIZE bytes as lowercase hex into HEX (2 * SIZE + 1 bytes, NUL
//  ended). Returns HEX.
char *hex_encode (const uint8_t *bytes, size_t size, char *hex);

//  Reads 2 * SIZE hex digits of HEX (either case; exactly that many, NUL
//  after them) into BYTES. Returns 0, or -1 when HEX is not so.
int hex_decode (const char *hex, uint8_t *bytes, size_t size);

//  Makes a new time-sortable job id from wall-clock milliseconds WALL_MS
//  and a per-process counter: "j-" + 12 lowercase hex digits of WALL_MS +
//  "-" + 4 lowercase hex digits. Ids sort in submission order. BUF holds at
//  least JOB_ID_LEN + 1 bytes. LAST_MS and SEQ carry state between calls
//  (start both at 0).
void job_id_make (int64_t wall_ms, int64_t *last_ms, uint32_t *seq,
                  char *buf, size_t buf_len);

//  True when TEXT has the form of a job id.
bool job_id_valid (const char *text);

//  A hash of the NUL-terminated KEY (an id or a name) for hash tables
//  (zhashx_set_key_hasher): eight bytes a step, where CZMQ's default
//  takes one.
size_t id_hash (const void *key);

//  Copies LEN bytes of untrusted TEXT into BUF (BUF_LEN bytes; NAME_SHOW_LEN
//  holds any cut) for quoting in an error sentence: control bytes and NUL
//  become '?', and text past 48 bytes is cut on a UTF-8 boundary and marked
//  "...", so a hostile value cannot flood or break a log line. Returns BUF.
#define NAME_SHOW_LEN 56
const char *name_show (const char *text, size_t len, char *buf,
                       size_t buf_len);

//  Formats WALL_MS (Unix epoch milliseconds) as RFC 3339 UTC with
//  milliseconds, "2026-11-21T07:00:51.123Z", into BUF (TIME_TEXT_LEN).
void time_format (int64_t wall_ms, char *buf, size_t buf_len);

#endif
