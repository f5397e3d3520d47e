//! Queues as tools: `queues.list`, `queues.pause`, `queues.resume`, over the operations
//! the queues page uses too (`ops::queues`).

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Refusal, Tools};
use crate::ops::Done;
use crate::ops::queues::QueueList;
use crate::ops::{Operator, queues};
use standmeet_jobs::QueueSummary;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueueParams {
    /// The queue's name, as queues.list shows it (e.g. "mail").
    pub queue: String,
}

#[tool_router(router = queues_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "queues.list",
        title = "List job queues",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "The job queues with their jobs counted by state; oldest_available_age_s is null when no job waits."
    )]
    async fn queues_list(&self) -> Result<Json<QueueList>, Refusal> {
        Ok(Json(queues::list(&self.state, Operator::Agent).await?))
    }

    #[tool(
        name = "queues.pause",
        title = "Pause a job queue",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Pauses a queue in every StandMeet process until it is resumed (it survives restarts): its jobs stay available, running ones finish. Answers the queue as queues.list shows it."
    )]
    async fn queues_pause(
        &self,
        Parameters(params): Parameters<QueueParams>,
    ) -> Result<Json<Done<QueueSummary>>, Refusal> {
        Ok(Json(
            queues::set_paused(&self.state, Operator::Agent, &params.queue, true).await?,
        ))
    }

    #[tool(
        name = "queues.resume",
        title = "Resume a job queue",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Resumes a paused queue: the jobs that waited run at once. Answers the queue as queues.list shows it."
    )]
    async fn queues_resume(
        &self,
        Parameters(params): Parameters<QueueParams>,
    ) -> Result<Json<Done<QueueSummary>>, Refusal> {
        Ok(Json(
            queues::set_paused(&self.state, Operator::Agent, &params.queue, false).await?,
        ))
    }
}
