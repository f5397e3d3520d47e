//! `GET /api/live?ids=1,2,3` (admins only): the states of up to 100 jobs as
//! Server-Sent Events, `event: job` with `data: {"id","state","attempt","errors_count"}`,
//! each job's current state at once and every change after. The stream holds no
//! database connection: the process's live hub (`crate::live`) feeds it. It ends when its
//! session does or the process stops; the browser then reconnects (after `retry`) and
//! gets fresh first states, or falls back to polling `/api/jobs/status`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::{StreamExt, stream};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
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
}

pub async fn live(
    State(state): State<AppState>,
    session: Session,
    admin: Option<Extension<Admin>>,
    Query(query): Query<LiveQuery>,
) -> Response {
    let ids = match parse_status_ids(query.ids.as_deref()) {
        Ok(ids) => ids,
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
    let opening = Event::default().retry(RECONNECT_AFTER).comment("live");
    let changes = stream::unfold(
        Following {
            follow,
            pending: first,
            sent: HashMap::new(),
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
        tokio::select! {
            _ = following.follow.ended.cancelled() => return None,
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
    }
}
