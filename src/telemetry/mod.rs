//! Tracing: one subscriber for the process, the span every HTTP request runs in, and
//! (`otel`) traces exported over OpenTelemetry when an endpoint is set.

pub mod otel;

use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use axum::http::Request;
use tracing::{Event, Span, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, JsonFields, Writer};
use tracing_subscriber::registry::LookupSpan;

/// Installs the global subscriber with `filter` (already validated by `config`), as
/// text for people or as one JSON object per line (with the fields of the spans the
/// event happened in, such as the request's method, path and id) for log collectors
/// (`STANDMEET_LOG_FORMAT`). A line written inside a job's attempt also names the job
/// (see [`WithAttempt`]).
/// Logs go to stderr, so that stdout carries only what a command prints on purpose
/// (`standmeet postgres start` prints a URL). Safe to call more than once (tests):
/// later calls leave the first subscriber.
///
/// With an OTLP endpoint in the environment, StandMeet's spans are also exported as
/// traces (see [`otel`]), whatever the log filter: the answer is that export, to shut
/// down before the process ends. Exporting cannot start with a setting it refuses
/// (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`): that is an error in words.
pub fn init(filter: &str, format: LogFormat) -> anyhow::Result<Option<otel::TraceExport>> {
    init_exporting_to(filter, format, None)
}

/// [`init`], exporting traces to `endpoint` (a collector's base URL) whatever the
/// environment says, when one is given (the lab's `bench --traces`).
pub fn init_exporting_to(
    filter: &str,
    format: LogFormat,
    endpoint: Option<&str>,
) -> anyhow::Result<Option<otel::TraceExport>> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    // Chatty dependencies stay quiet (`config::QUIET_DEPENDENCIES`), unless the filter
    // names them itself.
    let mut filter = filter.to_string();
    for (target, directive) in crate::config::QUIET_DEPENDENCIES {
        if !filter.contains(target) {
            filter = format!("{filter},{directive}");
        }
    }
    let filter = EnvFilter::builder()
        .parse(&filter)
        .unwrap_or_else(|_| EnvFilter::new(crate::config::DEFAULT_LOG_FILTER));
    let (export, tracer) = match otel::start(endpoint)? {
        Some((export, tracer)) => (Some(export), Some(tracer)),
        None => (None, None),
    };
    // The traces take StandMeet's own spans (and the events in them) at info, however
    // quiet the log is.
    let traces = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("standmeet", tracing::Level::INFO)
                    .with_target("standmeet_jobs", tracing::Level::INFO),
            )
    });
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log = match format {
        LogFormat::Text => log
            .with_ansi(std::io::stderr().is_terminal())
            .event_format(WithAttempt {
                inner: format::Format::default().with_target(true),
                format,
            })
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => log
            .fmt_fields(JsonFields::new())
            .event_format(WithAttempt {
                inner: format::Format::default()
                    .json()
                    .with_target(true)
                    .with_current_span(true)
                    .with_span_list(true),
                format,
            })
            .with_filter(filter)
            .boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(traces)
        .try_init();
    Ok(export)
}

/// Adds the job attempt a line was written in (`standmeet_jobs::attempt::current_attempt`:
/// the engine keeps it in a task-local rather than a span, for speed) to the line
/// `inner` formats: `job.id=… job.kind=… job.attempt=…` at the end of a text line, a
/// `"job": {"id", "kind", "attempt"}` object in a JSON one. Lines written outside an
/// attempt are `inner`'s unchanged. A job's line on a terminal loses its colours (it
/// is formatted into a string first).
struct WithAttempt<F> {
    inner: F,
    format: LogFormat,
}

impl<S, N, F> FormatEvent<S, N> for WithAttempt<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some(attempt) = standmeet_jobs::attempt::current_attempt() else {
            return self.inner.format_event(context, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(context, Writer::new(&mut line), event)?;
        writer.write_str(&with_attempt(&line, &attempt, self.format))
    }
}

/// `line` (one formatted log line, ending in a newline) naming `attempt`.
fn with_attempt(
    line: &str,
    attempt: &standmeet_jobs::attempt::AttemptContext,
    format: LogFormat,
) -> String {
    let body = line.strip_suffix('\n').unwrap_or(line);
    let mut out = String::with_capacity(body.len() + 64);
    match (format, body.strip_suffix('}')) {
        (LogFormat::Json, Some(object)) => {
            let job = serde_json::json!({
                "id": attempt.id.0,
                "kind": attempt.kind,
                "attempt": attempt.attempt,
            });
            let _ = write!(out, "{object},\"job\":{job}}}");
        }
        _ => {
            let _ = write!(
                out,
                "{body} job.id={} job.kind={} job.attempt={}",
                attempt.id.0, attempt.kind, attempt.attempt
            );
        }
    }
    out.push('\n');
    out
}

