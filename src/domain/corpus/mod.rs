//! The owner's corpus: entries, their search index, and searching it.
//!
//! A write (create, update, promote) is one transaction: the entry with its version
//! bumped, and a `corpus.index` job for that version. The caller then waits up to
//! `STANDMEET_INDEX_WAIT_MS` and answers the receipt `{id, indexed, index_job_id}`:
//! `indexed:true` means the index holds this version, so a search right after finds
//! it. Only the index job writes `corpus_index`, and never with an older version than
//! the one there. At start, entries whose index lags are queued again.
//!
//! - [`text`]: CJK bigrams, query terms, snippets.

pub mod text;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::jobs::JobClient;
use crate::jobs::{self, JobContext, JobError, JobId, JobKind, JobState};
use crate::model::WriteReceipt;

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
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for CorpusError {
    fn from(err: sqlx::Error) -> Self {
        CorpusError::Internal(err.into())
    }
}

pub const MAX_TITLE_CHARS: usize = 300;
pub const MAX_BODY_CHARS: usize = 100_000;
pub const MAX_QUERY_CHARS: usize = 200;

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

/// A write done: the entry, its new version, and the index job for it.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    pub id: i64,
    pub version: i64,
    pub job: JobId,
}

/// Creates a draft entry and queues its indexing.
pub async fn create(
    pool: &PgPool,
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
    let written = queue_index(&mut tx, id, 1).await?;
    tx.commit().await?;
    Ok(written)
}

/// Changes the given fields of entry `id` and queues its indexing.
pub async fn update(
    pool: &PgPool,
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
    let written = queue_index(&mut tx, id, version).await?;
    tx.commit().await?;
    Ok(written)
}

/// Promotes entry `id` (visitors may find it) and queues its indexing.
pub async fn promote(pool: &PgPool, id: i64) -> Result<Written, CorpusError> {
    let mut tx = pool.begin().await?;
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
    let written = queue_index(&mut tx, id, version).await?;
    tx.commit().await?;
    Ok(written)
}

/// Inserts the index job for `version` of entry `id`, in the writer's transaction.
async fn queue_index(
    tx: &mut sqlx::PgConnection,
    id: i64,
    version: i64,
) -> Result<Written, CorpusError> {
    let job = jobs::insert_tx::<IndexEntry>(
        &mut *tx,
        &IndexArgs {
            entry_id: id,
            version,
        },
    )
    .await?;
    sqlx::query!(
        "UPDATE corpus_entries SET index_job_id = $2 WHERE id = $1",
        id,
        job.0
    )
    .execute(&mut *tx)
    .await?;
    Ok(Written { id, version, job })
}

/// Waits up to `limit` for a write's index job, then answers its receipt.
pub async fn receipt(
    pool: &PgPool,
    jobs: &JobClient,
    limit: Duration,
    written: Written,
) -> Result<WriteReceipt, CorpusError> {
    // Past the wait (or with no slot to wait in) the index is simply read as it is.
    let _ = jobs.wait(&[written.job], limit).await;
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
               j.last_error AS index_error
        FROM corpus_entries e
        LEFT JOIN corpus_index i ON i.entry_id = e.id
        LEFT JOIN job_status j ON j.id = e.index_job_id
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
        })
        .collect())
}

/// `text` with LIKE's wildcards taken literally.
fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    pub id: i64,
    pub title: String,
    pub visibility: Visibility,
    pub snippet: Vec<text::Piece>,
}

/// At most this many results.
pub const MAX_HITS: i64 = 20;

/// At most this many matches are ranked. Ranking reads every match's document, which
/// for a word in half of 100,000 entries takes most of a second; past this many, the
/// results are the best of the first matches the index gives, not of all of them.
pub const MAX_RANKED: i64 = 500;

