//! Traces as an operator sees them in a collector: one trace from the admin's click to
//! the mail, across two StandMeet processes sharing one database, a collector that is
//! down changing nothing a user sees, and the outgoing webhook POST and board GET
//! carrying their trace.

use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};

use crate::binary::{Server, drop_database, free_port, scratch_database, standmeet};
use crate::common::otlp::{ReceivedSpan, TraceCollector};
use crate::common::smtp::SmtpPeer;
use standmeet::telemetry::otel::TraceExport;

const ADMIN: &str = "admin@example.com";
const PASSWORD: &str = "a long admin password";
/// The trace the admin's browser (or the proxy in front) started.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// A StandMeet process on `database`, exporting to `collector` as `instance`, mailing
/// through `smtp`.
fn copy(database: &url::Url, collector: &str, instance: &str, smtp: &str) -> std::process::Command {
    let mut cmd = standmeet();
    cmd.env("DATABASE_URL", database.as_str())
        .env("STANDMEET_OWNER_EMAIL", "owner@example.com")
        .env("STANDMEET_ADMIN_EMAIL", ADMIN)
        .env("STANDMEET_ADMIN_PASSWORD", PASSWORD)
        .env("STANDMEET_MAIL", smtp)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("service.instance.id={instance}"),
        )
        // Batches go out every 100 ms, not every 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_TRACES_SAMPLER");
    cmd
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Signs the admin in on `server`; answers the session cookie.
async fn sign_in(server: &Server) -> String {
    let reply = http()
        .post(format!("http://127.0.0.1:{}/login", server.port))
        .header("sec-fetch-site", "same-origin")
        .form(&[("email", ADMIN), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    let cookie = reply
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.contains("session"))
        .unwrap_or_else(|| panic!("no session cookie: {reply:?}"));
    cookie.split(';').next().unwrap().to_string()
}

/// A visitor asks for access on `server`; answers the request's id.
async fn ask_for_access(server: &Server, database: &mut PgConnection) -> i64 {
    crate::binary::ask_for_access(server).await;
    sqlx::query_scalar("SELECT id FROM access_requests ORDER BY id DESC LIMIT 1")
        .fetch_one(database)
        .await
        .unwrap()
}

/// The admin approves request `id` on `server`, from a client that started trace
/// [`TRACE_ID`].
async fn approve(server: &Server, cookie: &str, id: i64) -> reqwest::Response {
    http()
        .post(format!(
            "http://127.0.0.1:{}/api/access_requests/approve",
            server.port
        ))
        .header("accept", "application/json")
        .header("sec-fetch-site", "same-origin")
        .header("cookie", cookie)
        .header("traceparent", format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"))
        .form(&[("id", id.to_string())])
        .send()
        .await
        .unwrap()
}

/// The newest job of kind `kind`: its id, state and attempt.
async fn newest_job(database: &mut PgConnection, kind: &str) -> (i64, String, i16, Option<String>) {
    sqlx::query_as(
        "SELECT id, state::text, attempt, trace_context FROM jobs WHERE kind = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(kind)
    .fetch_one(database)
    .await
    .unwrap()
}

async fn wait_until_job(
    database: &mut PgConnection,
    kind: &str,
    done: impl Fn(&str, i16) -> bool,
) -> (i64, String, i16, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let job = newest_job(database, kind).await;
        if done(&job.1, job.2) {
            return job;
        }
        assert!(Instant::now() < deadline, "the job stayed {job:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// This test's process exports its spans to a collector on loopback (nextest gives each
/// test a process of its own, and the exporter is set once per process).
async fn export_here() -> (TraceCollector, TraceExport) {
    let collector = TraceCollector::start().await;
    let export = standmeet::telemetry::init_exporting_to(
        "info",
        standmeet::telemetry::LogFormat::Text,
        Some(&collector.endpoint()),
    )
    .unwrap()
    .expect("traces are exported");
    (collector, export)
}

/// Every span the collector has, once one that `wanted` accepts is among them; then the
/// export stops. Spans arrive in batches after they end, and a job's attempt ends after
/// its work is seen outside (the webhook POST received): wait for the attempt itself.
async fn spans_once(
    collector: &TraceCollector,
    export: TraceExport,
    wanted: impl Fn(&ReceivedSpan) -> bool,
) -> Vec<ReceivedSpan> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let spans = collector.spans();
        if spans.iter().any(&wanted) {
            break spans;
        }
        assert!(
            Instant::now() < deadline,
            "the span did not come: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Off this thread, which serves the collector.
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap();
    spans
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|span| span.name == name).collect()
}

// Multi-threaded: the collector answers while this thread waits for a copy to stop
// (its last export is sent as it stops).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_a_request_is_one_trace_from_the_click_to_the_mail_across_two_processes() {
    let (database, admin_url) = scratch_database("traces");
    let collector = TraceCollector::start().await;
    let smtp = SmtpPeer::start().await.unwrap();
    // The first copy mails through a port nobody listens on: its attempt fails, and
    // the second copy's attempt sends the mail.
    let dead_smtp = format!("smtp://127.0.0.1:{}", free_port());
    let mut first = copy(&database, &collector.endpoint(), "first", &dead_smtp);
    // Its retry waits long enough for it to stop before the retry is due.
    first.env("STANDMEET_RETRY_BASE_MS", "4000");
    let mut first = Server::start(first);
    first.wait_healthy().await;
    let mut db = PgConnection::connect(database.as_str()).await.unwrap();

    let request = ask_for_access(&first, &mut db).await;
    let cookie = sign_in(&first).await;
    let approved = approve(&first, &cookie, request).await;
    assert_eq!(approved.status(), 200, "{}", approved.text().await.unwrap());
    let kind = "access_request.approval_mail";
    let (job, _, _, stored) = wait_until_job(&mut db, kind, |state, attempt| {
        state == "retryable" && attempt == 1
    })
    .await;
    assert!(
        stored
            .as_deref()
            .is_some_and(|traceparent| traceparent.contains(TRACE_ID)),
        "the job keeps its insert's trace context: {stored:?}"
    );
    first.stop();

    let mut second = Server::start(copy(
        &database,
        &collector.endpoint(),
        "second",
        &smtp.url(),
    ));
    second.wait_healthy().await;
    wait_until_job(&mut db, kind, |state, _| state == "completed").await;
    assert_eq!(smtp.mails_to("ada@example.com").len(), 1);

    // Both copies' spans: the second attempt's and both SMTP sends.
    let spans = collector
        .wait_for(Duration::from_secs(30), |spans| {
            let in_trace = |name: &str| {
                spans
                    .iter()
                    .filter(|span| span.trace_id == TRACE_ID && span.name == name)
                    .count()
            };
            in_trace(&format!("{kind} attempt 2")) == 1 && in_trace("smtp send") == 2
        })
        .await;
    second.stop();
    let trace: Vec<ReceivedSpan> = spans
        .into_iter()
        .filter(|span| span.trace_id == TRACE_ID)
        .collect();
    let one = |name: &str| -> ReceivedSpan {
        let found = named(&trace, name);
        assert_eq!(found.len(), 1, "one {name:?} span in the trace: {trace:#?}");
        found[0].clone()
    };
    let instance = |span: &ReceivedSpan| span.resource["service.instance.id"].clone();

    // The request continues the client's trace; the server function is its child.
    let request_span = one("POST /api/access_requests/approve");
    assert_eq!(request_span.parent_span_id, CLIENT_SPAN);
    assert_eq!(request_span.resource["service.name"], "standmeet");
    let server_fn = one("server_fn access_requests/approve");
    assert_eq!(server_fn.parent_span_id, request_span.span_id);
    // The insert is under the server function, in the first copy.
    let insert = one(&format!("insert {kind}"));
    assert_eq!(instance(&insert), "first");
    assert!(
        trace
            .iter()
            .any(|span| span.span_id == insert.parent_span_id),
        "the insert's parent is in the trace: {trace:#?}"
    );
    // Both attempts are children of the insert: the first in the first copy, failed;
    // the second in the second copy, completed.
    let first_attempt = one(&format!("{kind} attempt 1"));
    let second_attempt = one(&format!("{kind} attempt 2"));
    for (attempt, copy, outcome) in [
        (&first_attempt, "first", "retryable"),
        (&second_attempt, "second", "completed"),
    ] {
        assert_eq!(attempt.parent_span_id, insert.span_id, "{attempt:#?}");
        assert_eq!(instance(attempt), copy);
        assert_eq!(attempt.attribute("job.id"), Some(job.to_string().as_str()));
        assert_eq!(attempt.attribute("job.kind"), Some(kind));
        assert_eq!(attempt.attribute("job.queue"), Some("mail"));
        assert_eq!(attempt.attribute("job.outcome"), Some(outcome));
    }
    assert_eq!(first_attempt.attribute("job.attempt"), Some("1"));
    assert_eq!(second_attempt.attribute("job.attempt"), Some("2"));
    // The SMTP send is the second attempt's child.
    let sends: Vec<&ReceivedSpan> = named(&trace, "smtp send");
    assert!(
        sends
            .iter()
            .any(|send| send.parent_span_id == second_attempt.span_id),
        "{trace:#?}"
    );

    drop_database(&admin_url, &database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_changes_nothing_a_user_sees_and_the_drops_are_counted() {
    let (database, admin_url) = scratch_database("traces_down");
    let smtp = SmtpPeer::start().await.unwrap();
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let mut server = Server::start(copy(&database, &nobody, "alone", &smtp.url()));
    server.wait_healthy().await;
    let mut db = PgConnection::connect(database.as_str()).await.unwrap();

    let request = ask_for_access(&server, &mut db).await;
    let cookie = sign_in(&server).await;
    let approved = approve(&server, &cookie, request).await;
    assert_eq!(approved.status(), 200);
    // The page's Approve does not wait for its mail: the mail goes out all the same.
    let answer: serde_json::Value = approved.json().await.unwrap();
    assert_eq!(answer["status"], "approved", "{answer}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while smtp.mails_to("ada@example.com").is_empty() {
        assert!(Instant::now() < deadline, "no mail: {}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The mail arrives before its job's completion is committed: wait for that too.
    let (_, state, _, _) = wait_until_job(&mut db, "access_request.approval_mail", |state, _| {
        state != "available" && state != "running"
    })
    .await;
    assert_eq!(state, "completed");
    let page = http()
        .get(format!(
            "http://127.0.0.1:{}/admin/access-requests",
            server.port
        ))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);

    // The exports failed: their spans are counted as dropped on /metrics.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = http()
            .get(format!("http://127.0.0.1:{}/metrics", server.port))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let dropped: u64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix("standmeet_trace_spans_dropped_total "))
            .unwrap_or_else(|| panic!("no dropped spans counter: {metrics}"))
            .trim()
            .parse()
            .unwrap();
        if dropped > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no span was counted as dropped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.stop();
    drop_database(&admin_url, &database).await;
}

/// In this test's process (nextest gives each test one of its own), traces go to a
/// collector on loopback: a visitor's request, with the client's `traceparent`, ends in
/// a webhook POST that carries the same trace, sent from a span of its delivery's
/// attempt.
#[sqlx::test(migrations = false)]
async fn a_webhook_post_carries_the_trace_of_the_request_that_caused_it(pool: sqlx::PgPool) {
    crate::common::schema(&pool).await;
    use crate::common::TestApp;
    use crate::common::mcp::{TOKEN, structured};
    use crate::common::receiver::Receiver;
    use axum::body::Body;
    use axum::http::Request;

    let (collector, export) = export_here().await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_FETCH_ALLOW_PRIVATE", "true")
        // The in-process client stands for the proxy in front, whose trace is taken.
        .setting(
            "STANDMEET_TRUSTED_PROXIES",
            crate::common::app::CLIENT.ip().to_string(),
        )
        .jobs()
        .spawn()
        .await;
    let receiver = Receiver::start().await;
    let created = app
        .call_tool(
            "webhooks.create",
            serde_json::json!({ "url": receiver.url("/hook"), "event_types": ["access_request.created"] }),
        )
        .await;
    assert!(structured(&created)["id"].is_i64(), "{created}");

    let asked = app
        .send(
            Request::post("/api/request_access")
                .header("content-type", "application/x-www-form-urlencoded")
                .header("accept", "application/json")
                .header("sec-fetch-site", "same-origin")
                .header("traceparent", format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"))
                .body(Body::from("name=Ada&email=ada%40example.com&message=Hello"))
                .unwrap(),
        )
        .await;
    assert_eq!(asked.status, 200, "{}", asked.body);

    let posted = receiver.wait_for(1).await;
    let traceparent = posted[0].header("traceparent");
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(
        parts.len(),
        4,
        "the POST carries a traceparent: {traceparent:?}"
    );
    assert_eq!(parts[1], TRACE_ID, "the request's trace: {traceparent}");

    let spans = spans_once(&collector, export, |span| {
        span.name == "webhooks.deliver attempt 1" && span.trace_id == TRACE_ID
    })
    .await;
    let delivery = spans
        .iter()
        .find(|span| span.name == "webhook deliver" && span.span_id == parts[2])
        .unwrap_or_else(|| panic!("the POST's parent is the delivery span: {spans:#?}"));
    assert_eq!(delivery.trace_id, TRACE_ID);
    let attempt = spans
        .iter()
        .find(|span| span.span_id == delivery.parent_span_id)
        .unwrap_or_else(|| panic!("the delivery's parent: {spans:#?}"));
    assert_eq!(attempt.name, "webhooks.deliver attempt 1");
    assert_eq!(attempt.attribute("job.outcome"), Some("completed"));

    // The MCP tool call that made the endpoint is a span under its HTTP request's (the
    // call runs in the MCP session's task, not the request's).
    let tool = spans
        .iter()
        .find(|span| span.name == "tool webhooks.create")
        .unwrap_or_else(|| panic!("the tool call's span: {spans:#?}"));
    let parent = |span: &ReceivedSpan| {
        spans
            .iter()
            .find(|parent| parent.span_id == span.parent_span_id)
            .unwrap_or_else(|| panic!("the parent of {span:#?}: {spans:#?}"))
            .clone()
    };
    let mcp = parent(tool);
    assert_eq!(mcp.name, "mcp request");
    let request = parent(&mcp);
    assert_eq!(request.name, "POST /mcp");
    assert_eq!(request.trace_id, tool.trace_id);
}

/// In this test's process, traces go to a collector on loopback: a board's GET carries
/// the trace its fetch job stored when it was inserted, and its parent is the `board
/// fetch` span inside that job's attempt.
#[sqlx::test(migrations = false)]
async fn a_board_fetch_carries_the_trace_its_job_was_inserted_in(pool: sqlx::PgPool) {
    crate::common::schema(&pool).await;
    use crate::common::TestApp;
    use standmeet::domain::listings;

    let (collector, export) = export_here().await;
    let app = TestApp::builder(pool.clone())
        .setting("STANDMEET_FETCH_WAIT_MS", "20000")
        .boards()
        .jobs()
        .spawn()
        .await;
    let path = "/greenhouse/acme";
    listings::add_source(&pool, "Acme", "greenhouse", &app.boards().url(path), true)
        .await
        .unwrap();
    let answer = listings::fetch_new(&pool, &app.state.jobs, Duration::from_secs(20), None)
        .await
        .unwrap();
    assert!(answer.listings.is_some(), "the fetch finished in time");

    let traceparents = app.boards().traceparents(path);
    assert_eq!(traceparents.len(), 1, "one GET: {traceparents:?}");
    let parts: Vec<&str> = traceparents[0].split('-').collect();
    assert_eq!(
        parts.len(),
        4,
        "the GET carries a traceparent: {traceparents:?}"
    );
    let stored: Option<String> =
        sqlx::query_scalar("SELECT trace_context FROM jobs WHERE kind = 'jobs.fetch_source'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let stored = stored.expect("the fetch job stored its insert's trace");
    assert_eq!(
        stored.split('-').nth(1),
        Some(parts[1]),
        "the GET is in the trace the job was inserted in: {stored} vs {}",
        traceparents[0]
    );

    let spans = spans_once(&collector, export, |span| {
        span.name == "jobs.fetch_source attempt 1"
    })
    .await;
    let fetch = spans
        .iter()
        .find(|span| span.span_id == parts[2])
        .unwrap_or_else(|| panic!("the GET's parent span: {spans:#?}"));
    assert_eq!(fetch.name, "board fetch");
    let attempt = spans
        .iter()
        .find(|span| span.span_id == fetch.parent_span_id)
        .unwrap_or_else(|| panic!("the board fetch's parent: {spans:#?}"));
    assert_eq!(attempt.name, "jobs.fetch_source attempt 1");
    assert_eq!(attempt.attribute("job.outcome"), Some("completed"));
    assert_eq!(attempt.trace_id, parts[1]);
}

/// In this test's process, traces go to a collector on loopback: a schedule's firing
/// starts a trace of its own (no request caused it), and the job it inserts runs its
/// attempt in that trace.
#[sqlx::test(migrations = false)]
async fn a_schedule_firing_starts_a_trace_its_job_runs_in(pool: sqlx::PgPool) {
    crate::common::schema(&pool).await;
    use crate::common::TestApp;
    use crate::common::mcp::TOKEN;

    let (collector, export) = export_here().await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .jobs()
        .spawn()
        .await;
    crate::schedules::a_schedule_due_now(&app, &pool).await;

    let spans = spans_once(&collector, export, |span| {
        span.name == "system.noop attempt 1"
    })
    .await;
    let by_id = |id: &str| {
        spans
            .iter()
            .find(|span| span.span_id == id)
            .unwrap_or_else(|| panic!("no span {id}: {spans:#?}"))
    };
    let attempt = named(&spans, "system.noop attempt 1")[0];
    assert_eq!(attempt.attribute("job.outcome"), Some("completed"));
    let insert = by_id(&attempt.parent_span_id);
    assert_eq!(insert.name, "insert system.noop");
    let fire = by_id(&insert.parent_span_id);
    assert_eq!(fire.name, "schedule.fire");
    assert_eq!(fire.parent_span_id, "", "a firing's trace starts with it");
    assert_eq!(attempt.trace_id, fire.trace_id);
    let stored: Option<String> = sqlx::query_scalar(
        "SELECT trace_context FROM jobs WHERE unique_key LIKE 'schedule:every-minute:%' ORDER BY id LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        stored
            .as_deref()
            .and_then(|context| context.split('-').nth(1)),
        Some(fire.trace_id.as_str()),
        "the job stored the firing's trace"
    );
}

/// In this test's process: a visitor (not loopback, not a trusted proxy) sends a
/// `traceparent` and a `tracestate` of 40 members. The request's span starts a trace of
/// StandMeet's own with a link to the visitor's, and carries no tracestate; from the
/// trusted proxy, a small tracestate is continued and a large one dropped.
#[sqlx::test(migrations = false)]
async fn a_visitors_trace_context_is_a_link_and_a_large_tracestate_is_dropped(pool: sqlx::PgPool) {
    crate::common::schema(&pool).await;
    use crate::common::TestApp;
    use axum::body::Body;
    use axum::http::Request;

    let (collector, export) = export_here().await;
    let proxy: std::net::SocketAddr = "198.51.100.20:40000".parse().unwrap();
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_TRUSTED_PROXIES", "198.51.100.20")
        .spawn()
        .await;
    let many: Vec<String> = (0..40).map(|n| format!("v{n}=x")).collect();
    let request = |path: &str, tracestate: &str| {
        Request::get(path)
            .header("traceparent", format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"))
            .header("tracestate", tracestate)
            .body(Body::empty())
            .unwrap()
    };
    // From the visitor (the in-process client, trusted by nobody).
    app.send(request("/search?q=visitor", &many.join(",")))
        .await;
    // From the proxy: a small tracestate, then one over 512 bytes.
    for tracestate in [
        "vendor=abc".to_string(),
        format!("vendor={}", "x".repeat(600)),
    ] {
        use tower::ServiceExt;
        let reply = app
            .router_from(proxy)
            .oneshot(request("/search?q=proxied", &tracestate))
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
    }

    let spans = collector
        .wait_for(Duration::from_secs(30), |spans| {
            named(spans, "GET /search").len() >= 3
        })
        .await;
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap();
    let searches = named(&spans, "GET /search");
    assert_eq!(searches.len(), 3, "{spans:#?}");
    let visitor = searches
        .iter()
        .find(|span| span.trace_id != TRACE_ID)
        .unwrap_or_else(|| panic!("the visitor's request starts a trace: {searches:#?}"));
    assert_eq!(visitor.parent_span_id, "", "a root: {visitor:#?}");
    assert_eq!(
        visitor.links,
        [(TRACE_ID.to_string(), CLIENT_SPAN.to_string(), String::new())],
        "a link to the visitor's context, without their tracestate"
    );
    assert_eq!(visitor.trace_state, "");
    let continued: Vec<_> = searches
        .iter()
        .filter(|span| span.trace_id == TRACE_ID)
        .collect();
    assert_eq!(
        continued.len(),
        2,
        "the proxy's requests continue: {searches:#?}"
    );
    assert!(
        continued
            .iter()
            .all(|span| span.parent_span_id == CLIENT_SPAN)
    );
    let mut states: Vec<&str> = continued
        .iter()
        .map(|span| span.trace_state.as_str())
        .collect();
    states.sort();
    assert_eq!(states, ["", "vendor=abc"], "the large one dropped");
}
