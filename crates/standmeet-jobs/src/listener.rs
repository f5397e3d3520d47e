//! The one LISTEN connection of a process, and what its notifications wake.
//!
//! The connection is dedicated: it comes from a pool of its own with room for exactly
//! one connection, runs nothing but `LISTEN`, and is never inside a transaction (a
//! connection in a transaction does not get notifications until it ends).
//!
//! - `standmeet_job_insert` (payload: a queue) wakes that queue's producer at once.
//! - `standmeet_job_cancel` (payload: a job id) stops that job's attempt if this
//!   process runs it.
//! - `standmeet_job_final` (payload: a job id) wakes the waiters of that job.
//!
//! Notifications sent while the connection is down are lost, so after every reconnect
//! every producer is woken (they look for work anyway), the waited-for jobs are re-read
//! (and once a second regardless), and lease renewal re-reads cancel requests.
//!
//! A connection can also go silent without breaking (a NAT or a load balancer that
//! dropped it, a network that swallows its bytes): nothing tells the socket, and TCP
//! keepalives do not help when something on the way still acknowledges. So after
//! five seconds (`PING_AFTER_QUIET`) without a word the listener asks the server for one
//! (`SELECT 1` on the same connection); no answer within three (`PING_ANSWER_WITHIN`) and it
//! takes the connection for lost and connects again: a silence is noticed within ten
//! seconds. The silent connection is closed without the pool's usual goodbye ping,
//! which would wait for an answer that never comes.

use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::store::HeldAttempt;
use super::waiters::Waiters;
use super::{JobId, channels};

/// Why a running attempt is being stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum StopReason {
    None = 0,
    /// An admin cancelled the job: the attempt ends `cancelled`.
    Cancelled = 1,
    /// The process is shutting down: the attempt ends `retryable`.
    Shutdown = 2,
    /// This process no longer holds the job (rescued after its lease ran out): the
    /// attempt stops and writes nothing; whoever holds the job now decides.
    LeaseLost = 3,
}

/// A job running in this process, as the listener and the lease renewal see it.
#[derive(Clone)]
pub(crate) struct RunningJob {
    pub token: CancellationToken,
    /// The attempt it runs: a job rescued from this process may run here again (a new
    /// attempt) while the old attempt winds down.
    attempt: i16,
    /// Which registration this is: two attempts of one job can even share a number
    /// here (a claim whose write was lost never counted its attempt, and the job can be
    /// taken again while that attempt winds down), and each must unregister only
    /// itself.
    serial: u64,
    /// The claim it runs in (`Claim::serial`), if any.
    claim: Option<u64>,
    reason: Arc<AtomicU8>,
}

impl RunningJob {
    pub(crate) fn stop(&self, reason: StopReason) {
        // The first reason wins: a shutdown does not turn an admin's cancel into a retry.
        let _ = self.reason.compare_exchange(
            StopReason::None as u8,
            reason as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.token.cancel();
    }

    pub(crate) fn reason(&self) -> StopReason {
        match self.reason.load(Ordering::Acquire) {
            1 => StopReason::Cancelled,
            2 => StopReason::Shutdown,
            3 => StopReason::LeaseLost,
            _ => StopReason::None,
        }
    }
}

/// What notifications (and the engine itself) signal within one process: queue
/// wake-ups, the jobs running here, the waiters, and whether the listener is connected.
/// Shared by the listener, the producers, the completer and the maintenance loops.
pub(crate) struct Signals {
    // std Mutexes: they are held for a map lookup only, never across an await.
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    running: Mutex<FxHashMap<JobId, RunningJob>>,
    /// Numbers the registrations of running attempts (`RunningJob::serial`).
    registrations: AtomicU64,
    /// The attempts this process holds: fetched and not yet recorded (running, or with
    /// an outcome waiting for the completer). Exactly these leases are renewed, so an
    /// attempt whose outcome was given up on is not kept alive, and the rescuer takes
    /// its job back when the lease runs out.
    held: Mutex<FxHashMap<JobId, i16>>,
    connected: AtomicBool,
    /// Whether a listener runs for these signals (connected or reconnecting).
    listening: AtomicBool,
    /// Callers waiting for jobs to finish.
    pub waiters: Arc<Waiters>,
    /// Asks the resync task to re-read the waited-for jobs now.
    resync_now: Notify,
    /// Attempts this process has recorded (written by its completer, or completed by
    /// their handler's own transaction).
    recorded: AtomicU64,
    /// Tells subscribers (see [`FinishedJobs`]) of every job the listener hears finish,
    /// and of reconnects, after which they should re-read what they follow.
    finished: broadcast::Sender<Finished>,
}

/// What a subscription to finished jobs hears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// This job reached a terminal state (`standmeet_job_final`).
    Job(JobId),
    /// Some notifications may have been missed (the LISTEN connection was down, or this
    /// subscriber fell behind): re-read the jobs you follow.
    MayHaveMissed,
}

