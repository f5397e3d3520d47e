//! Schedules of periodic jobs: every schedule with its meaning, its next run and its
//! last run's job; Enable / Disable, Run now, and adding or changing one. The schedules
//! themselves are the job engine's (`standmeet_jobs::periodic`); the schedules page
//! (`api::schedules`) and the tools `schedules.*` answer these views.

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
    pub kinds: Vec<KindOffer>,
}

/// A kind the form offers: one a schedule can run, with an example of its arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindOffer {
    pub kind: String,
    pub example_args: String,
    /// What one run does.
    pub what: String,
}

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::ops::{Done, Operator};

    use super::*;
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

    /// The schedules as `schedules.list` gives them: `{"schedules": [schedule…]}`.
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct ScheduleList {
        pub schedules: Vec<Schedule>,
    }

    /// What "Run now" did: the job, and whether it was the one still pending.
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct RunNow {
        pub job_id: standmeet_jobs::JobId,
        pub duplicate: bool,
    }

    /// Every schedule, in the owner's time zone.
    pub async fn list(state: &AppState, _by: Operator) -> Result<ScheduleList, AppError> {
        Ok(ScheduleList {
            schedules: state.jobs.schedules(&state.settings.timezone).await?,
        })
    }

    /// The schedules page: every schedule with its meaning and runs in the owner's
    /// zone, and the kinds the form offers.
    pub async fn page(state: &AppState, by: Operator) -> Result<SchedulesView, AppError> {
        let tz = &state.settings.timezone;
        let schedules = list(state, by).await?.schedules;
        // The schedulable kinds this StandMeet runs (the vault's only with a vault).
        let kinds = crate::domain::schedules::SCHEDULABLE
            .iter()
            .filter(|offer| state.registry.kinds().any(|kind| kind == offer.kind))
            .filter(|offer| offer.kind != "corpus.vault_rebuild" || state.settings.vault.is_some())
            .map(|offer| KindOffer {
                kind: offer.kind.to_string(),
                example_args: offer.example_args.to_string(),
                what: offer.what.to_string(),
            })
            .collect();
        Ok(SchedulesView {
            schedules: schedules.into_iter().map(|s| view(s, tz)).collect(),
            timezone: tz.iana_name().unwrap_or("UTC").to_string(),
            kinds,
        })
    }

    /// Creates a schedule (name, cron and kind needed) or changes one (only what is
    /// given changes); a new, re-enabled or re-timed schedule fires from now on.
    pub async fn set(
        state: &AppState,
        by: Operator,
        change: ScheduleChange,
    ) -> Result<Done<Schedule>, AppError> {
        // A kind this StandMeet runs, but about one thing (a mail, a delivery): no
        // clock can give its arguments. (A kind nobody runs the engine refuses itself.)
        if let Some(kind) = &change.kind
            && state.registry.kinds().any(|known| known == kind.trim())
        {
            crate::domain::schedules::schedulable(kind).map_err(AppError::BadRequest)?;
        }
        let schedule = state
            .jobs
            .set_schedule(&state.registry, &state.settings.timezone, change)
            .await?;
        tracing::info!(schedule = %schedule.name, enabled = schedule.enabled, ?by, "a schedule was set");
        let message = format!("Schedule {} set: {}", schedule.name, schedule.description);
        Ok(Done {
            view: schedule,
            message,
        })
    }

    /// "Enable" / "Disable" an existing schedule (a typo must not create one).
    pub async fn set_enabled(
        state: &AppState,
        by: Operator,
        name: String,
        enabled: bool,
    ) -> Result<Done<Schedule>, AppError> {
        state.jobs.schedule(&state.settings.timezone, &name).await?;
        let change = ScheduleChange {
            name,
            enabled: Some(enabled),
            ..Default::default()
        };
        let mut done = set(state, by, change).await?;
        done.message = if enabled {
            format!(
                "Schedule {} enabled: it fires from its next slot on.",
                done.view.name
            )
        } else {
            format!("Schedule {} disabled.", done.view.name)
        };
        Ok(done)
    }

    /// "Run now": the schedule's job at once, unless its last one is still pending.
    pub async fn run_now(
        state: &AppState,
        by: Operator,
        name: &str,
    ) -> Result<Done<RunNow>, AppError> {
        let inserted = state.jobs.run_schedule_now(&state.registry, name).await?;
        tracing::info!(schedule = %name, job.id = %inserted.id, duplicate = inserted.duplicate, ?by, "a schedule was run by hand");
        let message = if inserted.duplicate {
            format!(
                "Already queued: job {} of {name} has not finished yet.",
                inserted.id
            )
        } else {
            format!("Job {} of {name} queued.", inserted.id)
        };
        Ok(Done {
            view: RunNow {
                job_id: inserted.id,
                duplicate: inserted.duplicate,
            },
            message,
        })
    }

    /// The form's "Add": a new schedule only (an existing name is a 409), its args a
    /// JSON object (empty: `{}`), its queue the kind's own when empty.
    pub async fn add(
        state: &AppState,
        by: Operator,
        name: String,
        cron: String,
        kind: String,
        args: String,
        queue: String,
    ) -> Result<String, AppError> {
        let tz = &state.settings.timezone;
        let name = name.trim().to_string();
        if state.jobs.schedule(tz, &name).await.is_ok() {
            return Err(AppError::Conflict(format!(
                "A schedule named {name} exists already: enable, disable or run it in its row."
            )));
        }
        let args = match args.trim() {
            "" => serde_json::json!({}),
            text => serde_json::from_str(text).map_err(|err| {
                AppError::BadRequest(format!(
                    "Args is not JSON ({err}); write an object such as {{}} or {{\"source_id\": 1}}."
                ))
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
        let mut done = set(state, by, change).await?;
        done.message = format!(
            "Schedule {} added: {}",
            done.view.name, done.view.description
        );
        Ok(done.message)
    }
}
