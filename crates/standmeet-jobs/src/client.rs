//! [`JobClient`]: the one way into the queue, River's `Client` in our words. Callers
//! insert jobs (alone or inside their own transaction, so that the business row and its
//! job commit together), look them up, list them, retry, cancel or delete them, wait for
//! them and hear them finish, and read and change the queues and the schedules here; the
//! SQL stays in `store`, which nothing outside this crate sees. Every call answers
//! [`Error`] when it fails.
//!
//! The client is below the job kinds (a handler's [`JobContext`](crate::JobContext)
//! holds one), so the calls that take a kind or a registry are written beside what
//! they need: the inserts in `insert`, the schedules in `periodic`.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use super::listener::{FinishedJobs, ListenerState, Listening, Signals};
use super::queues::QueueSummary;
use super::store::JobProgress;
use super::store::{
    self, BulkOutcome, CancelOutcome, DeleteOutcome, FinishedInMinute, JobFilter, JobRow,
    JobSummary, RetryOutcome,
};
use super::waiters::WakeLatency;
use super::{Error, JobId, JobState, WaitOutcome};

/// A handle on the queue. Cheap to clone: a pool, the process's signals (its waiters,
/// and what its LISTEN connection hears) and the queues it knows.
#[derive(Clone)]
pub struct JobClient {
    pool: PgPool,
    signals: Arc<Signals>,
    queues: Arc<Vec<String>>,
}

/// The waiters of a process, in figures ([`JobClient::waiters`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaiterFigures {
    /// Callers waiting for jobs now.
    pub waiting: usize,
    /// How many may wait at once.
    pub max: usize,
    /// Waits that ended with a receipt (limit passed, or no free place).
    pub receipts: u64,
    /// Waits that ended with the finished jobs.
    pub answered: u64,
}

impl JobClient {
    /// A client over `pool` with room for `max_waiters` callers waiting at once. Its
    /// waits are woken by the LISTEN connection that [`JobRuntime::start`](
    /// super::JobRuntime::start) or [`JobClient::listen`] starts for it (and answered by
    /// a re-read once a second without one).
    pub fn new(pool: PgPool, max_waiters: usize) -> Self {
        JobClient {
            pool,
            signals: Signals::new(max_waiters),
            queues: Arc::default(),
        }
    }

