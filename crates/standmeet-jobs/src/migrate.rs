//! The engine's schema and its own record of it: [`migrate`] applies the files under
//! this crate's `migrations/` and records each in `standmeet_job_migrations`, a table
//! no one else writes, as River's `rivermigrate` keeps `river_migration`. An
//! application sharing the database keeps its own migrations in its own ledger (sqlx's
//! `_sqlx_migrations`, say) with versions of its own, and calls [`migrate`] first: the
//! engine's files refer to none of its tables, and its own may refer to `jobs`.
//!
//! Until December 2026 StandMeet recorded both sets in `_sqlx_migrations`. A database
//! made then has the engine's rows there: [`migrate`] moves them into its own table
//! (checksums compared, times kept) before anything else, so that nothing runs twice.
//!
//! Every step is one transaction that first takes a lock of its own
//! (`pg_advisory_xact_lock`), so processes that start at once apply each migration
//! once, and a failure leaves no lock behind on a pooled connection.

use std::time::Instant;

use sqlx::migrate::Migration;
use sqlx::{Connection, PgConnection};

use crate::error::Error;

/// The files under `migrations/`, compiled in. sqlx reads and checksums them (SHA-384 of
/// the file, as it recorded them in `_sqlx_migrations`); this module applies them.
static FILES: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The table the engine records its migrations in.
pub const MIGRATION_TABLE: &str = "standmeet_job_migrations";

/// The ledger where StandMeet recorded the engine's migrations before they had their own.
const SHARED_LEDGER: &str = "_sqlx_migrations";

/// Taken at the start of each of [`migrate`]'s transactions. One 64-bit key, which no
/// two-key lock of the claim slots can equal.
const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended('standmeet_jobs.migrate', 0))";

/// What one call of [`migrate`] did, each list oldest first.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Migrated {
    /// Versions found in `_sqlx_migrations` and moved to the engine's table, unapplied.
    pub adopted: Vec<i64>,
    /// Versions applied by this call.
    pub applied: Vec<i64>,
}

/// The versions of the engine's migrations this build holds, oldest first: an
/// application that checks its database for versions no build of it knows counts
/// these among its own until [`migrate`] has moved them out of a shared ledger.
pub fn migration_versions() -> impl Iterator<Item = i64> {
    FILES.iter().map(|migration| migration.version)
}

/// Brings the engine's schema in the connection's database up to date, recording each
/// migration in [`MIGRATION_TABLE`]; what a database made with one shared ledger holds
/// of them is moved there first. Safe to call from several processes at once, and
/// again: a database that is up to date answers [`Migrated::default`].
///
/// Refused, with nothing changed, before any migration is applied: a database that holds
/// an engine migration this build does not know (a newer build migrated it), or one
/// whose record is not its file's (changed by hand, in either ledger), or one marked
/// failed. A migration that fails as it is applied is rolled back with its record;
/// those applied before it stay, each recorded.
///
/// Each step commits on its own. Called inside a transaction of the caller's, the steps
/// are savepoints of it and the whole call commits or rolls back with that transaction,
/// as StandMeet does to record a mark of its own in the same commit.
pub async fn migrate(conn: &mut PgConnection) -> Result<Migrated, Error> {
    let Ledger { adopted, recorded } = in_locked_transaction(conn, adopt).await?;
    let mut applied = Vec::new();
    // What the ledger recorded was compared with its file just now; the others are
    // looked at again under the lock, as another process may have applied them since.
    for migration in FILES.iter().filter(|m| !recorded.contains(&m.version)) {
        if in_locked_transaction(conn, async |tx| apply(tx, migration).await).await? {
            tracing::info!(
                version = migration.version,
                description = %migration.description,
                "job engine migration applied"
            );
            applied.push(migration.version);
        }
    }
    if !adopted.is_empty() {
        tracing::info!(
            versions = adopted.len(),
            "the job engine's migrations moved from {SHARED_LEDGER} to {MIGRATION_TABLE}"
        );
    }
    Ok(Migrated { adopted, applied })
}

