//! The corpus as tools: `corpus.create`, `corpus.update`, `corpus.promote`,
//! `corpus.search`, and the vault's `corpus.rebuild`, `corpus.rebuild_result`, over the
//! operations the corpus pages use too (`ops::corpus`, `ops::vault`).

use rmcp::handler::server::wrapper::Json;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::receipts::Receipt;
use super::{Refusal, Tools};
use crate::model::WriteReceipt;
use crate::ops::Done;
use crate::ops::corpus::SearchResults;
use crate::ops::vault::RebuildAnswer;
use crate::ops::{Operator, Visitor, corpus, vault};

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

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct RebuildParams {
    /// Remove every entry whose note is gone, however many. Without it, a rebuild that
    /// would remove more than half of the vault's entries (and more than 5) removes
    /// none and answers how many it would in would_remove.
    #[serde(default)]
    pub allow_removals: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RebuildResultParams {
    /// The rebuild's job id, as corpus.rebuild answered it.
    pub job_id: i64,
}

#[tool_router(router = corpus_tools, vis = "pub(super)")]
impl Tools {
    #[tool(
        name = "corpus.create",
        title = "Write a corpus entry",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        ),
        description = "Write a draft corpus entry. Waits up to 2 s for it to be indexed; indexed:true means a search right after finds it (once promoted), else index_job_id tells when it is.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<WriteReceipt>()
    )]
    async fn corpus_create(
        &self,
        Parameters(params): Parameters<CreateEntryParams>,
    ) -> Result<Receipt<WriteReceipt>, Refusal> {
        let (title, body, visibility) = (&params.title, &params.body, &params.visibility);
        Ok(Receipt(
            corpus::create(&self.state, Operator::Agent, title, body, visibility).await?,
        ))
    }

    #[tool(
        name = "corpus.update",
        title = "Change a corpus entry",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Change a corpus entry's title, body or visibility (only the ones given). Answers like corpus.create.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<WriteReceipt>()
    )]
    async fn corpus_update(
        &self,
        Parameters(params): Parameters<UpdateEntryParams>,
    ) -> Result<Receipt<WriteReceipt>, Refusal> {
        Ok(Receipt(
            corpus::update(
                &self.state,
                Operator::Agent,
                params.id,
                params.title.as_deref(),
                params.body.as_deref(),
                params.visibility.as_deref(),
            )
            .await?,
        ))
    }

    #[tool(
        name = "corpus.promote",
        title = "Promote a corpus entry",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Promote a draft corpus entry so visitors can find it. Answers like corpus.create.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<WriteReceipt>()
    )]
    async fn corpus_promote(
        &self,
        Parameters(params): Parameters<PromoteEntryParams>,
    ) -> Result<Receipt<WriteReceipt>, Refusal> {
        Ok(Receipt(
            corpus::promote(&self.state, Operator::Agent, params.id).await?,
        ))
    }

    #[tool(
        name = "corpus.rebuild",
        title = "Rebuild the corpus from the vault",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        description = "Rebuild the corpus from the Obsidian vault (STANDMEET_VAULT): new notes are added, changed ones updated, entries whose note is gone removed (more than half of the vault's, and more than 5, only with allow_removals: true; else none, and would_remove says how many). Waits up to 20 s for the counts; otherwise the answer is a receipt with pending:true: ask corpus.rebuild_result with its job_id later.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<Done<RebuildAnswer>>()
    )]
    async fn corpus_rebuild(
        &self,
        Parameters(params): Parameters<RebuildParams>,
    ) -> Result<Receipt<Done<RebuildAnswer>>, Refusal> {
        Ok(Receipt(
            vault::rebuild(&self.state, Operator::Agent, params.allow_removals).await?,
        ))
    }

    #[tool(
        name = "corpus.rebuild_result",
        title = "A vault rebuild's result",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "A vault rebuild's answer, as corpus.rebuild gives it: the counts once it finished, pending:true while it runs.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<RebuildAnswer>()
    )]
    async fn corpus_rebuild_result(
        &self,
        Parameters(params): Parameters<RebuildResultParams>,
    ) -> Result<Receipt<RebuildAnswer>, Refusal> {
        Ok(Receipt(
            vault::rebuild_result(&self.state, Operator::Agent, params.job_id).await?,
        ))
    }

    #[tool(
        name = "corpus.search",
        title = "Search the public corpus",
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Search the promoted public corpus entries, best first, matched terms in **bold** in the snippets. An empty result list means nothing matched."
    )]
    async fn corpus_search(
        &self,
        Parameters(params): Parameters<SearchParams>,
    ) -> Result<Json<SearchResults>, Refusal> {
        // An agent holds no visitor session, so it sees what any visitor sees.
        let visitor = Visitor::default();
        let found = corpus::search(&self.state, &visitor, &params.q).await;
        Ok(Json(found.map(SearchResults::from)?))
    }
}
