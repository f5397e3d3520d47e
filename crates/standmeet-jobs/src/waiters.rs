//! Waiting for jobs to finish, up to a limit, then handing out a receipt.
//!
//! A caller asks [`Waiters::wait`] for some job ids and a limit. It gets the jobs'
//! terminal rows when all of them finish in time, else a receipt (the caller answers
//! "pending" with the ids, which can be redeemed later). How a waiter learns that a job
//! finished, from fastest to slowest:
//!
//! 1. this process finished it: the claim or the completer wakes local waiters right
//!    after its commit, with the finished rows, so that the answer needs no query;
//! 2. any process finished it: the `standmeet_job_final` notification, through this
//!    process's one listener;
//! 3. a notification was lost (the listener was reconnecting): after every reconnect,
//!    and on a safety tick about every second, the ids all waiters wait for are re-read
//!    in one query.
//!
//! A waiter registers before it first reads its jobs, so a job that finished a moment
//! before is seen by that read, and one that finishes after it wakes the waiter. At
//! most `STANDMEET_MAX_WAITERS` waits run at once; past that a caller gets its receipt
//! at once, without touching the database. Dropping a wait (the caller went away)
//! frees its slot and its registration.

use rustc_hash::FxHashMap;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::store::{self, JobRow, Outcome, RecordedJob};
use super::try_again::TryAgain;
use super::{Error, JobId};

/// What a wait ended with.
#[derive(Debug)]
pub enum WaitOutcome {
    /// Every job finished: their rows, in the order of the ids asked for.
    Done(Vec<JobRow>),
    /// Not all finished within the limit (or too many callers wait already): come back
    /// later with the same ids.
    Receipt,
}

/// One wait in progress.
struct Waiter {
    /// The ids not yet known to be finished.
    pending: Mutex<HashSet<JobId>>,
    wake: Notify,
    /// When it was last woken, to measure how long waking took.
    woken_at: Mutex<Option<OffsetDateTime>>,
    /// Finished jobs whose rows came with the news (from this process's writes): when
    /// every job's row is here, the answer needs no query.
    rows: Mutex<FxHashMap<JobId, JobRow>>,
}

impl Waiter {
    /// A waiter for every one of `ids`, none finished yet.
    fn new(ids: &[JobId]) -> Self {
        Waiter {
            pending: Mutex::new(ids.iter().copied().collect()),
            wake: Notify::new(),
            woken_at: Mutex::new(None),
            rows: Mutex::new(FxHashMap::default()),
        }
    }

    /// Marks `id` finished (its terminal row, when known); wakes the waiter when it
    /// was one of its.
    fn finished(&self, id: JobId, row: Option<&JobRow>) {
        if let Some(row) = row {
            self.rows
                .lock()
                .expect("not poisoned")
                .insert(id, row.clone());
        }
        let removed = self.pending.lock().expect("not poisoned").remove(&id);
        if removed {
            *self.woken_at.lock().expect("not poisoned") = Some(OffsetDateTime::now_utc());
            self.wake.notify_one();
        }
    }

    fn is_done(&self) -> bool {
        self.pending.lock().expect("not poisoned").is_empty()
    }
}

/// Reads `ids` for a waiter told they finished, trying again after a failed read
/// until `deadline`: a read that meets a broken connection (the pool still holds
/// connections to a primary that just failed over) is no reason to hand out a
/// receipt for jobs known to be finished. `None` when no read succeeded in time.
async fn read_until(pool: &PgPool, ids: &[JobId], deadline: Instant) -> Option<Vec<JobRow>> {
    let mut again = TryAgain::until(deadline);
    loop {
        match tokio::time::timeout_at(deadline, store::job_get_many(pool, ids)).await {
            Ok(Ok(rows)) => return Some(rows),
            Ok(Err(err)) => {
                tracing::debug!(error = %err, "cannot read finished jobs for their waiter; reading again");
                tokio::time::sleep(again.next_pause()?).await;
            }
            Err(_) => return None,
        }
    }
}

