//! The connections under the router: accepting, serving and draining them.
//!
//! What `axum::serve` does, and what it leaves to whoever runs it in front of strangers:
//! - **A header-read timeout.** A connection that has not sent a request's headers
//!   within `STANDMEET_HEADER_TIMEOUT_MS` (10 s) is closed, so a client that trickles a
//!   byte a second holds a socket for seconds, not for ever. An idle keep-alive
//!   connection is closed after the same time: a proxy in front keeps its idle
//!   connections for less (docs/operating.md sets nginx's `keepalive_timeout`).
//! - **A cap on connections** ([`max_connections`]): past it, new connections wait in
//!   the kernel's queue until one closes, instead of running the process out of file
//!   descriptors (which would stop it opening PostgreSQL connections and files too).
//! - **A drain on stop.** The listening socket closes first, so that a proxy sends new
//!   connections to another copy (a refused connect is safe to retry, a POST too).
//!   Connections already open go on serving for the grace; each answer then says
//!   `Connection: close`, so the proxy drops that connection after its request instead
//!   of sending another on it as it closes. A connection idle for [`IDLE_ON_STOP`] is
//!   closed (a proxy that keeps idle connections for less has dropped it already, so
//!   no request crosses the close); its idle time starts when hyper has taken its last
//!   answer's body whole, not when that answer's headers were ready (a GET's event
//!   stream, which need not end, counts as idle from its headers). What is still open
//!   after the grace is shut.
//!
//! The probes (`/livez`, `/readyz`, `/healthz`) are outside the router's limit on
//! requests at once (see `startup::router`), so a crowd of slow clients cannot turn
//! them to 503.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Method, Request, Version, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// The most connections one process holds when the file limit allows it.
const CONNECTIONS_AT_MOST: usize = 10_000;
/// File descriptors kept for what is not a client's connection: PostgreSQL's
/// connections, the vault's files and watches, the log, the private cluster's pipes.
const DESCRIPTORS_KEPT: u64 = 512;
/// How long connections still open at the end of the grace get to finish what they
/// write before they are dropped.
const LAST_WORDS: Duration = Duration::from_secs(1);
/// After a stop, a connection with no request for this long is closed.
pub const IDLE_ON_STOP: Duration = Duration::from_secs(1);
/// How often a draining connection looks whether it is idle.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// Raises this process's soft limit of open files to its hard limit (as Go's runtime
/// does at start: the soft 1,024 of most shells is a leftover of `select`), and answers
/// how many connections it may then hold: [`CONNECTIONS_AT_MOST`], or fewer when the
/// limit is lower, keeping [`DESCRIPTORS_KEPT`] for the rest.
pub fn max_connections() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let soft = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(_) => soft,
        },
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    };
    connections_within(soft)
}

/// The connections a process whose limit of open files is `open_files` may hold:
/// [`CONNECTIONS_AT_MOST`], or what is left after [`DESCRIPTORS_KEPT`] (64 at least).
fn connections_within(open_files: u64) -> usize {
    let for_clients = open_files.saturating_sub(DESCRIPTORS_KEPT).max(64);
    usize::try_from(for_clients)
        .unwrap_or(usize::MAX)
        .min(CONNECTIONS_AT_MOST)
}

/// How [`serve`] treats connections.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `STANDMEET_HEADER_TIMEOUT_MS`.
    pub header_timeout: Duration,
    /// Connections held at once ([`max_connections`]).
    pub max_connections: usize,
    /// How long open connections may go on after `stop`.
    pub grace: Duration,
}

/// Serves `router` on `listener` until `stop`, then drains (see the module
/// documentation). Each request carries its peer's [`ConnectInfo<SocketAddr>`].
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let close_now = CancellationToken::new();
    let mut at_cap_said = false;
    loop {
        let place = match places.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(_) => {
                if !at_cap_said {
                    tracing::warn!(
                        connections = limits.max_connections,
                        "this copy holds as many connections as it may; new ones wait until one closes"
                    );
                    at_cap_said = true;
                }
                tokio::select! {
                    _ = stop.cancelled() => break,
                    place = places.clone().acquire_owned() => match place {
                        Ok(place) => place,
                        Err(_) => break,
                    },
                }
            }
        };
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors, or a connection reset before it was taken: the
                // listener itself is fine. A pause, so that a lasting cause is not a
                // busy loop.
                tracing::warn!(error = %err, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        at_cap_said = false;
        let _ = stream.set_nodelay(true);
        connections.spawn(serve_connection(
            stream,
            peer,
            router.clone(),
            limits.header_timeout,
            stop.clone(),
            close_now.clone(),
            place,
        ));
    }
    // New connections are refused from here on: the proxy tries another copy.
    drop(listener);
    connections.close();
    if tokio::time::timeout(limits.grace, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "connections still open {:?} after the stop signal; closing them",
            limits.grace
        );
        close_now.cancel();
        let _ = tokio::time::timeout(LAST_WORDS, connections.wait()).await;
    }
    Ok(())
}

