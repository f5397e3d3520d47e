//! `GET /metrics`: Prometheus text. Jobs by state and kind, the waiters, the receipts
//! given, and how long waking a waiter takes after its job finished.
//!
//! A scrape stays cheap however many jobs the table keeps: unfinished jobs (few) are
//! counted exactly each time; finished ones are counted at most once a minute per
//! process and served from that count in between.
//!
//! Who may read it: with `STANDMEET_METRICS_TOKEN` set, a client that sends it as
//! `Authorization: Bearer <token>` (else 401); without it, loopback clients only (else
//! 403), so a StandMeet on the internet does not tell everyone what it does.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::state::AppState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    state: String,
    kind: String,
}

/// Whether this client may read the metrics; else the answer that says why not.
fn refusal(
    token: Option<&str>,
    headers: &HeaderMap,
    client: Option<std::net::IpAddr>,
) -> Option<Response> {
    match token {
        Some(token) => {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(crate::security::bearer::bearer_token);
            let matches = given.is_some_and(|given| crate::security::bearer::constant_time_eq(given.as_bytes(), token.as_bytes()));
            (!matches).then(|| {
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "The metrics need the bearer token STANDMEET_METRICS_TOKEN.",
                )
                    .into_response()
            })
        }
        None => (!client.is_some_and(|address| address.is_loopback())).then(|| {
            (
                StatusCode::FORBIDDEN,
                "The metrics answer only loopback clients; set STANDMEET_METRICS_TOKEN to read them from elsewhere.",
            )
                .into_response()
        }),
    }
}

pub async fn metrics(
    State(state): State<AppState>,
    client: Option<Extension<crate::security::client::ClientAddress>>,
    proxied: Option<Extension<crate::security::client::ProxiedFromLoopback>>,
    headers: HeaderMap,
) -> Response {
    // Forwarded by a proxy on this host that is not trusted: its client is not this
    // host, whatever the socket says.
    let client = client
        .map(|Extension(client)| client.0)
        .filter(|_| proxied.is_none());
    if let Some(refused) = refusal(state.settings.metrics_token.as_deref(), &headers, client) {
        return refused;
    }
    let mut registry = Registry::with_prefix("standmeet");

    let jobs = Family::<JobLabels, Gauge>::default();
    let unfinished = state.jobs.count_by_state_and_kind(false).await;
    let finished = state.jobs.count_by_state_and_kind(true).await;
    match unfinished.and_then(|unfinished| Ok((unfinished, finished?))) {
        Ok((unfinished, finished)) => {
            for (job_state, kind, count) in unfinished.into_iter().chain(finished) {
                jobs.get_or_create(&JobLabels {
                    state: job_state.to_string(),
                    kind,
                })
                .set(count);
            }
        }
        Err(err) => tracing::warn!(error = %err, "cannot count jobs for /metrics"),
    }
    registry.register("jobs", "Jobs in the table, by state and kind", jobs);

    let waiters = state.jobs.waiters();
    let waiting = Gauge::<i64>::default();
    waiting.set(waiters.waiting as i64);
    registry.register(
        "waiters",
        "Callers waiting for jobs to finish right now",
        waiting,
    );
    let max_waiters = Gauge::<i64>::default();
    max_waiters.set(waiters.max as i64);
    registry.register(
        "waiters_max",
        "How many callers may wait at once",
        max_waiters,
    );
    let receipts = Counter::<u64>::default();
    receipts.inc_by(waiters.receipts);
    registry.register(
        "receipts",
        "Waits that ended with a receipt (limit passed, or no free slot)",
        receipts,
    );
    let answered = Counter::<u64>::default();
    answered.inc_by(waiters.answered);
    registry.register(
        "waits_answered",
        "Waits that ended with the finished jobs",
        answered,
    );
    registry.register(
        "wake_latency_seconds",
        "Time from a job's finalization to its waiter waking",
        WakeLatencyMetric(state.jobs.wake_latency()),
    );
    // Counted whether or not traces are exported (0 then), so that a dashboard's query
    // does not depend on the setting.
    let spans_dropped = Counter::<u64>::default();
    spans_dropped.inc_by(crate::telemetry::otel::spans_dropped());
    registry.register(
        "trace_spans_dropped",
        "Trace spans dropped because the queue to the collector was full or their export failed",
        spans_dropped,
    );
    let listener = Gauge::<i64>::default();
    listener.set(i64::from(state.jobs.listener_connected()));
    registry.register(
        "listener_connected",
        "1 when the job listener is connected",
        listener,
    );

    let mut text = String::new();
    if encode(&mut text, &registry).is_err() {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics",
        )
            .into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The engine's wake-latency histogram ([`standmeet_jobs::WakeLatency`], its own type)
/// as a Prometheus histogram: the same buckets, sum and count.
#[derive(Debug)]
struct WakeLatencyMetric(standmeet_jobs::WakeLatency);

impl prometheus_client::encoding::EncodeMetric for WakeLatencyMetric {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let latency = &self.0;
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            latency.sum_seconds,
            latency.count,
            &latency.buckets,
            None,
        )
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}
