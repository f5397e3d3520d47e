//! vault-hostile: a vault whose notes attack the server that reads them, with the
//! watcher on (docs/corpus.md).
//!
//! A `standmeet serve` child watches a vault of ordinary notes. Into it go an alias
//! bomb (nine levels of YAML aliases, a billion values from about 600 bytes), a note
//! nested 10,000 deep, a title with a YAML-escaped NUL, a FIFO named like a note, a
//! note whose private comment follows inline code, then a flood of 10,000 notes; last
//! the folder is emptied, as an unmounted sync folder looks. Promises:
//! - `/healthz` answers 200 throughout (polled every 200 ms);
//! - the server's peak resident memory stays under 256 MB above its idle size;
//! - every ordinary note (the flood's too) is indexed, and the first ones are found by a
//!   visitor's search; the comment is not;
//! - each hostile note is listed once in the rebuild's `failed`, with its reason; the
//!   FIFO is skipped (and no rebuild hangs on it);
//! - emptying the folder removes no entry and calls no hook: that rebuild fails, saying
//!   the vault holds no notes;
//! - no panic, and the server stops cleanly.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::http::ServerClient;
use super::process;
use super::{Lab, Outcome, first_few};
use standmeet_smtp_peer::SmtpPeer;

/// Ordinary notes written before the server starts.
const ORDINARY: usize = 200;
/// Notes written at once, after the hostile ones.
const FLOOD: usize = 10_000;
/// The most the server's resident memory may grow above idle.
const PEAK_ABOVE_IDLE_KIB: u64 = 256 * 1024;

/// The hostile notes that must be listed in `failed`, with words their reason holds.
const LISTED: [(&str, &str); 3] = [
    ("Alias bomb.md", "anchors or aliases"),
    ("Deep.md", "more than 32 deep"),
    ("Nul title.md", "control character U+0000"),
];

