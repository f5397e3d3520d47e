//! Reading jobs: one, many, a page of them, counts, and the figures the panels show.

use sqlx::{PgExecutor, PgPool};
use time::OffsetDateTime;

use crate::{JobId, JobState};

use super::JobRow;

/// These jobs, whole (the ones that exist), in no particular order.
pub(crate) async fn job_get_many(
    executor: impl PgExecutor<'_>,
    ids: &[JobId],
) -> Result<Vec<JobRow>, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    sqlx::query_as!(
        JobRow,
        r#"
        SELECT id AS "id: JobId", kind, queue, args, state AS "state: JobState", attempt,
               max_attempts, priority, scheduled_at, created_at, attempted_at, finalized_at,
               errors, output, attempted_by, cancel_requested_at, trace_context
        FROM jobs WHERE id = ANY($1)
        "#,
        &ids
    )
    .fetch_all(executor)
    .await
}

/// Which of `ids` are in a terminal state.
pub(crate) async fn job_terminal_among(
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

/// How many jobs there are of each state and kind: the unfinished ones counted by their
/// index (they are few), the finished ones read from their summaries.
pub(crate) async fn job_count_by_state_and_kind(
    pool: &PgPool,
    finished: bool,
) -> Result<Vec<(JobState, String, i64)>, sqlx::Error> {
    let rows = if finished {
        sqlx::query!(
            r#"
            SELECT state AS "state!: JobState", kind AS "kind!", sum(jobs)::bigint AS "count!"
            FROM job_finished_minutes
            GROUP BY state, kind HAVING sum(jobs) <> 0 ORDER BY state, kind
            "#
        )
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| (row.state, row.kind, row.count))
        .collect()
    } else {
        sqlx::query!(
            r#"
            SELECT state AS "state!: JobState", kind AS "kind!", count(*) AS "count!"
            FROM jobs WHERE state IN ('available', 'scheduled', 'running', 'retryable')
            GROUP BY state, kind ORDER BY state, kind
            "#
        )
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| (row.state, row.kind, row.count))
        .collect()
    };
    Ok(rows)
}

/// Where a job stands, briefly: what a live view shows of it (StandMeet's live streams
/// send it as is: `{"id","state","attempt","errors_count"}`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct JobProgress {
    /// The job's id.
    pub id: i64,
    /// Its state.
    pub state: JobState,
    /// Attempts started so far.
    pub attempt: i16,
    /// Its failed attempts.
    pub errors_count: i32,
}

/// Where these jobs (those that exist) stand: state, attempt and how many errors they
/// have.
pub(crate) async fn job_progress(
    pool: &PgPool,
    ids: &[JobId],
) -> Result<Vec<JobProgress>, sqlx::Error> {
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
    /// The minute's start.
    pub minute: OffsetDateTime,
    /// The terminal state.
    pub state: JobState,
    /// Jobs that reached it in that minute.
    pub finished: i64,
}

/// The chart's query: jobs finished per minute by outcome, this minute and the 59 before
/// it, from the summaries of finished jobs (`job_finished_minutes`): a few rows per
/// minute, however many jobs are kept or finish each second
/// (`crates/standmeet-jobs/tests/chart.rs` checks the plan with a million jobs).
pub const FINISHED_PER_MINUTE_SQL: &str = r#"
    SELECT minute, state, sum(jobs)::bigint AS finished
    FROM job_finished_minutes
    WHERE minute >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1, 2
    HAVING sum(jobs) <> 0
"#;

/// See [`FINISHED_PER_MINUTE_SQL`].
pub(crate) async fn job_finished_per_minute(
    pool: &PgPool,
) -> Result<Vec<FinishedInMinute>, sqlx::Error> {
    sqlx::query_as::<_, FinishedInMinute>(FINISHED_PER_MINUTE_SQL)
        .fetch_all(pool)
        .await
}

/// A job as a row of the Tasks panel: no arguments or output (they can be large),
/// the last error only.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct JobSummary {
    /// Its id.
    pub id: JobId,
    /// Its kind's name.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// Its state.
    pub state: JobState,
    /// Attempts started so far.
    pub attempt: i16,
    /// The attempts it may take in all.
    pub max_attempts: i16,
    /// When it was inserted.
    pub created_at: OffsetDateTime,
    /// When it is due.
    pub scheduled_at: OffsetDateTime,
    /// When it reached a terminal state.
    pub finalized_at: Option<OffsetDateTime>,
    /// Its latest failed attempt's words.
    pub last_error: Option<String>,
}

