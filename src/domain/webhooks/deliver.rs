//! `webhooks.deliver`: one delivery to one endpoint, as the Standard Webhooks
//! specification has it.
//!
//! A `POST` of `{"id", "type", "occurred_at", "data"}` with the headers `webhook-id`
//! (`evt_<event id>`, the same on every try), `webhook-timestamp` (this attempt's unix
//! seconds) and `webhook-signature` (`v1,` and the base64 of HMAC-SHA256 over
//! `<id>.<timestamp>.<body>` with the endpoint's secret). A 2xx within
//! `STANDMEET_WEBHOOK_TIMEOUT_MS` is delivered. Anything else is a failed attempt, tried
//! again with the jobs' backoff up to 8 times: another status (a redirect too: none is
//! followed), no answer in time, a refused connection. `410 Gone` means the endpoint
//! is not coming back: it is disabled at once. A delivery that spent all its attempts
//! counts against its endpoint, and 20 of those in a row disable it.
//!
//! Before an attempt, the endpoint's circuit breaker (see `circuit`) may make the
//! delivery wait instead, with its attempt given back; after it, the circuit learns
//! whether it got through.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::PgPool;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use url::Url;

use super::circuit::{self, Admission};
use super::in_flight::{Boarding, InFlight};
use super::{DISABLE_AFTER_FAILURES, TEST_MESSAGE_TYPE};
use crate::config::Settings;
use crate::domain::outbound;
use crate::domain::secrets::WebhookSecret;
use standmeet_jobs::{JobContext, JobError, JobKind};

/// How much of an endpoint's answer a delivery's record keeps.
pub const EXCERPT_BYTES: usize = 1024;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeliverArgs {
    pub delivery_id: i64,
}

/// What a delivered attempt found; the job's output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeliverOutput {
    pub response_status: u16,
    pub duration_ms: u64,
}

/// The `webhooks.deliver` handler, with its HTTP client.
pub struct DeliverWebhook {
    client: reqwest::Client,
    allow_private: bool,
    timeout: Duration,
    /// The backoff unit, which the circuit's openings are counted in.
    retry_base: Duration,
    /// Deliveries in flight per endpoint in this process (see `in_flight`).
    in_flight: InFlight,
}

impl DeliverWebhook {
    pub fn new(settings: &Settings) -> anyhow::Result<DeliverWebhook> {
        let client = outbound::client_builder(settings.fetch_allow_private)
            .user_agent(format!("StandMeet-Webhooks/{}", env!("CARGO_PKG_VERSION")))
            .connect_timeout(settings.webhook_timeout.min(Duration::from_secs(5)))
            .timeout(settings.webhook_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(DeliverWebhook {
            client,
            allow_private: settings.fetch_allow_private,
            timeout: settings.webhook_timeout,
            retry_base: settings.retry_base,
            in_flight: InFlight::new(settings.webhook_timeout),
        })
    }
}

/// Where a delivery goes and what it carries.
struct Target {
    endpoint_id: i64,
    url: String,
    secret: String,
    enabled: bool,
    event_id: Option<i64>,
    event_type: Option<String>,
    data: Option<serde_json::Value>,
    occurred_at: Option<OffsetDateTime>,
    created_at: OffsetDateTime,
}

impl Target {
    /// The message's id and its body.
    fn message(&self, delivery_id: i64) -> (String, Vec<u8>) {
        let (id, kind, occurred_at, data) = match self.event_id {
            Some(event_id) => (
                format!("evt_{event_id}"),
                self.event_type.clone().unwrap_or_default(),
                self.occurred_at.unwrap_or(self.created_at),
                self.data.clone().unwrap_or_else(|| json!({})),
            ),
            None => (
                format!("msg_test_{delivery_id}"),
                TEST_MESSAGE_TYPE.to_string(),
                self.created_at,
                json!({ "endpoint_id": self.endpoint_id }),
            ),
        };
        let body = json!({
            "id": id,
            "type": kind,
            "occurred_at": occurred_at.format(&Rfc3339).unwrap_or_default(),
            "data": data,
        });
        let body = serde_json::to_vec(&body).expect("a JSON value serializes");
        (id, body)
    }
}

/// What one attempt came to.
struct AttemptRecord {
    started_at: OffsetDateTime,
    duration: Duration,
    status: Option<u16>,
    excerpt: String,
    error: Option<String>,
    /// No retry can help: the URL is invalid or the guard refuses its address.
    hopeless: bool,
}

// The database function `record_event` (migrations/20261201000003_record_event.sql)
// queues these jobs itself with the same kind, queue, attempts, priority and arguments;
// `tests/it/webhooks.rs` checks that they agree.
impl JobKind for DeliverWebhook {
    const KIND: &'static str = "webhooks.deliver";
    const QUEUE: &'static str = "webhooks";
    const MAX_ATTEMPTS: i16 = 8;
    /// Longer than the longest `STANDMEET_WEBHOOK_TIMEOUT_MS` allowed.
    const TIMEOUT: Duration = Duration::from_secs(60);
    type Args = DeliverArgs;
    type Output = DeliverOutput;

