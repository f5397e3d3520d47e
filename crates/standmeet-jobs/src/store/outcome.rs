//! Outcomes: what an attempt made of its job, written by a claim for the jobs it holds
//! by row lock ([`job_record_claimed`]) and by everyone else for jobs held by lease
//! ([`job_record_outcomes`]): the completer, a handler's own `complete_tx`, and an
//! outcome the database refused, recorded as a failed attempt. Both set the same
//! columns the same way, from the same columns of outcomes ([`OutcomeColumns`]), with
//! the one backoff (`job_backoff`, see [`Delay`]); they differ in how they find and
//! fence the row (a claim's row lock and `ctid`, or the lease's holder and attempt).

use std::time::Duration;

use sqlx::{PgConnection, PgExecutor};

use crate::{JobId, JobState};

use super::{ClaimedRows, HeldAttempt, JobRow, MAX_DELAY, max_delay_ms};

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
/// that the attempts are recorded and their trace gone in one commit, or neither, and
/// counts the jobs it finishes in the summaries of finished jobs ([`COUNTS_ITSELF`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn job_record_claimed(
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
    let row = sqlx::query!(
        r#"
        WITH untraced AS (DELETE FROM job_claims WHERE xid = $12::text::xid8),
        written AS (
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
            scheduled_at = CASE WHEN c.backoff_ms IS NOT NULL
                                THEN clock_timestamp() + job_backoff(c.attempt, c.backoff_ms, $13)
                                WHEN c.delay_ms IS NOT NULL
                                THEN clock_timestamp() + c.delay_ms * interval '1 millisecond'
                                ELSE j.scheduled_at END,
            finalized_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled')
                                THEN clock_timestamp() END
        FROM unnest($1::bigint[], $2::smallint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bool[],
                    $10::text[], $14::float8[])
             AS c(id, attempt, state, output, error, delay_ms, give_back, row_at, backoff_ms)
        WHERE j.ctid = c.row_at::tid AND j.id = c.id
          AND j.state = 'available' AND j.attempt = c.attempt - 1
          AND (SELECT set_config('standmeet.notifies_itself', 'on', true)
                      || set_config('standmeet.counts_itself', 'on', true)) IS NOT NULL
        RETURNING j.id, j.queue, j.kind, j.state, j.finalized_at,
                  -- pg_notify answers void, which `IS NULL` turns into a column.
                  CASE WHEN j.state IN ('completed', 'discarded', 'cancelled')
                       THEN pg_notify('standmeet_job_final', j.id::text) IS NULL END AS notified,
                  CASE WHEN j.id = ANY($11) THEN to_jsonb(j)::text END AS whole,
                  CASE WHEN j.id = ANY($11) THEN j.output IS NOT NULL END AS has_output
        ), minutes AS (
            INSERT INTO job_finished_minutes AS m (minute, queue, kind, state, writer, jobs)
            SELECT job_minute_bucket(date_trunc('minute', finalized_at)), queue, kind, state,
                   pg_backend_pid(), count(*)
            FROM written WHERE finalized_at IS NOT NULL GROUP BY 1, 2, 3, 4
            ON CONFLICT (minute, queue, kind, state, writer) DO UPDATE SET jobs = m.jobs + excluded.jobs
        ), blocks AS (
            INSERT INTO job_finished_blocks AS b (block, queue, kind, state, writer, jobs)
            SELECT job_block(id), queue, kind, state, pg_backend_pid(), count(*)::integer
            FROM written WHERE finalized_at IS NOT NULL GROUP BY 1, 2, 3, 4
            ON CONFLICT (block, queue, kind, state, writer) DO UPDATE SET jobs = b.jobs + excluded.jobs
        )
        -- One row of arrays, not a row per job: a row costs the client far more to
        -- read than an element. (`notified` is read so that no plan leaves it out.)
        SELECT coalesce(array_agg(w.id), '{}') AS "ids!",
               count(w.notified) AS "notified!",
               coalesce(array_agg(w.id) FILTER (WHERE w.whole IS NOT NULL), '{}') AS "watched!",
               coalesce(array_agg(w.whole) FILTER (WHERE w.whole IS NOT NULL), '{}') AS "wholes!",
               coalesce(array_agg(w.has_output) FILTER (WHERE w.whole IS NOT NULL), '{}')
                   AS "has_output!: Vec<Option<bool>>"
        FROM written w
        "#,
        &c.ids,
        &c.attempts,
        &c.states as &[&str],
        &c.outputs as &[Option<String>],
        &c.errors as &[Option<String>],
        &c.delays as &[Option<i64>],
        &c.give_back,
        worker,
        lease.as_millis() as f64,
        &rows as &[Option<&str>],
        &watched.iter().map(|id| id.0).collect::<Vec<i64>>(),
        trace,
        max_delay_ms(),
        &c.backoff_units as &[Option<f64>],
    )
    .fetch_one(tx)
    .await?;
    // The watched are few (none, mostly): their rows by id.
    let mut wholes: rustc_hash::FxHashMap<i64, (String, Option<bool>)> = row
        .watched
        .into_iter()
        .zip(row.wholes.into_iter().zip(row.has_output))
        .collect();
    Ok(row
        .ids
        .into_iter()
        .map(|id| match wholes.remove(&id) {
            Some((whole, has_output)) => RecordedJob::new(JobId(id), Some(whole), has_output),
            None => RecordedJob::new(JobId(id), None, None),
        })
        .collect())
}

