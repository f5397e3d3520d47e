//! The outbox: each business change writes its event in its own transaction (a rollback
//! leaves none, a refused change writes none), with the data docs/events-and-webhooks.md gives, oldest first.

use crate::common;
use crate::common::jobs::client as jobs_client;

use axum::http::StatusCode;
use common::TestApp;
use common::jobs::wait_until;
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet::domain::corpus;
use standmeet::domain::events::{self, EventType, NewEvent};
use std::time::Duration;

/// Every event as (type, subject_id, data), oldest first.
async fn recorded(pool: &PgPool) -> Vec<(String, Option<i64>, Value)> {
    events::list(pool, None, None, 1_000)
        .await
        .unwrap()
        .into_iter()
        .map(|event| (event.event_type, event.subject_id, event.data))
        .collect()
}

async fn ask(app: &TestApp, email: &str) -> i64 {
    let reply = app
        .post_form(
            "/api/request_access",
            &[("name", "Ada"), ("email", email), ("message", "")],
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    sqlx::query_scalar("SELECT id FROM access_requests WHERE email = $1")
        .bind(email)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = false)]
async fn an_event_exists_exactly_when_its_transaction_commits(pool: PgPool) {
    crate::common::schema(&pool).await;
    let event = NewEvent::corpus_entry(EventType::CorpusEntryUpdated, 7, 2);
    let mut tx = pool.begin().await.unwrap();
    events::record(&mut tx, &event).await.unwrap();
    tx.rollback().await.unwrap();
    assert!(recorded(&pool).await.is_empty());

    let mut tx = pool.begin().await.unwrap();
    let id = events::record(&mut tx, &event).await.unwrap();
    tx.commit().await.unwrap();
    let stored = events::get(&pool, id).await.unwrap().expect("the event");
    assert_eq!(stored.event_type, "corpus.entry_updated");
    assert_eq!(stored.subject_id, Some(7));
    assert_eq!(stored.data, json!({"entry_id": 7, "version": 2}));
    assert_eq!(events::get(&pool, id + 1).await.unwrap(), None);
}

#[sqlx::test(migrations = false)]
async fn a_request_approved_and_mailed_is_created_approved_then_replied(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool).smtp().jobs().spawn().await;
    let cookie = app.sign_in_admin().await;
    let id = ask(&app, "ada@example.com").await;
    let reply = app.approve(&cookie, id).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    wait_until(Duration::from_secs(20), || async {
        recorded(&pool).await.len() == 3
    })
    .await;

    let data = json!({"request_id": id, "email": "ada@example.com"});
    assert_eq!(
        recorded(&pool).await,
        vec![
            ("access_request.created".to_string(), Some(id), data.clone()),
            (
                "access_request.approved".to_string(),
                Some(id),
                data.clone()
            ),
            ("access_request.replied".to_string(), Some(id), data),
        ]
    );
    // Replied only once the mail went out.
    assert_eq!(app.smtp().mails_to("ada@example.com").len(), 1);
    let only_replied = events::list(&pool, Some(EventType::AccessRequestReplied), None, 10)
        .await
        .unwrap();
    assert_eq!(only_replied.len(), 1);
}

#[sqlx::test(migrations = false)]
async fn a_denial_is_an_event_and_a_refused_approval_writes_none(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MAIL", "log")
        .spawn()
        .await;
    let cookie = app.sign_in_admin().await;
    let id = ask(&app, "dennis@example.com").await;
    let reply = app.deny(&cookie, id).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(app.approve(&cookie, id).await.status, StatusCode::CONFLICT);

    let types: Vec<String> = recorded(&pool).await.into_iter().map(|e| e.0).collect();
    assert_eq!(types, ["access_request.created", "access_request.denied"]);
}

#[sqlx::test(migrations = false)]
async fn corpus_updates_and_promotions_carry_the_version_they_wrote(pool: PgPool) {
    crate::common::schema(&pool).await;
    let written = corpus::create(&pool, &jobs_client(&pool), "Title", "Body text", "public")
        .await
        .unwrap();
    // A draft's creation is not an event.
    assert!(recorded(&pool).await.is_empty());
    let updated = corpus::update(
        &pool,
        &jobs_client(&pool),
        written.id,
        None,
        Some("New body"),
        None,
    )
    .await
    .unwrap();
    let promoted = corpus::promote(&pool, &jobs_client(&pool), written.id)
        .await
        .unwrap();
    // Promoting twice is refused, and writes nothing.
    assert!(
        corpus::promote(&pool, &jobs_client(&pool), written.id)
            .await
            .is_err()
    );
    assert_eq!(
        recorded(&pool).await,
        vec![
            (
                "corpus.entry_updated".to_string(),
                Some(written.id),
                json!({"entry_id": written.id, "version": updated.version}),
            ),
            (
                "corpus.entry_promoted".to_string(),
                Some(written.id),
                json!({"entry_id": written.id, "version": promoted.version}),
            ),
        ]
    );
    assert!(promoted.version > updated.version);
}

