/*  =========================================================================
    topics - a relay's set of topics: what a peer's hello subscribes,
    what it was welcomed for, what it was granted

    A few topics (an agent holds about five): a plain array, so that a
    relay of many agents spends little memory on each. Past
    RELAY_TOPICS_INDEXED of them (a hello may make some 37,000) they are
    indexed too, so that finding one does not cost a search of them all.

    The zero value is an empty set. Topics are copied in and owned.

    Threading: the relay's thread only.
    =========================================================================
*/
#ifndef GRID_RELAY_TOPICS_H
#define GRID_RELAY_TOPICS_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RELAY_TOPICS_INDEXED 64     //  Past this many, indexed too

typedef struct {
    char **items;                    //  Topics (owned)
    size_t count;                    //  How many
    zhashx_t *index;                 //  Topic -> its position + 1, or NULL
} relay_topics_t;

//  The position of TOPIC in TOPICS, or -1.
ssize_t relay_topics_find (const relay_topics_t *topics, const char *topic);

//  True when TOPICS holds TOPIC.
bool relay_topics_has (const relay_topics_t *topics, const char *topic);

//  Adds TOPIC, whether or not it is there (the index keeps the first):
//  cheap, for a hello's topics read before they are judged.
void relay_topics_append (relay_topics_t *topics, const char *topic);

//  Adds TOPIC unless it is there. Returns true when it was added.
bool relay_topics_add (relay_topics_t *topics, const char *topic);

//  Removes TOPIC. Returns true when it was there.
bool relay_topics_remove (relay_topics_t *topics, const char *topic);

//  Empties TOPICS (frees what it holds; the set may be used again).
void relay_topics_clear (relay_topics_t *topics);

//  A zhashx destructor for a malloc'd set: clears and frees *ITEM_P.
void relay_topics_destroy (void **item_p);

#endif
