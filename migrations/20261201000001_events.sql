-- What happened, as events: each is written in the transaction of the change it
-- records (an outbox), so a rollback leaves none and a commit always leaves one. Job
-- state changes are not events: the job row is their record. See src/domain/events.rs.
CREATE TABLE events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type        text        NOT NULL CHECK (type ~ '^[a-z_]+(\.[a-z_]+)+$' AND char_length(type) <= 64),
    -- The id the event is about (the first id in `data`), for filtering and linking.
    subject_id  bigint,
    data        jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(data) = 'object'),
    occurred_at timestamptz NOT NULL DEFAULT now()
);

-- The events page and `events.list` filter by type and page by id.
CREATE INDEX events_type_id_idx ON events (type, id);