/// Searches the promoted entries (restricted ones too when `restricted_allowed`), best
/// first.
pub async fn search(
    pool: &PgPool,
    query: &str,
    restricted_allowed: bool,
) -> Result<Vec<Hit>, CorpusError> {
    let query = query.trim();
    if query.is_empty() {
        return Err(CorpusError::Invalid("Type something to search for.".into()));
    }
    if query.chars().any(char::is_control) {
        return Err(CorpusError::Invalid(
            "A search cannot contain control characters such as tabs or NUL.".into(),
        ));
    }
    let count = query.chars().count();
    if count > MAX_QUERY_CHARS {
        return Err(CorpusError::Invalid(format!(
            "A search is at most {MAX_QUERY_CHARS} characters; this one has {count}."
        )));
    }
    let split = text::split(query);
    let words = Some(split.words.trim().to_string())
        .filter(|words| words.chars().any(char::is_alphanumeric));
    let cjk = cjk_query(&split.cjk);
    if words.is_none() && cjk.is_none() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query!(
        r#"
        WITH parts AS (
            SELECT CASE WHEN $1::text IS NULL THEN NULL ELSE websearch_to_tsquery('english', $1) END AS words,
                   CASE WHEN $2::text IS NULL THEN NULL ELSE $2::tsquery END AS cjk
        ), query AS (
            SELECT CASE WHEN words IS NULL THEN cjk WHEN cjk IS NULL THEN words ELSE words && cjk END AS q
            FROM parts
        ), candidates AS (
            SELECT i.entry_id, i.title, i.body, i.document
            FROM corpus_index i, query
            WHERE i.status = 'promoted'
              AND (i.visibility = 'public' OR $3)
              AND i.document @@ query.q
            LIMIT $5
        ), ranked AS (
            SELECT c.entry_id, c.title, c.body, ts_rank_cd(c.document, query.q) AS rank
            FROM candidates c, query
            ORDER BY rank DESC, c.entry_id DESC
            LIMIT 2 * $4::bigint
        )
        -- Who may see an entry also follows the entry as it is now: one made restricted
        -- is hidden at once, before its index job runs. (Checked on the best few only,
        -- so the common case costs no lookups.)
        SELECT r.entry_id, r.title, r.body, e.visibility AS "visibility: Visibility"
        FROM ranked r
        JOIN corpus_entries e ON e.id = r.entry_id
        WHERE e.status = 'promoted' AND (e.visibility = 'public' OR $3)
        ORDER BY r.rank DESC, r.entry_id DESC
        LIMIT $4
        "#,
        words,
        cjk,
        restricted_allowed,
        MAX_HITS,
        MAX_RANKED
    )
    .fetch_all(pool)
    .await?;
    let terms = text::terms(query);
    Ok(rows
        .into_iter()
        .map(|row| Hit {
            id: row.entry_id,
            title: row.title,
            visibility: row.visibility,
            snippet: text::snippet(&row.body, &terms),
        })
        .collect())
}

/// Every bigram of the query must be in the document.
fn cjk_query(bigrams: &[String]) -> Option<String> {
    // Bigrams hold CJK characters only, so they need no escaping inside quotes.
    let mut unique: Vec<&String> = Vec::new();
    for bigram in bigrams {
        if !unique.contains(&bigram) {
            unique.push(bigram);
        }
    }
    (!unique.is_empty()).then(|| {
        unique
            .iter()
            .map(|bigram| format!("'{bigram}'"))
            .collect::<Vec<_>>()
            .join(" & ")
    })
}