pub use crate::config::LogFormat;

/// The span of one HTTP request: method, path, the request id that `SetRequestIdLayer`
/// put on it, and the client's address (recorded by `security::client`, once it knows
/// which proxies to believe). The query string is left out: it can hold tokens.
///
/// The trace context the request brings is taken only from a peer that `trusted`
/// names (see [`otel::continue_trace`]).
pub fn request_span<B>(request: &Request<B>, trusted: impl Fn(std::net::IpAddr) -> bool) -> Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-");
    let span = tracing::info_span!(
        "request",
        // Filled in only for a trace (`otel::continue_trace`), so the log stays as it was.
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        method = %request.method(),
        path = %request.uri().path(),
        request_id = %request_id,
        client = tracing::field::Empty,
    );
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip())
        .or_else(|| {
            request
                .extensions()
                .get::<axum::extract::connect_info::MockConnectInfo<std::net::SocketAddr>>()
                .map(|info| info.0.ip())
        });
    let from_trusted = peer.is_some_and(|peer| peer.is_loopback() || trusted(peer));
    otel::continue_trace(&span, request, from_trusted);
    span
}

/// Whether a client's `x-request-id` is kept as the request's id: 1 to 64 characters
/// of `[A-Za-z0-9._-]`. Anything else (spaces, `=`, quotes, kilobytes) could forge
/// fields in a text log line or swell every line of the request; a new id is made.
pub fn is_usable_request_id(value: &[u8]) -> bool {
    (1..=64).contains(&value.len())
        && value
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Takes away a client's `x-request-id` that [`is_usable_request_id`] refuses (or
/// that comes more than once), so that the next layer makes a new one.
pub async fn drop_unusable_request_id(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let headers = request.headers();
    let mut given = headers.get_all("x-request-id").iter();
    let usable = match (given.next(), given.next()) {
        (None, _) => true,
        (Some(value), None) => is_usable_request_id(value.as_bytes()),
        (Some(_), Some(_)) => false,
    };
    if !usable {
        request.headers_mut().remove("x-request-id");
    }
    next.run(request).await
}

/// Marks a health probe's answer (`/readyz`, `/healthz`), whose 503 while the database
/// is down is the answer asked for, not a failure to log at every probe.
#[derive(Clone, Copy, Debug)]
pub struct HealthProbe;

/// The access log: one line per answered request, in the request's span, with its
/// status and its latency in milliseconds as numbers (a log collector sums and compares
/// them; tower-http's own line writes the latency as a string, "3 ms"). At info, or at
/// warn for a 5xx (the cause of a 500 is logged at error where it happened), but a
/// health probe's.
pub fn access_log<B>(response: &axum::http::Response<B>, latency: std::time::Duration, _: &Span) {
    let status = response.status().as_u16();
    // To the microsecond: 0.84, not 0.8403660000000001.
    let latency_ms = latency.as_micros() as f64 / 1000.0;
    let probe = response.extensions().get::<HealthProbe>().is_some();
    if response.status().is_server_error() && !probe {
        tracing::warn!(status, latency_ms, "finished processing request");
    } else {
        tracing::info!(status, latency_ms, "finished processing request");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt() -> standmeet_jobs::attempt::AttemptContext {
        standmeet_jobs::attempt::AttemptContext {
            id: standmeet_jobs::JobId(42),
            kind: "mail.send".into(),
            attempt: 3,
        }
    }

    #[test]
    fn a_text_line_ends_with_the_job() {
        let line = "2026-12-03T10:00:00Z  WARN standmeet::mail: cannot send error=refused\n";
        assert_eq!(
            with_attempt(line, &attempt(), LogFormat::Text),
            "2026-12-03T10:00:00Z  WARN standmeet::mail: cannot send error=refused job.id=42 job.kind=mail.send job.attempt=3\n"
        );
    }

    #[test]
    fn a_json_line_gains_a_job_object_and_stays_json() {
        let line = r#"{"timestamp":"t","level":"WARN","fields":{"message":"cannot send"},"target":"standmeet::mail"}"#;
        let out = with_attempt(&format!("{line}\n"), &attempt(), LogFormat::Json);
        assert!(out.ends_with("}\n"), "{out}");
        let value: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert_eq!(
            value["job"],
            serde_json::json!({"id": 42, "kind": "mail.send", "attempt": 3})
        );
        assert_eq!(value["fields"]["message"], "cannot send");
    }
}
