//! The trace collector `bench --traces` exports to: the hidden `standmeet-lab otlp-sink`
//! command, a process of its own (so that receiving costs the measured process
//! nothing), which decodes each OTLP/HTTP request with the official protobuf
//! definitions and counts what came.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// What the sink received so far.
#[derive(Default)]
struct Received {
    requests: AtomicU64,
    spans: AtomicU64,
    bytes: AtomicU64,
}

/// The hidden `standmeet-lab otlp-sink` command: serves on a loopback port, prints
/// `port <n>` on its first line, and answers `GET /count` with what it received.
pub async fn sink_main() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("port {}", listener.local_addr()?.port());
    let received = Arc::new(Received::default());
    let app = Router::new()
        .route("/v1/traces", axum::routing::post(receive))
        .route("/count", axum::routing::get(count))
        .with_state(received);
    axum::serve(listener, app).await?;
    Ok(())
}

async fn receive(State(received): State<Arc<Received>>, body: Bytes) -> StatusCode {
    received.requests.fetch_add(1, Ordering::Relaxed);
    received
        .bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let spans: usize = request
        .resource_spans
        .iter()
        .flat_map(|resource| &resource.scope_spans)
        .map(|scope| scope.spans.len())
        .sum();
    received.spans.fetch_add(spans as u64, Ordering::Relaxed);
    StatusCode::OK
}

async fn count(State(received): State<Arc<Received>>) -> String {
    format!(
        "{} {} {}",
        received.requests.load(Ordering::Relaxed),
        received.spans.load(Ordering::Relaxed),
        received.bytes.load(Ordering::Relaxed)
    )
}

/// A sink started as a child of this process.
pub struct Sink {
    child: Child,
    pub endpoint: String,
}

impl Sink {
    /// Starts `standmeet-lab otlp-sink` (before any runtime: it reads the child's first
    /// line, blocking).
    pub fn start() -> anyhow::Result<Sink> {
        let lab = std::env::current_exe().context("cannot find the standmeet-lab binary")?;
        let mut child = Command::new(lab)
            .arg("otlp-sink")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start the trace sink")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("the sink's output")?;
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)?;
        let port = line
            .trim()
            .strip_prefix("port ")
            .and_then(|port| port.parse::<u16>().ok())
            .with_context(|| format!("the sink said {line:?}, not its port"))?;
        Ok(Sink {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        })
    }

    /// What it received: `(requests, spans, bytes)` (blocking: asked once the measured
    /// runtime is gone and the export shut down).
    pub fn received(&self) -> anyhow::Result<(u64, u64, u64)> {
        let text = reqwest::blocking::get(format!("{}/count", self.endpoint))?.text()?;
        let numbers: Vec<u64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        match numbers[..] {
            [requests, spans, bytes] => Ok((requests, spans, bytes)),
            _ => anyhow::bail!("the sink answered {text:?}"),
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
