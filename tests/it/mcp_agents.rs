//! MCP as agents expect it (docs/mcp.md): every tool has a title, annotations that
//! tell a read from a delete, and an output schema that its real answers keep to;
//! `tasks.list` searches and pages as the Tasks panel does.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::TestApp;
use common::mcp::{TOKEN, rpc, structured};
use serde_json::{Value, json};
use sqlx::PgPool;

/// The tools as `tools/list` gives them, by name.
async fn listed_tools(app: &TestApp) -> BTreeMap<String, Value> {
    let (_, list) = rpc(&app.router, Some(TOKEN), "tools/list", json!({})).await;
    list["result"]["tools"]
        .as_array()
        .expect("a tool list")
        .iter()
        .map(|tool| (tool["name"].as_str().unwrap().to_string(), tool.clone()))
        .collect()
}

/// The names of the tools whose annotation `hint` is true.
fn hinted(tools: &BTreeMap<String, Value>, hint: &str) -> BTreeSet<String> {
    tools
        .iter()
        .filter(|(_, tool)| tool["annotations"][hint] == json!(true))
        .map(|(name, _)| name.clone())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|name| name.to_string()).collect()
}

#[sqlx::test(migrations = false)]
async fn every_tool_has_a_title_and_annotations_that_tell_a_read_from_a_delete(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let tools = listed_tools(&app).await;
    assert_eq!(tools.len(), 29, "{:?}", tools.keys());
    for (name, tool) in &tools {
        let title = tool["title"].as_str().unwrap_or_default();
        assert!(!title.is_empty(), "{name} has a title: {tool}");
        let annotations = tool["annotations"].as_object();
        assert!(
            annotations
                .is_some_and(|a| a.contains_key("readOnlyHint") && a.contains_key("openWorldHint")),
            "{name} says whether it only reads and whether it reaches outside: {tool}"
        );
        // The official TypeScript SDK refuses a tool list whose schemas have a property
        // whose schema is not an object (such as `true`).
        for schema in ["inputSchema", "outputSchema"] {
            let branches = tool[schema]["anyOf"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let properties = std::iter::once(&tool[schema])
                .chain(branches.iter())
                .filter_map(|branch| branch["properties"].as_object());
            for (property, its) in properties.flatten() {
                assert!(its.is_object(), "{name}'s {schema} {property}: {its}");
            }
        }
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        let read_only = tool["annotations"]["readOnlyHint"] == json!(true);
        if !read_only {
            for hint in ["destructiveHint", "idempotentHint"] {
                assert!(
                    tool["annotations"][hint].is_boolean(),
                    "{name}, which writes, says {hint}: {tool}"
                );
            }
        }
    }
    assert_eq!(
        hinted(&tools, "destructiveHint"),
        names(&["bookings.cancel", "queues.pause", "webhooks.delete"])
    );
    assert_eq!(
        hinted(&tools, "openWorldHint"),
        names(&["jobs.fetch_new", "webhooks.create", "webhooks.test"])
    );
    assert_eq!(
        hinted(&tools, "readOnlyHint"),
        names(&[
            "access_requests.list",
            "bookings.list",
            "bookings.slots",
            "corpus.rebuild_result",
            "corpus.search",
            "events.get",
            "events.list",
            "jobs.fetch_result",
            "queues.list",
            "schedules.list",
            "tasks.get",
            "tasks.list",
            "webhooks.list",
        ])
    );
    for idempotent in [
        "queues.pause",
        "queues.resume",
        "webhooks.delete",
        "corpus.update",
    ] {
        assert!(
            hinted(&tools, "idempotentHint").contains(idempotent),
            "{idempotent}"
        );
    }
    for repeated_does_more in ["corpus.create", "jobs.fetch_new", "bookings.create"] {
        assert!(
            !hinted(&tools, "idempotentHint").contains(repeated_does_more),
            "{repeated_does_more}"
        );
    }
}

/// Checks a tool's successful answer against the tool's `outputSchema`, and answers the
/// structured content.
struct SchemaCheck {
    tools: BTreeMap<String, Value>,
    called: BTreeSet<String>,
}

impl SchemaCheck {
    async fn call(&mut self, app: &TestApp, tool: &str, arguments: Value) -> Value {
        let result = app.call_tool(tool, arguments.clone()).await;
        assert_ne!(
            result["isError"],
            json!(true),
            "{tool} {arguments}: {result}"
        );
        let content = structured(&result);
        let schema = &self.tools[tool]["outputSchema"];
        assert!(schema.is_object(), "{tool} has an output schema");
        let validator = jsonschema::validator_for(schema)
            .unwrap_or_else(|err| panic!("{tool}'s output schema is a schema: {err}\n{schema}"));
        let errors: Vec<String> = validator
            .iter_errors(&content)
            .map(|err| format!("{} at {}", err, err.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{tool} answered what its schema does not allow: {errors:?}\n{content}\n{schema}"
        );
        self.called.insert(tool.to_string());
        content
    }
}

#[sqlx::test(migrations = false)]
async fn every_tool_answers_as_its_output_schema_says(pool: PgPool) {
    crate::common::schema(&pool).await;
    let vault = tempfile::tempdir().unwrap();
    std::fs::write(
        vault.path().join("Hello.md"),
        "# Hello\n\nA note from the vault.\n",
    )
    .unwrap();
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_MAIL", "log")
        .setting("STANDMEET_APPROVE_WAIT_MS", "5000")
        .setting("STANDMEET_VAULT", vault.path().to_str().unwrap())
        .boards()
        .jobs()
        .spawn()
        .await;
    let board = app.boards().url("/greenhouse/acme");
    standmeet::domain::listings::add_source(&pool, "Acme", "greenhouse", &board, true)
        .await
        .unwrap();
    let mut check = SchemaCheck {
        tools: listed_tools(&app).await,
        called: BTreeSet::new(),
    };

    // Access requests.
    let request: i64 = sqlx::query_scalar(
        "INSERT INTO access_requests (name, email) VALUES ('Ada', 'ada@example.com') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    check.call(&app, "access_requests.list", json!({})).await;
    let approved = check
        .call(&app, "access_requests.approve", json!({ "id": request }))
        .await;
    let mail_job = approved["mail_job_id"].as_i64().unwrap();

    // Jobs.
    check
        .call(&app, "tasks.get", json!({ "job_id": mail_job }))
        .await;
    check.call(&app, "tasks.list", json!({ "limit": 1 })).await;

    // Bookings: a week open all day, then a slot booked and cancelled.
    let windows: Vec<Value> = (1..=7)
        .map(|day| json!({ "weekday": day, "start": "00:00", "end": "24:00" }))
        .collect();
    check
        .call(&app, "bookings.availability", json!({ "windows": windows }))
        .await;
    let slots = check
        .call(&app, "bookings.slots", json!({ "days": 3 }))
        .await;
    let start = slots["slots"][1]["start"].as_str().expect("a free slot");
    let booked = check
        .call(
            &app,
            "bookings.create",
            json!({ "start": start, "name": "Grace", "email": "grace@example.com" }),
        )
        .await;
    check.call(&app, "bookings.list", json!({})).await;
    check
        .call(&app, "bookings.cancel", json!({ "id": booked["id"] }))
        .await;

    // The corpus, and the vault.
    let entry = check
        .call(
            &app,
            "corpus.create",
            json!({ "title": "Schemas", "body": "Answers kept to their shape.", "visibility": "public" }),
        )
        .await;
    check
        .call(
            &app,
            "corpus.update",
            json!({ "id": entry["id"], "title": "Output schemas" }),
        )
        .await;
    check
        .call(&app, "corpus.promote", json!({ "id": entry["id"] }))
        .await;
    check
        .call(&app, "corpus.search", json!({ "q": "schemas" }))
        .await;
    let rebuilt = check.call(&app, "corpus.rebuild", json!({})).await;
    check
        .call(
            &app,
            "corpus.rebuild_result",
            json!({ "job_id": rebuilt["job_id"] }),
        )
        .await;

    // Job listings, from a board on loopback.
    let fetched = check.call(&app, "jobs.fetch_new", json!({})).await;
    check
        .call(
            &app,
            "jobs.fetch_result",
            json!({ "job_ids": fetched["job_ids"] }),
        )
        .await;

    // Events and webhooks.
    let events = check.call(&app, "events.list", json!({})).await;
    check
        .call(
            &app,
            "events.get",
            json!({ "id": events["events"][0]["id"] }),
        )
        .await;
    let hook = check
        .call(
            &app,
            "webhooks.create",
            json!({ "url": "https://hooks.example/standmeet", "event_types": ["booking.created"] }),
        )
        .await;
    check.call(&app, "webhooks.list", json!({})).await;
    check
        .call(&app, "webhooks.test", json!({ "id": hook["id"] }))
        .await;
    check
        .call(&app, "webhooks.delete", json!({ "id": hook["id"] }))
        .await;

    // Queues and schedules.
    check.call(&app, "queues.list", json!({})).await;
    check
        .call(&app, "queues.pause", json!({ "queue": "default" }))
        .await;
    check
        .call(&app, "queues.resume", json!({ "queue": "default" }))
        .await;
    check
        .call(
            &app,
            "schedules.set",
            json!({ "name": "tidy", "cron": "0 3 * * *", "kind": "system.noop" }),
        )
        .await;
    check.call(&app, "schedules.list", json!({})).await;
    check
        .call(&app, "schedules.run_now", json!({ "name": "tidy" }))
        .await;

    // A tool error is what each output schema allows beside the answer: a real one, and
    // the shape against every tool's schema.
    let refused = app
        .call_tool("tasks.get", json!({ "job_id": 424242 }))
        .await;
    assert_eq!(refused["isError"], true);
    let error = structured(&refused);
    assert_eq!(error, json!({ "error": "There is no job 424242." }));
    for (name, tool) in &check.tools {
        let validator = jsonschema::validator_for(&tool["outputSchema"]).unwrap();
        assert!(validator.is_valid(&error), "{name} allows a tool error");
        assert!(
            !validator.is_valid(&json!({ "error": 7 })),
            "{name} allows only an error in words"
        );
    }

    let listed: BTreeSet<String> = check.tools.keys().cloned().collect();
    assert_eq!(
        check.called, listed,
        "every tool is called and checked against its schema"
    );
}

#[sqlx::test(migrations = false)]
async fn tasks_list_searches_like_the_panel_and_pages_to_the_end(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let mut inserted = Vec::new();
    for n in 0..7 {
        let id = common::jobs::insert::<standmeet_jobs::builtin::Noop>(
            &pool,
            &json!({ "n": n, "batch": if n % 2 == 0 { "even" } else { "odd" } }),
        )
        .await
        .unwrap();
        inserted.push(id);
    }

    // Three at a time, newest first, to the end.
    let mut seen = Vec::new();
    let mut after = Value::Null;
    let mut pages = 0;
    loop {
        let page = structured(
            &app.call_tool(
                "tasks.list",
                json!({ "kind": "system.noop", "limit": 3, "after": after }),
            )
            .await,
        );
        pages += 1;
        for task in page["tasks"].as_array().unwrap() {
            seen.push(task["id"].as_i64().unwrap());
        }
        after = page["next_after"].clone();
        if after.is_null() {
            break;
        }
        assert!(pages < 10, "paging ends");
    }
    let mut newest_first: Vec<i64> = inserted.iter().map(|id| id.0).collect();
    newest_first.reverse();
    assert_eq!(seen, newest_first, "each job once, newest first");
    assert_eq!(pages, 3);

    // q as the panel's search box: a JSON object the arguments contain, or an id.
    let odd = structured(
        &app.call_tool("tasks.list", json!({ "q": "{\"batch\": \"odd\"}" }))
            .await,
    );
    let odd_ids: Vec<i64> = odd["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["id"].as_i64().unwrap())
        .collect();
    assert_eq!(odd_ids, [inserted[5].0, inserted[3].0, inserted[1].0]);
    assert_eq!(odd["next_after"], Value::Null);
    let one = structured(
        &app.call_tool("tasks.list", json!({ "q": inserted[2].0.to_string() }))
            .await,
    );
    assert_eq!(one["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(one["tasks"][0]["id"], inserted[2].0);

    // The queue filter, and a search the panel refuses is refused in the same words.
    let none = structured(
        &app.call_tool("tasks.list", json!({ "queue": "no-such-queue" }))
            .await,
    );
    assert_eq!(none["tasks"], json!([]));
    let refused = app
        .call_tool("tasks.list", json!({ "q": "{not json" }))
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
}
