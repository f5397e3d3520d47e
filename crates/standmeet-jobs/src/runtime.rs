//! Everything about jobs that one process runs: its LISTEN connection (which the
//! waiters need even without an engine) and its engine, started and stopped in the
//! right order.

use std::time::Duration;

use sqlx::PgPool;

use super::Error;
use super::client::JobClient;
use super::config::EngineConfig;
use super::engine::Engine;
use super::listener::Listening;
use super::registry::Registry;

/// How long start-up waits for the listener before going on without it (waits are
/// still answered then, by the once-a-second re-read).
const LISTENER_START_LIMIT: Duration = Duration::from_secs(5);

/// A process's job engine and its LISTEN connection, running.
pub struct JobRuntime {
    engine: Engine,
    listening: Listening,
    signals: std::sync::Arc<super::listener::Signals>,
}

impl JobRuntime {
    /// Options for the pool an engine is given (set its size and connection from
    /// these): sqlx tries a connection with a round trip only after it sat idle a
    /// second, not on every use (see `pool::pool_options`).
    pub fn pool_options() -> sqlx::postgres::PgPoolOptions {
        super::pool::pool_options()
    }

    /// Starts the listener for `client` (whose waiters and subscribers it wakes), waits
    /// until it listens (so the first waits are woken by notifications, and the first
    /// inserts wake the producers), then the engine, running `registry`'s kinds on
    /// `pool`. Refuses, before anything starts, a pool too small for the queues' claims
    /// (see [`EngineConfig::connections_needed`](super::EngineConfig::connections_needed)).
    pub async fn start(
        pool: &PgPool,
        registry: Registry,
        config: EngineConfig,
        client: &JobClient,
    ) -> Result<JobRuntime, Error> {
        super::engine::check_pool(pool, &config)?;
        let signals = client.signals().clone();
        let listen = config
            .listen_database_url
            .as_deref()
            .and_then(|url| url.parse::<sqlx::postgres::PgConnectOptions>().ok());
        let listening = Listening::start(pool, listen, signals.clone());
        let connected = async {
            while !signals.listener_connected() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        if tokio::time::timeout(LISTENER_START_LIMIT, connected)
            .await
            .is_err()
        {
            tracing::warn!("the job listener is not connected yet; starting anyway");
        }
        let engine = match Engine::start(pool.clone(), registry, config, signals.clone()) {
            Ok(engine) => engine,
            Err(err) => {
                listening.stop().await;
                return Err(err);
            }
        };
        Ok(JobRuntime {
            engine,
            listening,
            signals,
        })
    }

    /// Who holds the jobs this engine runs (`attempted_by`).
    pub fn worker_id(&self) -> &str {
        self.engine.worker_id()
    }

    /// How many attempts run in this process now.
    pub fn running_here(&self) -> usize {
        self.signals.running_count()
    }

    /// Tells the engine and the listener to stop, without waiting: for a drop, where
    /// nothing can be awaited ([`JobRuntime::shutdown`] is the graceful way). The engine
    /// claims nothing more and its attempts wind down as in a shutdown, as long as the
    /// tokio runtime they run on lives.
    pub fn stop_soon(&self) {
        self.engine.stop_soon();
        self.listening.stop_soon();
    }

    /// Stops the engine gracefully (running attempts get the configured grace, then
    /// are interrupted and recorded `retryable`), then the listener.
    pub async fn shutdown(self) {
        self.engine.shutdown().await;
        self.listening.stop().await;
    }
}
