//! rolling-restart: two copies behind nginx, each restarted in turn under load
//! (docs/reference/README.md#promises).
//!
//! nginx (Debian's package; `scripts/setup --lab` installs it) runs with
//! `deploy/nginx/standmeet.conf`, the file docs/operating.md shows, changed only where
//! the docs say to: the copies' addresses, the ports it listens on (loopback ones here)
//! and the certificate (a self-signed one made for the run). The copies are started as
//! the docs' settings say behind a proxy on the same host (`STANDMEET_PUBLIC_URL` the
//! https address, `STANDMEET_TRUSTED_PROXIES=127.0.0.1`).
//!
//! Through nginx, all the time: visitors (each from a loopback address of its own, as
//! the rate limits count addresses) load `/` and a search and send the request-access
//! form; agents list tasks over MCP and approve the requests, each approval waiting for
//! its mail (answered, or a receipt). Meanwhile each copy in turn is restarted as the
//! docs' upgrade steps do it: SIGTERM, start, `/readyz`, then 7 s, until the proxy
//! tries the copy again (its `fail_timeout`, 5 s in whole seconds), before the next.
//! Promises:
//! - 0 failed requests: every answer through nginx is what the request asked for (no
//!   5xx, no reset);
//! - 0 lost jobs: every request the form acknowledged is there, every job ends, and
//!   every approval's mail is sent;
//! - every wait answered: each approval answers, done or with a receipt.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::{Lab, Outcome, first_few, process, snippet};
use standmeet::db::private_cluster::free_loopback_port;
use standmeet_smtp_peer::SmtpPeer;