/// A subscription to the jobs this process hears finish ([`JobClient::finished_jobs`](
/// super::JobClient::finished_jobs)). A subscriber that falls more than
/// 4,096 finished jobs behind hears [`Finished::MayHaveMissed`] instead of what it missed.
pub struct FinishedJobs(broadcast::Receiver<Finished>);

impl FinishedJobs {
    /// The next finished job; `None` once every handle on the process's signals (every
    /// clone of the client, the runtime) is gone.
    pub async fn next(&mut self) -> Option<Finished> {
        match self.0.recv().await {
            Ok(news) => Some(news),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(Finished::MayHaveMissed),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

/// How far a subscriber to finished jobs may fall behind before it hears
/// [`Finished::MayHaveMissed`].
pub(crate) const FINISHED_BACKLOG: usize = 4_096;

impl Signals {
    /// Signals with room for `max_waiters` waits at once.
    pub(crate) fn new(max_waiters: usize) -> Arc<Self> {
        Arc::new(Signals {
            queues: Mutex::default(),
            running: Mutex::default(),
            registrations: AtomicU64::new(0),
            held: Mutex::default(),
            connected: AtomicBool::new(false),
            listening: AtomicBool::new(false),
            waiters: Waiters::new(max_waiters),
            resync_now: Notify::new(),
            recorded: AtomicU64::new(0),
            finished: broadcast::channel(FINISHED_BACKLOG).0,
        })
    }

    /// The wake-up of `queue`; a wake with nobody waiting is kept for the next wait,
    /// and many wakes before a wait count as one (a natural debounce).
    pub(crate) fn queue_wakeup(&self, queue: &str) -> Arc<Notify> {
        self.queues
            .lock()
            .expect("the queue map is never poisoned")
            .entry(queue.to_string())
            .or_default()
            .clone()
    }

    pub(crate) fn wake_queue(&self, queue: &str) {
        let notify = self
            .queues
            .lock()
            .expect("not poisoned")
            .get(queue)
            .cloned();
        if let Some(notify) = notify {
            notify.notify_one();
        }
    }

    pub(crate) fn wake_all_queues(&self) {
        let all: Vec<_> = self
            .queues
            .lock()
            .expect("not poisoned")
            .values()
            .cloned()
            .collect();
        for notify in all {
            notify.notify_one();
        }
    }

    /// Registers attempt `attempt` of job `id` as running here (in the claim numbered
    /// `claim`, if any), to be stopped by a cancel, the lease renewal or shutdown.
    pub(crate) fn register_running(
        &self,
        id: JobId,
        attempt: i16,
        claim: Option<u64>,
    ) -> RunningJob {
        let job = RunningJob {
            token: CancellationToken::new(),
            attempt,
            serial: self.registrations.fetch_add(1, Ordering::Relaxed),
            claim,
            reason: Arc::new(AtomicU8::new(StopReason::None as u8)),
        };
        self.running
            .lock()
            .expect("not poisoned")
            .insert(id, job.clone());
        job
    }

    /// Forgets `job` (as registered for `id`), unless a later attempt of the job
    /// registered since.
    pub(crate) fn unregister_running(&self, id: JobId, job: &RunningJob) {
        let mut running = self.running.lock().expect("not poisoned");
        if running.get(&id).is_some_and(|now| now.serial == job.serial) {
            running.remove(&id);
        }
    }

    /// Stops the attempt of job `id` if it runs in this process.
    pub(crate) fn stop_running(&self, id: JobId, reason: StopReason) -> bool {
        let job = self.running.lock().expect("not poisoned").get(&id).cloned();
        match job {
            Some(job) => {
                job.stop(reason);
                true
            }
            None => false,
        }
    }

    /// Stops attempt `attempt` of job `id` if it runs in this process.
    pub(crate) fn stop_attempt(&self, id: JobId, attempt: i16, reason: StopReason) {
        let job = self.running.lock().expect("not poisoned").get(&id).cloned();
        if let Some(job) = job.filter(|job| job.attempt == attempt) {
            job.stop(reason);
        }
    }

    /// Stops the attempt of job `id` that runs in the claim numbered `claim`, if that is
    /// the attempt of the job registered here (a later attempt of the job, from another
    /// claim, is left alone).
    pub(crate) fn stop_in_claim(&self, id: JobId, claim: u64, reason: StopReason) {
        let job = self.running.lock().expect("not poisoned").get(&id).cloned();
        if let Some(job) = job.filter(|job| job.claim == Some(claim)) {
            job.stop(reason);
        }
    }

    /// Records that this process now holds these attempts (a producer just fetched them).
    pub(crate) fn hold(&self, attempts: impl IntoIterator<Item = HeldAttempt>) {
        let mut held = self.held.lock().expect("not poisoned");
        for attempt in attempts {
            held.insert(attempt.id, attempt.attempt);
        }
    }

    /// Records that this process is done with attempt `attempt` of job `id` (its outcome
    /// is written, or was given up on).
    pub(crate) fn release(&self, id: JobId, attempt: i16) {
        self.release_all([(id, attempt)]);
    }

    /// [`Signals::release`] for many attempts, under one lock.
    pub(crate) fn release_all(&self, attempts: impl IntoIterator<Item = (JobId, i16)>) {
        let mut held = self.held.lock().expect("not poisoned");
        for (id, attempt) in attempts {
            if held.get(&id) == Some(&attempt) {
                held.remove(&id);
            }
        }
    }

    /// The attempts this process holds now.
    pub(crate) fn held_attempts(&self) -> Vec<HeldAttempt> {
        self.held
            .lock()
            .expect("not poisoned")
            .iter()
            .map(|(id, attempt)| HeldAttempt {
                id: *id,
                attempt: *attempt,
            })
            .collect()
    }

    /// Stops every attempt running in this process.
    pub(crate) fn stop_all_running(&self, reason: StopReason) {
        let all: Vec<_> = self
            .running
            .lock()
            .expect("not poisoned")
            .values()
            .cloned()
            .collect();
        for job in all {
            job.stop(reason);
        }
    }

    pub(crate) fn running_count(&self) -> usize {
        self.running.lock().expect("not poisoned").len()
    }

    /// How many attempt outcomes this process has recorded so far.
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    pub(crate) fn add_recorded(&self, count: u64) {
        self.recorded.fetch_add(count, Ordering::Relaxed);
    }

    /// A subscription to the jobs the listener hears finish.
    pub(crate) fn finished_jobs(&self) -> FinishedJobs {
        FinishedJobs(self.finished.subscribe())
    }

    /// Whether the LISTEN connection is up.
    pub(crate) fn listener_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// How the LISTEN connection stands.
    pub(crate) fn listener_state(&self) -> ListenerState {
        if self.connected.load(Ordering::Acquire) {
            ListenerState::Connected
        } else if self.listening.load(Ordering::Acquire) {
            ListenerState::Reconnecting
        } else {
            ListenerState::Stopped
        }
    }

    fn dispatch(&self, channel: &str, payload: &str) {
        match channel {
            channels::INSERT => self.wake_queue(payload),
            channels::CANCEL => {
                if let Ok(id) = payload.parse::<i64>() {
                    self.stop_running(JobId(id), StopReason::Cancelled);
                }
            }
            channels::FINAL => {
                if let Ok(id) = payload.parse::<i64>() {
                    self.waiters.job_finished(JobId(id));
                    // Nobody subscribed is fine: the send then has nobody to tell.
                    let _ = self.finished.send(Finished::Job(JobId(id)));
                }
            }
            _ => {}
        }
    }

    fn after_reconnect(&self) {
        self.wake_all_queues();
        self.resync_now.notify_one();
        let _ = self.finished.send(Finished::MayHaveMissed);
    }
}

/// How a process's LISTEN connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerState {
    /// Listening: notifications arrive.
    Connected,
    /// A listener runs but has no connection now: it is connecting again.
    Reconnecting,
    /// No listener runs (a process that only inserts and reads).
    Stopped,
}

/// How long the LISTEN connection may be quiet before the listener asks the server for
/// a word (see the module documentation).
pub(crate) const PING_AFTER_QUIET: Duration = Duration::from_secs(5);
/// How long that word may take before the connection counts as lost.
pub(crate) const PING_ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// How often the waited-for jobs are re-read even when no reconnect happened.
const RESYNC_EVERY: Duration = Duration::from_secs(1);
/// How often they are re-read while the LISTEN connection is down.
const RESYNC_WHILE_DISCONNECTED: Duration = Duration::from_millis(100);

/// The longest pause between two reconnection attempts: a failed attempt costs the
/// server nothing, and after a failover the listener should be back within a second
/// of the new primary answering.
const MAX_RECONNECT_DELAY: Duration = Duration::from_millis(500);

/// The process's LISTEN connection at work ([`JobClient::listen`](super::JobClient::listen),
/// or the one [`JobRuntime`](super::JobRuntime) starts), until [`Listening::stop`].
/// Dropped without [`Listening::stop`], it stops without waiting (an early return must
/// not leave a connection reconnecting forever).
pub struct Listening {
    stop: CancellationToken,
    /// `None` only once `stop` took it to wait for it.
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Listening {
    pub(crate) fn start(
        pool: &PgPool,
        listen: Option<PgConnectOptions>,
        signals: Arc<Signals>,
    ) -> Listening {
        let stop = CancellationToken::new();
        let task = spawn_listener_on(pool, listen, signals, stop.clone());
        Listening {
            stop,
            task: Some(task),
        }
    }

    /// Tells the listener to stop, without waiting.
    pub(crate) fn stop_soon(&self) {
        self.stop.cancel();
    }

    /// Stops listening, and waits until the connection is closed.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Runs the LISTEN connection until `stop`, reconnecting with a capped backoff, and
/// the task that re-reads waited-for jobs after reconnects and once a second (through
/// `pool`, never through the LISTEN connection). The connection goes to `listen` when
/// given (`STANDMEET_LISTEN_DATABASE_URL`: a direct connection to the server, where
/// `pool` goes through a transaction-pooling PgBouncer, which cannot keep a LISTEN).
fn spawn_listener_on(
    pool: &PgPool,
    listen: Option<PgConnectOptions>,
    signals: Arc<Signals>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let resync = tokio::spawn(resync_waiters(pool.clone(), signals.clone(), stop.clone()));
    // Its statements (LISTEN, the ping, UNLISTEN) are not logged: on a silent
    // connection they are slow by nature, and the listener says so itself.
    let options = listen
        .unwrap_or_else(|| (*pool.connect_options()).clone())
        .application_name("standmeet-listener")
        .disable_statement_logging();
    // A pool of one, only for this connection, so it never takes one of the app's; a
    // new one for every connection. (A listener let go runs `UNLISTEN *` first and
    // waits for the answer: on a silent connection that never comes, and the old pool's
    // one place stays taken. That task and its socket end when the network says the
    // connection is gone; the listener does not wait for it.)
    let new_pool = move || {
        PgPoolOptions::new()
            .max_connections(1)
            // A connection that does not come up in this time is tried again (through a
            // silent network a connect would otherwise wait half a minute).
            .acquire_timeout(Duration::from_secs(5))
            // Never used again once let go (it broke, went silent, or the listener
            // stops): closed, without the goodbye ping that would wait on a silent one.
            .after_release(|_, _| Box::pin(async { Ok(false) }))
            .connect_lazy_with(options.clone())
    };
    signals.listening.store(true, Ordering::Release);
    tokio::spawn(async move {
        let mut delay = Duration::from_millis(50);
        loop {
            let own_pool = new_pool();
            let connected = tokio::select! {
                _ = stop.cancelled() => break,
                listener = connect(&own_pool) => listener,
            };
            let mut listener = match connected {
                Ok(listener) => listener,
                Err(err) => {
                    signals.connected.store(false, Ordering::Release);
                    tracing::warn!(error = %err, retry_in = ?delay, "the job listener cannot connect");
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(MAX_RECONNECT_DELAY);
                    continue;
                }
            };
            signals.connected.store(true, Ordering::Release);
            delay = Duration::from_millis(50);
            signals.after_reconnect();

            // Receive until the connection breaks or goes silent. One timer for the
            // quiet spell, not one per notification (a timer armed and dropped for each
            // of a drain's tens of thousands of notifications a second was a few
            // percent of the engine's CPU): when it fires, it is pushed on if a
            // notification came meanwhile, and only a real silence pings.
            let quiet = tokio::time::sleep(PING_AFTER_QUIET);
            tokio::pin!(quiet);
            let mut last_heard = tokio::time::Instant::now();
            loop {
                let received = tokio::select! {
                    _ = stop.cancelled() => {
                        signals.connected.store(false, Ordering::Release);
                        signals.listening.store(false, Ordering::Release);
                        drop(listener);
                        let _ = resync.await;
                        close_soon(own_pool).await;
                        return;
                    }
                    received = listener.try_recv() => received,
                    _ = quiet.as_mut() => {
                        let quiet_until = last_heard + PING_AFTER_QUIET;
                        if quiet_until > tokio::time::Instant::now() {
                            quiet.as_mut().reset(quiet_until);
                            continue;
                        }
                        let answered = tokio::time::timeout(
                            PING_ANSWER_WITHIN,
                            sqlx::query("SELECT 1").execute(&mut listener),
                        )
                        .await;
                        match answered {
                            Ok(Ok(_)) => {
                                last_heard = tokio::time::Instant::now();
                                quiet.as_mut().reset(last_heard + PING_AFTER_QUIET);
                                continue;
                            }
                            Ok(Err(err)) => {
                                tracing::warn!(error = %err, "the job listener lost its connection");
                            }
                            Err(_) => {
                                tracing::warn!(
                                    quiet_for = ?(PING_AFTER_QUIET + PING_ANSWER_WITHIN),
                                    "the job listener's connection went silent; connecting again"
                                );
                            }
                        }
                        signals.connected.store(false, Ordering::Release);
                        break;
                    }
                };
                match received {
                    Ok(Some(notification)) => {
                        last_heard = tokio::time::Instant::now();
                        signals.dispatch(notification.channel(), notification.payload())
                    }
                    Ok(None) => {
                        // The connection broke. Reconnect ourselves (rather than let sqlx
                        // do it inside the next receive, where we could not tell when it
                        // is back): until then waiters are answered by quick re-reads,
                        // and once listening again, everything is re-read.
                        tracing::info!("the job listener lost its connection; reconnecting");
                        signals.connected.store(false, Ordering::Release);
                        break;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "the job listener lost its connection");
                        signals.connected.store(false, Ordering::Release);
                        break;
                    }
                }
            }
        }
        signals.connected.store(false, Ordering::Release);
        signals.listening.store(false, Ordering::Release);
        let _ = resync.await;
    })
}

/// Closes the listener's pool, waiting a moment at most: a connection that went silent
/// would keep it open forever.
async fn close_soon(pool: PgPool) {
    let _ = tokio::time::timeout(Duration::from_secs(1), pool.close()).await;
}

async fn resync_waiters(pool: PgPool, signals: Arc<Signals>, stop: CancellationToken) {
    loop {
        // While the LISTEN connection is down, every notification is lost: re-read
        // often, so a job that finishes then still answers its waiter within ~100 ms.
        let pause = if signals.listener_connected() {
            RESYNC_EVERY
        } else {
            RESYNC_WHILE_DISCONNECTED
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
            _ = signals.resync_now.notified() => {}
        }
        if let Err(err) = signals.waiters.resync(&pool).await {
            tracing::debug!(error = %err, "cannot re-read the waited-for jobs");
        }
    }
}

async fn connect(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.ignore_pool_close_event(true);
    listener
        .listen_all([channels::INSERT, channels::CANCEL, channels::FINAL])
        .await?;
    Ok(listener)
}
