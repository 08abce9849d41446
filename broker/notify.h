/*  =========================================================================
    notify - job notifications: webhooks told of a job's end, durably

    A job's end is told to the broker-wide webhooks of the configuration
    (`notify.targets`, each with the ends it wants) and to the ones its
    spec names (`notify:`, allowed only under the URL prefixes of
    `notify.allow`). Each (job, webhook) is a delivery: a record in
    STORE_DB_NOTIFY written in the job's final transaction (the pass that
    stores its final status), so a delivery is never lost once the job's
    end is committed, and never queued for an end that was undone.

    Key: the wall clock in ms (8 bytes big-endian) then a sequence (4
    bytes big-endian), so that deliveries sort in the order their jobs
    ended; the delivery id is the key in hex (24 characters). Value: a
    msgpack map

        {job: str, url: str, source: "job" | "broker", status: "pending" |
         "sent" | "dead", attempts: int, created_ms: int, since_ms: int,
         next_ms: int, updated_ms: int, ?code: int, ?error: str,
         body: str}

    body is the JSON payload (docs/NOTIFY.md), fixed when the delivery is
    queued so that every attempt sends the same bytes. since_ms starts
    the window of `notify.retry_for` (a manual retry restarts it). The
    signing secret is never stored: it lives in the configuration.

    The loop side (notify_t) keeps the pending deliveries in memory in key
    order, hands due ones to worker threads (notify_post.h) at most one
    at a time per URL, and records each outcome in the pass: the record,
    an event in the job's timeline (notify_sent, notify_failed,
    notify_dead) and the counters of the metrics.

    The configuration (notify_config_*, notify_spec_check) is read in
    notify_config.c; the workers that POST are notify_post's.

    Threading: the broker's thread only (the workers are notify_post's).
    =========================================================================
*/
#ifndef GRID_BROKER_NOTIFY_H
#define GRID_BROKER_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <czmq.h>

#include "../proto/job.h"
#include "../proto/names.h"
#include "../proto/pv.h"
#include "../proto/pw.h"
#include "../store/store.h"
#include "sched.h"

#define NOTIFY_KEY_LEN STAMP_KEY_LEN //  ms (8) + seq (4)
#define NOTIFY_ID_LEN 24             //  The key in hex
#define NOTIFY_MAX_TARGETS 16        //  Broker-wide webhooks at most
#define NOTIFY_MAX_ALLOW 64          //  Allowed URL prefixes at most
#define NOTIFY_MAX_WORKERS 32        //  Worker threads at most
#define NOTIFY_SECRET_MAX 1024       //  A secret's bytes at most
#define NOTIFY_LIST_DEFAULT 100      //  notify.list without a limit
#define NOTIFY_LIST_MAX 1000         //  notify.list's limit at most
#define NOTIFY_FAILED_MAX 20         //  Failed nodes a payload names at most
#define NOTIFY_OUTPUT_LINES 5        //  Lines of a failed node's output
#define NOTIFY_OUTPUT_BYTES 1024     //  ... in at most so many bytes
#define NOTIFY_ERROR_MAX 256         //  An attempt's error sentence kept

//  The `notify:` part of the broker's configuration.
typedef struct {
    job_notify_t *targets;       //  Broker-wide webhooks (owned)
    size_t target_count;         //  How many
    char **allow;                //  URL prefixes a job's webhooks may use (owned)
    size_t allow_count;          //  How many (0: job-level webhooks refused)
    char *secret;                //  HMAC-SHA256 key (owned), or NULL: unsigned
    char *public_url;            //  The HTTP face as people reach it (links), or NULL
    int64_t timeout_ms;          //  One attempt at most (default 10s)
    int64_t retry_base_ms;       //  First backoff (default 1s)
    int64_t retry_cap_ms;        //  Largest backoff (default 5m)
    int64_t retry_for_ms;        //  Dead-lettered after so long failing (default 24h)
    int64_t retention_ms;        //  Sent and dead records kept (default 7d, 0: for ever)
    int64_t workers;             //  Worker threads (default 2)
} notify_config_t;

//  Fills CONFIG with the defaults: no webhooks.
void notify_config_defaults (notify_config_t *config);

//  Reads ROOT's `notify:` map (absent: the defaults). Returns 0, or -1 with
//  a sentence in WHY naming the key.
int notify_config_load (notify_config_t *config, const pv_t *root, char *why,
                        size_t why_len);

//  Deep copy (0, or -1 when out of memory) and release.
int notify_config_copy (notify_config_t *dest, const notify_config_t *src);
void notify_config_clear (notify_config_t *config);

//  Checks SPEC's webhooks against CONFIG at submit: each URL must start
//  with an allowed prefix. Returns 0, or -1 with a sentence in WHY
//  naming the field (notify[1].url).
int notify_spec_check (const notify_config_t *config, const job_spec_t *spec,
                       char *why, size_t why_len);

//  KEY as a delivery id (NOTIFY_ID_LEN + 1 bytes into ID), and back: 0,
//  or -1 when ID is not one.
void notify_id_format (const uint8_t *key, char *id);
int notify_id_parse (const char *id, uint8_t *key);

