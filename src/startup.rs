//! Putting the process together: the database, the application state, the router, and
//! serving until a signal says stop.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{get, post};
use leptos_axum::{LeptosRoutes, generate_route_list};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate};
use tower_http::compression::{CompressionLayer, DefaultPredicate};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::PostgresStore;

use crate::config::Settings;
use crate::db::{self, DatabaseSource, PrivateCluster};
use crate::live::HubTask;
use crate::security::{body_limit, client, csrf, guard, headers};
use crate::state::AppState;
use crate::ui::{App, shell};
use standmeet_jobs::JobRuntime;

/// How long in-flight requests may run on after a stop signal before their
/// connections are closed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The session cookie's name over http.
pub const SESSION_COOKIE: &str = "standmeet_session";
/// Its name over https: with the `__Host-` prefix a browser takes the cookie only when
/// it is `Secure`, for this host alone and the whole site (no other host of the domain
/// can set or shadow it).
pub const SECURE_SESSION_COOKIE: &str = "__Host-standmeet_session";

/// The session cookie's name for these settings.
pub fn session_cookie_name(settings: &Settings) -> &'static str {
    if settings.is_https() {
        SECURE_SESSION_COOKIE
    } else {
        SESSION_COOKIE
    }
}

/// The whole HTTP surface: fixed endpoints, the Leptos pages and server functions,
/// static files, and the layers every request passes through (outermost first): no
/// Leptos owner left on the thread → request id → trace span → security headers →
/// client address → the limits (requests at once, time, bodies) → cross-site refusal →
/// session → admin guard → the route.
/// The probes (`/livez`, `/readyz`, `/healthz`) skip the limits and what follows them.
pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let leptos_options = state.leptos_options.clone();

    let sessions = SessionManagerLayer::new(session_store(&state.pool))
        .with_name(session_cookie_name(&state.settings))
        .with_path("/")
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(state.settings.is_https())
        .with_expiry(Expiry::OnInactivity(guard::SESSION_IDLE_TIMEOUT));

    let mcp = crate::mcp::routes(&state, CancellationToken::new()).unwrap_or_default();
    let settings = state.settings.clone();
    let trusted_proxies = Arc::new(client::TrustedProxies::new(
        state.settings.trusted_proxies.clone(),
        state.settings.trusted_proxy_header,
    ));

    // The probes answer outside the limits below: a crowd of slow clients holding the
    // request places must not make a load balancer think the copy is gone.
    let probes = Router::new()
        .route("/healthz", get(crate::api::health::healthz))
        .route("/readyz", get(crate::api::health::readyz))
        .route("/livez", get(crate::api::health::livez))
        .with_state(state.clone());

    let limited = Router::new()
        .merge(mcp)
        .route("/metrics", get(crate::api::metrics::metrics))
        .route("/api/jobs/status", get(crate::api::tasks::job_status))
        .route("/api/live", get(crate::api::live::live))
        .route("/login", post(crate::api::auth::sign_in))
        .route("/logout", post(crate::api::auth::sign_out))
        .leptos_routes_with_context(
            &state,
            routes,
            // Runs for every page render, after leptos_axum made the page's nonce. The
            // site's files are there for a page to name (`ui::lazy_pages`).
            {
                let site_files = state.site_files.clone();
                move || {
                    headers::set_page_policy();
                    leptos::prelude::provide_context(site_files.clone());
                }
            },
            move || shell(leptos_options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(headers::set_page_policy, shell))
        .layer(middleware::from_fn_with_state(
            state.site_files.clone(),
            crate::assets::serve_site_files,
        ))
        .layer(middleware::from_fn(
            crate::api::replies::bad_arguments_are_400,
        ))
        // A server function's span, inside the request's (only when exporting traces).
        .layer(middleware::from_fn(
            crate::telemetry::otel::server_function_span,
        ))
        .layer(middleware::from_fn_with_state(
            state.pool.clone(),
            guard::require_admin_where_needed,
        ))
        .layer(sessions)
        .layer(middleware::from_fn_with_state(
            state.settings.clone(),
            csrf::refuse_cross_site,
        ))
        // One body limit before anything reads a body (server functions, forms, /mcp).
        .layer(axum::extract::DefaultBodyLimit::max(
            state.settings.max_body_bytes,
        ))
        .layer(middleware::from_fn_with_state(
            body_limit::BodyLimit(state.settings.max_body_bytes),
            body_limit::limit_request_bodies,
        ))
        // Bounded work per process: at most this many requests at once (more wait their
        // turn), and none longer than the time limit, waiting included (503). Database
        // connections are bounded by the pool; this bounds the memory and the queue.
        .layer(GlobalConcurrencyLimitLayer::new(MAX_CONCURRENT_REQUESTS))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIME_LIMIT,
        ))
        .with_state(state);

    probes
        .merge(limited)
        // Every request's client, for the probes' access lines too.
        .layer(middleware::from_fn_with_state(
            trusted_proxies.clone(),
            client::find_client_address,
        ))
        // Every answer, the probes' and a 503 of the limits too.
        .layer(middleware::from_fn_with_state(
            settings,
            headers::add_security_headers,
        ))
        // gzip for clients that take it, when worth it: not for small answers, images
        // or the live event streams (tower-http's default predicate), nor for the wasm,
        // which is megabytes that would be compressed again on every page load.
        .layer(CompressionLayer::new().compress_when(
            DefaultPredicate::new().and(NotForContentType::const_new("application/wasm")),
        ))
        // The access log: one line per request at info, with its status and latency,
        // in the request's span (method, path, request id, client address).
        .layer(
            TraceLayer::new_for_http()
                .make_span_with({
                    let trusted = trusted_proxies.clone();
                    move |request: &axum::http::Request<axum::body::Body>| {
                        crate::telemetry::request_span(request, |peer| trusted.trusts(peer))
                    }
                })
                .on_response(crate::telemetry::access_log)
                // The access log line says it; tower-http would add an ERROR line for
                // every 5xx, a health probe's 503 during an outage too.
                .on_failure(()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(middleware::from_fn(
            crate::telemetry::drop_unusable_request_id,
        ))
        // Outermost, so that it runs first on every poll of a request: no Leptos owner
        // left on the thread by another request's page (see the module).
        .layer(middleware::from_fn(
            crate::ui::request_owner::without_a_thread_owner,
        ))
}

/// How many requests one process serves at once; more wait for a free place.
const MAX_CONCURRENT_REQUESTS: usize = 512;
/// The longest a request may take, waiting for a place included. Longer than the longest
/// wait for jobs that a request makes (`STANDMEET_FETCH_WAIT_MS`, 20 s by default).
const REQUEST_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Sessions in the `sessions` table (see the migration).
fn session_store(pool: &PgPool) -> PostgresStore {
    PostgresStore::new(pool.clone())
        .with_schema_name("public")
        .and_then(|store| store.with_table_name("sessions"))
        .expect("constant, valid identifiers")
}

/// Runs StandMeet until SIGINT or SIGTERM: starts (or finds) the database, migrates,
/// serves, and on the way out closes the pool and stops a private cluster it started.
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let source = open_database(&settings).await?;
    let result = serve(settings, source.url()).await;
    close_database(source).await?;
    result
}

