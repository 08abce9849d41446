/*  =========================================================================
    facts - what a node says about itself, and how a target compares it

    A fact is a name (name_valid: "os", "mem_mb", "rack") and a text value
    of 1 to FACT_MAX_VALUE_LEN bytes with no control byte ("debian",
    "12.5", "4096"). An agent reports at most FACT_MAX_COUNT of them.

    A fact target compares one fact with a value: KEY OP VALUE, where OP
    is one of = != >= <= > < ~= (~= is a shell glob: * ? [...]). When
    both the value written and the node's value are numbers (an optional
    '-', digits, an optional '.' and digits) they compare as numbers
    ("4096" = "4096.0", "512" < "4096"); otherwise as bytes, except that
    an order (< <= > >=) with a number written matches numbers only
    (fact:mem_mb>=4096 never matches "unknown"). A node that
    lacks the fact matches no comparison (not even !=): write
    "not fact:KEY=VALUE" for "all but".

    Threading: all functions are reentrant.
    =========================================================================
*/
#ifndef GRID_FACTS_H
#define GRID_FACTS_H

#include <stdbool.h>
#include <stddef.h>

#define FACT_MAX_VALUE_LEN 256   //  Longest fact value
#define FACT_MAX_COUNT 256       //  Most facts one node reports

typedef enum {
    FACT_OP_EQ,      //  =
    FACT_OP_NE,      //  !=
    FACT_OP_GE,      //  >=
    FACT_OP_LE,      //  <=
    FACT_OP_GT,      //  >
    FACT_OP_LT,      //  <
    FACT_OP_GLOB     //  ~=
} fact_op_t;

//  A parsed comparison: target_parse fills it (names.h), fact_test_matches uses it.
typedef struct {
    fact_op_t op;            //  How to compare
    const char *value;       //  The value written (borrowed from the text)
    bool numeric;            //  VALUE is a number...
    double number;           //  ...this one
} fact_test_t;

//  True when TEXT is a valid fact value: 1 to FACT_MAX_VALUE_LEN bytes,
//  none of them a control byte.
bool fact_value_valid (const char *text);

//  True when TEXT is a number as facts compare them (an optional '-',
//  1 to 30 digits, an optional '.' and 1 to 30 digits); its value in
//  *NUMBER_P (may be NULL).
bool fact_number (const char *text, double *number_p);

//  The text of OP ("=", "!=", ... "~=").
const char *fact_op_text (fact_op_t op);

//  Does a node whose fact has the value HAVE pass TEST? HAVE NULL (the
//  node lacks the fact) never does.
bool fact_test_matches (const fact_test_t *test, const char *have);

//  -1, 0 or 1 as HAVE compares with TEST's value: as numbers when both
//  are (HAVE_NUMERIC, HAVE_NUMBER: fact_number of HAVE), else as bytes.
int fact_compare (const fact_test_t *test, const char *have,
                  bool have_numeric, double have_number);

#endif
