-- Records an event and fans it out, inside whatever statement calls it, so that a change
-- can write its event in the statement it already sends (no extra round trip): the
-- event's row, a delivery per enabled endpoint that wants events of its type, and a
-- `webhooks.deliver` job per delivery (none, and no job insert at all, when no endpoint
-- wants it). Answers the event's id. Called by `events::record` in Rust and by the
-- hottest changes directly (an access request's last statement).
--
-- The delivery job's kind, queue, attempts and priority are those of
-- `DeliverWebhook` in src/domain/webhooks/deliver.rs; its arguments are its
-- `DeliverArgs`. A test (tests/webhooks.rs) checks that the two agree.
--
-- PL/pgSQL rather than SQL so that its statements' plans are prepared once per
-- connection, not planned on every call.
CREATE FUNCTION record_event(event_type text, subject bigint, payload jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    recorded_id bigint;
    delivery_ids bigint[];
BEGIN
    WITH event AS (
        INSERT INTO events (type, subject_id, data)
        VALUES (event_type, subject, payload)
        RETURNING id, type
    ), deliveries AS (
        INSERT INTO webhook_deliveries (endpoint_id, event_id)
        SELECT w.id, event.id
        FROM webhook_endpoints w CROSS JOIN event
        WHERE w.enabled AND w.event_types && ARRAY[event.type, '*']
        ORDER BY w.id
        RETURNING id
    )
    SELECT (SELECT id FROM event), ARRAY(SELECT id FROM deliveries ORDER BY id)
    INTO recorded_id, delivery_ids;

    IF cardinality(delivery_ids) > 0 THEN
        INSERT INTO jobs (kind, queue, args, max_attempts, priority)
        SELECT 'webhooks.deliver', 'webhooks', jsonb_build_object('delivery_id', d.id), 8, 1
        FROM unnest(delivery_ids) WITH ORDINALITY AS d(id, n)
        ORDER BY d.n;
    END IF;
    RETURN recorded_id;
END
$$;
