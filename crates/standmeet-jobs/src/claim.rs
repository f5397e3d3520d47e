//! A claim: a batch of jobs that run while the transaction that took them is still
//! open, so that a quick job's whole life after its insert is one row version and one
//! commit.
//!
//! A producer claims jobs by row lock ([`store::job_claim`]: `FOR UPDATE SKIP LOCKED`,
//! nothing written) and starts their attempts. The claim then waits, up to
//! `EngineConfig::claim_window`, for the attempts to end, and
//! writes in the same transaction, in one statement ([`store::job_record_claimed`]):
//! the outcome of each attempt that ended, and `running` with a lease for each one
//! still going, which the completer finishes later like any other. A drain of quick
//! jobs so writes one row version per job instead of two (`running`, then the
//! outcome), with one commit instead of two, and a waiter hears of its job one commit
//! sooner.
//!
//! What holds it together:
//! - Until the commit, the database still says `available`, and every other
//!   statement's snapshot says so too. So nothing that needs the job `running` may
//!   reach the database before the commit: an outcome that arrives while the claim is
//!   being written waits and goes to the completer after it; a handler's
//!   [`complete_tx`](super::JobContext::complete_tx) asks the claim to commit at once
//!   and waits for it; the lease renewal learns of the still-running attempts only
//!   after the commit.
//! - An attempt that started counts, whatever ends it. Before any handler runs, the
//!   claim leaves a trace ([`store::job_claim_trace`]: one row for the whole batch,
//!   committed at once on another connection) that its write deletes in the same
//!   commit as the outcomes. A process that dies before the commit (a handler that
//!   aborts it, the OOM killer) leaves the trace behind: its transaction ends with its
//!   connection and the jobs are `available` again, but no claim takes them while the
//!   trace is there, and once the lease ran out the rescuer counts each attempt as a
//!   failed one ([`store::job_count_dead_claims`]). A job that kills its process is so
//!   `discarded` after `max_attempts` deaths instead of killing every process forever.
//! - A claim never holds its jobs longer than the lease, however its holder fails: its
//!   transaction carries `idle_in_transaction_session_timeout`, so PostgreSQL ends the
//!   claim of a frozen or cut-off process by itself, and its locks and slot go.
//! - A claim whose write fails keeps what it knows: the write is tried again in a new
//!   transaction ([`rewrite`]) that first takes the trace back (so no rescuer counts
//!   the attempts meanwhile, and nobody else claims the jobs), claims the jobs again
//!   by id and records the ended attempts and the running ones, for up to the lease.
//!   Should the rescuer have counted them already, the attempts still running stop and
//!   write nothing.
//! - An outcome the database refuses (bad data, a broken constraint, a limit) must not
//!   undo the others, nor come back forever: the claim is rolled back, its jobs are
//!   claimed again by id and written `running`, and the completer writes the outcomes,
//!   a refused one as a failed attempt (see `completer`).
//!
//! A claim holds one of its queue's claim slots while open (an advisory lock taken
//! with its `BEGIN`; see [`open`]), so that the claims open at once are counted for the
//! whole database, however many processes run the queue.

use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::{Notify, mpsc, watch};

use super::JobId;
use super::kept::{ClaimTransaction, KeptConnections};
use super::listener::{Signals, StopReason};
use super::store::{self, ClaimFate, ClaimedRows, FetchedJob, HeldAttempt, Outcome, RecordedJob};
use super::try_again::TryAgain;

/// Where the claim is in its life.
enum Stage {
    /// The attempts are running; those that end leave their outcome here and leave
    /// `unfinished` (job → attempt number).
    Collecting {
        ended: Vec<Outcome>,
        unfinished: FxHashMap<JobId, i16>,
    },
    /// The claim is being written; outcomes that arrive now wait for the commit, and
    /// the attempts that end with nothing to write are noted in `quiet`: they are not
    /// to be held once it is written (nothing would ever release them).
    Writing {
        late: Vec<Outcome>,
        quiet: Vec<HeldAttempt>,
    },
    /// Written: outcomes go to the completer.
    Written,
    /// The write failed: the jobs are `available` again; outcomes are dropped.
    Failed,
}