/// How a statement of the engine keeps the summaries of finished jobs
/// (`job_finished_minutes`, `job_finished_blocks`; see their migration): it counts the
/// jobs it finishes (or, the cleaner, deletes) over its own `RETURNING`, with two
/// upserts in the same statement (what `job_summaries_add` does for the triggers,
/// written out: calling it from these statements cost the claim's write 3 % of the
/// bare limit and the one-job path 0.04 ms, a SQL-language function 0.4 ms; #50's
/// measure in docs/benchmarks.md), and sets this setting for its transaction, so
/// that the triggers that count every other change row by row stand aside. A
/// transaction that goes on after such a statement (a handler's, after `complete_tx`)
/// turns it off again ([`job_counts_by_trigger_again`]).
pub(super) const COUNTS_ITSELF: &str = "standmeet.counts_itself";

/// Turns [`COUNTS_ITSELF`] off for the rest of `tx`'s transaction: changes it makes
/// to jobs by other statements are counted by the triggers again.
pub(crate) async fn job_counts_by_trigger_again(tx: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT set_config($1, 'off', true)")
        .bind(COUNTS_ITSELF)
        .execute(tx)
        .await?;
    Ok(())
}

/// A job an outcome's write changed; whole when it was watched.
#[derive(Clone, Debug)]
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

/// What an attempt made of its job, as a claim's write and the completer record it
/// (see `retry::plan`).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The job.
    pub id: JobId,
    /// The attempt it ends.
    pub attempt: i16,
    /// The job's attempts in all (what an outcome that cannot be written becomes
    /// depends on it: see `retry::unwritable`).
    pub max_attempts: i16,
    /// The state it moves the job to.
    pub state: JobState,
    /// The output, for a completion.
    pub output: Option<OutputJson>,
    /// Appended to `errors` when present.
    pub error: Option<String>,
    /// When the job runs again, for a job that goes back to waiting.
    pub delay: Option<Delay>,
    /// The attempt is given back (`attempt - 1`): a snooze or a shutdown is not a try.
    pub give_back_attempt: bool,
}

/// A job's output as JSON text, serialized once from the handler's own value and
/// written as it is: never built as a `serde_json::Value` tree and printed again
/// (that tree and its printing were a tenth of the engine's CPU per no-op job,
/// #52 in docs/benchmarks.md).
#[derive(Clone, Debug)]
pub struct OutputJson(Box<serde_json::value::RawValue>);

impl OutputJson {
    /// `value` as JSON text (an error for what JSON cannot hold, e.g. a map with
    /// keys that are not strings).
    pub fn of<T: serde::Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(OutputJson)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

/// Equal when the texts are (what tests compare: both come from the same printer).
impl PartialEq for OutputJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

/// When a job that goes back to waiting runs again (`scheduled_at`, from the write).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Delay {
    /// After this long (at most [`MAX_DELAY`]): a handler's own delay, or a snooze.
    After(Duration),
    /// After the backoff of its attempt with this unit: `base × attempt⁴`, ±10 %, at
    /// most [`MAX_DELAY`]. Computed by the database's `job_backoff`, the one place the
    /// formula lives (the rescuer uses it too).
    Backoff {
        /// The backoff's unit.
        base: Duration,
    },
}

