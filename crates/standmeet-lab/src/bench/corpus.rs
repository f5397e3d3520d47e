//! The visitors' search over 100,000 promoted entries (`--quick`: 5,000): the server
//! time of [`corpus::search`] (the query, ranking, and the snippets) for a mix of
//! common words, rare words, two-word queries, CJK queries and queries that match
//! nothing. Target: p99 ≤ 20 ms.
//!
//! The entries are made from a fixed vocabulary with a seeded generator, so every run
//! searches the same corpus; word frequencies follow a Zipf-like curve, as in text.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use sqlx::PgPool;

use super::{ms, percentile};
use standmeet::domain::corpus::{self, IndexInput, Status, Visibility};

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ser", "tan", "vo", "rel", "qu", "is", "dor", "fen", "gal", "har", "jun",
    "pex", "ru", "sol", "tri", "um", "wen", "yar", "zo", "bri", "cas",
];
const CJK: &str = "東京大阪城桜夜景山川海空電車駅港町花火寺庭園茶店本屋図書館学校先生料理";

/// A made-up vocabulary: `size` distinct words of two or three syllables.
fn vocabulary(size: usize) -> Vec<String> {
    let mut words = Vec::with_capacity(size);
    'outer: for a in SYLLABLES {
        for b in SYLLABLES {
            for c in ["", "n", "ta", "ri", "mo", "ke", "sa"] {
                words.push(format!("{a}{b}{c}"));
                if words.len() == size {
                    break 'outer;
                }
            }
        }
    }
    words
}

/// A word index with a Zipf-like distribution: low indexes are common.
fn zipf_index(rng: &mut StdRng, size: usize) -> usize {
    let u: f64 = rng.random_range(0.0..1.0);
    ((size as f64).powf(u) - 1.0) as usize % size
}

fn entry_text(rng: &mut StdRng, words: &[String], cjk: &[char], count: usize) -> String {
    let mut text = String::new();
    for n in 0..count {
        if n > 0 {
            text.push(if n % 12 == 0 { '.' } else { ' ' });
            if n % 12 == 0 {
                text.push(' ');
            }
        }
        text.push_str(&words[zipf_index(rng, words.len())]);
    }
    // One entry in ten carries some CJK text too.
    if rng.random_range(0..10) == 0 {
        text.push(' ');
        for _ in 0..rng.random_range(4..16) {
            text.push(cjk[rng.random_range(0..cjk.len())]);
        }
    }
    text
}

pub async fn measure(pool: &PgPool, quick: bool) -> anyhow::Result<()> {
    let entries = if quick { 5_000 } else { 100_000 };
    let queries = if quick { 100 } else { 1_000 };
    let words = vocabulary(4_000);
    let cjk: Vec<char> = CJK.chars().collect();
    let mut rng = StdRng::seed_from_u64(7);

    eprintln!("bench: corpus: writing and indexing {entries} entries");
    let started = Instant::now();
    let seeding = super::quiet_pool(pool).await?;
    let batch = 2_000;
    for first in (0..entries).step_by(batch) {
        let count = batch.min(entries - first);
        let mut titles = Vec::with_capacity(count);
        let mut bodies = Vec::with_capacity(count);
        for _ in 0..count {
            titles.push(entry_text(&mut rng, &words, &cjk, 4));
            bodies.push(entry_text(&mut rng, &words, &cjk, 80));
        }
        let mut tx = seeding.begin().await?;
        let ids: Vec<i64> = sqlx::query_scalar(
            "INSERT INTO corpus_entries (title, body, status)
             SELECT t, b, 'promoted' FROM unnest($1::text[], $2::text[]) AS e (t, b) RETURNING id",
        )
        .bind(&titles)
        .bind(&bodies)
        .fetch_all(&mut *tx)
        .await?;
        let inputs: Vec<IndexInput> = ids
            .into_iter()
            .zip(titles.into_iter().zip(bodies))
            .map(|(entry_id, (title, body))| IndexInput {
                tags: Vec::new(),
                entry_id,
                version: 1,
                title,
                body,
                visibility: Visibility::Public,
                status: Status::Promoted,
            })
            .collect();
        corpus::write_index(&mut tx, &inputs).await?;
        tx.commit().await?;
    }
    sqlx::query("ANALYZE corpus_index")
        .execute(&seeding)
        .await?;
    seeding.close().await;
    eprintln!(
        "bench: corpus: {entries} entries indexed in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The query mix: what visitors type.
    let mut mix: Vec<(&str, String)> = Vec::with_capacity(queries);
    for n in 0..queries {
        let query = match n % 5 {
            0 => ("common word", words[rng.random_range(0..20)].clone()),
            1 => (
                "rare word",
                words[rng.random_range(1_000..words.len())].clone(),
            ),
            2 => (
                "two words",
                format!(
                    "{} {}",
                    words[zipf_index(&mut rng, words.len())],
                    words[zipf_index(&mut rng, words.len())]
                ),
            ),
            3 => {
                let at = rng.random_range(0..cjk.len() - 1);
                ("cjk", cjk[at..at + 2].iter().collect())
            }
            _ => ("no match", format!("zzq{n}")),
        };
        mix.push(query);
    }
    // Warm the caches once, as a running server would have them.
    for (_, query) in mix.iter().take(20) {
        corpus::search(pool, query, false).await?;
    }
    let mut all: Vec<Duration> = Vec::with_capacity(queries);
    let mut by_kind: Vec<(&str, Vec<Duration>, usize)> = Vec::new();
    for (kind, query) in &mix {
        let started = Instant::now();
        let hits = corpus::search(pool, query, false).await?;
        let took = started.elapsed();
        all.push(took);
        match by_kind.iter_mut().find(|(k, _, _)| k == kind) {
            Some((_, samples, found)) => {
                samples.push(took);
                *found += hits.len();
            }
            None => by_kind.push((kind, vec![took], hits.len())),
        }
    }

    println!();
    println!("corpus search, {entries} entries, {queries} queries (target p99 ≤ 20 ms)");
    println!(
        "{:<14} {:>9} {:>9} {:>12}",
        "queries", "p50 ms", "p99 ms", "hits/query"
    );
    let mut results = Vec::new();
    for (kind, samples, found) in &mut by_kind {
        let count = samples.len();
        let p50 = percentile(samples, 0.50);
        let p99 = percentile(samples, 0.99);
        println!(
            "{kind:<14} {:>9.2} {:>9.2} {:>12.1}",
            ms(p50),
            ms(p99),
            *found as f64 / count as f64
        );
        results.push(json!({ "queries": kind, "p50_ms": ms(p50), "p99_ms": ms(p99) }));
    }
    let p50 = percentile(&mut all, 0.50);
    let p99 = percentile(&mut all, 0.99);
    println!("{:<14} {:>9.2} {:>9.2}", "all", ms(p50), ms(p99));
    println!(
        "{}",
        json!({ "bench": "corpus", "entries": entries, "queries": queries, "p50_ms": ms(p50), "p99_ms": ms(p99), "results": results })
    );
    Ok(())
}
