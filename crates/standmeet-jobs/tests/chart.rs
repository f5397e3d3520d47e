//! The Tasks panel's chart of finished jobs reads the last hour only, however many
//! finished jobs are kept.

use sqlx::PgPool;

#[sqlx::test(migrations = "../../migrations")]
async fn the_chart_query_reads_only_the_last_hour_even_with_a_million_jobs_kept(pool: PgPool) {
    // A million finished jobs over the last two days (a day is the default retention of
    // completed jobs; two is generous): about 21,000 of them in the last hour.
    sqlx::query(
        r#"
        INSERT INTO jobs (kind, state, attempt, created_at, scheduled_at, finalized_at)
        SELECT 'system.noop',
               (ARRAY['completed', 'completed', 'completed', 'discarded', 'cancelled'])[1 + g % 5]::job_state,
               1, at, at, at
        FROM generate_series(1, 1000000) AS g,
             LATERAL (SELECT now() - make_interval(secs => g * 0.1728)) AS t(at)
        "#,
    )
    .execute(&pool)
    .await
    .unwrap();
    // As autovacuum would have, long before the table grew this big.
    sqlx::query("VACUUM ANALYZE jobs")
        .execute(&pool)
        .await
        .unwrap();

    let sql = standmeet_jobs::testing::FINISHED_PER_MINUTE_SQL;
    let plan: serde_json::Value = sqlx::query_scalar(&format!("EXPLAIN (FORMAT JSON) {sql}"))
        .fetch_one(&pool)
        .await
        .unwrap();
    let plan = plan.to_string();
    assert!(plan.contains("jobs_finalized_at_idx"), "{plan}");
    assert!(
        !plan.contains("Seq Scan"),
        "no scan of the whole table: {plan}"
    );
    let analyzed: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS) {sql}"))
        .fetch_all(&pool)
        .await
        .unwrap();
    println!("{}", analyzed.join("\n"));

    let finished = standmeet_jobs_testkit::client(&pool)
        .finished_per_minute()
        .await
        .unwrap();
    let total: i64 = finished.iter().map(|minute| minute.finished).sum();
    assert!((20_000..22_000).contains(&total), "{total}");
}