/// The longest error text kept per attempt (in characters): a whole feed or a stack of
/// causes helps nobody in the Tasks panel and bloats the row at every state change.
pub const MAX_ERROR_CHARS: usize = 2_000;

/// An error text as it can be stored: without NUL characters (PostgreSQL's text and
/// jsonb refuse them; a feed or a remote error may carry one) and at most
/// [`MAX_ERROR_CHARS`] characters, with an ellipsis when cut.
pub(super) fn clean_error(text: &str) -> String {
    let mut chars = text.chars().filter(|c| *c != '\0');
    let mut cleaned: String = chars.by_ref().take(MAX_ERROR_CHARS).collect();
    if chars.next().is_some() {
        cleaned.push('…');
    }
    cleaned
}

/// `output` as jsonb text, without NUL characters in strings and keys (jsonb refuses
/// them); a copy of the text in the usual case.
fn clean_json_text(output: &OutputJson) -> String {
    let text = output.as_str();
    if text.contains("\\u0000") {
        // Rare: only then is the text parsed, to drop the NULs where they are (the
        // text came from serde_json's printer, so it parses).
        serde_json::from_str::<serde_json::Value>(text)
            .map(|value| without_nul(&value).to_string())
            .unwrap_or_else(|_| text.to_owned())
    } else {
        text.to_owned()
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

/// Outcomes as the parallel arrays that `unnest` turns back into rows.
struct OutcomeColumns {
    ids: Vec<i64>,
    attempts: Vec<i16>,
    states: Vec<&'static str>,
    outputs: Vec<Option<String>>,
    errors: Vec<Option<String>>,
    delays: Vec<Option<i64>>,
    backoff_units: Vec<Option<f64>>,
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
            backoff_units: Vec::with_capacity(count),
            give_back: Vec::with_capacity(count),
        }
    }

    fn push_outcome(&mut self, o: &Outcome) {
        self.ids.push(o.id.0);
        self.attempts.push(o.attempt);
        self.states.push(o.state.as_str());
        self.outputs.push(o.output.as_ref().map(clean_json_text));
        self.errors.push(o.error.as_deref().map(clean_error));
        let (delay, backoff) = match o.delay {
            None => (None, None),
            Some(Delay::After(after)) => (Some(delay_millis(after)), None),
            Some(Delay::Backoff { base }) => (None, Some(base.as_millis() as f64)),
        };
        self.delays.push(delay);
        self.backoff_units.push(backoff);
        self.give_back.push(o.give_back_attempt);
    }

    /// An attempt that goes on: `running`, nothing else to write.
    fn push_running(&mut self, held: &HeldAttempt) {
        self.ids.push(held.id.0);
        self.attempts.push(held.attempt);
        self.states.push(JobState::Running.as_str());
        self.outputs.push(None);
        self.errors.push(None);
        self.delays.push(None);
        self.backoff_units.push(None);
        self.give_back.push(false);
    }
}

