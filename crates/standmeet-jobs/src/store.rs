//! Every SQL statement about jobs, one documented function each, named noun first.
//! The state machine lives here: each statement says in its WHERE clause which states
//! it moves jobs out of, so a job that moved meanwhile is simply not touched (fencing).

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor, PgPool};
use time::OffsetDateTime;

use super::{JobId, JobState};

/// One failed attempt, as kept in `errors`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptError {
    pub attempt: i16,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub error: String,
}

/// A whole `jobs` row. (Also read from the row as jsonb, `to_jsonb(jobs)`, which is
/// how the writes of outcomes hand finished jobs to this process's waiters.)
#[derive(Clone, Debug, sqlx::FromRow, Deserialize)]
pub struct JobRow {
    pub id: JobId,
    pub kind: String,
    pub queue: String,
    pub args: serde_json::Value,
    pub state: JobState,
    pub attempt: i16,
    pub max_attempts: i16,
    pub priority: i16,
    #[serde(with = "time::serde::rfc3339")]
    pub scheduled_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub attempted_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finalized_at: Option<OffsetDateTime>,
    pub errors: serde_json::Value,
    pub output: Option<serde_json::Value>,
    pub attempted_by: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub cancel_requested_at: Option<OffsetDateTime>,
}

impl JobRow {
    /// The error entries, oldest first.
    pub fn attempt_errors(&self) -> Vec<AttemptError> {
        serde_json::from_value(self.errors.clone()).unwrap_or_default()
    }
}

/// A job a producer just fetched or claimed, with the number of the attempt it starts.
#[derive(Clone, Debug)]
pub struct FetchedJob {
    pub id: JobId,
    pub kind: String,
    pub args: serde_json::Value,
    pub attempt: i16,
    pub max_attempts: i16,
}

/// Inserts one job. It is `scheduled` when `scheduled_at` lies ahead, else `available`.
pub async fn job_insert<'e>(
    executor: impl PgExecutor<'e>,
    kind: &str,
    queue: &str,
    args: &serde_json::Value,
    max_attempts: i16,
    priority: i16,
    scheduled_at: Option<OffsetDateTime>,
) -> Result<JobId, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO jobs (kind, queue, args, max_attempts, priority, scheduled_at, state)
        VALUES ($1, $2, $3, $4, $5, coalesce($6, now()),
                CASE WHEN $6 > now() THEN 'scheduled'::job_state ELSE 'available'::job_state END)
        RETURNING id AS "id: JobId"
        "#,
        kind,
        queue,
        args,
        max_attempts,
        priority,
        scheduled_at,
    )
    .fetch_one(executor)
    .await
}

/// Inserts many jobs of one kind in one statement; answers their ids in order.
pub async fn job_insert_many(
    conn: &mut PgConnection,
    kind: &str,
    queue: &str,
    args: &[serde_json::Value],
    max_attempts: i16,
    priority: i16,
) -> Result<Vec<JobId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        INSERT INTO jobs (kind, queue, args, max_attempts, priority)
        SELECT $1, $2, a.args, $4, $5
        FROM unnest($3::jsonb[]) WITH ORDINALITY AS a(args, n)
        ORDER BY a.n
        RETURNING id AS "id: JobId"
        "#,
        kind,
        queue,
        args,
        max_attempts,
        priority,
    )
    .fetch_all(conn)
    .await
}

/// Claims up to `limit` available jobs of `queue` inside the caller's transaction `tx`,
/// by row lock alone (`FOR UPDATE SKIP LOCKED`): nothing is written, so a claim costs
/// no row version and no index entry. The jobs come back with the number of the
/// attempt about to start (`attempt + 1`); [`job_record_claimed`] writes what became
/// of them in the same transaction. Before any of them runs, the claim leaves its
/// trace ([`job_claim_trace`]) under the transaction's id, which comes back with the
/// rows (`ClaimedRows::xact`).
///
/// In priority order, and only jobs of `kinds` (those this process has handlers for): a
/// job of a kind it does not know stays `available` for a process that does (during a
/// rolling deploy, the newer version's jobs wait for the newer version instead of
/// being discarded). A paused queue (a row in `job_queue_pauses`) gives nothing: the
/// check is one primary-key lookup, evaluated once per claim. Never a job whose
/// attempt an earlier claim started and did not record (its trace is still in
/// `job_claims`): that one waits for the rescuer to count the attempt
/// ([`job_count_dead_claims`]), so that a job that kills its process is not picked
/// first by every process again and again.
pub async fn job_claim(
    tx: &mut PgConnection,
    queue: &str,
    limit: i64,
    kinds: &[String],
) -> Result<(Vec<FetchedJob>, ClaimedRows), sqlx::Error> {
    // `NOT IN (subquery)` is hashed once per claim; the traces of a queue are its
    // claims in flight (a few) and the dead ones not yet counted.
    let rows = sqlx::query!(
        r#"
        SELECT id AS "id: JobId", kind, args, attempt + 1 AS "attempt!: i16", max_attempts,
               ctid::text AS "row!", pg_current_xact_id()::text AS "xact!"
        FROM jobs
        WHERE state = 'available' AND queue = $1 AND scheduled_at <= now()
          AND kind = ANY($3)
          AND NOT EXISTS (SELECT FROM job_queue_pauses p WHERE p.queue = $1)
          AND id NOT IN (SELECT unnest(c.jobs) FROM job_claims c WHERE c.queue = $1)
        ORDER BY priority, scheduled_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
        "#,
        queue,
        limit,
        kinds,
    )
    .fetch_all(tx)
    .await?;
    let mut jobs = Vec::with_capacity(rows.len());
    let mut claimed = ClaimedRows::default();
    for row in rows {
        claimed.rows.insert(row.id, row.row);
        claimed.xact = row.xact;
        jobs.push(FetchedJob {
            id: row.id,
            kind: row.kind,
            args: row.args,
            attempt: row.attempt,
            max_attempts: row.max_attempts,
        });
    }
    Ok((jobs, claimed))
}

