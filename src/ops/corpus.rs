//! The corpus: entries listed with grep, one entry, create, update and promote (each
//! answers the write's receipt), a visitor's entry page and the search. The pages
//! (`api::corpus`) and the tools `corpus.*` answer these views.

use serde::{Deserialize, Serialize};

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
    /// That note's tags.
    #[serde(default)]
    pub tags: Vec<String>,
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

/// An entry as a visitor reads it (`/entries/<id>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicEntryView {
    pub id: i64,
    pub title: String,
    /// The body's Markdown as sanitized HTML, its wikilinks resolved for this reader.
    pub body_html: String,
    pub restricted: bool,
    /// The tags of the vault note it is made from; search finds the entry by them.
    #[serde(default)]
    pub tags: Vec<String>,
}

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::ops::{Operator, Visitor};

    use super::*;
    use crate::domain::corpus::{self, EntryRow, Written};
    use crate::ops::when;
    use crate::state::AppState;

    /// A search as `corpus.search` gives it: `{q, results: [{id, title, snippet}]}`,
    /// matched terms in `**bold**` (an agent reads text, not marked pieces).
    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct SearchResults {
        pub q: String,
        pub results: Vec<SearchResult>,
    }

    #[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
    pub struct SearchResult {
        pub id: i64,
        pub title: String,
        pub snippet: String,
    }

    impl From<SearchAnswer> for SearchResults {
        fn from(answer: SearchAnswer) -> Self {
            SearchResults {
                q: answer.query,
                results: answer
                    .hits
                    .into_iter()
                    .map(|hit| SearchResult {
                        id: hit.id,
                        title: hit.title,
                        snippet: hit
                            .snippet
                            .iter()
                            .map(|piece| {
                                if piece.mark {
                                    format!("**{}**", piece.text)
                                } else {
                                    piece.text.clone()
                                }
                            })
                            .collect(),
                    })
                    .collect(),
            }
        }
    }

    /// How many entries the admin page lists.
    const ENTRIES_SHOWN: i64 = 200;

    /// An entry as the console shows it.
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
            tags: row.tags,
        }
    }

    /// The newest entries; with `grep`, those whose text contains it, drafts included.
    pub async fn entries(
        state: &AppState,
        _by: Operator,
        grep: Option<String>,
    ) -> Result<Vec<EntryView>, AppError> {
        let rows = corpus::entries(&state.pool, grep.as_deref(), ENTRIES_SHOWN).await?;
        Ok(rows.into_iter().map(view).collect())
    }

    /// One entry, with its body rendered as the console previews it.
    pub async fn entry(state: &AppState, _by: Operator, id: i64) -> Result<EntryView, AppError> {
        let row = corpus::entry(&state.pool, id).await?;
        let preview = corpus::body_html(&state.pool, &row.body, corpus::Reader::Admin).await?;
        Ok(EntryView {
            preview_html: Some(preview),
            ..view(row)
        })
    }

    async fn receipt(state: &AppState, written: Written) -> Result<WriteReceipt, AppError> {
        corpus::receipt(&state.pool, &state.jobs, state.settings.index_wait, written)
            .await
            .map_err(AppError::from)
    }

    /// Writes a draft entry; answers the receipt once it is indexed or the index wait
    /// (`STANDMEET_INDEX_WAIT_MS`) is over.
    pub async fn create(
        state: &AppState,
        by: Operator,
        title: &str,
        body: &str,
        visibility: &str,
    ) -> Result<WriteReceipt, AppError> {
        let written = corpus::create(&state.pool, &state.jobs, title, body, visibility).await?;
        tracing::info!(entry.id = written.id, ?by, "a corpus entry was created");
        receipt(state, written).await
    }

    /// Changes what is given of an entry (the page gives every field, a tool what it
    /// names); answers the write's receipt.
    pub async fn update(
        state: &AppState,
        by: Operator,
        id: i64,
        title: Option<&str>,
        body: Option<&str>,
        visibility: Option<&str>,
    ) -> Result<WriteReceipt, AppError> {
        let written = corpus::update(&state.pool, &state.jobs, id, title, body, visibility).await?;
        tracing::info!(entry.id = id, ?by, "a corpus entry was changed");
        receipt(state, written).await
    }

    /// Promotes a draft so visitors can find it; answers the write's receipt.
    pub async fn promote(
        state: &AppState,
        by: Operator,
        id: i64,
    ) -> Result<WriteReceipt, AppError> {
        let written = corpus::promote(&state.pool, &state.jobs, id).await?;
        tracing::info!(entry.id = id, ?by, "a corpus entry was promoted");
        receipt(state, written).await
    }

    /// A search hit as the visitors' page shows it.
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

    /// An entry as this visitor may read it; `None` when they may not, or it is not there
    /// (a visitor cannot tell which).
    pub async fn public_entry(
        state: &AppState,
        visitor: &Visitor,
        id: i64,
    ) -> Result<Option<PublicEntryView>, AppError> {
        let restricted = visitor.granted.is_some();
        let entry = corpus::published_entry(&state.pool, id, restricted).await?;
        let Some(entry) = entry else {
            return Ok(None);
        };
        let reader = corpus::Reader::Visitor {
            restricted_allowed: restricted,
        };
        let body_html = corpus::body_html(&state.pool, &entry.body, reader).await?;
        Ok(Some(PublicEntryView {
            id: entry.id,
            title: entry.title,
            body_html,
            restricted: entry.visibility == corpus::Visibility::Restricted,
            tags: entry.tags,
        }))
    }

    /// A search of the promoted entries, best first: restricted ones too for a visitor
    /// whose session redeemed an access code (an agent is a visitor without one).
    pub async fn search(
        state: &AppState,
        visitor: &Visitor,
        q: &str,
    ) -> Result<SearchAnswer, AppError> {
        let restricted = visitor.granted.is_some();
        let hits = corpus::search(&state.pool, q, restricted).await?;
        Ok(SearchAnswer {
            query: q.trim().to_string(),
            hits: hits.into_iter().map(hit_view).collect(),
            restricted_included: restricted,
        })
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn an_agent_reads_a_snippet_as_text_with_its_matches_in_bold() {
        let piece = |text: &str, mark: bool| SnippetPiece {
            text: text.into(),
            mark,
        };
        let answer = SearchAnswer {
            query: "index".into(),
            hits: vec![SearchHit {
                id: 7,
                title: "Indexing".into(),
                restricted: false,
                snippet: vec![
                    piece("search reads the ", false),
                    piece("index", true),
                    piece(".", false),
                ],
            }],
            restricted_included: false,
        };
        let results = serde_json::to_value(SearchResults::from(answer)).unwrap();
        assert_eq!(
            results,
            serde_json::json!({
                "q": "index",
                "results": [{"id": 7, "title": "Indexing", "snippet": "search reads the **index**."}]
            })
        );
    }
}
