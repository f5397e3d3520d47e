//! Claims: taking available jobs by row lock inside a transaction (the one pick of
//! jobs to run), the trace a claim leaves so that its attempts count even if its
//! process dies, and what becomes of a claim whose connection broke.

use rustc_hash::FxHashMap;
use std::time::Duration;

use sqlx::{PgConnection, PgExecutor, PgPool};

use crate::JobId;

use super::max_delay_ms;
use super::{FetchedJob, HeldAttempt};

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
pub(crate) async fn job_claim(
    tx: &mut PgConnection,
    queue: &str,
    limit: i64,
    kinds: &[String],
) -> Result<(Vec<FetchedJob>, ClaimedRows), sqlx::Error> {
    // `NOT IN (subquery)` is hashed once per claim; the traces of a queue are its
    // claims in flight (a few) and the dead ones not yet counted. The jobs come back
    // as one row of arrays, not a row each: a row costs the client far more to read
    // than an element. (Every aggregate reads the claimed rows in one pass, in their
    // order, so the arrays line up; the transaction's id is asked for only when there
    // are jobs, as asking gives an empty claim one.)
    let row = sqlx::query!(
        r#"
        WITH claimed AS (
            SELECT id, kind, args::text AS args, attempt + 1 AS attempt, max_attempts,
                   ctid::text AS row_at
            FROM jobs
            WHERE state = 'available' AND queue = $1 AND scheduled_at <= now()
              AND kind = ANY($3)
              AND NOT EXISTS (SELECT FROM job_queue_pauses p WHERE p.queue = $1)
              AND id NOT IN (SELECT unnest(c.jobs) FROM job_claims c WHERE c.queue = $1)
            ORDER BY priority, scheduled_at, id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        )
        SELECT coalesce(array_agg(id), '{}') AS "ids!",
               coalesce(array_agg(kind), '{}') AS "kinds!",
               coalesce(array_agg(args), '{}') AS "args!: Vec<String>",
               coalesce(array_agg(attempt), '{}') AS "attempts!: Vec<i16>",
               coalesce(array_agg(max_attempts), '{}') AS "max_attempts!",
               coalesce(array_agg(row_at), '{}') AS "rows_at!: Vec<String>",
               CASE WHEN count(*) > 0 THEN pg_current_xact_id()::text END AS xact
        FROM claimed
        "#,
        queue,
        limit,
        kinds,
    )
    .fetch_one(tx)
    .await?;
    let count = row.ids.len();
    let mut claimed = ClaimedRows {
        rows: FxHashMap::with_capacity_and_hasher(count, Default::default()),
        xact: row.xact.unwrap_or_default(),
    };
    let mut jobs = Vec::with_capacity(count);
    let columns = row
        .ids
        .into_iter()
        .zip(row.kinds)
        .zip(row.args)
        .zip(row.attempts)
        .zip(row.max_attempts)
        .zip(row.rows_at);
    for (((((id, kind), args), attempt), max_attempts), row_at) in columns {
        let id = JobId(id);
        claimed.rows.insert(id, row_at);
        jobs.push(FetchedJob {
            id,
            kind,
            args,
            attempt,
            max_attempts,
            // Read by `job_trace_contexts` when this process carries traces.
            trace_context: None,
        });
    }
    Ok((jobs, claimed))
}

/// Fills in the trace context stored with each of `jobs` (see `trace`), in the
/// transaction that claimed them. Asked only by a process that carries traces, so that
/// the claim's own statement ([`job_claim`]) is the same with traces off as it was
/// before there were any: one more statement per claim, not per job.
pub(crate) async fn job_trace_contexts(
    tx: &mut PgConnection,
    jobs: &mut [FetchedJob],
) -> Result<(), sqlx::Error> {
    let ids: Vec<i64> = jobs.iter().map(|job| job.id.0).collect();
    let stored = sqlx::query!(
        r#"
        SELECT id, trace_context AS "trace_context!" FROM jobs
        WHERE id = ANY($1) AND trace_context IS NOT NULL
        "#,
        &ids,
    )
    .fetch_all(tx)
    .await?;
    let mut by_id: FxHashMap<i64, String> = stored
        .into_iter()
        .map(|row| (row.id, row.trace_context))
        .collect();
    for job in jobs {
        job.trace_context = by_id.remove(&job.id.0);
    }
    Ok(())
}

