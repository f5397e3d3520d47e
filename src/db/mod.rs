//! The database: the connection pool, migrations, and the private cluster used when
//! `DATABASE_URL` is unset.

pub mod private_cluster;

use std::sync::LazyLock;
use std::time::Duration;

use anyhow::Context;
use sqlx::migrate::{Migrate, MigrateDatabase, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool, Postgres};

pub use private_cluster::PrivateCluster;

/// The name of the database StandMeet uses in its private cluster.
pub const PRIVATE_DATABASE: &str = "standmeet";

/// The application's own migrations, under `migrations/`, compiled into the binary and
/// recorded in sqlx's `_sqlx_migrations`. The job engine's are not among them: it keeps
/// its own (`standmeet_jobs::migrate`, recorded in `standmeet_job_migrations`), and
/// [`migrate`] applies them first, since ours refer to `jobs`.
///
/// Versions the list does not hold are not refused by sqlx (`ignore_missing`): the
/// [`RETIRED`] ones (the engine's have left this ledger by the time it runs);
/// [`migrate`] refuses the others itself, before anything is applied. It holds sqlx's
/// lock for the whole upgrade, so this list takes none of its own.
static APP_MIGRATIONS: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.set_ignore_missing(true);
    migrator.set_locking(false);
    migrator
});

/// The versions of the application's own migrations, oldest first.
pub fn migration_versions() -> impl Iterator<Item = i64> {
    APP_MIGRATIONS.iter().map(|migration| migration.version)
}

/// Migrations a database may have applied that no longer exist as files, by version and
/// the checksum sqlx recorded (SHA-384 of the file, in hex). Each was replaced by new
/// migrations that leave a database that had it as it is.
///
/// - 20261130000001 (`faults`) held the engine's `job_workers` and the application's
///   `access_codes`, `owner_email_change_tokens` and `mail_log.state`. The engine's
///   `20261204000002_job_workers` and our `20261204000003_access_codes` create them
///   where they are missing.
/// - 20261130000002 (`job_status_view`) defined the `job_status` view over the engine's
///   `jobs`. The engine publishes that view now (its `20261207000001_job_status_view`
///   replaces ours with the same columns and one more).
///
/// Their files are kept in `tests/fixtures/retired-migrations/`.
pub const RETIRED: &[(i64, &str)] = &[
    (
        20261130000001,
        "58b23bd8ed781da140ebd1562d497ac8a2f69c74fcc61442c06b80ec3c8a9cece38a5cf2b514ac35b176569ebd2937f2",
    ),
    (
        20261130000002,
        "2ad509c41b108674cc1272a1bec0c0d5f4de2af157b437d2bbf5f5f6bd94030e35f48b7af393b6e0e52e9df91ec70a72",
    ),
];

/// Where the database comes from: the operator's server, or our own cluster.
pub enum DatabaseSource {
    External(String),
    Private(PrivateCluster),
}

impl DatabaseSource {
    pub fn url(&self) -> String {
        match self {
            DatabaseSource::External(url) => url.clone(),
            DatabaseSource::Private(cluster) => cluster.database_url(PRIVATE_DATABASE),
        }
    }

    /// Stops the private cluster if this process started it.
    pub fn shut_down(self) -> anyhow::Result<()> {
        match self {
            DatabaseSource::External(_) => Ok(()),
            DatabaseSource::Private(cluster) => cluster.stop(),
        }
    }
}

/// Creates the database named in `url` when it does not exist yet (a fresh private
/// cluster, or a new database on an operator's server), then opens a pool of
/// [`APP_POOL_SIZE`] connections to it.
pub async fn connect(url: &str) -> anyhow::Result<PgPool> {
    connect_sized(url, APP_POOL_SIZE).await
}

/// [`connect`] with a pool of at most `size` connections (`STANDMEET_DB_POOL_SIZE`).
pub async fn connect_sized(url: &str, size: u32) -> anyhow::Result<PgPool> {
    connect_waiting(url, size, Duration::ZERO).await
}