/// Leaves the trace of a claim (see the migration `job_claims`): the attempts it is
/// about to start, under its transaction's id `xact`, committed at once on a
/// connection other than the claim's. Until `lease` has passed only the claim's own
/// process settles these attempts; after it, if the claim's transaction did not commit,
/// the rescuer counts them.
pub async fn job_claim_trace(
    executor: impl PgExecutor<'_>,
    xact: &str,
    queue: &str,
    worker: &str,
    attempts: &[HeldAttempt],
    lease: Duration,
) -> Result<(), sqlx::Error> {
    let ids: Vec<i64> = attempts.iter().map(|held| held.id.0).collect();
    let numbers: Vec<i16> = attempts.iter().map(|held| held.attempt).collect();
    sqlx::query!(
        r#"
        INSERT INTO job_claims (xid, queue, worker, jobs, attempts, expires_at)
        VALUES ($1::text::xid8, $2, $3, $4, $5, now() + $6 * interval '1 millisecond')
        "#,
        xact,
        queue,
        worker,
        &ids,
        &numbers,
        lease.as_millis() as f64,
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// What became of a claim whose transaction ended without our knowing how (its
/// connection broke while it wrote or committed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimFate {
    /// It committed after all: its attempts are recorded.
    Committed,
    /// It did not commit, and its trace is ours again (deleted in the caller's
    /// transaction): the caller records the attempts itself, and must commit to keep
    /// the trace gone.
    Ours,
    /// It did not commit and its trace is gone: the rescuer counted its attempts.
    Counted,
}

/// Finds out, inside the caller's transaction, what became of the claim whose
/// transaction was `xact`, and takes its trace back when it did not commit (see
/// [`ClaimFate`]). Deleting the trace first keeps the rescuer off its jobs while the
/// caller records them, and puts the caller in line behind a rescuer already at it.
pub async fn job_claim_settle(tx: &mut PgConnection, xact: &str) -> Result<ClaimFate, sqlx::Error> {
    let row = sqlx::query!(
        r#"
        WITH gone AS (DELETE FROM job_claims WHERE xid = $1::text::xid8 RETURNING 1)
        SELECT pg_xact_status($1::text::xid8) AS status,
               (SELECT count(*) FROM gone) AS "taken_back!"
        "#,
        xact,
    )
    .fetch_one(tx)
    .await?;
    Ok(if row.status.as_deref() == Some("committed") {
        ClaimFate::Committed
    } else if row.taken_back > 0 {
        ClaimFate::Ours
    } else {
        ClaimFate::Counted
    })
}

/// Counts the attempts of up to `limit` dead claims: claims whose transaction is no
/// longer in progress and did not record them (their trace is still here), once their
/// lease ran out. Each such attempt failed because its process died (or lost the
/// database) during it: the job is `retryable` after the backoff (`retry_base` ×
/// attempt⁴, ±10 %, as everywhere), or `discarded` when that was its last attempt, with
/// an error entry that says so. A job that moved on meanwhile is left alone (fenced by
/// its state and attempt). Answers how many jobs it changed and how many discarded.
pub async fn job_count_dead_claims(
    pool: &PgPool,
    limit: i64,
    retry_base: Duration,
) -> Result<(u64, u64), sqlx::Error> {
    let row = sqlx::query!(
        r#"
        WITH dead AS (
            DELETE FROM job_claims c
            WHERE c.xid = ANY(ARRAY(
                SELECT xid FROM job_claims
                WHERE expires_at < now()
                  AND pg_xact_status(xid) IS DISTINCT FROM 'in progress'
                ORDER BY expires_at
                LIMIT $1
                FOR UPDATE SKIP LOCKED))
            RETURNING c.worker, c.jobs, c.attempts
        ), started AS (
            SELECT d.worker, s.id, s.attempt
            FROM dead d, unnest(d.jobs, d.attempts) AS s(id, attempt)
        ), counted AS (
            UPDATE jobs AS j
            SET attempt = s.attempt,
                state = CASE WHEN s.attempt >= j.max_attempts THEN 'discarded'::job_state
                             ELSE 'retryable'::job_state END,
                errors = j.errors || jsonb_build_array(jsonb_build_object(
                    'attempt', s.attempt, 'at', now(),
                    'error', 'the process running this attempt (' || s.worker
                             || ') died or lost the database during it')),
                attempted_at = now(),
                scheduled_at = CASE WHEN s.attempt < j.max_attempts
                                    THEN now() + least($2 * power(s.attempt, 4) * (0.9 + random() * 0.2), $3)
                                                 * interval '1 millisecond'
                                    ELSE j.scheduled_at END,
                finalized_at = CASE WHEN s.attempt >= j.max_attempts THEN now() END
            FROM started s
            WHERE j.id = s.id AND j.state = 'available' AND j.attempt = s.attempt - 1
            RETURNING j.state
        )
        SELECT count(*) AS "changed!",
               count(*) FILTER (WHERE state = 'discarded') AS "discarded!"
        FROM counted
        "#,
        limit,
        retry_base.as_millis() as f64,
        MAX_DELAY.as_millis() as f64,
    )
    .fetch_one(pool)
    .await?;
    Ok((row.changed as u64, row.discarded as u64))
}

/// Where the rows of claimed jobs lie (their `ctid`, as text), by job id. A row the
/// claim holds locked stays where it is until the claim ends, so the claim's write
/// reaches each row directly (a TID scan) instead of through the primary key: about a
/// tenth of that write's database time for quick jobs.
#[derive(Debug, Default)]
pub struct ClaimedRows {
    rows: HashMap<JobId, String>,
    /// The claim's transaction id (`pg_current_xact_id()`, as text): the key of its
    /// trace in `job_claims`. Empty when the claim took nothing.
    pub xact: String,
}

/// Writes, in the transaction that claimed them ([`job_claim`]), what became of
/// claimed jobs, in one statement: the attempts that ended get their outcome (as
/// [`job_record_outcomes`] would write it), the ones `still_running` become `running`
/// under `worker` with a lease, for the completer to finish later. Either way the
/// attempt counts (`attempt` is the claimed attempt's number) unless the outcome gives
/// it back. Answers the ids it changed (all of them: the claim's lock kept them as
/// they were). `attempted_at` is the claim's start (`now()`, the transaction's time);
/// the lease, the end and a delay count from the write (`clock_timestamp()`), so that
/// the window does not eat into the lease.
///
/// The statement sends `standmeet_job_final` for each job it finishes
/// itself, in its `RETURNING`, and sets `standmeet.notifies_itself` for its
/// transaction (once, before any row is written: an uncorrelated subquery in the
/// `WHERE` is a one-time filter) so that the trigger that otherwise sends it stands
/// aside: a function call per job instead of a queued trigger event, a second look at
/// the row and a PL/pgSQL call.
///
/// The jobs of `watched` (some of `outcomes`: those a waiter of this process waits
/// for) come back whole, as the write left them, so that their waiters have their
/// answer without reading it again (a query after the commit, a quarter of the time
/// from a quick job's insert to its waiter's answer).
///
/// The same statement deletes the claim's trace `trace` (see [`job_claim_trace`]), so
/// that the attempts are recorded and their trace gone in one commit, or neither.
#[allow(clippy::too_many_arguments)]
pub async fn job_record_claimed(
    tx: &mut PgConnection,
    worker: &str,
    lease: Duration,
    outcomes: &[Outcome],
    still_running: &[HeldAttempt],
    claimed: &ClaimedRows,
    watched: &[JobId],
    trace: Option<&str>,
) -> Result<Vec<RecordedJob>, sqlx::Error> {
    let mut c = OutcomeColumns::with_capacity(outcomes.len() + still_running.len());
    outcomes.iter().for_each(|o| c.push_outcome(o));
    still_running.iter().for_each(|held| c.push_running(held));
    // A job the claim does not hold has no row here, so nothing is written for it.
    let rows: Vec<Option<&str>> = c
        .ids
        .iter()
        .map(|id| claimed.rows.get(&JobId(*id)).map(String::as_str))
        .collect();
    debug_assert!(
        rows.iter().all(Option::is_some),
        "a claim writes only jobs it holds"
    );
    sqlx::query!(
        r#"
        WITH untraced AS (DELETE FROM job_claims WHERE xid = $12::text::xid8)
        UPDATE jobs AS j
        SET state = c.state::job_state,
            attempt = CASE WHEN c.give_back THEN greatest(c.attempt - 1, 0) ELSE c.attempt END,
            attempted_at = now(),
            attempted_by = CASE WHEN c.state = 'running' THEN $8 END,
            lease_expires_at = CASE WHEN c.state = 'running'
                                    THEN clock_timestamp() + $9 * interval '1 millisecond' END,
            cancel_requested_at = NULL,
            output = CASE WHEN c.output IS NULL THEN j.output ELSE c.output::jsonb END,
            errors = CASE WHEN c.error IS NULL THEN j.errors
                          ELSE j.errors || jsonb_build_array(jsonb_build_object(
                                   'attempt', c.attempt, 'at', clock_timestamp(), 'error', c.error)) END,
            scheduled_at = CASE WHEN c.delay_ms IS NULL THEN j.scheduled_at
                                ELSE clock_timestamp() + c.delay_ms * interval '1 millisecond' END,
            finalized_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled')
                                THEN clock_timestamp() END
        FROM unnest($1::bigint[], $2::smallint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bool[],
                    $10::text[])
             AS c(id, attempt, state, output, error, delay_ms, give_back, row_at)
        WHERE j.ctid = c.row_at::tid AND j.id = c.id
          AND j.state = 'available' AND j.attempt = c.attempt - 1
          AND (SELECT set_config('standmeet.notifies_itself',
                                 'on', true)) IS NOT NULL
        RETURNING j.id AS "id: JobId",
                  -- pg_notify answers void, which `IS NULL` turns into a column.
                  CASE WHEN j.state IN ('completed', 'discarded', 'cancelled')
                       THEN pg_notify('standmeet_job_final', j.id::text) IS NULL END AS notified,
                  CASE WHEN j.id = ANY($11) THEN to_jsonb(j)::text END AS "whole?: String",
                  CASE WHEN j.id = ANY($11) THEN j.output IS NOT NULL END AS "has_output?: bool"
        "#,
        &c.ids,
        &c.attempts,
        &c.states,
        &c.outputs as &[Option<String>],
        &c.errors as &[Option<String>],
        &c.delays as &[Option<i64>],
        &c.give_back,
        worker,
        lease.as_millis() as f64,
        &rows as &[Option<&str>],
        &watched.iter().map(|id| id.0).collect::<Vec<i64>>(),
        trace,
    )
    .fetch_all(tx)
    .await
    .map(|rows| {
        rows.into_iter()
            .map(|row| RecordedJob::new(row.id, row.whole, row.has_output))
            .collect()
    })
}

/// A job an outcome's write changed; whole when it was watched.
#[derive(Debug)]
pub struct RecordedJob {
    pub id: JobId,
    pub whole: Option<JobRow>,
}

impl RecordedJob {
    /// From the row as jsonb text (parsed here, so that a row serde_json cannot read,
    /// e.g. an output nested deeper than it goes, fails nothing but the handover: its
    /// waiter reads it instead) and whether `output` is there at all (`to_jsonb` writes
    /// a missing output and a JSON `null` alike).
    fn new(id: JobId, whole: Option<String>, has_output: Option<bool>) -> Self {
        let whole = whole
            .and_then(|text| serde_json::from_str::<JobRow>(&text).ok())
            .map(|mut row| {
                if has_output == Some(true) && row.output.is_none() {
                    row.output = Some(serde_json::Value::Null);
                }
                row
            });
        RecordedJob { id, whole }
    }
}

/// Completes a job inside the caller's transaction, fenced: only while it is still
/// `running` at `attempt` and held by `worker`. Answers whether it did.
pub async fn job_complete_in_tx(
    conn: &mut PgConnection,
    id: JobId,
    attempt: i16,
    worker: &str,
    output: &serde_json::Value,
) -> Result<bool, sqlx::Error> {
    let output = clean_json(output);
    let result = sqlx::query!(
        r#"
        UPDATE jobs
        SET state = 'completed', output = $3, finalized_at = now(),
            attempted_by = NULL, lease_expires_at = NULL
        WHERE id = $1 AND state = 'running' AND attempt = $2 AND attempted_by = $4
        "#,
        id.0,
        attempt,
        output.as_ref(),
        worker,
    )
    .execute(conn)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// What the completer writes for one attempt (see `retry::plan`).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub id: JobId,
    pub attempt: i16,
    pub state: JobState,
    pub output: Option<serde_json::Value>,
    /// Appended to `errors` when present.
    pub error: Option<String>,
    /// `scheduled_at = now() + delay` when present (clamped to [`MAX_DELAY`]).
    pub delay: Option<Duration>,
    /// The attempt is given back (`attempt - 1`): a snooze or a shutdown is not a try.
    pub give_back_attempt: bool,
}

/// The longest any delay may be: the backoff's cap, a handler's `retry_after` or
/// snooze, alike. Past a week a retry is no longer what anybody waits for, and an
/// unbounded delay would overflow PostgreSQL's interval.
pub const MAX_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest error text kept per attempt (in characters): a whole feed or a stack of
/// causes helps nobody in the Tasks panel and bloats the row at every state change.
pub const MAX_ERROR_CHARS: usize = 2_000;

/// An error text as it can be stored: without NUL characters (PostgreSQL's text and
/// jsonb refuse them; a feed or a remote error may carry one) and at most
/// [`MAX_ERROR_CHARS`] characters, with an ellipsis when cut.
pub fn clean_error(text: &str) -> String {
    let mut chars = text.chars().filter(|c| *c != '\0');
    let mut cleaned: String = chars.by_ref().take(MAX_ERROR_CHARS).collect();
    if chars.next().is_some() {
        cleaned.push('…');
    }
    cleaned
}

/// A JSON value as jsonb can store it: strings (and keys) lose their NUL characters.
/// Borrowed unchanged in the usual case.
pub fn clean_json(value: &serde_json::Value) -> std::borrow::Cow<'_, serde_json::Value> {
    if value.to_string().contains("\\u0000") {
        std::borrow::Cow::Owned(without_nul(value))
    } else {
        std::borrow::Cow::Borrowed(value)
    }
}

