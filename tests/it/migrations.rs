//! The schema's history: a database migrated by an earlier build upgrades with no manual
//! step, to the very schema a fresh database gets; one migrated by a newer build is
//! refused in words.
//!
//! Until #50 the job engine's migrations sat in the application's `migrations/`, and one
//! (`20261130000001_faults`) held tables of both. The engine's files moved unchanged
//! (same versions, same checksums); that one was retired and split in two
//! (`db::RETIRED`). Later the application's `job_status` view (20261130000002) was
//! retired too, when the engine began to publish it. "The old layout" below is the list
//! an earlier build applied: the files of both folders up to a version, and the retired
//! files from `tests/fixtures/retired-migrations/`.

use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;

/// The last migration an earlier build held.
const LAST_VERSION_BEFORE_THE_SPLIT: i64 = 20261204000001;
const RETIRED_FILES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/retired-migrations"
);

#[sqlx::test(migrations = false)]
async fn a_database_migrated_by_an_earlier_build_upgrades_to_the_schema_a_fresh_one_gets(
    pool: PgPool,
) {
    let old_layout = old_layout(LAST_VERSION_BEFORE_THE_SPLIT).await;
    old_layout.run(&pool).await.expect("the old layout applies");
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args) VALUES ('system.noop', '{}') RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();

    standmeet::db::migrate(&pool)
        .await
        .expect("the upgrade needs no manual step");
    standmeet::db::migrate(&pool)
        .await
        .expect("and a second run finds nothing to do");

    let fresh = another_database(&pool, "fresh").await;
    standmeet::db::migrate(&fresh).await.unwrap();
    assert_same_schema(&pool, &fresh).await;

    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE id = $1")
        .bind(job)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(kept, 1, "the upgrade keeps the rows");
    let versions = applied_versions(&pool).await;
    assert!(
        versions.contains(&20261130000001),
        "the retired one stays in the ledger"
    );
    assert!(versions.contains(&20261204000002) && versions.contains(&20261204000003));
    let fresh_versions = applied_versions(&fresh).await;
    assert!(!fresh_versions.contains(&20261130000001));
    drop_database(&pool, fresh).await;
}

/// A database from before the retired migration (20261129) gets its tables from the new
/// ones, with the same backfill the retired one did.
#[sqlx::test(migrations = false)]
async fn a_database_from_before_the_retired_migration_gets_its_tables_and_backfill(pool: PgPool) {
    old_layout(20261129000006).await.run(&pool).await.unwrap();
    sqlx::query(
        "INSERT INTO access_requests (name, email, status, code_hash, replied_at)
         VALUES ('Ada', 'ada@example.com', 'replied', 'hash-of-the-code', now())",
    )
    .execute(&pool)
    .await
    .unwrap();

    standmeet::db::migrate(&pool).await.unwrap();

    let codes: Vec<String> = sqlx::query_scalar("SELECT code_hash FROM access_codes")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        codes,
        ["hash-of-the-code"],
        "the request's code still works"
    );
    let fresh = another_database(&pool, "fresh").await;
    standmeet::db::migrate(&fresh).await.unwrap();
    assert_same_schema(&pool, &fresh).await;
    drop_database(&pool, fresh).await;
}

/// The last migration a build held while the application defined `job_status`.
const LAST_VERSION_WITH_THE_APPS_JOB_STATUS: i64 = 20261205000002;

/// A database migrated while the application still defined `job_status` gets the
/// engine's view in its place, reading the same jobs with the same columns, and the
/// schema a fresh database gets.
#[sqlx::test(migrations = false)]
async fn a_database_with_the_apps_job_status_view_gets_the_engines(pool: PgPool) {
    old_layout(LAST_VERSION_WITH_THE_APPS_JOB_STATUS)
        .await
        .run(&pool)
        .await
        .expect("the old layout applies");
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (kind, args, errors) VALUES ('system.noop', '{\"n\": 7}',
         '[{\"attempt\": 1, \"at\": \"2026-12-01T10:00:00Z\", \"error\": \"boom\"}]')
         RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let before: (String, Option<String>) =
        sqlx::query_as("SELECT kind, last_error FROM job_status WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .expect("the application's view");

    standmeet::db::migrate(&pool)
        .await
        .expect("the upgrade needs no manual step");

    let after: (String, Option<String>, serde_json::Value) =
        sqlx::query_as("SELECT kind, last_error, args FROM job_status WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .expect("the engine's view");
    assert_eq!((after.0.clone(), after.1.clone()), before);
    assert_eq!(after.1.as_deref(), Some("boom"));
    assert_eq!(after.2, serde_json::json!({"n": 7}));
    let versions = applied_versions(&pool).await;
    assert!(
        versions.contains(&20261130000002) && versions.contains(&20261207000001),
        "{versions:?}"
    );

    let fresh = another_database(&pool, "fresh").await;
    standmeet::db::migrate(&fresh).await.unwrap();
    assert_same_schema(&pool, &fresh).await;
    assert!(!applied_versions(&fresh).await.contains(&20261130000002));
    drop_database(&pool, fresh).await;
}

#[sqlx::test(migrations = false)]
async fn a_database_migrated_by_a_newer_build_is_refused_and_left_as_it_is(pool: PgPool) {
    standmeet::db::migrate(&pool).await.unwrap();
    record_applied(&pool, 29991231000000, b"from a newer build").await;

    let refused = standmeet::db::migrate(&pool).await.unwrap_err();
    let words = format!("{refused:#}");
    assert!(
        words.contains("29991231000000") && words.contains("newer StandMeet"),
        "{words}"
    );

    // A retired migration whose checksum is not the one we applied was changed by hand.
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 29991231000000")
        .execute(&pool)
        .await
        .unwrap();
    record_applied(&pool, 20261130000001, b"edited").await;
    let refused = standmeet::db::migrate(&pool).await.unwrap_err();
    assert!(
        format!("{refused:#}").contains("changed by hand"),
        "{refused:#}"
    );
}

/// The retired migration's file and its recorded checksum agree (the fixture is the
/// file an earlier build applied).
#[test]
fn the_retired_checksum_is_the_fixtures() {
    use sha2::{Digest, Sha384};
    for (version, checksum) in standmeet::db::RETIRED {
        let file = std::fs::read_dir(RETIRED_FILES)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| {
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&version.to_string())
            })
            .unwrap_or_else(|| panic!("no fixture for retired migration {version}"));
        let digest = Sha384::digest(std::fs::read(&file).unwrap());
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(&hex, checksum, "{}", file.display());
    }
}