/// Queues an index job for every entry whose index lags its newest version and has no
/// index job on the way. Answers how many were queued.
pub async fn reindex_lagging(pool: &PgPool) -> Result<usize, CorpusError> {
    let mut tx = pool.begin().await?;
    let lagging = sqlx::query!(
        r#"
        SELECT e.id, e.version
        FROM corpus_entries e
        LEFT JOIN corpus_index i ON i.entry_id = e.id
        LEFT JOIN job_status j ON j.id = e.index_job_id
        WHERE (i.version IS NULL OR i.version < e.version)
          AND (j.id IS NULL OR j.state IN ('completed', 'discarded', 'cancelled'))
        ORDER BY e.id
        FOR UPDATE OF e
        "#
    )
    .fetch_all(&mut *tx)
    .await?;
    for entry in &lagging {
        queue_index(&mut tx, entry.id, entry.version).await?;
    }
    tx.commit().await?;
    Ok(lagging.len())
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexArgs {
    pub entry_id: i64,
    pub version: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexOutput {
    pub entry_id: i64,
    pub version: i64,
    pub indexed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `corpus.index`: writes an entry's version into the search index.
pub struct IndexEntry;

impl JobKind for IndexEntry {
    const KIND: &'static str = "corpus.index";
    const QUEUE: &'static str = "index";
    const MAX_ATTEMPTS: i16 = 10;
    type Args = IndexArgs;
    type Output = IndexOutput;

    async fn run(&self, job: JobContext, args: IndexArgs) -> Result<IndexOutput, JobError> {
        let mut tx = job.pool().begin().await?;
        // Shared lock: a write to the entry waits until this index write commits.
        let entry = sqlx::query!(
            r#"
            SELECT title, body, visibility AS "visibility: Visibility",
                   status AS "status: Status", version
            FROM corpus_entries WHERE id = $1 FOR SHARE
            "#,
            args.entry_id
        )
        .fetch_optional(&mut *tx)
        .await?;
        let skipped = |reason: &str| IndexOutput {
            entry_id: args.entry_id,
            version: args.version,
            indexed: false,
            reason: Some(reason.into()),
        };
        let output = match entry {
            None => skipped("deleted"),
            // A newer write has its own job; this one would only write what it wrote.
            Some(entry) if entry.version > args.version => skipped("stale"),
            Some(entry) => {
                let input = IndexInput {
                    entry_id: args.entry_id,
                    version: entry.version,
                    title: entry.title,
                    body: entry.body,
                    visibility: entry.visibility,
                    status: entry.status,
                };
                write_index(&mut tx, &[input]).await?;
                IndexOutput {
                    entry_id: args.entry_id,
                    version: entry.version,
                    indexed: true,
                    reason: None,
                }
            }
        };
        job.complete_tx(&mut tx, &output).await?;
        tx.commit().await?;
        Ok(output)
    }
}

/// One entry's version, as the index is to hold it.
#[derive(Clone, Debug)]
pub struct IndexInput {
    pub entry_id: i64,
    pub version: i64,
    pub title: String,
    pub body: String,
    pub visibility: Visibility,
    pub status: Status,
}

/// Writes entries' versions into the index, each unless the index holds a newer one of
/// that entry. Answers how many rows were written.
pub async fn write_index(
    tx: &mut sqlx::PgConnection,
    inputs: &[IndexInput],
) -> Result<u64, sqlx::Error> {
    let mut ids = Vec::with_capacity(inputs.len());
    let mut versions = Vec::with_capacity(inputs.len());
    let mut titles = Vec::with_capacity(inputs.len());
    let mut bodies = Vec::with_capacity(inputs.len());
    let mut visibilities = Vec::with_capacity(inputs.len());
    let mut statuses = Vec::with_capacity(inputs.len());
    let mut title_words = Vec::with_capacity(inputs.len());
    let mut title_cjk = Vec::with_capacity(inputs.len());
    let mut body_words = Vec::with_capacity(inputs.len());
    let mut body_cjk = Vec::with_capacity(inputs.len());
    for input in inputs {
        let title = text::split(&input.title);
        let body = text::split(&input.body);
        ids.push(input.entry_id);
        versions.push(input.version);
        titles.push(input.title.as_str());
        bodies.push(input.body.as_str());
        visibilities.push(input.visibility.as_str());
        statuses.push(input.status.as_str());
        title_words.push(title.words.clone());
        // CJK lexemes travel space-separated (they hold no spaces) and are split in SQL.
        title_cjk.push(title.document_cjk().join(" "));
        body_words.push(body.words.clone());
        body_cjk.push(body.document_cjk().join(" "));
    }
    let written = sqlx::query!(
        r#"
        INSERT INTO corpus_index (entry_id, version, title, body, visibility, status, document, grep_text)
        SELECT e.id, e.version, e.title, e.body, e.visibility::corpus_visibility, e.status::corpus_status,
               setweight(to_tsvector('english', e.title_words), 'A')
               || setweight(array_to_tsvector(string_to_array(e.title_cjk, ' ')), 'A')
               || setweight(to_tsvector('english', e.body_words), 'B')
               || setweight(array_to_tsvector(string_to_array(e.body_cjk, ' ')), 'B'),
               lower(e.title || E'\n' || e.body)
        FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::text[], $8::text[], $9::text[], $10::text[])
             AS e (id, version, title, body, visibility, status, title_words, title_cjk, body_words, body_cjk)
        ON CONFLICT (entry_id) DO UPDATE
        SET version = EXCLUDED.version, title = EXCLUDED.title, body = EXCLUDED.body,
            visibility = EXCLUDED.visibility, status = EXCLUDED.status,
            document = EXCLUDED.document, grep_text = EXCLUDED.grep_text, indexed_at = now()
        WHERE corpus_index.version < EXCLUDED.version
        "#,
        &ids,
        &versions,
        &titles as &[&str],
        &bodies as &[&str],
        &visibilities as &[&str],
        &statuses as &[&str],
        &title_words,
        &title_cjk,
        &body_words,
        &body_cjk
    )
    .execute(&mut *tx)
    .await?;
    Ok(written.rows_affected())
}
