//! `GET /metrics`: Prometheus text. Jobs by state and kind (counted when scraped),
//! the waiters, the receipts given, and how long waking a waiter takes after its job
//! finished.

use axum::extract::State;
use axum::http::{StatusCode, header};
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

pub async fn metrics(State(state): State<AppState>) -> Response {
    let mut registry = Registry::with_prefix("standmeet");

    let jobs = Family::<JobLabels, Gauge>::default();
    match state.jobs.count_by_state_and_kind().await {
        Ok(counts) => {
            for (job_state, kind, count) in counts {
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

    let waiters = state.signals.waiters.clone();
    let waiting = Gauge::<i64>::default();
    waiting.set(waiters.waiting() as i64);
    registry.register(
        "waiters",
        "Callers waiting for jobs to finish right now",
        waiting,
    );
    let max_waiters = Gauge::<i64>::default();
    max_waiters.set(waiters.max() as i64);
    registry.register(
        "waiters_max",
        "How many callers may wait at once",
        max_waiters,
    );
    let receipts = Counter::<u64>::default();
    receipts.inc_by(waiters.receipts_given());
    registry.register(
        "receipts",
        "Waits that ended with a receipt (limit passed, or no free slot)",
        receipts,
    );
    let answered = Counter::<u64>::default();
    answered.inc_by(waiters.answered());
    registry.register(
        "waits_answered",
        "Waits that ended with the finished jobs",
        answered,
    );
    registry.register(
        "wake_latency_seconds",
        "Time from a job's finalization to its waiter waking",
        waiters.wake_latency().clone(),
    );
    let listener = Gauge::<i64>::default();
    listener.set(i64::from(state.signals.listener_connected()));
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
