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

/// Migrated, then the record of the newest migration lost: its file (`CREATE OR
/// REPLACE VIEW`) runs again without error, so a call that applied before refusing
/// would bring the record back.
async fn migrated_with_the_newest_record_lost(conn: &mut sqlx::PgConnection) -> i64 {
    migrate(conn).await.unwrap();
    let newest = migration_versions().last().unwrap();
    sqlx::query(&format!("DELETE FROM {MIGRATION_TABLE} WHERE version = $1"))
        .bind(newest)
        .execute(&mut *conn)
        .await
        .unwrap();
    newest
}

/// Put right, `migrate` applies the one whose record was lost (`newest`), and only it.
async fn the_lost_one_runs_again(conn: &mut sqlx::PgConnection, newest: i64) {
    let report = migrate(conn).await.unwrap();
    assert_eq!(report.applied, [newest]);
    assert!(report.adopted.is_empty());
}

/// `migrate` refuses, with each of `words` in its message, and the ledger is as it was.
async fn refused_with_nothing_applied(
    conn: &mut sqlx::PgConnection,
    pool: &PgPool,
    words: [&str; 2],
) {
    let before = recorded(pool).await;
    let refused = migrate(conn).await.unwrap_err();
    assert!(
        matches!(&refused, standmeet_jobs::Error::Refused(said)
            if words.iter().all(|word| said.contains(word))),
        "{refused}"
    );
    assert_eq!(recorded(pool).await, before, "nothing applied");
}

#[sqlx::test(migrations = false)]
async fn a_version_this_build_does_not_know_is_refused_and_nothing_is_applied(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let newest = migrated_with_the_newest_record_lost(&mut conn).await;
    sqlx::query(&format!(
        "INSERT INTO {MIGRATION_TABLE} (version, description, checksum)
         VALUES (29991231000000, 'from a newer engine', '\\x00')"
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
    refused_with_nothing_applied(&mut conn, &pool, ["29991231000000", "newer build"]).await;

    sqlx::query(&format!(
        "DELETE FROM {MIGRATION_TABLE} WHERE version = 29991231000000"
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
    the_lost_one_runs_again(&mut conn, newest).await;
}

/// A record in the engine's own ledger that is not its file's is refused before
/// anything is applied.
#[sqlx::test(migrations = false)]
async fn a_record_changed_by_hand_is_refused_and_nothing_is_applied(pool: PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let newest = migrated_with_the_newest_record_lost(&mut conn).await;
    let first = migration_versions().next().unwrap();
    let checksum: Vec<u8> = sqlx::query_scalar(&format!(
        "SELECT checksum FROM {MIGRATION_TABLE} WHERE version = $1"
    ))
    .bind(first)
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    sqlx::query(&format!(
        "UPDATE {MIGRATION_TABLE} SET checksum = '\\x00' WHERE version = $1"
    ))
    .bind(first)
    .execute(&mut *conn)
    .await
    .unwrap();
    refused_with_nothing_applied(&mut conn, &pool, [&first.to_string(), "changed by hand"]).await;

    sqlx::query(&format!(
        "UPDATE {MIGRATION_TABLE} SET checksum = $1 WHERE version = $2"
    ))
    .bind(checksum)
    .bind(first)
    .execute(&mut *conn)
    .await
    .unwrap();
    the_lost_one_runs_again(&mut conn, newest).await;
}

/// Called inside a transaction of the caller's, the whole call rolls back with it.
#[sqlx::test(migrations = false)]
async fn inside_a_callers_transaction_it_rolls_back_with_it(pool: PgPool) {
    use sqlx::Connection;
    let mut conn = pool.acquire().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let report = migrate(&mut tx).await.unwrap();
    assert_eq!(report.applied, migration_versions().collect::<Vec<_>>());
    tx.rollback().await.unwrap();
    let ledger: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
        .bind(MIGRATION_TABLE)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(ledger, None, "nothing of it is left");
}
