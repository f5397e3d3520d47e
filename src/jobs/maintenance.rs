//! The chores that keep the queue moving, run by every process (each statement is safe
//! to run in several at once: they lock with SKIP LOCKED or re-check in their WHERE):
//!
//! - the scheduler makes due `scheduled` and `retryable` jobs `available`;
//! - the lease renewal keeps this process's running jobs its own, and picks up cancel
//!   requests whose notification was lost;
//! - the rescuer takes back running jobs whose holder stopped renewing (it died);
//! - the cleaner deletes finished jobs past their retention, in batches.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::engine::EngineConfig;
use super::listener::{Signals, StopReason};
use super::store;

/// Rows one statement of the scheduler, rescuer or cleaner touches at most.
const BATCH: i64 = 1_000;

pub(crate) fn spawn_all(
    pool: PgPool,
    config: Arc<EngineConfig>,
    signals: Arc<Signals>,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let schedule = {
        let pool = pool.clone();
        every(config.schedule_interval, stop.clone(), move || {
            let pool = pool.clone();
            async move {
                loop {
                    match store::job_schedule_due(&pool, BATCH).await {
                        Ok(moved) if moved == BATCH as u64 => continue,
                        Ok(_) => break,
                        Err(err) => {
                            tracing::warn!(error = %err, "the scheduler failed");
                            break;
                        }
                    }
                }
            }
        })
    };

    let renew = {
        let pool = pool.clone();
        let config = config.clone();
        let signals = signals.clone();
        every(config.lease / 3, stop.clone(), move || {
            let pool = pool.clone();
            let config = config.clone();
            let signals = signals.clone();
            async move {
                match store::job_renew_leases(&pool, &config.worker_id, config.lease).await {
                    Ok(cancel_requested) => {
                        for id in cancel_requested {
                            signals.stop_running(id, StopReason::Cancelled);
                        }
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot renew the leases of running jobs")
                    }
                }
            }
        })
    };

    let rescue = {
        let pool = pool.clone();
        let config = config.clone();
        every(config.rescue_interval, stop.clone(), move || {
            let pool = pool.clone();
            let config = config.clone();
            async move {
                match store::job_rescue_expired(&pool, BATCH, config.retry_base).await {
                    Ok(0) => {}
                    Ok(rescued) => {
                        tracing::warn!(rescued, "took back running jobs whose worker was lost")
                    }
                    Err(err) => tracing::warn!(error = %err, "the rescuer failed"),
                }
            }
        })
    };

    let clean = {
        let config = config.clone();
        every(config.clean_interval, stop, move || {
            let pool = pool.clone();
            let config = config.clone();
            async move {
                let mut deleted = 0;
                loop {
                    match store::job_delete_finished(
                        &pool,
                        config.keep_completed,
                        config.keep_discarded,
                        BATCH,
                    )
                    .await
                    {
                        Ok(count) => {
                            deleted += count;
                            if count == 0 {
                                break;
                            }
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, "the cleaner failed");
                            break;
                        }
                    }
                }
                if deleted > 0 {
                    tracing::info!(deleted, "deleted finished jobs past their retention");
                }
            }
        })
    };

    vec![schedule, renew, rescue, clean]
}

/// Runs `chore` every `interval` (the first time right away) until `stop`.
fn every<F, Fut>(
    interval: Duration,
    stop: CancellationToken,
    chore: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => chore().await,
            }
        }
    })
}
