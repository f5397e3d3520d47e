//! Live job states for the browser's chips (`GET /api/live`, Server-Sent Events): one
//! hub per process, fed by the jobs the process hears finish
//! ([`JobClient::finished_jobs`]).
//!
//! A stream says which jobs it follows; the hub keeps, for every followed job, the last
//! state it knows and how many streams follow it. Streams hold no database connection:
//! - a move into a terminal state arrives as `standmeet_job_final` on the LISTEN
//!   connection, which the job client passes on; the hub re-reads those jobs at once (one query for all of them) and
//!   sends what changed to every stream;
//! - other moves (`running`, `retryable`) are found by one shared re-read per process
//!   of the followed unfinished jobs, every [`REREAD_EVERY`];
//! - a stream's first states come from one query when it opens, then the hub.
//!
//! Every change the hub sees gets a sequence number; a stream sends a job's change only
//! when it is newer than what it sent for that job, so a first state read while a
//! change was on its way never overtakes it.
//!
//! A stream may also follow the access requests (`/admin/access-requests` keeps its
//! list up to date with it): the hub keeps the newest request's id, re-read once per
//! process every [`REREAD_EVERY`] while any stream follows it, and each such stream
//! sends it when it changes. A visitor's request shows on an open list within a second.
//!
//! A stream also ends when its session does, or no longer signs anybody in (its admin
//! was removed, or changed the password after this sign-in): the hub checks the
//! followed sessions in one query every [`SESSION_CHECK_EVERY`] (and a sign-out in this
//! process ends them at once), and every stream ends when the process stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use standmeet_jobs::listener::Finished;
use standmeet_jobs::{JobClient, JobId};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, broadcast, watch};
use tokio_util::sync::CancellationToken;

/// A job as a stream sends it: `data: {"id","state","attempt","errors_count"}`.
pub use standmeet_jobs::JobProgress as LiveJob;

/// How often the followed unfinished jobs are re-read for their non-terminal moves.
pub const REREAD_EVERY: Duration = Duration::from_millis(500);
/// How often the followed sessions are checked.
pub const SESSION_CHECK_EVERY: Duration = Duration::from_secs(5);

/// A change the hub saw, numbered in the order it saw them.
#[derive(Clone, Debug)]
pub struct LiveChange {
    pub seq: u64,
    pub job: LiveJob,
}

#[derive(Default)]
struct Followed {
    streams: usize,
    last: Option<LiveChange>,
}

/// Who opened a stream: the session, and the admin it signed in when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Follower {
    /// The tower-sessions id.
    pub session: String,
    pub admin: i64,
    /// When the session signed in, in Unix microseconds (`guard::SESSION_SIGNED_IN_AT`).
    pub signed_in_at: i64,
}

/// A session's open streams: who, and the tokens that end its streams.
struct SessionStreams {
    follower: Follower,
    streams: Vec<(u64, CancellationToken)>,
}

#[derive(Default)]
struct Inner {
    followed: HashMap<JobId, Followed>,
    next_seq: u64,
    /// The open streams by session.
    sessions: HashMap<String, SessionStreams>,
    next_stream: u64,
}

/// The process's live hub (see the module documentation).
pub struct LiveJobs {
    // A std Mutex: held for map work only, never across an await.
    inner: Mutex<Inner>,
    changes: broadcast::Sender<LiveChange>,
    /// Jobs to re-read now (a terminal notification, a reconnect).
    reread_now: Notify,
    dirty: Mutex<Vec<JobId>>,
    streams: Arc<Semaphore>,
    max_streams: usize,
    /// Ends every stream (the process is stopping).
    closing: CancellationToken,
    /// The newest access request's id (0: none, or not read yet), for the streams that
    /// follow the requests; read only while one does.
    newest_request: watch::Sender<i64>,
}

/// Why a stream could not open.
#[derive(Debug, PartialEq, Eq)]
pub enum LiveRefusal {
    /// `STANDMEET_MAX_LIVE_CLIENTS` streams are open in this process already.
    Full(usize),
    /// The process is stopping.
    Closing,
}

/// One open stream's hold on the hub: it follows its jobs until dropped.
pub struct LiveFollow {
    hub: Arc<LiveJobs>,
    ids: Vec<JobId>,
    stream: u64,
    session: String,
    /// Ends this stream: its session ended, or the process is stopping.
    pub ended: CancellationToken,
    pub changes: broadcast::Receiver<LiveChange>,
    _permit: OwnedSemaphorePermit,
}

