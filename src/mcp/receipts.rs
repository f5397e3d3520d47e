//! The answers of the tools that start jobs and wait for them, with the jobs' resources
//! named: an agent that got a receipt (`pending: true`) reads
//! `standmeet://jobs/{id}`, or subscribes to it, instead of polling (`resources`).

use schemars::JsonSchema;
use serde::Serialize;
use standmeet_jobs::JobId;

use super::resources::job_uri;
use crate::model::{FetchAnswer, WriteReceipt};
use crate::ops::Done;
use crate::ops::access::ApproveAnswer;
use crate::ops::vault::RebuildAnswer;
use crate::ops::webhooks::TestAnswer;

/// A waiting tool's answer: the operation's view, and its jobs' resources.
#[derive(Serialize, JsonSchema)]
pub struct Receipt<T> {
    #[serde(flatten)]
    pub answer: T,
    /// The resources of the jobs this answer is about (standmeet://jobs/{id}): read
    /// one as tasks.get answers it, or subscribe to it to be told when the job is
    /// finished.
    pub job_resources: Vec<String>,
}

/// An answer that is about some jobs.
pub trait AboutJobs {
    fn job_ids(&self) -> Vec<JobId>;
}

impl<T: AboutJobs> From<T> for Receipt<T> {
    fn from(answer: T) -> Self {
        let job_resources = answer.job_ids().into_iter().map(job_uri).collect();
        Receipt {
            answer,
            job_resources,
        }
    }
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
