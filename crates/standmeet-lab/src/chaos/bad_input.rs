//! bad-input: garbage into every door, and the server neither breaks nor writes.
//!
//! Against a `standmeet serve` child, signed in as an admin:
//!
//! - every server function (the list below mirrors the `#[server(endpoint = …)]`s of
//!   `src/api/`): each argument in turn spoiled while the others stay valid (a NUL
//!   character, 1 MB, and for numbers words, fractions, `1e309`, values past `i64`,
//!   and unknown ids such as -1 and `i64::MAX`), each argument missing, every argument
//!   spoiled at once (empty, NUL, invalid UTF-8, control characters, SQL, markup,
//!   1 MB), and bodies or queries that are no form at all (raw invalid UTF-8, JSON,
//!   nesting 500 deep, 1 MB of `&`);
//! - every MCP tool, as `tools/list` describes them: each property given values of the
//!   wrong JSON type and values its type allows but the tool must refuse, missing
//!   required arguments, arguments that are no object; and JSON-RPC that is broken
//!   (invalid JSON and UTF-8, unknown methods and tools, `1e309` as id, 10,000-deep
//!   nesting, 1 MB);
//! - bodies past the one body limit (3 MB and 20 MB) to a server function, the sign-in
//!   form and `/mcp`, each to be answered 413, also to a client that writes its whole
//!   body before it reads.
//!
//! Every probe is bad by the rules StandMeet itself states, so a correct server
//! refuses each with a 4xx (or a JSON-RPC or tool error) and changes nothing.
//! Promises: no answer ≥ 500, every probe answered, no panic in the server's log, the server alive and
//! stopping cleanly at the end, and no table changed: every table in `public` is
//! compared before and after, by row count and by a digest of its rows, except what
//! changes without any request ([`NOT_WRITTEN_BY_REQUESTS`]).
//!
//! Two server functions are left out on purpose ([`NOT_PROBED`], with the reason for
//! each): they take no input, so there is nothing to spoil, and any call does real work.
//! And `front_page/save` has no entry in [`ARGUMENTS`] on purpose: its two free texts
//! take almost any bad value as a valid name and introduction, so it gets only the
//! probes that leave its fields out or spoil the whole body, which it rightly refuses.
//! Its refusals of bad texts (blank, too long, control characters) are tested in
//! `tests/it/http_surface.rs` and `domain::front_page`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::http::{Answer, ServerClient, form_body};
use super::process;
use super::{Lab, Outcome, first_few, snippet};
use standmeet_smtp_peer::SmtpPeer;

const MEGABYTE: usize = 1 << 20;
/// An id no row has.
const UNKNOWN_ID: &[u8] = b"987654321";
const FORM: &str = "application/x-www-form-urlencoded";
/// Tables that change whatever the requests: the sessions (signing in writes one) and
/// the job engine's own bookkeeping (each process's heartbeat in `job_workers`).
const NOT_WRITTEN_BY_REQUESTS: &[&str] = &["sessions", "job_workers"];
/// The generic bad values that a tool rightly takes (so they change a table): an owner
/// may clear every booking window (`windows: []`, never free).
const TAKEN_AS_VALID: &[(&str, &str, &str)] = &[("bookings.availability", "windows", "empty")];
/// Server functions that take nothing and act, and what they do: any call is a whole,
/// valid one (a stray field is ignored), so no input can be bad and the call rightly
/// writes.
const NOT_PROBED: &[(&str, &str)] = &[
    (
        "account/send_recovery",
        "takes nothing, and sends the signed-in admin a recovery phrase by mail",
    ),
    (
        "listings/fetch_new",
        "takes nothing, and fetches every enabled job board",
    ),
];
/// Probes in flight at once.
const CONCURRENT: usize = 8;

/// What a server function argument is, with a valid value for text.
#[derive(Clone, Copy)]
enum Arg {
    Text(&'static str),
    Int,
    Bool,
}

struct ServerFn {
    /// Below `/api/`.
    endpoint: &'static str,
    /// `GetUrl` (a query string) rather than a form POST.
    get: bool,
    args: &'static [(&'static str, Arg)],
}

