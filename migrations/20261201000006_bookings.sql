-- Bookings (product.md section 11): the owner publishes weekly windows in which they are
-- free; a visitor books a slot; mails to both sides are jobs that nobody waits for.

-- The owner's availability: one row. Windows are weekly, in the owner's local time
-- (STANDMEET_TIMEZONE): [{"weekday": 1-7 (Monday 1), "start": "HH:MM", "end": "HH:MM"}].
-- Until the owner says otherwise: weekdays from nine to five.
CREATE TABLE booking_availability (
    singleton      boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    windows        jsonb       NOT NULL CHECK (jsonb_typeof(windows) = 'array'),
    slot_minutes   integer     NOT NULL DEFAULT 30 CHECK (slot_minutes BETWEEN 5 AND 480),
    buffer_minutes integer     NOT NULL DEFAULT 0 CHECK (buffer_minutes BETWEEN 0 AND 240),
    days_ahead     integer     NOT NULL DEFAULT 14 CHECK (days_ahead BETWEEN 1 AND 365),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO booking_availability (windows)
SELECT jsonb_agg(jsonb_build_object('weekday', d, 'start', '09:00', 'end', '17:00') ORDER BY d)
FROM generate_series(1, 5) AS d;

CREATE TYPE booking_state AS ENUM ('confirmed', 'cancelled');

CREATE TABLE bookings (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The iCalendar UID: the invitation and its cancellation name the same event.
    uid                 text        NOT NULL UNIQUE,
    starts_at           timestamptz NOT NULL,
    ends_at             timestamptz NOT NULL,
    -- The end plus the buffer that applied when it was booked: the time no other
    -- confirmed booking may share (the exclusion constraint below).
    blocked_until       timestamptz NOT NULL,
    name                text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    email               text        NOT NULL CHECK (email LIKE '%_@_%'),
    topic               text        NOT NULL DEFAULT '' CHECK (char_length(topic) <= 2000),
    state               booking_state NOT NULL DEFAULT 'confirmed',
    -- 'visitor' (the /book page) or 'agent' (MCP).
    booked_by           text        NOT NULL CHECK (booked_by IN ('visitor', 'agent')),
    created_at          timestamptz NOT NULL DEFAULT now(),
    cancelled_at        timestamptz,
    -- 'visitor' (their link), 'admin' (the row's Cancel) or 'agent' (MCP).
    cancelled_by        text        CHECK (cancelled_by IN ('visitor', 'admin', 'agent')),
    notify_job_id       bigint REFERENCES jobs (id) ON DELETE SET NULL,
    confirmation_job_id bigint REFERENCES jobs (id) ON DELETE SET NULL,
    cancellation_job_id bigint REFERENCES jobs (id) ON DELETE SET NULL,
    -- Which side the cancellation job has mailed already, so a retry mails only the
    -- other one.
    owner_told_cancelled_at   timestamptz,
    visitor_told_cancelled_at timestamptz,
    CONSTRAINT bookings_end_after_start CHECK (ends_at > starts_at AND blocked_until >= ends_at),
    CONSTRAINT bookings_cancelled_when
        CHECK ((state = 'cancelled') = (cancelled_at IS NOT NULL AND cancelled_by IS NOT NULL)),
    -- A slot is never booked twice: of two visitors racing for one time, the database
    -- keeps exactly one (the other insert fails with exclusion_violation, 23P01).
    CONSTRAINT bookings_no_overlap
        EXCLUDE USING gist (tstzrange(starts_at, blocked_until) WITH &&) WHERE (state = 'confirmed')
);
CREATE INDEX bookings_starts_at_idx ON bookings (starts_at);
-- For the foreign keys, when the cleaner deletes jobs.
CREATE INDEX bookings_notify_job_idx ON bookings (notify_job_id);
CREATE INDEX bookings_confirmation_job_idx ON bookings (confirmation_job_id);
CREATE INDEX bookings_cancellation_job_idx ON bookings (cancellation_job_id);

-- Every cancel link an attempt of the confirmation job minted, by hash, committed before
-- the mail that carries it goes out (as access codes are): each link that may have been
-- mailed works, and none sits in clear in the database.
CREATE TABLE booking_cancel_tokens (
    token_hash  text        PRIMARY KEY,
    booking_id  bigint      NOT NULL REFERENCES bookings (id) ON DELETE CASCADE,
    minted_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX booking_cancel_tokens_booking_idx ON booking_cancel_tokens (booking_id);

-- The mail log keeps a mail's calendar attachment (an .ics) whatever the supplier: it
-- carries no secret (a booking's cancel link is in the body, which only the log
-- supplier keeps), and the admin sees what the visitor got.
ALTER TABLE mail_log ADD COLUMN attachment text;
