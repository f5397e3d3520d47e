//! # StandMeet
//!
//! An owner's front desk on the web: visitors ask for access and search the owner's
//! corpus; admins approve requests, fetch job listings and curate the corpus. Every slow
//! side effect is a durable job in PostgreSQL.
//!
//! ## A tour of the modules
//!
//! The application is one crate, compiled twice: with the `ssr` feature into the
//! `standmeet` server binary, and with `hydrate` into the wasm that the browser runs to
//! make the server-rendered pages interactive. The job engine is a crate of its own,
//! `standmeet_jobs` (`crates/standmeet-jobs`), which knows nothing of the web. Data
//! flows one way: page → server function, or MCP tool → the action's one operation
//! (`ops`) → domain → `standmeet_jobs` and SQL → PostgreSQL; job handlers call back
//! into the domain.
//! `startup` is the only module that imports everything (`tests/it/architecture.rs`
//! checks the direction, and that no two files need each other).
//!
//! Shared by server and browser:
//! - [`ui`]: the HTML shell, the app and its routes, the layout (a sidebar on admin
//!   pages), pages (the overview at `/admin`, the owner's front page at `/`, …) and
//!   components (chips, toasts, live updates, keyboard shortcuts, dark mode). Only the
//!   console's pages are hydrated; a visitor's come as HTML and CSS with one small
//!   inline script, and their forms post as plain HTML (`ui::hydration`). The jobs'
//!   pages are in the app's shell; every other page is a lazy route whose code comes
//!   in its group's chunk of the wasm, fetched beside the shell (`ui::lazy_pages`;
//!   `scripts/build` cuts the chunks). On the server, `ui::request_owner` starts every
//!   request with no Leptos owner left on its thread by another request's page.
//! - [`model`]: the words both sides share, such as `JobId`, `JobState`, `MailState`
//!   and the corpus write receipt.
//! - [`ops`]: one operation per action, whatever door it comes through: it takes the
//!   state, who acts and typed input, and answers a typed view (shared with the
//!   browser) that serializes to the contract's JSON; server functions and MCP tools
//!   are adapters over it. Statuses are typed words the browser shares too
//!   (`model::RequestStatus`, as `JobState`).
//! - [`api`]: server functions (the browser gets stubs that call them over HTTP), and on
//!   the server the fixed endpoints such as `/healthz` and the live job stream
//!   `/api/live`; `api::FormError` is how forms hear what went wrong.
//!
//! Server only (`ssr`), from the bottom up:
//! - `types`: parsed newtypes such as `EmailAddress`: input becomes these at the edge.
//! - `causes`: an error and its causes in words (`causes::error_chain`), for log lines.
//! - `standmeet_jobs` (its own crate): the durable job queue in PostgreSQL (states,
//!   attempts, error history, output, backoff, rescue, fenced completion, cleanup) and
//!   the process's one LISTEN connection. `JobClient` is the one way in (insert, get,
//!   list, retry, cancel, delete, wait, hear jobs finish, the queues' figures and
//!   pauses); `insert_unique` keeps one unfinished job per key, and `periodic` fires
//!   the schedules of `job_schedules` once per slot; its SQL is private to it. Its
//!   crate documentation says who moves jobs between states.
//! - `db`: the connection pool, migrations, and the private PostgreSQL cluster that
//!   StandMeet starts itself when `DATABASE_URL` is unset.
//! - `config`: every setting, its default, and validation that names a bad one.
//! - `telemetry`: the tracing subscriber, the span of each request, and the job named
//!   on the lines written inside an attempt; `telemetry::otel` exports traces over
//!   OpenTelemetry when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: a request, its server
//!   function or MCP tool, the job it inserts and every attempt of that job (in
//!   whichever process), and the SMTP send, webhook delivery or board fetch inside it.
//! - `domain`: what StandMeet does, in its own words and errors: access requests, the
//!   owner's address, the front page's name and introduction (Markdown), listings, the
//!   corpus (entries, search, index, bodies as sanitized Markdown, the rebuild from an
//!   Obsidian vault and its watcher), bookings (weekly availability in the owner's time
//!   zone, free slots, invitations as `.ics`), admins, the built-in schedules of
//!   periodic jobs (`schedules`); `mail` (supplier, throttle, mail log, and the one
//!   shape of a mail job: load, stop when stale, compose, deliver or snooze, record)
//!   and `secrets` (access codes, link tokens, webhook signing secrets) serve them all;
//!   `events` is the outbox each change writes what happened to, in its own
//!   transaction, and `webhooks` delivers those events to the owner's other systems as
//!   signed POSTs (one `webhooks.deliver` job per event and endpoint); `outbound` is the
//!   guard that keeps job-board fetches and webhook deliveries off private addresses;
//!   `waiting` is how an operation waits for its jobs, and how a door watches the wait;
//!   `failure` is the one way a domain error writes its case for failures on our side.
//! - `security`: what every request passes through: the client's address (trusted
//!   proxies), the admin guard (pages redirect to `/login`, server functions answer 401,
//!   deny by default; sessions slide and end with a password change), cross-site
//!   refusal, security headers, bearer tokens, the limits on guessing (failures only)
//!   and on writes, and one limit on request bodies (413 in words).
//! - `error`: the one error path: it says what each domain error is to a client (status
//!   and message, text PostgreSQL cannot store a 400 wherever it came from); server
//!   functions, MCP tools and endpoints answer from it, and nothing internal reaches a
//!   client.
//! - `assets`: the browser's files under `/pkg/` (the wasm's shell and chunks, their
//!   loader, the JavaScript and CSS) by their hashed names (kept for a year) and by
//!   their plain ones (checked before each use).
//! - `live`: the live job states that `GET /api/live` streams to the browser: one
//!   hub per process, fed by the jobs it hears finish and one shared re-read.
//! - `state`: `AppState`, what every handler, server function and tool can reach.
//! - `mcp`: the MCP endpoint `/mcp` (rmcp): the same operations (`ops`) as tools for
//!   agents, each answering its operation's view serialized, with that view's schema as
//!   its output schema; a tool that waits reports progress and stops when cancelled
//!   (`progress`, over `domain::waiting`), jobs are resources one may subscribe to
//!   (`resources`), and a client that initializes gets a session (`transport`).
//! - `serving`: the connections under the router: a header-read timeout, a cap on
//!   connections, and a drain on stop that a proxy in front never sees fail.
//! - `startup`: the router, and serving until a signal says stop.
//!
//! The lab, what measures StandMeet and breaks it on purpose (`standmeet-lab bench`,
//! `standmeet-lab chaos`), is a crate beside this one (`crates/standmeet-lab`) that
//! uses it as a library and starts the server binary as a child; the server binary
//! carries only what serves.
//!
//! The browser's entry point is [`hydrate`]. `crates/standmeet-wasm-split` is the
//! build's tool that cuts the browser's wasm into chunks.

