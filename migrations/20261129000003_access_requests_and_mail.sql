-- Visitors ask for access; admins approve (a mail with an access code goes out) or
-- deny. Every mail StandMeet sends is logged, which also counts the mails per
-- recipient for the throttle.

CREATE TYPE access_request_status AS ENUM (
    'pending',   -- waiting for an admin
    'approved',  -- an admin approved it; the mail with the code is on its way
    'replied',   -- the mail with the code went out (set with the mail job's completion)
    'denied'     -- an admin said no
);

CREATE TABLE access_requests (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    email          text        NOT NULL CHECK (email LIKE '%_@_%'),
    message        text        NOT NULL DEFAULT '' CHECK (char_length(message) <= 5000),
    status         access_request_status NOT NULL DEFAULT 'pending',
    created_at     timestamptz NOT NULL DEFAULT now(),
    decided_at     timestamptz,
    decided_by     bigint REFERENCES admins (id) ON DELETE SET NULL,
    -- The jobs that tell the owner and that mail the code. Finished jobs are cleaned
    -- after their retention; the request keeps its status.
    notify_job_id  bigint REFERENCES jobs (id) ON DELETE SET NULL,
    mail_job_id    bigint REFERENCES jobs (id) ON DELETE SET NULL,
    -- SHA-256 of the access code, minted when its mail is sent (never stored in clear).
    code_hash      text,
    replied_at     timestamptz,
    CONSTRAINT access_requests_replied_has_code
        CHECK (status <> 'replied' OR (code_hash IS NOT NULL AND replied_at IS NOT NULL))
);

CREATE INDEX access_requests_status_id_idx ON access_requests (status, id);
CREATE INDEX access_requests_email_idx ON access_requests (lower(email));
-- For the foreign keys, when the cleaner deletes jobs.
CREATE INDEX access_requests_notify_job_idx ON access_requests (notify_job_id);
CREATE INDEX access_requests_mail_job_idx ON access_requests (mail_job_id);

CREATE TABLE mail_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recipient  text        NOT NULL,
    subject    text        NOT NULL,
    -- Kept only for the `log` supplier, so a person trying StandMeet without SMTP can
    -- read the code or the link; real mail bodies are not kept.
    body       text,
    supplier   text        NOT NULL CHECK (supplier IN ('log', 'smtp')),
    job_id     bigint,
    sent_at    timestamptz NOT NULL DEFAULT now()
);

-- The throttle: mails to one recipient in the last hour.
CREATE INDEX mail_log_recipient_sent_idx ON mail_log (lower(recipient), sent_at);