/// The arguments of the server functions that take any, with a valid value for each
/// (a text's; numbers and booleans get theirs from [`valid_value`]). Which functions
/// there are, and how they are called, comes from the server's own registry
/// (`standmeet::api::server_functions`): a new one is probed without a word here, with
/// a stray argument until it is given its own.
const ARGUMENTS: &[(&str, &[(&str, Arg)])] = &[
    (
        "request_access",
        &[
            ("name", Arg::Text("Chaos Probe")),
            ("email", Arg::Text("probe@chaos.example.com")),
            ("message", Arg::Text("Let me in.")),
        ],
    ),
    (
        "redeem_access",
        &[
            ("email", Arg::Text("probe@chaos.example.com")),
            ("code", Arg::Text("ABCD-EFGH-JKLM")),
        ],
    ),
    ("access_requests/list", &[("status", Arg::Text("pending"))]),
    ("access_requests/approve", &[("id", Arg::Int)]),
    ("access_requests/deny", &[("id", Arg::Int)]),
    (
        "account/change_email",
        &[("new_email", Arg::Text("new-owner@chaos.example.com"))],
    ),
    ("account/cancel_change", &[("id", Arg::Int)]),
    (
        "confirm_email/preview",
        &[("token", Arg::Text("not-a-real-token"))],
    ),
    ("confirm_email", &[("token", Arg::Text("not-a-real-token"))]),
    ("corpus/entries", &[("grep", Arg::Text("probe"))]),
    ("corpus/entry", &[("id", Arg::Int)]),
    (
        "corpus/create",
        &[
            ("title", Arg::Text("Chaos probe")),
            ("body", Arg::Text("A probe.")),
            ("visibility", Arg::Text("public")),
        ],
    ),
    (
        "corpus/update",
        &[
            ("id", Arg::Int),
            ("title", Arg::Text("Chaos probe")),
            ("body", Arg::Text("A probe.")),
            ("visibility", Arg::Text("public")),
        ],
    ),
    ("corpus/promote", &[("id", Arg::Int)]),
    ("search", &[("q", Arg::Text("probe"))]),
    (
        "listings/add_source",
        &[
            ("name", Arg::Text("Chaos board")),
            ("kind", Arg::Text("rss")),
            ("url", Arg::Text("https://chaos.example.com/feed.xml")),
        ],
    ),
    (
        "listings/set_enabled",
        &[("id", Arg::Int), ("enabled", Arg::Bool)],
    ),
    ("listings/remove_source", &[("id", Arg::Int)]),
    (
        "tasks/list",
        &[
            ("query[state]", Arg::Text("completed")),
            ("query[kind]", Arg::Text("system.noop")),
            ("query[queue]", Arg::Text("default")),
            ("query[q]", Arg::Text("{\"n\": 1}")),
            ("query[before]", Arg::Int),
            ("query[after]", Arg::Int),
        ],
    ),
    ("tasks/detail", &[("id", Arg::Int)]),
    ("tasks/retry", &[("id", Arg::Int)]),
    ("tasks/cancel", &[("id", Arg::Int)]),
    (
        "tasks/retry_selected",
        &[("ids[0]", Arg::Int), ("ids[1]", Arg::Int)],
    ),
    (
        "tasks/cancel_selected",
        &[("ids[0]", Arg::Int), ("ids[1]", Arg::Int)],
    ),
    (
        "tasks/delete_selected",
        &[("ids[0]", Arg::Int), ("ids[1]", Arg::Int)],
    ),
    ("tasks/rows", &[("ids[0]", Arg::Int)]),
    ("entry", &[("id", Arg::Int)]),
    (
        "events/page",
        &[
            ("event_type", Arg::Text("access_request.created")),
            ("before", Arg::Int),
        ],
    ),
    (
        "webhooks/create",
        &[
            ("url", Arg::Text("https://chaos.example.com/hook")),
            ("event_types", Arg::Text("*")),
        ],
    ),
    (
        "webhooks/set_enabled",
        &[("id", Arg::Int), ("enabled", Arg::Bool)],
    ),
    ("webhooks/delete", &[("id", Arg::Int)]),
    ("webhooks/test", &[("id", Arg::Int)]),
    ("webhooks/delivery", &[("id", Arg::Int)]),
    ("webhooks/detail", &[("id", Arg::Int), ("before", Arg::Int)]),
    ("webhooks/redeliver", &[("id", Arg::Int)]),
    (
        "book",
        &[
            ("start", Arg::Text("2026-12-07T09:00:00Z")),
            ("name", Arg::Text("Chaos probe")),
            ("email", Arg::Text("probe@chaos.example.com")),
            ("topic", Arg::Text("A probe.")),
        ],
    ),
    (
        "book/cancel_view",
        &[("token", Arg::Text("not-a-real-token"))],
    ),
    ("book/cancel", &[("token", Arg::Text("not-a-real-token"))]),
    (
        "bookings/availability",
        &[
            ("monday", Arg::Text("09:00–17:00")),
            ("tuesday", Arg::Text("09:00–17:00")),
            ("wednesday", Arg::Text("09:00–17:00")),
            ("thursday", Arg::Text("09:00–17:00")),
            ("friday", Arg::Text("09:00–17:00")),
            ("saturday", Arg::Text("")),
            ("sunday", Arg::Text("")),
            ("slot_minutes", Arg::Text("30")),
            ("buffer_minutes", Arg::Text("0")),
            ("days_ahead", Arg::Text("14")),
        ],
    ),
    ("bookings/cancel", &[("id", Arg::Int)]),
    ("queues/pause", &[("queue", Arg::Text("chaos"))]),
    ("queues/resume", &[("queue", Arg::Text("chaos"))]),
    // The expression is bad from the start, so no probe adds a schedule.
    (
        "schedules/add",
        &[
            ("name", Arg::Text("chaos-probe")),
            ("cron", Arg::Text("61 * * * *")),
            ("kind", Arg::Text("system.noop")),
            ("args", Arg::Text("{}")),
            ("queue", Arg::Text("")),
        ],
    ),
    (
        "schedules/set_enabled",
        &[
            ("name", Arg::Text("no-such-schedule")),
            ("enabled", Arg::Bool),
        ],
    ),
    (
        "schedules/run_now",
        &[("name", Arg::Text("no-such-schedule"))],
    ),
];

