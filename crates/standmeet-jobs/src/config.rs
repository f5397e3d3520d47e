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
    pub name: String,
    pub workers: usize,
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
pub const CLAIMS_IN_FLIGHT: usize = 2;

impl QueueConfig {
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

/// More cleaning for the cleaner's turns: whatever outlives its use elsewhere in the
/// application (StandMeet's old events and their deliveries), deleted on the same
/// rhythm as finished jobs. Given the pool; answers what it deleted, in words for the log.
#[derive(Clone)]
pub struct CleanChore {
    pub name: &'static str,
    #[allow(clippy::type_complexity)]
    pub run: Arc<
        dyn Fn(PgPool) -> Pin<Box<dyn Future<Output = anyhow::Result<u64>> + Send>> + Send + Sync,
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
pub struct EngineConfig {
    pub queues: Vec<QueueConfig>,
    /// The backoff unit: a failed attempt n waits `retry_base × n⁴` (±10 %).
    pub retry_base: Duration,
    /// How long a running job stays ours without renewal; renewed every third of it.
    pub lease: Duration,
    pub schedule_interval: Duration,
    pub rescue_interval: Duration,
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
    /// ([`CLAIM_WINDOW`] unless a test needs otherwise; see `claim`).
    pub claim_window: Duration,
    /// Fire the schedules of `job_schedules` (see `periodic`), reading their cron
    /// expressions in this time zone; `None`: this engine fires none.
    pub schedules: Option<jiff::tz::TimeZone>,
}

/// A claim's usual window: long enough for a quick job (a local mail, an index update,
/// a no-op) to end inside it, short enough that a slow job shows `running` at once to
/// a person.
pub const CLAIM_WINDOW: Duration = Duration::from_millis(20);

/// `<host>:<pid>:<random>`: unique per process, readable in the Tasks panel.
pub fn worker_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_else(|| "host".into());
    let nonce: u32 = rand::random();
    format!("{host}:{}:{nonce:08x}", std::process::id())
}
