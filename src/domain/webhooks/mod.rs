//! Webhooks: the owner's other systems hear about events as signed HTTP requests.
//!
//! An endpoint names a URL and the event types it wants (or `*`). When an event is
//! recorded ([`crate::domain::events::record`]), the same statement inserts one delivery
//! per matching enabled endpoint and one `webhooks.deliver` job per delivery
//! ([`deliver`]), all in the event's transaction: an event that commits is delivered,
//! one that rolls back is not. The job's kind, queue and attempts are written in that
//! statement's SQL function as well as on [`DeliverWebhook`]; a test keeps them equal.
//!
//! A delivery's chip follows its job (`sending` while queued or running, `delivered`,
//! `failed` while it waits for another try or after it gave up); the delivery row keeps
//! how it ended, because the job row is cleaned away after a day. Every attempt leaves a
//! row with the response status, the start of the answer and the time it took.

pub mod circuit;
pub mod deliver;
pub mod in_flight;

use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;
use url::Url;

pub use deliver::{DeliverArgs, DeliverWebhook};

use crate::domain::events::types::EventType;
use crate::domain::outbound;
use crate::domain::secrets::WebhookSecret;
use crate::model::JobState;
use standmeet_jobs::{InsertOptions, JobClient, JobId, RetryOutcome};

/// Failed deliveries in a row (each with every attempt spent) that disable an endpoint.
pub const DISABLE_AFTER_FAILURES: i32 = 20;
/// The type of the message "Send test" delivers (not an event: nothing else gets it).
pub const TEST_MESSAGE_TYPE: &str = "webhook.test";

/// A webhook endpoint, as the pages and tools show it (never with its secret).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Endpoint {
    pub id: i64,
    pub url: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub created_at: OffsetDateTime,
}

/// A new endpoint and its secret: the one time the secret is shown.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CreatedEndpoint {
    #[serde(flatten)]
    pub endpoint: Endpoint,
    pub secret: String,
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Invalid(String),
    #[error("There is no webhook endpoint {0}.")]
    UnknownEndpoint(i64),
    #[error("There is no webhook delivery {0}.")]
    UnknownDelivery(i64),
    /// The delivery or endpoint is not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

crate::domain::failure::failures_on_our_side!(WebhookError);

/// The event types an endpoint may ask for, read from what a person typed or ticked:
/// names of event types, or `*` for all of them (then alone). Duplicates go.
pub fn parse_event_types(asked: &[String]) -> Result<Vec<String>, WebhookError> {
    let mut types: Vec<String> = Vec::new();
    for raw in asked.iter().flat_map(|item| item.split(',')) {
        let name = raw.trim();
        if name.is_empty() {
            continue;
        }
        if name == "*" {
            return Ok(vec!["*".into()]);
        }
        let Some(event_type) = EventType::parse(name) else {
            return Err(WebhookError::Invalid(format!(
                "\"{name}\" is not an event type; use * for all, or some of: {}.",
                EventType::ALL.map(EventType::as_str).join(", ")
            )));
        };
        if !types.iter().any(|known| known == event_type.as_str()) {
            types.push(event_type.as_str().into());
        }
    }
    if types.is_empty() {
        return Err(WebhookError::Invalid(
            "Choose the event types the endpoint gets (* for all).".into(),
        ));
    }
    Ok(types)
}

/// Reads and checks an endpoint's URL: http or https, a host, no user name or password
/// in it, and not an address the outbound guard refuses.
async fn parse_url(raw: &str, allow_private: bool) -> Result<Url, WebhookError> {
    let url = outbound::parse_http_url(
        raw,
        "Give the endpoint's URL, such as https://example.com/standmeet-webhook.",
    )
    .map_err(WebhookError::Invalid)?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(WebhookError::Invalid(
            "Leave the user name and password out of the URL: deliveries are signed instead."
                .into(),
        ));
    }
    outbound::check_url(&url, allow_private)
        .await
        .map_err(|refused| WebhookError::Invalid(format!("The URL is refused: {refused}.")))?;
    Ok(url)
}

