//! The answers of the tools that start jobs and wait for them, with the jobs' resources
//! named: an agent that got a receipt (`pending: true`) reads
//! `standmeet://jobs/{id}`, or subscribes to it, instead of polling (`resources`).
//!
//! The structured content stays exactly the operation's view (docs/reference/answers.md gives its
//! shape); the resources go in the result's `_meta`, under [`JOB_RESOURCES`], and the
//! progress messages of the wait name them too.

use rmcp::ErrorData;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, MetaObject};
use serde::Serialize;
use standmeet_jobs::JobId;

use super::resources::job_uri;
use crate::model::{FetchAnswer, WriteReceipt};
use crate::ops::Done;
use crate::ops::access::ApproveAnswer;
use crate::ops::vault::RebuildAnswer;
use crate::ops::webhooks::TestAnswer;

/// The `_meta` key of a waiting tool's result that lists its jobs' resource URIs.
pub const JOB_RESOURCES: &str = "standmeet/job_resources";

/// A waiting tool's answer: the operation's view as structured content (the tool lists
/// the view's schema as its output schema), its jobs' resources in `_meta`.
pub struct Receipt<T>(pub T);

impl<T: Serialize + AboutJobs> IntoCallToolResult for Receipt<T> {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        let resources: Vec<String> = self.0.job_ids().into_iter().map(job_uri).collect();
        let view = serde_json::to_value(&self.0).map_err(|err| {
            ErrorData::internal_error(format!("a view that does not serialize: {err}"), None)
        })?;
        let mut result = CallToolResult::structured(view);
        let mut meta = MetaObject::default();
        meta.0
            .insert(JOB_RESOURCES.into(), serde_json::json!(resources));
        result.meta = Some(meta);
        Ok(result.into())
    }
}

/// An answer that is about some jobs.
pub trait AboutJobs {
    fn job_ids(&self) -> Vec<JobId>;
}

impl AboutJobs for ApproveAnswer {
    fn job_ids(&self) -> Vec<JobId> {
        vec![JobId(self.mail_job_id)]
    }
}

impl AboutJobs for FetchAnswer {
    fn job_ids(&self) -> Vec<JobId> {
        self.job_ids.clone()
    }
}

impl AboutJobs for WriteReceipt {
    fn job_ids(&self) -> Vec<JobId> {
        vec![self.index_job_id]
    }
}

impl AboutJobs for RebuildAnswer {
    fn job_ids(&self) -> Vec<JobId> {
        vec![self.job_id]
    }
}

impl<T: AboutJobs> AboutJobs for Done<T> {
    fn job_ids(&self) -> Vec<JobId> {
        self.view.job_ids()
    }
}

impl AboutJobs for TestAnswer {
    fn job_ids(&self) -> Vec<JobId> {
        vec![JobId(self.delivery_job_id)]
    }
}
