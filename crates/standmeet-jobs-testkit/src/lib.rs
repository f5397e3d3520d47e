//! Helpers for tests of code that runs jobs on `standmeet_jobs`: an engine with quick
//! timings that stops when dropped, test job kinds, and waiting for a job to reach a
//! state (by re-reading its row, never by sleeping a fixed time). The engine's own
//! tests and StandMeet's use them alike.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use standmeet_jobs::{
    EngineConfig, Error, InsertOptions, JobClient, JobContext, JobError, JobId, JobKind, JobRow,
    JobRuntime, JobState, QueueConfig, Registry, WaitOutcome,
};

/// An engine and its listener, as one process would run them, with the client they
/// wake, told to stop when dropped: a test that fails half-way (or simply ends) leaves
/// no engine polling its database. It derefs to the [`JobRuntime`], so
/// `engine.worker_id()` works as on the runtime itself.
///
/// The drop does not wait (it cannot); a test that checks what a *graceful* stop did,
/// or needs the engine gone before it goes on, awaits [`TestEngine::shutdown`].
pub struct TestEngine {
    /// `None` only inside `shutdown`, after the runtime was taken to stop it.
    runtime: Option<JobRuntime>,
    /// The client whose waiters and subscribers this engine's listener wakes.
    pub client: JobClient,
}

impl TestEngine {
    pub fn new(runtime: JobRuntime, client: JobClient) -> Self {
        TestEngine {
            runtime: Some(runtime),
            client,
        }
    }

    /// Stops the engine gracefully (see [`JobRuntime::shutdown`]) and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown().await;
        }
    }

    /// Tells the engine and its listener to stop, without waiting (see
    /// [`JobRuntime::stop_soon`]); what a drop does.
    pub fn stop_soon(&self) {
        if let Some(runtime) = &self.runtime {
            runtime.stop_soon();
        }
    }
}

impl std::ops::Deref for TestEngine {
    type Target = JobRuntime;

    fn deref(&self) -> &JobRuntime {
        self.runtime
            .as_ref()
            .expect("the engine runs until `shutdown` consumes it")
    }
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        self.stop_soon();
    }
}

/// Quick timings: retries after ~10 ms × attempt⁴, leases of a second, and a default
/// queue that polls only every 10 s (so that prompt pickup proves the notification).
pub fn quick_config(workers: usize) -> EngineConfig {
    EngineConfig {
        queues: vec![QueueConfig::new(
            "default",
            workers,
            Duration::from_secs(10),
        )],
        retry_base: Duration::from_millis(10),
        lease: Duration::from_millis(1_000),
        schedule_interval: Duration::from_millis(20),
        rescue_interval: Duration::from_millis(100),
        clean_interval: Duration::from_secs(3600),
        shutdown_grace: Duration::from_millis(500),
        ..EngineConfig::default()
    }
}

/// Handler connections an engine's pool has besides those its claims need.
const HANDLER_CONNECTIONS: u32 = 8;

/// A pool for an engine running `config`, to `pool`'s database, as a process has one:
/// a test's pool is too small for the claims of several queues.
pub fn engine_pool(pool: &PgPool, config: &EngineConfig) -> PgPool {
    JobRuntime::pool_options()
        .max_connections(config.connections_needed() + HANDLER_CONNECTIONS)
        .connect_lazy_with((*pool.connect_options()).clone())
}

/// Inserts a `K` job with `args`, due now, through [`client`]`(pool)`.
pub async fn insert<K: JobKind>(pool: &PgPool, args: &K::Args) -> Result<JobId, Error> {
    client(pool).insert::<K>(args).await
}

/// Inserts a `K` job with `args` and `options`, through [`client`]`(pool)`.
pub async fn insert_with<K: JobKind>(
    pool: &PgPool,
    args: &K::Args,
    options: InsertOptions,
) -> Result<JobId, Error> {
    client(pool).insert_with::<K>(args, options).await
}

/// Starts an engine (and its listener) with a client of its own, on connections of its
/// own to `pool`'s database; stopped on drop.
pub async fn start_engine(pool: &PgPool, registry: Registry, config: EngineConfig) -> TestEngine {
    let engine_pool = engine_pool(pool, &config);
    let client = JobClient::new(pool.clone(), 64);
    let runtime = JobRuntime::start(&engine_pool, registry, config, &client)
        .await
        .expect("the engine starts");
    TestEngine::new(runtime, client)
}