/// The waiters of one process.
pub(crate) struct Waiters {
    slots: Arc<Semaphore>,
    max: usize,
    /// Job id → the waiters waiting for it. A std Mutex: held for map updates only.
    by_job: Mutex<FxHashMap<JobId, Vec<Arc<Waiter>>>>,
    /// Jobs a write of this process (a claim's, the completer's) may finish, whose rows
    /// it hands to their waiters after its commit (see [`Waiters::rows_coming`]).
    rows_coming: Mutex<FxHashMap<JobId, Coming>>,
    receipts: AtomicU64,
    answered: AtomicU64,
    /// Seconds from a job's finalization to its waiter waking.
    wake_latency: Mutex<WakeLatency>,
}

/// How long waiters took to wake after their jobs finished, as a histogram
/// ([`JobClient::wake_latency`](crate::JobClient::wake_latency)), in the shape
/// Prometheus' histograms take.
#[derive(Clone, Debug, PartialEq)]
pub struct WakeLatency {
    /// Each bucket's upper bound in seconds, lowest first (the last is infinity), and
    /// the wakes that fell in it and in no lower one.
    pub buckets: Vec<(f64, u64)>,
    /// The wakes' latencies added up, in seconds.
    pub sum_seconds: f64,
    /// How many wakes were measured.
    pub count: u64,
}