/// The migrations an earlier build applied, up to `last`, as one list in version order.
async fn old_layout(last: i64) -> Migrator {
    let folder = tempfile::tempdir().unwrap();
    for migration in standmeet::db::MIGRATOR.iter() {
        if migration.version <= last {
            let name = format!(
                "{}_{}.sql",
                migration.version,
                migration.description.replace(' ', "_")
            );
            std::fs::write(folder.path().join(name), migration.sql.as_bytes()).unwrap();
        }
    }
    for entry in std::fs::read_dir(RETIRED_FILES).unwrap() {
        let path = entry.unwrap().path();
        let version: i64 = path.file_name().unwrap().to_string_lossy()[..14]
            .parse()
            .unwrap();
        if version <= last {
            std::fs::copy(&path, folder.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    Migrator::new(folder.path()).await.unwrap()
}

async fn record_applied(pool: &PgPool, version: i64, checksum: &[u8]) {
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'test', true, $2, 0)",
    )
    .bind(version)
    .bind(checksum)
    .execute(pool)
    .await
    .unwrap();
}

async fn applied_versions(pool: &PgPool) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// An empty database beside the test's own, on the same server.
async fn another_database(pool: &PgPool, suffix: &str) -> PgPool {
    // PostgreSQL cuts names at 63 bytes, and sqlx's test databases already use them all.
    let own = database_name(pool).await;
    let name = format!("{suffix}_{}", &own[own.len().saturating_sub(40)..]);
    sqlx::query(&format!(r#"DROP DATABASE IF EXISTS "{name}""#))
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(&format!(r#"CREATE DATABASE "{name}""#))
        .execute(pool)
        .await
        .unwrap();
    PgPoolOptions::new()
        .max_connections(2)
        .connect_with((*pool.connect_options()).clone().database(&name))
        .await
        .unwrap()
}

async fn drop_database(pool: &PgPool, other: PgPool) {
    let name = database_name(&other).await;
    other.close().await;
    // FORCE: a connection the pool just closed may not have left the server yet.
    sqlx::query(&format!(r#"DROP DATABASE "{name}" WITH (FORCE)"#))
        .execute(pool)
        .await
        .unwrap();
}

async fn database_name(pool: &PgPool) -> String {
    sqlx::query_scalar("SELECT current_database()::text")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Asserts that two databases hold the same schema: tables and their columns (by name:
/// a column added by a later migration sits at another position), constraints, indexes,
/// views, functions, triggers and types.
async fn assert_same_schema(upgraded: &PgPool, fresh: &PgPool) {
    let (upgraded, fresh) = (schema_of(upgraded).await, schema_of(fresh).await);
    let only_upgraded: Vec<_> = upgraded
        .iter()
        .filter(|line| !fresh.contains(line))
        .collect();
    let only_fresh: Vec<_> = fresh
        .iter()
        .filter(|line| !upgraded.contains(line))
        .collect();
    assert!(
        only_upgraded.is_empty() && only_fresh.is_empty(),
        "the schemas differ\nonly in the upgraded database: {only_upgraded:#?}\nonly in a fresh one: {only_fresh:#?}"
    );
    assert!(
        upgraded.len() > 100,
        "the snapshot reads the schema: {}",
        upgraded.len()
    );
}

/// The schema of `public`, one line per object, sorted; sqlx's ledger left out.
async fn schema_of(pool: &PgPool) -> Vec<String> {
    const SNAPSHOT: &str = r#"
        SELECT format('relation %s kind %s persistence %s', c.relname, c.relkind, c.relpersistence)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'S', 'p')
        UNION ALL
        SELECT format('column %s.%s %s null=%s default=%s', table_name, column_name,
                      udt_name, is_nullable, column_default)
        FROM information_schema.columns WHERE table_schema = 'public'
        UNION ALL
        SELECT format('constraint %s on %s: %s', conname, conrelid::regclass, pg_get_constraintdef(oid))
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
        UNION ALL
        SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
        UNION ALL
        SELECT 'view ' || viewname || ': ' || definition FROM pg_views WHERE schemaname = 'public'
        UNION ALL
        SELECT 'function ' || pg_get_functiondef(p.oid)
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
        UNION ALL
        SELECT 'trigger ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
        UNION ALL
        SELECT 'type ' || t.typname || ': ' || string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder)
        FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid
        WHERE t.typnamespace = 'public'::regnamespace GROUP BY t.typname
    "#;
    let mut lines: Vec<String> = sqlx::query_scalar(SNAPSHOT).fetch_all(pool).await.unwrap();
    lines.retain(|line| !line.contains("_sqlx_migrations"));
    lines.sort();
    lines
}
