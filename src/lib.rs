//! # StandMeet
//!
//! An owner's front desk on the web: visitors ask for access and search the owner's
//! corpus; admins approve requests, fetch job listings and curate the corpus. Every slow
//! side effect is a durable job in PostgreSQL.
//!
//! ## A tour of the modules
//!
//! One crate, compiled twice: with the `ssr` feature into the `standmeet` server
//! binary, and with `hydrate` into the wasm that the browser runs to make the
//! server-rendered pages interactive. Data flows one way: page or MCP tool → server
//! function → domain operation → store (SQL) → PostgreSQL.
//!
//! Shared by server and browser:
//! - [`ui`]: the HTML shell, the app and its routes, the layout, pages and components.
//! - [`model`]: the words both sides share, such as `JobId` and `JobState`.
//! - [`api`]: server functions (the browser gets stubs that call them over HTTP), and on
//!   the server the fixed endpoints such as `/healthz`.
//!
//! Server only (`ssr`):
//! - `config`: every setting, its default, and validation that names a bad one.
//! - `telemetry`: the tracing subscriber and the span of each request.
//! - `startup`: `AppState`, the router, and serving until a signal says stop.
//! - `error`: the one error type of HTTP handlers; nothing internal reaches a client.
//! - `db`: the connection pool, migrations, and the private PostgreSQL cluster that
//!   StandMeet starts itself when `DATABASE_URL` is unset.
//! - `domain`: what StandMeet does, in its own types (`types` holds the parsed
//!   newtypes such as `EmailAddress`; `domain::admins` the admin accounts).
//! - `jobs`: the durable job queue in PostgreSQL (states, attempts, error history,
//!   output, backoff, rescue, fenced completion, cleanup) and the process's one LISTEN
//!   connection. Its module documentation says who moves jobs between states.
//! - `mcp`: the MCP endpoint `/mcp` (rmcp): the same operations as tools for agents.
//! - `bench`: `standmeet bench`: the job engine, the Tasks panel and the corpus search,
//!   measured on a fresh private cluster.
//! - `chaos`: `standmeet chaos`: the fault suite (kill -9 of workers, PostgreSQL
//!   restarted under waiters, a misbehaving mail server, bad input everywhere), with
//!   real processes on a fresh private cluster; it fails when a promise breaks.
//! - `security`: what every request passes through: the admin guard (pages redirect to
//!   `/login`, server functions answer 401, deny by default), cross-site refusal,
//!   security headers, and sign-in attempt limits.
//!
//! The browser's entry point is [`hydrate`].

pub mod api;
pub mod model;
pub mod ui;

#[cfg(feature = "ssr")]
pub mod bench;
#[cfg(feature = "ssr")]
pub mod chaos;
#[cfg(feature = "ssr")]
pub mod config;
#[cfg(feature = "ssr")]
pub mod db;
#[cfg(feature = "ssr")]
pub mod domain;
#[cfg(feature = "ssr")]
pub mod error;
#[cfg(feature = "ssr")]
pub mod jobs;
#[cfg(feature = "ssr")]
pub mod mcp;
#[cfg(feature = "ssr")]
pub mod security;
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
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(ui::App);
}
