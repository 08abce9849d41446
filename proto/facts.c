/*  =========================================================================
    facts - what a node says about itself (see facts.h)
    =========================================================================
*/
#include "facts.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_DIGITS 30

bool
fact_value_valid (const char *text)
{
    if (!text || !*text)
        return false;
    size_t len = 0;
    for (const unsigned char *p = (const unsigned char *) text; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return false;
        if (++len > FACT_MAX_VALUE_LEN)
            return false;
    }
    return true;
}

//  Digits at TEXT, at most S_MAX_DIGITS; how many, or 0.
static size_t
s_digits (const char *text)
{
    size_t count = 0;
    while (text [count] >= '0' && text [count] <= '9')
        if (++count > S_MAX_DIGITS)
            return 0;
    return count;
}

bool
fact_number (const char *text, double *number_p)
{
    if (!text)
        return false;
    const char *p = text;
    if (*p == '-')
        p++;
    size_t whole = s_digits (p);
    if (whole == 0)
        return false;
    p += whole;
    if (*p == '.') {
        size_t fraction = s_digits (p + 1);
        if (fraction == 0)
            return false;
        p += 1 + fraction;
    }
    if (*p)
        return false;
    if (number_p)
        *number_p = strtod (text, NULL);
    return true;
}

const char *
fact_op_text (fact_op_t op)
{
    static const char *texts [] = {"=", "!=", ">=", "<=", ">", "<", "~="};
    return (size_t) op < sizeof texts / sizeof texts [0] ? texts [op] : "?";
}

int
fact_compare (const fact_test_t *test, const char *have, bool have_numeric,
              double have_number)
{
    if (test->numeric && have_numeric)
        return have_number < test->number ? -1
             : have_number > test->number ? 1 : 0;
    int rc = strcmp (have, test->value);
    return rc < 0 ? -1 : rc > 0 ? 1 : 0;
}

bool
fact_test_matches (const fact_test_t *test, const char *have)
{
    if (!have)
        return false;
    if (test->op == FACT_OP_GLOB)
        return fnmatch (test->value, have, 0) == 0;
    double number = 0;
    bool numeric = test->numeric && fact_number (have, &number);
    bool ordered = test->op != FACT_OP_EQ && test->op != FACT_OP_NE;
    if (ordered && test->numeric && !numeric)
        return false;
    int order = fact_compare (test, have, numeric, number);
    switch (test->op) {
    case FACT_OP_EQ:
        return order == 0;
    case FACT_OP_NE:
        return order != 0;
    case FACT_OP_GE:
        return order >= 0;
    case FACT_OP_LE:
        return order <= 0;
    case FACT_OP_GT:
        return order > 0;
    case FACT_OP_LT:
        return order < 0;
    case FACT_OP_GLOB:
        break;
    }
    return false;
}
