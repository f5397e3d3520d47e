//! Signed webhooks (docs/events-and-webhooks.md): events reach the endpoints that want them, signed as
//! the Standard Webhooks specification says (checked by the receiver's own HMAC),
//! retried with the same id, never through a redirect; 410 and 20 failed deliveries in
//! a row disable an endpoint; private addresses are refused unless allowed; a rollback
//! leaves no delivery; old events go with their deliveries.

use crate::common;
use crate::common::jobs::client as jobs_client;

use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine;
use common::TestApp;
use common::jobs::wait_until;
use common::mcp::{TOKEN, structured};
use common::receiver::{Answer, Receiver, hmac_sha256};
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet::domain::events::{self, EventType, NewEvent};
use standmeet::domain::webhooks::{self, DeliveryState};

/// The app with MCP, the job engine, and loopback allowed (the receivers live there).
async fn hooked_app(pool: &PgPool, extra: &[(&str, &str)]) -> TestApp {
    let mut builder = TestApp::desk(pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_FETCH_ALLOW_PRIVATE", "true");
    for (name, value) in extra {
        builder = builder.setting(name, *value);
    }
    builder.jobs().spawn().await
}

/// Creates an endpoint through the MCP tool; answers (id, secret).
async fn create(app: &TestApp, url: &str, types: Value) -> (i64, String) {
    let result = app
        .call_tool(
            "webhooks.create",
            json!({ "url": url, "event_types": types }),
        )
        .await;
    assert_ne!(result["isError"], json!(true), "{result}");
    let created = structured(&result);
    (
        created["id"].as_i64().unwrap(),
        created["secret"].as_str().unwrap().to_string(),
    )
}

/// Records `event` in a transaction of its own, as a feature does; answers its id.
async fn happen(pool: &PgPool, event: &NewEvent) -> i64 {
    let mut tx = pool.begin().await.unwrap();
    let id = events::record(&mut tx, event).await.unwrap();
    tx.commit().await.unwrap();
    id
}

fn request_created(id: i64) -> NewEvent {
    NewEvent::access_request(EventType::AccessRequestCreated, id, "ada@example.com")
}

/// The only delivery to endpoint `endpoint`, once it is no longer `sending`.
async fn settled_delivery(pool: &PgPool, endpoint: i64) -> webhooks::Delivery {
    wait_until(Duration::from_secs(20), || async {
        let found = webhooks::deliveries(pool, endpoint, None, 10)
            .await
            .unwrap();
        found.len() == 1 && found[0].state != DeliveryState::Sending
    })
    .await;
    webhooks::deliveries(pool, endpoint, None, 10)
        .await
        .unwrap()
        .remove(0)
}

#[test]
fn the_receivers_hmac_matches_the_specifications_test_vector() {
    let key = base64::engine::general_purpose::STANDARD
        .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .unwrap();
    let mac = hmac_sha256(
        &key,
        br#"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}"#,
    );
    assert_eq!(
        base64::engine::general_purpose::STANDARD.encode(mac),
        "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    );
}

#[sqlx::test(migrations = false)]
async fn an_event_reaches_the_endpoints_that_want_it_signed(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let wants = Receiver::start().await;
    let other = Receiver::start().await;
    let (wanting, secret) =
        create(&app, &wants.url("/hook"), json!(["access_request.created"])).await;
    let (everything, all_secret) = create(&app, &other.url("/all"), json!(["*"])).await;
    let (_, _) = create(&app, &other.url("/owner"), json!(["owner.email_changed"])).await;

    // A visitor asks for access: the feature's own transaction records the event.
    let reply = app
        .post_form(
            "/api/request_access",
            &[
                ("name", "Ada"),
                ("email", "ada@example.com"),
                ("message", ""),
            ],
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let event = events::list(&pool, None, None, 10).await.unwrap().remove(0);

    let got = wants.wait_for(1).await;
    let request = &got[0];
    assert_eq!(request.path, "/hook");
    assert_eq!(request.header("webhook-id"), format!("evt_{}", event.id));
    assert_eq!(request.header("content-type"), "application/json");
    let stamp: i64 = request.header("webhook-timestamp").parse().unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!((now - stamp).abs() < 60, "timestamp {stamp}, now {now}");
    assert!(request.signed_with(&secret), "the signature verifies");
    assert!(
        !request.signed_with(&all_secret),
        "and only with its own secret"
    );
    let body = request.json();
    assert_eq!(body["id"], json!(format!("evt_{}", event.id)));
    assert_eq!(body["type"], json!("access_request.created"));
    assert_eq!(body["data"]["email"], json!("ada@example.com"));
    assert_eq!(body["data"]["request_id"], event.data["request_id"]);
    assert!(body["occurred_at"].as_str().unwrap().contains('T'));

    // The "*" endpoint got it too; the owner-address one did not.
    let all = other.wait_for(1).await;
    assert_eq!(all[0].path, "/all");
    assert!(all[0].signed_with(&all_secret));
    let delivered = settled_delivery(&pool, wanting).await;
    assert_eq!(delivered.state, DeliveryState::Delivered);
    assert_eq!(delivered.response_status, Some(200));
    assert_eq!(delivered.attempts, 1);
    settled_delivery(&pool, everything).await;
    assert_eq!(other.received().len(), 1, "{:?}", other.received());
}

#[sqlx::test(migrations = false)]
async fn a_failed_attempt_is_tried_again_with_the_same_id(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    receiver.then(&[Answer::Status(500)]);
    let (endpoint, secret) = create(&app, &receiver.url("/hook"), json!(["*"])).await;
    let event = happen(&pool, &request_created(1)).await;

    let got = receiver.wait_for(2).await;
    assert_eq!(got[0].header("webhook-id"), format!("evt_{event}"));
    assert_eq!(got[1].header("webhook-id"), format!("evt_{event}"));
    assert_eq!(got[0].body, got[1].body, "the same message");
    assert!(got.iter().all(|request| request.signed_with(&secret)));
    let delivery = settled_delivery(&pool, endpoint).await;
    assert_eq!(delivery.state, DeliveryState::Delivered);
    assert_eq!(delivery.attempts, 2);
    let attempts = webhooks::attempts(&pool, delivery.id).await.unwrap();
    assert_eq!(attempts[0].response_status, Some(500));
    assert_eq!(attempts[0].response_excerpt, "answered 500");
    assert!(
        attempts[0].error.as_deref().unwrap().contains("500"),
        "{attempts:?}"
    );
    assert_eq!(attempts[1].response_status, Some(200));
    assert_eq!(attempts[1].error, None);
}

#[sqlx::test(migrations = false)]
async fn gone_disables_the_endpoint_at_once(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    receiver.always(Answer::Status(410));
    let (endpoint, _) = create(&app, &receiver.url("/gone"), json!(["*"])).await;
    happen(&pool, &request_created(1)).await;

    let delivery = settled_delivery(&pool, endpoint).await;
    assert_eq!(delivery.state, DeliveryState::Failed);
    assert_eq!(delivery.response_status, Some(410));
    let job = app
        .state
        .jobs
        .get(standmeet_jobs::JobId(delivery.job_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        job.state,
        standmeet_jobs::JobState::Discarded,
        "not retried"
    );
    let disabled = webhooks::get(&pool, endpoint).await.unwrap();
    assert!(!disabled.enabled);
    assert!(
        disabled.disabled_reason.as_deref().unwrap().contains("410"),
        "{disabled:?}"
    );

    // A disabled endpoint gets no more deliveries.
    happen(&pool, &request_created(2)).await;
    assert_eq!(
        webhooks::deliveries(&pool, endpoint, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(receiver.received().len(), 1);
}

#[sqlx::test(migrations = false)]
async fn an_endpoint_that_hangs_is_given_up_on_after_the_timeout(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[("STANDMEET_WEBHOOK_TIMEOUT_MS", "300")]).await;
    let receiver = Receiver::start().await;
    receiver.then(&[Answer::Hang]);
    let (endpoint, _) = create(&app, &receiver.url("/slow"), json!(["*"])).await;
    happen(&pool, &request_created(1)).await;

    // The first attempt times out; the second (answered at once) delivers.
    receiver.wait_for(2).await;
    let delivery = settled_delivery(&pool, endpoint).await;
    assert_eq!(delivery.state, DeliveryState::Delivered);
    let attempts = webhooks::attempts(&pool, delivery.id).await.unwrap();
    assert_eq!(attempts[0].response_status, None);
    assert!(
        attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("did not answer within 300 ms"),
        "{attempts:?}"
    );
    assert!(attempts[0].duration_ms >= 250, "{attempts:?}");
}

#[sqlx::test(migrations = false)]
async fn a_redirect_is_a_failed_attempt_and_is_not_followed(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    receiver.then(&[Answer::Redirect("/elsewhere")]);
    let (endpoint, _) = create(&app, &receiver.url("/moved"), json!(["*"])).await;
    happen(&pool, &request_created(1)).await;

    let got = receiver.wait_for(2).await;
    assert!(
        got.iter().all(|request| request.path == "/moved"),
        "nothing went to the redirect's target: {got:?}"
    );
    let delivery = settled_delivery(&pool, endpoint).await;
    let attempts = webhooks::attempts(&pool, delivery.id).await.unwrap();
    assert_eq!(attempts[0].response_status, Some(302));
    assert!(
        attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("not followed"),
        "{attempts:?}"
    );
    assert_eq!(delivery.state, DeliveryState::Delivered);
}

#[sqlx::test(migrations = false)]
async fn a_rolled_back_change_leaves_no_event_and_no_delivery(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    let (endpoint, _) = create(&app, &receiver.url("/hook"), json!(["*"])).await;

    let mut tx = pool.begin().await.unwrap();
    events::record(&mut tx, &request_created(1)).await.unwrap();
    tx.rollback().await.unwrap();

    let counts: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM webhook_deliveries),
                (SELECT count(*) FROM jobs WHERE kind = 'webhooks.deliver')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(counts, (0, 0, 0));

    // The same change committed is delivered: the endpoint was listening all along.
    happen(&pool, &request_created(1)).await;
    assert_eq!(
        settled_delivery(&pool, endpoint).await.state,
        DeliveryState::Delivered
    );
    assert_eq!(receiver.received().len(), 1);
}

#[sqlx::test(migrations = false)]
async fn twenty_deliveries_failed_in_a_row_disable_the_endpoint(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    receiver.always(Answer::Status(503));
    let (endpoint, _) = create(&app, &receiver.url("/down"), json!(["*"])).await;
    // Nineteen deliveries failed before this one.
    sqlx::query("UPDATE webhook_endpoints SET failures_in_a_row = 19 WHERE id = $1")
        .bind(endpoint)
        .execute(&pool)
        .await
        .unwrap();
    // This one has one attempt (its job says so before it commits), so its failure is
    // its last.
    let mut tx = pool.begin().await.unwrap();
    events::record(&mut tx, &request_created(1)).await.unwrap();
    sqlx::query("UPDATE jobs SET max_attempts = 1 WHERE kind = 'webhooks.deliver'")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let delivery = settled_delivery(&pool, endpoint).await;
    assert_eq!(delivery.state, DeliveryState::Failed);
    wait_until(Duration::from_secs(10), || async {
        !webhooks::get(&pool, endpoint).await.unwrap().enabled
    })
    .await;
    let disabled = webhooks::get(&pool, endpoint).await.unwrap();
    assert!(
        disabled
            .disabled_reason
            .as_deref()
            .unwrap()
            .contains("20 deliveries in a row"),
        "{disabled:?}"
    );

    // Enabling it again starts the count afresh.
    webhooks::set_enabled(&pool, endpoint, true).await.unwrap();
    let count: i32 =
        sqlx::query_scalar("SELECT failures_in_a_row FROM webhook_endpoints WHERE id = $1")
            .bind(endpoint)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(count, 0);
}

#[sqlx::test(migrations = false)]
async fn private_addresses_are_refused_unless_allowed(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .jobs()
        .spawn()
        .await;
    let receiver = Receiver::start().await;

    for url in [
        receiver.url("/hook"),
        "http://localhost:9/hook".to_string(),
        "http://169.254.169.254/latest".to_string(),
        "http://[::1]:9/".to_string(),
    ] {
        let result = app
            .call_tool(
                "webhooks.create",
                json!({ "url": url, "event_types": ["*"] }),
            )
            .await;
        assert_eq!(result["isError"], json!(true), "{url}: {result}");
        let message = structured(&result)["error"].as_str().unwrap().to_string();
        assert!(
            message.contains("STANDMEET_FETCH_ALLOW_PRIVATE"),
            "{url}: {message}"
        );
    }
    let listed = structured(&app.call_tool("webhooks.list", json!({})).await);
    assert_eq!(listed, json!({ "webhooks": [] }), "nothing was added");

    // A job board on loopback is refused the same way.
    let cookie = app.sign_in_admin().await;
    let reply = app
        .post_form(
            "/api/listings/add_source",
            &[
                ("name", "Local"),
                ("kind", "rss"),
                ("url", &receiver.url("/feed")),
            ],
            Some(&cookie),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(
        reply.body.contains("STANDMEET_FETCH_ALLOW_PRIVATE"),
        "{}",
        reply.body
    );

    // An endpoint that got in another way (an older version, an operator's SQL) is
    // refused again at delivery: its delivery fails without a request.
    let endpoint: i64 = sqlx::query_scalar(
        "INSERT INTO webhook_endpoints (url, event_types, secret)
         VALUES ($1, '{*}', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw') RETURNING id",
    )
    .bind(receiver.url("/hook"))
    .fetch_one(&pool)
    .await
    .unwrap();
    happen(&pool, &request_created(1)).await;
    let delivery = settled_delivery(&pool, endpoint).await;
    assert_eq!(delivery.state, DeliveryState::Failed);
    assert!(
        delivery
            .last_error
            .as_deref()
            .unwrap()
            .contains("STANDMEET_FETCH_ALLOW_PRIVATE"),
        "{delivery:?}"
    );
    assert!(receiver.received().is_empty(), "no request went out");
}

#[sqlx::test(migrations = false)]
async fn the_tools_list_create_test_and_delete_endpoints(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    let (id, secret) = create(
        &app,
        &receiver.url("/t"),
        json!(["access_request.created", "listings.fetched"]),
    )
    .await;
    assert!(
        secret.starts_with("whsec_") && secret.len() == 50,
        "{secret}"
    );

    let listed = structured(&app.call_tool("webhooks.list", json!({})).await);
    let endpoint = &listed["webhooks"][0];
    assert_eq!(endpoint["id"], json!(id));
    assert_eq!(endpoint["url"], json!(receiver.url("/t")));
    assert_eq!(
        endpoint["event_types"],
        json!(["access_request.created", "listings.fetched"])
    );
    assert_eq!(endpoint["enabled"], json!(true));
    assert_eq!(endpoint["disabled_reason"], Value::Null);
    assert!(endpoint.get("secret").is_none(), "never the secret again");
    assert!(!listed.to_string().contains(&secret));

    let tested = structured(&app.call_tool("webhooks.test", json!({ "id": id })).await);
    assert_eq!(tested["state"], json!("delivered"), "{tested}");
    assert_eq!(tested["response_status"], json!(200));
    assert_eq!(tested["pending"], json!(false));
    assert!(tested["delivery_job_id"].as_i64().is_some());
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].json()["type"], json!("webhook.test"));
    assert!(got[0].signed_with(&secret));
    // Not an event: nothing else hears of it.
    assert!(
        events::list(&pool, None, None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A test that fails says so at once (one attempt).
    receiver.then(&[Answer::Status(500)]);
    let failed = structured(&app.call_tool("webhooks.test", json!({ "id": id })).await);
    assert_eq!(failed["state"], json!("failed"), "{failed}");
    assert_eq!(failed["response_status"], json!(500));

    for (arguments, words) in [
        (
            json!({ "url": "ftp://x.example/", "event_types": ["*"] }),
            "http",
        ),
        (
            json!({ "url": receiver.url("/x"), "event_types": [] }),
            "event types",
        ),
        (
            json!({ "url": receiver.url("/x"), "event_types": ["nope.never"] }),
            "not an event type",
        ),
        (
            json!({ "url": "not a url", "event_types": ["*"] }),
            "not a URL",
        ),
    ] {
        let result = app.call_tool("webhooks.create", arguments.clone()).await;
        assert_eq!(result["isError"], json!(true), "{arguments}");
        let message = structured(&result)["error"].as_str().unwrap().to_string();
        assert!(message.contains(words), "{arguments}: {message}");
    }

    let deleted = structured(&app.call_tool("webhooks.delete", json!({ "id": id })).await);
    assert_eq!(deleted, json!({ "id": id, "deleted": true }));
    for tool in ["webhooks.delete", "webhooks.test"] {
        let again = app.call_tool(tool, json!({ "id": id })).await;
        assert_eq!(again["isError"], json!(true), "{tool}: {again}");
        assert!(
            structured(&again)["error"]
                .as_str()
                .unwrap()
                .contains("no webhook endpoint"),
            "{again}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_delivered_message_can_be_redelivered_with_its_id(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    let (endpoint, secret) = create(&app, &receiver.url("/hook"), json!(["*"])).await;
    let event = happen(&pool, &request_created(1)).await;
    let delivery = settled_delivery(&pool, endpoint).await;
    assert_eq!(delivery.state, DeliveryState::Delivered);

    let cookie = app.sign_in_admin().await;
    let reply = app
        .post_form(
            "/api/webhooks/redeliver",
            &[("id", &delivery.id.to_string())],
            Some(&cookie),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(reply.body.contains("queued"), "{}", reply.body);
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].header("webhook-id"), format!("evt_{event}"));
    assert!(got[1].signed_with(&secret));
    wait_until(Duration::from_secs(20), || async {
        let now = webhooks::delivery(&pool, delivery.id).await.unwrap();
        now.state == DeliveryState::Delivered && now.attempts == 2
    })
    .await;

    // Unknown deliveries are a 404 with words, not a 500.
    let reply = app
        .post_form(
            "/api/webhooks/redeliver",
            &[("id", "999999")],
            Some(&cookie),
        )
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    assert!(reply.body.contains("no webhook delivery"), "{}", reply.body);
}

#[sqlx::test(migrations = false)]
async fn old_events_are_deleted_with_their_deliveries(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = hooked_app(&pool, &[]).await;
    let receiver = Receiver::start().await;
    let (endpoint, _) = create(&app, &receiver.url("/hook"), json!(["*"])).await;
    let old = happen(&pool, &request_created(1)).await;
    settled_delivery(&pool, endpoint).await;
    sqlx::query("UPDATE events SET occurred_at = now() - interval '31 days' WHERE id = $1")
        .bind(old)
        .execute(&pool)
        .await
        .unwrap();
    let recent = happen(&pool, &request_created(2)).await;

    let keep = Duration::from_secs(30 * 24 * 3600);
    assert_eq!(events::delete_older_than(&pool, keep).await.unwrap(), 1);
    let left: Vec<i64> = events::list(&pool, None, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|event| event.id)
        .collect();
    assert_eq!(left, vec![recent]);
    let deliveries_of_old: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE event_id = $1")
            .bind(old)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(deliveries_of_old, 0);
    let deliveries_of_recent: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE event_id = $1")
            .bind(recent)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(deliveries_of_recent, 1);
}

#[sqlx::test(migrations = false)]
async fn the_job_cleaner_deletes_old_events(pool: PgPool) {
    crate::common::schema(&pool).await;
    let old = happen(&pool, &request_created(1)).await;
    sqlx::query("UPDATE events SET occurred_at = now() - interval '3 days' WHERE id = $1")
        .bind(old)
        .execute(&pool)
        .await
        .unwrap();
    let recent = happen(&pool, &request_created(2)).await;
    let mut config = common::jobs::quick_config(1);
    config.clean_interval = Duration::from_millis(50);
    config
        .also_clean
        .push(events::retention(Duration::from_secs(2 * 24 * 3600)));
    let _engine =
        common::jobs::start_engine(&pool, standmeet_jobs::builtin::registry(), config).await;
    wait_until(Duration::from_secs(10), || async {
        events::get(&pool, old).await.unwrap().is_none()
    })
    .await;
    assert!(events::get(&pool, recent).await.unwrap().is_some());
}

#[sqlx::test(migrations = false)]
async fn the_job_cleaner_deletes_old_test_deliveries_with_the_webhooks_own_chore(pool: PgPool) {
    crate::common::schema(&pool).await;
    let url = "http://127.0.0.1:9/hook";
    let endpoint = webhooks::create(&pool, url, &["*".into()], true)
        .await
        .unwrap();
    let old = webhooks::send_test(&pool, &jobs_client(&pool), endpoint.endpoint.id)
        .await
        .unwrap();
    let recent = webhooks::send_test(&pool, &jobs_client(&pool), endpoint.endpoint.id)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE webhook_deliveries SET created_at = now() - interval '3 days' WHERE id = $1",
    )
    .bind(old.delivery_id)
    .execute(&pool)
    .await
    .unwrap();
    let mut config = common::jobs::quick_config(1);
    config.clean_interval = Duration::from_millis(50);
    config
        .also_clean
        .push(webhooks::retention(Duration::from_secs(2 * 24 * 3600)));
    let _engine =
        common::jobs::start_engine(&pool, standmeet_jobs::builtin::registry(), config).await;
    let exists = |id: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM webhook_deliveries WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
                == 1
        }
    };
    wait_until(Duration::from_secs(10), || async {
        !exists(old.delivery_id).await
    })
    .await;
    assert!(
        exists(recent.delivery_id).await,
        "a recent test delivery is kept"
    );
}

/// The database function that records an event queues the deliveries' jobs itself; they
/// must be exactly the jobs `DeliverWebhook` would queue (kind, queue, attempts,
/// priority, arguments), one per enabled endpoint that wants the event, and none when
/// no endpoint does.
#[sqlx::test(migrations = false)]
async fn the_jobs_an_event_queues_are_deliver_webhook_jobs(pool: PgPool) {
    crate::common::schema(&pool).await;
    use standmeet::domain::webhooks::{DeliverArgs, DeliverWebhook};
    use standmeet_jobs::JobKind;

    let url = "http://127.0.0.1:9/hook";
    let every = webhooks::create(&pool, url, &["*".into()], true)
        .await
        .unwrap();
    let created_only = webhooks::create(&pool, url, &["access_request.created".into()], true)
        .await
        .unwrap();
    webhooks::create(&pool, url, &["corpus.entry_updated".into()], true)
        .await
        .unwrap();
    let disabled = webhooks::create(&pool, url, &["*".into()], true)
        .await
        .unwrap();
    webhooks::set_enabled(&pool, disabled.endpoint.id, false)
        .await
        .unwrap();

    let event = happen(&pool, &request_created(1)).await;
    let queued: Vec<(String, String, i16, i16, Value, i64)> = sqlx::query_as(
        "SELECT j.kind, j.queue, j.max_attempts, j.priority, j.args, d.endpoint_id
         FROM webhook_deliveries d JOIN jobs j ON j.args = jsonb_build_object('delivery_id', d.id)
         WHERE d.event_id = $1 ORDER BY d.endpoint_id",
    )
    .bind(event)
    .fetch_all(&pool)
    .await
    .unwrap();
    let endpoints: Vec<i64> = queued.iter().map(|job| job.5).collect();
    assert_eq!(endpoints, vec![every.endpoint.id, created_only.endpoint.id]);
    for (kind, queue, max_attempts, priority, args, _) in &queued {
        assert_eq!(kind, DeliverWebhook::KIND);
        assert_eq!(queue, DeliverWebhook::QUEUE);
        assert_eq!(*max_attempts, DeliverWebhook::MAX_ATTEMPTS);
        assert_eq!(*priority, DeliverWebhook::PRIORITY);
        serde_json::from_value::<DeliverArgs>(args.clone()).expect("DeliverArgs");
    }
    let all_jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(all_jobs, 2, "one job per delivery and no other");

    // An event nobody wants queues nothing.
    happen(
        &pool,
        &NewEvent::access_request(EventType::AccessRequestDenied, 1, "ada@example.com"),
    )
    .await;
    let all_jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        all_jobs,
        2 + 1,
        "only the endpoint for every event wants a denial"
    );
}

#[sqlx::test(migrations = false)]
async fn an_endpoint_that_is_down_takes_no_worker_from_the_others(pool: PgPool) {
    crate::common::schema(&pool).await;
    // Deliveries time out after 500 ms; the circuit's openings are 30 × 20 ms = 600 ms
    // and up.
    let app = hooked_app(
        &pool,
        &[
            ("STANDMEET_WEBHOOK_TIMEOUT_MS", "500"),
            ("STANDMEET_RETRY_BASE_MS", "20"),
        ],
    )
    .await;
    let down = Receiver::start().await;
    down.always(Answer::Hang);
    let healthy = Receiver::start().await;
    // Quick (under half the timeout), but not instant: its deliveries overlap.
    healthy.always(Answer::OkAfter(100));
    let (down_id, _) = create(&app, &down.url("/down"), json!(["*"])).await;
    let (healthy_id, _) = create(&app, &healthy.url("/up"), json!(["*"])).await;

    // Forty events at once: forty deliveries to each endpoint.
    let mut tx = pool.begin().await.unwrap();
    for n in 0..40 {
        events::record(&mut tx, &request_created(n)).await.unwrap();
    }
    tx.commit().await.unwrap();

    // The healthy endpoint gets all of its own, while the one that hangs holds no more
    // than its cap of workers (on the previous main it took every worker that came, 32,
    // for the whole timeout, and the healthy deliveries waited behind it).
    healthy.wait_for(40).await;
    let delivered = || async {
        webhooks::deliveries(&pool, healthy_id, None, 100)
            .await
            .unwrap()
            .iter()
            .filter(|d| d.state == DeliveryState::Delivered)
            .count()
    };
    wait_until(Duration::from_secs(20), || async {
        delivered().await == 40
    })
    .await;
    assert!(
        down.most_in_flight() <= webhooks::in_flight::UNPROVEN_IN_FLIGHT,
        "{} at once",
        down.most_in_flight()
    );
    assert!(
        healthy.most_in_flight() > webhooks::in_flight::UNPROVEN_IN_FLIGHT,
        "the healthy endpoint is not held to the cap: {} at once",
        healthy.most_in_flight()
    );

    // Five attempts failed in a row: its circuit is open, and its deliveries wait
    // without spending their attempts or taking workers (on the previous main every
    // one of them spent its eight attempts, and with them the workers, for minutes).
    wait_until(Duration::from_secs(20), || async {
        webhooks::circuit::circuit(&pool, down_id)
            .await
            .unwrap()
            .is_some_and(|c| c.open_until.is_some())
    })
    .await;
    let tried_before = down.received().len();
    tokio::time::sleep(Duration::from_millis(300)).await; // within one opening
    let spent: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(attempt), 0)::bigint FROM jobs j JOIN webhook_deliveries d ON d.job_id = j.id WHERE d.endpoint_id = $1",
    )
    .bind(down_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        spent < 40,
        "{spent} attempts spent on forty deliveries to an endpoint that is down"
    );
    assert!(
        down.received().len() <= tried_before + 1,
        "attempts went out while the circuit was open"
    );
    let cookie = app.sign_in_admin().await;
    let page = common::get_with_cookie(&app, &format!("/admin/webhooks/{down_id}"), &cookie).await;
    assert!(
        page.body.contains(r#"data-circuit="open""#),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("attempts failed in a row"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(r#"data-testid="webhook-in-flight""#)
            && page.body.contains("at most 4 at once"),
        "{}",
        page.body
    );

    // Back up: a trial gets through, the circuit closes, and every event is delivered,
    // each under its one id.
    down.always(Answer::Status(200));
    wait_until(Duration::from_secs(60), || async {
        webhooks::deliveries(&pool, down_id, None, 100)
            .await
            .unwrap()
            .iter()
            .filter(|d| d.state == DeliveryState::Delivered)
            .count()
            == 40
    })
    .await;
    let circuit = webhooks::circuit::circuit(&pool, down_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(circuit.attempts_failed_in_a_row, 0);
    assert_eq!(circuit.open_until, None);
    let page =
        common::get_with_cookie(&app, &format!("/admin/webhooks/{healthy_id}"), &cookie).await;
    assert!(
        page.body.contains(r#"data-circuit="closed""#),
        "{}",
        page.body
    );
}