/// Adds an endpoint for `url` and `event_types` with a new secret; answers it with the
/// secret, which is not shown again.
pub async fn create(
    pool: &PgPool,
    url: &str,
    event_types: &[String],
    allow_private: bool,
) -> Result<CreatedEndpoint, WebhookError> {
    let event_types = parse_event_types(event_types)?;
    let url = parse_url(url, allow_private).await?;
    let secret = WebhookSecret::generate().to_text();
    let endpoint = sqlx::query_as!(
        Endpoint,
        r#"
        INSERT INTO webhook_endpoints (url, event_types, secret) VALUES ($1, $2, $3)
        RETURNING id, url, event_types, enabled, disabled_reason, created_at
        "#,
        url.as_str(),
        &event_types,
        secret,
    )
    .fetch_one(pool)
    .await?;
    Ok(CreatedEndpoint { endpoint, secret })
}

/// Every endpoint, oldest first.
pub async fn list(pool: &PgPool) -> Result<Vec<Endpoint>, WebhookError> {
    Ok(sqlx::query_as!(
        Endpoint,
        "SELECT id, url, event_types, enabled, disabled_reason, created_at
         FROM webhook_endpoints ORDER BY id"
    )
    .fetch_all(pool)
    .await?)
}

/// Endpoint `id`.
pub async fn get(pool: &PgPool, id: i64) -> Result<Endpoint, WebhookError> {
    sqlx::query_as!(
        Endpoint,
        "SELECT id, url, event_types, enabled, disabled_reason, created_at
         FROM webhook_endpoints WHERE id = $1",
        id
    )
    .fetch_optional(pool)
    .await?
    .ok_or(WebhookError::UnknownEndpoint(id))
}

/// Enables or disables endpoint `id`. Enabling forgets why it was disabled and the
/// failures counted so far.
pub async fn set_enabled(pool: &PgPool, id: i64, enabled: bool) -> Result<Endpoint, WebhookError> {
    sqlx::query_as!(
        Endpoint,
        r#"
        UPDATE webhook_endpoints
        SET enabled = $2,
            disabled_reason = CASE WHEN $2 THEN NULL ELSE 'Disabled by an admin.' END,
            failures_in_a_row = CASE WHEN $2 THEN 0 ELSE failures_in_a_row END,
            attempts_failed_in_a_row = CASE WHEN $2 THEN 0 ELSE attempts_failed_in_a_row END,
            circuit_open_until = CASE WHEN $2 THEN NULL ELSE circuit_open_until END
        WHERE id = $1
        RETURNING id, url, event_types, enabled, disabled_reason, created_at
        "#,
        id,
        enabled
    )
    .fetch_optional(pool)
    .await?
    .ok_or(WebhookError::UnknownEndpoint(id))
}

/// Deletes endpoint `id` with its deliveries (their jobs, if still queued, find nothing
/// to deliver and end).
pub async fn delete(pool: &PgPool, id: i64) -> Result<(), WebhookError> {
    let deleted = sqlx::query!("DELETE FROM webhook_endpoints WHERE id = $1", id)
        .execute(pool)
        .await?;
    if deleted.rows_affected() == 0 {
        return Err(WebhookError::UnknownEndpoint(id));
    }
    Ok(())
}

/// Queues a new job for one delivery (a test, a redelivery) and points the delivery at
/// it at once, so its chip says `sending` before the job starts.
async fn queue_one(
    tx: &mut PgConnection,
    jobs: &JobClient,
    delivery_id: i64,
    options: InsertOptions,
) -> Result<JobId, WebhookError> {
    let job_id = jobs
        .insert_tx_with::<DeliverWebhook>(&mut *tx, &DeliverArgs { delivery_id }, options)
        .await?;
    sqlx::query!(
        "UPDATE webhook_deliveries SET job_id = $2, outcome = NULL WHERE id = $1",
        delivery_id,
        job_id.0
    )
    .execute(&mut *tx)
    .await?;
    Ok(job_id)
}

/// A test message queued for an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TestQueued {
    pub delivery_id: i64,
    pub job_id: JobId,
}

