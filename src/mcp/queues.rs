//! Queues as tools: `queues.list`, `queues.pause`, `queues.resume`, over the operations
//! the queues page uses too (`ops::queues`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tools, answer};
use crate::ops::{Operator, queues};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueueParams {
    /// The queue's name, as queues.list shows it (e.g. "mail").
    pub queue: String,
}

#[tool_router(router = queues_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "queues.list",
        description = "The job queues: {queues: [{name, paused, counts: {<state>: n}, finished_last_5m, oldest_available_age_s}]}; oldest_available_age_s is null when no job waits."
    )]
    async fn queues_list(&self) -> Result<CallToolResult, ErrorData> {
        answer(queues::list(&self.state, Operator::Agent).await)
    }

    #[tool(
        name = "queues.pause",
        description = "Pauses a queue in every StandMeet process until it is resumed (it survives restarts): its jobs stay available, running ones finish. Answers the queue as queues.list shows it."
    )]
    async fn queues_pause(
        &self,
        Parameters(params): Parameters<QueueParams>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(queues::set_paused(&self.state, Operator::Agent, &params.queue, true).await)
    }

    #[tool(
        name = "queues.resume",
        description = "Resumes a paused queue: the jobs that waited run at once. Answers the queue as queues.list shows it."
    )]
    async fn queues_resume(
        &self,
        Parameters(params): Parameters<QueueParams>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(queues::set_paused(&self.state, Operator::Agent, &params.queue, false).await)
    }
}
