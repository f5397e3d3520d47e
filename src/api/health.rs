//! Health for load balancers and orchestrators (docs/operating.md):
//!
//! - `GET /livez`: the process serves (200), database or not. A failing liveness check
//!   gets a process restarted, and a restart does not bring a database back.
//! - `GET /readyz` and `GET /healthz`: whether this process can serve requests now, as
//!   JSON: 200 when the database answers, 503 when it does not (send traffic
//!   elsewhere); `/readyz` also answers 503 while the site's files are missing. The job
//!   listener's state, the waiters and the vault's watcher are shown too; a listener
//!   that is reconnecting does not make the process unready (waits fall back to
//!   re-reading once a second), and neither does a vault that cannot be watched.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use crate::state::AppState;
use crate::telemetry::HealthProbe;

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
    /// `ok` when the files every page names (the CSS, the JS and the wasm) are under
    /// `LEPTOS_SITE_ROOT`, else `missing`: the pages would come without style or
    /// script, so `/readyz` answers 503 (`/healthz` stays about the database).
    pub site: &'static str,
    /// The vault's watcher: `off` (no vault, or `STANDMEET_VAULT_WATCH` unset),
    /// `watching`, or `waiting` while the folder cannot be watched yet (it is not there,
    /// cannot be read, or the kernel's limit of watches is reached; it retries). Never
    /// a reason to be unready: the pages do not need it.
    pub vault: &'static str,
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

/// `GET /healthz`: 503 while the database does not answer.
pub async fn healthz(
    State(state): State<AppState>,
) -> (StatusCode, axum::Extension<HealthProbe>, Json<Health>) {
    let (health, database_ok, _) = health(&state).await;
    (
        answer_code(database_ok),
        axum::Extension(HealthProbe),
        Json(health),
    )
}

/// `GET /readyz`: 503 while the database does not answer or the site's files are
/// missing (send traffic elsewhere).
pub async fn readyz(
    State(state): State<AppState>,
) -> (StatusCode, axum::Extension<HealthProbe>, Json<Health>) {
    let (health, database_ok, site_ok) = health(&state).await;
    (
        answer_code(database_ok && site_ok),
        axum::Extension(HealthProbe),
        Json(health),
    )
}

fn answer_code(ok: bool) -> StatusCode {
    if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// The process's health, and whether its database and its site are ok.
async fn health(state: &AppState) -> (Health, bool, bool) {
    let database_ok = crate::db::ping(&state.pool).await;
    let site_ok = state.site_files.missing().is_empty();
    let waiters = state.jobs.waiters();
    let health = Health {
        status: if database_ok && site_ok {
            "ok"
        } else {
            "degraded"
        },
        database: if database_ok { "ok" } else { "unavailable" },
        listener: match state.jobs.listener_state() {
            standmeet_jobs::listener::ListenerState::Connected => "connected",
            standmeet_jobs::listener::ListenerState::Reconnecting => "reconnecting",
            standmeet_jobs::listener::ListenerState::Stopped => "disconnected",
        },
        waiters: waiters.waiting,
        max_waiters: waiters.max,
        site: if site_ok { "ok" } else { "missing" },
        vault: state.vault_watch.get().as_str(),
        version: env!("CARGO_PKG_VERSION"),
    };
    (health, database_ok, site_ok)
}
