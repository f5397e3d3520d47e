//! The schedules page's server side (admins only): every schedule with its meaning, its
//! next run and its last run's job; Enable / Disable, Run now, and adding one. The
//! schedules themselves are the job engine's (`standmeet_jobs::periodic`).

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

use crate::model::JobState;

/// A schedule as the page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleView {
    pub name: String,
    pub cron: String,
    /// The expression in words ("At 03:00.").
    pub meaning: String,
    pub kind: String,
    /// The job's arguments, as compact JSON.
    pub args: String,
    pub queue: String,
    pub enabled: bool,
    pub next_run: Option<WhenView>,
    pub last_run: Option<LastRunView>,
}

/// A moment, for `<time datetime=…>` and in the owner's zone for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhenView {
    pub rfc3339: String,
    pub local: String,
}

/// The newest job the schedule inserted, while it is kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LastRunView {
    pub job_id: i64,
    pub state: JobState,
    pub at: WhenView,
}

/// The page: the schedules, the zone they are read in, and the kinds the form offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchedulesView {
    pub schedules: Vec<ScheduleView>,
    pub timezone: String,
    pub kinds: Vec<String>,
}

#[server(endpoint = "schedules/list", input = GetUrl)]
pub async fn schedules_overview() -> Result<SchedulesView, ServerFnError> {
    server::overview().await
}

/// "Enable" / "Disable". An enabled schedule fires from now on, not for slots past.
#[server(endpoint = "schedules/set_enabled")]
pub async fn set_schedule_enabled(name: String, enabled: bool) -> Result<String, ServerFnError> {
    server::set_enabled(name, enabled).await
}

/// "Run now": the schedule's job at once, unless its last one is still pending.
#[server(endpoint = "schedules/run_now")]
pub async fn run_schedule_now(name: String) -> Result<String, ServerFnError> {
    server::run_now(name).await
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
    server::add(name, cron, kind, args, queue).await
}

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::reply;
    use crate::error::AppError;
    use crate::state::AppState;
    use standmeet_jobs::periodic::{Schedule, ScheduleChange};

    fn when(rfc3339: &str, tz: &jiff::tz::TimeZone) -> WhenView {
        let local = rfc3339
            .parse::<jiff::Timestamp>()
            .map(|at| tz.to_datetime(at).strftime("%a %Y-%m-%d %H:%M").to_string())
            .unwrap_or_else(|_| rfc3339.to_string());
        WhenView {
            rfc3339: rfc3339.to_string(),
            local,
        }
    }

    fn view(schedule: Schedule, tz: &jiff::tz::TimeZone) -> ScheduleView {
        ScheduleView {
            meaning: schedule.description,
            args: schedule.args.to_string(),
            next_run: schedule.next_run_at.as_deref().map(|at| when(at, tz)),
            last_run: schedule.last_run.map(|last| LastRunView {
                job_id: last.job_id.0,
                state: last.state,
                at: when(&last.at, tz),
            }),
            name: schedule.name,
            cron: schedule.cron,
            kind: schedule.kind,
            queue: schedule.queue,
            enabled: schedule.enabled,
        }
    }

    pub async fn overview() -> Result<SchedulesView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let tz = &state.settings.timezone;
        let schedules = state.jobs.schedules(tz).await.map_err(reply)?;
        let mut kinds: Vec<String> = state.registry.kinds().map(str::to_string).collect();
        kinds.sort();
        Ok(SchedulesView {
            schedules: schedules.into_iter().map(|s| view(s, tz)).collect(),
            timezone: tz.iana_name().unwrap_or("UTC").to_string(),
            kinds,
        })
    }

    pub async fn set_enabled(name: String, enabled: bool) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let change = ScheduleChange {
            name,
            enabled: Some(enabled),
            ..Default::default()
        };
        // Only an existing schedule: a typo must not create one.
        state
            .jobs
            .schedule(&state.settings.timezone, &change.name)
            .await
            .map_err(reply)?;
        let schedule = state
            .jobs
            .set_schedule(&state.registry, &state.settings.timezone, change)
            .await
            .map_err(reply)?;
        tracing::info!(schedule = %schedule.name, enabled, admin.id = admin.id, "a schedule was switched");
        Ok(if enabled {
            format!(
                "Schedule {} enabled: it fires from its next slot on.",
                schedule.name
            )
        } else {
            format!("Schedule {} disabled.", schedule.name)
        })
    }

    pub async fn run_now(name: String) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let inserted = state
            .jobs
            .run_schedule_now(&state.registry, &name)
            .await
            .map_err(reply)?;
        tracing::info!(schedule = %name, job.id = %inserted.id, duplicate = inserted.duplicate, admin.id = admin.id, "a schedule was run by hand");
        Ok(if inserted.duplicate {
            format!(
                "Already queued: job {} of {name} has not finished yet.",
                inserted.id
            )
        } else {
            format!("Job {} of {name} queued.", inserted.id)
        })
    }

    pub async fn add(
        name: String,
        cron: String,
        kind: String,
        args: String,
        queue: String,
    ) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let tz = &state.settings.timezone;
        let name = name.trim().to_string();
        if state.jobs.schedule(tz, &name).await.is_ok() {
            return Err(reply(AppError::Conflict(format!(
                "A schedule named {name} exists already: enable, disable or run it in its row."
            ))));
        }
        let args = match args.trim() {
            "" => serde_json::json!({}),
            text => serde_json::from_str(text).map_err(|err| {
                reply(AppError::BadRequest(format!(
                    "Args is not JSON ({err}); write an object such as {{}} or {{\"source_id\": 1}}."
                )))
            })?,
        };
        let queue = Some(queue.trim().to_string()).filter(|queue| !queue.is_empty());
        let change = ScheduleChange {
            name,
            cron: Some(cron),
            kind: Some(kind.trim().to_string()),
            args: Some(args),
            queue,
            enabled: Some(true),
        };
        let schedule = state
            .jobs
            .set_schedule(&state.registry, tz, change)
            .await
            .map_err(reply)?;
        tracing::info!(schedule = %schedule.name, admin.id = admin.id, "a schedule was added");
        Ok(format!(
            "Schedule {} added: {}",
            schedule.name, schedule.description
        ))
    }
}
