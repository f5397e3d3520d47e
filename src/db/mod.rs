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
        // Statements are logged at debug level only, and slow ones at warn.
        .log_statements(log::LevelFilter::Debug)
        .log_slow_statements(log::LevelFilter::Warn, Duration::from_millis(500));
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options)
        .await
        .context("cannot connect to PostgreSQL")
}

/// Connections for requests (pages, server functions, MCP), unless
/// `STANDMEET_DB_POOL_SIZE` says otherwise.
pub const APP_POOL_SIZE: u32 = 16;
/// Connections of the job engine's own pool (see [`engine_pool`]).
const ENGINE_POOL_SIZE: u32 = 10;

/// A pool for the job engine alone, to the same database as `app`: its fetches, outcome
/// writes, lease renewals and handlers never wait behind public HTTP load for a
/// connection (a renewal that cannot run in time would let the rescuer take running
/// jobs back and run them twice). Opens connections as needed.
pub fn engine_pool(app: &PgPool) -> PgPool {
    PgPoolOptions::new()
        .max_connections(ENGINE_POOL_SIZE)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(
            (*app.connect_options())
                .clone()
                .application_name("standmeet-jobs"),
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