/// `standmeet migrate`: applies the migrations to the database (starting the private
/// cluster for it when `DATABASE_URL` is unset) and stops.
pub async fn migrate_only(settings: Settings) -> anyhow::Result<()> {
    with_database(&settings, async |_| Ok(())).await?;
    println!("standmeet: the database is migrated");
    Ok(())
}

/// The most connections to PostgreSQL one copy holds at once, by what holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionBudget {
    /// Pages, server functions and MCP (`STANDMEET_DB_POOL_SIZE`).
    pub requests: u32,
    /// The job engine: its queues' claims and handlers, and its own chores.
    pub jobs: u32,
    /// The one LISTEN connection.
    pub listener: u32,
}

impl ConnectionBudget {
    pub fn of(settings: &Settings, registry: &standmeet_jobs::Registry) -> ConnectionBudget {
        let engine = settings.engine_config(registry);
        let given = db::engine_pool_size(engine.connections_needed());
        ConnectionBudget {
            requests: settings.db_pool_size,
            jobs: engine.connections_at_most(given),
            listener: 1,
        }
    }

    /// The budget of a copy started with `settings` (which builds its job registry, as
    /// the copy does, to know its queues).
    pub fn for_settings(settings: &Settings) -> anyhow::Result<ConnectionBudget> {
        let registry = crate::domain::job_registry(crate::domain::mail::MailContext {
            mailer: crate::domain::mail::Mailer::from_supplier(&settings.mail)?,
            settings: Arc::new(settings.clone()),
        })?;
        Ok(ConnectionBudget::of(settings, &registry))
    }

