//! Entries: checking and writing them (each write one transaction with its index
//! job), the receipt after a write, and reading them back for the admin page, with
//! grep over their text.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::index::queue_index;
use super::search::MAX_QUERY_CHARS;
use super::{CorpusError, Status, Visibility, Written};
use crate::domain::events::{self, EventType, NewEvent};
use crate::domain::waiting;
use crate::model::WriteReceipt;
use standmeet_jobs::{JobClient, JobState};

pub const MAX_TITLE_CHARS: usize = 300;
pub const MAX_BODY_CHARS: usize = 100_000;

/// PostgreSQL cannot store a NUL character in text.
fn without_nul(text: &str, what: &str) -> Result<(), CorpusError> {
    if text.contains('\0') {
        return Err(CorpusError::Invalid(format!(
            "The {what} contains a NUL character (\\0), which cannot be stored; remove it."
        )));
    }
    Ok(())
}

fn checked_title(title: &str) -> Result<String, CorpusError> {
    without_nul(title, "title")?;
    let title = title.trim();
    let count = title.chars().count();
    if count == 0 || count > MAX_TITLE_CHARS {
        return Err(CorpusError::Invalid(format!(
            "Give a title of 1 to {MAX_TITLE_CHARS} characters{}.",
            if count > 0 {
                format!("; this one has {count}")
            } else {
                String::new()
            }
        )));
    }
    Ok(title.to_string())
}

fn checked_body(body: &str) -> Result<String, CorpusError> {
    without_nul(body, "text")?;
    let count = body.chars().count();
    if body.trim().is_empty() {
        return Err(CorpusError::Invalid("Write the entry's text.".into()));
    }
    if count > MAX_BODY_CHARS {
        return Err(CorpusError::Invalid(format!(
            "The text is at most {MAX_BODY_CHARS} characters; this one has {count}."
        )));
    }
    Ok(body.to_string())
}

/// Creates a draft entry and queues its indexing.
pub async fn create(
    pool: &PgPool,
    jobs: &JobClient,
    title: &str,
    body: &str,
    visibility: &str,
) -> Result<Written, CorpusError> {
    let title = checked_title(title)?;
    let body = checked_body(body)?;
    let visibility = Visibility::parse(visibility)?;
    let mut tx = pool.begin().await?;
    let id = sqlx::query_scalar!(
        "INSERT INTO corpus_entries (title, body, visibility) VALUES ($1, $2, $3) RETURNING id",
        title,
        body,
        visibility as Visibility
    )
    .fetch_one(&mut *tx)
    .await?;
    let written = queue_index(&mut tx, jobs, id, 1).await?;
    tx.commit().await?;
    Ok(written)
}

/// Changes the given fields of entry `id` and queues its indexing.
pub async fn update(
    pool: &PgPool,
    jobs: &JobClient,
    id: i64,
    title: Option<&str>,
    body: Option<&str>,
    visibility: Option<&str>,
) -> Result<Written, CorpusError> {
    let title = title.map(checked_title).transpose()?;
    let body = body.map(checked_body).transpose()?;
    let visibility = visibility.map(Visibility::parse).transpose()?;
    if title.is_none() && body.is_none() && visibility.is_none() {
        return Err(CorpusError::Invalid(
            "Give at least one of title, body and visibility to change.".into(),
        ));
    }
    let mut tx = pool.begin().await?;
    refuse_entries_made_from_notes(&mut tx, id).await?;
    let version = sqlx::query_scalar!(
        r#"
        UPDATE corpus_entries
        SET title = coalesce($2, title), body = coalesce($3, body),
            visibility = coalesce($4, visibility), version = version + 1, updated_at = now()
        WHERE id = $1
        RETURNING version
        "#,
        id,
        title,
        body,
        visibility as Option<Visibility>
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(CorpusError::NotFound(id))?;
    let written = queue_index(&mut tx, jobs, id, version).await?;
    let updated = NewEvent::corpus_entry(EventType::CorpusEntryUpdated, id, version);
    events::record(&mut tx, &updated).await?;
    tx.commit().await?;
    Ok(written)
}

/// Promotes entry `id` (visitors may find it) and queues its indexing.
pub async fn promote(pool: &PgPool, jobs: &JobClient, id: i64) -> Result<Written, CorpusError> {
    let mut tx = pool.begin().await?;
    refuse_entries_made_from_notes(&mut tx, id).await?;
    let status = sqlx::query_scalar!(
        r#"SELECT status AS "status: Status" FROM corpus_entries WHERE id = $1 FOR UPDATE"#,
        id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(CorpusError::NotFound(id))?;
    if status == Status::Promoted {
        return Err(CorpusError::Invalid(format!(
            "Entry {id} is promoted already."
        )));
    }
    let version = sqlx::query_scalar!(
        r#"
        UPDATE corpus_entries SET status = 'promoted', version = version + 1, updated_at = now()
        WHERE id = $1 RETURNING version
        "#,
        id
    )
    .fetch_one(&mut *tx)
    .await?;
    let written = queue_index(&mut tx, jobs, id, version).await?;
    let promoted = NewEvent::corpus_entry(EventType::CorpusEntryPromoted, id, version);
    events::record(&mut tx, &promoted).await?;
    tx.commit().await?;
    Ok(written)
}

/// An entry made from a vault note is the note's: an admin's edit would be silently
/// undone by the next rebuild, so it is refused in words naming the note (docs/corpus.md).
async fn refuse_entries_made_from_notes(
    tx: &mut sqlx::PgConnection,
    id: i64,
) -> Result<(), CorpusError> {
    let note = sqlx::query_scalar!(
        "SELECT path FROM corpus_vault_notes WHERE entry_id = $1",
        id
    )
    .fetch_optional(&mut *tx)
    .await?;
    match note {
        Some(path) => Err(CorpusError::MadeFromNote { id, path }),
        None => Ok(()),
    }
}

/// Waits up to `limit` for a write's index job, then answers its receipt.
pub async fn receipt(
    pool: &PgPool,
    jobs: &JobClient,
    limit: Duration,
    written: Written,
) -> Result<WriteReceipt, CorpusError> {
    // Past the wait (or with no slot to wait in) the index is simply read as it is.
    let _ = waiting::wait(jobs, &[written.job], limit).await;
    let indexed = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM corpus_index WHERE entry_id = $1 AND version >= $2) AS "indexed!""#,
        written.id,
        written.version
    )
    .fetch_one(pool)
    .await?;
    Ok(WriteReceipt {
        id: written.id,
        indexed,
        index_job_id: written.job,
    })
}

