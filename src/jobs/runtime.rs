//! Everything about jobs that one StandMeet process runs: its LISTEN connection (which
//! the waiters need even without an engine) and its engine, started and stopped in the
//! right order.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::config::EngineConfig;
use super::engine::Engine;
use super::listener::{Signals, spawn_listener_on};
use super::registry::Registry;

/// How long start-up waits for the listener before going on without it (waits are
/// still answered then, by the once-a-second re-read).
const LISTENER_START_LIMIT: Duration = Duration::from_secs(5);

pub struct JobRuntime {
    pub signals: Arc<Signals>,
    engine: Engine,
    stop_listener: CancellationToken,
    listener: tokio::task::JoinHandle<()>,
}

impl JobRuntime {
    /// Starts the listener, waits until it listens (so the first waits are woken by
    /// notifications, and the first inserts wake the producers), then the engine.
    pub async fn start(
        pool: &PgPool,
        registry: Registry,
        config: EngineConfig,
        signals: Arc<Signals>,
    ) -> anyhow::Result<JobRuntime> {
        // Refused before anything starts: a pool too small for the queues' claims.
        super::engine::check_pool(pool, &config)?;
        let stop_listener = CancellationToken::new();
        let listen = config
            .listen_database_url
            .as_deref()
            .and_then(|url| url.parse::<sqlx::postgres::PgConnectOptions>().ok());
        let listener = spawn_listener_on(pool, listen, signals.clone(), stop_listener.clone());
        let listening = async {
            while !signals.listener_connected() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        if tokio::time::timeout(LISTENER_START_LIMIT, listening)
            .await
            .is_err()
        {
            tracing::warn!("the job listener is not connected yet; starting anyway");
        }
        let engine = match Engine::start(pool.clone(), registry, config, signals.clone()) {
            Ok(engine) => engine,
            Err(err) => {
                stop_listener.cancel();
                let _ = listener.await;
                return Err(err);
            }
        };
        Ok(JobRuntime {
            signals,
            engine,
            stop_listener,
            listener,
        })
    }

    pub fn worker_id(&self) -> &str {
        self.engine.worker_id()
    }

    /// Tells the engine and the listener to stop, without waiting (see
    /// [`Engine::stop_soon`]); [`JobRuntime::shutdown`] is the graceful way.
    pub fn stop_soon(&self) {
        self.engine.stop_soon();
        self.stop_listener.cancel();
    }

    /// Stops the engine gracefully (see [`Engine::shutdown`]), then the listener.
    pub async fn shutdown(self) {
        self.engine.shutdown().await;
        self.stop_listener.cancel();
        let _ = self.listener.await;
    }
}
