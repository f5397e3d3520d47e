//! approvals: many approvals at once, over HTTP and MCP, through a mail server that
//! misbehaves; every visitor ends up with a code that works.
//!
//! A `standmeet serve` child mails through the fault-injecting [`SmtpPeer`] (a `451`
//! on the first try of one recipient in ten; the first try of one in fifty stored and
//! then cut off, so the mail arrives although the sender sees a failure). N access
//! requests are written straight into the database, then approved 64 at a time: every
//! other one through the server function (as the admin page does), the rest through
//! the MCP tool (as an agent does).
//!
//! Promises: no answer is a 5xx, every approval is taken; every approval mail job
//! finishes, completed; every request ends `replied`, and every replied request's
//! address got mail; every access code in any mail the sink stored redeems, including
//! the mail of a try the sender believed failed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::http::{Answer, ServerClient, form_body, mcp_succeeded};
use super::process;
use super::{Lab, Outcome, first_few, snippet};
use standmeet::domain::access_requests::code_matches;
use standmeet::types::EmailAddress;
use standmeet_smtp_peer::{SmtpPeer, access_codes_in};

/// Approvals in flight at once.
const CONCURRENT: usize = 64;

struct Approval {
    id: i64,
    via_mcp: bool,
    answer: Result<Answer, String>,
}

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let count = lab.sizes.access_requests;
    let (url, pool) = lab.fresh_database("chaos_approvals").await?;
    let sink = SmtpPeer::start().await?;
    sink.fault_first_tries();
    let log = lab.log_path("approvals-server.log");
    let mut server = process::start_server(&url, sink.port, &log).await?;
    // Written directly: no owner notification, so the sink sees approval mails only.
    let ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO access_requests (name, email, message)
         SELECT 'Chaos Visitor ' || n, 'visitor-' || n || '@chaos.example.com', 'Please let me in.'
         FROM generate_series(1, $1::int) AS n
         RETURNING id",
    )
    .bind(count as i32)
    .fetch_all(&pool)
    .await?;
    let client = ServerClient::sign_in(&server).await?;

    let began = Instant::now();
    let approvals = approve_all(&client, &ids).await?;
    let approving = began.elapsed();
    let mut accepted = 0;
    let mut server_errors = Vec::new();
    let mut unanswered = Vec::new();
    let mut refused = Vec::new();
    for approval in &approvals {
        let how = if approval.via_mcp { "MCP" } else { "HTTP" };
        match &approval.answer {
            Err(err) => unanswered.push(format!("request {} via {how}: {err}", approval.id)),
            Ok(answer) if answer.status >= 500 => server_errors.push(format!(
                "request {} via {how}: {} {}",
                approval.id,
                answer.status,
                snippet(&answer.body)
            )),
            Ok(answer) => {
                let taken = if approval.via_mcp {
                    mcp_succeeded(answer)
                } else {
                    answer.status == 200
                };
                if taken {
                    accepted += 1;
                } else {
                    refused.push(format!(
                        "request {} via {how}: {} {}",
                        approval.id,
                        answer.status,
                        snippet(&answer.body)
                    ));
                }
            }
        }
    }

    let mail_jobs: Vec<i64> =
        sqlx::query_scalar("SELECT mail_job_id FROM access_requests WHERE mail_job_id IS NOT NULL")
            .fetch_all(&pool)
            .await?;
    let settled = super::wait_until_finished(&pool, &mail_jobs, lab.sizes.settle_limit).await;
    let mail_jobs_completed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'completed'")
            .bind(&mail_jobs[..])
            .fetch_one(&pool)
            .await?;

    // Who got what: the requests' ends against the sink's mails.
    let requests: Vec<(String, String)> =
        sqlx::query_as("SELECT lower(email), status::text FROM access_requests")
            .fetch_all(&pool)
            .await?;
    let mails = sink.received();
    let mut mails_per_address: HashMap<String, usize> = HashMap::new();
    for mail in &mails {
        for recipient in &mail.to {
            *mails_per_address
                .entry(recipient.to_ascii_lowercase())
                .or_default() += 1;
        }
    }
    let replied: Vec<&String> = requests
        .iter()
        .filter(|(_, status)| status == "replied")
        .map(|(email, _)| email)
        .collect();
    let replied_without_mail: Vec<&String> = replied
        .iter()
        .copied()
        .filter(|email| !mails_per_address.contains_key(*email))
        .collect();
    let mailed_twice = mails_per_address.values().filter(|n| **n > 1).count();

    // Every code any mail carried must redeem for its recipient.
    let mut codes_total = 0;
    let mut codes_redeeming = 0;
    let mut dead_codes = Vec::new();
    let mut mails_without_code = 0;
    for mail in &mails {
        let codes = access_codes_in(&mail.text());
        if codes.is_empty() {
            mails_without_code += 1;
        }
        for recipient in &mail.to {
            let Ok(email) = EmailAddress::parse(recipient) else {
                dead_codes.push(format!("a mail to the unreadable address {recipient:?}"));
                continue;
            };
            for code in &codes {
                codes_total += 1;
                if code_matches(&pool, &email, code).await? {
                    codes_redeeming += 1;
                } else {
                    dead_codes.push(format!("{code} mailed to {recipient}"));
                }
            }
        }
    }

    let server_kept_running = server.process.exited().is_none();
    let stopped_cleanly = server
        .process
        .stop(Duration::from_secs(20))
        .await
        .is_some_and(|status| status.success());
    let panics = process::panics_in(&log);
    pool.close().await;

    let mut outcome = Outcome::default();
    outcome.figure("requests", ids.len());
    outcome.figure("via_http", approvals.iter().filter(|a| !a.via_mcp).count());
    outcome.figure("via_mcp", approvals.iter().filter(|a| a.via_mcp).count());
    outcome.figure("accepted", accepted);
    outcome.figure("answers_5xx", server_errors.len());
    outcome.figure("no_answer", unanswered.len());
    outcome.figure("refused", refused.len());
    outcome.figure("approve_s", (approving.as_secs_f64() * 10.0).round() / 10.0);
    outcome.figure("mails_in_sink", mails.len());
    outcome.figure("sink_451s", sink.refused());
    outcome.figure("sink_cut_after_storing", sink.dropped_after_storing());
    outcome.figure("mailed_twice", mailed_twice);
    outcome.figure("mail_jobs_completed", mail_jobs_completed);
    outcome.figure("replied", replied.len());
    outcome.figure("codes_redeeming", codes_redeeming);
    outcome.figure("codes_total", codes_total);
    outcome.figure("mails_without_code", mails_without_code);
    outcome.figure("panics", panics);

    outcome.check(
        server_errors.is_empty(),
        format!(
            "{} answers were 5xx: {}",
            server_errors.len(),
            first_few(&server_errors)
        ),
    );
    outcome.check(
        unanswered.is_empty(),
        format!(
            "{} approvals got no answer: {}",
            unanswered.len(),
            first_few(&unanswered)
        ),
    );
    outcome.check(
        refused.is_empty(),
        format!(
            "{} approvals were refused: {}",
            refused.len(),
            first_few(&refused)
        ),
    );
    outcome.check(
        settled,
        format!(
            "approval mail jobs were still unfinished after {} s",
            lab.sizes.settle_limit.as_secs()
        ),
    );
    outcome.check(
        mail_jobs.len() == ids.len() && mail_jobs_completed as usize == mail_jobs.len(),
        format!(
            "{mail_jobs_completed} of {} approval mail jobs completed",
            ids.len()
        ),
    );
    outcome.check(
        replied.len() == ids.len(),
        format!(
            "only {} of {} requests were replied",
            replied.len(),
            ids.len()
        ),
    );
    outcome.check(
        replied_without_mail.is_empty(),
        format!(
            "{} replied requests got no mail, such as {:?}",
            replied_without_mail.len(),
            replied_without_mail.iter().take(5).collect::<Vec<_>>()
        ),
    );
    outcome.check(
        dead_codes.is_empty(),
        format!(
            "{} of {codes_total} mailed codes do not redeem: {}",
            dead_codes.len(),
            first_few(&dead_codes)
        ),
    );
    outcome.check(
        mails_without_code == 0,
        format!("{mails_without_code} mails carry no access code the sink could read"),
    );
    outcome.check(server_kept_running, "the server died during the run");
    outcome.check(
        stopped_cleanly,
        "the server did not stop cleanly on SIGTERM",
    );
    outcome.check(panics == 0, format!("{panics} panics in the server's log"));
    Ok(outcome)
}

/// Approves every request, `CONCURRENT` at a time: even ones through the server
/// function, odd ones through MCP.
async fn approve_all(client: &ServerClient, ids: &[i64]) -> anyhow::Result<Vec<Approval>> {
    let slots = Arc::new(Semaphore::new(CONCURRENT));
    let mut tasks = JoinSet::new();
    for (n, &id) in ids.iter().enumerate() {
        let client = client.clone();
        let slots = slots.clone();
        let via_mcp = n % 2 == 1;
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await;
            let answer = if via_mcp {
                client
                    .mcp_tool("access_requests.approve", json!({ "id": id }))
                    .await
            } else {
                let form = form_body(&[("id", id.to_string().as_bytes())]);
                client
                    .server_fn(
                        Method::POST,
                        "access_requests/approve",
                        Some(("application/x-www-form-urlencoded", form)),
                    )
                    .await
            };
            Approval {
                id,
                via_mcp,
                answer: answer.map_err(|err| err.to_string()),
            }
        });
    }
    let mut approvals = Vec::with_capacity(ids.len());
    while let Some(done) = tasks.join_next().await {
        approvals.push(done?);
    }
    Ok(approvals)
}