/// Claims up to `limit` available jobs of `queue` (of `kinds`) in one statement of its
/// own, committed at once: each becomes `running` under `worker` with a `lease`, its
/// attempt counted, like a job a claim's write leaves running. The claim of a nearly
/// idle queue: one round trip where a claim by row lock ([`job_claim`]) takes four
/// (its `BEGIN`, the claim, the write, the commit) and a trace, which on a busy machine
/// is what the first job of a quiet queue waits for. Its jobs then finish like any
/// running job (the completer writes their outcomes; the rescuer takes back those
/// whose process died, counting the attempt). Picks as [`job_claim`] does (priority
/// order, known kinds, no paused queue, no job with a trace).
pub(crate) async fn job_claim_running(
    connection: &mut PgConnection,
    queue: &str,
    limit: i64,
    kinds: &[String],
    worker: &str,
    lease: Duration,
) -> Result<Vec<FetchedJob>, sqlx::Error> {
    sqlx::query_as!(
        FetchedJob,
        r#"
        UPDATE jobs AS j
        SET state = 'running', attempt = j.attempt + 1, attempted_at = now(),
            attempted_by = $4, lease_expires_at = now() + $5 * interval '1 millisecond',
            cancel_requested_at = NULL
        WHERE j.id = ANY(ARRAY(
            SELECT id FROM jobs
            WHERE state = 'available' AND queue = $1 AND scheduled_at <= now()
              AND kind = ANY($3)
              AND NOT EXISTS (SELECT FROM job_queue_pauses p WHERE p.queue = $1)
              AND id NOT IN (SELECT unnest(c.jobs) FROM job_claims c WHERE c.queue = $1)
            ORDER BY priority, scheduled_at, id
            LIMIT $2
            FOR UPDATE SKIP LOCKED))
          AND j.state = 'available'
        RETURNING j.id AS "id: JobId", j.kind, j.args::text AS "args!", j.attempt, j.max_attempts,
                  j.trace_context
        "#,
        queue,
        limit,
        kinds,
        worker,
        lease.as_millis() as f64,
    )
    .fetch_all(connection)
    .await
}

