//! The summaries of finished jobs are exact. After a run that mixes every way a job
//! becomes finished or stops being finished (the engine's outcomes, an admin's cancel,
//! retry and delete, the rescuer, the cleaner, and an operator's plain SQL), every count
//! the engine shows equals `count(*)` over the jobs, and every page of the Tasks list
//! equals the same page read straight from the table.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::jobs::{
    Actions, Flaky, FlakyArgs, RunCounts, client, insert, insert_with, job_of_kind, noops,
    quick_config, start_engine, test_registry, wait_until,
};
use serde_json::json;
use sqlx::PgPool;
use standmeet_jobs::testing;
use standmeet_jobs::{InsertOptions, JobFilter, JobId, JobState};

const FINISHED: &str = "state IN ('completed', 'discarded', 'cancelled')";

async fn ids(pool: &PgPool, sql: &str) -> Vec<i64> {
    sqlx::query_scalar(sql).fetch_all(pool).await.unwrap()
}

async fn exec(pool: &PgPool, sql: &str) {
    sqlx::query(sql).execute(pool).await.unwrap();
}

#[sqlx::test]
async fn every_count_and_page_matches_the_jobs_after_a_mixed_run_with_operator_sql(pool: PgPool) {
    let engine = start_engine(&pool, test_registry(RunCounts::default()), quick_config(4)).await;
    let jobs = client(&pool);

    // The engine's outcomes: completions, retries that then complete, discards and
    // cancels by handlers.
    noops(&pool, 60).await;
    for _ in 0..10 {
        insert::<Flaky>(&pool, &FlakyArgs { succeed_on: 2 })
            .await
            .unwrap();
        insert::<Actions>(&pool, &json!({ "action": "discard" }))
            .await
            .unwrap();
    }
    for _ in 0..5 {
        insert::<Actions>(&pool, &json!({ "action": "cancel" }))
            .await
            .unwrap();
    }
    // Jobs for later: scheduled ones an admin cancels, and one the rescuer takes back.
    let later = InsertOptions {
        scheduled_at: Some(time::OffsetDateTime::now_utc() + time::Duration::hours(1)),
        ..Default::default()
    };
    let mut scheduled = Vec::new();
    for n in 0..8 {
        scheduled.push(
            insert_with::<standmeet_jobs::builtin::Noop>(&pool, &json!({ "n": n }), later.clone())
                .await
                .unwrap(),
        );
    }
    exec(
        &pool,
        "INSERT INTO jobs (kind, queue, max_attempts) VALUES ('system.noop', 'nobody-runs-this', 1)",
    )
    .await;
    let ghosted = testing::claim_as_ghost(
        &pool,
        "nobody-runs-this",
        1,
        &["system.noop".to_string()],
        "ghost",
        Duration::from_millis(1),
    )
    .await
    .unwrap();
    assert_eq!(ghosted.len(), 1);

    let unsettled = format!(
        "SELECT count(*) FROM jobs WHERE NOT {FINISHED} AND NOT id = ANY('{{{}}}')",
        scheduled
            .iter()
            .map(|id| id.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    wait_until(Duration::from_secs(30), || async {
        common::count(&pool, &unsettled).await == 0
    })
    .await;

    // An admin: cancels scheduled jobs, retries discarded ones (they run and are
    // discarded again), deletes completed ones.
    jobs.cancel_many(&scheduled[..4]).await.unwrap();
    let discarded: Vec<JobId> = ids(
        &pool,
        "SELECT id FROM jobs WHERE state = 'discarded' AND kind = 'test.action' LIMIT 4",
    )
    .await
    .into_iter()
    .map(JobId)
    .collect();
    jobs.retry_many(&discarded).await.unwrap();
    let completed: Vec<JobId> = ids(
        &pool,
        "SELECT id FROM jobs WHERE state = 'completed' LIMIT 5",
    )
    .await
    .into_iter()
    .map(JobId)
    .collect();
    jobs.delete_many(&completed).await.unwrap();
    wait_until(Duration::from_secs(30), || async {
        common::count(&pool, &unsettled).await == 0
    })
    .await;
    engine.shutdown().await;

    // An operator, by hand: un-finishes jobs, renames a kind, finishes a scheduled job,
    // deletes finished ones, inserts finished ones (old enough for the cleaner, and
    // not), moves when some finished, and changes a queue.
    exec(&pool, "UPDATE jobs SET state = 'available' WHERE id IN (SELECT id FROM jobs WHERE state = 'completed' ORDER BY id LIMIT 3)").await;
    exec(&pool, "UPDATE jobs SET kind = 'renamed.by.hand' WHERE id IN (SELECT id FROM jobs WHERE state = 'completed' ORDER BY id DESC LIMIT 4)").await;
    exec(
        &pool,
        &format!(
            "UPDATE jobs SET state = 'discarded' WHERE id = {}",
            scheduled[5].0
        ),
    )
    .await;
    exec(
        &pool,
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE state = 'cancelled' LIMIT 2)",
    )
    .await;
    exec(
        &pool,
        "INSERT INTO jobs (kind, queue, state, finalized_at) VALUES
            ('by.hand', 'hand', 'completed', now() - interval '3 hours'),
            ('by.hand', 'hand', 'discarded', now() - interval '3 days'),
            ('by.hand', 'hand', 'completed', now() - interval '10 days'),
            ('by.hand', 'hand', 'cancelled', now())",
    )
    .await;
    exec(&pool, "UPDATE jobs SET finalized_at = now() - interval '10 minutes' WHERE id IN (SELECT id FROM jobs WHERE state = 'completed' AND kind = 'system.noop' ORDER BY id LIMIT 6)").await;
    exec(&pool, "UPDATE jobs SET queue = 'moved' WHERE id IN (SELECT id FROM jobs WHERE state = 'discarded' ORDER BY id LIMIT 2)").await;
    // A transaction that rolls back changes nothing.
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("DELETE FROM jobs WHERE state = 'completed'")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    the_summaries_match_the_jobs(&pool).await;
    // Folding changes how the counts are kept, not what they are.
    testing::job_summaries_fold(&pool).await.unwrap();
    the_summaries_match_the_jobs(&pool).await;
    // The cleaner deletes what is past a day (a week for discarded jobs) and takes its
    // counts back with it.
    let deleted = testing::clean_finished(
        &pool,
        Duration::from_secs(24 * 3600),
        Duration::from_secs(7 * 24 * 3600),
    )
    .await
    .unwrap();
    assert_eq!(deleted, 1, "the completed job of ten days ago");
    let deleted =
        testing::clean_finished(&pool, Duration::from_secs(3600), Duration::from_secs(3600))
            .await
            .unwrap();
    assert_eq!(deleted, 2, "the jobs of three hours and three days ago");
    the_summaries_match_the_jobs(&pool).await;
    testing::job_summaries_fold(&pool).await.unwrap();
    the_summaries_match_the_jobs(&pool).await;
}

/// Every figure the engine reads from the summaries, against `count(*)`.
async fn the_summaries_match_the_jobs(pool: &PgPool) {
    let jobs = client(pool);

    // By state and kind, finished and not.
    for finished in [true, false] {
        let shown = jobs.count_by_state_and_kind(finished).await.unwrap();
        let counted: Vec<(JobState, String, i64)> = sqlx::query_as(&format!(
            "SELECT state, kind, count(*) FROM jobs WHERE ({FINISHED}) = $1 \
             GROUP BY state, kind ORDER BY state, kind"
        ))
        .bind(finished)
        .fetch_all(pool)
        .await
        .unwrap();
        assert!(!counted.is_empty());
        assert_eq!(shown, counted, "by state and kind (finished: {finished})");
    }

    // By state (the panel's counts).
    let shown: HashMap<JobState, i64> = jobs
        .count_by_state(1_000_000)
        .await
        .unwrap()
        .into_iter()
        .collect();
    for state in JobState::ALL {
        let counted = common::count(
            pool,
            &format!("SELECT count(*) FROM jobs WHERE state = '{state}'"),
        )
        .await;
        assert_eq!(shown[&state], counted, "{state}");
    }

    // By queue and state, and finished in the last five minutes.
    let queues = jobs.queues().await.unwrap();
    let named: Vec<String> = ids_text(pool, "SELECT DISTINCT queue FROM jobs").await;
    for name in &named {
        let queue = queues
            .iter()
            .find(|q| &q.name == name)
            .unwrap_or_else(|| panic!("{name} listed"));
        for state in JobState::ALL {
            let counted = common::count(
                pool,
                &format!("SELECT count(*) FROM jobs WHERE queue = '{name}' AND state = '{state}'"),
            )
            .await;
            assert_eq!(queue.counts[state.as_str()], counted, "{name} {state}");
        }
        let recent = common::count(
            pool,
            &format!(
                "SELECT count(*) FROM jobs WHERE queue = '{name}' AND {FINISHED} \
                 AND finalized_at > now() - interval '5 minutes'"
            ),
        )
        .await;
        assert_eq!(
            queue.finished_last_5m, recent,
            "{name} finished in the last 5 minutes"
        );
    }

    // The chart: each minute it shows, and what the last 50 minutes add up to.
    let chart = jobs.finished_per_minute().await.unwrap();
    assert!(!chart.is_empty());
    for minute in &chart {
        let counted: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs WHERE date_trunc('minute', finalized_at) = $1 AND state = $2",
        )
        .bind(minute.minute)
        .bind(minute.state)
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(minute.finished, counted, "{minute:?}");
    }
    let since: time::OffsetDateTime =
        sqlx::query_scalar("SELECT date_trunc('minute', now()) - interval '50 minutes'")
            .fetch_one(pool)
            .await
            .unwrap();
    let charted: i64 = chart
        .iter()
        .filter(|m| m.minute >= since)
        .map(|m| m.finished)
        .sum();
    let counted: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE finalized_at >= $1")
        .bind(since)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(charted, counted, "finished in the last 50 minutes");

    // The blocks of ids: exactly what each holds.
    let differing = common::count(
        pool,
        &format!(
            "SELECT count(*) FROM (
               (SELECT job_block(id), queue, kind, state, count(*) FROM jobs WHERE {FINISHED} GROUP BY 1, 2, 3, 4
                EXCEPT SELECT block, queue, kind, state, sum(jobs) FROM job_finished_blocks GROUP BY 1, 2, 3, 4 HAVING sum(jobs) <> 0)
               UNION ALL
               (SELECT block, queue, kind, state, sum(jobs) FROM job_finished_blocks GROUP BY 1, 2, 3, 4 HAVING sum(jobs) <> 0
                EXCEPT SELECT job_block(id), queue, kind, state, count(*) FROM jobs WHERE {FINISHED} GROUP BY 1, 2, 3, 4)
             ) AS differences"
        ),
    )
    .await;
    assert_eq!(differing, 0, "the blocks' summary differs from the jobs");

    // Pages of the Tasks list, by every filter, against the table read straight.
    let kinds = ids_text(pool, "SELECT DISTINCT kind FROM jobs").await;
    let mut filters = vec![JobFilter {
        kind: Some("nowhere.at.all".into()),
        ..Default::default()
    }];
    for kind in &kinds {
        filters.push(JobFilter {
            kind: Some(kind.clone()),
            ..Default::default()
        });
    }
    for queue in &named {
        filters.push(JobFilter {
            queue: Some(queue.clone()),
            ..Default::default()
        });
    }
    for state in JobState::ALL {
        filters.push(JobFilter {
            state: Some(state),
            ..Default::default()
        });
        filters.push(JobFilter {
            state: Some(state),
            kind: Some("system.noop".into()),
            ..Default::default()
        });
    }
    let middle: i64 = sqlx::query_scalar("SELECT (min(id) + max(id)) / 2 FROM jobs")
        .fetch_one(pool)
        .await
        .unwrap();
    for filter in filters {
        for (before, limit) in [(None, 1000), (None, 3), (Some(JobId(middle)), 5)] {
            let filter = JobFilter {
                before,
                ..filter.clone()
            };
            let listed: Vec<i64> = jobs
                .list(&filter, limit)
                .await
                .unwrap()
                .iter()
                .map(|job| job.id.0)
                .collect();
            let expected: Vec<i64> = sqlx::query_scalar(
                "SELECT id FROM jobs WHERE ($1::job_state IS NULL OR state = $1)
                   AND ($2::text IS NULL OR kind = $2) AND ($3::text IS NULL OR queue = $3)
                   AND ($4::bigint IS NULL OR id < $4)
                 ORDER BY id DESC LIMIT $5",
            )
            .bind(filter.state)
            .bind(&filter.kind)
            .bind(&filter.queue)
            .bind(filter.before.map(|id| id.0))
            .bind(limit)
            .fetch_all(pool)
            .await
            .unwrap();
            assert_eq!(listed, expected, "{filter:?}, {limit}");
        }
    }
}

