//! Job listings from the job boards the owner follows.
//!
//! Sources are boards (`greenhouse`, `lever`, `rss`). "Fetch new" (the page's button
//! and the MCP tool `jobs.fetch_new` alike) enqueues one `jobs.fetch_source` job per
//! enabled source in one transaction, waits up to `STANDMEET_FETCH_WAIT_MS` for all of
//! them, and answers the listings and the errors, or a receipt: the job ids, which
//! `jobs.fetch_result` redeems later in exactly the same shape.
//!
//! - [`boards`]: reading what each kind of board answers, and the canonical URL.
//! - [`fetch`]: the job: HTTP with limits, then the upsert and deduplication.

mod boards;
pub mod fetch;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use url::Url;

use crate::domain::waiting;
use crate::model::{FetchAnswer, FetchFailure, Listing};
pub use fetch::{FetchArgs, FetchOutput, FetchSource};
use standmeet_jobs::{self as jobs, JobId, JobKind, JobState, WaitOutcome};
use standmeet_jobs::{JobClient, JobRow};

/// What kind of board a source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[sqlx(type_name = "listing_source_kind", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Greenhouse,
    Lever,
    Rss,
}

impl SourceKind {
    pub const ALL: [SourceKind; 3] = [SourceKind::Greenhouse, SourceKind::Lever, SourceKind::Rss];

    pub fn parse(word: &str) -> Option<SourceKind> {
        SourceKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == word.trim())
    }

    /// Whose words a listing on several boards shows: the employer's own board (0)
    /// before a feed that relists postings (1).
    pub fn rank(self) -> i16 {
        match self {
            SourceKind::Greenhouse | SourceKind::Lever => 0,
            SourceKind::Rss => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Greenhouse => "greenhouse",
            SourceKind::Lever => "lever",
            SourceKind::Rss => "rss",
        }
    }
}

/// A source with its newest fetch.
#[derive(Clone, Debug)]
pub struct SourceRow {
    pub id: i64,
    pub name: String,
    pub kind: SourceKind,
    pub url: String,
    pub enabled: bool,
    pub listings: i64,
    pub last_job_id: Option<i64>,
    pub last_job_state: Option<JobState>,
    pub last_error: Option<String>,
}

/// What a person can get wrong about sources and fetches; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ListingsError {
    #[error("{0}")]
    Invalid(String),
    #[error("There is no source {0}.")]
    UnknownSource(i64),
    #[error("Source {name} (id {id}) is disabled; enable it to fetch it.")]
    Disabled { id: i64, name: String },
    #[error("No source is enabled: add a job board first.")]
    NoSources,
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

crate::domain::failure::failures_on_our_side!(ListingsError);

/// Adds a source after checking its fields; answers its id.
pub async fn add_source(
    pool: &PgPool,
    name: &str,
    kind: &str,
    url: &str,
    allow_private: bool,
) -> Result<i64, ListingsError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ListingsError::Invalid(
            "Give the source a name of 1 to 100 characters.".into(),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(ListingsError::Invalid(
            "The name cannot contain control characters such as tabs or NUL.".into(),
        ));
    }
    let Some(kind) = SourceKind::parse(kind) else {
        return Err(ListingsError::Invalid(format!(
            "The kind must be greenhouse, lever or rss; it was \"{}\".",
            kind.trim()
        )));
    };
    let url = parse_source_url(url)?;
    crate::domain::outbound::check_url(&url, allow_private)
        .await
        .map_err(|refused| {
            ListingsError::Invalid(format!("The board's URL is refused: {refused}."))
        })?;
    let inserted = sqlx::query_scalar!(
        r#"
        INSERT INTO listing_sources (name, kind, url) VALUES ($1, $2, $3)
        ON CONFLICT (url) DO NOTHING
        RETURNING id
        "#,
        name,
        kind as SourceKind,
        url.as_str()
    )
    .fetch_optional(pool)
    .await?;
    match inserted {
        Some(id) => Ok(id),
        None => Err(ListingsError::Invalid(format!(
            "A source with the URL {url} exists already."
        ))),
    }
}

fn parse_source_url(raw: &str) -> Result<Url, ListingsError> {
    crate::domain::outbound::parse_http_url(
        raw,
        "Give the board's URL, such as https://boards-api.greenhouse.io/v1/boards/acme/jobs.",
    )
    .map_err(ListingsError::Invalid)
}

/// Enables or disables source `id`.
pub async fn set_enabled(pool: &PgPool, id: i64, enabled: bool) -> Result<(), ListingsError> {
    let changed = sqlx::query!(
        "UPDATE listing_sources SET enabled = $2 WHERE id = $1",
        id,
        enabled
    )
    .execute(pool)
    .await?;
    if changed.rows_affected() == 0 {
        return Err(ListingsError::UnknownSource(id));
    }
    Ok(())
}

