-- The owner's address: where StandMeet mails the owner (new access requests, recovery
-- phrases). It changes only when the new address confirms, by a link mailed to it.

-- One row at most; until the owner changes their address, STANDMEET_OWNER_EMAIL (or
-- the first admin's address) is used.
CREATE TABLE owner_profile (
    id          smallint    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    email       text        NOT NULL CHECK (email LIKE '%_@_%'),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TYPE email_change_status AS ENUM (
    'pending',     -- waiting for the new address to confirm
    'superseded',  -- a newer change replaced it before it was confirmed
    'cancelled',   -- the owner cancelled it
    'confirmed'    -- the new address confirmed: it is the owner's address now
);

CREATE TABLE owner_email_changes (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    new_email            text        NOT NULL CHECK (new_email LIKE '%_@_%'),
    status               email_change_status NOT NULL DEFAULT 'pending',
    requested_by         bigint REFERENCES admins (id) ON DELETE SET NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    pending_email_job_id bigint REFERENCES jobs (id) ON DELETE SET NULL,
    -- SHA-256 of the link's token, minted when the confirmation mail is sent.
    token_hash           text UNIQUE,
    token_expires_at     timestamptz,
    sent_at              timestamptz,
    decided_at           timestamptz,
    CONSTRAINT owner_email_changes_token_with_expiry
        CHECK ((token_hash IS NULL) = (token_expires_at IS NULL))
);

-- At most one change waits at a time: a new one supersedes the old in its transaction.
CREATE UNIQUE INDEX owner_email_changes_one_pending ON owner_email_changes ((true)) WHERE status = 'pending';
CREATE INDEX owner_email_changes_job_idx ON owner_email_changes (pending_email_job_id);

-- Every "Send recovery phrase", sent or not, with the supplier's error when not.
CREATE TABLE recovery_sends (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recipient     text        NOT NULL,
    attempted_at  timestamptz NOT NULL DEFAULT now(),
    sent          boolean     NOT NULL,
    error         text,
    phrase_hash   text,
    CONSTRAINT recovery_sends_error_iff_unsent CHECK (sent = (error IS NULL))
);
