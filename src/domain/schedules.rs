//! Schedules (product.md §12): periodic jobs kept in `job_schedules`, which the job
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