    pub fn total(&self) -> u32 {
        self.requests + self.jobs + self.listener
    }
}

/// `standmeet check-config`, past the settings themselves (which `Settings::from_env`
/// checked): the site's files are where `LEPTOS_SITE_ROOT` says, and what the copy
/// will ask of PostgreSQL. Connects nowhere. The error names the setting. Answers what
/// to tell the operator: the connection budget, and warnings (a vault folder that is
/// not there yet) prefixed `warning: `.
pub fn check_config(settings: Settings) -> anyhow::Result<Vec<String>> {
    let mut options = leptos::config::get_configuration(None)
        .context("cannot read the Leptos configuration")?
        .leptos_options;
    let site = crate::assets::SiteFiles::configure(&mut options);
    let missing = site.missing();
    if !missing.is_empty() {
        anyhow::bail!(
            "invalid setting LEPTOS_SITE_ROOT={:?}: {}",
            options.site_root.as_ref(),
            site.missing_words(&missing)
        );
    }
    let budget = ConnectionBudget::for_settings(&settings)?;
    let mut said = vec![format!(
        "this copy uses up to {} PostgreSQL connections ({} for requests, STANDMEET_DB_POOL_SIZE; {} for the job engine; {} for the listener): N copies need N × {} within the server's max_connections (100 by default, of which superuser_reserved_connections, 3, are not for StandMeet)",
        budget.total(),
        budget.requests,
        budget.jobs,
        budget.listener,
        budget.total()
    )];
    if let Some(vault) = &settings.vault
        && !vault.is_dir()
    {
        said.push(format!(
            "warning: STANDMEET_VAULT={}: no folder is there yet (or it cannot be read); StandMeet serves without it, its watcher waits for it (/readyz says \"vault\": \"waiting\"), and a rebuild fails in words until it is there",
            vault.display()
        ));
    }
    Ok(said)
}

/// An admin's address and password as given on the command line, checked.
fn admin_credentials(email: &str, password: &str) -> anyhow::Result<crate::types::EmailAddress> {
    let email = crate::types::EmailAddress::parse(email)
        .map_err(|err| anyhow::anyhow!("{email:?} is not an email address: {err}"))?;
    if password.chars().count() < crate::config::MIN_PASSWORD_CHARS {
        anyhow::bail!(
            "the password must be at least {} characters long (read from standard input)",
            crate::config::MIN_PASSWORD_CHARS
        );
    }
    Ok(email)
}

/// Runs `work` on the migrated database the settings name (the private cluster,
/// started and stopped again, when `DATABASE_URL` is unset), waiting for a server that
/// does not answer yet as the start does (`STANDMEET_DATABASE_WAIT_MS`).
async fn with_database<T>(
    settings: &Settings,
    work: impl AsyncFnOnce(&PgPool) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let source = open_database(settings).await?;
    let done = async {
        let pool =
            db::connect_waiting(&source.url(), db::APP_POOL_SIZE, settings.database_wait).await?;
        db::migrate(&pool).await?;
        let done = work(&pool).await;
        pool.close().await;
        done
    }
    .await;
    close_database(source).await?;
    done
}

/// `standmeet admin set-password <email>`: sets the password of that admin (8
/// characters or more) and ends every session of it.
pub async fn set_admin_password(
    settings: Settings,
    email: &str,
    password: &str,
) -> anyhow::Result<()> {
    let email = admin_credentials(email, password)?;
    let found = with_database(&settings, async |pool| {
        crate::domain::admins::set_password(pool, &email, password).await
    })
    .await?;
    if !found {
        anyhow::bail!("there is no admin {email}; `standmeet admin create {email}` makes one");
    }
    println!("standmeet: the password of {email} is set; its sessions are ended");
    if let Some(admin) = &settings.admin
        && admin.password.is_some()
        && admin.email.as_str().eq_ignore_ascii_case(email.as_str())
    {
        println!(
            "standmeet: STANDMEET_ADMIN_PASSWORD is set for {email}, so the next start sets its password back to that one; remove the setting to keep this password"
        );
    }
    Ok(())
}

