-- The application's half of the retired migration 20261130000001 (its other half, the
-- table `job_workers`, is the job engine's own now). A database migrated by an earlier
-- build already has all of it and nothing here changes; one migrated before 20261130
-- gets it now, with the same backfill.

-- A mail is logged as `sending` before it goes out (so the per-recipient throttle
-- counts it while it is on its way) and becomes `sent` only after the mail server
-- took it. The mail log page shows sent mails only; a failed send removes its row.
ALTER TABLE mail_log
    ADD COLUMN IF NOT EXISTS state text NOT NULL DEFAULT 'sent' CHECK (state IN ('sending', 'sent'));

DO $$
BEGIN
    -- Every access code ever minted for a request, by hash, stored (and committed)
    -- before the mail that carries it goes out: a send that succeeded but whose job
    -- then failed (a commit error, a time-out after the server took the mail, a crash,
    -- a rescue) still leaves the visitor a code that works, and a retry mails a new
    -- one that works too.
    IF to_regclass('access_codes') IS NULL THEN
        CREATE TABLE access_codes (
            code_hash   text        PRIMARY KEY,
            request_id  bigint      NOT NULL REFERENCES access_requests (id) ON DELETE CASCADE,
            minted_at   timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX access_codes_request_idx ON access_codes (request_id);
        INSERT INTO access_codes (code_hash, request_id, minted_at)
        SELECT code_hash, id, coalesce(replied_at, now()) FROM access_requests WHERE code_hash IS NOT NULL
        ON CONFLICT DO NOTHING;
    END IF;

    -- Likewise every confirmation link token minted for an owner-address change: each
    -- one that may have been mailed confirms that change until it expires.
    IF to_regclass('owner_email_change_tokens') IS NULL THEN
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
    END IF;
END
$$;