    async fn run(&self, job: JobContext, args: DeliverArgs) -> Result<DeliverOutput, JobError> {
        let delivery_id = args.delivery_id;
        // The delivery learns its job here, and the job what to deliver where.
        let target = sqlx::query_as!(
            Target,
            r#"
            WITH d AS (
                UPDATE webhook_deliveries SET job_id = $2 WHERE id = $1
                RETURNING endpoint_id, event_id, created_at
            )
            SELECT d.endpoint_id, w.url, w.secret, w.enabled, d.event_id,
                   e.type AS "event_type?", e.data AS "data?", e.occurred_at AS "occurred_at?",
                   d.created_at
            FROM d
            JOIN webhook_endpoints w ON w.id = d.endpoint_id
            LEFT JOIN events e ON e.id = d.event_id
            "#,
            delivery_id,
            job.id.0,
        )
        .fetch_optional(job.pool())
        .await?
        .ok_or_else(|| {
            JobError::discard("the delivery is gone (its endpoint or its event was deleted)")
        })?;
        // A test goes to a disabled endpoint too (that is how one finds out whether it
        // works again); events do not.
        if target.event_id.is_some() && !target.enabled {
            return Err(JobError::cancel("the endpoint is disabled"));
        }
        let secret = WebhookSecret::parse(&target.secret)
            .ok_or_else(|| JobError::discard("the endpoint's secret cannot be read"))?;
        let (message_id, body) = target.message(delivery_id);

        // An event waits for the endpoint's circuit; a test message goes through it
        // (see `circuit`).
        let is_event = target.event_id.is_some();
        let mut flight = None;
        if is_event {
            // A place among this endpoint's deliveries in flight first: one that has
            // not shown it answers quickly holds few workers (see `in_flight`).
            match self.in_flight.board(target.endpoint_id) {
                Boarding::Go(boarded) => flight = Some(boarded),
                Boarding::WaitFor(wait) => {
                    return Err(JobError::snooze(
                        wait,
                        "the endpoint has as many deliveries in flight as it may have \
                         until it answers quickly",
                    ));
                }
            }
            // Its attempt's longest time: the trial holds the circuit that long.
            let trial_time = self.timeout + Duration::from_secs(5);
            let admission = circuit::admit(job.pool(), target.endpoint_id, trial_time).await?;
            if let Admission::WaitUntil(until) = admission {
                let wait = (until - OffsetDateTime::now_utc())
                    .try_into()
                    .unwrap_or(Duration::ZERO)
                    .max(Duration::from_millis(1));
                return Err(JobError::snooze(
                    wait,
                    "the endpoint's circuit is open: too many attempts failed in a row",
                ));
            }
        }

        // The POST, a span of the attempt's trace (when exporting), whose request
        // carries the trace's context to the endpoint.
        let span = crate::trace_span!(
            "webhook.deliver",
            otel.name = "webhook deliver",
            otel.kind = "client",
            webhook.message_id = %message_id,
            http.response.status_code = tracing::field::Empty,
        );
        let record = tracing::Instrument::instrument(
            self.post(&target.url, &secret, &message_id, body),
            span.clone(),
        )
        .await;
        if let Some(status) = record.status {
            span.record("http.response.status_code", status);
        }
        if let Some(flight) = flight {
            flight.landed(record.status.map(|_| record.duration));
        }
        let got_through = record
            .status
            .is_some_and(|status| (200..300).contains(&status));
        if !record.hopeless && !got_through {
            // What the circuit learns is not worth an attempt: a failure to write it is
            // logged.
            if let Err(err) =
                circuit::record_failure(job.pool(), target.endpoint_id, self.retry_base).await
            {
                tracing::warn!(endpoint = target.endpoint_id, error = %err, "cannot record a failed attempt in the endpoint's circuit");
            }
        }

        let status = record.status;
        if let Some(status) = status.filter(|_| got_through) {
            // One statement writes the attempt and the outcome, clears the endpoint's
            // count of failed deliveries (events only) and closes its circuit, when
            // there is anything to clear (deliveries to one endpoint run side by side,
            // and an UPDATE that matches no row locks none). The job's
            // completion follows in the engine's next batch; should it be lost (a
            // crash in between), the job runs again and the receiver gets the message
            // twice, with the same webhook-id: webhooks are delivered at least once.
            sqlx::query!(
                r#"
                WITH attempt AS (
                    INSERT INTO webhook_attempts
                        (delivery_id, started_at, duration_ms, response_status, response_excerpt)
                    VALUES ($1, $2, $3, $4, $5)
                ), delivery AS (
                    UPDATE webhook_deliveries SET outcome = 'delivered' WHERE id = $1
                    RETURNING endpoint_id, event_id
                )
                UPDATE webhook_endpoints w
                SET failures_in_a_row = CASE WHEN d.event_id IS NOT NULL THEN 0
                                             ELSE w.failures_in_a_row END,
                    attempts_failed_in_a_row = 0, circuit_open_until = NULL
                FROM delivery d
                WHERE w.id = d.endpoint_id
                  AND ((d.event_id IS NOT NULL AND w.failures_in_a_row <> 0)
                       OR w.attempts_failed_in_a_row <> 0 OR w.circuit_open_until IS NOT NULL)
                "#,
                delivery_id,
                record.started_at,
                millis(record.duration),
                status as i16,
                record.excerpt,
            )
            .execute(job.pool())
            .await?;
            let output = DeliverOutput {
                response_status: status,
                duration_ms: record.duration.as_millis() as u64,
            };
            return Ok(output);
        }

        record_attempt(job.pool(), delivery_id, &record).await?;
        let error = record
            .error
            .unwrap_or_else(|| "the delivery failed".to_string());
        if status == Some(410) {
            let reason = format!(
                "It answered 410 Gone on {}: it does not want deliveries any more.",
                record.started_at.date()
            );
            disable(job.pool(), target.endpoint_id, &reason).await?;
            end_failed(job.pool(), delivery_id, None).await?;
            return Err(JobError::discard(format!(
                "{error}; the endpoint is disabled"
            )));
        }
        if record.hopeless {
            let counts = target.event_id.map(|_| target.endpoint_id);
            end_failed(job.pool(), delivery_id, counts).await?;
            return Err(JobError::discard(error));
        }
        if job.attempt >= job.max_attempts {
            let counts = target.event_id.map(|_| target.endpoint_id);
            end_failed(job.pool(), delivery_id, counts).await?;
        }
        Err(JobError::retry(error))
    }
}

impl DeliverWebhook {
    /// One signed `POST`; what came of it, never an error.
    async fn post(
        &self,
        url: &str,
        secret: &WebhookSecret,
        message_id: &str,
        body: Vec<u8>,
    ) -> AttemptRecord {
        let started_at = OffsetDateTime::now_utc();
        let started = Instant::now();
        let failed = |error: String, hopeless: bool| AttemptRecord {
            started_at,
            duration: started.elapsed(),
            status: None,
            excerpt: String::new(),
            error: Some(error),
            hopeless,
        };
        let url = match Url::parse(url) {
            Ok(url) => url,
            Err(err) => return failed(format!("the endpoint's URL is not valid: {err}"), true),
        };
        if let Some(refused) = outbound::refusal(&url, self.allow_private) {
            return failed(refused, true);
        }
        let timestamp = started_at.unix_timestamp();
        let signature = secret.sign(message_id, timestamp, &body);
        let sent = crate::telemetry::otel::with_trace_headers(self.client.post(url))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(err) => {
                let refused = outbound::guard_refusal(&err);
                let hopeless = refused.is_some();
                return failed(
                    refused.unwrap_or_else(|| self.transport_words(&err)),
                    hopeless,
                );
            }
        };
        let status = response.status();
        // The start of the answer, for the record; the rest is not waited for.
        let mut excerpt = Vec::new();
        while excerpt.len() < EXCERPT_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => excerpt.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        excerpt.truncate(EXCERPT_BYTES);
        let excerpt = String::from_utf8_lossy(&excerpt)
            .trim_end_matches('\u{FFFD}')
            .replace('\0', "");
        let error = (!status.is_success()).then(|| {
            let words = format!(
                "the endpoint answered {} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            );
            let words = words.trim_end().to_string();
            if status.is_redirection() {
                format!("{words} (redirects are not followed)")
            } else {
                words
            }
        });
        AttemptRecord {
            started_at,
            duration: started.elapsed(),
            status: Some(status.as_u16()),
            excerpt,
            error,
            hopeless: false,
        }
    }

