/*  =========================================================================
    topics - a relay's set of topics (see topics.h)
    =========================================================================
*/
#include "topics.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

//  The position of TOPIC in TOPICS, or -1.
ssize_t
relay_topics_find (const relay_topics_t *topics, const char *topic)
{
    if (topics->index) {
        uintptr_t at = (uintptr_t) zhashx_lookup (topics->index, topic);
        return at ? (ssize_t) at - 1 : -1;
    }
    for (size_t index = 0; index < topics->count; index++)
        if (strcmp (topics->items [index], topic) == 0)
            return (ssize_t) index;
    return -1;
}

bool
relay_topics_has (const relay_topics_t *topics, const char *topic)
{
    return relay_topics_find (topics, topic) >= 0;
}

//  Adds TOPIC, whether or not it is there (the index keeps the first).
//  Up to 8 topics the array is as long as it needs; past that it grows
//  by doubling, at each power of two, so that tens of thousands cost no
//  copy of the array per topic.
void
relay_topics_append (relay_topics_t *topics, const char *topic)
{
    size_t count = topics->count;
    if (count < 8 || (count & (count - 1)) == 0) {
        size_t room = count < 8 ? count + 1 : count * 2;
        char **items = (char **) realloc (topics->items,
                                          room * sizeof (char *));
        assert (items);
        topics->items = items;
    }
    topics->items [topics->count++] = strdup (topic);
    if (topics->index)
        zhashx_insert (topics->index, topic, (void *) (uintptr_t)
                                                 topics->count);
    else
    if (topics->count > RELAY_TOPICS_INDEXED) {
        topics->index = zhashx_new ();
        for (size_t index = 0; index < topics->count; index++)
            zhashx_insert (topics->index, topics->items [index],
                           (void *) (uintptr_t) (index + 1));
    }
}

//  Adds TOPIC unless it is there. Returns true when it was added.
bool
relay_topics_add (relay_topics_t *topics, const char *topic)
{
    if (relay_topics_has (topics, topic))
        return false;
    relay_topics_append (topics, topic);
    return true;
}

//  Removes TOPIC. Returns true when it was there.
bool
relay_topics_remove (relay_topics_t *topics, const char *topic)
{
    ssize_t at = relay_topics_find (topics, topic);
    if (at < 0)
        return false;
    if (topics->index)
        zhashx_delete (topics->index, topic);
    free (topics->items [at]);
    topics->items [at] = topics->items [--topics->count];
    //  The last one moved into its place
    if (topics->index && (size_t) at < topics->count
        && (uintptr_t) zhashx_lookup (topics->index, topics->items [at])
               == topics->count + 1)
        zhashx_update (topics->index, topics->items [at],
                       (void *) (uintptr_t) (at + 1));
    return true;
}

void
relay_topics_clear (relay_topics_t *topics)
{
    for (size_t index = 0; index < topics->count; index++)
        free (topics->items [index]);
    free (topics->items);
    zhashx_destroy (&topics->index);
    topics->items = NULL;
    topics->count = 0;
}

void
relay_topics_destroy (void **item_p)
{
    relay_topics_t *topics = (relay_topics_t *) *item_p;
    if (topics) {
        relay_topics_clear (topics);
        free (topics);
        *item_p = NULL;
    }
}
