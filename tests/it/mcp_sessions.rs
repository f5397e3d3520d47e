//! An agent in an MCP session, with rmcp's own client over real HTTP (docs/mcp.md):
//! the capabilities say jobs are resources one may subscribe to; a job reads as
//! `tasks.get` answers it and its subscription is told when it is finished; a tool that
//! waits sends progress and, cancelled, stops waiting while its job goes on.

use crate::common;

use std::time::Duration;

use common::TestApp;
use common::jobs::wait_until;
use common::mcp::{TOKEN, structured};
use rmcp::model::{
    CallToolRequestParams, ClientRequest, ProgressNotificationParam, ReadResourceRequestParams,
    ResourceContents, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use sqlx::PgPool;
use standmeet_jobs::JobId;
use tokio::sync::mpsc;

/// What the agent hears besides answers.
struct Heard {
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    updated: mpsc::UnboundedReceiver<String>,
}

/// The agent: passes on every progress notification and resource update it hears.
struct Agent {
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
    updated: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Agent {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }
}

/// An agent connected to `app`'s `/mcp` (it starts with `initialize`, so it holds a
/// session).
async fn connect(app: &TestApp) -> (RunningService<RoleClient, Agent>, Heard) {
    let (progress, heard_progress) = mpsc::unbounded_channel();
    let (updated, heard_updates) = mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(TOKEN);
    let client = Agent { progress, updated }
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("an MCP session");
    let heard = Heard {
        progress: heard_progress,
        updated: heard_updates,
    };
    (client, heard)
}

/// A job's resource URI.
fn uri(id: JobId) -> String {
    format!("standmeet://jobs/{}", id.0)
}

async fn next_update(heard: &mut Heard) -> String {
    tokio::time::timeout(Duration::from_secs(20), heard.updated.recv())
        .await
        .expect("an update within 20 s")
        .expect("the client is still listening")
}

/// A desk whose approvals wait `wait_ms` for their mail, with a mail server that holds
/// its answers (no approval's mail goes out until released), and a pending request
/// from Ada: the app and the request's id.
async fn approval_with_mail_held(pool: &PgPool, wait_ms: &str) -> (TestApp, i64) {
    let app = TestApp::desk(pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .setting("STANDMEET_APPROVE_WAIT_MS", wait_ms)
        .smtp()
        .jobs()
        .spawn()
        .await;
    app.smtp().hold_answers();
    let request: i64 = sqlx::query_scalar(
        "INSERT INTO access_requests (name, email) VALUES ('Ada', 'ada@example.com') RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    (app, request)
}

#[allow(deprecated)] // resources/subscribe is how protocol versions before 2026-07-28 subscribe.
async fn subscribe(client: &RunningService<RoleClient, Agent>, uri: &str) -> Result<(), String> {
    client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .map_err(|err| err.to_string())
}

#[sqlx::test(migrations = false)]
async fn a_job_is_a_resource_that_reads_as_tasks_get_and_says_when_it_is_done(pool: PgPool) {
    crate::common::schema(&pool).await;
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .jobs()
        .spawn()
        .await;
    let (client, mut heard) = connect(&app).await;
    let capabilities = &client.peer_info().expect("the server's info").capabilities;
    let resources = capabilities.resources.as_ref().expect("resources");
    assert_eq!(resources.subscribe, Some(true));
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "standmeet://jobs/{id}");
    assert_eq!(templates[0].mime_type.as_deref(), Some("application/json"));

    // A job that waits in a paused queue: subscribed, read, then let go.
    app.call_tool("queues.pause", json!({ "queue": "default" }))
        .await;
    let job = common::jobs::insert::<standmeet_jobs::builtin::Noop>(&pool, &json!({}))
        .await
        .unwrap();
    subscribe(&client, &uri(job)).await.unwrap();
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri(job)))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents {
        text, mime_type, ..
    } = &read.contents[0]
    else {
        panic!("text contents: {read:?}");
    };
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    let as_resource: Value = serde_json::from_str(text).unwrap();
    let as_tool = structured(&app.call_tool("tasks.get", json!({ "job_id": job.0 })).await);
    assert_eq!(
        as_resource, as_tool,
        "the resource is what tasks.get answers"
    );
    assert_eq!(as_resource["state"], "available");
    assert!(
        heard.updated.try_recv().is_err(),
        "no update while the job waits"
    );
    app.call_tool("queues.resume", json!({ "queue": "default" }))
        .await;
    assert_eq!(next_update(&mut heard).await, uri(job));
    let done = structured(&app.call_tool("tasks.get", json!({ "job_id": job.0 })).await);
    assert_eq!(done["state"], "completed");

    // A job finished already is told at once; one that is not there is an error.
    subscribe(&client, &uri(job)).await.unwrap();
    assert_eq!(next_update(&mut heard).await, uri(job));
    let unknown = subscribe(&client, "standmeet://jobs/424242").await;
    assert!(
        unknown
            .as_ref()
            .is_err_and(|err| err.contains("There is no job 424242")),
        "{unknown:?}"
    );
    let wrong = subscribe(&client, "file:///etc/passwd").await;
    assert!(
        wrong
            .as_ref()
            .is_err_and(|err| err.contains("standmeet://jobs/<id>")),
        "{wrong:?}"
    );
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = false)]
async fn a_session_follows_at_most_a_hundred_unfinished_jobs(pool: PgPool) {
    crate::common::schema(&pool).await;
    // No engine: the jobs stay unfinished.
    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let (client, _heard) = connect(&app).await;
    let mut jobs = Vec::new();
    for n in 0..101 {
        jobs.push(
            common::jobs::insert::<standmeet_jobs::builtin::Noop>(&pool, &json!({ "n": n }))
                .await
                .unwrap(),
        );
    }
    for job in &jobs[..100] {
        subscribe(&client, &uri(*job)).await.unwrap();
    }
    // Again the same one: nothing more to hold.
    subscribe(&client, &uri(jobs[0])).await.unwrap();
    let over = subscribe(&client, &uri(jobs[100])).await;
    assert!(
        over.as_ref()
            .is_err_and(|err| err.contains("100 unfinished jobs")),
        "{over:?}"
    );
    #[allow(deprecated)] // as `subscribe`
    client
        .unsubscribe(UnsubscribeRequestParams::new(uri(jobs[0])))
        .await
        .unwrap();
    subscribe(&client, &uri(jobs[100])).await.unwrap();
    // Another session has its own hundred.
    let (other, _) = connect(&app).await;
    subscribe(&other, &uri(jobs[0])).await.unwrap();
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
}

