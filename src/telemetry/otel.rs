//! Traces over OpenTelemetry (OTLP/HTTP, protobuf), when an endpoint is set.
//!
//! With `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, the
//! spans of `standmeet` and `standmeet_jobs` go to that collector through the SDK's
//! batch processor, honouring the standard `OTEL_*` variables (the SDK reads the
//! sampler, the resource, the batch sizes; the exporter the endpoints, headers and
//! timeout). Unset, none of this exists: no layer, no span added anywhere
//! ([`exporting`] is false), and nothing stored with jobs.
//!
//! What belongs to one trace: a request (its incoming `traceparent` honoured), the
//! server function or MCP tool it calls, the job it inserts (the insert's context is
//! stored with the job, see `standmeet_jobs::trace`), every attempt of that job in
//! whichever process runs it, and inside an attempt the SMTP send, a webhook delivery
//! or a job board fetch, whose outgoing requests carry `traceparent`. A schedule's
//! firing and the vault watcher start traces of their own.
//!
//! A collector that is down or slow costs a request or a job nothing: a span is queued
//! without waiting (and dropped when the queue is full), and the export runs on the
//! processor's own thread. Every span dropped, by a full queue or a failed export, is
//! counted ([`spans_dropped`], on `/metrics`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor, Tracer,
};
use standmeet_jobs::attempt::AttemptContext;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether this process exports traces (set once, at start).
static EXPORTING: AtomicBool = AtomicBool::new(false);
/// Spans dropped since the start: queue full, or their export failed.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Whether this process exports traces: the spans that exist only for a trace (a
/// server function's, an attempt's, an SMTP send's) are made only then.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// How many spans were dropped since the start, because the queue to the collector
/// was full or their export failed (`standmeet_trace_spans_dropped_total`).
pub fn spans_dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The export of this process's traces; [`TraceExport::shutdown`] sends what is
/// queued (within a few seconds) before the process ends.
pub struct TraceExport {
    provider: SdkTracerProvider,
}

impl TraceExport {
    pub fn shutdown(self) {
        if let Err(err) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            eprintln!("standmeet: the last traces were not all exported: {err}");
        }
    }
}

/// The variables that turn export on.
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// Starts exporting traces when the environment asks for it (see the module
/// documentation), or to `endpoint` (a collector's base URL) when one is given: answers
/// the export (to shut down at the end) and the tracer for the `tracing` layer; `None`
/// when no endpoint is set.
pub fn start(endpoint: Option<&str>) -> anyhow::Result<Option<(TraceExport, Tracer)>> {
    let wanted = endpoint.is_some()
        || ENDPOINT_VARIABLES
            .iter()
            .any(|name| std::env::var(name).is_ok_and(|value| !value.trim().is_empty()));
    if !wanted {
        return Ok(None);
    }
    if let Ok(protocol) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
        && protocol != "http/protobuf"
    {
        anyhow::bail!(
            "OTEL_EXPORTER_OTLP_PROTOCOL is {protocol:?}, but StandMeet exports traces over \
             OTLP/HTTP with protobuf only: unset it, or set it to http/protobuf"
        );
    }
    let queue_size = env_number("OTEL_BSP_MAX_QUEUE_SIZE").unwrap_or(2048);
    let queued = Arc::new(AtomicUsize::new(0));
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_http_client(OtlpClient::new(export_timeout())?);
    if let Some(endpoint) = endpoint {
        exporter = exporter.with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')));
    }
    let exporter = exporter.build()?;
    let processor = BatchSpanProcessor::builder(CountedExporter {
        inner: exporter,
        queued: queued.clone(),
    })
    .with_batch_config(
        BatchConfigBuilder::default()
            .with_max_queue_size(queue_size)
            .build(),
    )
    .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(CountedQueue {
            inner: processor,
            queued,
            limit: queue_size,
        })
        .with_resource(resource())
        .build();
    let tracer = provider.tracer("standmeet");
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    EXPORTING.store(true, Ordering::Relaxed);
    standmeet_jobs::trace::carry_traces(JobSpans);
    Ok(Some((TraceExport { provider }, tracer)))
}

