//! `GET /healthz`: whether this process can serve, as JSON for load balancers and
//! operators. 200 when the database answers, 503 when it does not.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use crate::startup::AppState;

#[derive(Debug, Serialize)]
pub struct Health {
    /// `ok` when everything below is ok, else `degraded`.
    pub status: &'static str,
    /// `ok` when the database answered `SELECT 1` within a second, else `unavailable`.
    pub database: &'static str,
    /// The version of this binary.
    pub version: &'static str,
}

pub async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let database_ok = crate::db::ping(&state.pool).await;
    let health = Health {
        status: if database_ok { "ok" } else { "degraded" },
        database: if database_ok { "ok" } else { "unavailable" },
        version: env!("CARGO_PKG_VERSION"),
    };
    let status = if database_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(health))
}