/// One bad request.
struct Probe {
    label: String,
    request: ProbeRequest,
}

/// The longest URL an HTTP client can send at all (the `http` crate stops near 64 KiB):
/// a "1 MB" query is cut to this, still far past anything StandMeet takes.
const MAX_SENDABLE_URL: usize = 60_000;

/// `path_and_query`, cut to [`MAX_SENDABLE_URL`] bytes (at a character boundary).
fn longest_sendable(path_and_query: &str) -> &str {
    let mut end = path_and_query.len().min(MAX_SENDABLE_URL);
    while !path_and_query.is_char_boundary(end) {
        end -= 1;
    }
    &path_and_query[..end]
}

enum ProbeRequest {
    /// A server function's path and query, below `/api/`.
    Get(String),
    Post {
        endpoint: &'static str,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// A body for `/mcp`.
    Mcp(Vec<u8>),
    /// A form posted to a page's path (`/login`).
    Page {
        path: &'static str,
        content_type: &'static str,
        body: Vec<u8>,
    },
}

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let (url, pool) = lab.fresh_database("chaos_bad_input").await?;
    let sink = SmtpPeer::start().await?;
    let log = lab.log_path("bad-input-server.log");
    let mut server = process::start_server(&url, sink.port, &log).await?;
    let client = ServerClient::sign_in(&server).await?;
    let before = fingerprints(&pool).await?;

    let mut probes = server_fn_probes()?;
    let server_fn_count = probes.len();
    probes.extend(mcp_probes(&client).await?);
    let mcp_count = probes.len() - server_fn_count;
    let oversized = oversized_bodies();
    let oversized_count = oversized.len();
    probes.extend(oversized);
    let answers = send_all(&client, probes).await?;
    // Anything a probe wrongly queued gets a moment to run and write.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = fingerprints(&pool).await?;