/// Waits until `condition` holds, checking every 10 ms; panics after `limit`.
pub async fn wait_until<F, Fut>(limit: Duration, condition: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the condition did not hold within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until job `id` is in `state`; answers its row.
pub async fn wait_for_state(pool: &PgPool, id: JobId, state: JobState) -> JobRow {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let row = job(pool, id).await;
        if row.state == state {
            return row;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {id} stayed {} (wanted {state}): {row:?}",
            row.state
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Job `id`'s row; panics when there is none.
pub async fn job(pool: &PgPool, id: JobId) -> JobRow {
    client(pool).get(id).await.unwrap().expect("the job exists")
}

/// Waits until job `id` has at least `count` failed attempts on record; answers its row.
pub async fn wait_for_errors(pool: &PgPool, id: JobId, count: usize) -> JobRow {
    wait_until(Duration::from_secs(15), || async {
        job(pool, id).await.attempt_errors().len() >= count
    })
    .await;
    job(pool, id).await
}

/// Inserts `count` `system.noop` jobs (`{"n": i}`), one transaction each; answers their ids.
pub async fn noops(pool: &PgPool, count: usize) -> Vec<JobId> {
    let mut ids = Vec::with_capacity(count);
    for n in 0..count {
        let args = serde_json::json!({ "n": n });
        ids.push(
            insert::<standmeet_jobs::builtin::Noop>(pool, &args)
                .await
                .unwrap(),
        );
    }
    ids
}

/// A job of `kind` with `max_attempts`, inserted by plain SQL as an operator (or a
/// process that knows a kind this one does not) would; answers its id.
pub async fn job_of_kind(pool: &PgPool, kind: &str, max_attempts: i16) -> JobId {
    JobId(
        sqlx::query_scalar(
            "INSERT INTO jobs (kind, args, max_attempts) VALUES ($1, '{}', $2) RETURNING id",
        )
        .bind(kind)
        .bind(max_attempts)
        .fetch_one(pool)
        .await
        .unwrap(),
    )
}

/// Waits until every job of `ids` is `completed`.
pub async fn all_completed(pool: &PgPool, ids: &[JobId]) {
    for id in ids {
        wait_for_state(pool, *id, JobState::Completed).await;
    }
}

/// Marks job `id` completed by SQL, as an operator (or another process) might, with
/// `{"by": "hand"}` as its output.
pub async fn finish_by_hand(pool: &PgPool, id: JobId) {
    sqlx::query("UPDATE jobs SET state = 'completed', output = '{\"by\": \"hand\"}' WHERE id = $1")
        .bind(id.0)
        .execute(pool)
        .await
        .unwrap();
}

/// One caller waiting through `jobs` for `ids` up to `limit`, in a task of its own;
/// answers its outcome and how long it waited.
pub fn spawn_wait(
    jobs: &JobClient,
    ids: &[JobId],
    limit: Duration,
) -> tokio::task::JoinHandle<(Result<WaitOutcome, Error>, Duration)> {
    let (jobs, ids) = (jobs.clone(), ids.to_vec());
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let outcome = jobs.wait(&ids, limit).await;
        (outcome, started.elapsed())
    })
}

/// Waits until exactly `count` callers wait through `jobs`.
pub async fn until_waiting(jobs: &JobClient, count: usize) {
    wait_until(Duration::from_secs(10), || async {
        jobs.waiters().waiting == count
    })
    .await;
}

/// Fills the jobs table with a million finished jobs over the last two days (a day is
/// the default retention of completed jobs; two is generous), about 21,000 of them in
/// the last hour, and analyzes it as autovacuum would have long before it grew so big:
/// what the panels' queries must stay quick on.
pub async fn a_million_finished_jobs(pool: &PgPool) {
    sqlx::query(
        r#"
        INSERT INTO jobs (kind, state, attempt, created_at, scheduled_at, finalized_at)
        SELECT 'system.noop',
               (ARRAY['completed', 'completed', 'completed', 'discarded', 'cancelled'])[1 + g % 5]::job_state,
               1, at, at, at
        FROM generate_series(1, 1000000) AS g,
             LATERAL (SELECT now() - make_interval(secs => g * 0.1728)) AS t(at)
        "#,
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE jobs")
        .execute(pool)
        .await
        .unwrap();
}

/// A queue client over `pool`, knowing the queues of [`test_registry`]'s kinds, as an
/// application's state holds one.
pub fn client(pool: &PgPool) -> JobClient {
    JobClient::new(pool.clone(), 16).with_queues(test_registry(RunCounts::default()).queues())
}

/// A job as test handlers key what they remember of it: its database (each test has
/// its own, and their ids start alike) and its id. Two tests in one process never
/// share an entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JobKey {
    pub database: String,
    pub id: JobId,
}

impl JobKey {
    pub fn of(job: &JobContext) -> JobKey {
        JobKey {
            database: job
                .pool()
                .connect_options()
                .get_database()
                .unwrap_or_default()
                .to_string(),
            id: job.id,
        }
    }

    /// The key of job `id` in `pool`'s database.
    pub fn in_pool(pool: &PgPool, id: JobId) -> JobKey {
        JobKey {
            database: pool
                .connect_options()
                .get_database()
                .unwrap_or_default()
                .to_string(),
            id,
        }
    }
}

/// How often each job ran, shared by test handlers.
pub type RunCounts = Arc<Mutex<HashMap<JobId, u32>>>;

/// `test.flaky {succeed_on}`: fails its attempts before `succeed_on`, then completes
/// with `{"attempt": n}`.
pub struct Flaky;

#[derive(Serialize, Deserialize)]
pub struct FlakyArgs {
    pub succeed_on: i16,
}

impl JobKind for Flaky {
    const KIND: &'static str = "test.flaky";
    const MAX_ATTEMPTS: i16 = 3;
    type Args = FlakyArgs;
    type Output = serde_json::Value;

    async fn run(&self, job: JobContext, args: FlakyArgs) -> Result<serde_json::Value, JobError> {
        if job.attempt < args.succeed_on {
            return Err(JobError::retry(format!(
                "attempt {} failed on purpose",
                job.attempt
            )));
        }
        Ok(serde_json::json!({ "attempt": job.attempt }))
    }
}

/// `test.counted`: counts its runs (in the test's own [`RunCounts`]) and completes.
pub struct Counted(pub RunCounts);

impl JobKind for Counted {
    const KIND: &'static str = "test.counted";
    type Args = serde_json::Value;
    type Output = ();

    async fn run(&self, job: JobContext, _args: serde_json::Value) -> Result<(), JobError> {
        *self.0.lock().unwrap().entry(job.id).or_default() += 1;
        Ok(())
    }
}

/// `test.panics {until}`: panics on attempts before `until`.
pub struct Panics;

impl JobKind for Panics {
    const KIND: &'static str = "test.panics";
    type Args = serde_json::Value;
    type Output = ();

    async fn run(&self, job: JobContext, args: serde_json::Value) -> Result<(), JobError> {
        if i64::from(job.attempt) < args["until"].as_i64().unwrap_or(0) {
            panic!("boom on attempt {}", job.attempt);
        }
        Ok(())
    }
}

/// `test.slow`: takes longer than its 200 ms timeout.
pub struct Slow;

impl JobKind for Slow {
    const KIND: &'static str = "test.slow";
    const TIMEOUT: Duration = Duration::from_millis(200);
    const MAX_ATTEMPTS: i16 = 1;
    type Args = serde_json::Value;
    type Output = ();

    async fn run(&self, _job: JobContext, _args: serde_json::Value) -> Result<(), JobError> {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(())
    }
}

/// `test.action {action}`: answers with the named action (discard, cancel, snooze).
pub struct Actions;

impl JobKind for Actions {
    const KIND: &'static str = "test.action";
    type Args = serde_json::Value;
    type Output = serde_json::Value;

    async fn run(
        &self,
        job: JobContext,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, JobError> {
        // Snoozes `snoozes` times (once by default), then completes. Counted per job
        // and database, so that tests running side by side in one process do not
        // count each other's snoozes.
        static SNOOZED: Mutex<Option<HashMap<JobKey, u64>>> = Mutex::new(None);
        let snoozed_before = |key: JobKey| {
            let mut map = SNOOZED.lock().unwrap();
            let count = map.get_or_insert_with(HashMap::new).entry(key).or_default();
            *count += 1;
            *count - 1
        };
        match args["action"].as_str() {
            Some("discard") => Err(JobError::discard("cannot ever work")),
            Some("cancel") => Err(JobError::cancel("not wanted any more")),
            Some("snooze")
                if snoozed_before(JobKey::of(&job)) < args["snoozes"].as_u64().unwrap_or(1) =>
            {
                Err(JobError::snooze(Duration::from_millis(20), "not yet"))
            }
            _ => Ok(serde_json::json!({ "attempt": job.attempt })),
        }
    }
}

/// The built-in kinds plus every test kind.
pub fn test_registry(runs: RunCounts) -> Registry {
    standmeet_jobs::builtin::registry()
        .register(Flaky)
        .register(Counted(runs))
        .register(Panics)
        .register(Slow)
        .register(Actions)
}
