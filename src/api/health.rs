//! `GET /healthz`: whether this process can serve, as JSON for load balancers and
//! operators. 200 when the database answers, 503 when it does not. The job listener's
//! state and the waiters are shown too; a listener that is reconnecting does not make
//! the process unhealthy (waits fall back to re-reading once a second).

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
    /// `connected` when the job listener's LISTEN connection is up, else `disconnected`.
    pub listener: &'static str,
    /// Callers waiting for jobs right now, and how many may.
    pub waiters: usize,
    pub max_waiters: usize,
    /// The version of this binary.
    pub version: &'static str,
}

pub async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let database_ok = crate::db::ping(&state.pool).await;
    let health = Health {
        status: if database_ok { "ok" } else { "degraded" },
        database: if database_ok { "ok" } else { "unavailable" },
        listener: if state.signals.listener_connected() {
            "connected"
        } else {
            "disconnected"
        },
        waiters: state.signals.waiters.waiting(),
        max_waiters: state.signals.waiters.max(),
        version: env!("CARGO_PKG_VERSION"),
    };
    let status = if database_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(health))
}