impl WakeLatency {
    fn new() -> Self {
        WakeLatency {
            buckets: WAKE_BUCKETS
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .map(|bound| (bound, 0))
                .collect(),
            sum_seconds: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, seconds: f64) {
        self.sum_seconds += seconds;
        self.count += 1;
        if let Some((_, count)) = self.buckets.iter_mut().find(|(bound, _)| seconds <= *bound) {
            *count += 1;
        }
    }
}

/// Buckets of the wake-latency histogram, in seconds: 0.5 ms to 5 s.
const WAKE_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.007, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

impl Waiters {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Waiters {
            slots: Arc::new(Semaphore::new(max)),
            max,
            by_job: Mutex::new(FxHashMap::default()),
            rows_coming: Mutex::new(FxHashMap::default()),
            receipts: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            wake_latency: Mutex::new(WakeLatency::new()),
        })
    }

    /// Waits until every job in `ids` is finished, or `limit` passes.
    pub(crate) async fn wait(
        &self,
        pool: &PgPool,
        ids: &[JobId],
        limit: Duration,
    ) -> Result<WaitOutcome, Error> {
        let deadline = Instant::now() + limit;
        let mut unique: Vec<JobId> = Vec::with_capacity(ids.len());
        for id in ids {
            if !unique.contains(id) {
                unique.push(*id);
            }
        }
        let ids = &unique[..];
        let Ok(_slot) = self.slots.clone().try_acquire_owned() else {
            self.receipts.fetch_add(1, Ordering::Relaxed);
            return Ok(WaitOutcome::Receipt);
        };
        let waiter = Arc::new(Waiter::new(ids));
        let _registration = self.register(&waiter, ids);

        // Registered: whatever finishes from now on wakes us. Now look at what is
        // finished already.
        if let Ok(Ok(rows)) =
            tokio::time::timeout_at(deadline, store::job_get_many(pool, ids)).await
        {
            let missing: Vec<JobId> = ids
                .iter()
                .filter(|id| !rows.iter().any(|row| row.id == **id))
                .copied()
                .collect();
            if !missing.is_empty() {
                let missing: Vec<String> = missing.iter().map(JobId::to_string).collect();
                return Err(Error::NotFound(format!(
                    "no job has the id {}",
                    missing.join(", ")
                )));
            }
            for row in rows.iter().filter(|row| row.state.is_terminal()) {
                waiter.pending.lock().expect("not poisoned").remove(&row.id);
            }
            // (Done may also mean woken meanwhile, when this read's rows are not all
            // final yet: then the loop below answers.)
            if waiter.is_done() && rows.iter().all(|row| row.state.is_terminal()) {
                self.answered.fetch_add(1, Ordering::Relaxed);
                return Ok(WaitOutcome::Done(in_order(rows, ids)));
            }
        }
        // (A failed read is no answer: the safety tick reads again while we wait.)

        loop {
            tokio::select! {
                _ = waiter.wake.notified() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    self.receipts.fetch_add(1, Ordering::Relaxed);
                    return Ok(WaitOutcome::Receipt);
                }
            }
            if !waiter.is_done() {
                continue;
            }
            let woken_at = waiter.woken_at.lock().expect("not poisoned").take();
            let known: Vec<JobRow> = {
                let mut rows = waiter.rows.lock().expect("not poisoned");
                ids.iter().filter_map(|id| rows.remove(id)).collect()
            };
            let read = if known.len() == ids.len() {
                Some(known)
            } else {
                read_until(pool, ids, deadline).await
            };
            return match read {
                Some(rows)
                    if rows.len() == ids.len()
                        && rows.iter().all(|row| row.state.is_terminal()) =>
                {
                    if let Some(woken_at) = woken_at {
                        let mut latency = self.wake_latency.lock().expect("not poisoned");
                        for row in &rows {
                            if let Some(finalized_at) = row.finalized_at {
                                let seconds = (woken_at - finalized_at).as_seconds_f64().max(0.0);
                                latency.observe(seconds);
                            }
                        }
                    }
                    self.answered.fetch_add(1, Ordering::Relaxed);
                    Ok(WaitOutcome::Done(in_order(rows, ids)))
                }
                // The database did not answer by the deadline, or a job was moved back
                // out of its terminal state (an admin's retry): no answer yet.
                _ => {
                    self.receipts.fetch_add(1, Ordering::Relaxed);
                    Ok(WaitOutcome::Receipt)
                }
            };
        }
    }

    /// Marks job `id` finished for every waiter waiting for it. (While a write here
    /// is about to hand over its row, the news, a notification or a re-read, is kept
    /// for when the write is over: now it would only send the waiter to read the row
    /// itself.)
    pub(crate) fn job_finished(&self, id: JobId) {
        if let Some(coming) = self.rows_coming.lock().expect("not poisoned").get_mut(&id) {
            coming.heard = true;
            return;
        }
        self.wake_without_row(id);
    }

    /// [`Waiters::wake_without_row`] for many jobs, looking them up under one lock (a
    /// drain finishes a thousand jobs a write, and mostly nobody waits for them).
    fn wake_all_without_row(&self, ids: &[JobId]) {
        let found: Vec<(JobId, Vec<Arc<Waiter>>)> = {
            let by_job = self.by_job.lock().expect("not poisoned");
            if by_job.is_empty() {
                return;
            }
            ids.iter()
                .filter_map(|id| by_job.get(id).map(|waiting| (*id, waiting.clone())))
                .collect()
        };
        for (id, waiting) in found {
            for waiter in waiting {
                waiter.finished(id, None);
            }
        }
    }

    fn wake_without_row(&self, id: JobId) {
        self.wake_all_without_row(std::slice::from_ref(&id));
    }

    /// Marks a job finished, with its terminal row as just committed, for every
    /// waiter waiting for it: their answer needs no query.
    pub(crate) fn job_finished_as(&self, row: &JobRow) {
        if let Some(coming) = self
            .rows_coming
            .lock()
            .expect("not poisoned")
            .get_mut(&row.id)
        {
            // The news kept back is this very row's.
            coming.heard = false;
        }
        let waiters = self
            .by_job
            .lock()
            .expect("not poisoned")
            .get(&row.id)
            .cloned();
        for waiter in waiters.into_iter().flatten() {
            waiter.finished(row.id, Some(row));
        }
    }

    /// Whether a waiter waits for job `id` now.
    #[cfg(feature = "testing")]
    pub(crate) fn waits_for(&self, id: JobId) -> bool {
        self.by_job.lock().expect("not poisoned").contains_key(&id)
    }

    /// Says that a write of this process may finish these jobs, and will hand the rows
    /// of those somebody here waits for ([`RowsComing::watched`]; the write returns
    /// them whole) to their waiters once committed ([`RowsComing::done`]): until the
    /// returned guard is dropped, other news of them (the notification of that very
    /// commit, which may come first) is kept back, and then delivered unless a row
    /// was handed over meanwhile (the write failed, or was fenced out, or somebody
    /// else finished the job).
    pub(crate) fn rows_coming(&self, jobs: impl IntoIterator<Item = JobId>) -> RowsComing<'_> {
        let watched: Vec<JobId> = {
            let by_job = self.by_job.lock().expect("not poisoned");
            jobs.into_iter()
                .filter(|id| by_job.contains_key(id))
                .collect()
        };
        let mut coming = self.rows_coming.lock().expect("not poisoned");
        for id in &watched {
            coming.entry(*id).or_default().writes += 1;
        }
        RowsComing {
            waiters: self,
            ids: watched,
        }
    }

    /// The ids any waiter still waits for.
    pub(crate) fn pending_ids(&self) -> Vec<JobId> {
        self.by_job
            .lock()
            .expect("not poisoned")
            .keys()
            .copied()
            .collect()
    }

    /// Re-reads every waited-for id in one query and wakes the waiters of finished
    /// ones: what a lost notification would have done.
    pub(crate) async fn resync(&self, pool: &PgPool) -> Result<(), sqlx::Error> {
        let ids = self.pending_ids();
        if ids.is_empty() {
            return Ok(());
        }
        for id in store::job_terminal_among(pool, &ids).await? {
            self.job_finished(id);
        }
        Ok(())
    }

    /// Waits in progress now.
    pub(crate) fn waiting(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Receipts handed out so far (a limit passed, or no slot was free).
    pub(crate) fn receipts_given(&self) -> u64 {
        self.receipts.load(Ordering::Relaxed)
    }

    /// Waits answered with the finished jobs so far.
    pub(crate) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    pub(crate) fn wake_latency(&self) -> WakeLatency {
        self.wake_latency.lock().expect("not poisoned").clone()
    }

    fn register(&self, waiter: &Arc<Waiter>, ids: &[JobId]) -> Registration<'_> {
        let mut by_job = self.by_job.lock().expect("not poisoned");
        for id in ids {
            by_job.entry(*id).or_default().push(waiter.clone());
        }
        Registration {
            waiters: self,
            waiter: waiter.clone(),
            ids: ids.to_vec(),
        }
    }
}

