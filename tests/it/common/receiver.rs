//! A webhook receiver on loopback: real HTTP, answers from a script (a status, a hang,
//! a redirect), every request kept for the test to look at, and a signature check of
//! its own (HMAC-SHA256 written out here from SHA-256, not StandMeet's function).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::{Digest, Sha256};

/// What the receiver answers one request with.
#[derive(Clone, Debug)]
pub enum Answer {
    Status(u16),
    /// No answer at all (longer than any delivery waits).
    Hang,
    /// `302 Found` to this path.
    Redirect(&'static str),
    /// `200`, after this many milliseconds.
    OkAfter(u64),
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// Whether its `webhook-signature` is right for `secret` (`whsec_…`), as a
    /// receiver following the Standard Webhooks specification checks it.
    pub fn signed_with(&self, secret: &str) -> bool {
        let key = BASE64
            .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
            .expect("base64 after whsec_");
        let mut signed = Vec::new();
        signed.extend_from_slice(self.header("webhook-id").as_bytes());
        signed.push(b'.');
        signed.extend_from_slice(self.header("webhook-timestamp").as_bytes());
        signed.push(b'.');
        signed.extend_from_slice(&self.body);
        let expected = format!("v1,{}", BASE64.encode(hmac_sha256(&key, &signed)));
        self.header("webhook-signature")
            .split(' ')
            .any(|signature| signature == expected)
    }
}

/// HMAC-SHA256 (RFC 2104) from SHA-256 itself.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner = Sha256::new()
        .chain_update(block.map(|byte| byte ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|byte| byte ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[derive(Default)]
struct Shared {
    script: VecDeque<Answer>,
    otherwise: Option<Answer>,
    received: Vec<Received>,
    /// Requests being answered now, and the most there were at once.
    in_flight: usize,
    most_in_flight: usize,
}

/// A request being answered; its end (an answer, or the client giving up) is counted
/// when dropped.
struct Answering(Arc<Mutex<Shared>>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.lock().unwrap().in_flight -= 1;
    }
}

/// The receiver; answers `200` unless told otherwise.
pub struct Receiver {
    address: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free loopback port");
        let address = listener.local_addr().expect("a bound address");
        tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("the receiver serves");
        });
        Receiver { address, shared }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// The next requests get these answers, in order; then the usual one.
    pub fn then(&self, answers: &[Answer]) {
        self.shared
            .lock()
            .unwrap()
            .script
            .extend(answers.iter().cloned());
    }

    /// Every request after the scripted ones gets `answer`.
    pub fn always(&self, answer: Answer) {
        self.shared.lock().unwrap().otherwise = Some(answer);
    }

    /// The most requests it was answering at once.
    pub fn most_in_flight(&self) -> usize {
        self.shared.lock().unwrap().most_in_flight
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }

    /// Waits until `count` requests arrived (panics after 20 s); answers them all.
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        super::jobs::wait_until(Duration::from_secs(20), || async {
            self.received().len() >= count
        })
        .await;
        self.received()
    }
}

async fn answer(State(shared): State<Arc<Mutex<Shared>>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let headers = request.headers().clone();
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let _answering = Answering(shared.clone());
    let answer = {
        let mut shared = shared.lock().unwrap();
        shared.in_flight += 1;
        shared.most_in_flight = shared.most_in_flight.max(shared.in_flight);
        shared.received.push(Received {
            path,
            headers,
            body,
        });
        let next = shared.script.pop_front();
        next.or_else(|| shared.otherwise.clone())
            .unwrap_or(Answer::Status(200))
    };
    match answer {
        Answer::Status(status) => (
            StatusCode::from_u16(status).expect("a status"),
            format!("answered {status}"),
        )
            .into_response(),
        Answer::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::OK.into_response()
        }
        Answer::OkAfter(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            StatusCode::OK.into_response()
        }
        Answer::Redirect(to) => {
            (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
        }
    }
}