/// Removes source `id` and the listings only it lists; a listing another source lists
/// too stays, shown from the best-ranked of those.
pub async fn remove_source(pool: &PgPool, id: i64) -> Result<String, ListingsError> {
    let mut tx = pool.begin().await?;
    sqlx::query!(
        r#"
        UPDATE listings l
        SET source_id = other.source_id, external_id = other.external_id, source_rank = other.rank
        FROM (
            SELECT DISTINCT ON (g.listing_id) g.listing_id, g.source_id, g.external_id,
                   CASE WHEN s.kind = 'rss' THEN 1 ELSE 0 END::smallint AS rank
            FROM listing_sightings g
            JOIN listing_sources s ON s.id = g.source_id
            WHERE g.source_id <> $1
              AND g.listing_id IN (SELECT id FROM listings WHERE source_id = $1)
            ORDER BY g.listing_id, (s.kind = 'rss'), s.id
        ) other
        WHERE l.id = other.listing_id
        "#,
        id
    )
    .execute(&mut *tx)
    .await?;
    let removed = sqlx::query_scalar!(
        "DELETE FROM listing_sources WHERE id = $1 RETURNING name",
        id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ListingsError::UnknownSource(id))?;
    tx.commit().await?;
    Ok(removed)
}

/// Every source, oldest first, with its newest fetch.
pub async fn sources(pool: &PgPool) -> Result<Vec<SourceRow>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"
        SELECT s.id, s.name, s.kind AS "kind: SourceKind", s.url, s.enabled,
               (SELECT count(*) FROM listing_sightings g WHERE g.source_id = s.id) AS "listings!",
               j.id AS "job_id?", j.state AS "job_state?: JobState",
               j.last_error AS last_error
        FROM listing_sources s
        LEFT JOIN job_status j ON j.id = s.last_fetch_job_id
        ORDER BY s.id
        "#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| SourceRow {
            id: row.id,
            name: row.name,
            kind: row.kind,
            url: row.url,
            enabled: row.enabled,
            listings: row.listings,
            last_job_id: row.job_id,
            last_job_state: row.job_state,
            last_error: row.last_error,
        })
        .collect())
}

/// A listing with the sources that list it, for the page.
#[derive(Clone, Debug)]
pub struct ListingRow {
    pub listing: Listing,
    /// Every source that lists it, by name, the first one first.
    pub seen_on: Vec<String>,
}

/// A listing as stored, and whether it is new to the fetch asked about.
struct ListingRecord {
    id: i64,
    source_id: i64,
    external_id: String,
    title: String,
    company: Option<String>,
    location: Option<String>,
    url: String,
    posted_at: Option<OffsetDateTime>,
    first_seen_at: OffsetDateTime,
    new: bool,
}

impl From<ListingRecord> for Listing {
    fn from(record: ListingRecord) -> Listing {
        Listing {
            id: record.id,
            source_id: record.source_id,
            external_id: record.external_id,
            title: record.title,
            company: record.company,
            location: record.location,
            url: record.url,
            posted_at: record.posted_at.map(rfc3339),
            first_seen_at: rfc3339(record.first_seen_at),
            new: record.new,
        }
    }
}

/// The newest listings (first seen), `limit` at most; `new` marks those the newest
/// "Fetch new" saw first.
pub async fn latest(pool: &PgPool, limit: i64) -> Result<Vec<ListingRow>, sqlx::Error> {
    let records = sqlx::query_as!(
        ListingRecord,
        r#"
        WITH newest_run AS (
            SELECT job_ids FROM listing_fetch_runs ORDER BY id DESC LIMIT 1
        )
        SELECT l.id, l.source_id, l.external_id, l.title, l.company, l.location, l.url,
               l.posted_at, l.first_seen_at,
               coalesce(l.first_seen_job_id = ANY (run.job_ids), false) AS "new!"
        FROM listings l LEFT JOIN newest_run run ON true
        ORDER BY l.first_seen_at DESC, l.posted_at DESC NULLS LAST, l.id DESC
        LIMIT $1
        "#,
        limit
    )
    .fetch_all(pool)
    .await?;
    let ids: Vec<i64> = records.iter().map(|record| record.id).collect();
    let boards = sqlx::query!(
        r#"
        SELECT g.listing_id,
               array_agg(s.name ORDER BY (s.id <> l.source_id), s.id) AS "names!"
        FROM listing_sightings g
        JOIN listing_sources s ON s.id = g.source_id
        JOIN listings l ON l.id = g.listing_id
        WHERE g.listing_id = ANY ($1)
        GROUP BY g.listing_id
        "#,
        &ids
    )
    .fetch_all(pool)
    .await?;
    Ok(records
        .into_iter()
        .map(|record| ListingRow {
            seen_on: boards
                .iter()
                .find(|b| b.listing_id == record.id)
                .map(|b| b.names.clone())
                .unwrap_or_default(),
            listing: record.into(),
        })
        .collect())
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_else(|_| at.to_string())
}