/// `standmeet admin create <email>`: makes an admin with the password given (read from
/// standard input), or with `None` one generated here and printed once, to this
/// command's own output.
pub async fn create_admin(
    settings: Settings,
    email: &str,
    password: Option<String>,
) -> anyhow::Result<()> {
    let generated = password.is_none();
    let password = password.unwrap_or_else(crate::domain::admins::generate_password);
    let email = admin_credentials(email, &password)?;
    let created = with_database(&settings, async |pool| {
        crate::domain::admins::create(pool, &email, &password).await
    })
    .await?;
    if !created {
        anyhow::bail!(
            "there is an admin {email} already; `standmeet admin set-password {email}` changes its password"
        );
    }
    println!(
        "standmeet: admin {email} is created; sign in at {}",
        sign_in_url(&settings.public_url)
    );
    if generated {
        println!("  password: {password}");
        println!("  It is shown only now.");
    }
    Ok(())
}

/// The database `settings` name, or the private cluster, started.
async fn open_database(settings: &Settings) -> anyhow::Result<DatabaseSource> {
    Ok(match &settings.database_url {
        Some(url) => DatabaseSource::External(url.clone()),
        None => {
            let dir = settings.private_cluster_dir();
            let cluster = tokio::task::spawn_blocking(move || PrivateCluster::start(&dir))
                .await
                .context("the private cluster's start-up task failed")??;
            DatabaseSource::Private(cluster)
        }
    })
}

/// Stops the private cluster if this process started it; a failure is logged.
async fn close_database(source: DatabaseSource) -> anyhow::Result<()> {
    let stopped = tokio::task::spawn_blocking(move || source.shut_down())
        .await
        .context("the private cluster's shut-down task failed")?;
    if let Err(err) = stopped {
        tracing::error!(
            error = crate::causes::error_chain(err.as_ref()),
            "could not stop the private PostgreSQL cluster"
        );
    }
    Ok(())
}

async fn serve(settings: Settings, database_url: String) -> anyhow::Result<()> {
    let pool =
        db::connect_waiting(&database_url, settings.db_pool_size, settings.database_wait).await?;
    db::migrate(&pool).await?;
    // A password printed where nobody watches is written down somewhere: in a log
    // collector, `docker logs`, systemd's journal. Only a person at a terminal sees it.
    let can_show_password = std::io::IsTerminal::is_terminal(&std::io::stdout());
    if let Some(generated) =
        crate::domain::admins::bootstrap(&pool, &settings, can_show_password).await?
    {
        announce_generated_admin(&generated, &settings.public_url);
    }

    if !settings.fetch_allow_private {
        let ignored = crate::domain::outbound::ignored_proxy_variables();
        if !ignored.is_empty() {
            tracing::warn!(
                ?ignored,
                "calls to job boards and webhook endpoints do not go through the proxy these variables name: a proxy resolves names itself, past the guard against private addresses (STANDMEET_FETCH_ALLOW_PRIVATE=true uses it, and calls private addresses too)"
            );
        }
    }
    let addr = settings.site_addr;
    let (settings_vault, vault_watch) = (settings.vault.clone(), settings.vault_watch);
    let mut state = AppState::new(pool.clone(), settings)?;
    let missing = state.site_files.missing();
    if !missing.is_empty() {
        // Served anyway: the API, MCP and the jobs work without the site, and /readyz
        // keeps a load balancer away from the pages until the files are there.
        tracing::error!("{}", state.site_files.missing_words(&missing));
    }
    let budget = ConnectionBudget::of(&state.settings, &state.registry);
    tracing::info!(
        connections = budget.total(),
        requests = budget.requests,
        jobs = budget.jobs,
        listener = budget.listener,
        "this copy uses up to this many PostgreSQL connections: N copies need N times it, within the server's max_connections"
    );

    crate::domain::schedules::create_built_ins(&state.jobs, settings_vault.is_some()).await?;

    // Entries written while no index job could finish (a crash, a stop) are indexed
    // again; nobody waits for these.
    let requeued = crate::domain::corpus::reindex_lagging(&pool, &state.jobs).await?;
    if requeued > 0 {
        tracing::info!(
            entries = requeued,
            "corpus entries whose index lags are queued for indexing"
        );
    }

    // Everything that can fail at the start fails before the job engine claims a job:
    // a start that gives up after that would leave its claimed attempts running in a
    // process that is gone, for the lease to take back (and burn an attempt each).
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr}; is another server using it? Set LEPTOS_SITE_ADDR to another address")
    })?;

    let stop = CancellationToken::new();
    // The vault's watcher cannot fail: a folder that cannot be watched yet leaves it
    // waiting, and it tries again (`/readyz` says which).
    let vault_watch = match (&settings_vault, vault_watch) {
        (Some(root), true) => {
            let (status, task) = crate::domain::corpus::vault::watch::watch(
                pool.clone(),
                state.jobs.clone(),
                root.clone(),
                stop.clone(),
            );
            state.vault_watch = status;
            Some(task)
        }
        _ => None,
    };

    // The job engine (on connections of its own) and the one LISTEN connection that
    // wakes it, the waiters and the live hub.
    let mut engine_config = state.settings.engine_config(&state.registry);
    engine_config.also_clean.extend([
        crate::domain::events::retention(state.settings.keep_events),
        crate::domain::webhooks::retention(state.settings.keep_events),
    ]);
    let engine_pool = db::engine_pool(&pool, engine_config.connections_needed());
    let jobs = JobRuntime::start(
        &engine_pool,
        state.registry.clone(),
        engine_config,
        &state.jobs,
    )
    .await?;
    let hub_task = HubTask::start(&pool, &state.jobs, &state.live);

    // From here on, whatever ends the serving (a signal, or the server failing), the
    // engine is shut down below before the process exits: its running attempts finish
    // or are handed back.
    let served = serve_until_stopped(state, listener, stop.clone()).await;
    stop.cancel();

    // Requests are done; now the jobs: running attempts finish or are interrupted.
    jobs.shutdown().await;
    hub_task.stop().await;
    if let Some(task) = vault_watch {
        let _ = task.await;
    }
    engine_pool.close().await;
    pool.close().await;
    tracing::info!("StandMeet stopped");
    served
}

