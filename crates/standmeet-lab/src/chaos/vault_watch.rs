//! vault-watch: the vault's folder misbehaves under the watcher (docs/reference/README.md#promises,
//! "The vault").
//!
//! A `standmeet serve` child watches a vault folder that is not there at start (a mount
//! that comes up later). The server runs in a user namespace of its own whose limit of
//! inotify watches is [`WATCH_LIMIT`] (`/proc/sys/user/max_inotify_watches` belongs to
//! the namespace: the machine's own limit is untouched). The folder then comes with
//! more folders than that and a link to `/`, shrinks to fit, is moved away as an
//! unmount does and comes back. Promises:
//! - one process throughout: the watcher never stops or restarts the server;
//! - `/readyz` answers 200 at every poll (every 100 ms), saying `"vault": "waiting"`
//!   while the folder cannot be watched and `"watching"` once it can;
//! - past the limit it waits and its log names the kernel's limit; once the vault fits,
//!   it watches, and what arrived meanwhile is rebuilt;
//! - nothing behind the link is read;
//! - a note written while watched is imported;
//! - every job ends, and the server stops cleanly without a panic.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::vault_hostile::{notes, wait_for, write};
use super::{Lab, Outcome, process};
use standmeet_smtp_peer::SmtpPeer;

/// The inotify watches the server's user namespace allows.
const WATCH_LIMIT: usize = 8;
/// The folders the vault arrives with: more than the limit.
const FOLDERS: usize = 20;
/// The folders it keeps: within the limit (with the vault's own folder).
const FOLDERS_KEPT: usize = 3;

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let (url, pool) = lab.fresh_database("chaos_vault_watch").await?;
    let sink = SmtpPeer::start().await?;
    let vault = lab.dir.join("vault-watch");
    let log = lab.log_path("vault-watch-server.log");
    let wrapper: Vec<String> = vec![
        "unshare".into(),
        "--user".into(),
        "--map-root-user".into(),
        "sh".into(),
        "-c".into(),
        format!("echo {WATCH_LIMIT} > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\""),
    ];
    let mut server = process::start_server_wrapped(
        &url,
        sink.port,
        &log,
        &[
            ("STANDMEET_VAULT", vault.display().to_string()),
            ("STANDMEET_VAULT_WATCH", "true".into()),
        ],
        &wrapper,
    )
    .await?;
    let pid = server.process.pid().context("the server has no pid")?;
    let readiness = Readiness::start(&server.base_url);
    let mut outcome = Outcome::default();

    // Not there at start: waiting, ready all the same.
    let waited_at_start = readiness.until("waiting", Duration::from_secs(20)).await;
    outcome.check(
        waited_at_start,
        "/readyz did not say the watcher waits for a vault that is not there",
    );

    // It comes (all at once, as a mount does), with more folders than the process may
    // watch and a link to /.
    let staging = lab.dir.join("vault-watch.staging");
    for n in 0..FOLDERS {
        write(
            &staging,
            &format!("folder-{n}/Note {n}.md"),
            &format!("# Note {n}\n\nIn folder {n}."),
        )?;
    }
    write(&staging, "Home.md", "# Home\n\nThe vault came up.")?;
    std::os::unix::fs::symlink("/", staging.join("everything"))?;
    std::fs::rename(&staging, &vault)?;
    let limit_said = wait_for(Duration::from_secs(60), || async {
        std::fs::read_to_string(&log).is_ok_and(|text| text.contains("limit of inotify watches"))
    })
    .await;
    outcome.check(
        limit_said,
        "the log did not say the kernel's limit of watches was reached",
    );
    let waiting_past_limit = readiness.until("waiting", Duration::from_secs(10)).await;
    outcome.check(
        waiting_past_limit,
        format!(
            "past the limit the watcher says {:?}, not waiting",
            readiness.now()
        ),
    );

    // It shrinks to fit: watched, and rebuilt with what arrived meanwhile.
    for n in FOLDERS_KEPT..FOLDERS {
        std::fs::remove_dir_all(vault.join(format!("folder-{n}")))?;
    }
    let fitted = Instant::now();
    let watching = readiness.until("watching", Duration::from_secs(90)).await;
    let to_watch = fitted.elapsed();
    outcome.check(
        watching,
        "the watcher did not watch once the vault fit the limit",
    );
    let expected = FOLDERS_KEPT as i64 + 1;
    let rebuilt = wait_for(lab.sizes.settle_limit, || async {
        notes(&pool).await == expected
    })
    .await;
    outcome.check(
        rebuilt,
        format!(
            "the vault's {expected} notes were not rebuilt once watched ({} are)",
            notes(&pool).await
        ),
    );
    let behind_the_link: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM corpus_vault_notes WHERE path LIKE 'everything/%'",
    )
    .fetch_one(&pool)
    .await?;
    outcome.check(behind_the_link == 0, "a note behind the link to / was read");

    // A note written while watched arrives.
    write(
        &vault,
        "folder-0/Later.md",
        "# Later\n\nWritten while watched.",
    )?;
    let followed = wait_for(Duration::from_secs(30), || async {
        notes(&pool).await == expected + 1
    })
    .await;
    outcome.check(followed, "a note written while watched was not imported");

    // An unmount (the folder moved away), and the mount coming back.
    let away = lab.dir.join("vault-watch.unmounted");
    std::fs::rename(&vault, &away)?;
    let lost = readiness.until("waiting", Duration::from_secs(30)).await;
    std::fs::rename(&away, &vault)?;
    let back = readiness.until("watching", Duration::from_secs(90)).await;
    outcome.check(
        lost && back,
        "the watcher did not wait for an unmounted vault and watch it again once back",
    );

    // Every job ends.
    let settled = wait_for(lab.sizes.settle_limit, || async {
        unfinished_jobs(&pool).await == 0
    })
    .await;
    let (polls, failed) = readiness.stop().await;
    let same_process = server.process.exited().is_none() && server.process.pid() == Some(pid);
    let stopped_cleanly = server
        .process
        .stop(Duration::from_secs(20))
        .await
        .is_some_and(|status| status.success());
    let panics = process::panics_in(&log);
    let unfinished = unfinished_jobs(&pool).await;
    pool.close().await;

    outcome.figure("watch_limit", WATCH_LIMIT);
    outcome.figure("folders", FOLDERS);
    outcome.figure("readyz_polls", polls);
    outcome.figure("readyz_failed", failed);
    outcome.figure(
        "watching_after_fit_s",
        (to_watch.as_secs_f64() * 10.0).round() / 10.0,
    );
    outcome.check(
        polls > 0 && failed == 0,
        format!("/readyz failed {failed} of {polls} polls"),
    );
    outcome.check(same_process, "the server exited or was restarted");
    outcome.check(settled, format!("{unfinished} jobs did not finish"));
    outcome.check(panics == 0, format!("{panics} panics in the server's log"));
    outcome.check(
        stopped_cleanly,
        "the server did not stop cleanly on SIGTERM",
    );
    Ok(outcome)
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

