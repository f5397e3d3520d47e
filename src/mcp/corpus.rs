//! The corpus as tools: `corpus.create`, `corpus.update`, `corpus.promote`,
//! `corpus.search` (as `api::corpus`), and the vault's `corpus.rebuild`,
//! `corpus.rebuild_result`.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Tools, respond};
use crate::domain::corpus::{self, CorpusError, Written};
use crate::error::AppError;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateEntryParams {
    /// The entry's title (1 to 300 characters).
    pub title: String,
    /// The entry's text.
    pub body: String,
    /// public (every visitor, once promoted) or restricted (visitors with an access
    /// code).
    pub visibility: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PromoteEntryParams {
    /// The draft entry to promote.
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchParams {
    /// What to look for (words; CJK text works without spaces); at most 200
    /// characters.
    pub q: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateEntryParams {
    /// The entry to change.
    pub id: i64,
    /// A new title.
    pub title: Option<String>,
    /// A new text.
    pub body: Option<String>,
    /// public or restricted.
    pub visibility: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RebuildResultParams {
    /// The rebuild's job id, as corpus.rebuild answered it.
    pub job_id: i64,
}

/// How long `corpus.rebuild` waits before it answers a receipt.
const REBUILD_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

#[tool_router(router = corpus_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "corpus.create",
        description = "Write a draft corpus entry. Waits up to 2 s for it to be indexed and answers {id, indexed, index_job_id}; indexed:true means a search right after finds it (once promoted)."
    )]
    async fn corpus_create(
        &self,
        Parameters(params): Parameters<CreateEntryParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let written = corpus::create(
            &self.state.pool,
            &self.state.jobs,
            &params.title,
            &params.body,
            &params.visibility,
        )
        .await;
        self.corpus_receipt(written).await
    }

    #[tool(
        name = "corpus.update",
        description = "Change a corpus entry's title, body or visibility (only the ones given). Answers {id, indexed, index_job_id} like corpus.create."
    )]
    async fn corpus_update(
        &self,
        Parameters(params): Parameters<UpdateEntryParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let written = corpus::update(
            &self.state.pool,
            &self.state.jobs,
            params.id,
            params.title.as_deref(),
            params.body.as_deref(),
            params.visibility.as_deref(),
        )
        .await;
        self.corpus_receipt(written).await
    }

    #[tool(
        name = "corpus.promote",
        description = "Promote a draft corpus entry so visitors can find it. Answers {id, indexed, index_job_id} like corpus.create."
    )]
    async fn corpus_promote(
        &self,
        Parameters(params): Parameters<PromoteEntryParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let written = corpus::promote(&self.state.pool, &self.state.jobs, params.id).await;
        self.corpus_receipt(written).await
    }

    #[tool(
        name = "corpus.rebuild",
        description = "Rebuild the corpus from the Obsidian vault (STANDMEET_VAULT): new notes are added, changed ones updated, entries whose note is gone removed. Waits up to 20 s: {job_id, pending:false, added, updated, removed, unchanged, failed: [{path, error}]}, else {job_id, pending:true} (ask corpus.rebuild_result later)."
    )]
    async fn corpus_rebuild(&self) -> Result<CallToolResult, ErrorData> {
        let state = &self.state;
        let answer = corpus::vault::rebuild_and_wait(
            &state.pool,
            &state.jobs,
            state.settings.vault.as_deref(),
            REBUILD_WAIT,
        )
        .await;
        respond(answer.map(|answer| json!(answer)).map_err(AppError::from))
    }

    #[tool(
        name = "corpus.rebuild_result",
        description = "A vault rebuild's answer, in corpus.rebuild's shape: the counts once it finished, {job_id, pending:true} while it runs."
    )]
    async fn corpus_rebuild_result(
        &self,
        Parameters(params): Parameters<RebuildResultParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let answer =
            corpus::vault::rebuild_result(&self.state.jobs, standmeet_jobs::JobId(params.job_id))
                .await;
        respond(answer.map(|answer| json!(answer)).map_err(AppError::from))
    }

    #[tool(
        name = "corpus.search",
        description = "Search the promoted public corpus entries, best first: {q, results: [{id, title, snippet}]}, matched terms in **bold**. An empty result list means nothing matched."
    )]
    async fn corpus_search(
        &self,
        Parameters(params): Parameters<SearchParams>,
    ) -> Result<CallToolResult, ErrorData> {
        // An agent holds no visitor session, so it sees what any visitor sees.
        respond(
            corpus::search(&self.state.pool, &params.q, false)
                .await
                .map_err(AppError::from)
                .map(|hits| {
                    json!({
                        "q": params.q.trim(),
                        "results": hits.into_iter().map(|hit| json!({
                            "id": hit.id,
                            "title": hit.title,
                            "snippet": corpus::text::snippet_text(&hit.snippet),
                        })).collect::<Vec<_>>(),
                    })
                }),
        )
    }
}

impl Tools {
    /// Waits for a corpus write's index job, then answers its receipt.
    async fn corpus_receipt(
        &self,
        written: Result<Written, CorpusError>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = &self.state;
        let receipt = async {
            let receipt = corpus::receipt(
                &state.pool,
                &state.jobs,
                state.settings.index_wait,
                written?,
            )
            .await?;
            serde_json::to_value(receipt).map_err(|err| AppError::Internal(err.into()))
        };
        respond(receipt.await)
    }
}
