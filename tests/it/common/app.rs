//! `TestApp`: the whole StandMeet on a test's own database, as the tests need it.
//!
//! A test says what it needs with a small builder, and gets the app running:
//!
//! ```ignore
//! let app = TestApp::builder(pool.clone())
//!     .setting("STANDMEET_MCP_TOKEN", TOKEN)
//!     .smtp()   // an SMTP peer on loopback; `STANDMEET_MAIL` points at it
//!     .boards() // job boards on loopback
//!     .jobs()   // the job engine and its listener, with quick timings
//!     .spawn()
//!     .await;
//! ```
//!
//! The app answers two ways: in process, through [`TestApp::router`] (every request
//! comes from 203.0.113.7, see [`CLIENT`]), which is what the helpers here use; and over
//! real HTTP at [`TestApp::address`] (see [`TestApp::url`]), served the way `startup`
//! serves it, for tests that need a real socket.
//!
//! Dropping a `TestApp` stops what it started, also when the test panics: the job
//! engine is told to stop (see [`TestEngine`]) and the HTTP server is aborted. So tests
//! no longer end with a hand-written shutdown that a failed assertion skips; a test
//! that checks something *after* the engine stopped says so with
//! [`TestApp::stop_jobs`].

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::Request;
use serde_json::Value;
use sqlx::PgPool;
use standmeet::startup::router;
use standmeet::state::AppState;
use standmeet_jobs::EngineConfig;
use tokio::task::JoinHandle;

use super::Reply;
use super::boards::BoardServer;
use super::jobs::TestEngine;
use super::smtp::SmtpPeer;

/// Where every in-process request comes from (a documentation address, TEST-NET-3).
pub const CLIENT: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(203, 0, 113, 7), 40000));

/// `router` as if every request came from [`CLIENT`] (what `ConnectInfo` would give
/// behind a real socket: the rate limits and the sign-in throttle key on it).
pub fn with_mock_client(router: Router) -> Router {
    router.layer(MockConnectInfo(CLIENT))
}

/// The job engine the way the app runs it, with the live hub it feeds: the app's
/// queues, with quick timings (retries after ~50 ms × attempt⁴, leases of a second; see
/// [`quick_config`](super::jobs::quick_config)). Both stop when it is dropped.
pub struct AppEngine {
    pub engine: TestEngine,
    _hub: standmeet::live::HubTask,
}

impl std::ops::Deref for AppEngine {
    type Target = TestEngine;

    fn deref(&self) -> &TestEngine {
        &self.engine
    }
}

impl AppEngine {
    /// Stops the engine gracefully and waits for it (the hub stops on drop).
    pub async fn shutdown(self) {
        self.engine.shutdown().await;
    }
}

pub async fn start_app_engine(pool: &PgPool, state: &AppState) -> AppEngine {
    let mut config: EngineConfig = super::jobs::quick_config(4);
    config.queues = state
        .registry
        .queues()
        .map(standmeet::config::queue_config)
        .collect();
    config.retry_base = Duration::from_millis(50);
    config.schedules = Some(state.settings.timezone.clone());
    // Connections of its own, as the app gives it: the app's queues' claims alone
    // need more than a test's pool has.
    let engine_pool = standmeet::db::engine_pool(pool, config.connections_needed());
    let runtime = standmeet_jobs::JobRuntime::start(
        &engine_pool,
        state.registry.clone(),
        config,
        &state.jobs,
    )
    .await
    .expect("the engine starts");
    AppEngine {
        engine: TestEngine::new(runtime, state.jobs.clone()),
        _hub: standmeet::live::HubTask::start(pool, &state.jobs, &state.live),
    }
}

/// What a test wants running besides the app; see the module's example.
#[must_use = "nothing runs until `.spawn().await`"]
pub struct TestAppBuilder {
    pool: PgPool,
    settings: Vec<(String, String)>,
    smtp: bool,
    boards: bool,
    jobs: bool,
}

impl TestAppBuilder {
    /// Sets `name` as the environment would (a later call for the same name wins).
    pub fn setting(mut self, name: &str, value: impl Into<String>) -> Self {
        let value = value.into();
        match self.settings.iter_mut().find(|(set, _)| set == name) {
            Some((_, old)) => *old = value,
            None => self.settings.push((name.to_string(), value)),
        }
        self
    }

    /// Starts an SMTP peer on loopback ([`TestApp::smtp`]) and, unless the test set
    /// `STANDMEET_MAIL` itself, sends the app's mail to it.
    pub fn smtp(mut self) -> Self {
        self.smtp = true;
        self
    }

    /// Starts job boards on loopback ([`TestApp::boards`]).
    pub fn boards(mut self) -> Self {
        self.boards = true;
        self
    }

