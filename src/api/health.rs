//! Health for load balancers and orchestrators (product.md section 8):
//!
//! - `GET /livez`: the process serves (200), database or not. A failing liveness check
//!   gets a process restarted, and a restart does not bring a database back.
//! - `GET /readyz` and `GET /healthz`: whether this process can serve requests now, as
//!   JSON: 200 when the database answers, 503 when it does not (send traffic
//!   elsewhere). The job listener's state and the waiters are shown too; a listener that
//!   is reconnecting does not make the process unready (waits fall back to re-reading
//!   once a second).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use crate::state::AppState;

#[derive(Debug, Serialize)]
pub struct Health {
    /// `ok` when everything below is ok, else `degraded`.
    pub status: &'static str,
    /// `ok` when the database answered `SELECT 1` within a second, else `unavailable`.
    pub database: &'static str,
    /// `connected` when the job listener's LISTEN connection is up, `reconnecting` while
    /// it connects again (it broke, or went silent), `disconnected` when this process
    /// runs no listener.
    pub listener: &'static str,
    /// Callers waiting for jobs right now, and how many may.
    pub waiters: usize,
    pub max_waiters: usize,
    /// The version of this binary.
    pub version: &'static str,
}

/// `GET /livez`.
pub async fn livez() -> (StatusCode, Json<serde_json::Value>) {
    (
        StatusCode::OK,
        Json(serde_json::json!({ "status": "live" })),
    )
}

/// `GET /readyz` and `GET /healthz`.
pub async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let database_ok = crate::db::ping(&state.pool).await;
    let waiters = state.jobs.waiters();
    let health = Health {
        status: if database_ok { "ok" } else { "degraded" },
        database: if database_ok { "ok" } else { "unavailable" },
        listener: match state.jobs.listener_state() {
            standmeet_jobs::listener::ListenerState::Connected => "connected",
            standmeet_jobs::listener::ListenerState::Reconnecting => "reconnecting",
            standmeet_jobs::listener::ListenerState::Stopped => "disconnected",
        },
        waiters: waiters.waiting,
        max_waiters: waiters.max,
        version: env!("CARGO_PKG_VERSION"),
    };
    let status = if database_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(health))
}