impl LiveJobs {
    pub fn new(max_streams: usize) -> Arc<Self> {
        let (changes, _) = broadcast::channel(4_096);
        Arc::new(LiveJobs {
            inner: Mutex::default(),
            changes,
            reread_now: Notify::new(),
            dirty: Mutex::default(),
            streams: Arc::new(Semaphore::new(max_streams)),
            max_streams,
            closing: CancellationToken::new(),
            newest_request: watch::Sender::new(0),
        })
    }

    /// Opens a stream of `follower` that follows `ids`: its receiver is subscribed
    /// before anything is read, so no change after [`LiveJobs::current`] is missed.
    pub fn follow(
        self: &Arc<Self>,
        ids: &[JobId],
        follower: &Follower,
    ) -> Result<LiveFollow, LiveRefusal> {
        let session = follower.session.as_str();
        if self.closing.is_cancelled() {
            return Err(LiveRefusal::Closing);
        }
        let permit = self
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| LiveRefusal::Full(self.max_streams))?;
        let changes = self.changes.subscribe();
        let ended = self.closing.child_token();
        let mut inner = self.inner.lock().expect("never poisoned");
        for id in ids {
            inner.followed.entry(*id).or_default().streams += 1;
        }
        inner.next_stream += 1;
        let stream = inner.next_stream;
        inner
            .sessions
            .entry(session.to_string())
            .or_insert_with(|| SessionStreams {
                follower: follower.clone(),
                streams: Vec::new(),
            })
            .streams
            .push((stream, ended.clone()));
        Ok(LiveFollow {
            hub: self.clone(),
            ids: ids.to_vec(),
            stream,
            session: session.to_string(),
            ended,
            changes,
            _permit: permit,
        })
    }

    /// The newest access request's id as the hub knows it, and each change after: a
    /// stream that follows the requests holds this (and the hub reads it while any does).
    pub fn follow_requests(&self) -> watch::Receiver<i64> {
        self.newest_request.subscribe()
    }

    /// Takes the newest access request's id as just read; streams hear of a change.
    pub fn learn_newest_request(&self, newest: i64) {
        self.newest_request.send_if_modified(|known| {
            let changed = *known != newest;
            *known = newest;
            changed
        });
    }

    /// Whether any stream follows the access requests.
    fn requests_followed(&self) -> bool {
        self.newest_request.receiver_count() > 0
    }

    /// The last known state of each of `ids` (those the hub knows).
    pub fn current(&self, ids: &[JobId]) -> Vec<LiveChange> {
        let inner = self.inner.lock().expect("never poisoned");
        ids.iter()
            .filter_map(|id| inner.followed.get(id)?.last.clone())
            .collect()
    }

    /// Which of `ids` the hub has no state for yet.
    pub fn unknown(&self, ids: &[JobId]) -> Vec<JobId> {
        let inner = self.inner.lock().expect("never poisoned");
        ids.iter()
            .filter(|id| inner.followed.get(id).is_none_or(|f| f.last.is_none()))
            .copied()
            .collect()
    }

    /// Takes freshly read states: each that differs from the last known one is numbered
    /// and sent to every stream.
    pub fn learn(&self, jobs: Vec<LiveJob>) {
        let mut inner = self.inner.lock().expect("never poisoned");
        for job in jobs {
            let seq = inner.next_seq + 1;
            let Some(followed) = inner.followed.get_mut(&JobId(job.id)) else {
                continue;
            };
            if followed.last.as_ref().is_some_and(|last| last.job == job) {
                continue;
            }
            let change = LiveChange { seq, job };
            followed.last = Some(change.clone());
            inner.next_seq = seq;
            // Nobody listening is fine: the stream that asked is subscribed, others
            // may have gone.
            let _ = self.changes.send(change);
        }
    }

    /// A followed job reached a terminal state (its notification): re-read it now.
    pub fn job_finished(&self, id: JobId) {
        let followed = self
            .inner
            .lock()
            .expect("never poisoned")
            .followed
            .contains_key(&id);
        if followed {
            self.dirty.lock().expect("never poisoned").push(id);
            self.reread_now.notify_one();
        }
    }

    /// Notifications may have been lost (the LISTEN connection was down): re-read all.
    pub fn reread_all(&self) {
        self.reread_now.notify_one();
    }

    /// Ends the streams of `session` now (it signed out in this process).
    pub fn end_session(&self, session: &str) {
        let ended = self
            .inner
            .lock()
            .expect("never poisoned")
            .sessions
            .remove(session);
        for (_, token) in ended.into_iter().flat_map(|session| session.streams) {
            token.cancel();
        }
    }

    /// Ends every stream and opens no more (the process is stopping).
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// How many streams are open in this process.
    pub fn open_streams(&self) -> usize {
        self.max_streams - self.streams.available_permits()
    }

    /// The jobs to re-read on a turn: the ones a notification named, and every followed
    /// job that is not known to be finished.
    fn to_reread(&self) -> Vec<JobId> {
        let mut ids = std::mem::take(&mut *self.dirty.lock().expect("never poisoned"));
        let inner = self.inner.lock().expect("never poisoned");
        ids.extend(
            inner
                .followed
                .iter()
                .filter(|(_, f)| f.last.as_ref().is_none_or(|c| !c.job.state.is_terminal()))
                .map(|(id, _)| *id),
        );
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn followers(&self) -> Vec<Follower> {
        self.inner
            .lock()
            .expect("never poisoned")
            .sessions
            .values()
            .map(|session| session.follower.clone())
            .collect()
    }

    fn unfollow(&self, ids: &[JobId], session: &str, stream: u64) {
        let mut inner = self.inner.lock().expect("never poisoned");
        for id in ids {
            if let Some(followed) = inner.followed.get_mut(id) {
                followed.streams -= 1;
                if followed.streams == 0 {
                    inner.followed.remove(id);
                }
            }
        }
        if let Some(streams) = inner.sessions.get_mut(session) {
            streams.streams.retain(|(open, _)| *open != stream);
            if streams.streams.is_empty() {
                inner.sessions.remove(session);
            }
        }
    }
}