/// [`connect_sized`], waiting up to `patience` for a server that does not answer yet
/// (`STANDMEET_DATABASE_WAIT_MS`): at boot PostgreSQL may come up after StandMeet, and
/// a unit that fails at once is soon given up by its service manager. It tries again
/// with backoff (a quarter second, doubling to five), saying so in the log each time;
/// what is not a matter of waiting (a wrong password, a role that may not create the
/// database) fails at once.
pub async fn connect_waiting(url: &str, size: u32, patience: Duration) -> anyhow::Result<PgPool> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut pause = Duration::from_millis(250);
    let exists = loop {
        match Postgres::database_exists(url).await {
            Ok(exists) => break exists,
            Err(err)
                if not_answering_yet(&err) && tokio::time::Instant::now() + pause <= deadline =>
            {
                tracing::warn!(
                    error = crate::causes::error_chain(&err),
                    retry_in_ms = pause.as_millis() as u64,
                    "PostgreSQL does not answer yet; trying again"
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(err) => return Err(err).context("cannot reach PostgreSQL"),
        }
    };
    if !exists {
        tracing::info!("creating the database, which does not exist yet");
        Postgres::create_database(url)
            .await
            .context("the database does not exist and cannot be created")?;
    }

    let options: PgConnectOptions = url
        .parse()
        .context("DATABASE_URL is not a valid PostgreSQL URL")?;
    let options = options
        .application_name("standmeet")
        // Statements are logged at debug level only. A request's statement that takes a
        // few seconds is worth an operator's look (the pages' own take milliseconds).
        .log_statements(log::LevelFilter::Debug)
        .log_slow_statements(log::LevelFilter::Warn, SLOW_REQUEST_STATEMENT);
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(5))
        // A request that waited two seconds for a connection (sqlx's threshold) is
        // worth a warning: the pool is too small for the load.
        .acquire_slow_level(log::LevelFilter::Warn)
        .connect_with(options)
        .await
        .context("cannot connect to PostgreSQL")
}

/// Whether `err` is a server that is not there yet or not ready yet (refused, timed
/// out, starting up or shutting down: SQLSTATE 57P03), rather than one that said no.
fn not_answering_yet(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => db.code().as_deref() == Some("57P03"),
        _ => false,
    }
}

/// A request's statement slower than this is logged as a warning (an operator's job
/// action waits up to a second for a row by design: see `OPERATOR_LOCK_WAIT`).
const SLOW_REQUEST_STATEMENT: Duration = Duration::from_secs(2);

/// Connections for requests (pages, server functions, MCP), unless
/// `STANDMEET_DB_POOL_SIZE` says otherwise.
pub const APP_POOL_SIZE: u32 = 16;
/// Connections of the job engine's pool beyond what its claims need (see
/// [`engine_pool`]): for handlers' own queries.
const ENGINE_HANDLER_CONNECTIONS: u32 = 6;

/// A pool for the job engine's claims and handlers, to the same database as `app`:
/// the `needed` connections the engine asks for (`EngineConfig::connections_needed`: one per
/// claim its queues may keep open at once, and a little room) and more for the
/// handlers (the engine refuses a pool without that room, and keeps a few more
/// connections of its own for its completer and chores; see `jobs::Engine::start`). They never wait behind public HTTP load for a connection.
/// Opens connections as needed. PostgreSQL probes an engine connection that has gone
/// quiet (TCP keepalives), so that the session of a peer cut off without a reset ends
/// in about half a minute rather than two hours.
///
/// The engine's statements wait their turn under load by design (a claim behind a
/// slot, a heartbeat behind a checkpoint on a busy machine), and its waits for a
/// connection are what a database restart looks like: both are logged at info, not as
/// warnings. What fails, the engine reports itself.
pub fn engine_pool(app: &PgPool, needed: u32) -> PgPool {
    // Tried before use only after a quiet second (`standmeet_jobs::pool_options`).
    standmeet_jobs::JobRuntime::pool_options()
        .max_connections(engine_pool_size(needed))
        .acquire_timeout(Duration::from_secs(5))
        .acquire_slow_level(log::LevelFilter::Info)
        .connect_lazy_with(
            (*app.connect_options())
                .clone()
                .application_name("standmeet-jobs")
                .log_slow_statements(log::LevelFilter::Info, SLOW_REQUEST_STATEMENT)
                .options([
                    ("tcp_keepalives_idle", "10"),
                    ("tcp_keepalives_interval", "5"),
                    ("tcp_keepalives_count", "3"),
                ]),
        )
}