/// The resource: the SDK's (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SERVICE_NAME`), named
/// `standmeet` when neither names the service.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|name| !name.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES")
            .is_ok_and(|attributes| attributes.contains("service.name="));
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name("standmeet").build()
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds),
/// else the standard 10 s: the longest one export may take.
fn export_timeout() -> Duration {
    let millis = env_number("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
        .or_else(|| env_number("OTEL_EXPORTER_OTLP_TIMEOUT"))
        .unwrap_or(10_000);
    Duration::from_millis(millis as u64)
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The exporter's HTTP client: StandMeet's own reqwest (with its TLS), blocking,
/// because the batch processor exports on a thread of its own, outside any async
/// runtime. (The exporter's built-in client would bring a second reqwest and another
/// TLS stack into the build.)
#[derive(Debug)]
struct OtlpClient {
    client: reqwest::blocking::Client,
}

impl OtlpClient {
    fn new(timeout: Duration) -> anyhow::Result<OtlpClient> {
        // Built on a thread of its own: a blocking client must not be made (or dropped)
        // inside an async runtime, and this may run in one (the tests).
        let client = std::thread::spawn(move || {
            reqwest::blocking::Client::builder()
                .timeout(timeout)
                .build()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("building the trace exporter's HTTP client panicked"))??;
        Ok(OtlpClient { client })
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OtlpClient {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let request = reqwest::blocking::Request::try_from(request)?;
        let response = self.client.execute(request)?;
        let mut answer = http::Response::builder().status(response.status());
        if let Some(headers) = answer.headers_mut() {
            headers.extend(
                response
                    .headers()
                    .iter()
                    .map(|(name, value)| (name.clone(), value.clone())),
            );
        }
        Ok(answer.body(response.bytes()?)?)
    }
}

/// The batch processor, with the spans it holds counted: a span that would overflow
/// its queue is dropped (and counted) here, where the count is ours to read.
#[derive(Debug)]
struct CountedQueue {
    inner: BatchSpanProcessor,
    /// Spans handed to `inner` and not yet to the exporter.
    queued: Arc<AtomicUsize>,
    limit: usize,
}

impl SpanProcessor for CountedQueue {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.queued.fetch_add(1, Ordering::Relaxed) >= self.limit {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting the spans of every batch it could not deliver.
#[derive(Debug)]
struct CountedExporter {
    inner: opentelemetry_otlp::SpanExporter,
    queued: Arc<AtomicUsize>,
}

impl SpanExporter for CountedExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        self.queued.fetch_sub(spans, Ordering::Relaxed);
        let exported = self.inner.export(batch).await;
        if exported.is_err() {
            DROPPED.fetch_add(spans as u64, Ordering::Relaxed);
        }
        exported
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The longest `tracestate` taken from a request, and the most members: past either,
/// it is dropped (the W3C limit is 32 members; 512 bytes is what vendors send). Child
/// spans inherit it, so an unbounded one would ride on every span of the request.
pub const MAX_TRACESTATE_BYTES: usize = 512;
pub const MAX_TRACESTATE_MEMBERS: usize = 32;

/// Whether a `tracestate` value is within [`MAX_TRACESTATE_BYTES`] and
/// [`MAX_TRACESTATE_MEMBERS`].
pub fn tracestate_is_small(value: &str) -> bool {
    value.len() <= MAX_TRACESTATE_BYTES
        && value
            .split(',')
            .filter(|member| !member.trim().is_empty())
            .count()
            <= MAX_TRACESTATE_MEMBERS
}

/// A request's trace headers as the propagator reads them, a `tracestate` past the
/// limits left out.
struct BoundedTraceHeaders<'a>(&'a http::HeaderMap);

impl opentelemetry::propagation::Extractor for BoundedTraceHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = self.0.get(key)?.to_str().ok()?;
        if key.eq_ignore_ascii_case("tracestate") && !tracestate_is_small(value) {
            return None;
        }
        Some(value)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

/// Names `span` (a request's) for a trace, when this process exports traces, and
/// places it by the trace context the request came with (its `traceparent`):
/// - from a client whose word is taken (`trusted`: loopback, or one of
///   `STANDMEET_TRUSTED_PROXIES`), the span continues that trace;
/// - from anyone else, the span starts a trace of its own (our sampler decides) with a
///   link to theirs: a visitor neither picks the trace id that is stored with their
///   jobs and sent to webhook receivers, nor whether it is sampled.
///
/// A `tracestate` over [`MAX_TRACESTATE_BYTES`] or [`MAX_TRACESTATE_MEMBERS`] is
/// dropped, and a link carries none.
pub fn continue_trace<B>(span: &Span, request: &http::Request<B>, trusted: bool) {
    if !exporting() {
        return;
    }
    span.record(
        "otel.name",
        tracing::field::display(format_args!(
            "{} {}",
            request.method(),
            request.uri().path()
        )),
    );
    span.record("otel.kind", "server");
    let headers = request.headers();
    if !headers.contains_key("traceparent") {
        return;
    }
    let context = TraceContextPropagator::new().extract(&BoundedTraceHeaders(headers));
    let theirs = context.span().span_context().clone();
    if !theirs.is_valid() {
        return;
    }
    if trusted {
        let _ = span.set_parent(context);
    } else {
        span.add_link(opentelemetry::trace::SpanContext::new(
            theirs.trace_id(),
            theirs.span_id(),
            theirs.trace_flags(),
            true,
            opentelemetry::trace::TraceState::default(),
        ));
    }
}

/// The W3C trace context of the span entered now, as headers (`traceparent`, and
/// `tracestate` when it has one); empty when this process exports no traces.
pub fn trace_headers() -> HashMap<String, String> {
    let mut headers = HashMap::new();
    if exporting() {
        let context = Span::current().context();
        if context.span().span_context().is_valid() {
            TraceContextPropagator::new().inject_context(&context, &mut headers);
        }
    }
    headers
}

/// `request` carrying the trace context of the span entered now (see
/// [`trace_headers`]).
pub fn with_trace_headers(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    trace_headers()
        .into_iter()
        .fold(request, |request, (name, value)| {
            request.header(name, value)
        })
}

/// The `traceparent` of the span entered now, to store with jobs that SQL inserts
/// (`record_event`'s deliveries); `None` when this process exports no traces.
pub fn current_traceparent() -> Option<String> {
    exporting()
        .then(|| traceparent_of(&Span::current()))
        .flatten()
}

/// The trace context to store with a job, to continue in its attempts.
pub fn traceparent_of(span: &Span) -> Option<String> {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut headers = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut headers);
    headers.remove("traceparent")
}

/// The engine's side of traces: a span for each insert, the insert's context stored
/// with its job, and each attempt a span under it.
struct JobSpans;

impl standmeet_jobs::trace::JobTraces for JobSpans {
    fn insert_span(&self, kind: &str, queue: &str) -> Span {
        tracing::info_span!(
            "job.insert",
            otel.name = %format_args!("insert {kind}"),
            otel.kind = "producer",
            job.kind = %kind,
            job.queue = %queue,
        )
    }

    fn current_traceparent(&self) -> Option<String> {
        traceparent_of(&Span::current())
    }

    fn attempt_span(&self, attempt: &AttemptContext, queue: &str, parent: Option<&str>) -> Span {
        let span = tracing::info_span!(
            parent: None,
            "job.attempt",
            otel.name = %format_args!("{} attempt {}", attempt.kind, attempt.attempt),
            otel.kind = "consumer",
            otel.status_code = tracing::field::Empty,
            otel.status_message = tracing::field::Empty,
            job.id = attempt.id.0,
            job.kind = %attempt.kind,
            job.queue = %queue,
            job.attempt = attempt.attempt,
            job.outcome = tracing::field::Empty,
        );
        if let Some(traceparent) = parent {
            let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
            let context = TraceContextPropagator::new().extract(&carrier);
            if context.span().span_context().is_valid() {
                let _ = span.set_parent(context);
            }
        }
        span
    }

    fn attempt_ended(&self, span: &Span, outcome: &str, error: Option<&str>) {
        span.record("job.outcome", outcome);
        if let Some(error) = error {
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_message", error);
        } else if outcome == "completed" {
            span.record("otel.status_code", "OK");
        }
    }
}

/// A span made only when this process exports traces (`Span::none()` otherwise), for
/// the spans that exist for a trace alone.
#[macro_export]
macro_rules! trace_span {
    ($($span:tt)*) => {
        if $crate::telemetry::otel::exporting() {
            ::tracing::info_span!($($span)*)
        } else {
            ::tracing::Span::none()
        }
    };
}

/// The paths under `/api/` that are endpoints of their own, not server functions.
const NOT_SERVER_FUNCTIONS: [&str; 2] = ["/api/jobs/status", "/api/live"];

/// Runs a server function's request (`/api/<name>`) in a span of its own, inside the
/// request's, when this process exports traces.
pub async fn server_function_span(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = request.uri().path();
    let name = path
        .strip_prefix("/api/")
        .filter(|_| exporting() && !NOT_SERVER_FUNCTIONS.contains(&path))
        .map(str::to_string);
    match name {
        None => next.run(request).await,
        Some(name) => {
            let span = tracing::info_span!(
                "server_fn",
                otel.name = %format_args!("server_fn {name}"),
                server_fn.name = %name,
            );
            tracing::Instrument::instrument(next.run(request), span).await
        }
    }
}

/// Runs an MCP request (`/mcp`) in a span of its own, and keeps that span's trace
/// context with the request, for the tool call it carries, which runs in the MCP
/// session's task (see [`tool_call_span`]). (The span entered here is the session
/// layer's, which traces do not take, so its context would be empty.)
pub async fn keep_trace_context(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if !exporting() {
        return next.run(request).await;
    }
    let span = tracing::info_span!("mcp", otel.name = "mcp request");
    request
        .extensions_mut()
        .insert(RequestTrace(span.context()));
    tracing::Instrument::instrument(next.run(request), span).await
}

/// The trace context of the HTTP request a piece of work came in (see
/// [`keep_trace_context`]).
#[derive(Clone)]
pub struct RequestTrace(opentelemetry::Context);

/// The span of one MCP tool call, a child of the HTTP request that carried it (the
/// call runs in the MCP session's task, not the request's).
pub fn tool_call_span(tool: &str, request: Option<&http::request::Parts>) -> Span {
    if !exporting() {
        return Span::none();
    }
    let span = tracing::info_span!(
        parent: None,
        "mcp.tool",
        otel.name = %format_args!("tool {tool}"),
        mcp.tool = %tool,
    );
    if let Some(RequestTrace(context)) =
        request.and_then(|parts| parts.extensions.get::<RequestTrace>())
    {
        let _ = span.set_parent(context.clone());
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracestate_over_512_bytes_or_32_members_is_not_taken() {
        let members = |n: usize| {
            (0..n)
                .map(|i| format!("v{i}=x"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert!(tracestate_is_small("vendor=abc"));
        assert!(tracestate_is_small(&members(32)));
        assert!(!tracestate_is_small(&members(33)));
        assert!(!tracestate_is_small(&format!("vendor={}", "x".repeat(506))));
        assert!(tracestate_is_small(&format!("vendor={}", "x".repeat(505))));
    }
}
