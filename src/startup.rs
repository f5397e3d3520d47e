//! Putting the process together: the database, the application state, the router, and
//! serving until a signal says stop.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::config::Settings;
use crate::db::{self, DatabaseSource, PrivateCluster};
use crate::ui::{App, shell};

/// How long in-flight requests may run on after a stop signal before their
/// connections are closed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What every handler and server function can reach. Cheap to clone: every field is
/// a handle.
#[derive(Clone)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub pool: PgPool,
    pub settings: Arc<Settings>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

impl AppState {
    /// The state for `pool` and `settings`, with Leptos options from the environment
    /// that cargo-leptos sets (site root, package dir) and our validated address.
    pub fn new(pool: PgPool, settings: Settings) -> anyhow::Result<Self> {
        let mut leptos_options = get_configuration(None)
            .context("cannot read the Leptos configuration")?
            .leptos_options;
        leptos_options.site_addr = settings.site_addr;
        Ok(AppState {
            leptos_options,
            pool,
            settings: Arc::new(settings),
        })
    }
}

/// The whole HTTP surface: fixed endpoints, the Leptos pages and server functions,
/// static files, and the layers every request passes through.
pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let leptos_options = state.leptos_options.clone();

    Router::new()
        .route("/healthz", get(crate::api::health::healthz))
        .leptos_routes_with_context(
            &state,
            routes,
            // `leptos_routes_with_context` already provides `AppState` to pages and
            // server functions; nothing else is needed per request yet.
            || {},
            move || shell(leptos_options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(TraceLayer::new_for_http().make_span_with(crate::telemetry::request_span))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(state)
}

/// Runs StandMeet until SIGINT or SIGTERM: starts (or finds) the database, migrates,
/// serves, and on the way out closes the pool and stops a private cluster it started.
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let source = match &settings.database_url {
        Some(url) => DatabaseSource::External(url.clone()),
        None => {
            let dir = settings.private_cluster_dir();
            let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&dir))
                .await
                .context("the private cluster's start-up task failed")??;
            DatabaseSource::Private(cluster)
        }
    };

    let result = serve(settings, source.url()).await;

    let stopped = tokio::task::spawn_blocking(move || source.shut_down())
        .await
        .context("the private cluster's shut-down task failed")?;
    if let Err(err) = stopped {
        tracing::error!(error = format!("{err:#}"), "could not stop the private PostgreSQL cluster");
    }
    result
}

async fn serve(settings: Settings, database_url: String) -> anyhow::Result<()> {
    let pool = db::connect(&database_url).await?;
    db::migrate(&pool).await?;

    let addr = settings.site_addr;
    let state = AppState::new(pool.clone(), settings)?;
    let app = router(state);

    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr}; is another server using it? Set LEPTOS_SITE_ADDR to another address")
    })?;
    tracing::info!("StandMeet is listening on http://{addr}");

    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            shutdown_signal().await;
            tracing::info!("stop signal received; finishing in-flight requests");
            stop.cancel();
        }
    });

    let server = axum::serve(listener, app).with_graceful_shutdown(stop.clone().cancelled_owned());
    tokio::select! {
        served = server => served.context("the HTTP server failed")?,
        _ = async { stop.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::warn!("requests still open {SHUTDOWN_GRACE:?} after the stop signal; closing them");
        }
    }

    pool.close().await;
    tracing::info!("StandMeet stopped");
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
