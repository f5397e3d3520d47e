-- Admins sign in with an email and a password; sessions live in PostgreSQL so that
-- every copy of StandMeet sees the same sign-ins and a restart signs nobody out.

CREATE TABLE admins (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- As typed, with the domain in lower case (see EmailAddress::parse).
    email           text        NOT NULL CHECK (email LIKE '%_@_%'),
    -- A PHC string: argon2id, with its salt and parameters.
    password_hash   text        NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    last_signed_in_at timestamptz
);

-- One admin per address, whatever the case it is typed in.
CREATE UNIQUE INDEX admins_email_key ON admins (lower(email));

-- The table tower-sessions' PostgresStore reads and writes (its own layout).
CREATE TABLE sessions (
    id          text        PRIMARY KEY,
    data        bytea       NOT NULL,
    expiry_date timestamptz NOT NULL
);

-- For the periodic deletion of expired sessions.
CREATE INDEX sessions_expiry_date_idx ON sessions (expiry_date);
