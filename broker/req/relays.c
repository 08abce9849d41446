/*  =========================================================================
    req/relays - relay.list (see req.h)
    =========================================================================
*/

//  ---------------------------------------------------------------------
//  relay.list

static void
s_write_time (pw_t *writer, int64_t wall_ms)
{
    if (wall_ms <= 0) {
        pw_nil (writer);
        return;
    }
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    pw_str (writer, text);
}

static int
s_compare_relays (const void *a, const void *b)
{
    const s_relay_t *left = *(const s_relay_t *const *) a;
    const s_relay_t *right = *(const s_relay_t *const *) b;
    int rc = strcmp (left->name, right->name);
    return rc ? rc : strcmp (left->id, right->id);
}

bool
relays_handle (broker_t *broker, const proto_request_t *request, pw_t *reply)
{
    if (strcmp (request->type, "relay.list") != 0)
        return false;
    relays_t *self = broker->relays;
    size_t count = 0;
    s_relay_t **list = (s_relay_t **) calloc (zhashx_size (self->relays) + 1,
                                              sizeof (s_relay_t *));
    assert (list);
    for (s_relay_t *relay = (s_relay_t *) zhashx_first (self->relays); relay;
         relay = (s_relay_t *) zhashx_next (self->relays))
        if (relay->entry || relay->name [0])
            list [count++] = relay;
    qsort (list, count, sizeof (s_relay_t *), s_compare_relays);
    //  One pass over the nodes behind relays counts every relay's agents
    for (s_relay_t *relay = (s_relay_t *) zhashx_first (self->relays); relay;
         relay = (s_relay_t *) zhashx_next (self->relays))
        relay->agents = 0;
    for (s_member_t *member = (s_member_t *) zhashx_first (self->members);
         member; member = (s_member_t *) zhashx_next (self->members)) {
        registry_node_t *node = member->next
                                    ? registry_lookup (
                                          broker->registry,
                                          (const char *) zhashx_cursor (
                                              self->members))
                                    : NULL;
        if (node && node->online)
            member->next->agents++;
    }
    int64_t now_ms = broker_now_ms ();
    int64_t window_ms = broker->config.heartbeat_ms
                        * broker->config.missed_heartbeats;
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    pw_map (reply, 1);
    pw_str (reply, "relays");
    pw_array (reply, count);
    for (size_t index = 0; index < count; index++) {
        s_relay_t *relay = list [index];
        size_t agents = relay->agents;
        bool connected = !relay->revoked && relay->last_seen_wall_ms
                         && now_ms - relay->last_seen_ms <= window_ms;
        pw_map (reply, 6 + (relay->upstream [0] ? 1 : 0)
                       + (relay->entry ? 1 : 0) + (relay->revoked ? 1 : 0));
        pw_str (reply, "name");
        pw_str (reply, relay->name);
        pw_str (reply, "key");
        pw_str (reply, relay->entry ? relay->entry->key : "");
        pw_str (reply, "agents");
        pw_int (reply, (int64_t) agents);
        pw_str (reply, "connected");
        pw_bool (reply, connected);
        pw_str (reply, "last_seen");
        s_write_time (reply, relay->last_seen_wall_ms);
        pw_str (reply, "refused");
        pw_int (reply, (int64_t) relay->refused);
        if (relay->upstream [0]) {
            pw_str (reply, "upstream");
            pw_str (reply, relay->upstream);
        }
        if (relay->entry) {
            pw_str (reply, "pool");
            pw_str (reply, relay->entry->pool);
        }
        if (relay->revoked) {
            pw_str (reply, "revoked");
            pw_bool (reply, true);
        }
    }
    free (list);
    return true;
}