/// The site's name, as the nginx file and the certificate have it.
const HOST: &str = "desk.example.com";
/// The nginx file docs/operating.md shows.
const NGINX_FILE: &str = include_str!("../../../../deploy/nginx/standmeet.conf");
/// Visitors at once, and agents at once.
const VISITORS: usize = 4;
const AGENTS: usize = 2;
/// How long the docs' upgrade waits once a restarted copy is ready before it stops
/// the next: nginx leaves a copy that refused a connection alone for `fail_timeout`
/// (5 s in the nginx file) counted in whole seconds of its clock, so for up to 6 s.
/// Waiting only 5 s stopped the second copy while nginx still held the first one down:
/// every request in that second was a 502 ("no live upstreams").
const UNTIL_THE_PROXY_TRIES_IT_AGAIN: Duration = Duration::from_secs(7);

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .context(
            "nginx is not installed (Debian's nginx-light; scripts/setup --lab installs it)",
        )?;
    let (url, pool) = lab.fresh_database("chaos_rolling_restart").await?;
    let sink = SmtpPeer::start().await?;
    let tls_port = free_loopback_port()?;
    let plain_port = free_loopback_port()?;
    let settings = [
        ("STANDMEET_PUBLIC_URL", format!("https://{HOST}:{tls_port}")),
        ("STANDMEET_TRUSTED_PROXIES", "127.0.0.1".to_string()),
    ];
    let mut copies = vec![
        process::start_server_with(&url, sink.port, &lab.log_path("rolling-a.log"), &settings)
            .await?,
    ];
    let second = process::start_another_copy_with(
        &copies[0],
        &url,
        sink.port,
        &lab.log_path("rolling-b.log"),
        &settings,
    )
    .await?;
    copies.push(second);
    let front = Nginx::start(
        &nginx,
        &lab.dir.join("nginx"),
        [copies[0].address(), copies[1].address()],
        tls_port,
        plain_port,
    )
    .await?;

    let tally = Arc::new(Tally::default());
    let stop = CancellationToken::new();
    let mut load = Vec::new();
    for visitor in 0..VISITORS {
        load.push(tokio::spawn(visit(
            visitor,
            tls_port,
            tally.clone(),
            stop.clone(),
        )));
    }
    let token = copies[0].mcp_token.clone();
    let taken = Arc::new(Mutex::new(HashSet::new()));
    for _ in 0..AGENTS {
        load.push(tokio::spawn(act(
            tls_port,
            token.clone(),
            pool.clone(),
            taken.clone(),
            tally.clone(),
            stop.clone(),
        )));
    }

    // Load before, between and after the restarts, as the docs' steps go.
    let mut outcome = Outcome::default();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut restarts = Vec::new();
    for copy in copies.iter_mut() {
        let began = Instant::now();
        let stopped = copy.restart(Duration::from_secs(30)).await?;
        let ready = until_ready(&copy.base_url).await;
        restarts.push(began.elapsed());
        outcome.check(
            stopped.is_some_and(|status| status.success()),
            format!("{} did not stop cleanly on SIGTERM", copy.address()),
        );
        outcome.check(
            ready,
            format!("{} was not ready after its restart", copy.address()),
        );
        tokio::time::sleep(UNTIL_THE_PROXY_TRIES_IT_AGAIN).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    for task in load {
        task.await?;
    }

    // Nothing lost: every acknowledged request is there, every job ends, every
    // approval's mail went out.
    let acknowledged: Vec<String> = tally.acknowledged.lock().expect("not poisoned").clone();
    let present: HashSet<String> =
        sqlx::query_scalar::<_, String>("SELECT lower(email) FROM access_requests")
            .fetch_all(&pool)
            .await?
            .into_iter()
            .collect();
    let missing: Vec<String> = acknowledged
        .iter()
        .filter(|email| !present.contains(&email.to_lowercase()))
        .cloned()
        .collect();
    let settled = super::vault_hostile::wait_for(lab.sizes.settle_limit, || async {
        unfinished_jobs(&pool).await == 0
    })
    .await;
    let not_completed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE state <> 'completed' AND kind NOT LIKE 'system.%'",
    )
    .fetch_one(&pool)
    .await?;
    let approved_without_mail: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM access_requests r LEFT JOIN jobs j ON j.id = r.mail_job_id \
         WHERE r.status <> 'pending' AND (j.id IS NULL OR j.state <> 'completed') \
         AND r.mail_job_id IS NOT NULL",
    )
    .fetch_one(&pool)
    .await?;
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&pool)
        .await?;

    front.stop().await;
    let mut panics = 0;
    for copy in copies.iter_mut() {
        let status = copy.process.stop(Duration::from_secs(30)).await;
        outcome.check(
            status.is_some_and(|status| status.success()),
            format!("{} did not stop cleanly at the end", copy.address()),
        );
        panics += process::panics_in(&copy.process.log);
    }
    pool.close().await;

    let failed = tally.failed.lock().expect("not poisoned").clone();
    let sent = tally.sent.load(Ordering::Relaxed);
    let waits = tally.waits_answered.load(Ordering::Relaxed);
    let receipts = tally.receipts.load(Ordering::Relaxed);
    outcome.figure("requests_sent", sent);
    outcome.figure("requests_failed", failed.len());
    outcome.figure("forms_acknowledged", acknowledged.len());
    outcome.figure("jobs", jobs);
    outcome.figure("jobs_lost", missing.len() as i64 + not_completed);
    outcome.figure("waits_answered", waits);
    outcome.figure("waits_receipts", receipts);
    outcome.figure(
        "restart_s",
        restarts
            .iter()
            .map(|took| format!("{:.1}", took.as_secs_f64()))
            .collect::<Vec<_>>()
            .join("/"),
    );
    outcome.check(
        failed.is_empty(),
        format!(
            "{} of {sent} requests failed: {}",
            failed.len(),
            first_few(&failed)
        ),
    );
    outcome.check(
        missing.is_empty(),
        format!(
            "{} acknowledged access requests are missing: {}",
            missing.len(),
            first_few(&missing)
        ),
    );
    outcome.check(settled, "jobs did not finish");
    outcome.check(
        not_completed == 0,
        format!("{not_completed} jobs ended otherwise than completed"),
    );
    outcome.check(
        approved_without_mail == 0,
        format!("{approved_without_mail} approvals' mails did not go out"),
    );
    outcome.check(
        waits > 0 && sent > 0,
        "the load never got through (no wait answered)",
    );
    outcome.check(panics == 0, format!("{panics} panics in the copies' logs"));
    Ok(outcome)
}

/// What the load saw.
#[derive(Default)]
struct Tally {
    sent: AtomicUsize,
    /// Each failure: what was asked, and what came back.
    failed: Mutex<Vec<String>>,
    /// The emails of access requests the form acknowledged.
    acknowledged: Mutex<Vec<String>>,
    /// Approvals answered (done or with a receipt), and of those the receipts.
    waits_answered: AtomicUsize,
    receipts: AtomicUsize,
}

impl Tally {
    /// Counts one request; a failure when it did not answer, or answered otherwise than
    /// `wanted` says.
    fn count(
        &self,
        what: &str,
        answer: &Result<(u16, String), reqwest::Error>,
        wanted: impl Fn(u16) -> bool,
    ) -> bool {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let problem = match answer {
            Ok((status, _)) if wanted(*status) => return true,
            Ok((status, body)) => format!("{what}: {status} {}", snippet(body)),
            Err(err) => format!("{what}: {err:#}"),
        };
        self.failed.lock().expect("not poisoned").push(problem);
        false
    }
}

