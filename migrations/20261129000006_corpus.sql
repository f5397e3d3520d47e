-- The owner's corpus: entries admins write and promote, and the search index that only
-- `corpus.index` jobs write. The index lives in this database, so every copy of
-- StandMeet searches one index; it can lag the entries, and says by how much
-- (`corpus_index.version` against `corpus_entries.version`).

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TYPE corpus_visibility AS ENUM (
    'public',      -- every visitor may find it once promoted
    'restricted'   -- only visitors who redeemed an access code
);

CREATE TYPE corpus_status AS ENUM (
    'draft',       -- admins only
    'promoted'     -- visitors may find it
);

CREATE TABLE corpus_entries (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    title         text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 300),
    body          text        NOT NULL CHECK (char_length(body) <= 100000),
    visibility    corpus_visibility NOT NULL DEFAULT 'public',
    status        corpus_status     NOT NULL DEFAULT 'draft',
    -- Bumped by every write; the index records which version it holds.
    version       bigint      NOT NULL DEFAULT 1,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    -- The index job of the newest write.
    index_job_id  bigint REFERENCES jobs (id) ON DELETE SET NULL
);

CREATE INDEX corpus_entries_updated_idx ON corpus_entries (updated_at DESC, id DESC);
CREATE INDEX corpus_entries_index_job_idx ON corpus_entries (index_job_id);

-- One row per indexed entry, as of `version`: what visitors' searches read.
CREATE TABLE corpus_index (
    entry_id    bigint      PRIMARY KEY REFERENCES corpus_entries (id) ON DELETE CASCADE,
    version     bigint      NOT NULL,
    title       text        NOT NULL,
    body        text        NOT NULL,
    visibility  corpus_visibility NOT NULL,
    status      corpus_status     NOT NULL,
    -- Words (English stemming) and, for CJK text, overlapping character pairs, so a
    -- query written without spaces finds text written without spaces.
    document    tsvector    NOT NULL,
    -- Title and body in lower case, for the admin's substring search (pg_trgm).
    grep_text   text        NOT NULL,
    indexed_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX corpus_index_document_idx ON corpus_index USING gin (document);
CREATE INDEX corpus_index_grep_idx ON corpus_index USING gin (grep_text gin_trgm_ops);
