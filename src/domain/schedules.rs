//! Schedules (product.md §12): periodic jobs kept in `job_schedules`, which the job
//! engine fires (`standmeet_jobs::periodic`), read in the owner's time zone
//! (`STANDMEET_TIMEZONE`). Pages and tools use `standmeet_jobs::periodic` with the
//! settings' zone and the app's registry; this module adds StandMeet's built-in
//! schedules.

use sqlx::PgPool;
use standmeet_jobs::periodic::{self, ScheduleChange, ScheduleError};

/// `listings-fetch`: "Fetch new" every hour, off until an admin turns it on.
pub const LISTINGS_FETCH: &str = "listings-fetch";

/// Creates the built-in schedules that do not exist yet (an admin's changes to them
/// stay).
pub async fn create_built_ins(pool: &PgPool) -> Result<(), ScheduleError> {
    periodic::create_missing(
        pool,
        ScheduleChange {
            name: LISTINGS_FETCH.into(),
            cron: Some("0 * * * *".into()),
            kind: Some("listings.fetch_all".into()),
            args: None,
            queue: Some("fetch".into()),
            enabled: Some(false),
        },
    )
    .await
}