    let mut server_errors = Vec::new();
    let mut unanswered = Vec::new();
    let mut oversized_not_413 = Vec::new();
    for (label, answer) in &answers {
        if label.starts_with(OVERSIZED) && answer.as_ref().is_ok_and(|answer| answer.status != 413)
        {
            let answer = answer.as_ref().expect("checked above");
            oversized_not_413.push(format!(
                "{label} → {} {}",
                answer.status,
                snippet(&answer.body)
            ));
        }
        match answer {
            Ok(answer) if answer.status >= 500 => server_errors.push(format!(
                "{label} → {} {}",
                answer.status,
                snippet(&answer.body)
            )),
            Ok(_) => {}
            Err(err) => unanswered.push(format!("{label} → {err}")),
        }
    }
    for line in server_errors.iter().chain(&unanswered).take(50) {
        eprintln!("chaos: bad-input: {line}");
    }
    let changed = changed_tables(&before, &after);
    let alive = server.process.exited().is_none() && client.healthy().await;
    let stopped_cleanly = server
        .process
        .stop(Duration::from_secs(20))
        .await
        .is_some_and(|status| status.success());
    let panics = process::panics_in(&log);
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("requests", answers.len());
    outcome.figure("server_fn_probes", server_fn_count);
    outcome.figure("mcp_probes", mcp_count);
    outcome.figure("answers_5xx", server_errors.len());
    outcome.figure("oversized_probes", oversized_count);
    outcome.figure("no_answer", unanswered.len());
    outcome.figure("panics", panics);
    outcome.figure("tables_changed", changed.len());
    outcome.check(
        server_errors.is_empty(),
        format!(
            "{} answers were ≥ 500, such as: {}",
            server_errors.len(),
            first_few(&server_errors)
        ),
    );
    // A client that writes its whole body before it reads (as reqwest does) must get
    // an answer, an oversized body included: never a reset or a broken pipe.
    outcome.check(
        unanswered.is_empty(),
        format!(
            "{} probes got no answer, such as: {}",
            unanswered.len(),
            first_few(&unanswered)
        ),
    );
    outcome.check(
        oversized_not_413.is_empty(),
        format!(
            "oversized bodies not answered 413: {}",
            first_few(&oversized_not_413)
        ),
    );
    outcome.check(panics == 0, format!("{panics} panics in the server's log"));
    outcome.check(
        changed.is_empty(),
        format!("bad input changed tables: {}", changed.join(", ")),
    );
    outcome.check(alive, "the server was not healthy after the probes");
    outcome.check(
        stopped_cleanly,
        "the server did not stop cleanly on SIGTERM",
    );
    Ok(outcome)
}

/// Sends every probe, `CONCURRENT` at a time; answers each label with its answer or
/// why there was none.
async fn send_all(
    client: &ServerClient,
    probes: Vec<Probe>,
) -> anyhow::Result<Vec<(String, Result<Answer, String>)>> {
    let slots = Arc::new(Semaphore::new(CONCURRENT));
    let mut tasks = JoinSet::new();
    for probe in probes {
        let client = client.clone();
        let slots = slots.clone();
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await;
            let answer = match probe.request {
                ProbeRequest::Get(path_and_query) => {
                    client
                        .server_fn(Method::GET, longest_sendable(&path_and_query), None)
                        .await
                }
                ProbeRequest::Post {
                    endpoint,
                    content_type,
                    body,
                } => {
                    client
                        .server_fn(Method::POST, endpoint, Some((content_type, body)))
                        .await
                }
                ProbeRequest::Mcp(body) => client.mcp(body).await,
                ProbeRequest::Page {
                    path,
                    content_type,
                    body,
                } => client.post_page(path, content_type, body).await,
            };
            (probe.label, answer.map_err(|err| with_causes(&err)))
        });
    }
    let mut answers = Vec::new();
    while let Some(done) = tasks.join_next().await {
        answers.push(done?);
    }
    Ok(answers)
}

/// An error with its causes, which say what went wrong (`error sending request`
/// alone does not).
fn with_causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

// --- Server functions ---------------------------------------------------------------

/// Every server function the server registers, with its arguments from [`ARGUMENTS`];
/// refuses a table that names a function the server does not have.
fn server_fns() -> anyhow::Result<Vec<ServerFn>> {
    let registered = standmeet::api::server_functions();
    let tables = [
        (
            "NOT_PROBED",
            NOT_PROBED
                .iter()
                .map(|(endpoint, _)| *endpoint)
                .collect::<Vec<_>>(),
        ),
        (
            "ARGUMENTS",
            ARGUMENTS.iter().map(|(endpoint, _)| *endpoint).collect(),
        ),
    ];
    for (table, endpoints) in tables {
        for endpoint in endpoints {
            if !registered
                .iter()
                .any(|function| function.path.strip_prefix("/api/") == Some(endpoint))
            {
                anyhow::bail!(
                    "bad-input's {table} names {endpoint}, which is not a server function (any more)"
                );
            }
        }
    }
    Ok(registered
        .iter()
        .filter_map(|function| {
            let endpoint = function.path.strip_prefix("/api/")?;
            if NOT_PROBED.iter().any(|(left_out, _)| *left_out == endpoint) {
                return None;
            }
            let args = ARGUMENTS
                .iter()
                .find(|(listed, _)| *listed == endpoint)
                .map_or(&[][..], |(_, args)| *args);
            Some(ServerFn {
                endpoint,
                get: function.get,
                args,
            })
        })
        .collect())
}