/// Runs `step` in a transaction that first takes [`LOCK`], and ends it either way
/// before answering: a transaction left open (sqlx rolls a dropped one back only when
/// the connection is next used) would keep the lock from every other process.
async fn in_locked_transaction<T>(
    conn: &mut PgConnection,
    step: impl AsyncFnOnce(&mut PgConnection) -> Result<T, Error>,
) -> Result<T, Error> {
    let mut tx = conn.begin().await.map_err(Error::from_database)?;
    let done = match sqlx::query(LOCK).execute(&mut *tx).await {
        Ok(_) => step(&mut tx).await,
        Err(err) => Err(Error::from_database(err)),
    };
    match done {
        Ok(answer) => {
            tx.commit().await.map_err(Error::from_database)?;
            Ok(answer)
        }
        Err(err) => {
            // The step's own error is the one to answer; the connection's failure to
            // roll back (a lost connection rolls back by itself) would hide it.
            let _ = tx.rollback().await;
            Err(err)
        }
    }
}

/// Applies `migration` unless the engine's ledger records it: whether it did.
async fn apply(tx: &mut PgConnection, migration: &Migration) -> Result<bool, Error> {
    let recorded: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT checksum FROM standmeet_job_migrations WHERE version = $1")
            .bind(migration.version)
            .fetch_optional(&mut *tx)
            .await
            .map_err(Error::from_database)?;
    match recorded {
        Some(checksum) if checksum[..] == migration.checksum[..] => return Ok(false),
        Some(_) => return Err(changed_by_hand(migration.version)),
        None => {}
    }
    let started = Instant::now();
    sqlx::Executor::execute(&mut *tx, sqlx::raw_sql(&migration.sql))
        .await
        .map_err(Error::from_database)?;
    sqlx::query(
        "INSERT INTO standmeet_job_migrations (version, description, checksum, execution_ms)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(migration.version)
    .bind(&*migration.description)
    .bind(&*migration.checksum)
    .bind(i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX))
    .execute(&mut *tx)
    .await
    .map_err(Error::from_database)?;
    Ok(true)
}

/// Makes the engine's table if there is none, refuses versions this build does not
/// know and records that are not their files', and moves the engine's rows out of the
/// shared ledger: the versions moved. One transaction: a refusal changes nothing.
async fn adopt(tx: &mut PgConnection) -> Result<Ledger, Error> {
    let known: Vec<i64> = migration_versions().collect();
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS standmeet_job_migrations (
             version      bigint PRIMARY KEY,
             description  text NOT NULL,
             -- SHA-384 of the file, as sqlx computes it.
             checksum     bytea NOT NULL,
             installed_on timestamptz NOT NULL DEFAULT now(),
             -- NULL when not known (a row moved from a ledger that lost it).
             execution_ms bigint,
             -- The ledger a row was moved from; NULL for a migration applied here.
             adopted_from text
         )",
    )
    .execute(&mut *tx)
    .await
    .map_err(Error::from_database)?;

    let unknown: Option<i64> = sqlx::query_scalar(
        "SELECT max(version) FROM standmeet_job_migrations WHERE NOT (version = ANY($1))",
    )
    .bind(&known)
    .fetch_one(&mut *tx)
    .await
    .map_err(Error::from_database)?;
    if let Some(version) = unknown {
        return Err(Error::Refused(format!(
            "the database's job schema holds migration {version}, which this build of the \
             job engine does not know: a newer build migrated it. Run that build (or a newer \
             one), or restore a backup taken before the upgrade"
        )));
    }

    let shared: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
        .bind(SHARED_LEDGER)
        .fetch_one(&mut *tx)
        .await
        .map_err(Error::from_database)?;
    let rows: Vec<(i64, bool, Vec<u8>)> = match shared {
        None => Vec::new(),
        Some(_) => sqlx::query_as(
            "SELECT version, success, checksum FROM _sqlx_migrations
             WHERE version = ANY($1) ORDER BY version FOR UPDATE",
        )
        .bind(&known)
        .fetch_all(&mut *tx)
        .await
        .map_err(Error::from_database)?,
    };
    for (version, success, checksum) in &rows {
        if !success {
            return Err(Error::Refused(format!(
                "the job engine's migration {version} is marked failed in {SHARED_LEDGER}: \
                 the database was left half migrated; restore a backup taken before it"
            )));
        }
        if !matches_its_file(*version, checksum) {
            return Err(changed_by_hand(*version));
        }
    }
    let moved = if rows.is_empty() {
        Vec::new()
    } else {
        move_out_of_the_shared_ledger(tx, &known).await?
    };
    // Every record is its file's, moved or not, before any migration is applied: one
    // changed by hand is refused with nothing changed. A version found in both ledgers
    // has been compared with its file in each, so the row the move kept is the same.
    let recorded: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT version, checksum FROM standmeet_job_migrations ORDER BY version")
            .fetch_all(&mut *tx)
            .await
            .map_err(Error::from_database)?;
    if let Some((version, _)) = recorded
        .iter()
        .find(|(version, checksum)| !matches_its_file(*version, checksum))
    {
        return Err(changed_by_hand(*version));
    }
    Ok(Ledger {
        adopted: moved,
        recorded: recorded.into_iter().map(|(version, _)| version).collect(),
    })
}

