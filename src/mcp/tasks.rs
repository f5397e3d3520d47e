//! Jobs as tools: `tasks.get`, `tasks.list`, over the operations the Tasks panel uses
//! too (`ops::tasks`), so a filter means the same on both.

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Refusal, Tools};
use crate::model::JobId;
use crate::ops::Operator;
use crate::ops::tasks::{self, TaskQuery};
use crate::ops::tasks::{TaskList, TaskRow};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetTaskParams {
    /// The id of the job.
    #[schemars(with = "i64")]
    pub job_id: JobId,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTasksParams {
    /// Only jobs in this state: available, scheduled, running, retryable, completed,
    /// discarded or cancelled.
    pub state: Option<String>,
    /// Only jobs of this kind, such as access_request.approval_mail.
    pub kind: Option<String>,
    /// Only jobs in this queue, such as mail.
    pub queue: Option<String>,
    /// What the Tasks panel's search box takes: a job id, or a JSON object the jobs'
    /// arguments contain, such as {"request_id": 7}.
    pub q: Option<String>,
    /// How many jobs, newest first (1 to 50; 20 when not given).
    pub limit: Option<i64>,
    /// The next_after of the previous answer, for the page after it.
    #[schemars(with = "Option<i64>")]
    pub after: Option<JobId>,
}

#[tool_router(router = tasks_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "tasks.get",
        title = "Read a job",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "The state of one job (a task): kind, queue, state, attempts, times and its last error."
    )]
    async fn tasks_get(
        &self,
        Parameters(params): Parameters<GetTaskParams>,
    ) -> Result<Json<TaskRow>, Refusal> {
        Ok(Json(
            tasks::get(&self.state, Operator::Agent, params.job_id).await?,
        ))
    }

    #[tool(
        name = "tasks.list",
        title = "List jobs",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Jobs (tasks), newest first, filtered and searched as the Tasks panel does: by state, kind, queue and q (a job id, or a JSON object the arguments contain). A page holds up to limit jobs; pass next_after as after for the next one (null on the last page)."
    )]
    async fn tasks_list(
        &self,
        Parameters(params): Parameters<ListTasksParams>,
    ) -> Result<Json<TaskList>, Refusal> {
        // The panel's `before` is the tool's `after`: both ask for the jobs older than
        // the last one seen.
        let query = TaskQuery {
            state: params.state,
            kind: params.kind,
            queue: params.queue,
            q: params.q,
            before: params.after,
            after: None,
        };
        Ok(Json(
            tasks::list(&self.state, Operator::Agent, &query, params.limit).await?,
        ))
    }
}
