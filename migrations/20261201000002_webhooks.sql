-- Webhooks: endpoints that want to hear about events, one delivery per (event or test
-- message, endpoint), and every attempt of it. A delivery is carried out by a
-- `webhooks.deliver` job; the delivery row outlives the job (the cleaner deletes
-- finished jobs after a day), so it keeps how it ended. See src/domain/webhooks/.
CREATE TABLE webhook_endpoints (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url               text        NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
    -- Event type names, or the one element '*' for every type.
    event_types       text[]      NOT NULL CHECK (cardinality(event_types) >= 1),
    -- `whsec_` + base64 of 32 random bytes: the key of the signatures. Shown once.
    secret            text        NOT NULL CHECK (secret LIKE 'whsec\_%'),
    enabled           boolean     NOT NULL DEFAULT true,
    disabled_reason   text,
    -- Deliveries that ended failed (every attempt spent) since the last one delivered;
    -- at 20 the endpoint is disabled.
    failures_in_a_row integer     NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE webhook_deliveries (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id bigint      NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    -- The event delivered; NULL for a test message ("Send test", `webhooks.test`).
    event_id    bigint      REFERENCES events (id) ON DELETE CASCADE,
    -- The job carrying it out (a redelivery replaces it). Written by the job when it
    -- starts (so the fan-out is one statement for the deliveries and one for their
    -- jobs); NULL until then. No foreign key: the cleaner deletes finished jobs without
    -- looking here, and a job id that is gone means the job ended (see `outcome`).
    job_id      bigint,
    -- How it ended, written by the job: kept when the job row is gone.
    outcome     text        CHECK (outcome IN ('delivered', 'failed')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- An endpoint's page lists its deliveries, newest first.
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id);
-- At most one delivery per job.
CREATE UNIQUE INDEX webhook_deliveries_job_idx ON webhook_deliveries (job_id);
-- Deleting old events deletes their deliveries.
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id     bigint      NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    started_at      timestamptz NOT NULL,
    duration_ms     integer     NOT NULL CHECK (duration_ms >= 0),
    -- The endpoint's HTTP status; NULL when no answer came (timeout, refused, …).
    response_status smallint,
    -- The start of the endpoint's answer (at most 1 KiB of text).
    response_excerpt text       NOT NULL DEFAULT '',
    -- What went wrong, in words; NULL for a 2xx.
    error           text
);

CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, id);

-- A delivery as the pages and tools show it: what it carries, its job's state (while
-- the job exists), how many attempts it made and what the last one found. One
-- definition for the list and the single lookup; PostgreSQL plans it as the joins it
-- stands for, so a filter on `endpoint_id` or `id` reaches the indexes.
CREATE VIEW webhook_delivery_summaries AS
SELECT d.id, d.endpoint_id, d.event_id,
       coalesce(e.type, 'webhook.test') AS message_type,
       d.job_id, j.state AS job_state, d.outcome,
       (SELECT count(*) FROM webhook_attempts a WHERE a.delivery_id = d.id) AS attempts,
       last.response_status, last.response_excerpt, last.duration_ms, last.error AS last_error,
       d.created_at
FROM webhook_deliveries d
LEFT JOIN events e ON e.id = d.event_id
LEFT JOIN job_status j ON j.id = d.job_id
LEFT JOIN LATERAL (
    SELECT a.response_status, a.response_excerpt, a.duration_ms, a.error
    FROM webhook_attempts a WHERE a.delivery_id = d.id ORDER BY a.id DESC LIMIT 1
) last ON true;