impl LiveFollow {
    /// The jobs this stream follows.
    pub fn ids(&self) -> &[JobId] {
        &self.ids
    }

    /// The hub's last known state of each of them.
    pub fn current(&self) -> Vec<LiveChange> {
        self.hub.current(&self.ids)
    }
}

impl Drop for LiveFollow {
    fn drop(&mut self) {
        self.hub.unfollow(&self.ids, &self.session, self.stream);
    }
}

/// The hub's one task in a process ([`run`]), until stopped or dropped.
pub struct HubTask {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl HubTask {
    /// Starts feeding `hub` from `jobs` (whose LISTEN connection the job runtime runs),
    /// checking sessions on `pool`.
    pub fn start(pool: &PgPool, jobs: &JobClient, hub: &Arc<LiveJobs>) -> HubTask {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(pool.clone(), jobs.clone(), hub.clone(), stop.clone()));
        HubTask {
            stop,
            task: Some(task),
        }
    }

    /// Stops the task and waits for it.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for HubTask {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The hub's one task per process: re-reads followed jobs when the job client hears
/// one finish (at once), when it may have missed some (the LISTEN connection came back)
/// and every [`REREAD_EVERY`]; and ends the streams of sessions that ended. Until
/// `stop`.
async fn run(pool: PgPool, jobs: JobClient, hub: Arc<LiveJobs>, stop: CancellationToken) {
    let mut finished = jobs.finished_jobs();
    let mut session_check = tokio::time::interval(SESSION_CHECK_EVERY);
    session_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            heard = finished.next() => {
                match heard {
                    Some(Finished::Job(id)) => hub.job_finished(id),
                    Some(Finished::MayHaveMissed) => hub.reread_all(),
                    // The client is gone: the process is stopping.
                    None => return,
                }
                continue;
            }
            _ = hub.reread_now.notified() => {}
            _ = tokio::time::sleep(REREAD_EVERY) => {}
            _ = session_check.tick() => {
                end_ended_sessions(&pool, &hub).await;
                continue;
            }
        }
        if hub.requests_followed() {
            match crate::domain::access_requests::newest_id(&pool).await {
                Ok(newest) => hub.learn_newest_request(newest),
                Err(err) => tracing::debug!(error = %err, "cannot read the newest request"),
            }
        }
        let ids = hub.to_reread();
        if ids.is_empty() {
            continue;
        }
        match jobs.progress(&ids).await {
            Ok(jobs) => hub.learn(jobs),
            Err(err) => tracing::debug!(error = %err, "cannot re-read the followed jobs"),
        }
    }
}

