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
//! - A process that dies before the commit loses nothing: its connection's transaction
//!   ends, the locks go, and the jobs are `available` with their attempt count as it
//!   was, for any process to run again (at least once, as always).
//! - A claim whose write fails (the database went away) leaves the jobs `available`
//!   likewise; its attempts still running are stopped, their outcomes dropped.
//! - An outcome the database refuses (bad data, a broken constraint) must not undo the
//!   others: the claim is rolled back, its jobs are claimed again by id and written
//!   `running`, and the completer writes the outcomes, a refused one as a failed
//!   attempt (see `completer`).
//!
//! A claim holds one of its queue's claim slots while open (an advisory lock taken
//! with its `BEGIN`; see [`open`]), so that the claims open at once are counted for the
//! whole database, however many processes run the queue.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};
use tokio::sync::{Notify, mpsc, watch};

use super::JobId;
use super::completer::refused_for_good;
use super::listener::{Signals, StopReason};
use super::store::{self, ClaimedRows, FetchedJob, HeldAttempt, Outcome, RecordedJob};

/// Where the claim is in its life.
enum Stage {
    /// The attempts are running; those that end leave their outcome here and leave
    /// `unfinished` (job → attempt number).
    Collecting {
        ended: Vec<Outcome>,
        unfinished: HashMap<JobId, i16>,
    },
    /// The claim is being written; outcomes that arrive now wait for the commit.
    Writing { late: Vec<Outcome> },
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
        })
    }

    /// An attempt of this claim ended with `outcome` (`None`: nothing to write, e.g.
    /// the handler completed the job in its own transaction). Before the write the
    /// outcome is kept for it; after, it goes to the completer.
    pub(crate) async fn attempt_ended(
        &self,
        id: JobId,
        outcome: Option<Outcome>,
        completer: &mpsc::Sender<Outcome>,
    ) {
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
                Stage::Writing { late } => {
                    late.extend(outcome);
                    None
                }
                Stage::Written => outcome,
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

/// What a claim needs to write itself.
pub(crate) struct ClaimContext {
    pub pool: PgPool,
    pub signals: Arc<Signals>,
    pub worker_id: Arc<str>,
    pub lease: Duration,
    /// How long the claim waits for its attempts before it writes the rest `running`.
    pub window: Duration,
    /// Whether the write tells waiters of the jobs it finishes (see
    /// `EngineConfig::final_notification`).
    pub notify: bool,
}

/// Opens a transaction holding one of the queue's `slots` claim slots (waiting for
/// slot `mine` when all are taken; see [`begin_in_slot`]) and claims up to `limit`
/// jobs of `queue` in it. `None` when there were none (the transaction is closed
/// again, and the slot free).
pub(crate) async fn open(
    pool: &PgPool,
    queue: &str,
    slots: usize,
    mine: usize,
    limit: i64,
    kinds: &[String],
) -> Result<Option<(Transaction<'static, Postgres>, Vec<FetchedJob>, Arc<Claim>)>, sqlx::Error> {
    let mut tx = begin_in_slot(pool, queue, slots, mine).await?;
    let (jobs, rows) = store::job_claim(&mut tx, queue, limit, kinds).await?;
    if jobs.is_empty() {
        tx.rollback().await?;
        return Ok(None);
    }
    let claim = Claim::new(&jobs, rows);
    Ok(Some((tx, jobs, claim)))
}

/// How long a claim waits for its slot before it goes ahead without it: far longer
/// than a claim holds one (its window and a write), far shorter than a stuck holder
/// (a process cut off from the database holds its locks until PostgreSQL notices)
/// could hold up the queue.
pub const SLOT_WAIT: Duration = Duration::from_secs(1);

/// Begins a claim's transaction holding one of the claim slots of `queue` (there are
/// `slots`; transaction-scoped advisory locks): the claims of a queue open at once are
/// counted across every process on the database, not per process, so that N
/// processes give PostgreSQL no more claims to juggle at once than one. (Each claim
/// open beside another makes it skip its locked rows and contend for the same index
/// pages: without this, four processes drained a sixth slower than one; README
/// "Benchmarks".) The claim takes the first free slot; when all are taken it waits
/// for slot `mine`, up to [`SLOT_WAIT`], then goes ahead without one (the SQL
/// function `standmeet_claim_slot`, whose migration says why it is one). One round
/// trip, like a plain `BEGIN`.
async fn begin_in_slot(
    pool: &PgPool,
    queue: &str,
    slots: usize,
    mine: usize,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
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
    pool.begin_with(format!(
        "BEGIN; SELECT standmeet_claim_slot('{name}', {key}, {slots}, {mine}, {wait})",
        key = slot_lock_key(queue),
        slots = slots.max(1),
        wait = SLOT_WAIT.as_millis(),
    ))
    .await
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

/// Waits for the claim's attempts (up to the window, or until a handler hurries it),
/// writes what became of its jobs and commits, then hands the late outcomes to the
/// completer.
pub(crate) async fn finish(
    tx: Transaction<'static, Postgres>,
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

    let (ended, unfinished) = {
        let mut stage = claim.stage.lock().expect("not poisoned");
        match std::mem::replace(&mut *stage, Stage::Writing { late: Vec::new() }) {
            Stage::Collecting { ended, unfinished } => (ended, unfinished),
            _ => unreachable!("only this function moves a claim past collecting"),
        }
    };
    let still_running: Vec<HeldAttempt> = unfinished
        .into_iter()
        .map(|(id, attempt)| HeldAttempt { id, attempt })
        .collect();

    // The finished jobs somebody here waits for come back whole from the write, for
    // their waiters to have their answer without a query.
    let rows_coming = context.signals.waiters.rows_coming(
        ended
            .iter()
            .filter(|o| o.state.is_terminal())
            .map(|o| o.id),
    );
    let watched = rows_coming.watched();
    let result = write(tx, &context, &ended, &still_running, &claim.rows, watched).await;
    match result {
        Ok(Written::All(written)) => {
            // From now on the still-running attempts are this process's under a lease.
            context.signals.hold(still_running.iter().copied());
            context.signals.add_recorded(ended.len() as u64);
            rows_coming.done(written, &ended);
            hand_over_late(&claim, Vec::new(), &completer).await;
        }
        Ok(Written::Running(ours)) => {
            // Nothing finished here after all: the completer tells of these outcomes.
            drop(rows_coming);
            context.signals.hold(ours.iter().copied());
            let ours: HashSet<HeldAttempt> = ours.into_iter().collect();
            // Taken by another process meanwhile: it runs them again; stop ours.
            for held in still_running.iter().filter(|held| !ours.contains(held)) {
                context
                    .signals
                    .stop_attempt(held.id, held.attempt, StopReason::LeaseLost);
            }
            let first = ended
                .into_iter()
                .filter(|o| {
                    ours.contains(&HeldAttempt {
                        id: o.id,
                        attempt: o.attempt,
                    })
                })
                .collect();
            hand_over_late(&claim, first, &completer).await;
        }
        Err(err) => {
            drop(rows_coming);
            tracing::warn!(error = %err, jobs = ended.len() + still_running.len(), "cannot write a claim of jobs; they are available again");
            *claim.stage.lock().expect("not poisoned") = Stage::Failed;
            claim.written.send_replace(Some(false));
            for held in &still_running {
                context
                    .signals
                    .stop_attempt(held.id, held.attempt, StopReason::LeaseLost);
            }
        }
    }
}

/// How a claim was written.
enum Written {
    /// Every outcome and every `running`: the jobs changed (the watched ones whole).
    All(Vec<RecordedJob>),
    /// The database refused an outcome (bad data, a broken constraint), so the claim
    /// was rolled back, and these of its attempts (those no other process took
    /// meanwhile) were claimed again and written `running`: their outcomes go to the
    /// completer, which writes one the database refuses as a failed attempt.
    Running(Vec<HeldAttempt>),
}

/// Writes the claim, its outcomes and its still-running attempts in one statement, and
/// commits. Should the database refuse an outcome for good, the claim is rolled back
/// (the attempts ran all the same) and its jobs are taken again, by id, to be written
/// `running` instead.
async fn write(
    mut tx: Transaction<'static, Postgres>,
    context: &ClaimContext,
    ended: &[Outcome],
    still_running: &[HeldAttempt],
    rows: &ClaimedRows,
    watched: &[JobId],
) -> Result<Written, sqlx::Error> {
    let refused = match store::job_record_claimed(
        &mut tx,
        &context.worker_id,
        context.lease,
        ended,
        still_running,
        rows,
        context.notify,
        watched,
    )
    .await
    {
        Ok(written) => {
            tx.commit().await?;
            return Ok(Written::All(written));
        }
        Err(err) if refused_for_good(&err) => err,
        Err(err) => return Err(err),
    };
    tx.rollback().await?;
    tracing::warn!(error = %refused, jobs = ended.len(), "the database refused an outcome in a claim; the completer writes them");
    let everything: Vec<HeldAttempt> = ended
        .iter()
        .map(|o| HeldAttempt {
            id: o.id,
            attempt: o.attempt,
        })
        .chain(still_running.iter().copied())
        .collect();
    let mut tx = context.pool.begin().await?;
    let (ours, rows) = store::job_claim_again(&mut tx, &everything).await?;
    store::job_record_claimed(
        &mut tx,
        &context.worker_id,
        context.lease,
        &[],
        &ours,
        &rows,
        context.notify,
        &[],
    )
    .await?;
    tx.commit().await?;
    Ok(Written::Running(ours))
}

/// After the commit: says so to whoever waits for it, and hands `first` and the
/// outcomes that arrived during the write to the completer.
async fn hand_over_late(claim: &Claim, first: Vec<Outcome>, completer: &mpsc::Sender<Outcome>) {
    let late = {
        let mut stage = claim.stage.lock().expect("not poisoned");
        match std::mem::replace(&mut *stage, Stage::Written) {
            Stage::Writing { late } => late,
            _ => Vec::new(),
        }
    };
    claim.written.send_replace(Some(true));
    for outcome in first.into_iter().chain(late) {
        // Fails only when the completer is gone, i.e. never before we are.
        let _ = completer.send(outcome).await;
    }
}