/// What [`adopt`] found: the versions it moved, and every version the engine's ledger
/// records once it is done (those moved among them).
struct Ledger {
    adopted: Vec<i64>,
    recorded: Vec<i64>,
}

/// Whether `checksum` is the one of this build's file for `version` (a version it does
/// not hold is refused before this is asked).
fn matches_its_file(version: i64, checksum: &[u8]) -> bool {
    FILES
        .iter()
        .find(|file| file.version == version)
        .is_none_or(|file| file.checksum[..] == checksum[..])
}

/// Moves the rows of `known` versions from the shared ledger to the engine's: the
/// versions it inserted. A version already in both (only a hand or an interrupted
/// tool puts it there) keeps the engine's row, whose checksum [`adopt`] compares.
async fn move_out_of_the_shared_ledger(
    tx: &mut PgConnection,
    known: &[i64],
) -> Result<Vec<i64>, Error> {
    // sqlx records how long a migration took in nanoseconds, -1 when it lost the figure.
    let mut moved: Vec<i64> = sqlx::query_scalar(
        "WITH moved AS (
             DELETE FROM _sqlx_migrations WHERE version = ANY($1)
             RETURNING version, description, checksum, installed_on, execution_time
         )
         INSERT INTO standmeet_job_migrations
             (version, description, checksum, installed_on, execution_ms, adopted_from)
         SELECT version, description, checksum, installed_on,
                CASE WHEN execution_time >= 0 THEN execution_time / 1000000 END, $2
         FROM moved
         ON CONFLICT (version) DO NOTHING
         RETURNING version",
    )
    .bind(known)
    .bind(SHARED_LEDGER)
    .fetch_all(&mut *tx)
    .await
    .map_err(Error::from_database)?;
    moved.sort_unstable();
    Ok(moved)
}

fn changed_by_hand(version: i64) -> Error {
    Error::Refused(format!(
        "the job engine's migration {version} in the database is not the one this build \
         holds (its checksum differs): its file or the database's record of it was changed \
         by hand; restore a backup taken before that"
    ))
}

#[cfg(test)]
mod tests {
    use sqlx::migrate::MigrationType;

    use super::*;

    #[test]
    fn every_file_runs_in_a_transaction_forward_only() {
        // `migrate` applies each file and records it in one transaction, and has no
        // way back: a `-- no-transaction` file or a down migration would break that.
        for migration in FILES.iter() {
            assert_eq!(
                migration.migration_type,
                MigrationType::Simple,
                "{}",
                migration.version
            );
            assert!(
                !migration.no_tx,
                "{} asks to run outside a transaction",
                migration.version
            );
            assert!(
                !migration.description.is_empty(),
                "{} has no description",
                migration.version
            );
        }
    }

    #[test]
    fn versions_are_in_order_and_unique() {
        let versions: Vec<i64> = migration_versions().collect();
        assert!(!versions.is_empty());
        assert!(
            versions.windows(2).all(|pair| pair[0] < pair[1]),
            "{versions:?}"
        );
    }
}