/// A client of the site through nginx, from `from`, taking the run's certificate.
fn client(tls_port: u16, from: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .danger_accept_invalid_certs(true)
        .resolve(HOST, SocketAddr::from(([127, 0, 0, 1], tls_port)))
        .local_address(from)
        .timeout(Duration::from_secs(40))
        .build()
        .expect("a client")
}

async fn send(request: reqwest::RequestBuilder) -> Result<(u16, String), reqwest::Error> {
    let reply = request.send().await?;
    let status = reply.status().as_u16();
    Ok((status, reply.text().await?))
}

/// Visitor `n` until `stop`: each visit from a loopback address of its own (the access
/// requests' limit counts five an hour per address), the front page, a search and the
/// request-access form.
async fn visit(n: usize, tls_port: u16, tally: Arc<Tally>, stop: CancellationToken) {
    let base = format!("https://{HOST}:{tls_port}");
    let mut visit = 0usize;
    while !stop.is_cancelled() {
        let serial = n * 100_000 + visit;
        let from = IpAddr::V4(Ipv4Addr::new(
            127,
            1 + (serial / 62_500) as u8,
            ((serial / 250) % 250) as u8,
            (serial % 250) as u8 + 1,
        ));
        let http = client(tls_port, from);
        let page = send(http.get(format!("{base}/"))).await;
        tally.count("GET /", &page, |status| status == 200);
        let search = send(http.get(format!("{base}/search?q=harbour"))).await;
        tally.count("GET /search", &search, |status| status == 200);
        let email = format!("visitor-{serial}@chaos.example.com");
        let form = send(
            http.post(format!("{base}/api/request_access"))
                .header("accept", "application/json")
                .header("sec-fetch-site", "same-origin")
                .form(&[
                    ("name", format!("Visitor {serial}")),
                    ("email", email.clone()),
                    ("message", "Passing through during a restart.".into()),
                ]),
        )
        .await;
        if tally.count("POST /api/request_access", &form, |status| status == 200) {
            tally.acknowledged.lock().expect("not poisoned").push(email);
        }
        visit += 1;
    }
}

/// An agent until `stop`: lists tasks, and approves the oldest request nobody took yet,
/// waiting for its mail.
async fn act(
    tls_port: u16,
    token: String,
    pool: PgPool,
    taken: Arc<Mutex<HashSet<i64>>>,
    tally: Arc<Tally>,
    stop: CancellationToken,
) {
    let http = client(tls_port, IpAddr::V4(Ipv4Addr::LOCALHOST));
    let mcp = format!("https://{HOST}:{tls_port}/mcp");
    let call = |tool: &str, arguments: Value| {
        http.post(&mcp)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": { "name": tool, "arguments": arguments },
            }))
    };
    let succeeded = |answer: &Result<(u16, String), reqwest::Error>| -> Option<Value> {
        let (_, body) = answer.as_ref().ok()?;
        let body: Value = serde_json::from_str(body).ok()?;
        (body["result"]["isError"] != json!(true))
            .then(|| body["result"]["structuredContent"].clone())
    };
    while !stop.is_cancelled() {
        let listed = send(call("tasks.list", json!({ "limit": 5 }))).await;
        if tally.count("MCP tasks.list", &listed, |status| status == 200)
            && succeeded(&listed).is_none()
        {
            tally.failed.lock().expect("not poisoned").push(format!(
                "MCP tasks.list: {}",
                listed
                    .as_ref()
                    .map(|(_, body)| snippet(body))
                    .unwrap_or_default()
            ));
        }
        // The oldest pending request no agent took yet, as two admins would not click
        // the same row.
        let pending: Option<i64> = {
            let skip: Vec<i64> = taken
                .lock()
                .expect("not poisoned")
                .iter()
                .copied()
                .collect();
            sqlx::query_scalar(
                "SELECT id FROM access_requests WHERE status = 'pending' AND id <> ALL($1) ORDER BY id LIMIT 1",
            )
            .bind(&skip)
            .fetch_optional(&pool)
            .await
            .ok()
            .flatten()
        };
        let Some(id) = pending.filter(|id| taken.lock().expect("not poisoned").insert(*id)) else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let approved = send(call("access_requests.approve", json!({ "id": id }))).await;
        if tally.count("MCP access_requests.approve", &approved, |status| {
            status == 200
        }) {
            match succeeded(&approved) {
                Some(answer) => {
                    tally.waits_answered.fetch_add(1, Ordering::Relaxed);
                    if answer["pending"] == json!(true) {
                        tally.receipts.fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => tally.failed.lock().expect("not poisoned").push(format!(
                    "MCP access_requests.approve {id}: {}",
                    approved
                        .as_ref()
                        .map(|(_, body)| snippet(body))
                        .unwrap_or_default()
                )),
            }
        }
    }
}

async fn unfinished_jobs(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE state IN ('available', 'running', 'retryable') \
         OR (state = 'scheduled' AND scheduled_at < now() + interval '1 minute')",
    )
    .fetch_one(pool)
    .await
    .unwrap_or(-1)
}

