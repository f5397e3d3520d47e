//! Job boards on loopback for the tests: real HTTP serving the sample bodies in
//! tests/fixtures/boards, with switches per path for an error status (for the next N
//! requests), a body of the test's own, or holding the answer until the test
//! releases it (so that "still fetching" lasts as long as the test's checks, however
//! slowly the machine runs).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

/// The paths served, their sample body and its content type.
const SAMPLES: [(&str, &str, &str); 4] = [
    (
        "/greenhouse/acme",
        include_str!("../../fixtures/boards/greenhouse.json"),
        "application/json",
    ),
    (
        "/lever/globex",
        include_str!("../../fixtures/boards/lever.json"),
        "application/json",
    ),
    (
        "/feeds/rust.rss",
        include_str!("../../fixtures/boards/rss.xml"),
        "application/rss+xml",
    ),
    (
        "/feeds/hooli.atom",
        include_str!("../../fixtures/boards/atom.xml"),
        "application/atom+xml",
    ),
];

#[derive(Default)]
struct Switches {
    /// Path → (status, how many more requests get it).
    failing: HashMap<String, (u16, u32)>,
    bodies: HashMap<String, (String, Vec<u8>)>,
    hits: HashMap<String, usize>,
    /// Path → the `traceparent` header of each request, in order (empty when none).
    traceparents: HashMap<String, Vec<String>>,
}

/// What the server's handler shares with the test.
#[derive(Clone, Default)]
struct Shared {
    switches: Arc<Mutex<Switches>>,
    /// The paths whose answers are held.
    held: Arc<watch::Sender<HashSet<String>>>,
}

#[derive(Clone)]
pub struct BoardServer {
    pub port: u16,
    switches: Arc<Mutex<Switches>>,
    held: Arc<watch::Sender<HashSet<String>>>,
}

impl BoardServer {
    pub async fn start() -> BoardServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Shared::default();
        let app = Router::new().fallback(answer).with_state(shared.clone());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        BoardServer {
            port,
            switches: shared.switches,
            held: shared.held,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The next `times` requests for `path` get `status`.
    pub fn fail(&self, path: &str, status: u16, times: u32) {
        let mut switches = self.switches.lock().unwrap();
        switches.failing.insert(path.into(), (status, times));
    }

    /// Requests for `path` get no answer until [`BoardServer::release`] (they are
    /// counted as they arrive).
    pub fn hold(&self, path: &str) {
        self.held.send_modify(|held| {
            held.insert(path.to_string());
        });
    }

    /// Answers the held requests for `path`, and the ones after them, as usual again.
    pub fn release(&self, path: &str) {
        self.held.send_modify(|held| {
            held.remove(path);
        });
    }

    /// `path` answers `body` (200, `content_type`).
    pub fn serve(&self, path: &str, content_type: &str, body: impl Into<Vec<u8>>) {
        let mut switches = self.switches.lock().unwrap();
        switches
            .bodies
            .insert(path.into(), (content_type.into(), body.into()));
    }

    /// The `traceparent` each request for `path` carried (empty for one without).
    pub fn traceparents(&self, path: &str) -> Vec<String> {
        let switches = self.switches.lock().unwrap();
        switches.traceparents.get(path).cloned().unwrap_or_default()
    }

    /// How many requests `path` got.
    pub fn hits(&self, path: &str) -> usize {
        let switches = self.switches.lock().unwrap();
        switches.hits.get(path).copied().unwrap_or(0)
    }
}

async fn answer(State(shared): State<Shared>, request: Request) -> Response {
    let Shared { switches, held } = shared;
    let path = request.uri().path().to_string();
    let (failure, own) = {
        let mut switches = switches.lock().unwrap();
        *switches.hits.entry(path.clone()).or_default() += 1;
        let traceparent = request
            .headers()
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string();
        switches
            .traceparents
            .entry(path.clone())
            .or_default()
            .push(traceparent);
        let failure = match switches.failing.get_mut(&path) {
            Some((status, left)) if *left > 0 => {
                *left -= 1;
                Some(*status)
            }
            _ => None,
        };
        (failure, switches.bodies.get(&path).cloned())
    };
    let mut released = held.subscribe();
    let _ = released.wait_for(|on_hold| !on_hold.contains(&path)).await;
    if let Some(status) = failure {
        let status = StatusCode::from_u16(status).unwrap();
        return (status, format!("the test board answers {status}")).into_response();
    }
    if let Some((content_type, body)) = own {
        return ([(header::CONTENT_TYPE, content_type)], body).into_response();
    }
    match SAMPLES.iter().find(|(sample, _, _)| *sample == path) {
        Some((_, body, content_type)) => {
            ([(header::CONTENT_TYPE, *content_type)], *body).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such board").into_response(),
    }
}
