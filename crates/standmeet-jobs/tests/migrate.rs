//! The engine's schema and its own ledger: `migrate` applies every file once and records
//! it in `standmeet_job_migrations`; a database whose ledger is sqlx's (as
//! `#[sqlx::test]` makes it, and as StandMeet made its databases before) has the rows
//! moved, not applied again.

use sqlx::PgPool;
use standmeet_jobs::{MIGRATION_TABLE, Migrated, migrate, migration_versions};

async fn recorded(pool: &PgPool) -> Vec<(i64, Option<String>)> {
    sqlx::query_as(&format!(
        "SELECT version, adopted_from FROM {MIGRATION_TABLE} ORDER BY version"
    ))
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrations = false)]
async fn an_empty_database_gets_every_migration_once(pool: PgPool) {
    let all: Vec<i64> = migration_versions().collect();
    let mut conn = pool.acquire().await.unwrap();

    let first = migrate(&mut conn).await.unwrap();
    assert_eq!(first.applied, all);
    assert!(first.adopted.is_empty());
    assert_eq!(
        migrate(&mut conn).await.unwrap(),
        Migrated::default(),
        "a second call finds nothing to do"
    );
    drop(conn);

    let rows = recorded(&pool).await;
    assert_eq!(rows.iter().map(|row| row.0).collect::<Vec<_>>(), all);
    assert!(
        rows.iter().all(|row| row.1.is_none()),
        "applied here: {rows:?}"
    );
    let no_shared_ledger: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(no_shared_ledger, None, "the engine makes no other ledger");
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args) VALUES ('system.noop', '{}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let state: String = sqlx::query_scalar("SELECT state::text FROM job_status WHERE id = $1")
        .bind(job)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        state, "available",
        "the schema works, and its view is there"
    );
}

/// `#[sqlx::test]` applies the files through sqlx, into `_sqlx_migrations`.
#[sqlx::test]
async fn a_database_with_the_rows_in_sqlxs_ledger_has_them_moved(pool: PgPool) {
    let all: Vec<i64> = migration_versions().collect();
    let mut conn = pool.acquire().await.unwrap();

    let report = migrate(&mut conn).await.unwrap();
    assert_eq!(report.adopted, all);
    assert!(report.applied.is_empty(), "none applied again: {report:?}");
    drop(conn);

    let rows = recorded(&pool).await;
    assert_eq!(rows.iter().map(|row| row.0).collect::<Vec<_>>(), all);
    assert!(
        rows.iter()
            .all(|row| row.1.as_deref() == Some("_sqlx_migrations")),
        "{rows:?}"
    );
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "none left in sqlx's ledger");
}

#[sqlx::test(migrations = false)]
async fn a_version_this_build_does_not_know_is_refused_and_nothing_is_applied(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    migrate(&mut conn).await.unwrap();
    sqlx::query(&format!(
        "INSERT INTO {MIGRATION_TABLE} (version, description, checksum)
         VALUES (29991231000000, 'from a newer engine', '\\x00')"
    ))
    .execute(&mut *conn)
    .await
    .unwrap();

    let refused = migrate(&mut conn).await.unwrap_err();
    assert!(
        matches!(&refused, standmeet_jobs::Error::Refused(words)
            if words.contains("29991231000000") && words.contains("newer build")),
        "{refused}"
    );
}