/// Queues a `webhook.test` message to endpoint `id` only (also when it is disabled: a
/// test is how one finds out whether it works again). One attempt: whoever sends a
/// test wants to know now; "Redeliver" tries again.
pub async fn send_test(
    pool: &PgPool,
    jobs: &JobClient,
    id: i64,
) -> Result<TestQueued, WebhookError> {
    let mut tx = pool.begin().await?;
    let delivery_id = sqlx::query_scalar!(
        "INSERT INTO webhook_deliveries (endpoint_id)
         SELECT id FROM webhook_endpoints WHERE id = $1
         RETURNING id",
        id
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(WebhookError::UnknownEndpoint(id))?;
    let job_id = queue_one(
        &mut tx,
        jobs,
        delivery_id,
        InsertOptions {
            max_attempts: Some(1),
            ..Default::default()
        },
    )
    .await?;
    tx.commit().await?;
    Ok(TestQueued {
        delivery_id,
        job_id,
    })
}

/// What a delivery's chip says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    Sending,
    Delivered,
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Sending => "sending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    /// From the delivery's job while it exists; before its job started (no job id
    /// yet) it is on its way; after the job is gone, how it ended.
    fn of(job_id: Option<i64>, job: Option<JobState>, outcome: Option<&str>) -> DeliveryState {
        match job {
            Some(JobState::Available | JobState::Scheduled | JobState::Running) => {
                DeliveryState::Sending
            }
            Some(JobState::Completed) => DeliveryState::Delivered,
            Some(JobState::Retryable | JobState::Discarded | JobState::Cancelled) => {
                DeliveryState::Failed
            }
            None if outcome == Some("delivered") => DeliveryState::Delivered,
            None if outcome.is_none() && job_id.is_none() => DeliveryState::Sending,
            None => DeliveryState::Failed,
        }
    }
}

/// A delivery, with what its attempts found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Delivery {
    pub id: i64,
    pub endpoint_id: i64,
    /// The event delivered; `None` for a test message.
    pub event_id: Option<i64>,
    /// The event's type, or `webhook.test`.
    pub message_type: String,
    pub job_id: Option<i64>,
    pub job_state: Option<JobState>,
    pub state: DeliveryState,
    pub attempts: i64,
    /// The status of the last answer, if one came.
    pub response_status: Option<i16>,
    pub response_excerpt: Option<String>,
    pub duration_ms: Option<i32>,
    /// What went wrong the last time, if it did.
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

struct DeliveryRow {
    id: i64,
    endpoint_id: i64,
    event_id: Option<i64>,
    message_type: String,
    job_id: Option<i64>,
    job_state: Option<JobState>,
    outcome: Option<String>,
    attempts: i64,
    response_status: Option<i16>,
    response_excerpt: Option<String>,
    duration_ms: Option<i32>,
    last_error: Option<String>,
    created_at: OffsetDateTime,
}

impl From<DeliveryRow> for Delivery {
    fn from(row: DeliveryRow) -> Self {
        let state = DeliveryState::of(row.job_id, row.job_state, row.outcome.as_deref());
        Delivery {
            id: row.id,
            endpoint_id: row.endpoint_id,
            event_id: row.event_id,
            message_type: row.message_type,
            job_id: row.job_id,
            job_state: row.job_state,
            state,
            attempts: row.attempts,
            response_status: row.response_status,
            response_excerpt: row.response_excerpt,
            duration_ms: row.duration_ms,
            last_error: row.last_error,
            created_at: row.created_at,
        }
    }
}

/// The newest `limit` deliveries to endpoint `endpoint_id` (older than `before_id`
/// when given), newest first.
pub async fn deliveries(
    pool: &PgPool,
    endpoint_id: i64,
    before_id: Option<i64>,
    limit: i64,
) -> Result<Vec<Delivery>, WebhookError> {
    let rows = sqlx::query_as!(
        DeliveryRow,
        r#"
        SELECT id AS "id!", endpoint_id AS "endpoint_id!", event_id,
               message_type AS "message_type!", job_id, job_state AS "job_state?: JobState",
               outcome, attempts AS "attempts!", response_status, response_excerpt,
               duration_ms, last_error, created_at AS "created_at!"
        FROM webhook_delivery_summaries
        WHERE endpoint_id = $1 AND id < $2
        ORDER BY id DESC
        LIMIT $3
        "#,
        endpoint_id,
        before_id.unwrap_or(i64::MAX),
        limit,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(Delivery::from).collect())
}