/// One claim: its stage, and who waits on it.
pub(crate) struct Claim {
    stage: Mutex<Stage>,
    /// Wakes the claim: every attempt ended, or a handler needs its job `running`.
    wake: Notify,
    /// A handler asked for the commit now (`complete_tx`).
    hurry: std::sync::atomic::AtomicBool,
    /// `None` until written; then whether the write committed.
    written: watch::Sender<Option<bool>>,
    /// Where the claimed rows lie, for the write.
    rows: ClaimedRows,
    /// Which claim this is in the process (see `RunningJob::claim`): the claim stops
    /// its own attempt of a job and no other (another attempt of the same job can run
    /// here, even under the same number, once a lost write let the job go).
    pub(crate) serial: u64,
    /// The attempts this claim put in the process's held set (see [`hand_over_late`]),
    /// which it releases when one of them ends with nothing to write.
    held: Mutex<FxHashSet<HeldAttempt>>,
}

impl Claim {
    fn new(jobs: &[FetchedJob], rows: ClaimedRows) -> Arc<Claim> {
        Arc::new(Claim {
            stage: Mutex::new(Stage::Collecting {
                ended: Vec::new(),
                unfinished: jobs.iter().map(|job| (job.id, job.attempt)).collect(),
            }),
            wake: Notify::new(),
            hurry: std::sync::atomic::AtomicBool::new(false),
            written: watch::channel(None).0,
            rows,
            serial: CLAIM_SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            held: Mutex::new(FxHashSet::default()),
        })
    }

    /// Moves the claim to its write: answers the outcomes of the attempts that ended
    /// and the attempts still going (job → attempt number).
    fn start_writing(&self) -> (Vec<Outcome>, FxHashMap<JobId, i16>) {
        let mut stage = self.stage.lock().expect("not poisoned");
        let writing = Stage::Writing {
            late: Vec::new(),
            quiet: Vec::new(),
        };
        match std::mem::replace(&mut *stage, writing) {
            Stage::Collecting { ended, unfinished } => (ended, unfinished),
            _ => unreachable!("only `finish` moves a claim past collecting, once"),
        }
    }

    /// Attempt `attempt` of job `id` in this claim ended with `outcome` (`None`:
    /// nothing to write, e.g. the handler completed the job in its own transaction, or
    /// the attempt was stopped because the job is no longer this process's). Before the
    /// write the outcome is kept for it; after, it goes to the completer, which releases
    /// the attempt once written. An attempt with nothing to write is released here, and
    /// only if this claim holds it: released before the claim's write held it, it would
    /// be held (and its lease renewed) forever.
    pub(crate) async fn attempt_ended(
        &self,
        id: JobId,
        attempt: i16,
        outcome: Option<Outcome>,
        signals: &Signals,
        completer: &mpsc::Sender<Outcome>,
    ) {
        let this = HeldAttempt { id, attempt };
        let forward = {
            let mut stage = self.stage.lock().expect("not poisoned");
            match &mut *stage {
                Stage::Collecting { ended, unfinished } => {
                    ended.extend(outcome);
                    unfinished.remove(&id);
                    if unfinished.is_empty() {
                        self.wake.notify_one();
                    }
                    None
                }
                Stage::Writing { late, quiet } => {
                    match outcome {
                        Some(outcome) => late.push(outcome),
                        None => quiet.push(this),
                    }
                    None
                }
                Stage::Written => {
                    if outcome.is_none() && self.held.lock().expect("not poisoned").remove(&this) {
                        signals.release(id, attempt);
                    }
                    outcome
                }
                Stage::Failed => None,
            }
        };
        if let Some(outcome) = forward {
            // Fails only when the completer is gone, i.e. never before we are.
            let _ = completer.send(outcome).await;
        }
    }

    /// For a handler about to complete its job in its own transaction, which needs the
    /// job `running`: asks for the commit now and waits for it. Answers whether the job
    /// is `running` under this process now.
    pub(crate) async fn until_written(&self) -> bool {
        self.hurry.store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify_one();
        let mut written = self.written.subscribe();
        match written.wait_for(Option::is_some).await {
            Ok(result) => result.unwrap_or(false),
            Err(_) => false,
        }
    }
}

/// Numbers the claims of this process (`Claim::serial`).
static CLAIM_SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// What a claim needs to write itself.
pub(crate) struct ClaimContext {
    /// Where claims open their transactions (and a second write its own): the pool's
    /// connections, kept between claims (see `kept`).
    pub pool: PgPool,
    pub claims: KeptConnections,
    /// Connections of the engine's own pool (see `Engine::start`), where a claim's
    /// trace is committed while its transaction stays open; one is kept.
    pub traces: KeptConnections,
    pub signals: Arc<Signals>,
    pub worker_id: Arc<str>,
    pub lease: Duration,
    /// How long the claim waits for its attempts before it writes the rest `running`.
    pub window: Duration,
}