    /// Runs the job engine and its listener, as `startup` does, with quick timings
    /// (see [`start_app_engine`]).
    pub fn jobs(mut self) -> Self {
        self.jobs = true;
        self
    }

    /// Starts the peers, builds the app's state and router, runs the engine if asked,
    /// and serves the router on a free loopback port.
    pub async fn spawn(self) -> TestApp {
        let smtp = if self.smtp {
            Some(SmtpPeer::start().await.expect("an SMTP peer on loopback"))
        } else {
            None
        };
        let boards = if self.boards {
            Some(BoardServer::start().await)
        } else {
            None
        };
        let mut settings = self.settings;
        // The boards (and the webhook receivers of the tests) are on loopback, which
        // StandMeet refuses to call unless told otherwise.
        if boards.is_some()
            && !settings
                .iter()
                .any(|(name, _)| name == "STANDMEET_FETCH_ALLOW_PRIVATE")
        {
            settings.push((
                "STANDMEET_FETCH_ALLOW_PRIVATE".to_string(),
                "true".to_string(),
            ));
        }
        if let Some(smtp) = &smtp
            && !settings.iter().any(|(name, _)| name == "STANDMEET_MAIL")
        {
            settings.push(("STANDMEET_MAIL".to_string(), smtp.url()));
        }
        let pairs: Vec<(&str, &str)> = settings
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let state = app_state(&self.pool, super::settings_with(&pairs));
        // As `serve` does at start.
        standmeet::domain::schedules::create_built_ins(&state.jobs, state.settings.vault.is_some())
            .await
            .expect("the built-in schedules");

        let jobs = if self.jobs {
            Some(start_app_engine(&self.pool, &state).await)
        } else {
            None
        };

        // One router, served two ways: over a real socket (where `ConnectInfo` is the
        // peer's address) and in process (from `CLIENT`).
        let app = router(state.clone());
        let served = app.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free loopback port");
        let address = listener.local_addr().expect("a bound address");
        // Served as the binary serves (its header timeout, its drain), until dropped.
        let limits = standmeet::serving::Limits {
            header_timeout: state.settings.header_timeout,
            max_connections: 1024,
            grace: Duration::from_secs(1),
        };
        let server = tokio::spawn(async move {
            standmeet::serving::serve(
                listener,
                served,
                limits,
                tokio_util::sync::CancellationToken::new(),
            )
            .await
            .expect("the test server serves");
        });

        TestApp {
            pool: self.pool,
            router: with_mock_client(app),
            state,
            address,
            smtp,
            boards,
            jobs,
            server,
        }
    }
}

/// StandMeet running for one test; see the module's documentation.
pub struct TestApp {
    /// The test's own database.
    pub pool: PgPool,
    /// The state behind [`TestApp::router`]: its settings, queue client, signals.
    pub state: AppState,
    /// The whole router, for in-process requests from [`CLIENT`].
    pub router: Router,
    /// Where the same app is served over real HTTP.
    pub address: SocketAddr,
    smtp: Option<SmtpPeer>,
    boards: Option<BoardServer>,
    /// Told to stop when dropped (see [`TestEngine`]).
    jobs: Option<AppEngine>,
    server: JoinHandle<()>,
}

/// The owner of the desk [`TestApp::desk`] builds.
pub const OWNER: &str = "owner@desk.example";

impl TestApp {
    /// The desk most mail tests run: an owner ([`OWNER`]), a sender and a public URL
    /// for the links. Mail goes to an SMTP peer (`.smtp()`) or wherever
    /// `STANDMEET_MAIL` says.
    pub fn desk(pool: &PgPool) -> TestAppBuilder {
        TestApp::builder(pool.clone())
            .setting("STANDMEET_OWNER_EMAIL", OWNER)
            .setting("STANDMEET_MAIL_FROM", "standmeet@desk.example")
            .setting("STANDMEET_PUBLIC_URL", "http://127.0.0.1:3000")
    }

    /// [`TestApp::desk`] mailing through an SMTP peer, with its job engine.
    pub async fn desk_with_mail(pool: &PgPool) -> TestApp {
        TestApp::desk(pool).smtp().jobs().spawn().await
    }

    /// Starts describing the app for `pool` (a database of its own, made by
    /// `#[sqlx::test]` and migrated by `common::schema`); nothing runs until
    /// [`TestAppBuilder::spawn`].
    pub fn builder(pool: PgPool) -> TestAppBuilder {
        TestAppBuilder {
            pool,
            settings: Vec::new(),
            smtp: false,
            boards: false,
            jobs: false,
        }
    }

    /// The SMTP peer the app mails to. Panics unless built with `.smtp()`.
    pub fn smtp(&self) -> &SmtpPeer {
        self.smtp
            .as_ref()
            .expect("this TestApp has no SMTP peer: build it with `.smtp()`")
    }