/// The deliveries of the events of `event_type` about `subject_id` (the post-build
/// hooks of a rebuild), oldest first, with their endpoints' URLs.
pub async fn deliveries_of(
    pool: &PgPool,
    event_type: crate::domain::events::EventType,
    subject_id: i64,
) -> Result<Vec<(Delivery, String)>, WebhookError> {
    let rows = sqlx::query_as!(
        DeliveryRow,
        r#"
        SELECT id AS "id!", endpoint_id AS "endpoint_id!", event_id,
               message_type AS "message_type!", job_id, job_state AS "job_state?: JobState",
               outcome, attempts AS "attempts!", response_status, response_excerpt,
               duration_ms, last_error, created_at AS "created_at!"
        FROM webhook_delivery_summaries
        WHERE event_id IN (SELECT id FROM events WHERE type = $1 AND subject_id = $2)
        ORDER BY id
        "#,
        event_type.as_str(),
        subject_id,
    )
    .fetch_all(pool)
    .await?;
    let endpoint_ids: Vec<i64> = rows.iter().map(|row| row.endpoint_id).collect();
    let urls: std::collections::HashMap<i64, String> = sqlx::query!(
        "SELECT id, url FROM webhook_endpoints WHERE id = ANY($1)",
        &endpoint_ids
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|row| (row.id, row.url))
    .collect();
    Ok(rows
        .into_iter()
        .map(|row| {
            let url = urls.get(&row.endpoint_id).cloned().unwrap_or_default();
            (Delivery::from(row), url)
        })
        .collect())
}

/// Delivery `id`.
pub async fn delivery(pool: &PgPool, id: i64) -> Result<Delivery, WebhookError> {
    let row = sqlx::query_as!(
        DeliveryRow,
        r#"
        SELECT id AS "id!", endpoint_id AS "endpoint_id!", event_id,
               message_type AS "message_type!", job_id, job_state AS "job_state?: JobState",
               outcome, attempts AS "attempts!", response_status, response_excerpt,
               duration_ms, last_error, created_at AS "created_at!"
        FROM webhook_delivery_summaries
        WHERE id = $1
        "#,
        id,
    )
    .fetch_optional(pool)
    .await?
    .ok_or(WebhookError::UnknownDelivery(id))?;
    Ok(row.into())
}

/// One attempt of a delivery.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attempt {
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    pub duration_ms: i32,
    pub response_status: Option<i16>,
    pub response_excerpt: String,
    pub error: Option<String>,
}

/// Every attempt of delivery `id`, oldest first.
pub async fn attempts(pool: &PgPool, id: i64) -> Result<Vec<Attempt>, WebhookError> {
    Ok(sqlx::query_as!(
        Attempt,
        "SELECT started_at, duration_ms, response_status, response_excerpt, error
         FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id",
        id
    )
    .fetch_all(pool)
    .await?)
}

