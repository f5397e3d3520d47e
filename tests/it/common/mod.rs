//! Helpers shared by the integration tests: the app on a test database ([`TestApp`],
//! the one way tests build it), and requests to it without a network in between (the
//! plain functions here take its router; a `&TestApp` is one).

#![allow(dead_code)]

pub mod app;
pub mod boards;
pub mod jobs;
pub mod mcp;
pub mod otlp;
pub mod receiver;
pub mod smtp;

#[allow(unused_imports)]
pub use app::{OWNER, TestApp, TestAppBuilder};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use sqlx::PgPool;
use standmeet::config::Settings;
use tower::ServiceExt;

/// The settings of a process started with no environment at all.
pub fn default_settings() -> Settings {
    Settings::from_lookup(|_| None).expect("the defaults are valid")
}

/// Settings as the environment would give them with `pairs` set.
pub fn settings_with(pairs: &[(&str, &str)]) -> Settings {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::from_lookup(|name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
    .expect("valid test settings")
}

/// Migrates a test's database (made empty by `#[sqlx::test(migrations = false)]`) as
/// StandMeet does at every start: the job engine's schema in its ledger, then ours.
pub async fn schema(pool: &PgPool) {
    standmeet::db::migrate(pool)
        .await
        .expect("the test database migrates");
}

/// An admin that tests can sign in as.
pub const ADMIN_EMAIL: &str = "owner@example.com";
pub const ADMIN_PASSWORD: &str = "correct horse battery staple";

pub async fn create_admin(pool: &PgPool) -> i64 {
    let email = standmeet::types::EmailAddress::parse(ADMIN_EMAIL).unwrap();
    standmeet::domain::admins::admin_upsert(pool, &email, ADMIN_PASSWORD)
        .await
        .expect("admin created")
}

/// Posts a sign-in form from our own origin; answers the reply.
pub async fn sign_in(app: &Router, email: &str, password: &str) -> Reply {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("email", email)
        .append_pair("password", password)
        .finish();
    send(
        app,
        Request::post("/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(body))
            .unwrap(),
    )
    .await
}

/// Signs in as the test admin (creating it) and answers the session cookie
/// (`name=value`), ready for a `Cookie` header.
pub async fn signed_in_cookie(app: &Router, pool: &PgPool) -> String {
    create_admin(pool).await;
    let reply = sign_in(app, ADMIN_EMAIL, ADMIN_PASSWORD).await;
    assert_eq!(reply.location(), Some("/admin"), "sign-in succeeds");
    reply.session_cookie().expect("a session cookie")
}

pub async fn get_with_cookie(app: &Router, path: &str, cookie: &str) -> Reply {
    send(
        app,
        Request::get(path)
            .header("cookie", cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// Where a redirect points.
    pub fn location(&self) -> Option<&str> {
        self.headers
            .get("location")
            .and_then(|value| value.to_str().ok())
    }

    /// The `Set-Cookie` header of the session cookie, whole.
    pub fn session_set_cookie(&self) -> Option<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find(|value| {
                [
                    standmeet::startup::SESSION_COOKIE,
                    standmeet::startup::SECURE_SESSION_COOKIE,
                ]
                .iter()
                .any(|name| value.starts_with(&format!("{name}=")))
            })
            .map(str::to_string)
    }

    /// The session cookie as `name=value`.
    pub fn session_cookie(&self) -> Option<String> {
        self.session_set_cookie()
            .map(|set| set.split(';').next().unwrap_or_default().to_string())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}", self.body))
    }
}

/// Sends `request` through the router and reads the whole answer.
pub async fn send(app: &Router, request: Request<Body>) -> Reply {
    let response = app
        .clone()
        .oneshot(request)
        .await
        .expect("the router answers");
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

/// Posts a form to a server function (or any path) from our own origin, with an
/// optional session cookie; answers the reply.
pub async fn post_form(
    app: &Router,
    path: &str,
    pairs: &[(&str, &str)],
    cookie: Option<&str>,
) -> Reply {
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        body.append_pair(name, value);
    }
    let mut request = Request::post(path)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .header("sec-fetch-site", "same-origin");
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    send(app, request.body(Body::from(body.finish())).unwrap()).await
}

/// The one number `count_sql` (a `SELECT count(*) …`) answers.
pub async fn count(pool: &PgPool, count_sql: &str) -> i64 {
    sqlx::query_scalar(count_sql).fetch_one(pool).await.unwrap()
}