/// `/readyz` polled every 100 ms: how many polls, how many not 200, and the vault's
/// state the last one said.
struct Readiness {
    stop: CancellationToken,
    seen: Arc<Mutex<(usize, usize, String)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Readiness {
    fn start(base_url: &str) -> Readiness {
        let stop = CancellationToken::new();
        let seen = Arc::new(Mutex::new((0, 0, String::new())));
        let url = format!("{base_url}/readyz");
        let task = tokio::spawn({
            let (stop, seen) = (stop.clone(), seen.clone());
            async move {
                let client = reqwest::Client::builder()
                    .no_proxy()
                    .timeout(Duration::from_secs(2))
                    .build()
                    .expect("a client");
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tick.tick() => {}
                    }
                    let answer = match client.get(&url).send().await {
                        Ok(reply) if reply.status() == reqwest::StatusCode::OK => reply
                            .json::<serde_json::Value>()
                            .await
                            .ok()
                            .and_then(|health| health["vault"].as_str().map(str::to_string)),
                        _ => None,
                    };
                    let mut seen = seen.lock().expect("not poisoned");
                    seen.0 += 1;
                    match answer {
                        Some(vault) => seen.2 = vault,
                        None => seen.1 += 1,
                    }
                }
            }
        });
        Readiness { stop, seen, task }
    }

    fn now(&self) -> String {
        self.seen.lock().expect("not poisoned").2.clone()
    }

    async fn until(&self, state: &str, limit: Duration) -> bool {
        wait_for(limit, || async { self.now() == state }).await
    }

    /// Stops polling; answers (polls, failed).
    async fn stop(self) -> (usize, usize) {
        self.stop.cancel();
        let _ = self.task.await;
        let seen = self.seen.lock().expect("not poisoned");
        (seen.0, seen.1)
    }
}