pub(crate) async fn run(lab: &Lab) -> anyhow::Result<Outcome> {
    let (url, pool) = lab.fresh_database("chaos_vault_hostile").await?;
    let sink = SmtpPeer::start().await?;
    let vault = lab.dir.join("vault-hostile");
    std::fs::create_dir_all(vault.join("ordinary"))?;
    for n in 0..ORDINARY {
        write(
            &vault,
            &format!("ordinary/Note {n}.md"),
            &format!(
                "---\npublish: true\n---\n# Ordinary {n}\n\nThe word ordinaryword{n} is here."
            ),
        )?;
    }
    let log = lab.log_path("vault-hostile-server.log");
    let mut server = process::start_server_with(
        &url,
        sink.port,
        &log,
        &[
            ("STANDMEET_VAULT", vault.display().to_string()),
            ("STANDMEET_VAULT_WATCH", "true".into()),
        ],
    )
    .await?;
    let client = ServerClient::sign_in(&server).await?;
    let pid = server.process.pid().context("the server has no pid")?;
    let settle = lab.sizes.settle_limit;
    // The ordinary vault first (the watcher saw nothing yet): the idle size is taken
    // with the corpus in place.
    let first = rebuild_now(&client).await?;
    wait_for(settle, || async { notes(&pool).await == ORDINARY as i64 }).await;
    let idle_kib =
        process::status_kib(pid, "VmRSS").context("cannot read the server's resident memory")?;

    let stop_polling = CancellationToken::new();
    let unhealthy = Arc::new(AtomicUsize::new(0));
    let polls = Arc::new(AtomicUsize::new(0));
    let poller = tokio::spawn(poll_health(
        client.clone(),
        stop_polling.clone(),
        unhealthy.clone(),
        polls.clone(),
    ));

    // The hostile notes, with the watcher on.
    let mut bomb = String::from("---\ntitle: Bomb\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..9 {
        let items = vec![format!("*a{}", level - 1); 10].join(", ");
        bomb.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    bomb.push_str("---\nBoom.");
    write(&vault, "Alias bomb.md", &bomb)?;
    write(
        &vault,
        "Deep.md",
        &format!(
            "---\nx: {}{}\n---\nDeep.",
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
    )?;
    write(&vault, "Nul title.md", "---\ntitle: \"a\\0b\"\n---\nText.")?;
    nix::unistd::mkfifo(&vault.join("Pipe.md"), nix::sys::stat::Mode::S_IRWXU)
        .context("cannot make the FIFO")?;
    write(
        &vault,
        "Comments.md",
        "---\npublish: true\n---\n# Printing\n\nUse `printf(\"%d%%\")` here. %%the vault password is swordfish%% Then go on.",
    )?;
    // Then the flood, as fast as the disk takes it.
    let flood_root = vault.clone();
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        std::fs::create_dir_all(flood_root.join("flood"))?;
        for n in 0..FLOOD {
            std::fs::write(
                flood_root.join(format!("flood/Wave {n}.md")),
                format!("---\npublish: true\n---\n# Wave {n}\n\nFlooded {n}."),
            )?;
        }
        Ok(())
    })
    .await??;
    let expected = (ORDINARY + 1 + FLOOD) as i64;
    let arrived = wait_for(settle, || async { notes(&pool).await == expected }).await;
    let indexed = wait_for(settle, || async { unindexed(&pool).await == 0 }).await;
    let listed = last_completed_failed(&pool, first).await;

    // Searchable: the ordinary notes by their word, the comment not at all.
    let mut not_found = Vec::new();
    for n in 0..ORDINARY {
        let word = format!("ordinaryword{n}");
        if !search_finds(&client, &word).await {
            not_found.push(word);
        }
    }
    let comment_found = search_finds(&client, "swordfish").await;

    // The unmount: the folder is there, empty.
    let hooks_before = rebuilt_events(&pool).await;
    let entries_before = notes(&pool).await;
    for entry in std::fs::read_dir(&vault)? {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    let unmount_refused = wait_for(settle, || async { refused_as_empty(&pool).await }).await;
    let entries_after = notes(&pool).await;
    let hooks_after = rebuilt_events(&pool).await;

    stop_polling.cancel();
    poller.await?;
    let peak_kib =
        process::status_kib(pid, "VmHWM").context("cannot read the server's peak memory")?;
    let alive = server.process.exited().is_none() && client.healthy().await;
    let stopped_cleanly = server
        .process
        .stop(Duration::from_secs(20))
        .await
        .is_some_and(|status| status.success());
    let panics = process::panics_in(&log);
    let (notes_at_end, unindexed_at_end) = (notes(&pool).await, unindexed(&pool).await);
    pool.close().await;

    let mut outcome = Outcome::default();
    let grew_mib = peak_kib.saturating_sub(idle_kib) / 1024;
    outcome.figure("notes", expected);
    outcome.figure("health_polls", polls.load(Ordering::Relaxed));
    outcome.figure("health_failed", unhealthy.load(Ordering::Relaxed));
    outcome.figure("idle_rss_mib", idle_kib / 1024);
    outcome.figure("peak_above_idle_mib", grew_mib);
    outcome.figure("removed_by_unmount", entries_before - entries_after);
    outcome.check(
        unhealthy.load(Ordering::Relaxed) == 0,
        format!(
            "/healthz failed {} of {} polls",
            unhealthy.load(Ordering::Relaxed),
            polls.load(Ordering::Relaxed)
        ),
    );
    outcome.check(
        peak_kib.saturating_sub(idle_kib) < PEAK_ABOVE_IDLE_KIB,
        format!("the peak resident memory grew {grew_mib} MiB above idle (at most 256)"),
    );
    outcome.check(
        arrived && indexed,
        format!(
            "not every ordinary note was imported and indexed in time: {notes_at_end} of {expected} notes before the unmount, {unindexed_at_end} entries unindexed at the end"
        ),
    );
    outcome.check(
        not_found.is_empty(),
        format!("a visitor's search did not find {}", first_few(&not_found)),
    );
    outcome.check(
        !comment_found,
        "a %%comment%% after inline code was found by search",
    );
    let mut listing_problems = Vec::new();
    for (path, words) in LISTED {
        let matching: Vec<&Value> = listed.iter().filter(|f| f["path"] == path).collect();
        match matching.as_slice() {
            [one] if one["error"].as_str().is_some_and(|e| e.contains(words)) => {}
            _ => listing_problems.push(format!("{path}: {matching:?}")),
        }
    }
    if listed.iter().any(|f| f["path"] == "Pipe.md") {
        listing_problems.push("the FIFO was read, not skipped".into());
    }
    outcome.check(
        listing_problems.is_empty(),
        format!(
            "hostile notes not listed once with their reason: {}",
            first_few(&listing_problems)
        ),
    );
    outcome.check(
        unmount_refused,
        "the rebuild of the emptied vault did not fail saying it holds no notes",
    );
    outcome.check(
        entries_after == entries_before,
        format!(
            "emptying the vault removed {} entries",
            entries_before - entries_after
        ),
    );
    outcome.check(
        hooks_after == hooks_before,
        "emptying the vault called the post-build hooks",
    );
    outcome.check(panics == 0, format!("{panics} panics in the server's log"));
    outcome.check(alive, "the server was not healthy at the end");
    outcome.check(
        stopped_cleanly,
        "the server did not stop cleanly on SIGTERM",
    );
    Ok(outcome)
}

/// Writes a note at `path` under `vault`, making its folders.
pub(crate) fn write(vault: &Path, path: &str, text: &str) -> std::io::Result<()> {
    let path = vault.join(path);
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::write(path, text)
}

/// "Rebuild from vault" through MCP; answers its job id.
async fn rebuild_now(client: &ServerClient) -> anyhow::Result<i64> {
    let answer = client
        .mcp_tool("corpus.rebuild", serde_json::json!({}))
        .await
        .context("corpus.rebuild did not answer")?;
    let body: Value = serde_json::from_str(&answer.body)
        .with_context(|| format!("corpus.rebuild answered {}", answer.body))?;
    body["result"]["structuredContent"]["job_id"]
        .as_i64()
        .with_context(|| format!("no job id in {}", answer.body))
}

/// Polls `/healthz` every 200 ms until `stop`, counting polls and failures.
async fn poll_health(
    client: ServerClient,
    stop: CancellationToken,
    unhealthy: Arc<AtomicUsize>,
    polls: Arc<AtomicUsize>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        polls.fetch_add(1, Ordering::Relaxed);
        let healthy = tokio::time::timeout(Duration::from_secs(5), client.healthy())
            .await
            .unwrap_or(false);
        if !healthy {
            unhealthy.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Waits until `done` says so, up to `limit`; answers whether it did.
pub(crate) async fn wait_for<F, Fut>(limit: Duration, done: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if done().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The entries made from the vault's notes.
pub(crate) async fn notes(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM corpus_vault_notes")
        .fetch_one(pool)
        .await
        .unwrap_or(-1)
}

async fn unindexed(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM corpus_entries e LEFT JOIN corpus_index i ON i.entry_id = e.id
         WHERE i.version IS DISTINCT FROM e.version",
    )
    .fetch_one(pool)
    .await
    .unwrap_or(-1)
}

async fn rebuilt_events(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'corpus.rebuilt'")
        .fetch_one(pool)
        .await
        .unwrap_or(-1)
}

/// The `failed` list of the newest completed rebuild after job `after`.
async fn last_completed_failed(pool: &PgPool, after: i64) -> Vec<Value> {
    let output: Option<Value> = sqlx::query_scalar(
        "SELECT output FROM jobs WHERE kind = 'corpus.vault_rebuild' AND state = 'completed'
         AND id > $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(after)
    .fetch_optional(pool)
    .await
    .ok()
    .flatten();
    output
        .and_then(|output| output["failed"].as_array().cloned())
        .unwrap_or_default()
}

/// Whether a rebuild ended refusing the vault as empty.
async fn refused_as_empty(pool: &PgPool) -> bool {
    sqlx::query_scalar::<_, bool>(
        "SELECT EXISTS (SELECT FROM jobs WHERE kind = 'corpus.vault_rebuild'
         AND state = 'discarded' AND errors::text LIKE '%holds no notes%')",
    )
    .fetch_one(pool)
    .await
    .unwrap_or(false)
}

/// Whether a visitor's search for `word` finds something.
async fn search_finds(client: &ServerClient, word: &str) -> bool {
    let answer = client
        .mcp_tool("corpus.search", serde_json::json!({ "q": word }))
        .await;
    let Ok(answer) = answer else { return false };
    let Ok(body) = serde_json::from_str::<Value>(&answer.body) else {
        return false;
    };
    body["result"]["structuredContent"]["results"]
        .as_array()
        .is_some_and(|hits| !hits.is_empty())
}
