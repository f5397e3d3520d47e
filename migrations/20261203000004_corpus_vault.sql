-- The corpus from an Obsidian vault (product.md §12): which entry each note became.
--
-- A note's identity is its path in the vault ('/'-separated, from the vault's root).
-- `content_hash` (SHA-256 of the file) lets a rebuild skip the notes that did not
-- change; `name` (the file name without `.md`, lowercased) and `aliases` (front matter,
-- lowercased) are what `[[wikilinks]]` resolve by. Entries made elsewhere have no row
-- here and are never touched by a rebuild; deleting an entry deletes its row.
CREATE TABLE corpus_vault_notes (
    path          text        PRIMARY KEY CHECK (char_length(path) BETWEEN 1 AND 4096),
    entry_id      bigint      NOT NULL UNIQUE REFERENCES corpus_entries (id) ON DELETE CASCADE,
    name          text        NOT NULL,
    aliases       text[]      NOT NULL DEFAULT '{}',
    tags          text[]      NOT NULL DEFAULT '{}',
    content_hash  text        NOT NULL,
    imported_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX corpus_vault_notes_name_idx ON corpus_vault_notes (name);
CREATE INDEX corpus_vault_notes_aliases_idx ON corpus_vault_notes USING gin (aliases);
-- Wikilinks also resolve by an entry's title, in any case.
CREATE INDEX corpus_entries_title_lower_idx ON corpus_entries (lower(title));

-- The newest rebuild's job, for /admin/corpus (its counts are the job's output).
CREATE TABLE corpus_vault_rebuilds (
    only_row      boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    last_job_id   bigint,
    queued_at     timestamptz NOT NULL DEFAULT now()
);
