/*  =========================================================================
    factindex - which nodes have which fact values (see factindex.h)
    =========================================================================
*/
#include <czmq.h>

#include "../proto/names.h"
#include "factindex.h"
#include "nodeset.h"

//  One distinct value of one fact, with the nodes that report it.
typedef struct {
    char *text;                  //  The value
    bool numeric;                //  It is a number (fact_number)...
    double number;               //  ...this one
    nodeset_t nodes;             //  Slots of the nodes that report it
} s_value_t;

//  One fact name.
typedef struct {
    zhashx_t *values;            //  text -> s_value_t (owned)
    s_value_t **numbers;         //  The numeric values, by number
    size_t number_count;         //  How many
    bool numbers_stale;          //  A numeric value came or went since
                                 //  numbers was sorted
} s_fact_t;

struct _factindex_t {
    zhashx_t *facts;             //  name -> s_fact_t (owned)
};

static void
s_value_destroy (void **item_p)
{
    s_value_t *value = (s_value_t *) *item_p;
    if (value) {
        free (value->text);
        nodeset_clear (&value->nodes);
        free (value);
        *item_p = NULL;
    }
}

static void
s_fact_destroy (void **item_p)
{
    s_fact_t *fact = (s_fact_t *) *item_p;
    if (fact) {
        zhashx_destroy (&fact->values);
        free (fact->numbers);
        free (fact);
        *item_p = NULL;
    }
}

factindex_t *
factindex_new (void)
{
    factindex_t *self = (factindex_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->facts = zhashx_new ();
    if (!self->facts) {
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->facts, s_fact_destroy);
    zhashx_set_key_hasher (self->facts, id_hash);
    return self;
}

void
factindex_destroy (factindex_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zhashx_destroy (&(*self_p)->facts);
    free (*self_p);
    *self_p = NULL;
}

int
factindex_add (factindex_t *self, const char *name, const char *text,
               uint32_t slot)
{
    s_fact_t *fact = (s_fact_t *) zhashx_lookup (self->facts, name);
    if (!fact) {
        fact = (s_fact_t *) calloc (1, sizeof *fact);
        if (!fact || !(fact->values = zhashx_new ())) {
            free (fact);
            return -1;
        }
        zhashx_set_destructor (fact->values, s_value_destroy);
        zhashx_set_key_hasher (fact->values, id_hash);
        zhashx_insert (self->facts, name, fact);
    }
    s_value_t *value = (s_value_t *) zhashx_lookup (fact->values, text);
    if (!value) {
        value = (s_value_t *) calloc (1, sizeof *value);
        if (!value || !(value->text = strdup (text))) {
            free (value);
            return -1;
        }
        value->numeric = fact_number (text, &value->number);
        zhashx_insert (fact->values, text, value);
        if (value->numeric)
            fact->numbers_stale = true;
    }
    return nodeset_add (&value->nodes, slot);
}

void
factindex_remove (factindex_t *self, const char *name, const char *text,
                  uint32_t slot)
{
    s_fact_t *fact = (s_fact_t *) zhashx_lookup (self->facts, name);
    s_value_t *value = fact ? (s_value_t *) zhashx_lookup (fact->values, text)
                            : NULL;
    if (!value)
        return;
    nodeset_remove (&value->nodes, slot);
    if (nodeset_size (&value->nodes) > 0)
        return;
    //  The last node with this value: the value goes, and the fact with
    //  its last value
    if (value->numeric)
        fact->numbers_stale = true;
    zhashx_delete (fact->values, text);
    if (zhashx_size (fact->values) == 0)
        zhashx_delete (self->facts, name);
}

static int
s_compare_numbers (const void *a, const void *b)
{
    double x = (*(s_value_t *const *) a)->number;
    double y = (*(s_value_t *const *) b)->number;
    return x < y ? -1 : x > y ? 1 : 0;
}

//  Sorts FACT's numeric values again when they changed.
static int
s_numbers_sort (s_fact_t *fact)
{
    if (!fact->numbers_stale)
        return 0;
    size_t room = zhashx_size (fact->values);
    s_value_t **numbers = (s_value_t **) realloc (
        fact->numbers, (room ? room : 1) * sizeof (s_value_t *));
    if (!numbers)
        return -1;
    fact->numbers = numbers;
    fact->number_count = 0;
    for (s_value_t *value = (s_value_t *) zhashx_first (fact->values); value;
         value = (s_value_t *) zhashx_next (fact->values))
        if (value->numeric)
            numbers [fact->number_count++] = value;
    qsort (numbers, fact->number_count, sizeof (s_value_t *),
           s_compare_numbers);
    fact->numbers_stale = false;
    return 0;
}

//  The first of FACT's sorted numbers that is not below NUMBER (or, with
//  AFTER, above it).
static size_t
s_numbers_bound (const s_fact_t *fact, double number, bool after)
{
    size_t low = 0, high = fact->number_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        double here = fact->numbers [middle]->number;
        if (after ? here <= number : here < number)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

//  Marks VALUE's nodes in BITS (WORDS words); adds their count to *COUNT.
static void
s_take (const s_value_t *value, uint64_t *bits, size_t words, size_t *count)
{
    nodeset_mark (&value->nodes, bits, words);
    *count += nodeset_size (&value->nodes);
}

size_t
factindex_mark (factindex_t *self, const char *name, const fact_test_t *test,
                uint64_t *bits, size_t words)
{
    size_t count = 0;
    s_fact_t *fact = (s_fact_t *) zhashx_lookup (self->facts, name);
    if (!fact)
        return 0;
    //  Equal text: one lookup (a number equals only numbers, below)
    if (test->op == FACT_OP_EQ && !test->numeric) {
        s_value_t *value = (s_value_t *) zhashx_lookup (fact->values,
                                                        test->value);
        if (value)
            s_take (value, bits, words, &count);
        return count;
    }
    bool ordered = test->op != FACT_OP_NE && test->op != FACT_OP_GLOB;
    if (test->numeric && ordered && s_numbers_sort (fact) == 0) {
        //  Numbers in range by binary search
        size_t from = 0, to = fact->number_count;
        switch (test->op) {
        case FACT_OP_EQ:
            from = s_numbers_bound (fact, test->number, false);
            to = s_numbers_bound (fact, test->number, true);
            break;
        case FACT_OP_GE:
            from = s_numbers_bound (fact, test->number, false);
            break;
        case FACT_OP_GT:
            from = s_numbers_bound (fact, test->number, true);
            break;
        case FACT_OP_LE:
            to = s_numbers_bound (fact, test->number, true);
            break;
        case FACT_OP_LT:
            to = s_numbers_bound (fact, test->number, false);
            break;
        default:
            break;
        }
        //  (An order with a number written matches numbers only, and a
        //  number equals only numbers)
        for (size_t index = from; index < to; index++)
            s_take (fact->numbers [index], bits, words, &count);
        return count;
    }
    //  Globs, != and text order: one test per distinct value
    for (s_value_t *value = (s_value_t *) zhashx_first (fact->values); value;
         value = (s_value_t *) zhashx_next (fact->values))
        if (fact_test_matches (test, value->text))
            s_take (value, bits, words, &count);
    return count;
}

size_t
factindex_values (factindex_t *self, const char *name)
{
    s_fact_t *fact = (s_fact_t *) zhashx_lookup (self->facts, name);
    return fact ? zhashx_size (fact->values) : 0;
}
