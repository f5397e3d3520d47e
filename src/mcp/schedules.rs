//! Schedules as tools: `schedules.list`, `schedules.run_now`, `schedules.set`, over the
//! operations the `/admin/schedules` page uses too (`ops::schedules`).

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Refusal, Tools};
use crate::ops::Done;
use crate::ops::schedules::{RunNow, ScheduleList};
use crate::ops::{Operator, schedules};
use standmeet_jobs::periodic::Schedule;
use standmeet_jobs::periodic::ScheduleChange;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ScheduleNameParams {
    /// The schedule's name, as schedules.list shows it (e.g. "listings-fetch").
    pub name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetScheduleParams {
    /// The schedule's name: 1 to 64 lowercase letters, digits, '-' or '_'.
    pub name: String,
    /// Five fields (minute hour day-of-month month day-of-week, e.g. "0 3 * * *"), or
    /// @hourly, @daily, @weekly; read in the owner's time zone. Needed for a new schedule.
    pub cron: Option<String>,
    /// The kind of job each firing inserts (one this StandMeet runs). Needed for a new
    /// schedule.
    pub kind: Option<String>,
    /// The job's arguments: a JSON object ({} when not given on a new schedule).
    pub args: Option<serde_json::Value>,
    /// The queue its jobs go to (the kind's own queue when not given).
    pub queue: Option<String>,
    /// Whether it fires (true when not given on a new schedule).
    pub enabled: Option<bool>,
}

#[tool_router(router = schedules_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "schedules.list",
        title = "List periodic jobs",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "The schedules that insert jobs periodically; next_run_at is null while disabled."
    )]
    async fn schedules_list(&self) -> Result<Json<ScheduleList>, Refusal> {
        Ok(Json(schedules::list(&self.state, Operator::Agent).await?))
    }

    #[tool(
        name = "schedules.run_now",
        title = "Run a periodic job now",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Inserts the schedule's job now; duplicate is true (and job_id the pending one) when its last job has not finished yet."
    )]
    async fn schedules_run_now(
        &self,
        Parameters(params): Parameters<ScheduleNameParams>,
    ) -> Result<Json<Done<RunNow>>, Refusal> {
        Ok(Json(
            schedules::run_now(&self.state, Operator::Agent, &params.name).await?,
        ))
    }

    #[tool(
        name = "schedules.set",
        title = "Change a periodic job",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Creates a schedule (name, cron and kind needed) or changes one (only what is given changes). A new, re-enabled or re-timed schedule fires from now on, not for slots already past. Answers the schedule as schedules.list shows it."
    )]
    async fn schedules_set(
        &self,
        Parameters(params): Parameters<SetScheduleParams>,
    ) -> Result<Json<Done<Schedule>>, Refusal> {
        let change = ScheduleChange {
            name: params.name,
            cron: params.cron,
            kind: params.kind,
            args: params.args,
            queue: params.queue,
            enabled: params.enabled,
        };
        Ok(Json(
            schedules::set(&self.state, Operator::Agent, change).await?,
        ))
    }
}
