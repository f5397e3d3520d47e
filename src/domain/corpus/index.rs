//! The index: the `corpus.index` job (one entry's write) and `corpus.index_batch` (a
//! vault rebuild's many entries), the only writers of `corpus_index` (never with an
//! older version than the one there), and queuing again at start what lags.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::text;
use super::{CorpusError, Status, Visibility, Written};
use standmeet_jobs::{InsertOptions, JobClient, JobContext, JobError, JobId, JobKind};

/// Queues an index job for every entry whose index lags its newest version and has no
/// index job on the way. Answers how many were queued.
pub async fn reindex_lagging(pool: &PgPool, jobs: &JobClient) -> Result<usize, CorpusError> {
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
        queue_index(&mut tx, jobs, entry.id, entry.version).await?;
    }
    tx.commit().await?;
    Ok(lagging.len())
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexArgs {
    pub entry_id: i64,
    /// The version whose write queued the job; it indexes the newest one there is.
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

/// Queues the index job of entry `id` in the writer's transaction, which has just
/// written its `version`: a new job, or the entry's index job that is already on the
/// way (unique key `corpus.index:<id>`), since that one indexes whatever version the
/// entry has when it runs. Ten saves in a second so leave at most one job waiting.
pub(super) async fn queue_index(
    tx: &mut sqlx::PgConnection,
    jobs: &JobClient,
    id: i64,
    version: i64,
) -> Result<Written, CorpusError> {
    let job = jobs
        .insert_unique_tx::<IndexEntry>(
            &mut *tx,
            &IndexArgs {
                entry_id: id,
                version,
            },
            &format!("corpus.index:{id}"),
            InsertOptions::default(),
        )
        .await?
        .id;
    sqlx::query!(
        "UPDATE corpus_entries SET index_job_id = $2 WHERE id = $1",
        id,
        job.0
    )
    .execute(&mut *tx)
    .await?;
    Ok(Written { id, version, job })
}

/// `corpus.index`: writes an entry's newest version into the search index.
///
/// It reads the entry under a shared lock held until its own completion commits, so a
/// write to the entry either comes before (and is what it indexes) or waits for it
/// (and then finds this job finished and queues the next). A write that found this job
/// on the way, even one already running inside its claim, is so always indexed.
pub struct IndexEntry;

impl JobKind for IndexEntry {
    const KIND: &'static str = "corpus.index";
    const QUEUE: &'static str = "index";
    const MAX_ATTEMPTS: i16 = 10;
    type Args = IndexArgs;
    type Output = IndexOutput;

    async fn run(&self, job: JobContext, args: IndexArgs) -> Result<IndexOutput, JobError> {
        let mut tx = job.pool().begin().await?;
        let entry = sqlx::query!(
            r#"
            SELECT e.title, e.body, e.visibility AS "visibility: Visibility",
                   e.status AS "status: Status", e.version,
                   COALESCE(n.tags, '{}') AS "tags!"
            FROM corpus_entries e
            LEFT JOIN corpus_vault_notes n ON n.entry_id = e.id
            WHERE e.id = $1 FOR SHARE OF e
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
            Some(entry) => {
                let input = IndexInput {
                    entry_id: args.entry_id,
                    version: entry.version,
                    title: entry.title,
                    body: entry.body,
                    visibility: entry.visibility,
                    status: entry.status,
                    tags: entry.tags,
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

/// How many entries one `corpus.index_batch` job indexes.
pub const INDEX_BATCH: usize = 500;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexBatchArgs {
    pub entry_ids: Vec<i64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexBatchOutput {
    /// How many entries' index rows it wrote (an entry the index already held at that
    /// version or newer, or one deleted meanwhile, is not counted).
    pub indexed: u64,
}

/// Queues the indexing of many entries that one write changed (a vault rebuild), in
/// `corpus.index_batch` jobs of [`INDEX_BATCH`] entries, in the writer's transaction;
/// each entry's `index_job_id` names its batch. Answers the jobs.
pub(super) async fn queue_index_batches(
    tx: &mut sqlx::PgConnection,
    jobs: &JobClient,
    entry_ids: &[i64],
) -> Result<Vec<JobId>, CorpusError> {
    let mut queued = Vec::new();
    for batch in entry_ids.chunks(INDEX_BATCH) {
        let job = jobs
            .insert_tx::<IndexBatch>(
                &mut *tx,
                &IndexBatchArgs {
                    entry_ids: batch.to_vec(),
                },
            )
            .await?;
        sqlx::query!(
            "UPDATE corpus_entries SET index_job_id = $2 WHERE id = ANY($1)",
            batch,
            job.0
        )
        .execute(&mut *tx)
        .await?;
        queued.push(job);
    }
    Ok(queued)
}

/// `corpus.index_batch`: writes many entries' newest versions into the index in one
/// statement, under the same shared lock as [`IndexEntry`] (a write to one of them
/// waits, then queues its own job).
pub struct IndexBatch;

impl JobKind for IndexBatch {
    const KIND: &'static str = "corpus.index_batch";
    const QUEUE: &'static str = "index";
    const MAX_ATTEMPTS: i16 = 10;
    type Args = IndexBatchArgs;
    type Output = IndexBatchOutput;

    async fn run(
        &self,
        job: JobContext,
        args: IndexBatchArgs,
    ) -> Result<IndexBatchOutput, JobError> {
        let mut tx = job.pool().begin().await?;
        let inputs: Vec<IndexInput> = sqlx::query!(
            r#"
            SELECT e.id, e.title, e.body, e.visibility AS "visibility: Visibility",
                   e.status AS "status: Status", e.version,
                   COALESCE(n.tags, '{}') AS "tags!"
            FROM corpus_entries e
            LEFT JOIN corpus_vault_notes n ON n.entry_id = e.id
            WHERE e.id = ANY($1) ORDER BY e.id FOR SHARE OF e
            "#,
            &args.entry_ids
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|entry| IndexInput {
            entry_id: entry.id,
            version: entry.version,
            title: entry.title,
            body: entry.body,
            visibility: entry.visibility,
            status: entry.status,
            tags: entry.tags,
        })
        .collect();
        let indexed = write_index(&mut tx, &inputs).await?;
        let output = IndexBatchOutput { indexed };
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
    /// The note's tags (an entry made from a vault note): found as its title's words are.
    pub tags: Vec<String>,
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
    let mut plain_bodies = Vec::with_capacity(inputs.len());
    for input in inputs {
        // The tags weigh as the title does: a note tagged `travel` is about travel.
        let title = if input.tags.is_empty() {
            text::split(&input.title)
        } else {
            text::split(&format!("{}\n{}", input.title, input.tags.join(" ")))
        };
        // The words, not the Markdown: search finds text, snippets show text.
        let plain = super::markdown::plain_text(&input.body);
        let body = text::split(&plain);
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
        plain_bodies.push(plain);
    }
    let written = sqlx::query!(
        r#"
        INSERT INTO corpus_index (entry_id, version, title, body, visibility, status, document, grep_text)
        SELECT e.id, e.version, e.title, e.body, e.visibility::corpus_visibility, e.status::corpus_status,
               setweight(to_tsvector('english', e.title_words), 'A')
               || setweight(array_to_tsvector(string_to_array(e.title_cjk, ' ')), 'A')
               || setweight(to_tsvector('english', e.body_words), 'B')
               || setweight(array_to_tsvector(string_to_array(e.body_cjk, ' ')), 'B'),
               lower(e.title || E'\n' || e.plain_body)
        FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
             AS e (id, version, title, body, visibility, status, title_words, title_cjk, body_words, body_cjk, plain_body)
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
        &body_cjk,
        &plain_bodies
    )
    .execute(&mut *tx)
    .await?;
    Ok(written.rows_affected())
}
