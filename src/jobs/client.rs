//! [`JobClient`]: the one way into the queue for the rest of StandMeet, River's
//! `Client` in our words. Pages, tools and features look jobs up, list them, retry,
//! cancel or delete them and wait for them here; the SQL stays in `store`, which
//! nothing outside `jobs` sees. (Inserting inside a caller's own transaction is
//! [`insert_tx`](super::insert_tx), so that the business row and its job commit
//! together.)

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use super::queues::{QueueError, QueueSummary};
use super::store::{
    self, BulkOutcome, CancelOutcome, DeleteOutcome, FinishedInMinute, JobFilter, JobRow,
    JobSummary, RetryOutcome,
};
use super::{JobId, JobKind, JobState, Signals, WaitError, WaitOutcome};

/// A handle on the queue. Cheap to clone: a pool and the process's signals.
#[derive(Clone)]
pub struct JobClient {
    pool: PgPool,
    signals: Arc<Signals>,
    finished_counts: Arc<tokio::sync::Mutex<Option<CountedAt>>>,
}

/// Counts of jobs by state and kind, and when they were made.
type CountedAt = (std::time::Instant, Vec<(JobState, String, i64)>);

impl JobClient {
    /// A client over `pool`, waiting through `signals` (the ones the process's listener
    /// wakes).
    pub fn new(pool: PgPool, signals: Arc<Signals>) -> Self {
        JobClient {
            pool,
            signals,
            finished_counts: Arc::default(),
        }
    }

    /// Inserts a `K` job with `args`, due now, in a transaction of its own.
    pub async fn insert<K: JobKind>(&self, args: &K::Args) -> anyhow::Result<JobId> {
        super::insert::<K>(&self.pool, args).await
    }

    /// One job, whole.
    pub async fn get(&self, id: JobId) -> Result<Option<JobRow>, sqlx::Error> {
        store::job_get(&self.pool, id).await
    }

    /// These jobs, whole (the ones that exist), in no particular order.
    pub async fn get_many(&self, ids: &[JobId]) -> Result<Vec<JobRow>, sqlx::Error> {
        store::job_get_many(&self.pool, ids).await
    }

    /// The summaries of these jobs (the ones that exist), newest first.
    pub async fn summaries(&self, ids: &[JobId]) -> Result<Vec<JobSummary>, sqlx::Error> {
        store::job_summaries(&self.pool, ids).await
    }

    /// The newest `limit` jobs that match `filter`, newest first.
    pub async fn list(
        &self,
        filter: &JobFilter,
        limit: i64,
    ) -> Result<Vec<JobSummary>, sqlx::Error> {
        store::job_list_page(&self.pool, filter, limit).await
    }

    /// How many jobs are in each state, each counted up to `cap`.
    pub async fn count_by_state(&self, cap: i64) -> Result<Vec<(JobState, i64)>, sqlx::Error> {
        store::job_state_counts(&self.pool, cap).await
    }

    /// How many jobs there are of each state and kind: of the unfinished ones (few, found
    /// by index) or of the finished ones (a pass over the finished-by-kind index).
    pub async fn count_by_state_and_kind(
        &self,
        finished: bool,
    ) -> Result<Vec<(JobState, String, i64)>, sqlx::Error> {
        store::job_count_by_state_and_kind(&self.pool, finished).await
    }

    /// The finished jobs by state and kind, counted again only when the last count is
    /// older than `max_age` (a caller that comes while one is made waits for it and
    /// shares it): for figures read often that need not be exact to the second.
    pub async fn finished_counts_within(
        &self,
        max_age: Duration,
    ) -> Result<Vec<(JobState, String, i64)>, sqlx::Error> {
        let mut last = self.finished_counts.lock().await;
        if let Some((made, counts)) = last.as_ref()
            && made.elapsed() < max_age
        {
            return Ok(counts.clone());
        }
        let counts = store::job_count_by_state_and_kind(&self.pool, true).await?;
        *last = Some((std::time::Instant::now(), counts.clone()));
        Ok(counts)
    }

    /// Makes a `retryable`, `discarded` or `cancelled` job `available` now.
    pub async fn retry(&self, id: JobId) -> Result<RetryOutcome, sqlx::Error> {
        store::job_retry(&self.pool, id).await
    }

    /// Cancels a job: at once when it is not running, else by asking its holder.
    pub async fn cancel(&self, id: JobId) -> Result<CancelOutcome, sqlx::Error> {
        store::job_cancel(&self.pool, id).await
    }

    /// Deletes a finished job (completed, discarded or cancelled); others stay.
    pub async fn delete(&self, id: JobId) -> Result<DeleteOutcome, sqlx::Error> {
        store::job_delete(&self.pool, id).await
    }

    /// Jobs finished per minute by outcome over the last hour (minutes with none are
    /// left out).
    pub async fn finished_per_minute(&self) -> Result<Vec<FinishedInMinute>, sqlx::Error> {
        store::job_finished_per_minute(&self.pool).await
    }

    /// Retries every job of `ids` a retry applies to, in one transaction.
    pub async fn retry_many(&self, ids: &[JobId]) -> Result<BulkOutcome, sqlx::Error> {
        store::job_retry_many(&self.pool, ids).await
    }

    /// Cancels every unfinished job of `ids` (asking the holders of running ones), in
    /// one transaction.
    pub async fn cancel_many(&self, ids: &[JobId]) -> Result<BulkOutcome, sqlx::Error> {
        store::job_cancel_many(&self.pool, ids).await
    }

    /// Deletes every finished job of `ids`, in one transaction.
    pub async fn delete_many(&self, ids: &[JobId]) -> Result<BulkOutcome, sqlx::Error> {
        store::job_delete_many(&self.pool, ids).await
    }

    /// Waits until every job in `ids` is finished, or `limit` passes: the finished rows,
    /// or a receipt to come back with.
    pub async fn wait(&self, ids: &[JobId], limit: Duration) -> Result<WaitOutcome, WaitError> {
        self.signals.waiters.wait(&self.pool, ids, limit).await
    }

    /// Every queue (StandMeet's own, and any other with jobs or a pause) with its
    /// figures, by name.
    pub async fn queues(&self) -> Result<Vec<QueueSummary>, sqlx::Error> {
        super::queues::list(&self.pool, &standard_queue_names()).await
    }

    /// Pauses `queue` in every process until it is resumed; its running jobs finish.
    pub async fn pause_queue(&self, queue: &str) -> Result<QueueSummary, QueueError> {
        super::queues::set_paused(&self.pool, &standard_queue_names(), queue, true).await
    }

    /// Resumes `queue`: the jobs that waited run at once.
    pub async fn resume_queue(&self, queue: &str) -> Result<QueueSummary, QueueError> {
        super::queues::set_paused(&self.pool, &standard_queue_names(), queue, false).await
    }

    /// The kinds some StandMeet process that was heard from within `live` can run.
    pub async fn kinds_someone_runs(&self, live: Duration) -> Result<Vec<String>, sqlx::Error> {
        store::worker_known_kinds(&self.pool, live).await
    }
}

fn standard_queue_names() -> Vec<String> {
    super::EngineConfig::standard_queues()
        .into_iter()
        .map(|queue| queue.name)
        .collect()
}