async fn end_ended_sessions(pool: &PgPool, hub: &LiveJobs) {
    let followers = hub.followers();
    if followers.is_empty() {
        return;
    }
    use crate::security::sessions::{SignedIn, sessions_still_signed_in};
    let signed_in: Vec<SignedIn<'_>> = followers
        .iter()
        .map(|f| SignedIn {
            session: &f.session,
            admin: f.admin,
            signed_in_at: f.signed_in_at,
        })
        .collect();
    match sessions_still_signed_in(pool, &signed_in).await {
        Ok(alive) => {
            for follower in followers.iter().filter(|f| !alive.contains(&f.session)) {
                hub.end_session(&follower.session);
            }
        }
        Err(err) => tracing::debug!(error = %err, "cannot check the live streams' sessions"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use standmeet_jobs::JobState;

    fn who(session: &str) -> Follower {
        Follower {
            session: session.to_string(),
            admin: 1,
            signed_in_at: 0,
        }
    }

    fn job(id: i64, state: JobState) -> LiveJob {
        LiveJob {
            id,
            state,
            attempt: 1,
            errors_count: 0,
        }
    }

    #[test]
    fn a_change_is_numbered_once_and_sent_to_every_stream() {
        let hub = LiveJobs::new(4);
        let mut first = hub.follow(&[JobId(1), JobId(2)], &who("s1")).unwrap();
        let mut second = hub.follow(&[JobId(1)], &who("s2")).unwrap();
        assert_eq!(hub.unknown(&[JobId(1), JobId(3)]), [JobId(1), JobId(3)]);
        hub.learn(vec![job(1, JobState::Running), job(3, JobState::Running)]);
        // The same state again is no change.
        hub.learn(vec![job(1, JobState::Running)]);
        hub.learn(vec![job(1, JobState::Completed)]);

        for receiver in [&mut first.changes, &mut second.changes] {
            let a = receiver.try_recv().unwrap();
            let b = receiver.try_recv().unwrap();
            assert_eq!(
                (a.job.state, b.job.state),
                (JobState::Running, JobState::Completed)
            );
            assert!(a.seq < b.seq);
            assert!(receiver.try_recv().is_err(), "job 3 is followed by nobody");
        }
        assert_eq!(hub.current(&[JobId(1)])[0].job.state, JobState::Completed);
        // A finished job is not re-read again; an unknown followed one is.
        assert_eq!(hub.to_reread(), [JobId(2)]);
    }

    #[test]
    fn streams_are_capped_and_give_their_place_back() {
        let hub = LiveJobs::new(2);
        let a = hub.follow(&[JobId(1)], &who("s")).unwrap();
        let _b = hub.follow(&[JobId(1)], &who("s")).unwrap();
        assert_eq!(
            hub.follow(&[JobId(1)], &who("s")).err(),
            Some(LiveRefusal::Full(2))
        );
        assert_eq!(hub.open_streams(), 2);
        drop(a);
        assert_eq!(hub.open_streams(), 1);
        assert!(hub.follow(&[JobId(1)], &who("s")).is_ok());
    }

    #[test]
    fn a_session_that_ends_ends_its_streams_only() {
        let hub = LiveJobs::new(4);
        let mine = hub.follow(&[JobId(1)], &who("mine")).unwrap();
        let theirs = hub.follow(&[JobId(1)], &who("theirs")).unwrap();
        hub.end_session("mine");
        assert!(mine.ended.is_cancelled());
        assert!(!theirs.ended.is_cancelled());
        hub.close();
        assert!(theirs.ended.is_cancelled());
        assert_eq!(
            hub.follow(&[JobId(1)], &who("new")).err(),
            Some(LiveRefusal::Closing)
        );
    }

    #[test]
    fn the_last_stream_to_go_stops_the_following() {
        let hub = LiveJobs::new(4);
        let a = hub.follow(&[JobId(7)], &who("s")).unwrap();
        let b = hub.follow(&[JobId(7)], &who("s")).unwrap();
        drop(a);
        hub.job_finished(JobId(7));
        assert_eq!(hub.to_reread(), [JobId(7)]);
        drop(b);
        hub.job_finished(JobId(7));
        assert!(hub.to_reread().is_empty());
        assert!(hub.followers().is_empty());
    }
}