/// Enqueues one fetch per source in `source_ids` (every enabled source when `None`) in
/// one transaction, or finds the source's fetch already on the way; answers the job
/// ids, in the order of the sources.
#[tracing::instrument(skip(pool, jobs))]
pub async fn start_fetch(
    pool: &PgPool,
    jobs: &JobClient,
    source_ids: Option<&[i64]>,
) -> Result<Vec<JobId>, ListingsError> {
    let mut tx = pool.begin().await?;
    // Locked, so that a source removed meanwhile is not fetched after all.
    let all = sqlx::query!("SELECT id, name, enabled FROM listing_sources ORDER BY id FOR SHARE")
        .fetch_all(&mut *tx)
        .await?;
    let chosen: Vec<i64> = match source_ids {
        None => all.iter().filter(|s| s.enabled).map(|s| s.id).collect(),
        Some([]) => {
            return Err(ListingsError::Invalid(
                "source_ids is empty: give at least one source id, or leave it out to fetch every enabled source.".into(),
            ));
        }
        Some(ids) => {
            let mut chosen = Vec::new();
            for id in ids {
                let source = all
                    .iter()
                    .find(|s| s.id == *id)
                    .ok_or(ListingsError::UnknownSource(*id))?;
                if !source.enabled {
                    return Err(ListingsError::Disabled {
                        id: *id,
                        name: source.name.clone(),
                    });
                }
                if !chosen.contains(id) {
                    chosen.push(*id);
                }
            }
            chosen
        }
    };
    if chosen.is_empty() {
        return Err(ListingsError::NoSources);
    }
    let args: Vec<FetchArgs> = chosen
        .iter()
        .map(|&source_id| FetchArgs { source_id })
        .collect();
    // One fetch per source on the way (unique key `listings.fetch:<source id>`): a
    // second "fetch new" while a source's fetch is pending answers that job.
    let mut job_ids = Vec::with_capacity(args.len());
    for fetch in &args {
        let key = format!("listings.fetch:{}", fetch.source_id);
        let inserted = jobs
            .insert_unique_tx::<FetchSource>(&mut tx, fetch, &key, Default::default())
            .await?;
        job_ids.push(inserted.id);
    }
    let raw_ids: Vec<i64> = job_ids.iter().map(|id| id.0).collect();
    sqlx::query!(
        r#"
        UPDATE listing_sources s SET last_fetch_job_id = chosen.job_id
        FROM unnest($1::bigint[], $2::bigint[]) AS chosen (source_id, job_id)
        WHERE s.id = chosen.source_id
        "#,
        &chosen,
        &raw_ids
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO listing_fetch_runs (job_ids) VALUES ($1)",
        &raw_ids
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(job_ids)
}

/// `listings.fetch_all`: "Fetch new" for every enabled source, as the `listings-fetch`
/// schedule does it; answers the fetches' job ids (none without an enabled source).
pub struct FetchAllSources;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FetchAllOutput {
    pub job_ids: Vec<JobId>,
}

impl JobKind for FetchAllSources {
    const KIND: &'static str = "listings.fetch_all";
    const QUEUE: &'static str = "fetch";
    const MAX_ATTEMPTS: i16 = 3;
    type Args = serde_json::Value;
    type Output = FetchAllOutput;

    async fn run(
        &self,
        job: jobs::JobContext,
        _args: serde_json::Value,
    ) -> Result<FetchAllOutput, jobs::JobError> {
        match start_fetch(job.pool(), job.jobs(), None).await {
            Ok(job_ids) => Ok(FetchAllOutput { job_ids }),
            Err(ListingsError::NoSources) => Ok(FetchAllOutput { job_ids: vec![] }),
            Err(err) => Err(jobs::JobError::retry(err.to_string())),
        }
    }
}

/// "Fetch new": enqueues the fetches, waits up to `limit` for all of them, and answers
/// the result, or the receipt when one is still running.
pub async fn fetch_new(
    pool: &PgPool,
    jobs: &JobClient,
    limit: Duration,
    source_ids: Option<&[i64]>,
) -> Result<FetchAnswer, ListingsError> {
    let job_ids = start_fetch(pool, jobs, source_ids).await?;
    match waiting::wait(jobs, &job_ids, limit).await {
        Ok(WaitOutcome::Done(rows)) => Ok(answer_from(pool, &job_ids, &rows).await?),
        Ok(WaitOutcome::Receipt) => Ok(pending(job_ids)),
        Err(err) => Err(ListingsError::Internal(err.into())),
    }
}

fn pending(job_ids: Vec<JobId>) -> FetchAnswer {
    FetchAnswer {
        job_ids,
        pending: true,
        listings: None,
        errors: None,
    }
}

/// The most job ids one `jobs.fetch_result` takes.
pub const MAX_RESULT_IDS: usize = 100;

/// Redeems a receipt: the same answer `fetch_new` gives when its jobs finish in time,
/// or `pending:true` while one still runs.
pub async fn fetch_result(
    pool: &PgPool,
    jobs: &JobClient,
    job_ids: &[JobId],
) -> Result<FetchAnswer, ListingsError> {
    if job_ids.is_empty() {
        return Err(ListingsError::Invalid(
            "Give the job_ids that jobs.fetch_new answered.".into(),
        ));
    }
    if job_ids.len() > MAX_RESULT_IDS {
        return Err(ListingsError::Invalid(format!(
            "Give at most {MAX_RESULT_IDS} job ids at once; there were {}.",
            job_ids.len()
        )));
    }
    let mut unique: Vec<JobId> = Vec::with_capacity(job_ids.len());
    for id in job_ids {
        if !unique.contains(id) {
            unique.push(*id);
        }
    }
    let rows = jobs.get_many(&unique).await?;
    for id in &unique {
        match rows.iter().find(|row| row.id == *id) {
            None => {
                return Err(ListingsError::Invalid(format!(
                    "There is no job {id}: it was never made, or it finished long enough ago to be cleaned."
                )));
            }
            Some(row) if row.kind != FetchSource::KIND => {
                return Err(ListingsError::Invalid(format!(
                    "Job {id} is not a listings fetch (it is {}).",
                    row.kind
                )));
            }
            Some(_) => {}
        }
    }
    if rows.iter().any(|row| !row.state.is_terminal()) {
        return Ok(pending(unique));
    }
    Ok(answer_from(pool, &unique, &rows).await?)
}

/// The finished answer for `job_ids`, from their rows: the listings each completed
/// fetch saw (once each, however many boards list them), and an error per fetch that
/// did not complete.
async fn answer_from(
    pool: &PgPool,
    job_ids: &[JobId],
    rows: &[JobRow],
) -> Result<FetchAnswer, sqlx::Error> {
    let mut listing_ids: Vec<i64> = Vec::new();
    let mut failed: Vec<(&JobRow, Option<i64>)> = Vec::new();
    for id in job_ids {
        let Some(row) = rows.iter().find(|row| row.id == *id) else {
            continue;
        };
        let source_id = serde_json::from_value::<FetchArgs>(row.args.clone())
            .ok()
            .map(|args| args.source_id);
        if row.state == JobState::Completed {
            if let Some(output) = row
                .output
                .clone()
                .and_then(|output| serde_json::from_value::<FetchOutput>(output).ok())
            {
                listing_ids.extend(output.listing_ids);
            }
        } else {
            failed.push((row, source_id));
        }
    }
    let raw_job_ids: Vec<i64> = job_ids.iter().map(|id| id.0).collect();
    let listings = sqlx::query_as!(
        ListingRecord,
        r#"
        SELECT id, source_id, external_id, title, company, location, url, posted_at,
               first_seen_at, coalesce(first_seen_job_id = ANY ($2), false) AS "new!"
        FROM listings WHERE id = ANY ($1)
        ORDER BY posted_at DESC NULLS LAST, id
        "#,
        &listing_ids,
        &raw_job_ids
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(Listing::from)
    .collect();
    let source_ids: Vec<i64> = failed.iter().filter_map(|(_, id)| *id).collect();
    let names = sqlx::query!(
        "SELECT id, name FROM listing_sources WHERE id = ANY ($1)",
        &source_ids
    )
    .fetch_all(pool)
    .await?;
    let errors = failed
        .into_iter()
        .map(|(row, source_id)| FetchFailure {
            job_id: row.id.0,
            source_id,
            source: names
                .iter()
                .find(|n| Some(n.id) == source_id)
                .map(|n| n.name.clone()),
            state: row.state,
            error: row
                .attempt_errors()
                .last()
                .map(|entry| entry.error.clone())
                .unwrap_or_else(|| format!("the fetch was {}", row.state)),
        })
        .collect();
    Ok(FetchAnswer {
        job_ids: job_ids.to_vec(),
        pending: false,
        listings: Some(listings),
        errors: Some(errors),
    })
}
