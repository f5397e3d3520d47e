//! The job engine of one process: a producer per queue, the completer, the maintenance
//! chores, all started together and stopped gracefully together.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::executor::ExecutorContext;
use super::listener::Signals;
use super::producer::{self, ProducerContext};
use super::registry::Registry;
use super::completer::CompleterContext;
use super::{completer, maintenance, store};
use crate::config::Settings;

/// One queue: how many of its jobs run at once here, and how often it looks for work
/// when no notification came.
#[derive(Clone, Debug)]
pub struct QueueConfig {
    pub name: String,
    pub workers: usize,
    pub poll_interval: Duration,
}

impl QueueConfig {
    pub fn new(name: &str, workers: usize, poll_interval: Duration) -> Self {
        QueueConfig {
            name: name.to_string(),
            workers,
            poll_interval,
        }
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
}

impl EngineConfig {
    /// The queues StandMeet uses. Callers wait on `mail`, `index` and `fetch`, so those
    /// look for work every 100 ms at most even if a notification is lost.
    pub fn standard_queues() -> Vec<QueueConfig> {
        vec![
            QueueConfig::new("default", 10, Duration::from_secs(1)),
            QueueConfig::new("mail", 5, Duration::from_millis(100)),
            QueueConfig::new("index", 2, Duration::from_millis(100)),
            QueueConfig::new("fetch", 8, Duration::from_millis(100)),
        ]
    }

    pub fn from_settings(settings: &Settings) -> Self {
        EngineConfig {
            queues: Self::standard_queues(),
            retry_base: settings.retry_base,
            lease: settings.job_lease,
            schedule_interval: Duration::from_millis(250),
            rescue_interval: (settings.job_lease / 2).max(Duration::from_millis(100)),
            clean_interval: Duration::from_secs(300),
            keep_completed: settings.keep_completed,
            keep_discarded: settings.keep_discarded,
            shutdown_grace: Duration::from_secs(10),
            worker_id: worker_id(),
        }
    }
}

/// `<host>:<pid>:<random>`: unique per process, readable in the Tasks panel.
pub fn worker_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_else(|| "host".into());
    let nonce: u32 = rand::random();
    format!("{host}:{}:{nonce:08x}", std::process::id())
}

/// A running engine. Dropping it does not stop it: call [`Engine::shutdown`].
pub struct Engine {
    pool: PgPool,
    stop: CancellationToken,
    producers: Vec<tokio::task::JoinHandle<()>>,
    completer: tokio::task::JoinHandle<()>,
    maintenance: Vec<tokio::task::JoinHandle<()>>,
    config: Arc<EngineConfig>,
}

impl Engine {
    /// Starts producers for `config.queues`, the completer and the maintenance chores.
    /// `signals` must be fed by this process's listener (`listener::spawn_listener`).
    pub fn start(
        pool: PgPool,
        registry: Registry,
        config: EngineConfig,
        signals: Arc<Signals>,
    ) -> Engine {
        let config = Arc::new(config);
        for queue in registry.queues() {
            if !config.queues.iter().any(|q| q.name == queue) {
                tracing::warn!(
                    queue,
                    "a registered job kind uses a queue this engine does not run"
                );
            }
        }
        let stop = CancellationToken::new();
        let worker_id: Arc<str> = config.worker_id.as_str().into();
        let mut kinds: Vec<String> = registry.kinds().map(str::to_string).collect();
        kinds.sort();
        let kinds = Arc::new(kinds);
        let (outcomes, completer) = completer::spawn(CompleterContext {
            pool: pool.clone(),
            signals: signals.clone(),
            worker_id: worker_id.clone(),
            retry_base: config.retry_base,
        });
        let context = Arc::new(ProducerContext {
            executor: ExecutorContext {
                pool: pool.clone(),
                registry,
                signals: signals.clone(),
                retry_base: config.retry_base,
                worker_id,
            },
            kinds: kinds.as_ref().clone(),
            worker_id: config.worker_id.clone(),
            lease: config.lease,
            shutdown_grace: config.shutdown_grace,
        });
        let producers = config
            .queues
            .iter()
            .map(|queue| {
                tokio::spawn(producer::run(
                    queue.clone(),
                    context.clone(),
                    outcomes.clone(),
                    stop.clone(),
                ))
            })
            .collect();
        // The producers hold the only senders now: the completer ends after them.
        drop(outcomes);
        let maintenance =
            maintenance::spawn_all(pool.clone(), config.clone(), signals, kinds, stop.clone());
        tracing::info!(worker = %config.worker_id, queues = config.queues.len(), "the job engine started");
        Engine {
            pool,
            stop,
            producers,
            completer,
            maintenance,
            config,
        }
    }

    pub fn worker_id(&self) -> &str {
        &self.config.worker_id
    }

    /// Stops fetching, lets running attempts finish within the grace period, stops
    /// the rest (they become `retryable`), writes every outcome, then returns.
    pub async fn shutdown(self) {
        self.stop.cancel();
        for producer in self.producers {
            let _ = producer.await;
        }
        let _ = self.completer.await;
        for chore in self.maintenance {
            let _ = chore.await;
        }
        if let Err(err) = store::worker_remove(&self.pool, &self.config.worker_id).await {
            tracing::debug!(error = %err, "cannot remove this process from job_workers");
        }
        tracing::info!("the job engine stopped");
    }
}