/// The size of the pool [`engine_pool`] makes for an engine that needs `needed`.
pub fn engine_pool_size(needed: u32) -> u32 {
    needed + ENGINE_HANDLER_CONNECTIONS
}

/// Brings the schema up to date: the job engine's (`standmeet_jobs::migrate`), then
/// ours. Several copies of StandMeet may start at once: the whole upgrade holds sqlx's
/// advisory lock (the one builds before the engine kept its own ledger take too), so one
/// applies what is missing and the others find it done.
///
/// A database that holds a migration this build does not know was migrated by a newer
/// StandMeet (or changed by hand): it is refused before anything is applied. The
/// engine's part commits in one transaction with the marker that makes builds from
/// before its own ledger refuse the database in words (`record_the_marker`).
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    let mut conn = pool
        .acquire()
        .await
        .context("cannot reach the database to migrate it")?;
    // Whatever fails below, the session and the lock it holds end with it rather than
    // going back to the pool.
    conn.close_on_drop();
    conn.lock()
        .await
        .context("cannot take the lock that migrating the database holds")?;
    let holds_engine_rows = refuse_unknown_migrations(&mut conn).await?;
    if let Err(err) = apply(&mut conn, holds_engine_rows).await {
        return Err(explain_denied(err, &mut conn).await);
    }
    conn.unlock()
        .await
        .context("cannot release the lock that migrating the database holds")?;
    Ok(())
}

/// `holds_engine_rows`: whether `_sqlx_migrations` still records engine migrations (a
/// database made while one ledger recorded both folders, not upgraded yet).
async fn apply(conn: &mut PgConnection, holds_engine_rows: bool) -> anyhow::Result<()> {
    // sqlx's ledger first (as sqlx makes it), so that the marker is in it before the
    // engine changes anything: a start cut short after the engine's part, on a fresh
    // database too, leaves one that a build with one ledger refuses in words.
    conn.ensure_migrations_table()
        .await
        .context("cannot make the table that records the database's migrations")?;
    if holds_engine_rows {
        // The one upgrade that moves the engine's rows out of `_sqlx_migrations`
        // commits with the marker: cut short between the two, it would leave a
        // database with neither, which a build with one ledger would not refuse but
        // try to migrate again (and fail on the first table that exists). Its steps
        // are savepoints of this transaction. Other starts apply the engine's
        // migrations each in its own, as it does on its own.
        let mut tx = conn
            .begin()
            .await
            .context("cannot begin the job engine's migrations")?;
        let engine = match record_the_marker(&mut tx).await {
            Ok(()) => standmeet_jobs::migrate(&mut tx)
                .await
                .context("cannot apply the job engine's migrations"),
            Err(err) => Err(err),
        };
        match engine {
            Ok(_) => tx
                .commit()
                .await
                .context("cannot commit the job engine's migrations")?,
            Err(err) => {
                // The engine's error is the one to answer (a lost connection rolls
                // back by itself).
                let _ = tx.rollback().await;
                return Err(err);
            }
        }
    } else {
        record_the_marker(conn).await?;
        standmeet_jobs::migrate(conn)
            .await
            .context("cannot apply the job engine's migrations")?;
    }
    APP_MIGRATIONS
        .run(&mut *conn)
        .await
        .context("cannot apply the database migrations")?;
    Ok(())
}

/// The application's migration that builds with one ledger do not know, so that they
/// refuse a database whose engine has its own (see its file).
const MARKER_OF_THE_ENGINES_LEDGER: i64 = 20261207000002;