async fn ids_text(pool: &PgPool, sql: &str) -> Vec<String> {
    sqlx::query_scalar(sql).fetch_all(pool).await.unwrap()
}

#[sqlx::test]
async fn a_handlers_own_transaction_counts_its_completion_and_what_it_changes_after(pool: PgPool) {
    use standmeet_jobs::{JobContext, JobError, JobKind};

    // A handler that completes in its own transaction and then, in the same one,
    // finishes another job by plain SQL: the engine's statement counted the first
    // itself, and the trigger must still count the second.
    struct CompletesThenCancels;
    impl JobKind for CompletesThenCancels {
        const KIND: &'static str = "test.completes_then_cancels";
        type Args = serde_json::Value;
        type Output = ();
        async fn run(&self, job: JobContext, args: serde_json::Value) -> Result<(), JobError> {
            let mut tx = job.pool().begin().await?;
            job.complete_tx(&mut tx, &json!({"done": true})).await?;
            sqlx::query("UPDATE jobs SET state = 'cancelled' WHERE id = $1")
                .bind(args["other"].as_i64())
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        }
    }

    let other = job_of_kind(&pool, "nobody.runs.this", 3).await;
    let engine = start_engine(
        &pool,
        standmeet_jobs::Registry::new().register(CompletesThenCancels),
        quick_config(1),
    )
    .await;
    let id = insert::<CompletesThenCancels>(&pool, &json!({ "other": other.0 }))
        .await
        .unwrap();
    common::jobs::wait_for_state(&pool, id, JobState::Completed).await;
    engine.shutdown().await;
    let shown = client(&pool).count_by_state_and_kind(true).await.unwrap();
    assert_eq!(
        shown,
        vec![
            (
                JobState::Completed,
                "test.completes_then_cancels".to_string(),
                1
            ),
            (JobState::Cancelled, "nobody.runs.this".to_string(), 1),
        ]
    );
}