/// Opens a transaction holding one of the queue's `slots` claim slots (waiting for
/// slot `mine` when all are taken; see `store::job_claim_begin_in_slot`), claims up to `limit` jobs of
/// `queue` in it and leaves the claim's trace, so that the attempts about to start
/// count whatever becomes of this process. `None` when there were none (the
/// transaction is closed again, and the slot free). Without its trace a claim does not
/// start: it is rolled back and the error answered.
pub(crate) async fn open(
    context: &ClaimContext,
    queue: &str,
    slots: usize,
    mine: usize,
    limit: i64,
    kinds: &[String],
) -> Result<Option<(ClaimTransaction, Vec<FetchedJob>, Arc<Claim>)>, sqlx::Error> {
    let begin = store::job_claim_begin_in_slot_sql(&context.begin_sql(), queue, slots, mine);
    let mut tx = ClaimTransaction::begin(context.claims.take().await?, &begin).await?;
    let (mut jobs, rows) = store::job_claim(&mut tx, queue, limit, kinds).await?;
    if jobs.is_empty() {
        // The queue is empty: its connections go back to the pool until there is work
        // again (see `kept`).
        drop(tx.rollback().await?);
        context.claims.let_go();
        return Ok(None);
    }
    if crate::trace::traces().is_some()
        && let Err(err) = store::job_trace_contexts(&mut tx, &mut jobs).await
    {
        let _ = tx.rollback().await;
        return Err(err);
    }
    let attempts: Vec<HeldAttempt> = jobs.iter().map(FetchedJob::attempt_held).collect();
    let mut trace_connection = match context.traces.take().await {
        Ok(connection) => connection,
        Err(err) => {
            let _ = tx.rollback().await;
            return Err(err);
        }
    };
    if let Err(err) = store::job_claim_trace(
        &mut *trace_connection,
        &rows.xact,
        queue,
        &context.worker_id,
        &attempts,
        // Its window, then a lease for this process to write the claim again should
        // its connection break (see `write`).
        context.window + context.lease,
    )
    .await
    {
        // Nothing ran: the jobs go back as they were (and the trace's connection to
        // the pool, which tries it).
        let _ = tx.rollback().await;
        return Err(err);
    }
    context.traces.keep(trace_connection);
    let claim = Claim::new(&jobs, rows);
    Ok(Some((tx, jobs, claim)))
}

/// Takes up to `limit` jobs of a nearly idle queue in one call, `running` under a lease
/// from the start ([`store::job_claim_running`]), and holds their attempts in this
/// process: they run outside any claim, and the completer writes their outcomes.
pub(crate) async fn take_running(
    context: &ClaimContext,
    queue: &str,
    limit: i64,
    kinds: &[String],
) -> Result<Vec<FetchedJob>, sqlx::Error> {
    let mut connection = context.claims.take().await?;
    let jobs = store::job_claim_running(
        &mut connection,
        queue,
        limit,
        kinds,
        &context.worker_id,
        context.lease,
    )
    .await?;
    context.claims.keep(connection);
    context
        .signals
        .hold(jobs.iter().map(FetchedJob::attempt_held));
    Ok(jobs)
}

impl ClaimContext {
    /// How long a claim's transaction may sit idle before PostgreSQL ends it: the
    /// lease (a claim idles for its window, 20 ms, and never longer on purpose), or
    /// twice a longer window.
    fn idle_limit(&self) -> Duration {
        self.lease.max(self.window * 2)
    }

    /// How a claim's transaction begins (the first write's and a second's alike):
    /// with [`ClaimContext::idle_limit`] as its idle timeout.
    fn begin_sql(&self) -> String {
        store::job_claim_begin_sql(self.idle_limit())
    }
}

