//! Job listings as tools: `jobs.fetch_new`, `jobs.fetch_result`, over the operations the
//! listings page's "Fetch new" uses too (`ops::listings`).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::receipts::Receipt;
use super::{Refusal, Tools};
use crate::model::FetchAnswer;
use crate::ops::{Operator, listings};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchNewParams {
    /// Fetch only these sources (ids from the listings page); every enabled source
    /// when not given.
    pub source_ids: Option<Vec<i64>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchResultParams {
    /// The job_ids a jobs.fetch_new answer gave.
    pub job_ids: Vec<i64>,
}

#[tool_router(router = listings_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "jobs.fetch_new",
        title = "Fetch new job listings",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        ),
        description = "Fetch new job listings: one fetch per enabled job board (or per source in source_ids), run in parallel. Waits up to 20 s; when every fetch is done the answer has pending:false and the listings, where new:true marks listings no earlier fetch saw. Otherwise it is a receipt with pending:true: pass its job_ids to jobs.fetch_result later.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<FetchAnswer>()
    )]
    async fn jobs_fetch_new(
        &self,
        Parameters(params): Parameters<FetchNewParams>,
    ) -> Result<Receipt<FetchAnswer>, Refusal> {
        let sources = params.source_ids.as_deref();
        Ok(Receipt(
            listings::fetch_new(&self.state, Operator::Agent, sources).await?,
        ))
    }

    #[tool(
        name = "jobs.fetch_result",
        title = "Job listing fetches' result",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Redeem a jobs.fetch_new receipt: with its job_ids, the answer jobs.fetch_new gives when its fetches finish in time, or pending:true while one still runs.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<FetchAnswer>()
    )]
    async fn jobs_fetch_result(
        &self,
        Parameters(params): Parameters<FetchResultParams>,
    ) -> Result<Receipt<FetchAnswer>, Refusal> {
        Ok(Receipt(
            listings::fetch_result(&self.state, Operator::Agent, &params.job_ids).await?,
        ))
    }
}
