-- The job engine under faults: which processes run which kinds, a mail log that shows
-- only what really went out, and secrets that stay valid whichever attempt mailed them.

-- Every running StandMeet process, the kinds it has handlers for, and when it last said
-- so (each renews its row with its leases). A job of a kind no live process knows waits
-- `available` for one that does (a rolling deploy), and the Tasks panel says so.
CREATE TABLE job_workers (
    worker_id    text        PRIMARY KEY,
    kinds        text[]      NOT NULL,
    queues       text[]      NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- A mail is logged as `sending` before it goes out (so the per-recipient throttle
-- counts it while it is on its way) and becomes `sent` only after the mail server
-- took it. The mail log page shows sent mails only; a failed send removes its row.
ALTER TABLE mail_log
    ADD COLUMN state text NOT NULL DEFAULT 'sent' CHECK (state IN ('sending', 'sent'));

-- Every access code ever minted for a request, by hash, stored (and committed) before
-- the mail that carries it goes out: a send that succeeded but whose job then failed
-- (a commit error, a time-out after the server took the mail, a crash, a rescue) still
-- leaves the visitor a code that works, and a retry mails a new one that works too.
CREATE TABLE access_codes (
    code_hash   text        PRIMARY KEY,
    request_id  bigint      NOT NULL REFERENCES access_requests (id) ON DELETE CASCADE,
    minted_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX access_codes_request_idx ON access_codes (request_id);
INSERT INTO access_codes (code_hash, request_id, minted_at)
SELECT code_hash, id, coalesce(replied_at, now()) FROM access_requests WHERE code_hash IS NOT NULL
ON CONFLICT DO NOTHING;

-- Likewise every confirmation link token minted for an owner-address change: each one
-- that may have been mailed confirms that change until it expires.
CREATE TABLE owner_email_change_tokens (
    token_hash  text        PRIMARY KEY,
    change_id   bigint      NOT NULL REFERENCES owner_email_changes (id) ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL,
    minted_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX owner_email_change_tokens_change_idx ON owner_email_change_tokens (change_id);
INSERT INTO owner_email_change_tokens (token_hash, change_id, expires_at)
SELECT token_hash, id, token_expires_at FROM owner_email_changes WHERE token_hash IS NOT NULL
ON CONFLICT DO NOTHING;