/// Requests in flight on one connection, and since when it has had none.
#[derive(Debug)]
struct Activity {
    in_flight: std::sync::atomic::AtomicUsize,
    idle_since: std::sync::Mutex<tokio::time::Instant>,
}

impl Activity {
    fn idle_for(&self) -> Option<Duration> {
        use std::sync::atomic::Ordering;
        (self.in_flight.load(Ordering::Acquire) == 0).then(|| {
            self.idle_since
                .lock()
                .map(|since| since.elapsed())
                .unwrap_or_default()
        })
    }
}

/// One request on a connection, from its headers until its answer's body has been
/// handed over whole (or dropped, when the connection died): only then does the
/// connection's idle time start. Counted from the answer's headers instead, a page that
/// took longer than a proxy's idle limit to send would let the stopping copy close the
/// connection as the proxy sent its next request on it (a POST lost with a 502).
struct InFlight {
    activity: Arc<Activity>,
    counted: bool,
}

impl InFlight {
    fn begin(activity: Arc<Activity>) -> InFlight {
        activity
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        InFlight {
            activity,
            counted: true,
        }
    }

    /// The connection may count as idle from now on, though this answer goes on.
    fn no_longer_counted(&mut self) {
        self.end();
        self.counted = false;
    }

    fn end(&self) {
        // The time first, so that no look sees no request in flight with an old time.
        if let Ok(mut since) = self.activity.idle_since.lock() {
            *since = tokio::time::Instant::now();
        }
        if self.counted {
            self.activity
                .in_flight
                .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.end();
    }
}

/// Whether `response` is an event stream (`text/event-stream`).
fn streams_events(response: &axum::response::Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"))
}

/// An answer's body that holds its request [`InFlight`] until hyper has taken its
/// last frame and drops it; frames and size pass through unchanged (a known length
/// still becomes `Content-Length`).
struct UntilSent {
    body: Body,
    /// Held for its `Drop`: the request ends with the body.
    _in_flight: InFlight,
}

impl hyper::body::Body for UntilSent {
    type Data = hyper::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// One connection, HTTP/1.1 or HTTP/2, until it closes, `close_now`, or (after `stop`)
/// it has been idle for [`IDLE_ON_STOP`].
async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
    header_timeout: Duration,
    stop: CancellationToken,
    close_now: CancellationToken,
    _place: tokio::sync::OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity {
        in_flight: std::sync::atomic::AtomicUsize::new(0),
        idle_since: std::sync::Mutex::new(tokio::time::Instant::now()),
    });
    let service = {
        let activity = activity.clone();
        let stop = stop.clone();
        tower::service_fn(move |request: Request<Incoming>| {
            let router = router.clone();
            let in_flight = InFlight::begin(activity.clone());
            let stop = stop.clone();
            async move {
                let version = request.version();
                let method = request.method().clone();
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(peer));
                let mut response = router.oneshot(request).await?;
                // HTTP/2 has no `Connection` header; its graceful shutdown (GOAWAY)
                // does this.
                if stop.is_cancelled() && version <= Version::HTTP_11 {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                // The request is in flight until hyper has taken its body's last frame.
                // But a GET's event stream (the live panel's, an agent's standing MCP
                // stream) need not end before the stop: it counts as idle from its
                // headers, so that a stop closes it after IDLE_ON_STOP (its client
                // reconnects, to another copy); its end still restarts the idle time.
                let mut in_flight = in_flight;
                if method == Method::GET && streams_events(&response) {
                    in_flight.no_longer_counted();
                }
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(UntilSent {
                        body,
                        _in_flight: in_flight,
                    })
                }))
            }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder.http2().timer(TokioTimer::new());
    let connection = builder.serve_connection_with_upgrades(
        TokioIo::new(stream),
        hyper_util::service::TowerToHyperService::new(service),
    );
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        _ = close_now.cancelled() => {}
        _ = async {
            stop.cancelled().await;
            let mut check = tokio::time::interval(IDLE_CHECK);
            loop {
                check.tick().await;
                if activity.idle_for().is_some_and(|idle| idle >= IDLE_ON_STOP) {
                    return;
                }
            }
        } => {}
    }
    connection.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(LAST_WORDS, connection).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_below_the_open_file_limit() {
        // The unit's LimitNOFILE=16384: the most there is.
        assert_eq!(connections_within(16_384), CONNECTIONS_AT_MOST);
        // A shell's soft 1,024 that could not be raised: room kept for the rest.
        assert_eq!(connections_within(1_024), 512);
        assert_eq!(connections_within(100), 64);
    }

    /// Sends a GET of `/` on `stream`; answers what came back first.
    async fn ask(stream: &mut tokio::net::TcpStream) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = [0u8; 256];
        let read = stream.read(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer[..read]).into_owned()
    }

    /// After a stop, a connection is idle from when its last answer's body was sent, not
    /// from when its headers were: a page that took longer than [`IDLE_ON_STOP`] to send
    /// does not leave the connection to close as the proxy sends its next request.
    #[tokio::test]
    async fn after_a_stop_a_slow_answer_counts_as_in_flight_until_its_body_is_sent() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (chunks, receiver) = tokio::sync::mpsc::channel::<&'static str>(1);
        let receiver = Arc::new(tokio::sync::Mutex::new(Some(receiver)));
        let router = Router::new()
            .route("/", axum::routing::get(|| async { "here" }))
            .route(
                "/slow",
                axum::routing::get(move || async move {
                    let receiver = receiver.lock().await.take().expect("asked once");
                    let body = futures_util::stream::unfold(receiver, |mut receiver| async {
                        let chunk = receiver.recv().await?;
                        Some((Ok::<_, std::io::Error>(chunk), receiver))
                    });
                    Body::from_stream(body)
                }),
            );
        let limits = Limits {
            header_timeout: Duration::from_secs(10),
            max_connections: 4,
            grace: Duration::from_secs(10),
        };
        let stop = CancellationToken::new();
        let served = tokio::spawn(serve(listener, router, limits, stop.clone()));
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        chunks.send("first").await.unwrap();
        let mut answer = Vec::new();
        let mut buffer = [0u8; 1024];
        while !String::from_utf8_lossy(&answer).contains("first") {
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(read > 0, "closed before the first chunk");
            answer.extend_from_slice(&buffer[..read]);
        }

        // The stop comes while the body is being sent, and the body takes longer than
        // a connection may be idle after it.
        stop.cancel();
        tokio::time::sleep(IDLE_ON_STOP + Duration::from_millis(500)).await;
        chunks.send("last").await.unwrap();
        drop(chunks);
        while !String::from_utf8_lossy(&answer).ends_with("0\r\n\r\n") {
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(read > 0, "closed before the body's end");
            answer.extend_from_slice(&buffer[..read]);
        }

        // The next request, sent at once as a proxy would, is answered (and told to
        // close the connection after it).
        let next = ask(&mut stream).await;
        assert!(next.contains("here"), "the connection was closed: {next:?}");
        assert!(next.to_lowercase().contains("connection: close"), "{next}");
        served.await.unwrap().unwrap();
    }

    /// A listener whose every place is taken accepts nothing more until one is given
    /// back: a connection beyond the cap waits in the kernel's queue, unanswered.
    #[tokio::test]
    async fn past_the_cap_a_connection_waits_until_another_closes() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = Router::new().route("/", axum::routing::get(|| async { "here" }));
        let limits = Limits {
            header_timeout: Duration::from_secs(10),
            max_connections: 1,
            grace: Duration::from_secs(1),
        };
        let stop = CancellationToken::new();
        let served = tokio::spawn(serve(listener, router, limits, stop.clone()));
        let mut first = tokio::net::TcpStream::connect(address).await.unwrap();
        assert!(ask(&mut first).await.contains("here"));
        // The second is connected by the kernel but not taken while the first is open.
        let mut second = tokio::net::TcpStream::connect(address).await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(500), ask(&mut second)).await;
        assert!(waiting.is_err(), "answered past the cap");
        drop(first);
        let answered = tokio::time::timeout(Duration::from_secs(10), async {
            let mut answer = [0u8; 256];
            let read = second.read(&mut answer).await.unwrap();
            String::from_utf8_lossy(&answer[..read]).into_owned()
        })
        .await
        .expect("answered once the first closed");
        assert!(answered.contains("here"), "{answered}");
        stop.cancel();
        served.await.unwrap().unwrap();
    }
}
