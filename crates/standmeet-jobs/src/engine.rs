//! The job engine of one process: a producer per queue, the completer, the maintenance
//! chores, all started together and stopped gracefully together.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::claim::ClaimContext;
use super::client::JobClient;
use super::completer::CompleterContext;
use super::config::EngineConfig;
use super::executor::ExecutorContext;
use super::kept::KeptConnections;
use super::listener::Signals;
use super::pool::{CONNECTIONS_BESIDE_CLAIMS, CONTROL_CONNECTIONS, pool_options};
use super::producer::{self, ProducerContext};
use super::registry::Registry;
use super::{Error, completer, maintenance, store};

/// Refuses a pool too small for the claims `config`'s queues may keep open at once,
/// with words that say how many connections it needs.
pub(crate) fn check_pool(pool: &PgPool, config: &EngineConfig) -> Result<(), Error> {
    let needed = config.connections_needed();
    let has = pool.options().get_max_connections();
    if has < needed {
        return Err(Error::Refused(format!(
            "the job engine's pool has {has} connections, but its queues may keep {} claims open at once, each holding one while its jobs run: give it at least {needed} connections",
            needed - CONNECTIONS_BESIDE_CLAIMS
        )));
    }
    Ok(())
}

/// A running engine. Dropping it does not stop it: call [`Engine::shutdown`].
pub(crate) struct Engine {
    pool: PgPool,
    control: PgPool,
    /// What the claims share, with the connections they keep between them.
    claims: Arc<ClaimContext>,
    stop: CancellationToken,
    producers: Vec<tokio::task::JoinHandle<()>>,
    completer: tokio::task::JoinHandle<()>,
    maintenance: Vec<tokio::task::JoinHandle<()>>,
    config: Arc<EngineConfig>,
}

impl Engine {
    /// Starts producers for `config.queues`, the completer and the maintenance chores.
    /// `signals` must be fed by this process's listener (`listener::Listening`).
    ///
    /// Claims and handlers use `pool`, which must have room for every claim the queues
    /// may keep open at once and more ([`EngineConfig::connections_needed`]; refused otherwise, with
    /// words that say how many). The completer, the claims' traces and the chores use a
    /// small pool of their own to the same database ([`CONTROL_CONNECTIONS`]).
    pub(crate) fn start(
        pool: PgPool,
        registry: Registry,
        config: EngineConfig,
        signals: Arc<Signals>,
    ) -> Result<Engine, Error> {
        check_pool(&pool, &config)?;
        let control = pool_options()
            .max_connections(CONTROL_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(
                (*pool.connect_options())
                    .clone()
                    .application_name("standmeet-engine"),
            );
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
        let claims = Arc::new(ClaimContext {
            pool: pool.clone(),
            // No more than the claims the queues may keep open at once, which the pool
            // has room for (`check_pool`).
            claims: KeptConnections::new(
                pool.clone(),
                (config.connections_needed() - CONNECTIONS_BESIDE_CLAIMS) as usize,
            ),
            // One: the control pool counts one connection for the claims' traces.
            traces: KeptConnections::new(control.clone(), 1),
            signals: signals.clone(),
            worker_id: worker_id.clone(),
            lease: config.lease,
            window: config.claim_window,
        });
        let (outcomes, completer) = completer::spawn(CompleterContext {
            pool: control.clone(),
            signals: signals.clone(),
            worker_id: worker_id.clone(),
            retry_base: config.retry_base,
        });
        let context = Arc::new(ProducerContext {
            executor: ExecutorContext {
                jobs: JobClient::for_engine(
                    pool.clone(),
                    signals.clone(),
                    config.queues.iter().map(|queue| queue.name.as_str()),
                ),
                registry,
                signals: signals.clone(),
                retry_base: config.retry_base,
                worker_id,
            },
            kinds: kinds.as_ref().clone(),
            shutdown_grace: config.shutdown_grace,
            claim: claims.clone(),
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
        let mut maintenance = maintenance::spawn_all(
            control.clone(),
            config.clone(),
            signals,
            kinds,
            stop.clone(),
        );
        if let Some(tz) = config.schedules.clone() {
            maintenance.push(periodic_chore(
                control.clone(),
                context.executor.registry.clone(),
                tz,
                stop.clone(),
            ));
        }
        tracing::info!(worker = %config.worker_id, queues = config.queues.len(), "the job engine started");
        Ok(Engine {
            pool,
            control,
            claims,
            stop,
            producers,
            completer,
            maintenance,
            config,
        })
    }

    pub(crate) fn worker_id(&self) -> &str {
        &self.config.worker_id
    }

    /// Tells the engine to stop, without waiting for it: for a drop, where nothing can
    /// be awaited. Producers stop fetching and attempts wind down as in
    /// [`Engine::shutdown`], as long as the runtime they run on lives.
    pub(crate) fn stop_soon(&self) {
        self.stop.cancel();
    }

    /// Stops fetching, lets running attempts finish within the grace period, stops
    /// the rest (they become `retryable`), writes every outcome, then returns.
    pub(crate) async fn shutdown(self) {
        self.stop.cancel();
        for producer in self.producers {
            let _ = producer.await;
        }
        let _ = self.completer.await;
        // No claim is open now: the kept connections go back, or the control pool
        // would wait for its one forever as it closes.
        self.claims.claims.let_go();
        self.claims.traces.let_go();
        for chore in self.maintenance {
            let _ = chore.await;
        }
        if let Err(err) = store::worker_remove(&self.pool, &self.config.worker_id).await {
            tracing::debug!(error = %err, "cannot remove this process from job_workers");
        }
        self.control.close().await;
        tracing::info!("the job engine stopped");
    }
}

/// Fires the schedules that are due, every [`PERIODIC_TICK`], until `stop`; the first
/// turn right away makes up what was missed while no process ran.
fn periodic_chore(
    pool: PgPool,
    registry: Registry,
    tz: jiff::tz::TimeZone,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let registry = Arc::new(registry);
    maintenance::every(PERIODIC_TICK, stop, move || {
        let pool = pool.clone();
        let registry = registry.clone();
        let tz = tz.clone();
        async move {
            let now = jiff::Timestamp::now();
            if let Err(err) = super::periodic::fire_due(&pool, &registry, &tz, now).await {
                tracing::warn!(
                    error = crate::error::error_chain(&err),
                    "cannot fire the schedules that are due"
                );
            }
        }
    })
}

/// How often an engine looks for schedules that are due: a firing is at most this late.
pub(crate) const PERIODIC_TICK: Duration = Duration::from_secs(1);