#[sqlx::test(migrations = false)]
async fn a_waiting_tool_sends_progress_and_cancelled_stops_waiting_while_its_job_goes_on(
    pool: PgPool,
) {
    crate::common::schema(&pool).await;
    let (app, request) = approval_with_mail_held(&pool, "20000").await;
    let (client, mut heard) = connect(&app).await;
    let call = CallToolRequestParams::new("access_requests.approve")
        .with_arguments(json!({ "id": request }).as_object().unwrap().clone());
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(rmcp::model::Request::new(call)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();

    // Progress: seconds waited of at most 20, naming the mail's job and its resource.
    let mut reports = Vec::new();
    while reports.len() < 3 {
        let report = tokio::time::timeout(Duration::from_secs(10), heard.progress.recv())
            .await
            .expect("progress within 10 s")
            .unwrap();
        assert_eq!(report.progress_token, handle.progress_token);
        reports.push(report);
    }
    for pair in reports.windows(2) {
        let gap = pair[1].progress - pair[0].progress;
        assert!(gap > 0.0 && gap < 2.0, "{reports:?}");
    }
    assert_eq!(reports[0].total, Some(20.0));
    let mail_job: i64 =
        sqlx::query_scalar("SELECT id FROM jobs WHERE kind = 'access_request.approval_mail'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let message = reports[2].message.clone().unwrap_or_default();
    assert!(
        message.contains(&format!("standmeet://jobs/{mail_job}")),
        "{message}"
    );
    assert_eq!(app.state.jobs.waiters().waiting, 1, "the call waits");

    // Cancelled: the wait ends long before its 20 s, the mail's job goes on.
    handle
        .cancel(Some("the agent moved on".into()))
        .await
        .unwrap();
    wait_until(Duration::from_secs(5), || async {
        app.state.jobs.waiters().waiting == 0
    })
    .await;
    app.smtp().release_answers();
    let job = structured(
        &app.call_tool("tasks.get", json!({ "job_id": mail_job }))
            .await,
    );
    assert_ne!(job["state"], "cancelled", "{job}");
    wait_until(Duration::from_secs(20), || async {
        let job = structured(
            &app.call_tool("tasks.get", json!({ "job_id": mail_job }))
                .await,
        );
        job["state"] == "completed"
    })
    .await;
    let listed = structured(&app.call_tool("access_requests.list", json!({})).await);
    assert_eq!(listed["requests"][0]["status"], "replied");
    assert_eq!(app.smtp().mails_to("ada@example.com").len(), 1);

    // A call whose mail goes out in time names its job's resource too.
    let second: i64 = sqlx::query_scalar(
        "INSERT INTO access_requests (name, email) VALUES ('Grace', 'grace@example.com') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let answer = client
        .call_tool(
            CallToolRequestParams::new("access_requests.approve")
                .with_arguments(json!({ "id": second }).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let resources = answer.meta.as_ref().expect("_meta").0["standmeet/job_resources"].clone();
    let answer = answer.structured_content.expect("structured content");
    assert_eq!(
        resources,
        json!([format!("standmeet://jobs/{}", answer["mail_job_id"])])
    );
    // The structured content is the contract's shape, nothing added.
    let mut keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "mail_job_id",
            "mail_state",
            "pending",
            "request_id",
            "status"
        ]
    );
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = false)]
async fn a_call_without_a_session_that_asks_for_progress_gets_it_before_its_answer(pool: PgPool) {
    crate::common::schema(&pool).await;
    let (app, request) = approval_with_mail_held(&pool, "2500").await;
    let reply = reqwest::Client::new()
        .post(app.url("/mcp"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {
                "name": "access_requests.approve",
                "arguments": { "id": request },
                "_meta": { "progressToken": "approve-7" }
            }
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), reqwest::StatusCode::OK);
    assert!(
        reply.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let body = reply.text().await.unwrap();
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|message| message["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "{body}");
    assert!(
        progress
            .iter()
            .all(|message| message["params"]["progressToken"] == "approve-7")
    );
    let answer = messages.last().expect("the answer comes last");
    assert_eq!(answer["id"], 7, "{body}");
    let receipt = &answer["result"]["structuredContent"];
    assert_eq!(receipt["pending"], true, "{body}");
    assert_eq!(
        answer["result"]["_meta"]["standmeet/job_resources"][0],
        format!("standmeet://jobs/{}", receipt["mail_job_id"])
    );
    app.smtp().release_answers();
}

#[sqlx::test(migrations = false)]
async fn a_client_without_sessions_listens_for_its_jobs_instead(pool: PgPool) {
    crate::common::schema(&pool).await;
    use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .jobs()
        .spawn()
        .await;
    app.call_tool("queues.pause", json!({ "queue": "default" }))
        .await;
    let waiting = common::jobs::insert::<standmeet_jobs::builtin::Noop>(&pool, &json!({}))
        .await
        .unwrap();
    // Protocol version 2026-07-28: no initialize, no session; subscriptions/listen.
    let (progress, _heard_progress) = mpsc::unbounded_channel();
    let (updated, _heard_updates) = mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(TOKEN);
    let client = Agent { progress, updated }
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("a client of 2026-07-28");
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions(vec![uri(waiting), "file:///etc/passwd".to_string()])
        .build();
    let mut subscription = client.listen(filter).await.unwrap();
    assert_eq!(
        subscription.acknowledged().resource_subscriptions,
        Some(vec![uri(waiting)]),
        "only job URIs are followed"
    );
    app.call_tool("queues.resume", json!({ "queue": "default" }))
        .await;
    let news = tokio::time::timeout(Duration::from_secs(20), subscription.next())
        .await
        .expect("an update within 20 s")
        .unwrap();
    let Some(ServerNotification::ResourceUpdatedNotification(update)) = news else {
        panic!("a resource update: {news:?}");
    };
    assert_eq!(update.params.uri, uri(waiting));
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = false)]
async fn subscribing_needs_a_session_and_a_copy_holds_a_bounded_number_of_them(pool: PgPool) {
    crate::common::schema(&pool).await;
    use common::mcp::rpc;

    let app = TestApp::desk(&pool)
        .setting("STANDMEET_MCP_TOKEN", TOKEN)
        .spawn()
        .await;
    let job = common::jobs::insert::<standmeet_jobs::builtin::Noop>(&pool, &json!({}))
        .await
        .unwrap();
    // Without a session there is nowhere to be told later: refused in words.
    let (_, refused) = rpc(
        &app.router,
        Some(TOKEN),
        "resources/subscribe",
        json!({ "uri": uri(job) }),
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("needs a session"), "{refused}");

    // Sessions up to the bound, then an initialize is refused; a call without a
    // session still works.
    let initialize = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": { "name": "many", "version": "1" }
    });
    // The bound, `mcp::transport::MAX_SESSIONS`.
    for n in 0..500 {
        let (status, answer) =
            rpc(&app.router, Some(TOKEN), "initialize", initialize.clone()).await;
        assert_eq!(status, axum::http::StatusCode::OK, "session {n}: {answer}");
    }
    let (status, over) = rpc(&app.router, Some(TOKEN), "initialize", initialize).await;
    assert_eq!(
        status,
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "{over}"
    );
    assert!(
        over["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("500 MCP sessions")),
        "{over}"
    );
    let listed = app.call_tool("tasks.list", json!({})).await;
    assert_eq!(structured(&listed)["tasks"][0]["id"], job.0);
}
