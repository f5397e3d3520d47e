//! Jobs as tools: `tasks.get`, `tasks.list`, over the operations the Tasks panel uses
//! too (`ops::tasks`), so a filter means the same on both.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tools, answer};
use crate::ops::Operator;
use crate::ops::tasks::{self, TaskQuery};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetTaskParams {
    /// The id of the job.
    pub job_id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTasksParams {
    /// Only jobs in this state: available, scheduled, running, retryable, completed,
    /// discarded or cancelled.
    pub state: Option<String>,
    /// Only jobs of this kind, such as access_request.approval_mail.
    pub kind: Option<String>,
    /// How many jobs, newest first (1 to 50; 20 when not given).
    pub limit: Option<i64>,
}

#[tool_router(router = tasks_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "tasks.get",
        description = "The state of one job (a task): kind, queue, state, attempts, times and its last error."
    )]
    async fn tasks_get(
        &self,
        Parameters(params): Parameters<GetTaskParams>,
    ) -> Result<CallToolResult, ErrorData> {
        answer(tasks::get(&self.state, Operator::Agent, params.job_id).await)
    }

    #[tool(
        name = "tasks.list",
        description = "Jobs (tasks), newest first, optionally of one state and one kind."
    )]
    async fn tasks_list(
        &self,
        Parameters(params): Parameters<ListTasksParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = TaskQuery {
            state: params.state,
            kind: params.kind,
            ..TaskQuery::default()
        };
        answer(tasks::list(&self.state, Operator::Agent, &query, params.limit).await)
    }
}