/// A job whose row a write may hand over.
#[derive(Default)]
struct Coming {
    /// The writes under way that may (one at a time, but a guard outlives its write).
    writes: u32,
    /// News of its end was kept back meanwhile.
    heard: bool,
}

/// Jobs whose rows a write is about to hand over (see [`Waiters::rows_coming`]).
pub(crate) struct RowsComing<'a> {
    waiters: &'a Waiters,
    ids: Vec<JobId>,
}

impl RowsComing<'_> {
    /// The jobs somebody here waits for: those whose rows the write is to return.
    pub(crate) fn watched(&self) -> &[JobId] {
        &self.ids
    }

    /// The write of `outcomes` committed and changed the jobs `written`: hands the
    /// finished rows it returned to their waiters, and wakes the waiters of the other
    /// jobs it finished (with no row: they read it) and of those news was kept back of.
    pub(crate) fn done(self, written: Vec<RecordedJob>, outcomes: &[Outcome]) {
        let waiters = self.waiters;
        let finishing: rustc_hash::FxHashSet<JobId> = outcomes
            .iter()
            .filter(|o| o.state.is_terminal())
            .map(|o| o.id)
            .collect();
        let mut without_row = Vec::new();
        for job in written {
            match job.whole {
                Some(row) if row.state.is_terminal() => waiters.job_finished_as(&row),
                // A retry or a snooze: not finished.
                Some(_) => {}
                None if finishing.contains(&job.id) => without_row.push(job.id),
                None => {}
            }
        }
        drop(self);
        waiters.wake_all_without_row(&without_row);
    }
}