/// Which jobs to list: any of state, kind and queue, and a keyset window (`before`:
/// older than that id; `after`: newer than that id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this kind.
    pub kind: Option<String>,
    /// Only jobs of this queue.
    pub queue: Option<String>,
    /// Only jobs older than this one (the next page, newest first).
    pub before: Option<JobId>,
    /// Only jobs newer than this one.
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
/// Built at run time because each filter reads its own way. With no filter by state,
/// kind or queue: the primary key, newest first. With one, the unfinished jobs that
/// match are found through their index (they are few), and the finished ones through
/// the summary of blocks of ids (`job_finished_blocks`): only the blocks that hold a
/// finished job of that state, kind and queue are read, newest first, each through the
/// primary key, until the page is full. A kind that is nowhere reads no job; a kind in
/// one job of ten thousand reads about one block per job shown. The two parts are
/// merged by id. The statement is not kept prepared, so PostgreSQL plans each one for
/// its actual values.
pub(crate) async fn job_list_page(
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
    let by_summaries = filter.id.is_none()
        && (filter.state.is_some() || filter.kind.is_some() || filter.queue.is_some());
    if !by_summaries {
        query.push(format!("SELECT {SUMMARY_COLUMNS} FROM jobs WHERE true"));
        conditions(&mut query, filter);
        query.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
    } else {
        let (finished, unfinished): (Vec<JobState>, Vec<JobState>) = JobState::ALL
            .iter()
            .filter(|state| filter.state.is_none_or(|wanted| wanted == **state))
            .partition(|state| state.is_terminal());
        query.push("SELECT * FROM (");
        let mut parts = 0;
        if !unfinished.is_empty() {
            query
                .push(format!(
                    "(SELECT {SUMMARY_COLUMNS} FROM jobs WHERE state = ANY("
                ))
                .push_bind(unfinished)
                // The index's predicate, for the planner.
                .push(") AND state IN ('available', 'scheduled', 'running', 'retryable')");
            conditions(&mut query, filter);
            query
                .push(" ORDER BY id DESC LIMIT ")
                .push_bind(limit)
                .push(")");
            parts += 1;
        }
        if !finished.is_empty() {
            if parts > 0 {
                query.push(" UNION ALL ");
            }
            // The candidate blocks, newest first; the nested loop reads them in that
            // order, each newest first, and stops once the page is full.
            query
                .push("(SELECT j.* FROM (SELECT block FROM job_finished_blocks WHERE state = ANY(")
                .push_bind(finished.clone())
                .push(")");
            if let Some(kind) = &filter.kind {
                query.push(" AND kind = ").push_bind(kind.as_str());
            }
            if let Some(queue) = &filter.queue {
                query.push(" AND queue = ").push_bind(queue.as_str());
            }
            if let Some(before) = filter.before {
                query
                    .push(" AND block <= job_block(")
                    .push_bind(before.0)
                    .push(")");
            }
            if let Some(after) = filter.after {
                query
                    .push(" AND block >= job_block(")
                    .push_bind(after.0)
                    .push(")");
            }
            query.push(format!(
                " GROUP BY block HAVING sum(jobs) > 0 ORDER BY block DESC) AS b, \
                 LATERAL (SELECT {SUMMARY_COLUMNS} FROM jobs \
                 WHERE id >= job_block_first_id(b.block) AND id < job_block_first_id(b.block + 1) \
                 AND state = ANY("
            ));
            query.push_bind(finished).push(")");
            conditions(&mut query, filter);
            query
                .push(" ORDER BY id DESC) AS j LIMIT ")
                .push_bind(limit)
                .push(")");
        }
        query
            .push(") AS parts ORDER BY id DESC LIMIT ")
            .push_bind(limit);
    }
    let built = query.build_query_as::<JobSummary>();
    debug_assert!(!built.sql().is_empty());
    built.persistent(false).fetch_all(pool).await
}

/// How many jobs are in each state: the unfinished ones counted through their index,
/// each only up to `cap` (a backlog of a million jobs is "10,000+" on a page), the
/// finished ones exactly, from their summaries.
pub(crate) async fn job_state_counts(
    pool: &PgPool,
    cap: i64,
) -> Result<Vec<(JobState, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"
        SELECT s.state AS "state!: JobState",
               CASE WHEN s.state IN ('completed', 'discarded', 'cancelled')
                    THEN coalesce(f.jobs, 0)
                    -- The second condition is the index's predicate, for the planner.
                    ELSE (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE jobs.state = s.state
                            AND jobs.state IN ('available', 'scheduled', 'running', 'retryable')
                            LIMIT $1) AS capped)
               END AS "count!"
        FROM unnest(enum_range(NULL::job_state)) AS s(state)
        LEFT JOIN (SELECT state, sum(jobs)::bigint AS jobs FROM job_finished_minutes
                   GROUP BY state) AS f ON f.state = s.state
        "#,
        cap
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|row| (row.state, row.count)).collect())
}

/// The panel rows of these jobs (those that exist), for the status poll.
pub(crate) async fn job_summaries(
    pool: &PgPool,
    ids: &[JobId],
) -> Result<Vec<JobSummary>, sqlx::Error> {
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
pub(crate) async fn job_get(
    executor: impl PgExecutor<'_>,
    id: JobId,
) -> Result<Option<JobRow>, sqlx::Error> {
    sqlx::query_as!(
        JobRow,
        r#"
        SELECT id AS "id: JobId", kind, queue, args, state AS "state: JobState", attempt,
               max_attempts, priority, scheduled_at, created_at, attempted_at, finalized_at,
               errors, output, attempted_by, cancel_requested_at, trace_context
        FROM jobs WHERE id = $1
        "#,
        id.0
    )
    .fetch_optional(executor)
    .await
}