/// Writes many outcomes of `worker`'s attempts in one statement, each fenced: a job no
/// longer `running` at that attempt under `worker` (rescued, cancelled) is left alone.
/// The completer's batches, a handler's own `complete_tx` (in its transaction) and an
/// outcome the database refused (recorded as a failed attempt instead) all go through
/// it; a claim's write ([`job_record_claimed`]) sets the same columns the same way, for
/// jobs it holds by row lock instead of by lease. Times are the write's
/// (`clock_timestamp()`, as in a claim's write, whose transaction began long before:
/// a handler's transaction may have too). Only here can a cancel request be pending
/// (a job held by lease is `running`); a claim's jobs were `available`, which a cancel
/// ends at once, after waiting for the claim's row lock.
/// An admin's cancel that the attempt did not see wins over every outcome but a
/// completion (the work is done): a retry, a snooze, a discard (the handler's, or an
/// outcome the database refused on the last attempt) all end `cancelled`, as the
/// rescuer ends them (a promise of the engine: an admin's cancel of a running job
/// always ends it `cancelled`). Answers the jobs it changed, those of `watched` whole (as in
/// [`job_record_claimed`]). Counts the jobs it finishes in the summaries of finished
/// jobs, in the same statement ([`COUNTS_ITSELF`]).
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
        WITH written AS (
        UPDATE jobs AS j
        SET state = (CASE WHEN j.cancel_requested_at IS NOT NULL
                               AND c.state <> 'completed'
                          THEN 'cancelled' ELSE c.state END)::job_state,
            output = CASE WHEN c.output IS NULL THEN j.output ELSE c.output::jsonb END,
            errors = CASE WHEN c.error IS NULL THEN j.errors
                          ELSE j.errors || jsonb_build_array(jsonb_build_object(
                                   'attempt', c.attempt, 'at', clock_timestamp(), 'error', c.error)) END,
            scheduled_at = CASE WHEN j.cancel_requested_at IS NOT NULL THEN j.scheduled_at
                                WHEN c.backoff_ms IS NOT NULL
                                THEN clock_timestamp() + job_backoff(c.attempt, c.backoff_ms, $10)
                                WHEN c.delay_ms IS NOT NULL
                                THEN clock_timestamp() + c.delay_ms * interval '1 millisecond'
                                ELSE j.scheduled_at END,
            attempt = CASE WHEN c.give_back AND j.cancel_requested_at IS NULL
                           THEN greatest(j.attempt - 1, 0) ELSE j.attempt END,
            finalized_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled')
                                     OR j.cancel_requested_at IS NOT NULL THEN clock_timestamp() END,
            attempted_by = NULL,
            lease_expires_at = NULL
        FROM unnest($1::bigint[], $2::smallint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bool[],
                    $11::float8[])
             AS c(id, attempt, state, output, error, delay_ms, give_back, backoff_ms)
        WHERE j.id = c.id AND j.state = 'running' AND j.attempt = c.attempt AND j.attempted_by = $8
          AND (SELECT set_config('standmeet.counts_itself', 'on', true)) IS NOT NULL
        RETURNING j.id, j.queue, j.kind, j.state, j.finalized_at,
                  CASE WHEN j.id = ANY($9) THEN to_jsonb(j)::text END AS whole,
                  CASE WHEN j.id = ANY($9) THEN j.output IS NOT NULL END AS has_output
        ), minutes AS (
            INSERT INTO job_finished_minutes AS m (minute, queue, kind, state, writer, jobs)
            SELECT job_minute_bucket(date_trunc('minute', finalized_at)), queue, kind, state,
                   pg_backend_pid(), count(*)
            FROM written WHERE finalized_at IS NOT NULL GROUP BY 1, 2, 3, 4
            ON CONFLICT (minute, queue, kind, state, writer) DO UPDATE SET jobs = m.jobs + excluded.jobs
        ), blocks AS (
            INSERT INTO job_finished_blocks AS b (block, queue, kind, state, writer, jobs)
            SELECT job_block(id), queue, kind, state, pg_backend_pid(), count(*)::integer
            FROM written WHERE finalized_at IS NOT NULL GROUP BY 1, 2, 3, 4
            ON CONFLICT (block, queue, kind, state, writer) DO UPDATE SET jobs = b.jobs + excluded.jobs
        )
        SELECT w.id AS "id!: JobId", w.whole AS "whole?: String", w.has_output AS "has_output?: bool"
        FROM written w
        "#,
        &c.ids,
        &c.attempts,
        &c.states as &[&str],
        &c.outputs as &[Option<String>],
        &c.errors as &[Option<String>],
        &c.delays as &[Option<i64>],
        &c.give_back,
        worker,
        &watched.iter().map(|id| id.0).collect::<Vec<i64>>(),
        max_delay_ms(),
        &c.backoff_units as &[Option<f64>],
    )
    .fetch_all(executor)
    .await
    .map(|rows| {
        rows.into_iter()
            .map(|row| RecordedJob::new(row.id, row.whole, row.has_output))
            .collect()
    })
}
