//! `GET /api/live?ids=1,2,3` (admins only): the states of up to 100 jobs as
//! Server-Sent Events, `event: job` with `data: {"id","state","attempt","errors_count"}`,
//! each job's current state at once and every change after. The stream holds no
//! database connection: the process's live hub (`crate::live`) feeds it. It ends when its
//! session does or the process stops; the browser then reconnects (after `retry`) and
//! gets fresh first states, or falls back to polling `/api/jobs/status`.
//!
//! With `requests` in the query (`?requests`, with or without `ids`) the stream also
//! follows the access requests: `event: access_requests` with `data: {"newest": id}`,
//! the newest request's id, at once and whenever a newer one arrives.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::{StreamExt, stream};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tower_sessions::Session;

use crate::api::tasks::parse_status_ids;
use crate::domain::admins::Admin;
use crate::error::AppError;
use crate::live::{Follower, LiveChange, LiveFollow, LiveRefusal};
use crate::model::JobId;
use crate::security::guard::SESSION_SIGNED_IN_AT;
use crate::state::AppState;

/// How long the browser waits before it reconnects a stream that ended.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    ids: Option<String>,
    /// Present (any value): follow the access requests too.
    requests: Option<String>,
}

pub async fn live(
    State(state): State<AppState>,
    session: Session,
    admin: Option<Extension<Admin>>,
    Query(query): Query<LiveQuery>,
) -> Response {
    let follows_requests = query.requests.is_some();
    let ids = match parse_status_ids(query.ids.as_deref()) {
        Ok(ids) => ids,
        // The requests alone are enough to follow.
        Err(_)
            if follows_requests && query.ids.as_deref().is_none_or(|ids| ids.trim().is_empty()) =>
        {
            Vec::new()
        }
        Err(message) => return AppError::BadRequest(message).into_response(),
    };
    // The admin guard let this request in, so it has a session and its admin.
    let (Some(session_id), Some(Extension(admin))) = (session.id().map(|id| id.to_string()), admin)
    else {
        return AppError::Unauthorized("Sign in to follow jobs live.".into()).into_response();
    };
    // The stream ends once this sign-in no longer holds (see `crate::live`).
    let signed_in_at = session
        .get::<i64>(SESSION_SIGNED_IN_AT)
        .await
        .ok()
        .flatten()
        .unwrap_or(0);
    let follower = Follower {
        session: session_id,
        admin: admin.id,
        signed_in_at,
    };
    let hub = state.live.clone();
    let follow = match hub.follow(&ids, &follower) {
        Ok(follow) => follow,
        Err(LiveRefusal::Full(max)) => {
            return unavailable(format!(
                "This StandMeet already serves {max} live streams (STANDMEET_MAX_LIVE_CLIENTS); the page polls instead."
            ));
        }
        Err(LiveRefusal::Closing) => {
            return unavailable("This StandMeet is stopping; the page polls instead.".into());
        }
    };
    // The first states: those the hub does not know yet are read now, in one query.
    let unknown = hub.unknown(&ids);
    if !unknown.is_empty() {
        match state.jobs.progress(&unknown).await {
            Ok(jobs) => hub.learn(jobs),
            Err(err) => return AppError::from(err).into_response(),
        }
    }
    let first: VecDeque<LiveChange> = hub.current(&ids).into();
    let requests = follows_requests.then(|| {
        let mut newest = hub.follow_requests();
        // The newest request as the hub knows it goes first (once it knows one).
        newest.mark_changed();
        newest
    });
    let opening = Event::default().retry(RECONNECT_AFTER).comment("live");
    let changes = stream::unfold(
        Following {
            follow,
            pending: first,
            sent: HashMap::new(),
            requests,
        },
        next_event,
    );
    Sse::new(stream::once(async { Ok(opening) }).chain(changes))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn unavailable(message: String) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(serde_json::json!({ "error": message })),
    )
        .into_response()
}

/// One stream's state: its hold on the hub, the changes to send, and the newest change
/// sent per job.
struct Following {
    follow: LiveFollow,
    pending: VecDeque<LiveChange>,
    sent: HashMap<JobId, u64>,
    /// The newest access request's id, when this stream follows the requests.
    requests: Option<watch::Receiver<i64>>,
}

/// What a stream that follows the access requests sends when a newer one arrives.
#[derive(Debug, Serialize)]
struct NewestRequest {
    newest: i64,
}

impl Following {
    /// Whether `change` is newer than what this stream sent for its job (and notes it).
    fn take(&mut self, change: &LiveChange) -> bool {
        let id = JobId(change.job.id);
        if !self.follow.ids().contains(&id) {
            return false;
        }
        let newest = self.sent.entry(id).or_default();
        if change.seq <= *newest {
            return false;
        }
        *newest = change.seq;
        true
    }
}

async fn next_event(mut following: Following) -> Option<(Result<Event, Infallible>, Following)> {
    loop {
        if let Some(change) = following.pending.pop_front() {
            if !following.take(&change) {
                continue;
            }
            let event = Event::default()
                .event("job")
                .id(change.seq.to_string())
                .json_data(&change.job)
                .expect("a job state serializes");
            return Some((Ok(event), following));
        }
        let requests = &mut following.requests;
        let newer_request = async move {
            match requests.as_mut() {
                Some(newest) => newest.changed().await.map(|()| *newest.borrow_and_update()),
                None => std::future::pending().await,
            }
        };
        let mut newest_request = None;
        tokio::select! {
            _ = following.follow.ended.cancelled() => return None,
            newest = newer_request => match newest {
                // Not read yet: the hub's first read sends it.
                Ok(0) => {}
                Ok(newest) => newest_request = Some(newest),
                // The hub is gone: the process is stopping.
                Err(_) => return None,
            },
            received = following.follow.changes.recv() => match received {
                Ok(change) => following.pending.push_back(change),
                // Missed some: the hub's current states cover them.
                Err(RecvError::Lagged(_)) => {
                    let current = following.follow.current();
                    following.pending.extend(current);
                }
                Err(RecvError::Closed) => return None,
            },
        }
        if let Some(newest) = newest_request {
            let event = Event::default()
                .event("access_requests")
                .json_data(NewestRequest { newest })
                .expect("an id serializes");
            return Some((Ok(event), following));
        }
    }
}
