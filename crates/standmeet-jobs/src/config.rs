//! How the job engine of one process is set up: its queues, the backoff unit, the
//! lease, the maintenance intervals and retention. The application says which queues
//! it runs and how (StandMeet's `Settings::engine_config`, from its kinds' registry);
//! tests and benches build their own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

/// One queue: how many of its jobs run at once here, how often it looks for work when
/// no notification came, and how many claims of its jobs may be open at once.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// The queue's name, as job kinds name it.
    pub name: String,
    /// How many of its jobs run at once in this process.
    pub workers: usize,
    /// How often it looks for work when no notification came.
    pub poll_interval: Duration,
    /// Claims (see `claim`) open at once: while one is written and committed, the
    /// next ones' jobs run. Each holds a connection of the engine's pool while open,
    /// so the standard queues keep the default of two; a queue of many quick jobs
    /// drains faster with more (`bench` uses four for its queue of 1,000 workers).
    /// The count holds for the whole database: processes running the same queue share
    /// its claim slots (advisory locks), so that more processes do not make
    /// PostgreSQL juggle more claims at once. Give every process the same number.
    pub claims_in_flight: usize,
}

/// Claims of one queue open at once, unless the queue says otherwise.
pub(crate) const CLAIMS_IN_FLIGHT: usize = 2;

impl QueueConfig {
    /// The queue `name` with `workers` at once, looking every `poll_interval`, and the usual claims in flight.
    pub fn new(name: &str, workers: usize, poll_interval: Duration) -> Self {
        QueueConfig {
            name: name.to_string(),
            workers,
            poll_interval,
            claims_in_flight: CLAIMS_IN_FLIGHT,
        }
    }

    /// The same queue with `claims` claims open at once (at least one).
    pub fn with_claims_in_flight(self, claims: usize) -> Self {
        QueueConfig {
            claims_in_flight: claims.max(1),
            ..self
        }
    }
}

/// Why a [`CleanChore`] failed: whatever error its own code met.
pub type ChoreError = Box<dyn std::error::Error + Send + Sync>;

/// More cleaning for the cleaner's turns: whatever outlives its use elsewhere in the
/// application (StandMeet's old events and their deliveries), deleted on the same
/// rhythm as finished jobs. Given the pool; answers how many rows it deleted, or why
/// it could not (any error converts with `?`; the cleaner logs it and tries again at
/// its next turn).
#[derive(Clone)]
pub struct CleanChore {
    /// What it cleans, for the log.
    pub name: &'static str,
    #[allow(clippy::type_complexity)]
    /// Deletes what is past its retention; answers how many rows went.
    pub run: Arc<
        dyn Fn(PgPool) -> Pin<Box<dyn Future<Output = Result<u64, ChoreError>> + Send>>
            + Send
            + Sync,
    >,
}

impl std::fmt::Debug for CleanChore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CleanChore")
            .field("name", &self.name)
            .finish()
    }
}

#[derive(Clone, Debug)]
/// How one process runs the engine: its queues, the backoff, the lease, the chores' intervals and retention, and where it listens.
pub struct EngineConfig {
    /// The queues this process runs.
    pub queues: Vec<QueueConfig>,
    /// The backoff unit: a failed attempt n waits `retry_base × n⁴` (±10 %).
    pub retry_base: Duration,
    /// How long a running job stays ours without renewal; renewed every third of it.
    pub lease: Duration,
    /// How often the scheduler makes due `scheduled` and `retryable` jobs `available`.
    pub schedule_interval: Duration,
    /// How often the rescuer looks for running jobs whose lease ran out.
    pub rescue_interval: Duration,
    /// How often the cleaner deletes finished jobs past their retention.
    pub clean_interval: Duration,
    /// How long completed and cancelled jobs are kept.
    pub keep_completed: Duration,
    /// How long discarded jobs are kept (longer: someone may want to look at them).
    pub keep_discarded: Duration,
    /// How long running attempts may go on after a stop before they are interrupted.
    pub shutdown_grace: Duration,
    /// Who holds the jobs this process runs (`attempted_by`).
    pub worker_id: String,
    /// What else the cleaner deletes on each turn.
    pub also_clean: Vec<CleanChore>,
    /// Where the LISTEN connection goes, when not where the pool goes
    /// (`STANDMEET_LISTEN_DATABASE_URL`).
    pub listen_database_url: Option<String>,
    /// How long a claim waits for its attempts before it writes the rest `running`
    /// (20 ms, `CLAIM_WINDOW`, unless a test needs otherwise; see `claim`).
    pub claim_window: Duration,
    /// Fire the schedules of `job_schedules` (see `periodic`), reading their cron
    /// expressions in this time zone; `None`: this engine fires none.
    pub schedules: Option<jiff::tz::TimeZone>,
}

impl Default for EngineConfig {
    /// One `default` queue of ten workers that looks for work every second when no
    /// notification came; a failed attempt n waits about n⁴ seconds; leases of 30 s;
    /// completed and cancelled jobs kept a day, discarded ones a week; running attempts
    /// get 10 s to finish at a stop; no schedules fired. Change what differs:
    /// `EngineConfig { queues, ..EngineConfig::default() }`.
    fn default() -> Self {
        let lease = Duration::from_secs(30);
        EngineConfig {
            queues: vec![QueueConfig::new("default", 10, Duration::from_secs(1))],
            retry_base: Duration::from_secs(1),
            lease,
            schedule_interval: Duration::from_millis(250),
            rescue_interval: lease / 2,
            clean_interval: Duration::from_secs(300),
            keep_completed: Duration::from_secs(24 * 3_600),
            keep_discarded: Duration::from_secs(7 * 24 * 3_600),
            shutdown_grace: Duration::from_secs(10),
            worker_id: worker_id(),
            also_clean: Vec::new(),
            listen_database_url: None,
            claim_window: CLAIM_WINDOW,
            schedules: None,
        }
    }
}

impl EngineConfig {
    /// The connections an engine with this configuration needs in the pool it is
    /// given: one per claim its queues may keep open at once, and two more (for
    /// handlers' own queries and a claim's second try).
    pub fn connections_needed(&self) -> u32 {
        let claims: usize = self.queues.iter().map(|q| q.claims_in_flight).sum();
        claims as u32 + crate::pool::CONNECTIONS_BESIDE_CLAIMS
    }

    /// The most connections an engine with this configuration holds at once when it is
    /// given a pool of `given_pool` connections: those, and the few of its own pool (for
    /// the completer and the chores, which never wait behind handlers). The process's
    /// one LISTEN connection comes on top.
    pub fn connections_at_most(&self, given_pool: u32) -> u32 {
        given_pool + crate::pool::CONTROL_CONNECTIONS
    }
}

/// A claim's usual window: long enough for a quick job (a local mail, an index update,
/// a no-op) to end inside it, short enough that a slow job shows `running` at once to
/// a person.
pub(crate) const CLAIM_WINDOW: Duration = Duration::from_millis(20);

/// `<host>:<pid>:<random>`: unique per process, readable in the Tasks panel.
pub(crate) fn worker_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_else(|| "host".into());
    let nonce: u32 = rand::random();
    format!("{host}:{}:{nonce:08x}", std::process::id())
}
