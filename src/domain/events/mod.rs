//! The outbox: what happened in StandMeet, as events that other systems can follow.
//!
//! An event is written with [`record`] inside the transaction of the change it records,
//! never before and never on its own: a rollback leaves no event, a commit always leaves
//! one. (The mail job's `access_request.replied` is written by the job's own completion
//! transaction, after the send.) Job state changes are not events; the job row is their
//! record.

pub mod types;

use serde::Serialize;
use std::time::Duration;

use sqlx::{PgConnection, PgPool};
use time::OffsetDateTime;

pub use types::{EventType, NewEvent};

/// Records `event` in the caller's transaction; answers its id.
///
/// One statement, however many endpoints: the database function `record_event`
/// (migrations/20261201000003_record_event.sql, with the trace argument of
/// 20261205000002_record_event_trace.sql) inserts the event, a webhook delivery
/// for each enabled endpoint that wants events of this type, and their
/// `webhooks.deliver` jobs, so a commit delivers the event and a rollback leaves neither
/// event nor delivery. A change that already sends a statement of its own can call
/// `record_event($type, $subject, $data, $trace)` inside it instead and save the round
/// trip (an access request does: `access_requests::submit`). The delivery jobs keep the
/// trace context of the span recording the event (`$trace`,
/// `telemetry::otel::current_traceparent`), when traces are exported.
pub async fn record(tx: &mut PgConnection, event: &NewEvent) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT record_event($1, $2, $3, $4) AS "id!""#,
        event.event_type.as_str(),
        event.subject_id,
        event.data,
        crate::telemetry::otel::current_traceparent(),
    )
    .fetch_one(&mut *tx)
    .await
}

/// The job cleaner's chore for events (see `EngineConfig::also_clean`): events older
/// than `keep` (`STANDMEET_KEEP_EVENTS_DAYS`), with their webhook deliveries.
pub fn retention(keep: Duration) -> standmeet_jobs::CleanChore {
    standmeet_jobs::CleanChore {
        name: "events",
        run: std::sync::Arc::new(move |pool| {
            Box::pin(async move { Ok(delete_older_than(&pool, keep).await?) })
        }),
    }
}

/// Deletes events older than `keep` (`STANDMEET_KEEP_EVENTS_DAYS`) with their webhook
/// deliveries (the foreign key cascades); a batch at a time, oldest first. Answers how
/// many events went. (Test deliveries, which have no event, are the webhooks' own
/// chore: `webhooks::retention`.)
pub async fn delete_older_than(pool: &PgPool, keep: Duration) -> Result<u64, sqlx::Error> {
    const BATCH: i64 = 1_000;
    let mut deleted = 0;
    loop {
        // Events arrive in id order, so the oldest ids are the ones due.
        let batch = sqlx::query!(
            r#"
            DELETE FROM events WHERE id = ANY(ARRAY(
                SELECT id FROM (SELECT id, occurred_at FROM events ORDER BY id LIMIT $2) AS oldest
                WHERE occurred_at < now() - $1::float8 * interval '1 millisecond'
            ))
            "#,
            keep.as_millis() as f64,
            BATCH,
        )
        .execute(pool)
        .await?
        .rows_affected();
        deleted += batch;
        if batch < BATCH as u64 {
            break;
        }
    }
    Ok(deleted)
}

/// A recorded event, as the events page and the MCP tools show it.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Event {
    pub id: i64,
    #[serde(rename = "type")]
    pub event_type: String,
    pub subject_id: Option<i64>,
    #[serde(with = "time::serde::rfc3339")]
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub occurred_at: OffsetDateTime,
    #[schemars(schema_with = "any_json")]
    pub data: serde_json::Value,
}

/// The schema of any JSON value, written `{}`: schemars writes `true`, which JSON Schema
/// allows but MCP clients refuse as a property's schema.
fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "description": "Any JSON value." })
}

/// Events after `after_id` (all when `None`), oldest first, of one type or of all, at
/// most `limit`.
pub async fn list(
    pool: &PgPool,
    event_type: Option<EventType>,
    after_id: Option<i64>,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"
        SELECT id, type AS event_type, subject_id, occurred_at, data
        FROM events
        WHERE ($1::text IS NULL OR type = $1) AND id > $2
        ORDER BY id
        LIMIT $3
        "#,
        event_type.map(EventType::as_str),
        after_id.unwrap_or(0),
        limit,
    )
    .fetch_all(pool)
    .await
}

/// The newest events (before `before_id` when given), newest first, of one type or of
/// all, at most `limit`: the events page.
pub async fn newest(
    pool: &PgPool,
    event_type: Option<EventType>,
    before_id: Option<i64>,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"
        SELECT id, type AS event_type, subject_id, occurred_at, data
        FROM events
        WHERE ($1::text IS NULL OR type = $1) AND id < $2
        ORDER BY id DESC
        LIMIT $3
        "#,
        event_type.map(EventType::as_str),
        before_id.unwrap_or(i64::MAX),
        limit,
    )
    .fetch_all(pool)
    .await
}

/// One event by id.
pub async fn get(pool: &PgPool, id: i64) -> Result<Option<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"SELECT id, type AS event_type, subject_id, occurred_at, data FROM events WHERE id = $1"#,
        id,
    )
    .fetch_optional(pool)
    .await
}