/// "Redeliver": delivery `id` is tried again now. A delivery waiting for its next try,
/// or one that gave up, goes on with its job; one that was delivered (or whose job was
/// cleaned away) gets a new job. The message keeps its `webhook-id`, so a receiver that
/// got it already can tell.
pub async fn redeliver(pool: &PgPool, jobs: &JobClient, id: i64) -> Result<JobId, WebhookError> {
    let found = sqlx::query!(
        r#"
        SELECT d.job_id, j.state AS "job_state?: JobState", d.event_id, d.outcome, w.enabled
        FROM webhook_deliveries d
        JOIN webhook_endpoints w ON w.id = d.endpoint_id
        LEFT JOIN job_status j ON j.id = d.job_id
        WHERE d.id = $1
        "#,
        id
    )
    .fetch_optional(pool)
    .await?
    .ok_or(WebhookError::UnknownDelivery(id))?;
    if found.event_id.is_some() && !found.enabled {
        return Err(WebhookError::Conflict(
            "The endpoint is disabled: enable it first, then redeliver.".into(),
        ));
    }
    match (found.job_id, found.job_state) {
        (Some(job_id), Some(JobState::Retryable | JobState::Discarded | JobState::Cancelled)) => {
            match jobs.retry(JobId(job_id)).await? {
                RetryOutcome::Retried => {
                    sqlx::query!(
                        "UPDATE webhook_deliveries SET outcome = NULL WHERE id = $1",
                        id
                    )
                    .execute(pool)
                    .await?;
                    Ok(JobId(job_id))
                }
                // It moved on meanwhile (it ran, or someone else retried it).
                RetryOutcome::NotRetryable(_) | RetryOutcome::NotFound => Err(
                    WebhookError::Conflict("The delivery is on its way already.".into()),
                ),
            }
        }
        (Some(_), Some(JobState::Available | JobState::Scheduled | JobState::Running)) => Err(
            WebhookError::Conflict("The delivery is on its way already.".into()),
        ),
        // Its job has not started yet.
        (None, _) if found.outcome.is_none() => Err(WebhookError::Conflict(
            "The delivery is on its way already.".into(),
        )),
        _ => {
            let mut tx = pool.begin().await?;
            let job_id = queue_one(&mut tx, jobs, id, InsertOptions::default()).await?;
            tx.commit().await?;
            Ok(job_id)
        }
    }
}

/// The job cleaner's chore for webhooks (see `EngineConfig::also_clean`): test
/// deliveries older than `keep` (`STANDMEET_KEEP_EVENTS_DAYS`, as for events, whose
/// deliveries go with them).
pub fn retention(keep: std::time::Duration) -> standmeet_jobs::CleanChore {
    standmeet_jobs::CleanChore {
        name: "webhook test deliveries",
        run: std::sync::Arc::new(move |pool| {
            Box::pin(async move { Ok(delete_old_tests(&pool, keep).await?) })
        }),
    }
}

/// Deletes test deliveries older than `keep` (event deliveries go with their events).
pub async fn delete_old_tests(
    pool: &PgPool,
    keep: std::time::Duration,
) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query!(
        "DELETE FROM webhook_deliveries
         WHERE event_id IS NULL AND created_at < now() - $1::float8 * interval '1 millisecond'",
        keep.as_millis() as f64
    )
    .execute(pool)
    .await?;
    Ok(deleted.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_are_names_or_one_star() {
        let parse = |items: &[&str]| {
            parse_event_types(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(parse(&["*"]).unwrap(), vec!["*"]);
        assert_eq!(parse(&["access_request.created", "*"]).unwrap(), vec!["*"]);
        assert_eq!(
            parse(&[
                "access_request.created, listings.fetched",
                "listings.fetched"
            ])
            .unwrap(),
            vec!["access_request.created", "listings.fetched"]
        );
        assert!(matches!(parse(&[]), Err(WebhookError::Invalid(_))));
        assert!(matches!(parse(&[" , "]), Err(WebhookError::Invalid(_))));
        let err = parse(&["access_request.exploded"]).unwrap_err().to_string();
        assert!(err.contains("access_request.created"), "{err}");
    }

    #[test]
    fn the_chip_follows_the_job_then_the_outcome() {
        use DeliveryState::*;
        let of = DeliveryState::of;
        assert_eq!(of(Some(1), Some(JobState::Running), None), Sending);
        assert_eq!(of(Some(1), Some(JobState::Retryable), None), Failed);
        assert_eq!(of(Some(1), Some(JobState::Completed), None), Delivered);
        assert_eq!(of(None, None, None), Sending, "its job has not started");
        assert_eq!(of(Some(1), None, Some("delivered")), Delivered);
        assert_eq!(of(Some(1), None, Some("failed")), Failed);
        assert_eq!(of(Some(1), None, None), Failed, "its job is gone");
    }
}
