//! The corpus from an Obsidian vault (docs/corpus.md): the `corpus.vault_rebuild` job
//! reads every note under `STANDMEET_VAULT` and brings the entries it made in line with
//! them, in one transaction; what changed is recorded as the event `corpus.rebuilt`
//! (the post-build hooks are the webhook endpoints subscribed to it).
//!
//! - A note is a `*.md` file anywhere under the vault but in dot-folders (`.obsidian/`,
//!   `.trash/`, …). Its identity is its path in the vault (`corpus_vault_notes`): new
//!   notes are added, changed ones (by their SHA-256) updated, unchanged ones cost
//!   nothing and keep their version, and entries whose note is gone are removed.
//!   Entries made elsewhere have no note and are never touched.
//! - No link is followed: a symbolic link is neither descended into nor read (it is
//!   listed as failed), and a file is opened with `O_NOFOLLOW`, so nothing outside the
//!   vault is read whatever the vault holds.
//! - Front matter (YAML, read by gray_matter): `title` (else the first `# ` heading,
//!   else the file name), `publish: true` (promoted; else a draft), `visibility:
//!   restricted` (else public), `tags`, `aliases` (what wikilinks also resolve by).
//! - A note that is over 1 MB, not UTF-8, holds NUL bytes, has broken front matter or
//!   does not fit an entry is listed in `failed` with its path and reason; the rest go on.
//! - One rebuild at a time: its unique key keeps one waiting, and a transaction-level
//!   advisory lock makes a second one (the next, queued while the first ran) wait for it.
//!
//! Its parts: `scan` walks the vault beneath its root and reads the notes' bytes,
//! `note` makes a note of them (front matter, title, body; hostile YAML refused before
//! a tree is built), `rebuild` is the job that brings the entries in line with a scan,
//! and `watch` queues a rebuild when the vault changes.

mod note;
mod rebuild;
mod scan;
pub mod watch;

pub use note::{MAX_FRONT_MATTER_DEPTH, Note, is_unstorable_control, parse_note};
pub use rebuild::{
    NOT_REBUILT, REBUILD_ALLOWING_REMOVALS_KEY, REBUILD_KEY, REMOVALS_WITHOUT_ASKING,
    RebuildAnswer, RebuildArgs, RebuildCounts, RebuildOutput, VaultRebuild, last_rebuild,
    queue_rebuild, queue_rebuild_with, rebuild_result, removals_allowed,
};
pub use scan::{FailedNote, MAX_NOTE_BYTES, Scan, scan};