/// `value` as jsonb text, cleaned like [`clean_json`]; serializes once in the usual case.
fn clean_json_text(value: &serde_json::Value) -> String {
    let text = value.to_string();
    if text.contains("\\u0000") {
        without_nul(value).to_string()
    } else {
        text
    }
}

fn without_nul(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => Value::String(text.replace('\0', "")),
        Value::Array(items) => Value::Array(items.iter().map(without_nul).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.replace('\0', ""), without_nul(item)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn delay_millis(delay: Duration) -> i64 {
    delay.min(MAX_DELAY).as_millis() as i64
}

/// Claims again, inside `tx`, those of `attempts` whose jobs are still `available` at
/// the attempt before (a claim rolled back, or its connection broke; its trace, which
/// the caller took back with [`job_claim_settle`], kept every other claim off them), by
/// row lock like [`job_claim`]. Answers those it claimed.
pub async fn job_claim_again(
    tx: &mut PgConnection,
    attempts: &[HeldAttempt],
) -> Result<(Vec<HeldAttempt>, ClaimedRows), sqlx::Error> {
    let ids: Vec<i64> = attempts.iter().map(|held| held.id.0).collect();
    let rows = sqlx::query!(
        r#"
        SELECT id AS "id: JobId", attempt + 1 AS "attempt!: i16", ctid::text AS "row!"
        FROM jobs
        WHERE id = ANY($1) AND state = 'available'
        FOR UPDATE SKIP LOCKED
        "#,
        &ids,
    )
    .fetch_all(tx)
    .await?;
    let wanted: std::collections::HashSet<&HeldAttempt> = attempts.iter().collect();
    let mut ours = Vec::with_capacity(rows.len());
    let mut claimed = ClaimedRows::default();
    for row in rows {
        let held = HeldAttempt {
            id: row.id,
            attempt: row.attempt,
        };
        if wanted.contains(&held) {
            ours.push(held);
            claimed.rows.insert(row.id, row.row);
        }
    }
    Ok((ours, claimed))
}

/// Outcomes as the parallel arrays that `unnest` turns back into rows.
struct OutcomeColumns {
    ids: Vec<i64>,
    attempts: Vec<i16>,
    states: Vec<String>,
    outputs: Vec<Option<String>>,
    errors: Vec<Option<String>>,
    delays: Vec<Option<i64>>,
    give_back: Vec<bool>,
}

impl OutcomeColumns {
    fn with_capacity(count: usize) -> Self {
        OutcomeColumns {
            ids: Vec::with_capacity(count),
            attempts: Vec::with_capacity(count),
            states: Vec::with_capacity(count),
            outputs: Vec::with_capacity(count),
            errors: Vec::with_capacity(count),
            delays: Vec::with_capacity(count),
            give_back: Vec::with_capacity(count),
        }
    }

    fn push_outcome(&mut self, o: &Outcome) {
        self.ids.push(o.id.0);
        self.attempts.push(o.attempt);
        self.states.push(o.state.as_str().to_string());
        self.outputs.push(o.output.as_ref().map(clean_json_text));
        self.errors.push(o.error.as_deref().map(clean_error));
        self.delays.push(o.delay.map(delay_millis));
        self.give_back.push(o.give_back_attempt);
    }

    /// An attempt that goes on: `running`, nothing else to write.
    fn push_running(&mut self, held: &HeldAttempt) {
        self.ids.push(held.id.0);
        self.attempts.push(held.attempt);
        self.states.push(JobState::Running.as_str().to_string());
        self.outputs.push(None);
        self.errors.push(None);
        self.delays.push(None);
        self.give_back.push(false);
    }
}

/// Writes many outcomes of `worker`'s attempts in one statement, each fenced: a job no
/// longer `running` at that attempt under `worker` (rescued, cancelled) is left alone.
/// An admin's cancel that the attempt did not see wins over a retry or a snooze: such
/// a job ends `cancelled` (a completion or a discard stands). Answers the jobs it
/// changed, those of `watched` whole (as in [`job_record_claimed`]).
pub async fn job_record_outcomes(
    executor: impl PgExecutor<'_>,
    worker: &str,
    outcomes: &[Outcome],
    watched: &[JobId],
) -> Result<Vec<RecordedJob>, sqlx::Error> {
    let mut c = OutcomeColumns::with_capacity(outcomes.len());
    outcomes.iter().for_each(|o| c.push_outcome(o));
    sqlx::query!(
        r#"
        UPDATE jobs AS j
        SET state = (CASE WHEN j.cancel_requested_at IS NOT NULL
                               AND c.state NOT IN ('completed', 'discarded', 'cancelled')
                          THEN 'cancelled' ELSE c.state END)::job_state,
            output = CASE WHEN c.output IS NULL THEN j.output ELSE c.output::jsonb END,
            errors = CASE WHEN c.error IS NULL THEN j.errors
                          ELSE j.errors || jsonb_build_array(jsonb_build_object(
                                   'attempt', j.attempt, 'at', now(), 'error', c.error)) END,
            scheduled_at = CASE WHEN c.delay_ms IS NULL OR j.cancel_requested_at IS NOT NULL
                                THEN j.scheduled_at
                                ELSE now() + c.delay_ms * interval '1 millisecond' END,
            attempt = CASE WHEN c.give_back AND j.cancel_requested_at IS NULL
                           THEN greatest(j.attempt - 1, 0) ELSE j.attempt END,
            finalized_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled')
                                     OR j.cancel_requested_at IS NOT NULL THEN now() END,
            attempted_by = NULL,
            lease_expires_at = NULL
        FROM unnest($1::bigint[], $2::smallint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bool[])
             AS c(id, attempt, state, output, error, delay_ms, give_back)
        WHERE j.id = c.id AND j.state = 'running' AND j.attempt = c.attempt AND j.attempted_by = $8
        RETURNING j.id AS "id: JobId",
                  CASE WHEN j.id = ANY($9) THEN to_jsonb(j)::text END AS "whole?: String",
                  CASE WHEN j.id = ANY($9) THEN j.output IS NOT NULL END AS "has_output?: bool"
        "#,
        &c.ids,
        &c.attempts,
        &c.states,
        &c.outputs as &[Option<String>],
        &c.errors as &[Option<String>],
        &c.delays as &[Option<i64>],
        &c.give_back,
        worker,
        &watched.iter().map(|id| id.0).collect::<Vec<i64>>(),
    )
    .fetch_all(executor)
    .await
    .map(|rows| {
        rows.into_iter()
            .map(|row| RecordedJob::new(row.id, row.whole, row.has_output))
            .collect()
    })
}

/// Records that the outcome of `worker`'s attempt could not be written (the database
/// refused it, e.g. an output it cannot store): the attempt counts as failed with that
/// error, `retryable` after the backoff or `discarded` when out of attempts, so the job
/// is neither stuck nor lost. Fenced like [`job_record_outcomes`]. Answers whether it
/// changed the job.
pub async fn job_record_unwritable(
    executor: impl PgExecutor<'_>,
    worker: &str,
    id: JobId,
    attempt: i16,
    error: &str,
    retry_base: Duration,
) -> Result<bool, sqlx::Error> {
    let result = sqlx::query!(
        r#"
        UPDATE jobs AS j
        SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'::job_state
                         WHEN j.attempt >= j.max_attempts THEN 'discarded'::job_state
                         ELSE 'retryable'::job_state END,
            errors = j.errors || jsonb_build_array(jsonb_build_object(
                         'attempt', j.attempt, 'at', now(), 'error', $4::text)),
            scheduled_at = now() + least($5 * power(j.attempt, 4) * (0.9 + random() * 0.2), $6)
                                   * interval '1 millisecond',
            finalized_at = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt >= j.max_attempts
                                THEN now() END,
            attempted_by = NULL,
            lease_expires_at = NULL
        WHERE j.id = $1 AND j.state = 'running' AND j.attempt = $2 AND j.attempted_by = $3
        "#,
        id.0,
        attempt,
        worker,
        clean_error(error),
        retry_base.as_millis() as f64,
        MAX_DELAY.as_millis() as f64,
    )
    .execute(executor)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// One attempt this process holds: the job and the attempt number it fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeldAttempt {
    pub id: JobId,
    pub attempt: i16,
}

/// What a lease renewal found about one held attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewed {
    pub id: JobId,
    /// An admin asked to cancel it (its notification may have been lost).
    pub cancel_requested: bool,
}

/// Renews the leases of exactly `held`, the attempts this process still has in flight
/// (running, or with an outcome not yet written), and only while each is still
/// `running` at that attempt under `worker`. Answers those it renewed; an attempt
/// missing from the answer is no longer this process's (rescued, cancelled, finished).
pub async fn job_renew_leases(
    pool: &PgPool,
    worker: &str,
    held: &[HeldAttempt],
    lease: Duration,
) -> Result<Vec<Renewed>, sqlx::Error> {
    let ids: Vec<i64> = held.iter().map(|h| h.id.0).collect();
    let attempts: Vec<i16> = held.iter().map(|h| h.attempt).collect();
    let rows = sqlx::query!(
        r#"
        UPDATE jobs AS j
        SET lease_expires_at = now() + $2 * interval '1 millisecond'
        FROM unnest($3::bigint[], $4::smallint[]) AS h(id, attempt)
        WHERE j.id = h.id AND j.attempt = h.attempt
          AND j.state = 'running' AND j.attempted_by = $1
        RETURNING j.id AS "id: JobId", j.cancel_requested_at IS NOT NULL AS "cancel_requested!"
        "#,
        worker,
        lease.as_millis() as f64,
        &ids,
        &attempts,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| Renewed {
            id: row.id,
            cancel_requested: row.cancel_requested,
        })
        .collect())
}

