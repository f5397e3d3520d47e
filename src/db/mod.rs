//! The database: the connection pool, migrations, and the private cluster used when
//! `DATABASE_URL` is unset.

pub mod private_cluster;

use std::time::Duration;

use anyhow::Context;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool, Postgres};

pub use private_cluster::PrivateCluster;

/// The name of the database StandMeet uses in its private cluster.
pub const PRIVATE_DATABASE: &str = "standmeet";

/// The migrations under `migrations/`, compiled into the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

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
    let exists = Postgres::database_exists(url)
        .await
        .context("cannot reach PostgreSQL")?;
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
/// the `needed` connections the engine asks for (`jobs::connections_needed`: one per
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
    standmeet_jobs::pool_options()
        .max_connections(needed + ENGINE_HANDLER_CONNECTIONS)
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

/// Brings the schema up to date. Several copies of StandMeet may start at once: sqlx
/// takes an advisory lock so that only one applies the migrations.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR
        .run(pool)
        .await
        .context("cannot apply the database migrations")
}

/// Whether the database answers a trivial query within a second.
pub async fn ping(pool: &PgPool) -> bool {
    let query = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), query).await,
        Ok(Ok(1))
    )
}
