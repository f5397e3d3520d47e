//! The owner's corpus: entries, their search index, and searching it.
//!
//! A write (create, update, promote) is one transaction: the entry with its version
//! bumped, and a `corpus.index` job for that version. The caller then waits up to
//! `STANDMEET_INDEX_WAIT_MS` and answers the receipt `{id, indexed, index_job_id}`:
//! `indexed:true` means the index holds this version, so a search right after finds
//! it. Only the index job writes `corpus_index`, and never with an older version than
//! the one there. At start, entries whose index lags are queued again.
//!
//! - [`entries`](mod@entries): checking, writing and reading entries; the receipt.
//! - [`search`](mod@search): what visitors find.
//! - [`index`](mod@index): the `corpus.index` job and re-queuing what lags.
//! - [`text`]: CJK bigrams, query terms, snippets.
//! - [`markdown`]: bodies as sanitized HTML for readers, and as plain text for the index.
//! - [`vault`]: the corpus rebuilt from an Obsidian vault (`corpus.vault_rebuild`):
//!   its scan, its notes, the rebuild job, and its watcher ([`vault::watch`], which
//!   queues a rebuild on a change and never stops the server).

mod entries;
mod index;
pub mod markdown;
mod search;
pub mod text;
pub mod vault;

use serde::{Deserialize, Serialize};

pub use entries::{
    EntryRow, IndexState, MAX_BODY_CHARS, MAX_TITLE_CHARS, create, entries, entry, promote,
    receipt, update,
};
pub use index::{
    INDEX_BATCH, IndexArgs, IndexBatch, IndexEntry, IndexInput, IndexOutput, reindex_lagging,
    write_index,
};
pub use search::{
    Hit, MAX_HITS, MAX_QUERY_CHARS, MAX_RANKED, PublishedEntry, Reader, WIKILINK_TARGETS_SQL,
    body_html, published_entry, search,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[sqlx(type_name = "corpus_visibility", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Public,
    Restricted,
}

impl Visibility {
    pub fn parse(word: &str) -> Result<Visibility, CorpusError> {
        match word.trim() {
            "public" => Ok(Visibility::Public),
            "restricted" => Ok(Visibility::Restricted),
            other => Err(CorpusError::Invalid(format!(
                "The visibility must be public or restricted; it was \"{other}\"."
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Restricted => "restricted",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[sqlx(type_name = "corpus_status", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Draft,
    Promoted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Draft => "draft",
            Status::Promoted => "promoted",
        }
    }
}

/// What a person can get wrong about entries and searches; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("{0}")]
    Invalid(String),
    #[error("There is no entry {0}.")]
    NotFound(i64),
    #[error(
        "No vault is set: start StandMeet with STANDMEET_VAULT naming the folder of your notes."
    )]
    NoVault,
    #[error("Job {0} is not a vault rebuild.")]
    NotARebuild(i64),
    /// The entry is made from a note of the vault: the next rebuild would undo an edit.
    #[error(
        "Entry {id} is made from the note {path} in the vault: change the note, and the next rebuild brings the change here."
    )]
    MadeFromNote { id: i64, path: String },
    /// Its words are for any client: `reason` is the rebuild's refusal in words, or where
    /// to look; `last_error` (the job's own, which can hold SQL and paths) is for the
    /// admin's pages and the log only.
    #[error("The rebuild (job {job_id}) did not finish: it is {state}. {reason}")]
    RebuildFailed {
        job_id: i64,
        state: &'static str,
        reason: String,
        last_error: String,
    },
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

crate::domain::failure::failures_on_our_side!(CorpusError);

/// A write done: the entry, its new version, and the index job for it.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    pub id: i64,
    pub version: i64,
    pub job: standmeet_jobs::JobId,
}