//  URL as lists and events show it: without its query and fragment,
//  which may hold a token (into BUF of SIZE bytes).
void notify_url_show (const char *url, char *buf, size_t size);

//  The backoff before attempt ATTEMPTS + 1: base * 2^(attempts - 1),
//  capped, with up to a quarter of jitter from RANDOM (0..1).
int64_t notify_backoff_ms (const notify_config_t *config, uint32_t attempts,
                           double random);

//  ---------------------------------------------------------------------
//  The loop side

typedef struct _notify_t notify_t;

//  Counters for the metrics (since the broker started), and a gauge.
typedef struct {
    uint64_t sent;               //  Deliveries that got a 2xx
    uint64_t failed;             //  Attempts that failed
    uint64_t dead;               //  Deliveries dead-lettered
    uint64_t pending;            //  Deliveries waiting now
} notify_counters_t;

//  A new notifier. Returns NULL when out of memory.
notify_t *notify_new (void);

//  Stops its workers (an attempt under way is cut short) and frees it;
//  NULL-safe.
void notify_destroy (notify_t **self_p);

//  Starts CONFIG's workers (once; later calls change nothing) and returns
//  the socket their outcomes come back on, for the loop to read; NULL
//  when they cannot start.
zsock_t *notify_start (notify_t *self, const notify_config_t *config);

//  Loads the pending deliveries of TXN (after a restart). Returns how
//  many, or < 0 (a STORE_E* code).
int notify_restore (notify_t *self, store_txn_t *txn);

//  A pass failed to commit: the pending deliveries are read again from
//  STORE (committed state; no write transaction open), those with a
//  worker staying marked so.
void notify_reload (notify_t *self, store_t *store);

//  JOB reached its final status in TXN (the pass's) at WALL_MS: queues a
//  delivery for each webhook that wants this end. Returns how many, or <
//  0 (a STORE_E* code: the pass fails with the job's end).
int notify_job_finished (notify_t *self, store_txn_t *txn,
                         const notify_config_t *config, const sched_job_t *job,
                         int64_t wall_ms);

//  Hands the due pending deliveries (next_ms <= WALL_MS) to free workers,
//  reading their records in STORE (committed state only: call it with no
//  write transaction open).
void notify_dispatch (notify_t *self, store_t *store,
                      const notify_config_t *config, int64_t wall_ms);

//  One outcome a worker sent back, read from the outcome socket.
typedef struct {
    uint8_t key [NOTIFY_KEY_LEN];  //  The delivery
    bool ok;                     //  A 2xx came back
    long code;                   //  HTTP status, 0 when none came
    char error [NOTIFY_ERROR_MAX];  //  Why it failed, or ""
    int64_t duration_ms;         //  How long the attempt took
} notify_outcome_t;

//  Reads one outcome from the outcome socket: its worker and its delivery
//  are free again (an outcome that is not recorded leaves the delivery
//  to be sent again). Returns 0, or -1 when none could be read.
int notify_outcome_recv (notify_t *self, notify_outcome_t *outcome);

//  Records OUTCOME in TXN at WALL_MS: sent, pending again after a
//  backoff, or dead once retry_for has passed. Writes *JOB_ID (JOB_ID_LEN
//  + 1 bytes), *EVENT and *DETAIL (DETAIL_LEN bytes) for the job's
//  timeline. Returns 0, 1 when the delivery is gone (nothing to record),
//  or a STORE_E* code.
int notify_outcome_apply (notify_t *self, store_txn_t *txn,
                          const notify_config_t *config,
                          const notify_outcome_t *outcome, int64_t wall_ms,
                          char *job_id, const char **event, char *detail,
                          size_t detail_len);

//  The counters now.
notify_counters_t notify_counters (const notify_t *self);

//  ---------------------------------------------------------------------
//  The operator's requests

//  Writes {deliveries: [DELIVERY...]} of TXN, newest first, at most LIMIT;
//  STATUS ("pending", "sent", "dead") and JOB (NULL: any) filter.
//  DELIVERY: {id, job, url (shown), source, status, attempts, created,
//  next, updated, ?code, ?error}. Never the body's secret (there is none)
//  or the URL's query. Returns 0, or -1 when the store cannot be read.
int notify_list (store_txn_t *txn, const char *status, const char *job,
                 size_t limit, pw_t *writer);

//  Makes delivery ID pending again now (a new retry_for window), in TXN.
//  Returns 0, STORE_ENOTFOUND, 1 when it is pending already, or a
//  STORE_E* code. JOB_ID gets its job (JOB_ID_LEN + 1 bytes).
int notify_retry (notify_t *self, store_txn_t *txn, const char *id,
                  int64_t wall_ms, char *job_id);

//  Deletes sent and dead records last changed before CUTOFF_MS, at most
//  LIMIT. Returns how many, or < 0 (a STORE_E* code).
int notify_prune (store_txn_t *txn, int64_t cutoff_ms, size_t limit);

#endif
