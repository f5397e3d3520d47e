//! Schedules (docs/jobs.md): periodic jobs kept in `job_schedules`, which the job
//! engine fires (`standmeet_jobs::periodic`), read in the owner's time zone
//! (`STANDMEET_TIMEZONE`). Pages and tools read and change them through the
//! `JobClient` with the settings' zone and the app's registry; this module adds
//! StandMeet's built-in schedules.

use standmeet_jobs::periodic::ScheduleChange;
use standmeet_jobs::{Error, JobClient};

/// `listings-fetch`: "Fetch new" every hour, off until an admin turns it on.
pub const LISTINGS_FETCH: &str = "listings-fetch";
/// `vault-rebuild`: the corpus rebuilt from the vault every night, on when a vault is
/// set.
pub const VAULT_REBUILD: &str = "vault-rebuild";

/// A kind of job a schedule may insert: its arguments need nothing a clock does not
/// know. Mail, delivery and index jobs are not among them: each is about one request,
/// event or entry, and is queued by what happened to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedulable {
    pub kind: &'static str,
    /// Its arguments as the form offers them, a JSON object.
    pub example_args: &'static str,
    /// What one run does, in a few words.
    pub what: &'static str,
}

/// Every kind a schedule may insert, in the order the form offers them.
pub const SCHEDULABLE: [Schedulable; 6] = [
    Schedulable {
        kind: "listings.fetch_all",
        example_args: "{}",
        what: "fetch new listings from every enabled source",
    },
    Schedulable {
        kind: "jobs.fetch_source",
        example_args: r#"{"source_id": 1}"#,
        what: "fetch new listings from one source",
    },
    Schedulable {
        kind: "corpus.vault_rebuild",
        example_args: "{}",
        what: "rebuild the corpus from the vault",
    },
    Schedulable {
        kind: "system.noop",
        example_args: "{}",
        what: "do nothing (a heartbeat in the Tasks panel)",
    },
    Schedulable {
        kind: "system.sleep",
        example_args: r#"{"ms": 1000}"#,
        what: "wait the given milliseconds",
    },
    Schedulable {
        kind: "system.flaky",
        example_args: r#"{"fail_until_attempt": 2}"#,
        what: "fail until an attempt, then succeed (to try retries)",
    },
];

/// `kind` if a schedule may insert it; else a sentence that says why not and lists
/// those that may.
pub fn schedulable(kind: &str) -> Result<&'static Schedulable, String> {
    SCHEDULABLE
        .iter()
        .find(|known| known.kind == kind.trim())
        .ok_or_else(|| {
            format!(
                "A schedule cannot run {kind:?}: its jobs are queued by what they are about. The kinds a schedule can run are: {}.",
                SCHEDULABLE
                    .iter()
                    .map(|known| known.kind)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// Creates the built-in schedules that do not exist yet (an admin's changes to them
/// stay); `vault-rebuild` only with a vault.
pub async fn create_built_ins(jobs: &JobClient, with_vault: bool) -> Result<(), Error> {
    if with_vault {
        jobs.create_missing_schedule(ScheduleChange {
            name: VAULT_REBUILD.into(),
            cron: Some("0 3 * * *".into()),
            kind: Some("corpus.vault_rebuild".into()),
            args: None,
            queue: Some("index".into()),
            enabled: Some(true),
        })
        .await?;
    }
    jobs.create_missing_schedule(ScheduleChange {
        name: LISTINGS_FETCH.into(),
        cron: Some("0 * * * *".into()),
        kind: Some("listings.fetch_all".into()),
        args: None,
        queue: Some("fetch".into()),
        enabled: Some(false),
    })
    .await
}