    fn transport_words(&self, err: &reqwest::Error) -> String {
        if err.is_timeout() {
            format!(
                "the endpoint did not answer within {} ms",
                self.timeout.as_millis()
            )
        } else if err.is_connect() {
            "cannot connect to the endpoint".to_string()
        } else {
            format!("the request broke off: {err}")
        }
    }
}

fn millis(duration: Duration) -> i32 {
    duration.as_millis().min(i32::MAX as u128) as i32
}

async fn record_attempt(
    executor: impl sqlx::PgExecutor<'_>,
    delivery_id: i64,
    record: &AttemptRecord,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"
        INSERT INTO webhook_attempts
            (delivery_id, started_at, duration_ms, response_status, response_excerpt, error)
        SELECT $1, $2, $3, $4, $5, $6
        WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1)
        "#,
        delivery_id,
        record.started_at,
        millis(record.duration),
        record.status.map(|status| status as i16),
        record.excerpt,
        record.error,
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// A delivery that will not be tried again: its record says so, and when it carried
/// an event, its endpoint counts one more failure in a row (and is disabled at 20).
async fn end_failed(
    pool: &PgPool,
    delivery_id: i64,
    counts_against: Option<i64>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE webhook_deliveries SET outcome = 'failed' WHERE id = $1",
        delivery_id
    )
    .execute(pool)
    .await?;
    if let Some(endpoint_id) = counts_against {
        let reason = format!(
            "Disabled after {DISABLE_AFTER_FAILURES} deliveries in a row failed (every attempt spent)."
        );
        sqlx::query!(
            r#"
            UPDATE webhook_endpoints
            SET failures_in_a_row = failures_in_a_row + 1,
                disabled_reason = CASE WHEN enabled AND failures_in_a_row + 1 >= $2
                                       THEN $3 ELSE disabled_reason END,
                enabled = enabled AND failures_in_a_row + 1 < $2
            WHERE id = $1
            "#,
            endpoint_id,
            DISABLE_AFTER_FAILURES,
            reason,
        )
        .execute(pool)
        .await?;
    }
    Ok(())
}

async fn disable(pool: &PgPool, endpoint_id: i64, reason: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE webhook_endpoints SET enabled = false, disabled_reason = $2 WHERE id = $1",
        endpoint_id,
        reason
    )
    .execute(pool)
    .await?;
    Ok(())
}