fn server_fn_probes() -> anyhow::Result<Vec<Probe>> {
    let mut probes = Vec::new();
    for function in server_fns()? {
        let valid: Vec<(&str, Vec<u8>)> = function
            .args
            .iter()
            .map(|(name, arg)| (*name, valid_value(*arg)))
            .collect();
        // One argument spoiled (or left out) while the others are valid.
        for (index, (name, arg)) in function.args.iter().enumerate() {
            for (what, bad) in bad_values(*arg) {
                let mut fields = valid.clone();
                fields[index].1 = bad;
                probes.push(function.probe(&format!("{name} = {what}"), &fields));
            }
            let mut fields = valid.clone();
            fields.remove(index);
            probes.push(function.probe(&format!("{name} missing"), &fields));
        }
        // Every argument spoiled the same way (one without arguments gets a stray one).
        for (what, bad) in every_argument_values() {
            let fields: Vec<(&str, Vec<u8>)> = if function.args.is_empty() {
                vec![("stray", bad)]
            } else {
                function
                    .args
                    .iter()
                    .map(|(name, _)| (*name, bad.clone()))
                    .collect()
            };
            probes.push(function.probe(&format!("every argument = {what}"), &fields));
        }
        probes.extend(function.malformed());
    }
    Ok(probes)
}

impl ServerFn {
    /// A call with `fields` as its form or query.
    fn probe(&self, what: &str, fields: &[(&str, Vec<u8>)]) -> Probe {
        let pairs: Vec<(&str, &[u8])> = fields
            .iter()
            .map(|(name, value)| (*name, value.as_slice()))
            .collect();
        let encoded = form_body(&pairs);
        let request = if self.get {
            // Percent-encoded, so plain ASCII whatever the values were.
            ProbeRequest::Get(format!(
                "{}?{}",
                self.endpoint,
                String::from_utf8_lossy(&encoded)
            ))
        } else {
            ProbeRequest::Post {
                endpoint: self.endpoint,
                content_type: FORM,
                body: encoded,
            }
        };
        Probe {
            label: format!("{}: {what}", self.endpoint),
            request,
        }
    }

    /// Calls whose query or body is no form at all.
    fn malformed(&self) -> Vec<Probe> {
        let nested = format!("a{}=1", "[a]".repeat(500));
        let label = |what: &str| format!("{}: {what}", self.endpoint);
        if self.get {
            let query = |query: String| ProbeRequest::Get(format!("{}?{query}", self.endpoint));
            vec![
                Probe {
                    label: label("a query of invalid UTF-8"),
                    request: query("%FF%FE=%FD".into()),
                },
                Probe {
                    label: label("a query nested 500 deep"),
                    request: query(nested),
                },
                Probe {
                    label: label("a 1 MB query of ampersands"),
                    request: query("&".repeat(MEGABYTE)),
                },
            ]
        } else {
            let sent = |content_type: &'static str, body: Vec<u8>| ProbeRequest::Post {
                endpoint: self.endpoint,
                content_type,
                body,
            };
            [
                ("an empty body", sent(FORM, Vec::new())),
                (
                    "a body of raw invalid UTF-8",
                    sent(FORM, b"\xff\xfe=\xfd&\xff".to_vec()),
                ),
                ("a form nested 500 deep", sent(FORM, nested.into_bytes())),
                ("1 MB of ampersands", sent(FORM, vec![b'&'; MEGABYTE])),
                ("invalid JSON", sent("application/json", b"{".to_vec())),
                (
                    "JSON instead of a form",
                    sent("application/json", br#"{"id":"seven"}"#.to_vec()),
                ),
                ("plain text", sent("text/plain", b"hello".to_vec())),
            ]
            .into_iter()
            .map(|(what, request)| Probe {
                label: label(what),
                request,
            })
            .collect()
        }
    }
}

