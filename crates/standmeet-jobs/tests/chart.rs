//! The Tasks panel's chart of finished jobs reads the summaries of the last hour only,
//! however many finished jobs are kept.

use sqlx::PgPool;

#[sqlx::test]
async fn the_chart_reads_the_summaries_of_the_last_hour_even_with_a_million_jobs_kept(
    pool: PgPool,
) {
    standmeet_jobs_testkit::a_million_finished_jobs(&pool).await;

    let sql = standmeet_jobs::testing::FINISHED_PER_MINUTE_SQL;
    let plan: serde_json::Value = sqlx::query_scalar(&format!("EXPLAIN (FORMAT JSON) {sql}"))
        .fetch_one(&pool)
        .await
        .unwrap();
    let plan = plan.to_string();
    assert!(
        plan.contains("\"Relation Name\":\"job_finished_minutes\""),
        "{plan}"
    );
    assert!(
        !plan.contains("\"Relation Name\":\"jobs\""),
        "the chart reads the summaries, never the jobs: {plan}"
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