/// Waits (up to 60 s) for `/readyz` to answer 200.
async fn until_ready(base_url: &str) -> bool {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("a client");
    super::vault_hostile::wait_for(Duration::from_secs(60), || async {
        matches!(
            client.get(format!("{base_url}/readyz")).send().await,
            Ok(reply) if reply.status() == reqwest::StatusCode::OK
        )
    })
    .await
}

/// nginx in front, its files in a folder of the run.
struct Nginx {
    child: Child,
}

impl Nginx {
    /// Writes its configuration (the docs' file, changed where the docs say to) and a
    /// self-signed certificate for [`HOST`], and starts it; answers once it listens.
    async fn start(
        nginx: &Path,
        dir: &Path,
        copies: [&str; 2],
        tls_port: u16,
        plain_port: u16,
    ) -> anyhow::Result<Nginx> {
        std::fs::create_dir_all(dir.join("temp"))?;
        let made = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .arg("-subj")
            .arg(format!("/CN={HOST}"))
            .arg("-keyout")
            .arg(dir.join("key.pem"))
            .arg("-out")
            .arg(dir.join("cert.pem"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await
            .context("cannot run openssl")?;
        if !made.success() {
            bail!("openssl could not make a certificate");
        }
        let site = docs_file_for(
            copies,
            tls_port,
            plain_port,
            &dir.join("cert.pem"),
            &dir.join("key.pem"),
        )?;
        std::fs::write(dir.join("standmeet.conf"), site)?;
        let temp = dir.join("temp");
        let main = format!(
            "user root;\nworker_processes 1;\npid {pid};\nerror_log {errors} warn;\nevents {{ worker_connections 1024; }}\nhttp {{\n    access_log {access};\n    client_body_temp_path {temp}/body;\n    proxy_temp_path {temp}/proxy;\n    fastcgi_temp_path {temp}/fastcgi;\n    uwsgi_temp_path {temp}/uwsgi;\n    scgi_temp_path {temp}/scgi;\n    include {site};\n}}\n",
            pid = dir.join("nginx.pid").display(),
            errors = dir.join("error.log").display(),
            access = dir.join("access.log").display(),
            temp = temp.display(),
            site = dir.join("standmeet.conf").display(),
        );
        std::fs::write(dir.join("nginx.conf"), main)?;
        let checked = Command::new(nginx)
            .arg("-t")
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .output()
            .await?;
        if !checked.status.success() {
            bail!(
                "nginx refuses the configuration: {}",
                String::from_utf8_lossy(&checked.stderr)
            );
        }
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start nginx")?;
        let listening = super::vault_hostile::wait_for(Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", tls_port))
                .await
                .is_ok()
        })
        .await;
        if !listening {
            bail!("nginx did not listen on 127.0.0.1:{tls_port}");
        }
        Ok(Nginx { child })
    }

    /// Stops it gracefully (SIGQUIT).
    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGQUIT,
            );
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// The docs' nginx file with the run's copies, loopback ports and certificate: each
/// change must find what it changes, so a changed file fails here in words.
fn docs_file_for(
    copies: [&str; 2],
    tls_port: u16,
    plain_port: u16,
    cert: &Path,
    key: &Path,
) -> anyhow::Result<String> {
    let changes = [
        ("server 127.0.0.1:3000 ", format!("server {} ", copies[0])),
        ("server 10.0.0.12:3000 ", format!("server {} ", copies[1])),
        ("listen 80;", format!("listen 127.0.0.1:{plain_port};")),
        (
            "listen 443 ssl;",
            format!("listen 127.0.0.1:{tls_port} ssl;"),
        ),
        (
            "/etc/letsencrypt/live/desk.example.com/fullchain.pem",
            cert.display().to_string(),
        ),
        (
            "/etc/letsencrypt/live/desk.example.com/privkey.pem",
            key.display().to_string(),
        ),
    ];
    let mut file = NGINX_FILE.to_string();
    for (from, to) in changes {
        if !file.contains(from) {
            bail!("deploy/nginx/standmeet.conf has no {from:?} to change for the run");
        }
        file = file.replace(from, &to);
    }
    Ok(file)
}
