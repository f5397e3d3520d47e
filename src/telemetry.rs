//! Tracing: one subscriber for the process, and the span every HTTP request runs in.

use std::io::IsTerminal;

use axum::http::Request;
use tracing::Span;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber with `filter` (already validated by `config`), as
/// text for people or as one JSON object per line (with the fields of the spans the
/// event happened in: the request's method, path and id, the job's id, kind and
/// attempt) for log collectors (`STANDMEET_LOG_FORMAT`).
/// Logs go to stderr, so that stdout carries only what a command prints on purpose
/// (`standmeet postgres start` prints a URL). Safe to call more than once (tests):
/// later calls leave the first subscriber.
pub fn init(filter: &str, format: LogFormat) {
    // sqlx's pool warnings about broken connections are expected noise (see
    // `config::QUIET_SQLX_POOL`), unless the filter names sqlx's pool itself.
    let filter = if filter.contains("sqlx::pool") {
        filter.to_string()
    } else {
        format!("{filter},{}", crate::config::QUIET_SQLX_POOL)
    };
    let filter = EnvFilter::builder()
        .parse(&filter)
        .unwrap_or_else(|_| EnvFilter::new(crate::config::DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
}

pub use crate::config::LogFormat;

/// The span of one HTTP request: method, path and the request id that
/// `SetRequestIdLayer` put on it. The query string is left out: it can hold tokens.
pub fn request_span<B>(request: &Request<B>) -> Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-");
    tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        request_id = %request_id,
    )
}
