//! How `/mcp` is served (Streamable HTTP): one endpoint, used two ways.
//!
//! - **A session**, for a client that starts with `initialize` (the official SDKs and
//!   rmcp's client do). It gets an `Mcp-Session-Id`, and each call's answer comes as
//!   Server-Sent Events, so that progress arrives before the answer and
//!   `notifications/cancelled` reaches the call it names; its `GET` stream carries
//!   `notifications/resources/updated` for the jobs it subscribed to. A session lives in
//!   the memory of the copy of StandMeet that made it and ends after [`SESSION_IDLE`]
//!   without a message, or when that copy stops; a client then starts a new one (behind
//!   a load balancer, keep a session on one copy: docs/operating.md).
//! - **A single call**, for a request without a session (curl, a script): it stands on
//!   its own, so any copy can answer it, as plain JSON (as Server-Sent Events when it
//!   asked for progress).
//!
//! Which one a request is needs only its headers, except for a `POST` without a
//! session, whose body says whether it is an `initialize`. The body limit
//! (`security::body_limit`) has bounded it before it gets here.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;

use super::Tools;
use crate::state::AppState;

/// How long a session lasts without a message either way. Its subscriptions end with
/// it, so it is long enough for a job that retries for a while.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// The header that names a session.
const SESSION_HEADER: &str = "mcp-session-id";

/// The most sessions a copy holds at once; an `initialize` past it is answered 503
/// with a JSON-RPC error that says so (a call without a session still works).
pub const MAX_SESSIONS: usize = 500;

/// How many messages a session keeps for its `GET` stream while none is open (resource
/// updates, mostly): more than a session's subscriptions could send at once.
const SESSION_BACKLOG: usize = 128;

/// Whether the request a handler serves came with a session.
pub fn in_a_session(request: Option<&axum::http::request::Parts>) -> bool {
    request.is_some_and(|parts| parts.headers.contains_key(SESSION_HEADER))
}

/// The two services behind `/mcp`: sessions, and calls that stand alone.
pub struct Endpoint {
    session_manager: Arc<LocalSessionManager>,
    sessions: StreamableHttpService<Tools, LocalSessionManager>,
    calls: StreamableHttpService<Tools, LocalSessionManager>,
    body_limit: usize,
}

impl Endpoint {
    /// Both services on `config` (hosts, the stop token), making [`Tools`] of `state`.
    pub fn new(state: &AppState, config: StreamableHttpServerConfig) -> Endpoint {
        let for_sessions = state.clone();
        let mut session_manager = LocalSessionManager::default();
        session_manager.session_config.keep_alive = Some(SESSION_IDLE);
        session_manager.session_config.channel_capacity = SESSION_BACKLOG;
        let session_manager = Arc::new(session_manager);
        let sessions = StreamableHttpService::new(
            move || Ok(Tools::new(for_sessions.clone())),
            session_manager.clone(),
            config.clone().with_legacy_session_mode(true),
        );
        let for_calls = state.clone();
        let calls = StreamableHttpService::new(
            move || Ok(Tools::new(for_calls.clone())),
            LocalSessionManager::default().into(),
            config
                .with_legacy_session_mode(false)
                .with_json_response(true),
        );
        Endpoint {
            session_manager,
            sessions,
            calls,
            body_limit: state.settings.max_body_bytes,
        }
    }

    /// Hands `request` to the sessions or to the single calls.
    pub async fn serve(&self, request: Request) -> Response {
        if request.headers().contains_key(SESSION_HEADER) {
            return self.sessions.handle(request).await.map(Body::new);
        }
        if request.method() != Method::POST {
            return self.calls.handle(request).await.map(Body::new);
        }
        let (parts, body) = request.into_parts();
        let Ok(body) = axum::body::to_bytes(body, self.body_limit).await else {
            // The client went away mid-body (the limit was checked before).
            return StatusCode::BAD_REQUEST.into_response();
        };
        let service = if starts_a_session(&body) {
            if self.session_manager.sessions.read().await.len() >= MAX_SESSIONS {
                return too_many_sessions();
            }
            &self.sessions
        } else {
            &self.calls
        };
        let request = Request::from_parts(parts, Body::from(body));
        service.handle(request).await.map(Body::new)
    }
}

/// The answer to an `initialize` past [`MAX_SESSIONS`].
fn too_many_sessions() -> Response {
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32000,
            "message": format!(
                "This StandMeet holds {MAX_SESSIONS} MCP sessions, the most it may; try again \
                 later, end a session (DELETE /mcp), or call without one."
            ),
        },
    });
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(error)).into_response()
}

/// Whether a JSON-RPC body is an `initialize` request (anything else, and anything that
/// is not JSON, is for the single calls, which answer it as before).
fn starts_a_session(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Message>(body)
        .is_ok_and(|message| message.method.as_deref() == Some("initialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_initialize_request_starts_a_session() {
        let initialize = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert!(starts_a_session(initialize));
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#;
        assert!(!starts_a_session(call));
        assert!(!starts_a_session(br#"[{"method":"initialize"}]"#));
        assert!(!starts_a_session(b"not json"));
        assert!(!starts_a_session(br#"{"method":7}"#));
    }
}
