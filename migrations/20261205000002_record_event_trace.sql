-- `record_event` also stores, with each `webhooks.deliver` job it inserts, the trace
-- context of the change that recorded the event (`jobs.trace_context`, see the job
-- engine's `trace`), so that a delivery's attempts are spans of the trace that caused
-- it. The new argument has a default: a copy that still calls it with three (a rolling
-- upgrade) gets this function, storing no context.
DROP FUNCTION record_event(text, bigint, jsonb);

CREATE FUNCTION record_event(event_type text, subject bigint, payload jsonb,
                             recorded_in_trace text DEFAULT NULL)
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
        INSERT INTO jobs (kind, queue, args, max_attempts, priority, trace_context)
        SELECT 'webhooks.deliver', 'webhooks', jsonb_build_object('delivery_id', d.id), 8, 1,
               recorded_in_trace
        FROM unnest(delivery_ids) WITH ORDINALITY AS d(id, n)
        ORDER BY d.n;
    END IF;
    RETURN recorded_id;
END
$$;
