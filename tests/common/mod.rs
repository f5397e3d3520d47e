//! Helpers shared by the integration tests: the app on a test database, and requests
//! to it without a network in between.

#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use sqlx::PgPool;
use standmeet::config::Settings;
use standmeet::startup::{AppState, router};
use tower::ServiceExt;

/// The settings of a process started with no environment at all.
pub fn default_settings() -> Settings {
    Settings::from_lookup(|_| None).expect("the defaults are valid")
}

/// The whole router, on `pool` (a database of its own, made by `#[sqlx::test]`).
pub fn app(pool: PgPool) -> Router {
    let state = AppState::new(pool, default_settings()).expect("app state");
    router(state)
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}", self.body))
    }
}

/// Sends `request` through the router and reads the whole answer.
pub async fn send(app: &Router, request: Request<Body>) -> Reply {
    let response = app.clone().oneshot(request).await.expect("the router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
        .await
        .expect("a readable body");
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(app: &Router, path: &str) -> Reply {
    send(app, Request::get(path).body(Body::empty()).unwrap()).await
}