#[sqlx::test(migrations = false)]
async fn events_page_by_id_after_the_last_one_given(pool: PgPool) {
    crate::common::schema(&pool).await;
    let mut tx = pool.begin().await.unwrap();
    for entry in 1..=5 {
        let event = NewEvent::corpus_entry(EventType::CorpusEntryPromoted, entry, 1);
        events::record(&mut tx, &event).await.unwrap();
    }
    tx.commit().await.unwrap();
    let first = events::list(&pool, None, None, 2).await.unwrap();
    let ids: Vec<i64> = first.iter().map(|e| e.subject_id.unwrap()).collect();
    assert_eq!(ids, [1, 2]);
    let rest = events::list(&pool, None, Some(first[1].id), 10)
        .await
        .unwrap();
    let ids: Vec<i64> = rest.iter().map(|e| e.subject_id.unwrap()).collect();
    assert_eq!(ids, [3, 4, 5]);
    let none = events::list(&pool, Some(EventType::ListingsFetched), None, 10)
        .await
        .unwrap();
    assert!(none.is_empty());
}

#[sqlx::test(migrations = false)]
async fn agents_page_through_events_and_get_one_by_id(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", common::mcp::TOKEN)
        .spawn()
        .await;
    let mut tx = pool.begin().await.unwrap();
    let mut ids = Vec::new();
    for (event_type, entry) in [
        (EventType::CorpusEntryPromoted, 1),
        (EventType::CorpusEntryUpdated, 1),
        (EventType::CorpusEntryPromoted, 2),
    ] {
        let event = NewEvent::corpus_entry(event_type, entry, 3);
        ids.push(events::record(&mut tx, &event).await.unwrap());
    }
    tx.commit().await.unwrap();

    let first = app.call_tool("events.list", json!({"limit": 2})).await;
    let first = common::mcp::structured(&first);
    let listed: Vec<i64> = first["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, ids[..2]);
    assert_eq!(first["next_after_id"], ids[1]);
    assert_eq!(first["events"][0]["type"], "corpus.entry_promoted");
    assert_eq!(
        first["events"][0]["data"],
        json!({"entry_id": 1, "version": 3})
    );
    let rest = app
        .call_tool("events.list", json!({"after_id": ids[1]}))
        .await;
    let rest = common::mcp::structured(&rest);
    assert_eq!(rest["events"].as_array().unwrap().len(), 1);
    assert_eq!(rest["next_after_id"], Value::Null);
    let promoted = app
        .call_tool("events.list", json!({"type": "corpus.entry_promoted"}))
        .await;
    assert_eq!(
        common::mcp::structured(&promoted)["events"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let bad = app.call_tool("events.list", json!({"type": "nope"})).await;
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(bad.to_string().contains("There is no event type"), "{bad}");
    let too_many = app.call_tool("events.list", json!({"limit": 1001})).await;
    assert_eq!(too_many["isError"], true, "{too_many}");

    let one = app.call_tool("events.get", json!({"id": ids[2]})).await;
    let one = common::mcp::structured(&one);
    assert_eq!(one["id"], ids[2]);
    assert_eq!(one["subject_id"], 2);
    assert!(one["occurred_at"].as_str().unwrap().contains('T'), "{one}");
    let missing = app.call_tool("events.get", json!({"id": ids[2] + 1})).await;
    assert_eq!(missing["isError"], true, "{missing}");
}

/// The event types webhook endpoints subscribe to are a contract (docs/events-and-webhooks.md):
/// kept in `tests/golden/event_types.json`; `UPDATE_GOLDEN=1` rewrites it.
#[test]
fn the_event_types_match_the_golden_file() {
    let names: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    let actual = serde_json::to_string_pretty(&names).unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/event_types.json");
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(path, &actual).unwrap();
    }
    let golden = std::fs::read_to_string(path)
        .expect("tests/golden/event_types.json exists (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(
        golden, actual,
        "the event types changed: update the golden file if on purpose"
    );
}
