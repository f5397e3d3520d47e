//! Schedules through MCP (docs/jobs.md): the built-in ones, creating and changing
//! one, Run now and "already queued", a firing of the running engine, and bad input
//! refused with words and nothing written.

use crate::common;

use common::TestApp;
use common::jobs::wait_for_state;
use common::mcp::{TOKEN, structured};
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet_jobs::{JobId, JobState};

fn named<'a>(listed: &'a Value, name: &str) -> &'a Value {
    listed["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no schedule {name} in {listed}"))
}

#[sqlx::test(migrations = false)]
async fn the_schedule_tools_list_create_change_and_run_now(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_TIMEZONE", "Europe/Berlin")
        .spawn()
        .await;
    let listed = structured(&app.call_tool("schedules.list", json!({})).await);
    let fetch = named(&listed, "listings-fetch");
    let mut keys: Vec<&String> = fetch.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "args",
            "cron",
            "enabled",
            "kind",
            "last_run",
            "name",
            "next_run_at",
            "queue",
            "timezone"
        ]
    );
    assert_eq!(fetch["cron"], "0 * * * *");
    assert_eq!(fetch["kind"], "listings.fetch_all");
    assert_eq!(fetch["enabled"], false, "off until an admin turns it on");
    assert_eq!(fetch["next_run_at"], Value::Null);
    assert_eq!(fetch["timezone"], "Europe/Berlin");
    assert_eq!(fetch["last_run"], Value::Null);

    let created = structured(
        &app.call_tool(
            "schedules.set",
            json!({ "name": "nightly-noop", "cron": "30 2 * * *", "kind": "system.noop", "args": { "n": 1 } }),
        )
        .await,
    );
    assert_eq!(created["enabled"], true);
    assert_eq!(created["queue"], "default", "the kind's own queue");
    let next: jiff::Timestamp = created["next_run_at"].as_str().unwrap().parse().unwrap();
    let local = jiff::tz::TimeZone::get("Europe/Berlin")
        .unwrap()
        .to_datetime(next);
    assert_eq!(
        (local.hour(), local.minute()),
        (2, 30),
        "02:30 in the owner's zone"
    );

    let changed = structured(
        &app.call_tool(
            "schedules.set",
            json!({ "name": "nightly-noop", "enabled": false }),
        )
        .await,
    );
    assert_eq!(changed["enabled"], false);
    assert_eq!(changed["cron"], "30 2 * * *", "what was not given stays");

    let run = structured(
        &app.call_tool("schedules.run_now", json!({ "name": "nightly-noop" }))
            .await,
    );
    assert_eq!(run["duplicate"], false);
    let again = structured(
        &app.call_tool("schedules.run_now", json!({ "name": "nightly-noop" }))
            .await,
    );
    assert_eq!(again, json!({ "job_id": run["job_id"], "duplicate": true }));
    let listed = structured(&app.call_tool("schedules.list", json!({})).await);
    let last = &named(&listed, "nightly-noop")["last_run"];
    assert_eq!(last["job_id"], run["job_id"]);
    assert_eq!(last["state"], "available");
    let args: Value = sqlx::query_scalar("SELECT args FROM jobs WHERE id = $1")
        .bind(run["job_id"].as_i64().unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(args, json!({ "n": 1 }));
}

#[sqlx::test(migrations = false)]
async fn bad_schedule_input_is_a_tool_error_in_words_and_writes_nothing(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let before = structured(&app.call_tool("schedules.list", json!({})).await);
    for (arguments, words) in [
        (
            json!({ "name": "x", "cron": "1".repeat(5_000), "kind": "system.noop" }),
            "at most 200",
        ),
        (
            json!({ "name": "x", "cron": "0 25 * * *", "kind": "system.noop" }),
            "hour field",
        ),
        (
            json!({ "name": "x", "cron": "@daily", "kind": "nobody.knows" }),
            "No StandMeet process runs jobs of kind",
        ),
        (
            json!({ "name": "x", "cron": "@daily", "kind": "system.noop", "args": "text" }),
            "Args must be a JSON object",
        ),
        (json!({ "name": "x", "cron": "@daily" }), "needs a kind"),
        (
            // A kind StandMeet runs, but about one thing: no clock gives its arguments.
            json!({ "name": "x", "cron": "@daily", "kind": "access_request.approval_mail" }),
            "A schedule cannot run",
        ),
        (
            json!({ "name": "NO WAY", "cron": "@daily", "kind": "system.noop" }),
            "A schedule's name",
        ),
    ] {
        let result = app.call_tool("schedules.set", arguments.clone()).await;
        assert_eq!(result["isError"], json!(true), "{arguments}: {result}");
        let message = structured(&result)["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains(words), "{arguments}: {message}");
    }
    let missing = app
        .call_tool("schedules.run_now", json!({ "name": "nope" }))
        .await;
    assert_eq!(missing["isError"], json!(true));
    assert_eq!(
        structured(&app.call_tool("schedules.list", json!({})).await),
        before,
        "nothing written"
    );
}

/// Schedule `every-minute` (a `system.noop` each minute), made through the MCP tool of
/// `app` (which has the MCP token), and due now: as if the last slot accounted for were
/// two minutes ago (a restart after a gap).
pub(crate) async fn a_schedule_due_now(app: &TestApp, pool: &PgPool) {
    structured(
        &app.call_tool(
            "schedules.set",
            json!({ "name": "every-minute", "cron": "* * * * *", "kind": "system.noop" }),
        )
        .await,
    );
    sqlx::query(
        "UPDATE job_schedules SET fired_through = now() - interval '2 minutes' WHERE name = 'every-minute'",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrations = false)]
async fn the_running_engine_fires_a_due_schedule_once(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .jobs()
        .spawn()
        .await;
    a_schedule_due_now(&app, &pool).await;
    let fired_job = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT min(id) FROM jobs WHERE unique_key LIKE 'schedule:every-minute:%'",
        )
        .fetch_one(&pool)
        .await
        .ok()
    };
    common::jobs::wait_until(std::time::Duration::from_secs(10), || async {
        fired_job().await.is_some()
    })
    .await;
    let job = fired_job().await.unwrap();
    wait_for_state(&pool, JobId(job), JobState::Completed).await;
    let fired: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE unique_key LIKE 'schedule:every-minute:%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        fired <= 2,
        "made up once, not once per missed slot: {fired}"
    );
    drop(app);
}
