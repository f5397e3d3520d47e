-- Job listings from the job boards the owner follows. A `jobs.fetch_source` job per
-- source fetches its board and upserts what it finds; "Fetch new" enqueues one per
-- enabled source in one transaction (a fetch run).

CREATE TYPE listing_source_kind AS ENUM (
    'greenhouse',  -- the Greenhouse boards API (JSON)
    'lever',       -- the Lever postings API (JSON)
    'rss'          -- an RSS 2.0 or Atom feed
);

CREATE TABLE listing_sources (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name               text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    kind               listing_source_kind NOT NULL,
    url                text        NOT NULL CHECK (url ~ '^https?://') UNIQUE,
    enabled            boolean     NOT NULL DEFAULT true,
    created_at         timestamptz NOT NULL DEFAULT now(),
    -- The newest fetch of this source, for its chip on the page.
    last_fetch_job_id  bigint REFERENCES jobs (id) ON DELETE SET NULL
);

CREATE INDEX listing_sources_last_fetch_job_idx ON listing_sources (last_fetch_job_id);

-- One row per job posting, however many boards list it: the same posting on two
-- boards has one canonical URL, and so one listing.
CREATE TABLE listings (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The source whose words the listing shows, and the posting's id there: the
    -- employer's own board (Greenhouse, Lever: rank 0) before a feed that relists it
    -- (rank 1), then the older source. So which fetch finishes first does not matter.
    source_id          bigint      NOT NULL REFERENCES listing_sources (id) ON DELETE CASCADE,
    source_rank        smallint    NOT NULL DEFAULT 0,
    external_id        text        NOT NULL,
    title              text        NOT NULL,
    company            text,
    location           text,
    url                text        NOT NULL,
    -- The URL without what does not name the posting (scheme, tracking parameters,
    -- fragment, trailing slash): the key across boards.
    canonical_url      text        NOT NULL UNIQUE,
    posted_at          timestamptz,
    first_seen_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at       timestamptz NOT NULL DEFAULT now(),
    -- The fetch job that saw it first: `new` in that fetch's answer. Not a foreign key:
    -- the job is cleaned after its retention, the listing stays.
    first_seen_job_id  bigint
);

CREATE INDEX listings_source_idx ON listings (source_id);
CREATE INDEX listings_newest_idx ON listings (first_seen_at DESC, id DESC);

-- Every (source, external id) a listing was seen as: a posting's id on a board maps to
-- one listing even when its URL later changes.
CREATE TABLE listing_sightings (
    source_id      bigint      NOT NULL REFERENCES listing_sources (id) ON DELETE CASCADE,
    external_id    text        NOT NULL,
    listing_id     bigint      NOT NULL REFERENCES listings (id) ON DELETE CASCADE,
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, external_id)
);

CREATE INDEX listing_sightings_listing_idx ON listing_sightings (listing_id);

-- One "Fetch new": the jobs it enqueued, so the page can mark what the newest run found.
CREATE TABLE listing_fetch_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_ids     bigint[]    NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