fn valid_value(arg: Arg) -> Vec<u8> {
    match arg {
        Arg::Text(value) => value.as_bytes().to_vec(),
        Arg::Int => UNKNOWN_ID.to_vec(),
        Arg::Bool => b"true".to_vec(),
    }
}

/// Values no argument of this kind may take.
fn bad_values(arg: Arg) -> Vec<(&'static str, Vec<u8>)> {
    let mut values = vec![
        ("NUL", b"probe\0probe".to_vec()),
        ("1 MB", vec![b'x'; MEGABYTE]),
    ];
    match arg {
        Arg::Text(_) => {}
        Arg::Int => values.extend([
            // Numbers no row has: refused as unknown, never a crash.
            ("-1", b"-1".to_vec()),
            ("i64 max", b"9223372036854775807".to_vec()),
            // Not numbers StandMeet can take.
            ("i64 max + 1", b"9223372036854775808".to_vec()),
            ("i64 min - 1", b"-9223372036854775809".to_vec()),
            ("1e309", b"1e309".to_vec()),
            ("1.5", b"1.5".to_vec()),
            ("a word", b"seven".to_vec()),
            ("empty", Vec::new()),
            ("1 MB of digits", vec![b'9'; MEGABYTE]),
        ]),
        Arg::Bool => values.extend([
            ("maybe", b"maybe".to_vec()),
            ("empty", Vec::new()),
            ("2", b"2".to_vec()),
        ]),
    }
    values
}

/// Values given to every argument at once. Each leaves at least one argument of every
/// writing function invalid (an email, a visibility, a kind, an id).
fn every_argument_values() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty", Vec::new()),
        ("NUL", b"\0".to_vec()),
        ("-1", b"-1".to_vec()),
        ("i64 max", b"9223372036854775807".to_vec()),
        ("1e309", b"1e309".to_vec()),
        ("invalid UTF-8", b"\xff\xfe\xfd".to_vec()),
        ("control characters", b"\x01\x08\x1b[31m\x7f".to_vec()),
        ("SQL", b"' OR 1=1; DROP TABLE jobs; --".to_vec()),
        ("markup", b"<script>alert(1)</script>".to_vec()),
        ("1 MB", vec![b'x'; MEGABYTE]),
    ]
}

// --- MCP ----------------------------------------------------------------------------

/// Probes for every tool `tools/list` names, and for the JSON-RPC layer itself.
async fn mcp_probes(client: &ServerClient) -> anyhow::Result<Vec<Probe>> {
    let listing = client
        .mcp(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} })
                .to_string()
                .into_bytes(),
        )
        .await?;
    let listed: Value = serde_json::from_str(&listing.body).with_context(|| {
        format!(
            "tools/list answered {} {}",
            listing.status,
            snippet(&listing.body)
        )
    })?;
    let tools = listed["result"]["tools"]
        .as_array()
        .context("tools/list listed no tools")?;
    let mut probes = Vec::new();
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or_default();
        let schema = &tool["inputSchema"];
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let properties: Vec<(&str, &str)> = schema["properties"]
            .as_object()
            .map(|properties| {
                properties
                    .iter()
                    .map(|(property, schema)| (property.as_str(), json_type(schema)))
                    .collect()
            })
            .unwrap_or_default();
        // The required arguments, with plausible values (ids no row has).
        let base: Vec<(&str, Vec<u8>)> = properties
            .iter()
            .filter(|(property, _)| required.contains(property))
            .map(|(property, kind)| (*property, plausible_json(kind)))
            .collect();
        for (property, kind) in &properties {
            for (what, bad) in bad_json_values(kind) {
                if TAKEN_AS_VALID.contains(&(name, *property, what)) {
                    continue;
                }
                let mut arguments = base.clone();
                arguments.retain(|(other, _)| other != property);
                arguments.push((*property, bad));
                probes.push(tool_call(
                    name,
                    &format!("{property} = {what}"),
                    &json_object(&arguments),
                ));
            }
        }
        for (what, arguments) in [
            ("arguments a string", "\"x\""),
            ("arguments an array", "[]"),
            ("arguments a number", "7"),
        ] {
            probes.push(tool_call(name, what, arguments.as_bytes()));
        }
        if !required.is_empty() {
            probes.push(tool_call(name, "no arguments", b"{}"));
            probes.push(tool_call(name, "arguments null", b"null"));
        }
    }
    probes.extend(broken_json_rpc());
    Ok(probes)
}

