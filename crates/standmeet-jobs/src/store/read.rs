//! Reading jobs: one, many, a page of them, counts, and the figures the panels show.

use sqlx::{PgExecutor, PgPool};
use time::OffsetDateTime;

use crate::{JobId, JobState};

use super::JobRow;

/// These jobs, whole (the ones that exist), in no particular order.
pub async fn job_get_many(
    executor: impl PgExecutor<'_>,
    ids: &[JobId],
) -> Result<Vec<JobRow>, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    sqlx::query_as!(
        JobRow,
        r#"
        SELECT id AS "id: JobId", kind, queue, args, state AS "state: JobState", attempt,
               max_attempts, priority, scheduled_at, created_at, attempted_at, finalized_at,
               errors, output, attempted_by, cancel_requested_at
        FROM jobs WHERE id = ANY($1)
        "#,
        &ids
    )
    .fetch_all(executor)
    .await
}

/// Which of `ids` are in a terminal state.
pub async fn job_terminal_among(
    executor: impl PgExecutor<'_>,
    ids: &[JobId],
) -> Result<Vec<JobId>, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    sqlx::query_scalar!(
        r#"
        SELECT id AS "id: JobId" FROM jobs
        WHERE id = ANY($1) AND state IN ('completed', 'discarded', 'cancelled')
        "#,
        &ids
    )
    .fetch_all(executor)
    .await
}

/// How many jobs there are of each state and kind.
pub async fn job_count_by_state_and_kind(
    pool: &PgPool,
    finished: bool,
) -> Result<Vec<(JobState, String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"
        SELECT state AS "state!: JobState", kind AS "kind!", count(*) AS "count!"
        FROM jobs WHERE (finalized_at IS NOT NULL) = $1
        GROUP BY state, kind ORDER BY state, kind
        "#,
        finished
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.state, row.kind, row.count))
        .collect())
}

/// Where a job stands, briefly: what a live view shows of it (StandMeet's live streams
/// send it as is: `{"id","state","attempt","errors_count"}`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct JobProgress {
    pub id: i64,
    pub state: JobState,
    pub attempt: i16,
    pub errors_count: i32,
}

/// Where these jobs (those that exist) stand: state, attempt and how many errors they
/// have.
pub async fn job_progress(pool: &PgPool, ids: &[JobId]) -> Result<Vec<JobProgress>, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    sqlx::query_as!(
        JobProgress,
        r#"
        SELECT id, state AS "state: JobState", attempt,
               jsonb_array_length(errors) AS "errors_count!"
        FROM jobs WHERE id = ANY($1)
        "#,
        &ids
    )
    .fetch_all(pool)
    .await
}

/// How many jobs finished in one minute with one outcome.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct FinishedInMinute {
    pub minute: OffsetDateTime,
    pub state: JobState,
    pub finished: i64,
}

/// The chart's query: jobs finished per minute by outcome, this minute and the 59 before
/// it. An index-only scan of `jobs_finalized_at_idx` over the last hour's entries, so
/// the rows kept from before cost nothing (`crates/standmeet-jobs/tests/chart.rs` checks the plan with a
/// million rows).
pub const FINISHED_PER_MINUTE_SQL: &str = r#"
    SELECT date_trunc('minute', finalized_at) AS minute, state, count(*) AS finished
    FROM jobs
    WHERE finalized_at IS NOT NULL
      AND finalized_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1, 2
"#;

/// See [`FINISHED_PER_MINUTE_SQL`].
pub async fn job_finished_per_minute(pool: &PgPool) -> Result<Vec<FinishedInMinute>, sqlx::Error> {
    sqlx::query_as::<_, FinishedInMinute>(FINISHED_PER_MINUTE_SQL)
        .fetch_all(pool)
        .await
}

/// A job as a row of the Tasks panel: no arguments or output (they can be large),
/// the last error only.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct JobSummary {
    pub id: JobId,
    pub kind: String,
    pub queue: String,
    pub state: JobState,
    pub attempt: i16,
    pub max_attempts: i16,
    pub created_at: OffsetDateTime,
    pub scheduled_at: OffsetDateTime,
    pub finalized_at: Option<OffsetDateTime>,
    pub last_error: Option<String>,
}

/// Which jobs to list: any of state, kind and queue, and a keyset window (`before`:
/// older than that id; `after`: newer than that id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobFilter {
    pub state: Option<JobState>,
    pub kind: Option<String>,
    pub queue: Option<String>,
    pub before: Option<JobId>,
    pub after: Option<JobId>,
    /// One job by id.
    pub id: Option<JobId>,
    /// Jobs whose arguments contain this JSON object (`args @> …`).
    pub args: Option<serde_json::Value>,
}

const SUMMARY_COLUMNS: &str = "id, kind, queue, state, attempt, max_attempts, created_at, scheduled_at, \
     finalized_at, errors -> -1 ->> 'error' AS last_error";