/// Leaves the trace of a claim (see the migration `job_claims`): the attempts it is
/// about to start, under its transaction's id `xact`, committed at once on a
/// connection other than the claim's. Until `lease` has passed only the claim's own
/// process settles these attempts; after it, if the claim's transaction did not commit,
/// the rescuer counts them.
pub(crate) async fn job_claim_trace(
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ClaimFate {
    /// It committed after all: its attempts are recorded.
    Committed,
    /// A second write of it (the transaction named) committed after all, though its
    /// answer was lost: that write's record stands.
    Rewritten(String),
    /// It did not commit, and its trace is ours again (deleted in the caller's
    /// transaction): the caller records the attempts itself, and must commit to keep
    /// the trace gone.
    Ours,
    /// It did not commit and its trace is gone: the rescuer counted its attempts.
    Counted,
}

/// Finds out, inside the caller's transaction, what became of the claim whose
/// transaction was `xact` and of its second writes tried so far (`rewrites`, their
/// transaction ids), and takes its trace back when none committed (see
/// [`ClaimFate`]). Deleting the trace first keeps the rescuer off its jobs while the
/// caller records them, and puts the caller in line behind a rescuer or an earlier
/// write still at it. Answers the fate and the caller's own transaction id (for the
/// next try to look up, should this one's answer be lost too).
///
/// A second write deletes the trace as it records the attempts: without the list of
/// them, one that committed unheard would leave the next try to find the trace gone
/// and the claim not committed, and to take that for the rescuer's work.
pub(crate) async fn job_claim_settle(
    tx: &mut PgConnection,
    xact: &str,
    rewrites: &[String],
) -> Result<(ClaimFate, String), sqlx::Error> {
    // The trace is deleted (waiting for whoever else holds it) before the statuses are
    // read: the select list is evaluated in order.
    let row = sqlx::query!(
        r#"
        WITH gone AS (DELETE FROM job_claims WHERE xid = $1::text::xid8 RETURNING 1)
        SELECT (SELECT count(*) FROM gone) AS "taken_back!",
               pg_xact_status($1::text::xid8) AS status,
               (SELECT r FROM unnest($2::text[]) AS r
                WHERE pg_xact_status(r::xid8) = 'committed' LIMIT 1) AS rewritten,
               pg_current_xact_id()::text AS "this_xact!"
        "#,
        xact,
        rewrites,
    )
    .fetch_one(tx)
    .await?;
    let fate = if row.status.as_deref() == Some("committed") {
        ClaimFate::Committed
    } else if let Some(rewrite) = row.rewritten {
        ClaimFate::Rewritten(rewrite)
    } else if row.taken_back > 0 {
        ClaimFate::Ours
    } else {
        ClaimFate::Counted
    };
    Ok((fate, row.this_xact))
}

/// Counts the attempts of up to `limit` dead claims: claims whose transaction is no
/// longer in progress and did not record them (their trace is still here), once their
/// lease ran out. Each such attempt failed because its process died (or lost the
/// database) during it: the job is `retryable` after the backoff (`job_backoff`, unit
/// `retry_base`, as everywhere), or `discarded` when that was its last attempt, with
/// an error entry that says so. A job that moved on meanwhile is left alone (fenced by
/// its state and attempt). Answers how many jobs it changed and how many discarded.
pub(crate) async fn job_count_dead_claims(
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
                                    THEN now() + job_backoff(s.attempt, $2, $3)
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
        max_delay_ms(),
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
pub(crate) struct ClaimedRows {
    pub(super) rows: FxHashMap<JobId, String>,
    /// The claim's transaction id (`pg_current_xact_id()`, as text): the key of its
    /// trace in `job_claims`. Empty when the claim took nothing.
    pub xact: String,
}

/// Claims again, inside `tx`, those of `attempts` whose jobs are still `available` at
/// the attempt before (a claim rolled back, or its connection broke; its trace, which
/// the caller took back with [`job_claim_settle`], kept every other claim off them), by
/// row lock like [`job_claim`]. Answers those it claimed.
pub(crate) async fn job_claim_again(
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

/// How a claim's transaction begins: `BEGIN` with `idle_limit` as its idle timeout, so
/// that PostgreSQL ends the transaction of a process that stopped answering. Sent as
/// simple text (no parameters) in the round trip of the `BEGIN` itself.
pub(crate) fn job_claim_begin_sql(idle_limit: Duration) -> String {
    format!(
        "BEGIN; SET LOCAL idle_in_transaction_session_timeout = {}",
        idle_limit.as_millis().max(1)
    )
}

/// How long a claim waits for its slot before it goes ahead without it: far longer
/// than a claim holds one (its window and a write, and a new process's first claims
/// open their connections too: at 250 ms two fresh engines' claims overlapped), far
/// shorter than a stuck holder could hold up the queue. (A frozen process keeps its
/// slot until PostgreSQL ends its idle transaction, a lease later at most.)
pub const SLOT_WAIT: Duration = Duration::from_secs(1);

/// What begins a claim's transaction (`begin`: see [`job_claim_begin_sql`]) holding one
/// of the claim slots of `queue` (there are `slots`; transaction-scoped advisory
/// locks): the claims of a queue open at once are counted across every process on the
/// database, not per process, so that N
/// processes give PostgreSQL no more claims to juggle at once than one. (Each claim
/// open beside another makes it skip its locked rows and contend for the same index
/// pages: without this, four processes drained a sixth slower than one; README
/// "Benchmarks".) The claim takes the first free slot; when all are taken it waits
/// for slot `mine`, up to [`SLOT_WAIT`], then goes ahead without one (the SQL
/// function `standmeet_claim_slot`, whose migration says why it is one). Simple text,
/// one round trip like a plain `BEGIN`.
pub(crate) fn job_claim_begin_in_slot_sql(
    begin: &str,
    queue: &str,
    slots: usize,
    mine: usize,
) -> String {
    // The statement goes as simple text, without parameters (that is what makes it
    // one round trip with the `BEGIN`): integers, and the queue's name (for the
    // warning) only when it needs no quoting.
    let name = if queue
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        queue
    } else {
        "(unnamed)"
    };
    format!(
        "{begin}; SELECT standmeet_claim_slot('{name}', {key}, {slots}, {mine}, {wait})",
        key = slot_lock_key(queue),
        slots = slots.max(1),
        wait = SLOT_WAIT.as_millis(),
    )
}

/// The first half of a queue's claim-slot advisory locks: a stable hash (FNV-1a) of
/// the queue's name, so that every process, whatever its build, agrees on it.
pub fn slot_lock_key(queue: &str) -> i32 {
    let hash = b"standmeet.claim:"
        .iter()
        .copied()
        .chain(queue.bytes())
        .fold(0x811c_9dc5_u32, |hash, byte| {
            (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
        });
    hash as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::Noop;
    use sqlx::PgPool;

    /// A claim of one job whose own transaction ended without committing (its
    /// connection broke): its trace is left, under its transaction's id.
    async fn a_claim_that_did_not_commit(pool: &PgPool) -> String {
        crate::JobClient::new(pool.clone(), 1)
            .insert::<Noop>(&serde_json::json!({}))
            .await
            .unwrap();
        let mut claim = pool.begin().await.unwrap();
        let kinds = ["system.noop".to_string()];
        let (jobs, rows) = job_claim(&mut claim, "default", 10, &kinds).await.unwrap();
        assert_eq!(jobs.len(), 1);
        let attempts: Vec<HeldAttempt> = jobs.iter().map(FetchedJob::attempt_held).collect();
        job_claim_trace(
            pool,
            &rows.xact,
            "default",
            "here",
            &attempts,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        claim.rollback().await.unwrap();
        rows.xact
    }

    async fn settle(pool: &PgPool, xact: &str, rewrites: &[String]) -> (ClaimFate, String) {
        let mut tx = pool.begin().await.unwrap();
        let settled = job_claim_settle(&mut tx, xact, rewrites).await.unwrap();
        tx.rollback().await.unwrap();
        settled
    }

    #[sqlx::test]
    async fn a_second_write_that_committed_unheard_is_found_by_the_next_try(pool: PgPool) {
        let claim = a_claim_that_did_not_commit(&pool).await;

        // A second write that rolls back leaves the trace for the next try.
        let (fate, rolled_back) = settle(&pool, &claim, &[]).await;
        assert_eq!(fate, ClaimFate::Ours);
        assert_eq!(
            settle(&pool, &claim, std::slice::from_ref(&rolled_back))
                .await
                .0,
            ClaimFate::Ours
        );

        // One that commits (its answer lost on the way back: the primary failed).
        let mut second = pool.begin().await.unwrap();
        let (fate, committed) =
            job_claim_settle(&mut second, &claim, std::slice::from_ref(&rolled_back))
                .await
                .unwrap();
        assert_eq!(fate, ClaimFate::Ours);
        second.commit().await.unwrap();

        // The next try, told of both, finds the one that committed; without the list it
        // would take the missing trace for the rescuer's work.
        assert_eq!(
            settle(&pool, &claim, &[rolled_back, committed.clone()])
                .await
                .0,
            ClaimFate::Rewritten(committed)
        );
        assert_eq!(settle(&pool, &claim, &[]).await.0, ClaimFate::Counted);
    }
}