/// A property's JSON type (the first that is not "null").
fn json_type(schema: &Value) -> &str {
    match &schema["type"] {
        Value::String(kind) => kind.as_str(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap_or("null"),
        _ => "object",
    }
}

fn plausible_json(kind: &str) -> Vec<u8> {
    match kind {
        "integer" | "number" => UNKNOWN_ID.to_vec(),
        "string" => b"\"chaos probe\"".to_vec(),
        "array" => b"[987654321]".to_vec(),
        "boolean" => b"true".to_vec(),
        _ => b"{}".to_vec(),
    }
}

/// Raw JSON (not always valid) that a property of this type must be refused with.
fn bad_json_values(kind: &str) -> Vec<(&'static str, Vec<u8>)> {
    let raw = |text: &str| text.as_bytes().to_vec();
    match kind {
        "integer" | "number" => vec![
            ("a string", raw("\"7\"")),
            ("1.5", raw("1.5")),
            ("-1", raw("-1")),
            ("0", raw("0")),
            ("i64 max", raw("9223372036854775807")),
            ("i64 max + 1", raw("9223372036854775808")),
            ("i64 min - 1", raw("-9223372036854775809")),
            ("1e309", raw("1e309")),
            ("true", raw("true")),
            ("an array", raw("[]")),
            ("an object", raw("{}")),
        ],
        "string" => vec![
            ("a number", raw("7")),
            ("true", raw("true")),
            ("an array", raw("[]")),
            ("an object", raw("{}")),
            ("NUL", raw(r#""probe\u0000probe""#)),
            ("1 MB", {
                let mut quoted = vec![b'x'; MEGABYTE + 2];
                quoted[0] = b'"';
                quoted[MEGABYTE + 1] = b'"';
                quoted
            }),
            ("invalid UTF-8", b"\"\xff\xfe\"".to_vec()),
            ("a lone surrogate", raw(r#""\ud800""#)),
        ],
        "array" => vec![
            ("a string", raw("\"x\"")),
            ("a number", raw("7")),
            ("an object", raw("{}")),
            ("empty", raw("[]")),
            ("a word inside", raw("[\"x\"]")),
            ("-1 inside", raw("[-1]")),
            ("i64 max + 1 inside", raw("[9223372036854775808]")),
            ("1e309 inside", raw("[1e309]")),
            ("200 unknown ids", {
                let ids: Vec<String> = (0..200).map(|n| (987_654_321 + n).to_string()).collect();
                format!("[{}]", ids.join(",")).into_bytes()
            }),
        ],
        "boolean" => vec![("a string", raw("\"yes\"")), ("a number", raw("1"))],
        _ => vec![("a number", raw("7")), ("a string", raw("\"x\""))],
    }
}

/// `{"name": raw, …}` from names and raw JSON values.
fn json_object(fields: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut object = b"{".to_vec();
    for (index, (name, value)) in fields.iter().enumerate() {
        if index > 0 {
            object.push(b',');
        }
        object.extend(json!(name).to_string().into_bytes());
        object.push(b':');
        object.extend_from_slice(value);
    }
    object.push(b'}');
    object
}

/// A `tools/call` of `tool` whose arguments are the raw bytes `arguments`.
fn tool_call(tool: &str, what: &str, arguments: &[u8]) -> Probe {
    let mut body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":{},"arguments":"#,
        json!(tool)
    )
    .into_bytes();
    body.extend_from_slice(arguments);
    body.extend_from_slice(b"}}");
    Probe {
        label: format!("mcp {tool}: {what}"),
        request: ProbeRequest::Mcp(body),
    }
}

fn broken_json_rpc() -> Vec<Probe> {
    let nested = "[".repeat(10_000) + &"]".repeat(10_000);
    let huge_method = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
        "x".repeat(MEGABYTE)
    );
    let probes: [(&str, Vec<u8>); 14] = [
        ("an empty body", Vec::new()),
        ("invalid JSON", b"{".to_vec()),
        ("invalid UTF-8", b"\xff\xfe{}".to_vec()),
        ("an empty batch", b"[]".to_vec()),
        ("no jsonrpc field", br#"{"id":1,"method":"tools/list"}"#.to_vec()),
        (
            "1e309 as id",
            br#"{"jsonrpc":"2.0","id":1e309,"method":"tools/list"}"#.to_vec(),
        ),
        (
            "an object as id",
            br#"{"jsonrpc":"2.0","id":{},"method":"tools/list"}"#.to_vec(),
        ),
        (
            "an unknown method",
            br#"{"jsonrpc":"2.0","id":1,"method":"no/such/method","params":{}}"#.to_vec(),
        ),
        (
            "params a string",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}"#.to_vec(),
        ),
        (
            "an unknown tool",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no.such.tool","arguments":{}}}"#.to_vec(),
        ),
        (
            "no tool name",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#.to_vec(),
        ),
        (
            "a NUL tool name",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0000","arguments":{}}}"#.to_vec(),
        ),
        ("arrays nested 10,000 deep", nested.into_bytes()),
        ("a 1 MB method name", huge_method.into_bytes()),
    ];
    probes
        .into_iter()
        .map(|(what, body)| Probe {
            label: format!("mcp: {what}"),
            request: ProbeRequest::Mcp(body),
        })
        .collect()
}

// --- Oversized bodies ---------------------------------------------------------------

/// The labels of the oversized-body probes start so.
const OVERSIZED: &str = "oversized: ";

/// Bodies past the limit (`STANDMEET_MAX_BODY_BYTES`, 2 MiB by default), 3 MB and
/// 20 MB, to a server function, the sign-in form and `/mcp`: each must be answered 413.
fn oversized_bodies() -> Vec<Probe> {
    let mut probes = Vec::new();
    for megabytes in [3, 20] {
        let filler = "x".repeat(megabytes * MEGABYTE);
        let label = |door: &str| format!("{OVERSIZED}{megabytes} MB to {door}");
        probes.push(Probe {
            label: label("corpus/create"),
            request: ProbeRequest::Post {
                endpoint: "corpus/create",
                content_type: FORM,
                body: form_body(&[
                    ("title", b"Oversized".as_slice()),
                    ("body", filler.as_bytes()),
                    ("visibility", b"public".as_slice()),
                ]),
            },
        });
        probes.push(Probe {
            label: label("/login"),
            request: ProbeRequest::Page {
                path: "/login",
                content_type: FORM,
                body: form_body(&[
                    ("email", b"probe@chaos.example.com".as_slice()),
                    ("password", filler.as_bytes()),
                ]),
            },
        });
        let call = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "corpus.create",
                "arguments": {"title": "Oversized", "body": filler, "visibility": "public"},
            },
        });
        probes.push(Probe {
            label: label("/mcp"),
            request: ProbeRequest::Mcp(call.to_string().into_bytes()),
        });
    }
    probes
}