/// Whether the index holds an entry's newest version, as its chip shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexState {
    Indexed,
    Indexing,
    Failed,
}

impl IndexState {
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Indexed => "indexed",
            IndexState::Indexing => "indexing",
            IndexState::Failed => "failed",
        }
    }

    fn of(entry_version: i64, index_version: Option<i64>, job: Option<JobState>) -> IndexState {
        if index_version.is_some_and(|v| v >= entry_version) {
            IndexState::Indexed
        } else if matches!(job, Some(JobState::Discarded | JobState::Cancelled)) {
            IndexState::Failed
        } else {
            IndexState::Indexing
        }
    }
}

/// An entry as the admin page shows it.
#[derive(Clone, Debug)]
pub struct EntryRow {
    pub id: i64,
    pub title: String,
    pub body: String,
    pub visibility: Visibility,
    pub status: Status,
    pub version: i64,
    pub updated_at: time::OffsetDateTime,
    pub index_state: IndexState,
    pub index_job_id: Option<i64>,
    pub index_error: Option<String>,
    /// The vault note the entry is made from (its path), if it is one's: such an entry
    /// is changed by changing the note.
    pub note_path: Option<String>,
    /// That note's tags (none for an entry written here).
    pub tags: Vec<String>,
}

/// The newest entries (by last write), `limit` at most; with `grep`, only those whose
/// indexed title or text contains it (any case).
pub async fn entries(
    pool: &PgPool,
    grep: Option<&str>,
    limit: i64,
) -> Result<Vec<EntryRow>, CorpusError> {
    let pattern = match grep.map(str::trim).filter(|g| !g.is_empty()) {
        None => None,
        Some(needle) if needle.chars().count() > MAX_QUERY_CHARS => {
            return Err(CorpusError::Invalid(format!(
                "A search is at most {MAX_QUERY_CHARS} characters."
            )));
        }
        Some(needle) if needle.chars().any(char::is_control) => {
            return Err(CorpusError::Invalid(
                "A search cannot contain control characters such as tabs or NUL.".into(),
            ));
        }
        Some(needle) => Some(format!("%{}%", like_escaped(&needle.to_lowercase()))),
    };
    Ok(entry_rows(pool, pattern.as_deref(), None, limit).await?)
}

/// One entry, for its edit page.
pub async fn entry(pool: &PgPool, id: i64) -> Result<EntryRow, CorpusError> {
    entry_rows(pool, None, Some(id), 1)
        .await?
        .pop()
        .ok_or(CorpusError::NotFound(id))
}

/// Entries newest first: those whose index text is `LIKE pattern` when given, entry
/// `id` when given.
async fn entry_rows(
    pool: &PgPool,
    pattern: Option<&str>,
    id: Option<i64>,
    limit: i64,
) -> Result<Vec<EntryRow>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"
        SELECT e.id, e.title, e.body, e.visibility AS "visibility: Visibility",
               e.status AS "status: Status", e.version, e.updated_at, e.index_job_id,
               i.version AS "index_version?", j.state AS "job_state?: JobState",
               j.last_error AS index_error, v.path AS "note_path?",
               COALESCE(v.tags, '{}') AS "tags!"
        FROM corpus_entries e
        LEFT JOIN corpus_index i ON i.entry_id = e.id
        LEFT JOIN job_status j ON j.id = e.index_job_id
        LEFT JOIN corpus_vault_notes v ON v.entry_id = e.id
        WHERE ($1::text IS NULL OR i.grep_text LIKE $1)
          AND ($2::bigint IS NULL OR e.id = $2)
        ORDER BY e.updated_at DESC, e.id DESC
        LIMIT $3
        "#,
        pattern,
        id,
        limit
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| EntryRow {
            index_state: IndexState::of(row.version, row.index_version, row.job_state),
            id: row.id,
            title: row.title,
            body: row.body,
            visibility: row.visibility,
            status: row.status,
            version: row.version,
            updated_at: row.updated_at,
            index_job_id: row.index_job_id,
            index_error: row.index_error,
            note_path: row.note_path,
            tags: row.tags,
        })
        .collect())
}

/// `text` with LIKE's wildcards taken literally.
fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}