    /// The job boards on loopback. Panics unless built with `.boards()`.
    pub fn boards(&self) -> &BoardServer {
        self.boards
            .as_ref()
            .expect("this TestApp has no board server: build it with `.boards()`")
    }

    /// The URL of `path` on the real HTTP server (for `reqwest`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Stops the job engine gracefully (running attempts finish or are interrupted,
    /// every outcome is written), for tests that go on after it stopped. Panics unless
    /// built with `.jobs()`, or when stopped already.
    pub async fn stop_jobs(&mut self) {
        self.jobs
            .take()
            .expect("this TestApp runs no job engine (any more): build it with `.jobs()`")
            .shutdown()
            .await;
    }

    /// A router on the same database and settings with a state of its own, so with
    /// fresh rate limits: what a request meets in another StandMeet process.
    pub fn fresh_router(&self) -> Router {
        let state = app_state(&self.pool, (*self.state.settings).clone());
        with_mock_client(router(state))
    }

    /// The same app (one state: its rate limits, its hub) as requests from `client`
    /// see it: for tests of what one address may do to another's.
    pub fn router_from(&self, client: SocketAddr) -> Router {
        router(self.state.clone()).layer(MockConnectInfo(client))
    }

    // ---- In-process requests ----

    pub async fn send(&self, request: Request<Body>) -> Reply {
        super::send(&self.router, request).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        super::get(&self.router, path).await
    }

    pub async fn get_with_cookie(&self, path: &str, cookie: &str) -> Reply {
        super::get_with_cookie(&self.router, path, cookie).await
    }

    /// Posts a form from our own origin (see [`super::post_form`]).
    pub async fn post_form(
        &self,
        path: &str,
        pairs: &[(&str, &str)],
        cookie: Option<&str>,
    ) -> Reply {
        super::post_form(&self.router, path, pairs, cookie).await
    }

    /// Creates the test admin and signs in; answers the session cookie (`name=value`).
    pub async fn sign_in_admin(&self) -> String {
        super::signed_in_cookie(&self.router, &self.pool).await
    }

    /// The admin's Approve on access request `id`: the server function the page's
    /// button posts to.
    pub async fn approve(&self, cookie: &str, id: i64) -> Reply {
        self.post_form(
            "/api/access_requests/approve",
            &[("id", &id.to_string())],
            Some(cookie),
        )
        .await
    }

    /// The admin's Deny on access request `id`.
    pub async fn deny(&self, cookie: &str, id: i64) -> Reply {
        self.post_form(
            "/api/access_requests/deny",
            &[("id", &id.to_string())],
            Some(cookie),
        )
        .await
    }

    /// Calls MCP tool `tool` with the test token; answers the result (see
    /// [`super::mcp::call`]). The app needs `STANDMEET_MCP_TOKEN` set to
    /// [`super::mcp::TOKEN`].
    pub async fn call_tool(&self, tool: &str, arguments: Value) -> Value {
        super::mcp::call(&self.router, tool, arguments).await
    }
}

/// A `&TestApp` is its router, for the request helpers of `common`.
impl std::ops::Deref for TestApp {
    type Target = Router;

    fn deref(&self) -> &Router {
        &self.router
    }
}

impl Drop for TestApp {
    /// Stops what the app started without waiting for it (nothing can be awaited in a
    /// drop): tells the engine and its listener to stop, and aborts the HTTP server.
    /// The SMTP peer and the boards live on until the test's runtime ends.
    fn drop(&mut self) {
        if let Some(jobs) = &self.jobs {
            jobs.stop_soon();
        }
        self.server.abort();
    }
}

/// The application's state for `settings`, with the site's files as the server binary
/// of this build sees them. Leptos and StandMeet look for the hash file beside the
/// running binary, and this test binary is in `<target>/debug/deps`, not beside the
/// server's `<target>/debug/hash.txt`: a copy is put beside it (renamed into place, as
/// tests run side by side).
pub fn app_state(pool: &PgPool, settings: standmeet::config::Settings) -> AppState {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary's folder");
    if let Some(debug) = deps.parent() {
        let built = debug.join("hash.txt");
        let beside = deps.join("hash.txt");
        if let Ok(hashes) = std::fs::read(&built)
            && std::fs::read(&beside).ok().as_ref() != Some(&hashes)
        {
            let scratch = deps.join(format!("hash.txt.{}", std::process::id()));
            std::fs::write(&scratch, &hashes).expect("a copy of the hash file");
            std::fs::rename(&scratch, &beside).expect("the hash file beside the tests");
        }
    }
    AppState::new(pool.clone(), settings).expect("app state")
}