// --- Nothing written ----------------------------------------------------------------

/// One table's row count and a digest of its rows.
struct Fingerprint {
    table: String,
    rows: i64,
    digest: String,
}

/// Every table in `public` but those in [`NOT_WRITTEN_BY_REQUESTS`].
async fn fingerprints(pool: &PgPool) -> anyhow::Result<Vec<Fingerprint>> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
         ORDER BY 1",
    )
    .fetch_all(pool)
    .await?;
    let mut prints = Vec::with_capacity(tables.len());
    for table in tables {
        if NOT_WRITTEN_BY_REQUESTS.contains(&table.as_str()) {
            continue;
        }
        let sql = format!(
            r#"SELECT count(*), coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '')
               FROM public."{}" AS t"#,
            table.replace('"', "\"\"")
        );
        let (rows, digest): (i64, String) = sqlx::query_as(&sql).fetch_one(pool).await?;
        prints.push(Fingerprint {
            table,
            rows,
            digest,
        });
    }
    Ok(prints)
}

/// The tables that differ, in words.
fn changed_tables(before: &[Fingerprint], after: &[Fingerprint]) -> Vec<String> {
    let mut changed = Vec::new();
    for now in after {
        match before.iter().find(|then| then.table == now.table) {
            None => changed.push(format!("{} (new)", now.table)),
            Some(then) if then.rows != now.rows => {
                changed.push(format!("{} ({} → {} rows)", now.table, then.rows, now.rows))
            }
            Some(then) if then.digest != now.digest => {
                changed.push(format!("{} (rows changed)", now.table))
            }
            Some(_) => {}
        }
    }
    changed
}