/// Serves `state`'s router on `listener` until SIGINT or SIGTERM (or `stop`), then
/// lets in-flight requests finish for [`SHUTDOWN_GRACE`].
async fn serve_until_stopped(
    state: AppState,
    listener: tokio::net::TcpListener,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!("StandMeet is listening on http://{addr}");
    let live = state.live.clone();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            tokio::select! {
                _ = shutdown_signal() => {}
                _ = stop.cancelled() => return,
            }
            tracing::info!("stop signal received; finishing in-flight requests");
            // Live streams never finish on their own: end them, so that the graceful
            // shutdown does not wait for them (the pages reconnect to another copy).
            live.close();
            stop.cancel();
        }
    });
    tokio::spawn(housekeeping(state.clone(), stop.clone()));

    let limits = crate::serving::Limits {
        header_timeout: state.settings.header_timeout,
        max_connections: crate::serving::max_connections(),
        grace: SHUTDOWN_GRACE,
    };
    tracing::info!(
        max_connections = limits.max_connections,
        header_timeout_ms = limits.header_timeout.as_millis() as u64,
        "connections: at most this many at once (the open-file limit allowing), each closed if its headers take longer"
    );
    crate::serving::serve(listener, router(state), limits, stop)
        .await
        .context("the HTTP server failed")
}

/// Where an admin signs in, as people reach this copy (`STANDMEET_PUBLIC_URL`).
fn sign_in_url(public_url: &url::Url) -> String {
    public_url
        .join("login")
        .map(String::from)
        .unwrap_or_else(|_| "/login".into())
}

/// Shows the generated admin's password on the console, once: on stdout, not through
/// tracing, so it never lands in a log collector.
fn announce_generated_admin(admin: &crate::domain::admins::GeneratedAdmin, public_url: &url::Url) {
    println!();
    println!(
        "  StandMeet created the first admin. Sign in at {} with:",
        sign_in_url(public_url)
    );
    println!("    email:    {}", admin.email);
    println!("    password: {}", admin.password);
    println!("  This password is shown only now. To choose your own:");
    println!("    standmeet admin set-password {}", admin.email);
    println!();
}

/// Periodic chores until `stop`: deleting expired sessions, forgetting idle
/// rate-limit keys.
async fn housekeeping(state: AppState, stop: CancellationToken) {
    use tower_sessions::ExpiredDeletion;
    let store = session_store(&state.pool);
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(err) = store.delete_expired().await {
            tracing::warn!(error = %err, "cannot delete expired sessions");
        }
        state.access_request_limiter.forget_idle();
        state.booking_limiter.forget_idle();
    }
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