/// Records [`MARKER_OF_THE_ENGINES_LEDGER`] in `_sqlx_migrations` unless it is there,
/// before the engine's migrations change anything. Its file changes nothing, so
/// recording it unapplied is applying it; sqlx finds it recorded, with its own
/// checksum, and goes on with the others, whatever their order.
async fn record_the_marker(conn: &mut PgConnection) -> anyhow::Result<()> {
    let marker = APP_MIGRATIONS
        .iter()
        .find(|migration| migration.version == MARKER_OF_THE_ENGINES_LEDGER)
        .context("this build lacks the migration that marks the engine's own ledger")?;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, $2, true, $3, 0)
         ON CONFLICT (version) DO NOTHING",
    )
    .bind(marker.version)
    .bind(&*marker.description)
    .bind(&*marker.checksum)
    .execute(&mut *conn)
    .await
    .context("cannot record the migration that marks the engine's own ledger")?;
    Ok(())
}

/// `err`, with what to do about it when PostgreSQL refused to let the role create tables.
async fn explain_denied(err: anyhow::Error, conn: &mut PgConnection) -> anyhow::Error {
    let denied = err
        .chain()
        .filter_map(|cause| cause.downcast_ref::<sqlx::Error>())
        .filter_map(|sqlx| sqlx.as_database_error())
        .any(|db| db.code().as_deref() == Some("42501"));
    if !denied {
        return err;
    }
    // PostgreSQL 15 lets only a database's owner create tables in its public schema: a
    // database made by someone else for the role is the usual cause.
    let (role, database): (String, String) =
        sqlx::query_as("SELECT current_user::text, current_database()::text")
            .fetch_one(conn)
            .await
            .unwrap_or_else(|_| ("the role".into(), "the database".into()));
    err.context(format!(
        "cannot apply the database migrations: the role {role} may not create tables in \
         {database}'s public schema; make it the database's owner (as a superuser: ALTER DATABASE {database} OWNER TO {role}), as \
         docs/operating.md shows"
    ))
}

/// Refuses a database whose `_sqlx_migrations` holds a version this build does not
/// know, or one of ours changed by hand or marked failed; answers whether it holds
/// engine migrations (read in the same pass).
async fn refuse_unknown_migrations(conn: &mut PgConnection) -> anyhow::Result<bool> {
    let ledger: Option<String> = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
        .fetch_one(&mut *conn)
        .await
        .context("cannot read which migrations the database has")?;
    if ledger.is_none() {
        return Ok(false);
    }
    let mut holds_engine_rows = false;
    let applied: Vec<(i64, Vec<u8>, bool)> =
        sqlx::query_as("SELECT version, checksum, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await
            .context("cannot read which migrations the database has")?;
    for (version, checksum, success) in applied {
        // The engine compares its own, before it applies anything.
        if standmeet_jobs::migration_versions().any(|engine| engine == version) {
            holds_engine_rows = true;
            continue;
        }
        // sqlx would find these too, but only once the engine's part is done.
        if let Some(ours) = APP_MIGRATIONS.iter().find(|ours| ours.version == version) {
            if !success {
                anyhow::bail!(
                    "the database's migration {version} is marked failed: it was left half \
                     applied; restore a backup taken before it"
                );
            }
            if ours.checksum[..] != checksum[..] {
                anyhow::bail!(
                    "the database's migration {version} is not the one StandMeet applied \
                     (its checksum differs): it was changed by hand; restore a backup"
                );
            }
            continue;
        }
        let checksum: String = checksum.iter().map(|byte| format!("{byte:02x}")).collect();
        match RETIRED.iter().find(|(retired, _)| *retired == version) {
            Some((_, known)) if *known == checksum => {}
            Some(_) => anyhow::bail!(
                "the database's migration {version} is not the one StandMeet applied \
                 (its checksum differs): it was changed by hand; restore a backup"
            ),
            None => anyhow::bail!(
                "the database holds migration {version}, which this build of StandMeet \
                 does not know: a newer StandMeet migrated it. Run that newer build (or \
                 restore a backup taken before the upgrade)"
            ),
        }
    }
    Ok(holds_engine_rows)
}

/// Whether the database answers a trivial query within a second.
pub async fn ping(pool: &PgPool) -> bool {
    let query = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), query).await,
        Ok(Ok(1))
    )
}
