//! The corpus: the admin's server functions (list with grep, one entry, create, update,
//! promote: each answers the write's receipt) and the visitors' search.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

use crate::api::FormError;

/// A piece of a result's snippet: plain text, or a matched term to mark.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnippetPiece {
    pub text: String,
    pub mark: bool,
}

/// An entry as the admin pages show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryView {
    pub id: i64,
    pub title: String,
    pub body: String,
    pub visibility: String,
    pub status: String,
    pub version: i64,
    pub updated: String,
    /// indexed, indexing or failed.
    pub index_state: String,
    pub index_job_id: Option<i64>,
    pub index_error: Option<String>,
    /// The body as the entry page renders it (links go to admin pages); only on an
    /// entry's own page.
    pub preview_html: Option<String>,
    /// The vault note the entry is made from: the pages offer no edit of it (the note
    /// is the source; the server refuses one).
    #[serde(default)]
    pub note_path: Option<String>,
}

pub use crate::model::WriteReceipt;

/// One result of a visitor's search.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    pub id: i64,
    pub title: String,
    pub restricted: bool,
    pub snippet: Vec<SnippetPiece>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchAnswer {
    pub query: String,
    pub hits: Vec<SearchHit>,
    /// Whether restricted entries were searched too (the visitor redeemed a code).
    pub restricted_included: bool,
}

/// The newest entries; with `grep`, those whose title or text contains it.
#[server(endpoint = "corpus/entries", input = GetUrl)]
pub async fn corpus_entries(grep: Option<String>) -> Result<Vec<EntryView>, ServerFnError> {
    server::entries(grep).await
}

#[server(endpoint = "corpus/entry", input = GetUrl)]
pub async fn corpus_entry(id: i64) -> Result<EntryView, ServerFnError> {
    server::entry(id).await
}

#[server(endpoint = "corpus/create")]
pub async fn create_corpus_entry(
    title: String,
    body: String,
    visibility: String,
) -> Result<WriteReceipt, ServerFnError> {
    server::create(title, body, visibility).await
}

#[server(endpoint = "corpus/update")]
pub async fn update_corpus_entry(
    id: i64,
    title: String,
    body: String,
    visibility: String,
) -> Result<WriteReceipt, ServerFnError> {
    server::update(id, title, body, visibility).await
}

#[server(endpoint = "corpus/promote")]
pub async fn promote_corpus_entry(id: i64) -> Result<WriteReceipt, ServerFnError> {
    server::promote(id).await
}

/// An entry as a visitor reads it (`/entries/<id>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicEntryView {
    pub id: i64,
    pub title: String,
    /// The body's Markdown as sanitized HTML, its wikilinks resolved for this reader.
    pub body_html: String,
    pub restricted: bool,
}

/// Entry `id` for a visitor, under search's rules (promoted; restricted only after
/// `/access`); `None` when there is no such entry for them.
#[server(endpoint = "entry", input = GetUrl)]
pub async fn public_entry(id: i64) -> Result<Option<PublicEntryView>, ServerFnError> {
    server::public_entry(id).await
}

