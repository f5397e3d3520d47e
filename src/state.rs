//! `AppState`: what every handler, server function and MCP tool can reach. It sits
//! below the layers that use it (`api`, `mcp`, `security`'s middleware take their parts
//! of it) and above what it holds, so importing it creates no cycle; `startup` builds it.

use std::sync::Arc;

use anyhow::Context;
use axum::extract::FromRef;
use leptos::prelude::*;
use sqlx::PgPool;
use standmeet_jobs::{JobClient, Registry};

use crate::assets::SiteFiles;
use crate::config::Settings;
use crate::domain::corpus::vault::watch::WatchStatus;
use crate::domain::mail::{MailContext, Mailer};
use crate::live::LiveJobs;
use crate::security::rate_limit::{AttemptLimiter, GuessLimiter};

/// Password hashes (argon2, tens of milliseconds of CPU each) computed at once: more
/// sign-ins wait their turn, so a flood of guesses cannot take the machine.
const CONCURRENT_PASSWORD_CHECKS: usize = 4;

/// Access requests one client address (or one email) may send an hour.
const ACCESS_REQUESTS_PER_HOUR: u32 = 5;

/// Bookings one client address (or one email) may make an hour: each one mails.
const BOOKINGS_PER_HOUR: u32 = 10;

/// What every handler and server function can reach. Cheap to clone: every field is
/// a handle.
#[derive(Clone)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    /// The browser's files by their hashed and plain names.
    pub site_files: Arc<SiteFiles>,
    pub pool: PgPool,
    pub settings: Arc<Settings>,
    /// Failed sign-ins per client address, and the backoff per email.
    pub sign_in_limiter: Arc<GuessLimiter>,
    /// Wrong access codes per client address, and the backoff per email.
    pub access_code_limiter: Arc<GuessLimiter>,
    /// Access requests per client address (and per email), an hour.
    pub access_request_limiter: Arc<AttemptLimiter>,
    /// Bookings per client address (and per email), an hour.
    pub booking_limiter: Arc<AttemptLimiter>,
    /// The queue: look jobs up, list, retry, cancel, delete, wait for them, hear them
    /// finish.
    pub jobs: JobClient,
    /// The jobs the browser's live streams follow (`GET /api/live`).
    pub live: Arc<LiveJobs>,
    /// Where mail goes.
    pub mailer: Mailer,
    /// Every job kind this StandMeet runs, with what their handlers need.
    pub registry: Registry,
    /// The vault's watcher (`off` unless `serve` starts one), for `/readyz`.
    pub vault_watch: WatchStatus,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

impl AppState {
    /// The state for `pool` and `settings`, with Leptos options from the environment
    /// (`LEPTOS_SITE_ROOT` and the rest, whose defaults name where scripts/build puts the
    /// site) and our validated address.
    pub fn new(pool: PgPool, settings: Settings) -> anyhow::Result<Self> {
        let mut leptos_options = get_configuration(None)
            .context("cannot read the Leptos configuration")?
            .leptos_options;
        leptos_options.site_addr = settings.site_addr;
        let site_files = Arc::new(SiteFiles::configure(&mut leptos_options));
        let settings = Arc::new(settings);
        let mailer = Mailer::from_supplier(&settings.mail)?;
        let registry = crate::domain::job_registry(MailContext {
            mailer: mailer.clone(),
            settings: settings.clone(),
        })?;
        Ok(AppState {
            leptos_options,
            site_files,
            jobs: JobClient::new(pool.clone(), settings.max_waiters).with_queues(registry.queues()),
            live: LiveJobs::new(settings.max_live_clients),
            pool,
            sign_in_limiter: Arc::new(GuessLimiter::new(
                settings.login_attempts_per_minute.get(),
                CONCURRENT_PASSWORD_CHECKS,
            )),
            access_code_limiter: Arc::new(GuessLimiter::new(
                settings.login_attempts_per_minute.get(),
                CONCURRENT_PASSWORD_CHECKS,
            )),
            access_request_limiter: Arc::new(AttemptLimiter::per_hour(
                std::num::NonZeroU32::new(ACCESS_REQUESTS_PER_HOUR).expect("not zero"),
            )),
            booking_limiter: Arc::new(AttemptLimiter::per_hour(
                std::num::NonZeroU32::new(BOOKINGS_PER_HOUR).expect("not zero"),
            )),
            mailer,
            registry,
            settings,
            vault_watch: WatchStatus::default(),
        })
    }
}
