//! The chores that keep the queue moving, run by every process (each statement is safe
//! to run in several at once: they lock with SKIP LOCKED or re-check in their WHERE):
//!
//! - the scheduler makes due `scheduled` and `retryable` jobs `available`;
//! - the lease renewal keeps exactly the attempts this process holds its own, picks up
//!   cancel requests whose notification was lost, stops the attempts whose jobs were
//!   taken back meanwhile (so a rescued mail is not sent twice by two workers), and
//!   says that this process is alive and which kinds it runs (`job_workers`);
//! - the rescuer takes back running jobs whose holder stopped renewing (it died), and
//!   counts the attempts of claims whose process died before it recorded them (their
//!   trace outlived their transaction; see `claim`);
//! - the cleaner deletes finished jobs past their retention, block of ids by block, and
//!   then does the other cleaning it was given (`EngineConfig::also_clean`: old events);
//! - the folder keeps the summaries of finished jobs small (`job_summaries_fold`).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::config::EngineConfig;
use super::listener::{Signals, StopReason};
use super::store;

/// Rows one statement of the scheduler, rescuer or cleaner touches at most.
const BATCH: i64 = 1_000;

/// How often the summaries of finished jobs are folded (see `job_summaries_fold`): often
/// enough that the rows of a busy minute's writers never add up to many.
const FOLD_INTERVAL: Duration = Duration::from_secs(5);

/// A process silent this long is gone: the cleaner forgets its `job_workers` row.
const WORKER_FORGOTTEN_AFTER: Duration = Duration::from_secs(24 * 3600);

pub(crate) fn spawn_all(
    pool: PgPool,
    config: Arc<EngineConfig>,
    signals: Arc<Signals>,
    kinds: Arc<Vec<String>>,
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
        let last_renewed = Arc::new(std::sync::Mutex::new(tokio::time::Instant::now()));
        every(config.lease / 3, stop.clone(), move || {
            renew_leases(
                pool.clone(),
                config.clone(),
                signals.clone(),
                kinds.clone(),
                last_renewed.clone(),
            )
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
                match store::job_count_dead_claims(&pool, BATCH, config.retry_base).await {
                    Ok((0, _)) => {}
                    Ok((counted, discarded)) => tracing::warn!(
                        counted,
                        discarded,
                        "counted attempts whose process died before it could record them"
                    ),
                    Err(err) => tracing::warn!(error = %err, "the rescuer failed"),
                }
            }
        })
    };

    let fold_pool = pool.clone();
    let clean = {
        let config = config.clone();
        every(config.clean_interval, stop.clone(), move || {
            let pool = pool.clone();
            let config = config.clone();
            async move {
                let deleted =
                    match clean_finished(&pool, config.keep_completed, config.keep_discarded).await
                    {
                        Ok(deleted) => deleted,
                        Err(err) => {
                            tracing::warn!(error = %err, "the cleaner failed");
                            0
                        }
                    };
                if deleted > 0 {
                    tracing::info!(deleted, "deleted finished jobs past their retention");
                }
                // Rows of processes that died without saying goodbye.
                let _ = store::worker_forget_silent(&pool, WORKER_FORGOTTEN_AFTER).await;
                for chore in &config.also_clean {
                    match (chore.run)(pool.clone()).await {
                        Ok(0) => {}
                        Ok(deleted) => {
                            tracing::info!(
                                deleted,
                                what = chore.name,
                                "deleted what is past its retention"
                            )
                        }
                        Err(err) => tracing::warn!(
                            error = crate::error::error_chain(&*err),
                            what = chore.name,
                            "the cleaner failed"
                        ),
                    }
                }
            }
        })
    };

    let fold = every(FOLD_INTERVAL, stop, move || {
        let pool = fold_pool.clone();
        async move {
            if let Err(err) = store::job_summaries_fold(&pool).await {
                tracing::warn!(error = %err, "cannot fold the summaries of finished jobs");
            }
        }
    });

    vec![schedule, renew, rescue, clean, fold]
}

/// One turn of the lease renewal (see the module documentation).
async fn renew_leases(
    pool: PgPool,
    config: Arc<EngineConfig>,
    signals: Arc<Signals>,
    kinds: Arc<Vec<String>>,
    last_renewed: Arc<std::sync::Mutex<tokio::time::Instant>>,
) {
    let held = signals.held_attempts();
    let renewed = if held.is_empty() {
        Ok(Vec::new())
    } else {
        store::job_renew_leases(&pool, &config.worker_id, &held, config.lease).await
    };
    match renewed {
        Ok(renewed) => {
            *last_renewed.lock().expect("not poisoned") = tokio::time::Instant::now();
            // By id: a busy process holds thousands of attempts.
            let renewed: std::collections::HashMap<_, _> =
                renewed.into_iter().map(|r| (r.id, r)).collect();
            for attempt in &held {
                match renewed.get(&attempt.id) {
                    Some(r) if r.cancel_requested => {
                        signals.stop_running(attempt.id, StopReason::Cancelled);
                    }
                    Some(_) => {}
                    // Not ours any more (taken back, or finished by its own transaction
                    // a moment ago): stop it if it still runs; it writes nothing.
                    None => {
                        signals.stop_attempt(attempt.id, attempt.attempt, StopReason::LeaseLost)
                    }
                }
            }
        }
        Err(err) => {
            tracing::warn!(error = %err, "cannot renew the leases of running jobs");
            // Unrenewed for a whole lease: the rescuer may have given these jobs to
            // another process already, so they stop here rather than run twice.
            if last_renewed.lock().expect("not poisoned").elapsed() >= config.lease {
                for attempt in &held {
                    signals.stop_attempt(attempt.id, attempt.attempt, StopReason::LeaseLost);
                }
            }
        }
    }
    let queues: Vec<String> = config.queues.iter().map(|q| q.name.clone()).collect();
    if let Err(err) = store::worker_heartbeat(&pool, &config.worker_id, &kinds, &queues).await {
        tracing::debug!(error = %err, "cannot record this process as alive");
    }
}

/// Blocks of ids the cleaner reads per statement (256 ids each).
const CLEAN_BLOCKS: i64 = 16;

/// Deletes the finished jobs past their retention: as many as the summaries say are
/// due for sure (`job_finished_due`), looking through the blocks of ids that hold
/// finished jobs, oldest first, at most once around. Answers how many it deleted.
pub async fn clean_finished(
    pool: &PgPool,
    keep_completed: Duration,
    keep_discarded: Duration,
) -> Result<u64, sqlx::Error> {
    let due = store::job_finished_due(pool, keep_completed, keep_discarded).await?;
    let mut deleted = 0;
    let mut from = 0;
    while (deleted as i64) < due {
        let (count, next) =
            store::job_delete_finished(pool, keep_completed, keep_discarded, from, CLEAN_BLOCKS)
                .await?;
        deleted += count;
        match next {
            Some(next) => from = next,
            None => break,
        }
    }
    Ok(deleted)
}

/// Runs `chore` every `interval` (the first time right away) until `stop`.
pub(crate) fn every<F, Fut>(
    interval: Duration,
    stop: CancellationToken,
    chore: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
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