impl Drop for RowsComing<'_> {
    fn drop(&mut self) {
        let mut heard = Vec::new();
        {
            let mut coming = self.waiters.rows_coming.lock().expect("not poisoned");
            for id in &self.ids {
                if let Some(entry) = coming.get_mut(id) {
                    entry.writes -= 1;
                    if entry.writes == 0 {
                        if entry.heard {
                            heard.push(*id);
                        }
                        coming.remove(id);
                    }
                }
            }
        }
        for id in heard {
            self.waiters.wake_without_row(id);
        }
    }
}

/// Removes a waiter from the map when its wait ends, however it ends (answered,
/// receipted, or dropped by a caller that went away).
struct Registration<'a> {
    waiters: &'a Waiters,
    waiter: Arc<Waiter>,
    ids: Vec<JobId>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut by_job = self.waiters.by_job.lock().expect("not poisoned");
        for id in &self.ids {
            if let Some(list) = by_job.get_mut(id) {
                list.retain(|other| !Arc::ptr_eq(other, &self.waiter));
                if list.is_empty() {
                    by_job.remove(id);
                }
            }
        }
    }
}

fn in_order(mut rows: Vec<JobRow>, ids: &[JobId]) -> Vec<JobRow> {
    rows.sort_by_key(|row| {
        ids.iter()
            .position(|id| *id == row.id)
            .unwrap_or(usize::MAX)
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter_for(waiters: &Waiters, id: JobId) -> (Arc<Waiter>, Registration<'_>) {
        let waiter = Arc::new(Waiter::new(&[id]));
        let registration = waiters.register(&waiter, &[id]);
        (waiter, registration)
    }

    /// A completion of job `id`.
    fn finished(id: JobId) -> Outcome {
        Outcome {
            id,
            attempt: 1,
            max_attempts: 1,
            state: crate::JobState::Completed,
            output: None,
            error: None,
            delay: None,
            give_back_attempt: false,
        }
    }

    #[test]
    fn news_of_a_job_whose_row_is_coming_waits_for_the_write_to_say_it() {
        let waiters = Waiters::new(4);
        let id = JobId(7);
        let (waiter, _registration) = waiter_for(&waiters, id);
        let coming = waiters.rows_coming([id]);
        waiters.job_finished(id);
        assert!(!waiter.is_done(), "the notification went ahead of the row");
        // The write brought no row back: it wakes the waiter without one.
        coming.done(vec![RecordedJob { id, whole: None }], &[finished(id)]);
        assert!(waiter.is_done());
        assert!(waiter.rows.lock().unwrap().is_empty());
    }

    #[test]
    fn news_kept_back_is_delivered_when_the_write_ends_without_handing_a_row() {
        let waiters = Waiters::new(4);
        let id = JobId(9);
        let (waiter, _registration) = waiter_for(&waiters, id);
        let first = waiters.rows_coming([id]);
        let second = waiters.rows_coming([id]);
        waiters.job_finished(id);
        drop(first);
        assert!(
            !waiter.is_done(),
            "another write may still hand the row over"
        );
        // The write failed or was fenced out: somebody else finished the job.
        drop(second);
        assert!(waiter.is_done());
    }

    #[test]
    fn once_the_write_is_over_news_of_the_job_wakes_its_waiters_again() {
        let waiters = Waiters::new(4);
        let id = JobId(8);
        let (waiter, _registration) = waiter_for(&waiters, id);
        // The write failed (or was rolled back): nobody was woken by it.
        drop(waiters.rows_coming([id]));
        assert!(!waiter.is_done());
        waiters.job_finished(id);
        assert!(waiter.is_done());
    }
}
