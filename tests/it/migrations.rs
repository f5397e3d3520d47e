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
//!
//! Until 2026-12-07 both folders were recorded in sqlx's one `_sqlx_migrations`. The
//! engine keeps its own ledger now (`standmeet_job_migrations`), and moves its rows there
//! from a database made before.

use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;

/// The last migration an earlier build held.
const LAST_VERSION_BEFORE_THE_SPLIT: i64 = 20261204000001;
/// The last migration a build held while one ledger recorded both folders.
const LAST_VERSION_WITH_ONE_LEDGER: i64 = 20261207000001;
/// The application's migration that builds with one ledger do not know.
const MARKER_OF_THE_ENGINES_LEDGER: i64 = 20261207000002;
const RETIRED_FILES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/retired-migrations"
);
const ENGINE_FILES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/standmeet-jobs/migrations"
);
const APP_FILES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");

#[sqlx::test(migrations = false)]
async fn a_database_migrated_by_an_earlier_build_upgrades_to_the_schema_a_fresh_one_gets(
    pool: PgPool,
) {
    let old_layout = old_layout(LAST_VERSION_BEFORE_THE_SPLIT).await;
    old_layout.run(&pool).await.expect("the old layout applies");
    let job = insert_a_job(&pool).await;

    migrate_twice(&pool).await;

    let fresh = another_database(&pool, "fresh").await;
    standmeet::db::migrate(&fresh).await.unwrap();
    assert_same_schema(&pool, &fresh).await;

    assert!(job_is_there(&pool, job).await, "the upgrade keeps the rows");
    let versions = applied_versions(&pool).await;
    assert!(
        versions.contains(&20261130000001),
        "the retired one stays in the ledger"
    );
    assert!(versions.contains(&20261204000003));
    assert!(engine_versions(&pool).await.contains(&20261204000002));
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
    assert!(versions.contains(&20261130000002), "{versions:?}");
    assert!(engine_versions(&pool).await.contains(&20261207000001));

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

    // A newer job engine's migration, in the engine's own ledger.
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 20261130000001")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO standmeet_job_migrations (version, description, checksum)
         VALUES (29991231000001, 'from a newer engine', '\\x00')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let refused = standmeet::db::migrate(&pool).await.unwrap_err();
    let words = format!("{refused:#}");
    assert!(
        words.contains("29991231000001") && words.contains("newer build"),
        "{words}"
    );
}