pub mod api;
pub mod model;
pub mod ops;
pub mod ui;

#[cfg(feature = "ssr")]
pub mod assets;
#[cfg(feature = "ssr")]
pub mod causes;
#[cfg(feature = "ssr")]
pub mod config;
#[cfg(feature = "ssr")]
pub mod db;
#[cfg(feature = "ssr")]
pub mod domain;
#[cfg(feature = "ssr")]
pub mod error;
#[cfg(feature = "ssr")]
pub mod live;
#[cfg(feature = "ssr")]
mod mcp;
#[cfg(feature = "ssr")]
pub mod security;
#[cfg(feature = "ssr")]
pub mod serving;
#[cfg(feature = "ssr")]
pub mod startup;
#[cfg(feature = "ssr")]
pub mod state;
#[cfg(feature = "ssr")]
pub mod telemetry;
#[cfg(feature = "ssr")]
pub mod types;

/// Hydrates the server-rendered page in the browser.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    use leptos::prelude::*;
    console_error_panic_hook::set_once();
    // Hydrated in two steps: the app's shell at once, then the route's part once its
    // chunk of code has arrived (`ui::lazy_pages`). The app hears when both are done.
    let page_hydrated = ArcRwSignal::new(false);
    let context = ui::hydration::PageHydrated(page_hydrated.clone());
    // Already started is fine: the executor is the same one.
    _ = any_spawner::Executor::init_wasm_bindgen();
    leptos::task::spawn_local(async move {
        let mounted = leptos::mount::hydrate_from_async(
            document().body().expect("a page has a body"),
            move || {
                provide_context(context);
                view! { <ui::App/> }.into_any()
            },
        )
        .await;
        page_hydrated.set(true);
        mounted.forget();
    });
}