/// A visitor's search: promoted entries, restricted ones only after `/access`.
#[server(endpoint = "search", input = GetUrl)]
pub async fn search_corpus(q: String) -> Result<SearchAnswer, FormError> {
    server::search(q).await
}

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;
    use tower_sessions::Session;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::{form_reply, reply};
    use crate::api::when;
    use crate::domain::corpus::{self, EntryRow, Written};
    use crate::security::guard::SESSION_ACCESS_GRANTED;
    use crate::state::AppState;

    /// How many entries the admin page lists.
    const ENTRIES_SHOWN: i64 = 200;

    pub fn view(row: EntryRow) -> EntryView {
        EntryView {
            id: row.id,
            title: row.title,
            body: row.body,
            visibility: row.visibility.as_str().into(),
            status: row.status.as_str().into(),
            version: row.version,
            updated: when(row.updated_at),
            index_state: row.index_state.as_str().into(),
            index_job_id: row.index_job_id,
            index_error: row.index_error,
            preview_html: None,
            note_path: row.note_path,
        }
    }

    pub async fn entries(grep: Option<String>) -> Result<Vec<EntryView>, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let rows = corpus::entries(&state.pool, grep.as_deref(), ENTRIES_SHOWN)
            .await
            .map_err(reply)?;
        Ok(rows.into_iter().map(view).collect())
    }

    pub async fn entry(id: i64) -> Result<EntryView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let row = corpus::entry(&state.pool, id).await.map_err(reply)?;
        let preview = corpus::body_html(&state.pool, &row.body, corpus::Reader::Admin)
            .await
            .map_err(reply)?;
        Ok(EntryView {
            preview_html: Some(preview),
            ..view(row)
        })
    }

    async fn receipt(state: &AppState, written: Written) -> Result<WriteReceipt, ServerFnError> {
        corpus::receipt(&state.pool, &state.jobs, state.settings.index_wait, written)
            .await
            .map_err(reply)
    }

    pub async fn create(
        title: String,
        body: String,
        visibility: String,
    ) -> Result<WriteReceipt, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let written = corpus::create(&state.pool, &state.jobs, &title, &body, &visibility)
            .await
            .map_err(reply)?;
        tracing::info!(
            entry.id = written.id,
            admin.id = admin.id,
            "a corpus entry was created"
        );
        receipt(&state, written).await
    }

    pub async fn update(
        id: i64,
        title: String,
        body: String,
        visibility: String,
    ) -> Result<WriteReceipt, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let written = corpus::update(
            &state.pool,
            &state.jobs,
            id,
            Some(&title),
            Some(&body),
            Some(&visibility),
        )
        .await
        .map_err(reply)?;
        tracing::info!(
            entry.id = id,
            admin.id = admin.id,
            "a corpus entry was changed"
        );
        receipt(&state, written).await
    }

    pub async fn promote(id: i64) -> Result<WriteReceipt, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let written = corpus::promote(&state.pool, &state.jobs, id)
            .await
            .map_err(reply)?;
        tracing::info!(
            entry.id = id,
            admin.id = admin.id,
            "a corpus entry was promoted"
        );
        receipt(&state, written).await
    }

    /// Whether this visitor redeemed an access code.
    async fn access_granted() -> bool {
        match leptos_axum::extract::<Session>().await {
            Ok(session) => session
                .get::<String>(SESSION_ACCESS_GRANTED)
                .await
                .ok()
                .flatten()
                .is_some(),
            Err(_) => false,
        }
    }

    pub fn hit_view(hit: corpus::Hit) -> SearchHit {
        SearchHit {
            id: hit.id,
            title: hit.title,
            restricted: hit.visibility == corpus::Visibility::Restricted,
            snippet: hit
                .snippet
                .into_iter()
                .map(|piece| SnippetPiece {
                    text: piece.text,
                    mark: piece.mark,
                })
                .collect(),
        }
    }

    pub async fn public_entry(id: i64) -> Result<Option<PublicEntryView>, ServerFnError> {
        let state = expect_context::<AppState>();
        let restricted = access_granted().await;
        let entry = corpus::published_entry(&state.pool, id, restricted)
            .await
            .map_err(reply)?;
        let Some(entry) = entry else {
            return Ok(None);
        };
        let reader = corpus::Reader::Visitor {
            restricted_allowed: restricted,
        };
        let body_html = corpus::body_html(&state.pool, &entry.body, reader)
            .await
            .map_err(reply)?;
        Ok(Some(PublicEntryView {
            id: entry.id,
            title: entry.title,
            body_html,
            restricted: entry.visibility == corpus::Visibility::Restricted,
        }))
    }

    pub async fn search(q: String) -> Result<SearchAnswer, FormError> {
        let state = expect_context::<AppState>();
        let restricted = access_granted().await;
        let hits = corpus::search(&state.pool, &q, restricted)
            .await
            .map_err(form_reply)?;
        Ok(SearchAnswer {
            query: q.trim().to_string(),
            hits: hits.into_iter().map(hit_view).collect(),
            restricted_included: restricted,
        })
    }
}