/// A database made while one ledger recorded both folders (today's main until the
/// engine kept its own): the engine's rows move to its ledger as they were (version,
/// checksum, time), none of its migrations runs again, the application's rows stay,
/// the jobs stay, and the schema is a fresh database's.
#[sqlx::test(migrations = false)]
async fn a_database_made_with_one_ledger_gives_the_engine_its_history_and_keeps_its_jobs(
    pool: PgPool,
) {
    old_layout(LAST_VERSION_WITH_ONE_LEDGER)
        .await
        .run(&pool)
        .await
        .expect("the layout with one ledger applies");
    let job = insert_a_job(&pool).await;
    // The engine's 20261202000001 drops and makes this trigger again: a run of it would
    // lose the comment.
    sqlx::query("COMMENT ON TRIGGER jobs_notify_available ON jobs IS 'tripwire'")
        .execute(&pool)
        .await
        .unwrap();
    let engine: Vec<i64> = standmeet_jobs::migration_versions().collect();
    let (engine_before, app_before): (Vec<LedgerRow>, Vec<LedgerRow>) =
        ledger_rows(&pool, "_sqlx_migrations")
            .await
            .into_iter()
            .partition(|row| engine.contains(&row.0));
    assert_eq!(
        engine_before.len(),
        engine.len(),
        "the old layout has them all"
    );

    migrate_twice(&pool).await;

    assert_moved_not_applied_again(&pool, &engine_before).await;
    let shared_now = ledger_rows(&pool, "_sqlx_migrations").await;
    assert!(
        shared_now.iter().all(|row| !engine.contains(&row.0)),
        "no engine migration is left in sqlx's ledger"
    );
    assert!(
        app_before.iter().all(|row| shared_now.contains(row)),
        "the application's rows are as they were"
    );
    assert!(
        shared_now
            .iter()
            .any(|row| row.0 == MARKER_OF_THE_ENGINES_LEDGER),
        "the marker that builds with one ledger refuse"
    );
    let comment: Option<String> = sqlx::query_scalar(
        "SELECT obj_description(oid, 'pg_trigger') FROM pg_trigger
         WHERE tgname = 'jobs_notify_available'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(comment.as_deref(), Some("tripwire"));
    assert!(job_is_there(&pool, job).await, "the upgrade keeps the jobs");

    let fresh = another_database(&pool, "fresh").await;
    standmeet::db::migrate(&fresh).await.unwrap();
    assert_same_schema(&pool, &fresh).await;
    let fresh_engine = ledger_rows(&fresh, "standmeet_job_migrations").await;
    let checksums = |rows: &[LedgerRow]| {
        rows.iter()
            .map(|row| (row.0, row.1.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(checksums(&fresh_engine), checksums(&engine_before));
    drop_database(&pool, fresh).await;
}

/// An engine migration whose record in the shared ledger is not its file's is refused
/// in words, and nothing moves.
#[sqlx::test(migrations = false)]
async fn an_engine_migration_changed_by_hand_in_the_shared_ledger_is_refused_and_nothing_moves(
    pool: PgPool,
) {
    one_ledger_tampered_is_refused_and_nothing_moves(
        &pool,
        "UPDATE _sqlx_migrations SET checksum = '\\x00' WHERE version = 20261202000003",
        ["20261202000003", "changed by hand"],
    )
    .await;
}

/// Two copies upgrading one database at once (a rolling restart): each engine migration
/// moves once, and both start.
#[sqlx::test(migrations = false)]
async fn two_copies_upgrading_at_once_move_each_migration_once(pool: PgPool) {
    old_layout(LAST_VERSION_WITH_ONE_LEDGER)
        .await
        .run(&pool)
        .await
        .unwrap();
    let engine: Vec<i64> = standmeet_jobs::migration_versions().collect();
    let engine_before: Vec<LedgerRow> = ledger_rows(&pool, "_sqlx_migrations")
        .await
        .into_iter()
        .filter(|row| engine.contains(&row.0))
        .collect();
    let (first, second) =
        tokio::join!(standmeet::db::migrate(&pool), standmeet::db::migrate(&pool));
    first.unwrap();
    second.unwrap();
    assert_moved_not_applied_again(&pool, &engine_before).await;
    assert!(
        applied_versions(&pool)
            .await
            .iter()
            .all(|version| !engine.contains(version))
    );

    // The engine's own lock is enough without the application's.
    let other = another_database(&pool, "both").await;
    old_layout(LAST_VERSION_WITH_ONE_LEDGER)
        .await
        .run(&other)
        .await
        .unwrap();
    let mut one = other.acquire().await.unwrap();
    let mut two = other.acquire().await.unwrap();
    let (a, b) = tokio::join!(
        standmeet_jobs::migrate(&mut one),
        standmeet_jobs::migrate(&mut two)
    );
    drop((one, two));
    let (a, b) = (a.unwrap(), b.unwrap());
    let mut adopted = [a.adopted, b.adopted].concat();
    adopted.sort_unstable();
    assert_eq!(adopted, engine, "each moved by one of them");
    assert!(a.applied.is_empty() && b.applied.is_empty());
    drop_database(&pool, other).await;
}

/// An upgrade cut short once the engine's rows have moved (here: the record of the
/// engine's first migration was lost, and running it again fails, as `jobs` exists)
/// leaves the database as a build with one ledger left it: no marker, no engine
/// ledger, every row in sqlx's. Such a build runs on it as before, and refuses it in
/// words once an upgrade has gone through.
#[sqlx::test(migrations = false)]
async fn an_upgrade_cut_short_leaves_the_database_as_a_build_with_one_ledger_left_it(pool: PgPool) {
    let one_ledger = old_layout(LAST_VERSION_WITH_ONE_LEDGER).await;
    one_ledger.run(&pool).await.unwrap();
    let job = insert_a_job(&pool).await;
    let first = standmeet_jobs::migration_versions().next().unwrap();
    let lost: SqlxLedgerRow = sqlx::query_as(
        "DELETE FROM _sqlx_migrations WHERE version = $1
         RETURNING version, description, installed_on, success, checksum, execution_time",
    )
    .bind(first)
    .fetch_one(&pool)
    .await
    .unwrap();
    let before = ledger_rows(&pool, "_sqlx_migrations").await;

    let failed = standmeet::db::migrate(&pool).await.unwrap_err();
    assert!(
        format!("{failed:#}").contains("job engine's migrations"),
        "{failed:#}"
    );
    assert_eq!(ledger_rows(&pool, "_sqlx_migrations").await, before);
    assert!(
        !applied_versions(&pool)
            .await
            .contains(&MARKER_OF_THE_ENGINES_LEDGER)
    );
    assert_eq!(table(&pool, "standmeet_job_migrations").await, None);
    assert!(job_is_there(&pool, job).await);

    // The record comes back (a backup, say): the build with one ledger runs as before.
    sqlx::query(
        "INSERT INTO _sqlx_migrations
             (version, description, installed_on, success, checksum, execution_time)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(lost.0)
    .bind(&lost.1)
    .bind(lost.2)
    .bind(lost.3)
    .bind(&lost.4)
    .bind(lost.5)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(
        refusal_of_a_build_with_one_ledger(&pool, &one_ledger).await,
        None
    );
    one_ledger.run(&pool).await.expect("nothing to do for it");

    // Upgraded, the database is one such a build refuses, naming the marker.
    standmeet::db::migrate(&pool).await.unwrap();
    assert_eq!(
        refusal_of_a_build_with_one_ledger(&pool, &one_ledger).await,
        Some(MARKER_OF_THE_ENGINES_LEDGER)
    );
    assert!(job_is_there(&pool, job).await);
}

/// An engine migration marked failed in the shared ledger (a run that died half way, as
/// sqlx records it) is refused in words, and nothing moves.
#[sqlx::test(migrations = false)]
async fn an_engine_migration_marked_failed_in_the_shared_ledger_is_refused_and_nothing_moves(
    pool: PgPool,
) {
    one_ledger_tampered_is_refused_and_nothing_moves(
        &pool,
        "UPDATE _sqlx_migrations SET success = false WHERE version = 20261205000001",
        ["20261205000001", "marked failed"],
    )
    .await;
}

/// An engine migration whose record in the engine's own ledger is not its file's is
/// refused in words; nothing is applied, in either ledger.
#[sqlx::test(migrations = false)]
async fn an_engine_migration_changed_by_hand_in_its_own_ledger_is_refused(pool: PgPool) {
    standmeet::db::migrate(&pool).await.unwrap();
    let file_checksum: Vec<u8> = sqlx::query_scalar(
        "SELECT checksum FROM standmeet_job_migrations WHERE version = 20261202000003",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE standmeet_job_migrations SET checksum = '\\x00' WHERE version = 20261202000003",
    )
    .execute(&pool)
    .await
    .unwrap();
    let engine_last = lose_the_engines_newest_record(&pool).await;
    let engine_before = ledger_rows(&pool, "standmeet_job_migrations").await;
    let app_before = ledger_rows(&pool, "_sqlx_migrations").await;

    let refused = standmeet::db::migrate(&pool).await.unwrap_err();
    let words = format!("{refused:#}");
    assert!(
        words.contains("20261202000003") && words.contains("changed by hand"),
        "{words}"
    );
    assert_eq!(
        ledger_rows(&pool, "standmeet_job_migrations").await,
        engine_before
    );
    assert_eq!(ledger_rows(&pool, "_sqlx_migrations").await, app_before);

    // Put right, the same upgrade applies it again: the refusal came first.
    sqlx::query("UPDATE standmeet_job_migrations SET checksum = $1 WHERE version = 20261202000003")
        .bind(file_checksum)
        .execute(&pool)
        .await
        .unwrap();
    standmeet::db::migrate(&pool).await.unwrap();
    assert!(engine_versions(&pool).await.contains(&engine_last));
}

/// One of our migrations changed by hand, or marked failed, is refused before the
/// engine's part changes anything (sqlx alone would find it only after).
#[sqlx::test(migrations = false)]
async fn an_application_migration_changed_or_failed_is_refused_before_the_engine_runs(
    pool: PgPool,
) {
    standmeet::db::migrate(&pool).await.unwrap();
    let engine_last = lose_the_engines_newest_record(&pool).await;
    for (tamper, words) in [
        (
            "UPDATE _sqlx_migrations SET checksum = '\\x00' WHERE version = 20261204000003",
            "changed by hand",
        ),
        (
            "UPDATE _sqlx_migrations SET success = false WHERE version = 20261204000003",
            "marked failed",
        ),
    ] {
        let applied = ledger_rows(&pool, "_sqlx_migrations").await;
        let original: Vec<u8> = applied
            .iter()
            .find(|row| row.0 == 20261204000003)
            .unwrap()
            .1
            .clone();
        sqlx::query(tamper).execute(&pool).await.unwrap();
        let refused = standmeet::db::migrate(&pool).await.unwrap_err();
        let said = format!("{refused:#}");
        assert!(
            said.contains("20261204000003") && said.contains(words),
            "{said}"
        );
        assert!(!engine_versions(&pool).await.contains(&engine_last));
        sqlx::query(
            "UPDATE _sqlx_migrations SET checksum = $1, success = true WHERE version = 20261204000003",
        )
        .bind(original)
        .execute(&pool)
        .await
        .unwrap();
    }
    standmeet::db::migrate(&pool).await.unwrap();
    assert!(engine_versions(&pool).await.contains(&engine_last));
}

/// A version number names one migration: the engine's rows move between ledgers by it.
#[test]
fn no_version_is_both_the_engines_and_the_applications() {
    let engine: Vec<i64> = standmeet_jobs::migration_versions().collect();
    let shared: Vec<i64> = standmeet::db::migration_versions()
        .chain(standmeet::db::RETIRED.iter().map(|(version, _)| *version))
        .filter(|version| engine.contains(version))
        .collect();
    assert!(shared.is_empty(), "{shared:?}");
    assert!(
        standmeet::db::migration_versions().any(|version| version == MARKER_OF_THE_ENGINES_LEDGER)
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

/// The migrations an earlier build applied, up to `last`, as one list in version order
/// (the engine's, the application's and the retired ones, as builds with one ledger
/// recorded them).
async fn old_layout(last: i64) -> Migrator {
    let folder = tempfile::tempdir().unwrap();
    for source in [ENGINE_FILES, APP_FILES, RETIRED_FILES] {
        for entry in std::fs::read_dir(source).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let Some(version) = name.get(..14).and_then(|digits| digits.parse::<i64>().ok()) else {
                continue; // README.md
            };
            if version <= last {
                std::fs::copy(&path, folder.path().join(&name)).unwrap();
            }
        }
    }
    let mut migrator = Migrator::new(folder.path()).await.unwrap();
    migrator.set_ignore_missing(true);
    migrator
}

/// A database made with one ledger, then changed by `tamper`: the upgrade is refused
/// with each of `words` in its message, sqlx's ledger is as it was, and the engine's
/// was never made (its transaction rolled back).
async fn one_ledger_tampered_is_refused_and_nothing_moves(
    pool: &PgPool,
    tamper: &str,
    words: [&str; 2],
) {
    old_layout(LAST_VERSION_WITH_ONE_LEDGER)
        .await
        .run(pool)
        .await
        .unwrap();
    sqlx::query(tamper).execute(pool).await.unwrap();
    let before = ledger_rows(pool, "_sqlx_migrations").await;

    let refused = standmeet::db::migrate(pool).await.unwrap_err();
    let said = format!("{refused:#}");
    assert!(words.iter().all(|word| said.contains(word)), "{said}");
    assert_eq!(ledger_rows(pool, "_sqlx_migrations").await, before);
    assert_eq!(table(pool, "standmeet_job_migrations").await, None);
}

/// Deletes the engine's record of its newest migration, whose file (`CREATE OR REPLACE
/// VIEW`) runs again without error: an upgrade that ran the engine brings the record
/// back, so one refused before it does not. Answers its version.
async fn lose_the_engines_newest_record(pool: &PgPool) -> i64 {
    let newest = standmeet_jobs::migration_versions().last().unwrap();
    sqlx::query("DELETE FROM standmeet_job_migrations WHERE version = $1")
        .bind(newest)
        .execute(pool)
        .await
        .unwrap();
    newest
}

/// Both runs of an upgrade: the first needs no manual step, the second finds nothing
/// to do.
async fn migrate_twice(pool: &PgPool) {
    standmeet::db::migrate(pool)
        .await
        .expect("the upgrade needs no manual step");
    standmeet::db::migrate(pool)
        .await
        .expect("and a second run finds nothing to do");
}

/// The engine's ledger holds `engine_before` (its rows in the shared ledger before the
/// upgrade) as they were, each marked as moved from there: a migration applied again
/// would have a new time and no `adopted_from`.
async fn assert_moved_not_applied_again(pool: &PgPool, engine_before: &[LedgerRow]) {
    assert_eq!(
        ledger_rows(pool, "standmeet_job_migrations").await,
        engine_before,
        "the same versions, checksums and times: moved, not applied again"
    );
    let adopted_from: Vec<Option<String>> =
        sqlx::query_scalar("SELECT adopted_from FROM standmeet_job_migrations")
            .fetch_all(pool)
            .await
            .unwrap();
    assert!(
        adopted_from
            .iter()
            .all(|from| from.as_deref() == Some("_sqlx_migrations")),
        "{adopted_from:?}"
    );
}

/// What a build with one ledger (`one_ledger`, its list) checked before migrating: the
/// first version in `_sqlx_migrations` it does not know, which it refused in words.
async fn refusal_of_a_build_with_one_ledger(pool: &PgPool, one_ledger: &Migrator) -> Option<i64> {
    applied_versions(pool)
        .await
        .into_iter()
        .find(|version| !one_ledger.version_exists(*version))
}

/// The table's name when it exists.
async fn table(pool: &PgPool, name: &str) -> Option<String> {
    sqlx::query_scalar("SELECT to_regclass($1)::text")
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Inserts a job as any build could (plain SQL), for an upgrade to keep.
async fn insert_a_job(pool: &PgPool) -> i64 {
    sqlx::query_scalar("INSERT INTO jobs (kind, args) VALUES ('system.noop', '{}') RETURNING id")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn job_is_there(pool: &PgPool, job: i64) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT FROM jobs WHERE id = $1)")
        .bind(job)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A row of a ledger: version, checksum and when it was applied.
type LedgerRow = (i64, Vec<u8>, time::OffsetDateTime);
/// A whole row of sqlx's ledger: version, description, installed_on, success, checksum
/// and execution_time.
type SqlxLedgerRow = (i64, String, time::OffsetDateTime, bool, Vec<u8>, i64);

async fn ledger_rows(pool: &PgPool, ledger: &str) -> Vec<LedgerRow> {
    sqlx::query_as(&format!(
        "SELECT version, checksum, installed_on FROM {ledger} ORDER BY version"
    ))
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn engine_versions(pool: &PgPool) -> Vec<i64> {
    sqlx::query_scalar("SELECT version FROM standmeet_job_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap()
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