/// Makes up to `limit` due `scheduled` and `retryable` jobs `available` (a trigger
/// wakes their queues). Answers how many.
///
/// The picked ids reach the `UPDATE` as an array (`id = ANY(ARRAY(…))`), not as a
/// join: for a join the planner may hash the whole table, finished rows and all, on
/// every pass (measured: 38 ms instead of 9 ms to take 1,000 of 100,000 jobs), so the
/// cost would grow with the rows kept. The array makes it primary-key lookups. The
/// rescuer and the cleaner below do the same for the same reason.
pub async fn job_schedule_due(pool: &PgPool, limit: i64) -> Result<u64, sqlx::Error> {
    let result = sqlx::query!(
        r#"
        WITH due AS (
            SELECT id FROM jobs
            WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= now()
            ORDER BY scheduled_at
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE jobs SET state = 'available'
        WHERE id = ANY(ARRAY(SELECT id FROM due))
        "#,
        limit,
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// Takes back up to `limit` running jobs whose lease ran out (their process died or
/// lost the database): `cancelled` if an admin had asked, `discarded` when out of
/// attempts, else `retryable` after the backoff (`retry_base` × attempt⁴, ±10 %).
/// Safe to run in several processes at once. Answers how many.
pub async fn job_rescue_expired(
    pool: &PgPool,
    limit: i64,
    retry_base: Duration,
) -> Result<u64, sqlx::Error> {
    // The same backoff as `retry::backoff`, with the same cap.
    let result = sqlx::query!(
        r#"
        WITH lost AS (
            SELECT id FROM jobs
            WHERE state = 'running' AND lease_expires_at < now()
            ORDER BY lease_expires_at
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE jobs AS j
        SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'::job_state
                         WHEN j.attempt >= j.max_attempts THEN 'discarded'::job_state
                         ELSE 'retryable'::job_state END,
            errors = j.errors || jsonb_build_array(jsonb_build_object(
                'attempt', j.attempt, 'at', now(),
                'error', 'worker lost: ' || coalesce(j.attempted_by, 'unknown worker')
                         || ' stopped renewing its lease')),
            scheduled_at = CASE WHEN j.cancel_requested_at IS NULL AND j.attempt < j.max_attempts
                                THEN now() + least($2 * power(j.attempt, 4) * (0.9 + random() * 0.2), $3)
                                             * interval '1 millisecond'
                                ELSE j.scheduled_at END,
            finalized_at = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt >= j.max_attempts
                                THEN now() END,
            attempted_by = NULL,
            lease_expires_at = NULL
        WHERE j.id = ANY(ARRAY(SELECT id FROM lost))
        "#,
        limit,
        retry_base.as_millis() as f64,
        MAX_DELAY.as_millis() as f64,
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// Deletes finished jobs past their retention, looking at the `limit` oldest (by id)
/// of each finished state. Answers how many. Jobs finish roughly in id order, so the
/// oldest ids are the ones due; a straggler that finished late merely waits its turn,
/// and the walk never reads more than `limit` index entries per state.
pub async fn job_delete_finished(
    pool: &PgPool,
    keep_completed: Duration,
    keep_discarded: Duration,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    let result = sqlx::query!(
        r#"
        DELETE FROM jobs WHERE id = ANY(ARRAY(
            SELECT id FROM (
                (SELECT id, finalized_at, $1::float8 AS keep_ms FROM jobs
                 WHERE state = 'completed' ORDER BY id LIMIT $3)
                UNION ALL
                (SELECT id, finalized_at, $1::float8 AS keep_ms FROM jobs
                 WHERE state = 'cancelled' ORDER BY id LIMIT $3)
                UNION ALL
                (SELECT id, finalized_at, $2::float8 AS keep_ms FROM jobs
                 WHERE state = 'discarded' ORDER BY id LIMIT $3)
            ) AS oldest
            WHERE finalized_at < now() - keep_ms * interval '1 millisecond'
        ))
        "#,
        keep_completed.as_millis() as f64,
        keep_discarded.as_millis() as f64,
        limit,
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// The longest an operator's action (cancel, retry, delete) waits for a job's row: a
/// claim holds its jobs' rows for a moment, but a frozen process's claim holds them
/// until PostgreSQL ends it (up to a lease). The action answers within 2 s instead:
/// done, or SQLSTATE 55P03 (`lock_not_available`), which StandMeet answers with 409 and
/// words (see `error`).
pub const OPERATOR_LOCK_WAIT: Duration = Duration::from_secs(1);

/// Begins an operator's action with [`OPERATOR_LOCK_WAIT`] as its lock timeout.
async fn begin_operator_action(
    pool: &PgPool,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    pool.begin_with(format!(
        "BEGIN; SET LOCAL lock_timeout = {}",
        OPERATOR_LOCK_WAIT.as_millis()
    ))
    .await
}

/// What an admin's cancel did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It had not started: now `cancelled`.
    Cancelled,
    /// It is running: its holder was asked to stop the attempt.
    Requested,
    /// It had already finished, in this state.
    AlreadyFinal(JobState),
    NotFound,
}

/// Cancels a job: at once when it is not running, else by asking its holder (the row
/// records the request, and a notification reaches the holder now).
pub async fn job_cancel(pool: &PgPool, id: JobId) -> Result<CancelOutcome, sqlx::Error> {
    let mut tx = begin_operator_action(pool).await?;
    let current = sqlx::query_scalar!(
        r#"SELECT state AS "state: JobState" FROM jobs WHERE id = $1 FOR UPDATE"#,
        id.0
    )
    .fetch_optional(&mut *tx)
    .await?;
    let outcome = match current {
        None => CancelOutcome::NotFound,
        Some(state) if state.is_terminal() => CancelOutcome::AlreadyFinal(state),
        Some(JobState::Running) => {
            sqlx::query!(
                "UPDATE jobs SET cancel_requested_at = now() WHERE id = $1",
                id.0
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!(
                "SELECT pg_notify($1, $2)",
                super::channels::CANCEL,
                id.0.to_string()
            )
            .execute(&mut *tx)
            .await?;
            CancelOutcome::Requested
        }
        Some(_) => {
            sqlx::query!(
                r#"
                UPDATE jobs
                SET state = 'cancelled', finalized_at = now(),
                    errors = errors || jsonb_build_array(jsonb_build_object(
                        'attempt', attempt, 'at', now(), 'error', 'cancelled by an admin before it ran'))
                WHERE id = $1
                "#,
                id.0
            )
            .execute(&mut *tx)
            .await?;
            CancelOutcome::Cancelled
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

/// What an admin's retry did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetryOutcome {
    /// It is `available` again, with room for one more attempt.
    Retried,
    /// It is in a state a retry does not apply to.
    NotRetryable(JobState),
    NotFound,
}

/// Makes a `retryable`, `discarded` or `cancelled` job `available` now, with room for
/// at least one more attempt.
pub async fn job_retry(pool: &PgPool, id: JobId) -> Result<RetryOutcome, sqlx::Error> {
    let outcome = job_retry_many(pool, &[id]).await?;
    Ok(match outcome.unchanged.first() {
        None => RetryOutcome::Retried,
        Some((_, Some(state))) => RetryOutcome::NotRetryable(*state),
        Some((_, None)) => RetryOutcome::NotFound,
    })
}

/// What deleting a job did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// It has not finished (in this state); only finished jobs are deleted.
    NotFinished(JobState),
    NotFound,
}

/// Deletes job `id` if it is finished (completed, discarded, cancelled).
pub async fn job_delete(pool: &PgPool, id: JobId) -> Result<DeleteOutcome, sqlx::Error> {
    let outcome = job_delete_many(pool, &[id]).await?;
    Ok(match outcome.unchanged.first() {
        None => DeleteOutcome::Deleted,
        Some((_, Some(state))) => DeleteOutcome::NotFinished(*state),
        Some((_, None)) => DeleteOutcome::NotFound,
    })
}

/// What a bulk action did: the jobs it changed, and the others with the state that kept
/// them as they were (`None`: no such job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    pub changed: Vec<JobId>,
    pub unchanged: Vec<(JobId, Option<JobState>)>,
}

/// The states of `ids` other than `changed`, read in the bulk action's transaction.
async fn unchanged_among(
    tx: &mut PgConnection,
    ids: &[i64],
    changed: &[i64],
) -> Result<Vec<(JobId, Option<JobState>)>, sqlx::Error> {
    let others: Vec<i64> = ids
        .iter()
        .copied()
        .filter(|id| !changed.contains(id))
        .collect();
    let found = sqlx::query!(
        r#"SELECT id, state AS "state: JobState" FROM jobs WHERE id = ANY($1)"#,
        &others
    )
    .fetch_all(&mut *tx)
    .await?;
    Ok(others
        .into_iter()
        .map(|id| {
            let state = found.iter().find(|row| row.id == id).map(|row| row.state);
            (JobId(id), state)
        })
        .collect())
}

/// [`job_retry`] for many jobs, in one transaction.
pub async fn job_retry_many(pool: &PgPool, ids: &[JobId]) -> Result<BulkOutcome, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let mut tx = begin_operator_action(pool).await?;
    let changed = sqlx::query_scalar!(
        r#"
        UPDATE jobs
        SET state = 'available', scheduled_at = now(), finalized_at = NULL,
            max_attempts = greatest(max_attempts, attempt + 1),
            cancel_requested_at = NULL
        WHERE id = ANY($1) AND state IN ('retryable', 'discarded', 'cancelled')
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    let unchanged = unchanged_among(&mut tx, &ids, &changed).await?;
    tx.commit().await?;
    Ok(BulkOutcome {
        changed: changed.into_iter().map(JobId).collect(),
        unchanged,
    })
}

/// [`job_cancel`] for many jobs, in one transaction: those that have not started are
/// `cancelled` at once, the running ones' holders are asked to stop them.
pub async fn job_cancel_many(pool: &PgPool, ids: &[JobId]) -> Result<BulkOutcome, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let mut tx = begin_operator_action(pool).await?;
    let mut changed = sqlx::query_scalar!(
        r#"
        UPDATE jobs
        SET state = 'cancelled', finalized_at = now(),
            errors = errors || jsonb_build_array(jsonb_build_object(
                'attempt', attempt, 'at', now(), 'error', 'cancelled by an admin before it ran'))
        WHERE id = ANY($1) AND state IN ('available', 'scheduled', 'retryable')
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    let asked = sqlx::query_scalar!(
        r#"
        UPDATE jobs SET cancel_requested_at = now()
        WHERE id = ANY($1) AND state = 'running'
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query!(
        "SELECT pg_notify($1, id::text) FROM unnest($2::bigint[]) AS asked(id)",
        super::channels::CANCEL,
        &asked
    )
    .execute(&mut *tx)
    .await?;
    changed.extend(asked);
    let unchanged = unchanged_among(&mut tx, &ids, &changed).await?;
    tx.commit().await?;
    Ok(BulkOutcome {
        changed: changed.into_iter().map(JobId).collect(),
        unchanged,
    })
}

/// [`job_delete`] for many jobs, in one transaction: the finished ones go.
pub async fn job_delete_many(pool: &PgPool, ids: &[JobId]) -> Result<BulkOutcome, sqlx::Error> {
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let mut tx = begin_operator_action(pool).await?;
    let changed = sqlx::query_scalar!(
        r#"
        DELETE FROM jobs
        WHERE id = ANY($1) AND state IN ('completed', 'discarded', 'cancelled')
        RETURNING id
        "#,
        &ids
    )
    .fetch_all(&mut *tx)
    .await?;
    let unchanged = unchanged_among(&mut tx, &ids, &changed).await?;
    tx.commit().await?;
    Ok(BulkOutcome {
        changed: changed.into_iter().map(JobId).collect(),
        unchanged,
    })
}

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
/// the rows kept from before cost nothing (`tests/tasks.rs` checks the plan with a
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

/// One (queue, state) pair's figures, for the queues page.
#[derive(Clone, Debug)]
pub struct QueueStateCount {
    pub queue: String,
    pub state: JobState,
    pub count: i64,
    /// Of these, finished (`finalized_at`) in the last five minutes.
    pub finished_last_5m: i64,
    /// Seconds since the oldest of these became due (meaningful for `available`).
    pub oldest_due_age_s: Option<f64>,
}

/// How many jobs each queue has in each state, how many of them finished in the last
/// five minutes, and how long the oldest has been due: one pass over the table (the
/// finished rows are kept only for their retention, a day by default).
pub async fn queue_state_counts(pool: &PgPool) -> Result<Vec<QueueStateCount>, sqlx::Error> {
    sqlx::query_as!(
        QueueStateCount,
        r#"
        SELECT queue AS "queue!", state AS "state!: JobState", count(*) AS "count!",
               count(*) FILTER (WHERE finalized_at > now() - interval '5 minutes')
                   AS "finished_last_5m!",
               greatest(extract(epoch FROM now() - min(scheduled_at)), 0)::float8
                   AS oldest_due_age_s
        FROM jobs GROUP BY queue, state
        "#
    )
    .fetch_all(pool)
    .await
}

/// The paused queues, by name.
pub async fn queue_paused(pool: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT queue FROM job_queue_pauses ORDER BY queue")
        .fetch_all(pool)
        .await
}

/// Pauses `queue` (staying paused when it already was).
pub async fn queue_pause(pool: &PgPool, queue: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO job_queue_pauses (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING",
        queue
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Resumes `queue`, and in the same transaction wakes its producers in every process
/// (the insert channel), so that the jobs that waited run at once.
pub async fn queue_resume(pool: &PgPool, queue: &str) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query!("DELETE FROM job_queue_pauses WHERE queue = $1", queue)
        .execute(&mut *tx)
        .await?;
    sqlx::query!("SELECT pg_notify($1, $2)", super::channels::INSERT, queue)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
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

/// Says that `worker` is alive and runs `kinds` on `queues` (inserting its row the
/// first time). Renewed with the leases.
pub async fn worker_heartbeat(
    pool: &PgPool,
    worker: &str,
    kinds: &[String],
    queues: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"
        INSERT INTO job_workers (worker_id, kinds, queues) VALUES ($1, $2, $3)
        ON CONFLICT (worker_id) DO UPDATE
        SET kinds = EXCLUDED.kinds, queues = EXCLUDED.queues, heartbeat_at = now()
        "#,
        worker,
        kinds,
        queues,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Removes `worker`'s row: it stops.
pub async fn worker_remove(pool: &PgPool, worker: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM job_workers WHERE worker_id = $1", worker)
        .execute(pool)
        .await?;
    Ok(())
}

/// Forgets the processes silent for longer than `silent` (they died).
pub async fn worker_forget_silent(pool: &PgPool, silent: Duration) -> Result<u64, sqlx::Error> {
    let result = sqlx::query!(
        "DELETE FROM job_workers WHERE heartbeat_at < now() - $1 * interval '1 millisecond'",
        silent.as_millis() as f64,
    )
    .execute(pool)
    .await?;
    Ok(result.rows_affected())
}

/// The kinds some process that spoke within `live` has handlers for.
pub async fn worker_known_kinds(pool: &PgPool, live: Duration) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"
        SELECT DISTINCT unnest(kinds) AS "kind!" FROM job_workers
        WHERE heartbeat_at > now() - $1 * interval '1 millisecond'
        "#,
        live.as_millis() as f64,
    )
    .fetch_all(pool)
    .await
}