    /// The same client, knowing `queues` as the ones this application runs (listed even
    /// when empty, and the ones a pause may name besides those with jobs).
    pub fn with_queues<'a>(self, queues: impl IntoIterator<Item = &'a str>) -> Self {
        let mut names: Vec<String> = queues.into_iter().map(str::to_string).collect();
        names.sort();
        names.dedup();
        JobClient {
            queues: Arc::new(names),
            ..self
        }
    }

    /// The queues this client was told of ([`JobClient::with_queues`]), by name.
    pub fn queue_names(&self) -> &[String] {
        &self.queues
    }

    pub(crate) fn signals(&self) -> &Arc<Signals> {
        &self.signals
    }

    /// The client handlers get ([`JobContext::jobs`](super::JobContext::jobs)): the
    /// engine's pool, with the process's signals and the engine's queues.
    pub(crate) fn for_engine<'a>(
        pool: PgPool,
        signals: Arc<Signals>,
        queues: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        JobClient {
            pool,
            signals,
            queues: Arc::default(),
        }
        .with_queues(queues)
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Starts this process's LISTEN connection for the client's waiters, without an
    /// engine (a process that only waits). A [`JobRuntime`](super::JobRuntime) starts
    /// its own: do not start both.
    pub fn listen(&self) -> Listening {
        Listening::start(&self.pool, None, self.signals.clone())
    }

    /// [`JobClient::listen`], with the LISTEN connection made to `options`
    /// (`STANDMEET_LISTEN_DATABASE_URL`: a direct connection to the server, where the
    /// pool goes through a transaction-pooling PgBouncer, which cannot keep a LISTEN).
    pub fn listen_at(&self, options: sqlx::postgres::PgConnectOptions) -> Listening {
        Listening::start(&self.pool, Some(options), self.signals.clone())
    }

    /// A subscription to the jobs this process hears finish (and to the moments when it
    /// may have missed some).
    pub fn finished_jobs(&self) -> FinishedJobs {
        self.signals.finished_jobs()
    }

    /// Whether the LISTEN connection is up.
    pub fn listener_connected(&self) -> bool {
        self.signals.listener_connected()
    }

    /// How the LISTEN connection stands: connected, reconnecting, or no listener.
    pub fn listener_state(&self) -> ListenerState {
        self.signals.listener_state()
    }

    /// The waiters' figures: how many wait now, how many may, and how their waits
    /// ended so far.
    pub fn waiters(&self) -> WaiterFigures {
        let waiters = &self.signals.waiters;
        WaiterFigures {
            waiting: waiters.waiting(),
            max: waiters.max(),
            receipts: waiters.receipts_given(),
            answered: waiters.answered(),
        }
    }

    /// How long waiters took to be woken after their job finished (seconds), for
    /// `/metrics`.
    pub fn wake_latency(&self) -> WakeLatency {
        self.signals.waiters.wake_latency()
    }

    /// How many attempt outcomes this process's engine has recorded so far.
    pub fn recorded(&self) -> u64 {
        self.signals.recorded()
    }

    /// State, attempt and error count of these jobs (those that exist): what a live
    /// view of them shows.
    pub async fn progress(&self, ids: &[JobId]) -> Result<Vec<JobProgress>, Error> {
        store::job_progress(&self.pool, ids)
            .await
            .map_err(Error::from_database)
    }

    /// One job, whole.
    pub async fn get(&self, id: JobId) -> Result<Option<JobRow>, Error> {
        store::job_get(&self.pool, id)
            .await
            .map_err(Error::from_database)
    }

    /// These jobs, whole (the ones that exist), in no particular order.
    pub async fn get_many(&self, ids: &[JobId]) -> Result<Vec<JobRow>, Error> {
        store::job_get_many(&self.pool, ids)
            .await
            .map_err(Error::from_database)
    }

    /// The summaries of these jobs (the ones that exist), newest first.
    pub async fn summaries(&self, ids: &[JobId]) -> Result<Vec<JobSummary>, Error> {
        store::job_summaries(&self.pool, ids)
            .await
            .map_err(Error::from_database)
    }

    /// The newest `limit` jobs that match `filter`, newest first.
    pub async fn list(&self, filter: &JobFilter, limit: i64) -> Result<Vec<JobSummary>, Error> {
        store::job_list_page(&self.pool, filter, limit)
            .await
            .map_err(Error::from_database)
    }

    /// How many jobs are in each state, each counted up to `cap`.
    pub async fn count_by_state(&self, cap: i64) -> Result<Vec<(JobState, i64)>, Error> {
        store::job_state_counts(&self.pool, cap)
            .await
            .map_err(Error::from_database)
    }

    /// How many jobs there are of each state and kind: of the unfinished ones (few, found
    /// by index) or of the finished ones (from their summaries).
    pub async fn count_by_state_and_kind(
        &self,
        finished: bool,
    ) -> Result<Vec<(JobState, String, i64)>, Error> {
        store::job_count_by_state_and_kind(&self.pool, finished)
            .await
            .map_err(Error::from_database)
    }

    /// Makes a `retryable`, `discarded` or `cancelled` job `available` now.
    pub async fn retry(&self, id: JobId) -> Result<RetryOutcome, Error> {
        store::job_retry(&self.pool, id)
            .await
            .map_err(Error::from_database)
    }

    /// Cancels a job: at once when it is not running, else by asking its holder.
    pub async fn cancel(&self, id: JobId) -> Result<CancelOutcome, Error> {
        store::job_cancel(&self.pool, id)
            .await
            .map_err(Error::from_database)
    }

    /// Deletes a finished job (completed, discarded or cancelled); others stay.
    pub async fn delete(&self, id: JobId) -> Result<DeleteOutcome, Error> {
        store::job_delete(&self.pool, id)
            .await
            .map_err(Error::from_database)
    }

    /// Jobs finished per minute by outcome over the last hour (minutes with none are
    /// left out).
    pub async fn finished_per_minute(&self) -> Result<Vec<FinishedInMinute>, Error> {
        store::job_finished_per_minute(&self.pool)
            .await
            .map_err(Error::from_database)
    }

    /// Retries every job of `ids` a retry applies to, in one transaction.
    pub async fn retry_many(&self, ids: &[JobId]) -> Result<BulkOutcome, Error> {
        store::job_retry_many(&self.pool, ids)
            .await
            .map_err(Error::from_database)
    }

    /// Cancels every unfinished job of `ids` (asking the holders of running ones), in
    /// one transaction.
    pub async fn cancel_many(&self, ids: &[JobId]) -> Result<BulkOutcome, Error> {
        store::job_cancel_many(&self.pool, ids)
            .await
            .map_err(Error::from_database)
    }

    /// Deletes every finished job of `ids`, in one transaction.
    pub async fn delete_many(&self, ids: &[JobId]) -> Result<BulkOutcome, Error> {
        store::job_delete_many(&self.pool, ids)
            .await
            .map_err(Error::from_database)
    }

    /// Waits until every job in `ids` is finished, or `limit` passes: the finished rows,
    /// or a receipt to come back with.
    pub async fn wait(&self, ids: &[JobId], limit: Duration) -> Result<WaitOutcome, Error> {
        self.signals.waiters.wait(&self.pool, ids, limit).await
    }

    /// Every queue (the ones this client knows, and any other with jobs or a pause)
    /// with its figures, by name.
    pub async fn queues(&self) -> Result<Vec<QueueSummary>, Error> {
        super::queues::list(&self.pool, &self.queues)
            .await
            .map_err(Error::from_database)
    }

    /// Pauses `queue` in every process until it is resumed; its running jobs finish.
    pub async fn pause_queue(&self, queue: &str) -> Result<QueueSummary, Error> {
        super::queues::set_paused(&self.pool, &self.queues, queue, true).await
    }

    /// Resumes `queue`: the jobs that waited run at once.
    pub async fn resume_queue(&self, queue: &str) -> Result<QueueSummary, Error> {
        super::queues::set_paused(&self.pool, &self.queues, queue, false).await
    }

    /// The kinds some process that was heard from within `live` can run.
    pub async fn kinds_someone_runs(&self, live: Duration) -> Result<Vec<String>, Error> {
        store::worker_known_kinds(&self.pool, live)
            .await
            .map_err(Error::from_database)
    }
}

/// What the engine's own tests look at inside a client (feature `testing`).
#[cfg(feature = "testing")]
impl JobClient {
    /// Whether a caller waits for job `id` now.
    pub fn waits_for(&self, id: JobId) -> bool {
        self.signals.waiters.waits_for(id)
    }

    /// The jobs callers wait for now.
    pub fn waited_ids(&self) -> Vec<JobId> {
        self.signals.waiters.pending_ids()
    }

    /// The same client (its waiters, its listener), reading through `pool`.
    pub fn on_pool(&self, pool: PgPool) -> JobClient {
        JobClient {
            pool,
            ..self.clone()
        }
    }
}
