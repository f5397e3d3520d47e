//! The schedules page over HTTP (admins only), as adapters of `ops::schedules`.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::schedules::{ScheduleView, SchedulesView};

#[server(endpoint = "schedules/list", input = GetUrl)]
pub async fn schedules_overview() -> Result<SchedulesView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::schedules::page(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// "Enable" / "Disable". An enabled schedule fires from now on, not for slots past.
#[server(endpoint = "schedules/set_enabled")]
pub async fn set_schedule_enabled(name: String, enabled: bool) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::schedules::set_enabled(&state, admin, name, enabled)
        .await
        .map(|done| done.message)
        .map_err(crate::api::replies::reply)
}

/// "Run now": the schedule's job at once, unless its last one is still pending.
#[server(endpoint = "schedules/run_now")]
pub async fn run_schedule_now(name: String) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::schedules::run_now(&state, admin, &name)
        .await
        .map(|done| done.message)
        .map_err(crate::api::replies::reply)
}

/// Adds a schedule; `args` is a JSON object (empty: `{}`), `queue` empty: the kind's own.
#[server(endpoint = "schedules/add")]
pub async fn add_schedule(
    name: String,
    cron: String,
    kind: String,
    args: String,
    queue: String,
) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::schedules::add(&state, admin, name, cron, kind, args, queue)
        .await
        .map_err(crate::api::replies::reply)
}
