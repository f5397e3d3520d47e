//! # StandMeet's lab
//!
//! The tools that measure StandMeet and break it on purpose, kept beside the server so
//! that the server binary carries only what serves:
//!
//! - [`chaos`]: `standmeet-lab chaos`, the fault suite (kill -9 of workers, PostgreSQL
//!   restarted under waiters, a misbehaving mail server, bad input everywhere, jobs
//!   that kill their process, a worker frozen mid-drain, claims whose connection
//!   breaks, a vault of hostile notes), with real processes on a fresh private
//!   cluster; it fails when a promise breaks.
//! - [`bench`]: `standmeet-lab bench`, the job engine, the Tasks panel, the corpus
//!   search, the events and webhooks and the rebuild from a vault, measured on a fresh
//!   private cluster, and `--peer graphile` beside graphile-worker.
//!
//! Both use the server as a library (settings, database, domain, router) and run it
//! as what ships: the `standmeet` binary started as a child ([`server_binary`]). The
//! SMTP peer they mail through is a crate of its own (`standmeet-smtp-peer`), which
//! the server's tests share.

pub mod bench;
pub mod chaos;

use std::path::PathBuf;

use anyhow::{Context, bail};

/// The variable that names the server binary to start (the same one the browser tests
/// read); unset, the `standmeet` binary beside this one, as cargo builds them.
pub const SERVER_BINARY_VAR: &str = "STANDMEET_BIN";

/// The `standmeet` server binary that scenarios and measures start as a child.
pub fn server_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(SERVER_BINARY_VAR) {
        return Ok(PathBuf::from(path));
    }
    let lab = std::env::current_exe().context("cannot find the standmeet-lab binary")?;
    let beside = lab.with_file_name("standmeet");
    if !beside.is_file() {
        bail!(
            "no server binary at {}: build it (`cargo build --bin standmeet --no-default-features --features ssr`, with the same profile) or set {SERVER_BINARY_VAR}",
            beside.display()
        );
    }
    Ok(beside)
}
