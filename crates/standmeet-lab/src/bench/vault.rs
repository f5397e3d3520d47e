//! The corpus from a vault of 10,000 notes (`--quick`: 500) of about 2 KB each, with
//! links between them, on the engine as `standmeet serve` runs it (the `index` queue):
//! - the first rebuild, until every index job it queued is done (target ≤ 30 s);
//! - a rebuild that finds nothing changed (target ≤ 1 s);
//! - with the watcher on, one note written until a search finds its new word
//!   (target ≤ 2 s).
//!
//! Printed, not asserted. The notes are made with a seeded generator, so every run
//! reads the same vault.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use sqlx::PgPool;

use super::ms;
use standmeet::config::Settings;
use standmeet::domain::corpus::{self, IndexBatch, IndexEntry, vault};
use standmeet_jobs::{JobClient, JobRuntime, JobState, Registry};

const WORDS: [&str; 32] = [
    "harbour",
    "lantern",
    "tide",
    "gull",
    "rope",
    "anchor",
    "ferry",
    "market",
    "bread",
    "salt",
    "lighthouse",
    "storm",
    "pier",
    "net",
    "sail",
    "island",
    "keel",
    "mast",
    "dock",
    "fog",
    "reef",
    "shell",
    "cove",
    "wharf",
    "buoy",
    "crab",
    "oar",
    "hull",
    "deck",
    "wave",
    "cliff",
    "dune",
];

/// Writes `count` notes of about 2 KB under `root`, each linking to three others.
fn write_vault(root: &Path, count: usize) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(7);
    for n in 0..count {
        let folder = root.join(format!("folder-{:02}", n % 50));
        std::fs::create_dir_all(&folder)?;
        let mut text = format!("---\npublish: true\ntags: [bench]\n---\n# Note {n}\n\n");
        while text.len() < 2_000 {
            for _ in 0..12 {
                text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
                text.push(' ');
            }
            text.push_str(&format!("See [[Note {}]].\n\n", rng.random_range(0..count)));
        }
        std::fs::write(folder.join(format!("Note {n}.md")), text)?;
    }
    Ok(())
}

/// Waits until rebuild `job` finished and the index holds every entry's version.
async fn until_rebuilt_and_indexed(
    pool: &PgPool,
    jobs: &JobClient,
    job: standmeet_jobs::JobId,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let row = jobs
            .get(job)
            .await?
            .ok_or_else(|| anyhow::anyhow!("the rebuild's job is gone"))?;
        if row.state.is_terminal() {
            anyhow::ensure!(
                row.state == JobState::Completed,
                "the rebuild ended {}: {}",
                row.state.as_str(),
                row.errors
            );
            let lagging: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM corpus_entries e LEFT JOIN corpus_index i ON i.entry_id = e.id WHERE i.version IS DISTINCT FROM e.version",
            )
            .fetch_one(pool)
            .await?;
            if lagging == 0 {
                return Ok(());
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the rebuild did not finish within 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn measure(pool: &PgPool, quick: bool) -> anyhow::Result<()> {
    let count = if quick { 500 } else { 10_000 };
    let root = std::env::temp_dir().join(format!("standmeet-bench-vault-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    eprintln!("bench: vault: writing {count} notes of about 2 KB");
    write_vault(&root, count)?;

    let settings = Settings::from_lookup(|_| None)?;
    let registry = Registry::new()
        .register(vault::VaultRebuild {
            root: Some(root.clone()),
        })
        .register(IndexEntry)
        .register(IndexBatch);
    let config = settings.engine_config(&registry);
    let engine_pool = standmeet::db::engine_pool(pool, config.connections_needed());
    let jobs = JobClient::new(pool.clone(), 64);
    let running = JobRuntime::start(&engine_pool, registry, config, &jobs).await?;
    let result = async {
        eprintln!("bench: vault: the first rebuild");
        let started = Instant::now();
        let first = vault::queue_rebuild(pool, &jobs).await?.id;
        until_rebuilt_and_indexed(pool, &jobs, first).await?;
        let first_took = started.elapsed();
        let rebuild_alone: f64 = sqlx::query_scalar(
            "SELECT extract(epoch FROM finalized_at - attempted_at)::float8 * 1000 FROM jobs WHERE id = $1",
        )
        .bind(first.0)
        .fetch_one(pool)
        .await?;
        eprintln!("bench: vault: the rebuild's own job took {rebuild_alone:.0} ms of it");

        eprintln!("bench: vault: a rebuild that finds nothing changed");
        let started = Instant::now();
        let second = vault::queue_rebuild(pool, &jobs).await?.id;
        until_rebuilt_and_indexed(pool, &jobs, second).await?;
        let unchanged_took = started.elapsed();

        eprintln!("bench: vault: one note written, with the watcher on");
        let stop = tokio_util::sync::CancellationToken::new();
        let (watch_status, watching) = standmeet::domain::corpus::vault::watch::watch(
            pool.clone(),
            jobs.clone(),
            root.clone(),
            stop.clone(),
        );
        anyhow::ensure!(
            watch_status
                .until(standmeet::domain::corpus::vault::watch::WatchState::Watching)
                .await,
            "the vault's watcher ended before it watched"
        );
        let word = format!("zephyr{}", std::process::id());
        let started = Instant::now();
        std::fs::write(
            root.join("folder-00/Note 0.md"),
            format!("---\npublish: true\n---\n# Note 0\n\nThe {word} came in from the sea.\n"),
        )?;
        let deadline = started + Duration::from_secs(60);
        let searchable_took = loop {
            let hits = corpus::search(pool, &word, false).await?;
            if !hits.is_empty() {
                break started.elapsed();
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the changed note was not found within a minute"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        stop.cancel();
        let _ = watching.await;
        anyhow::Ok((first_took, unchanged_took, searchable_took))
    }
    .await;
    running.shutdown().await;
    engine_pool.close().await;
    let _ = std::fs::remove_dir_all(&root);
    let (first_took, unchanged_took, searchable_took) = result?;

    println!();
    println!("the corpus from a vault of {count} notes");
    println!(
        "  first rebuild, every index job done   {:>10.1} ms   (target ≤ 30 000 ms for 10,000 notes)",
        ms(first_took)
    );
    println!(
        "  rebuild that finds nothing changed    {:>10.1} ms   (target ≤ 1 000 ms)",
        ms(unchanged_took)
    );
    println!(
        "  one note written → found by search    {:>10.1} ms   (target ≤ 2 000 ms, watcher on)",
        ms(searchable_took)
    );
    println!(
        "{}",
        json!({
            "subject": "vault",
            "quick": quick,
            "notes": count,
            "first_rebuild_ms": ms(first_took),
            "unchanged_rebuild_ms": ms(unchanged_took),
            "note_to_search_ms": ms(searchable_took),
        })
    );
    Ok(())
}