/// Waits for the claim's attempts (up to the window, or until a handler hurries it),
/// writes what became of its jobs and commits, then hands the late outcomes to the
/// completer.
pub(crate) async fn finish(
    tx: ClaimTransaction,
    claim: Arc<Claim>,
    context: Arc<ClaimContext>,
    completer: mpsc::Sender<Outcome>,
) {
    let deadline = tokio::time::Instant::now() + context.window;
    loop {
        let all_ended = matches!(
            &*claim.stage.lock().expect("not poisoned"),
            Stage::Collecting { unfinished, .. } if unfinished.is_empty()
        );
        if all_ended || claim.hurry.load(std::sync::atomic::Ordering::Acquire) {
            break;
        }
        tokio::select! {
            _ = claim.wake.notified() => {}
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }

    let (ended, unfinished) = claim.start_writing();
    let still_running: Vec<HeldAttempt> = unfinished
        .into_iter()
        .map(|(id, attempt)| HeldAttempt { id, attempt })
        .collect();

    // The finished jobs somebody here waits for come back whole from the write, for
    // their waiters to have their answer without a query.
    let rows_coming = context
        .signals
        .waiters
        .rows_coming(ended.iter().filter(|o| o.state.is_terminal()).map(|o| o.id));
    let watched = rows_coming.watched();
    let result = write(tx, &context, &ended, &still_running, &claim.rows, watched).await;
    match result {
        Ok(written) => {
            context.signals.add_recorded(written.recorded as u64);
            match written.rows {
                Some(rows) => rows_coming.done(rows, &ended),
                // Not the claim's own write: the notification tells of these jobs.
                None => drop(rows_coming),
            }
            let ours: HashSet<HeldAttempt> = written.running.iter().copied().collect();
            // Taken back meanwhile (counted by the rescuer, cancelled): whoever holds the
            // job now decides; ours stops and writes nothing.
            for held in still_running.iter().filter(|held| !ours.contains(held)) {
                context
                    .signals
                    .stop_in_claim(held.id, claim.serial, StopReason::LeaseLost);
            }
            hand_over_late(
                &claim,
                &written.running,
                &context.signals,
                written.for_completer,
                &completer,
            )
            .await;
        }
        Err(err) => {
            drop(rows_coming);
            tracing::warn!(error = %err, jobs = ended.len() + still_running.len(), "gave up writing a claim of jobs; the rescuer counts their attempts when the lease runs out");
            *claim.stage.lock().expect("not poisoned") = Stage::Failed;
            claim.written.send_replace(Some(false));
            for held in &still_running {
                context
                    .signals
                    .stop_in_claim(held.id, claim.serial, StopReason::LeaseLost);
            }
        }
    }
}

/// What a claim's write came to.
#[derive(Clone)]
struct Written {
    /// The attempts now `running` under this process (its still-running ones, and, when
    /// the completer writes the outcomes, the ended ones until it has).
    running: Vec<HeldAttempt>,
    /// How many ended attempts it recorded.
    recorded: usize,
    /// The jobs the claim's own write changed (the watched ones whole); `None` when
    /// another transaction wrote them.
    rows: Option<Vec<RecordedJob>>,
    /// Outcomes left to the completer (the database refused one of the batch).
    for_completer: Vec<Outcome>,
}

/// Writes the claim, its outcomes and its still-running attempts in one statement
/// (which also deletes its trace), and commits. Should that fail, the write is done
/// again in a new transaction ([`rewrite`]): the whole of it after a passing error (a
/// broken connection), for up to a lease; only `running` after a refusal (bad data, a
/// broken constraint, a limit), the outcomes then going to the completer, which writes
/// one the database refuses as a failed attempt. An error is answered only when the
/// write could not be done in time: the rescuer counts the attempts then.
async fn write(
    mut tx: ClaimTransaction,
    context: &ClaimContext,
    ended: &[Outcome],
    still_running: &[HeldAttempt],
    rows: &ClaimedRows,
    watched: &[JobId],
) -> Result<Written, sqlx::Error> {
    let first = match store::job_record_claimed(
        &mut tx,
        &context.worker_id,
        context.lease,
        ended,
        still_running,
        rows,
        watched,
        Some(&rows.xact),
    )
    .await
    {
        Ok(written) => match tx.commit().await {
            Ok(connection) => {
                context.claims.keep(connection);
                return Ok(Written {
                    running: still_running.to_vec(),
                    recorded: ended.len(),
                    rows: Some(written),
                    for_completer: Vec::new(),
                });
            }
            Err(err) => err,
        },
        Err(err) => {
            // The locks must go before another transaction claims the jobs again (on a
            // broken connection this fails, and the locks went with it).
            let _ = tx.rollback().await;
            err
        }
    };
    let mut running_only = store::refused_for_good(&first);
    if running_only {
        tracing::warn!(error = %first, jobs = ended.len(), "the database refused an outcome in a claim; the completer writes them");
    } else {
        tracing::warn!(error = %first, jobs = ended.len() + still_running.len(), "cannot write a claim of jobs; writing it again");
    }
    let mut again = TryAgain::until(tokio::time::Instant::now() + context.lease);
    // Each second write tried so far, by its transaction id, with what it would have
    // come to: one whose commit went through but whose answer was lost (the primary
    // failed in between) is found by the next one, and its result stands.
    let mut tried: Vec<Rewrite> = Vec::new();
    loop {
        match rewrite(
            context,
            &rows.xact,
            &mut tried,
            ended,
            still_running,
            running_only,
        )
        .await
        {
            Ok(written) => return Ok(written),
            Err(err) if store::refused_for_good(&err) && !running_only => {
                tracing::warn!(error = %err, jobs = ended.len(), "the database refused an outcome in a claim; the completer writes them");
                running_only = true;
            }
            Err(err) => {
                let Some(pause) = again.next_pause() else {
                    return Err(err);
                };
                tracing::warn!(error = %err, retry_in = ?pause, "cannot write a claim of jobs; trying again");
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// The claim's write done again in a transaction of its own, after the claim's own
/// transaction ended without our knowing how: takes its trace back (or learns that it
/// committed after all, or that the rescuer counted its attempts), claims its jobs
/// again by id, and records the ended attempts and the running ones, or with
/// `running_only` writes them all `running` and leaves the outcomes to the completer.
///
/// `tried` holds the earlier tries; this one adds itself before it commits.
async fn rewrite(
    context: &ClaimContext,
    xact: &str,
    tried: &mut Vec<Rewrite>,
    ended: &[Outcome],
    still_running: &[HeldAttempt],
    running_only: bool,
) -> Result<Written, sqlx::Error> {
    let mut tx = context.pool.begin_with(context.begin_sql()).await?;
    let earlier: Vec<String> = tried.iter().map(|rewrite| rewrite.xact.clone()).collect();
    let (fate, this_xact) = store::job_claim_settle(&mut tx, xact, &earlier).await?;
    match fate {
        ClaimFate::Rewritten(xact) => {
            tx.rollback().await?;
            let committed = tried
                .iter()
                .find(|rewrite| rewrite.xact == xact)
                .expect("the settle answers one of the ids it was given");
            return Ok(committed.written.clone());
        }
        ClaimFate::Ours => {}
        ClaimFate::Committed => {
            tx.rollback().await?;
            return Ok(Written {
                running: still_running.to_vec(),
                recorded: ended.len(),
                rows: None,
                for_completer: Vec::new(),
            });
        }
        ClaimFate::Counted => {
            tx.rollback().await?;
            tracing::warn!(
                jobs = ended.len() + still_running.len(),
                "a claim's attempts were counted by the rescuer before this process could write them"
            );
            return Ok(Written {
                running: Vec::new(),
                recorded: 0,
                rows: None,
                for_completer: Vec::new(),
            });
        }
    }
    let everything: Vec<HeldAttempt> = ended
        .iter()
        .map(|o| HeldAttempt {
            id: o.id,
            attempt: o.attempt,
        })
        .chain(still_running.iter().copied())
        .collect();
    let (ours, rows) = store::job_claim_again(&mut tx, &everything).await?;
    let ours: HashSet<HeldAttempt> = ours.into_iter().collect();
    let ended_ours: Vec<Outcome> = ended
        .iter()
        .filter(|o| {
            ours.contains(&HeldAttempt {
                id: o.id,
                attempt: o.attempt,
            })
        })
        .cloned()
        .collect();
    let (outcomes, running, for_completer): (Vec<Outcome>, Vec<HeldAttempt>, Vec<Outcome>) =
        if running_only {
            (Vec::new(), ours.iter().copied().collect(), ended_ours)
        } else {
            let running = still_running
                .iter()
                .filter(|held| ours.contains(held))
                .copied()
                .collect();
            (ended_ours, running, Vec::new())
        };
    store::job_record_claimed(
        &mut tx,
        &context.worker_id,
        context.lease,
        &outcomes,
        &running,
        &rows,
        &[],
        None,
    )
    .await?;
    let written = Written {
        running,
        recorded: outcomes.len(),
        rows: None,
        for_completer,
    };
    tried.push(Rewrite {
        xact: this_xact,
        written: written.clone(),
    });
    tx.commit().await?;
    Ok(written)
}

/// A second write of a claim as tried: its transaction, and what the claim's write came
/// to should this try be the one that committed.
struct Rewrite {
    xact: String,
    written: Written,
}

/// After the commit: holds the attempts the write left `running` under this process
/// (its lease is renewed from now on) but those that ended meanwhile with nothing to
/// write, says so to whoever waits for it, and hands `first` and the outcomes that
/// arrived during the write to the completer (which releases them once written).
/// Holding and leaving the writing stage happen under one lock, so that an attempt
/// ends either before (noted, not held) or after (released by `attempt_ended`).
async fn hand_over_late(
    claim: &Claim,
    running: &[HeldAttempt],
    signals: &Signals,
    first: Vec<Outcome>,
    completer: &mpsc::Sender<Outcome>,
) {
    let late = {
        let mut stage = claim.stage.lock().expect("not poisoned");
        let (late, quiet) = match std::mem::replace(&mut *stage, Stage::Written) {
            Stage::Writing { late, quiet } => (late, quiet),
            _ => (Vec::new(), Vec::new()),
        };
        let mut held = claim.held.lock().expect("not poisoned");
        held.extend(running.iter().filter(|attempt| !quiet.contains(attempt)));
        signals.hold(held.iter().copied());
        late
    };
    claim.written.send_replace(Some(true));
    for outcome in first.into_iter().chain(late) {
        // Fails only when the completer is gone, i.e. never before we are.
        let _ = completer.send(outcome).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_of(id: i64) -> Arc<Claim> {
        let job = FetchedJob {
            id: JobId(id),
            kind: "system.noop".into(),
            args: "{}".to_string(),
            attempt: 1,
            max_attempts: 3,
            trace_context: None,
        };
        Claim::new(&[job], ClaimedRows::default())
    }

    fn attempt_of(id: i64) -> HeldAttempt {
        HeldAttempt {
            id: JobId(id),
            attempt: 1,
        }
    }

    #[tokio::test]
    async fn an_attempt_that_ends_with_nothing_to_write_while_its_claim_is_written_is_not_held() {
        let signals = Signals::new(8);
        let (completer, _outcomes) = mpsc::channel(8);
        let claim = claim_of(7);
        let _ = claim.start_writing();
        // Stopped (the job is no longer this process's) while the write is under way.
        claim
            .attempt_ended(JobId(7), 1, None, &signals, &completer)
            .await;
        // The write left it `running` here.
        hand_over_late(&claim, &[attempt_of(7)], &signals, Vec::new(), &completer).await;
        assert_eq!(
            signals.held_attempts(),
            vec![],
            "held with nothing left to release it, its lease renewed forever"
        );
    }

    #[tokio::test]
    async fn an_attempt_held_by_its_claim_is_released_when_it_ends_with_nothing_to_write() {
        let signals = Signals::new(8);
        let (completer, mut outcomes) = mpsc::channel(8);
        let claim = claim_of(7);
        let _ = claim.start_writing();
        hand_over_late(&claim, &[attempt_of(7)], &signals, Vec::new(), &completer).await;
        assert_eq!(signals.held_attempts(), vec![attempt_of(7)]);
        claim
            .attempt_ended(JobId(7), 1, None, &signals, &completer)
            .await;
        assert_eq!(signals.held_attempts(), vec![]);
        assert!(outcomes.try_recv().is_err(), "nothing to write");
    }

    #[tokio::test]
    async fn a_claim_stops_its_own_attempt_not_another_of_the_same_job() {
        let signals = Signals::new(8);
        let claim = claim_of(7);
        // This claim's attempt, then another attempt of the job under the same number
        // (taken again after this claim's write was lost), registered after it.
        let own = signals.register_running(JobId(7), 1, Some(claim.serial));
        let other_claim = claim_of(7);
        let other = signals.register_running(JobId(7), 1, Some(other_claim.serial));
        signals.stop_in_claim(JobId(7), claim.serial, StopReason::LeaseLost);
        assert!(!other.token.is_cancelled(), "the other attempt runs on");
        // The first to end forgets only itself, not the attempt registered after it.
        signals.unregister_running(JobId(7), &own);
        assert_eq!(signals.running_count(), 1);
        // With its own attempt the one registered, the claim stops it.
        signals.unregister_running(JobId(7), &other);
        let own = signals.register_running(JobId(7), 1, Some(claim.serial));
        signals.stop_in_claim(JobId(7), claim.serial, StopReason::LeaseLost);
        assert!(own.token.is_cancelled());
    }
}
