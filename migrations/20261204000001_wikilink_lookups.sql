-- Wikilinks resolve by a note's name, its path or an alias, on every page view of an
-- entry (product.md §12). Each of the three is looked up on its own, with an index:
-- `name` and the GIN index on `aliases` were there; this is the one for the path, which
-- a link names in any case (`[[Folder/Note]]` finds `folder/note.md`).
CREATE INDEX corpus_vault_notes_path_lower_idx ON corpus_vault_notes (lower(path));
