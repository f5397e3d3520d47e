//! The job engine of one process: a producer per queue, the completer, the maintenance
//! chores, all started together and stopped gracefully together.

use std::sync::Arc;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::claim::ClaimContext;
use super::completer::CompleterContext;
use super::config::EngineConfig;
use super::executor::ExecutorContext;
use super::listener::Signals;
use super::producer::{self, ProducerContext};
use super::registry::Registry;
use super::{completer, maintenance, store};

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
                worker_id: worker_id.clone(),
            },
            kinds: kinds.as_ref().clone(),
            shutdown_grace: config.shutdown_grace,
            claim: Arc::new(ClaimContext {
                pool: pool.clone(),
                signals: signals.clone(),
                worker_id,
                lease: config.lease,
                window: config.claim_window,
                notify: config.final_notification,
            }),
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

    /// Tells the engine to stop, without waiting for it: for a drop, where nothing can
    /// be awaited. Producers stop fetching and attempts wind down as in
    /// [`Engine::shutdown`], as long as the runtime they run on lives.
    pub fn stop_soon(&self) {
        self.stop.cancel();
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