/// The newest `limit` jobs that match `filter`, newest first.
///
/// Built at run time because each filter wants its own index: the primary key for
/// none, `(state, id)` for a state (the primary key again for `completed`, the rule
/// among the rows, which that index leaves out), and for a kind or a queue the indexes on finished
/// jobs plus the few unfinished ones found by state. The statement is not kept
/// prepared, so PostgreSQL plans each one for its actual values.
pub async fn job_list_page(
    pool: &PgPool,
    filter: &JobFilter,
    limit: i64,
) -> Result<Vec<JobSummary>, sqlx::Error> {
    use sqlx::{Execute, QueryBuilder};

    fn conditions<'a>(query: &mut QueryBuilder<'a, sqlx::Postgres>, filter: &'a JobFilter) {
        if let Some(kind) = &filter.kind {
            query.push(" AND kind = ").push_bind(kind.as_str());
        }
        if let Some(queue) = &filter.queue {
            query.push(" AND queue = ").push_bind(queue.as_str());
        }
        if let Some(before) = filter.before {
            query.push(" AND id < ").push_bind(before.0);
        }
        if let Some(after) = filter.after {
            query.push(" AND id > ").push_bind(after.0);
        }
        if let Some(id) = filter.id {
            query.push(" AND id = ").push_bind(id.0);
        }
        if let Some(args) = &filter.args {
            query.push(" AND args @> ").push_bind(args);
        }
    }

    let mut query = QueryBuilder::new("");
    let by_kind_or_queue = filter.kind.is_some() || filter.queue.is_some();
    match filter.state {
        Some(state) => {
            query
                .push(format!("SELECT {SUMMARY_COLUMNS} FROM jobs WHERE state = "))
                .push_bind(state);
            if state.is_terminal() && by_kind_or_queue {
                // Lets the planner use the kind/queue index on finished jobs.
                query.push(" AND finalized_at IS NOT NULL");
            }
            conditions(&mut query, filter);
            query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        }
        None if by_kind_or_queue => {
            query.push(format!(
                "SELECT * FROM ((SELECT {SUMMARY_COLUMNS} FROM jobs WHERE finalized_at IS NOT NULL"
            ));
            conditions(&mut query, filter);
            query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
            query.push(format!(
                ") UNION ALL (SELECT {SUMMARY_COLUMNS} FROM jobs \
                 WHERE state IN ('available', 'scheduled', 'running', 'retryable')"
            ));
            conditions(&mut query, filter);
            query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
            query
                .push(")) AS both_parts ORDER BY id DESC LIMIT ")
                .push_bind(limit);
        }
        None => {
            query.push(format!("SELECT {SUMMARY_COLUMNS} FROM jobs WHERE true"));
            conditions(&mut query, filter);
            query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
        }
    }
    let built = query.build_query_as::<JobSummary>();
    debug_assert!(!built.sql().is_empty());
    built.persistent(false).fetch_all(pool).await
}

/// How many jobs are in each state, counting each only up to `cap` (so a page never
/// counts a million rows: it says "10,000+" instead).
pub async fn job_state_counts(
    pool: &PgPool,
    cap: i64,
) -> Result<Vec<(JobState, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"
        SELECT s.state AS "state!: JobState",
               -- Completed jobs have no index by state (they are most of the table):
               -- the first of them a scan meets will do. The others have one, which
               -- the planner takes only when told that the state is not `completed`.
               CASE WHEN s.state = 'completed'
                    THEN (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE jobs.state = 'completed'
                                                LIMIT $1) AS capped)
                    ELSE (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE jobs.state = s.state
                                                  AND jobs.state <> 'completed' LIMIT $1) AS capped)
               END AS "count!"
        FROM unnest(enum_range(NULL::job_state)) AS s(state)
        "#,
        cap
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|row| (row.state, row.count)).collect())
}

/// The panel rows of these jobs (those that exist), for the status poll.
pub async fn job_summaries(pool: &PgPool, ids: &[JobId]) -> Result<Vec<JobSummary>, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    sqlx::query_as!(
        JobSummary,
        r#"
        SELECT id AS "id: JobId", kind, queue, state AS "state: JobState", attempt, max_attempts,
               created_at, scheduled_at, finalized_at, errors -> -1 ->> 'error' AS last_error
        FROM jobs WHERE id = ANY($1)
        ORDER BY id DESC
        "#,
        &ids
    )
    .fetch_all(pool)
    .await
}

/// One job, whole.
pub async fn job_get(
    executor: impl PgExecutor<'_>,
    id: JobId,
) -> Result<Option<JobRow>, sqlx::Error> {
    sqlx::query_as!(
        JobRow,
        r#"
        SELECT id AS "id: JobId", kind, queue, args, state AS "state: JobState", attempt,
               max_attempts, priority, scheduled_at, created_at, attempted_at, finalized_at,
               errors, output, attempted_by, cancel_requested_at
        FROM jobs WHERE id = $1
        "#,
        id.0
    )
    .fetch_optional(executor)
    .await
}
