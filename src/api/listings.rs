//! The listings page's server functions: sources (add, enable / disable, remove), the
//! newest listings, and "Fetch new" (the same operation as the MCP tool).

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

use crate::model::{FetchAnswer, JobState, Listing};

/// A source as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceView {
    pub id: i64,
    pub name: String,
    pub kind: String,
    pub url: String,
    pub enabled: bool,
    pub listings: i64,
    pub job_id: Option<i64>,
    pub job_state: Option<JobState>,
    /// The chip: never, fetching, fetched, retrying, failed or cancelled.
    pub fetch_state: String,
    /// The newest fetch's last error, if any.
    pub note: Option<String>,
}

/// A listing as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingView {
    pub listing: Listing,
    /// The sources that list it, the first one first.
    pub seen_on: Vec<String>,
    /// When it was posted, for people.
    pub posted: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingsView {
    pub sources: Vec<SourceView>,
    pub listings: Vec<ListingView>,
    /// True when there are more listings than shown.
    pub more: bool,
}

#[cfg(feature = "ssr")]
/// The chip word for a source's newest fetch.
pub fn fetch_state_word(state: Option<JobState>) -> &'static str {
    match state {
        None => "never",
        Some(JobState::Available | JobState::Scheduled | JobState::Running) => "fetching",
        Some(JobState::Completed) => "fetched",
        Some(JobState::Retryable) => "retrying",
        Some(JobState::Discarded) => "failed",
        Some(JobState::Cancelled) => "cancelled",
    }
}

#[cfg(feature = "ssr")]
/// How many listings the page shows.
pub const LISTINGS_SHOWN: i64 = 200;

#[server(endpoint = "listings/overview", input = GetUrl)]
pub async fn listings_overview() -> Result<ListingsView, ServerFnError> {
    server::overview().await
}

#[server(endpoint = "listings/add_source")]
pub async fn add_listing_source(
    name: String,
    kind: String,
    url: String,
) -> Result<String, ServerFnError> {
    server::add_source(name, kind, url).await
}

#[server(endpoint = "listings/set_enabled")]
pub async fn set_source_enabled(id: i64, enabled: bool) -> Result<String, ServerFnError> {
    server::set_enabled(id, enabled).await
}

#[server(endpoint = "listings/remove_source")]
pub async fn remove_listing_source(id: i64) -> Result<String, ServerFnError> {
    server::remove_source(id).await
}

/// "Fetch new": one fetch per enabled source; waits up to `STANDMEET_FETCH_WAIT_MS`.
#[server(endpoint = "listings/fetch_new")]
pub async fn fetch_new_listings() -> Result<FetchAnswer, ServerFnError> {
    server::fetch_new().await
}

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::reply;
    use crate::api::when;
    use crate::domain::listings;
    use crate::ops::paging::one_page;
    use crate::state::AppState;

    pub async fn overview() -> Result<ListingsView, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let sources = listings::sources(&state.pool).await.map_err(reply)?;
        let (rows, more) = one_page(LISTINGS_SHOWN, |limit| listings::latest(&state.pool, limit))
            .await
            .map_err(reply)?;
        Ok(ListingsView {
            sources: sources
                .into_iter()
                .map(|source| SourceView {
                    id: source.id,
                    name: source.name,
                    kind: source.kind.as_str().into(),
                    url: source.url,
                    enabled: source.enabled,
                    listings: source.listings,
                    job_id: source.last_job_id,
                    job_state: source.last_job_state,
                    fetch_state: fetch_state_word(source.last_job_state).into(),
                    note: source.last_error,
                })
                .collect(),
            listings: rows
                .into_iter()
                .map(|row| {
                    let posted = row.listing.posted_at.as_deref().and_then(|at| {
                        time::OffsetDateTime::parse(
                            at,
                            &time::format_description::well_known::Rfc3339,
                        )
                        .ok()
                        .map(when)
                    });
                    ListingView {
                        listing: row.listing,
                        seen_on: row.seen_on,
                        posted,
                    }
                })
                .collect(),
            more,
        })
    }

    pub async fn add_source(
        name: String,
        kind: String,
        url: String,
    ) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let id = listings::add_source(
            &state.pool,
            &name,
            &kind,
            &url,
            state.settings.fetch_allow_private,
        )
        .await
        .map_err(reply)?;
        tracing::info!(
            source.id = id,
            admin.id = admin.id,
            "a listing source was added"
        );
        Ok(format!("Source {} added.", name.trim()))
    }

    pub async fn set_enabled(id: i64, enabled: bool) -> Result<String, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        listings::set_enabled(&state.pool, id, enabled)
            .await
            .map_err(reply)?;
        Ok(if enabled {
            "Source enabled."
        } else {
            "Source disabled: Fetch new skips it."
        }
        .into())
    }

    pub async fn remove_source(id: i64) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let name = listings::remove_source(&state.pool, id)
            .await
            .map_err(reply)?;
        tracing::info!(
            source.id = id,
            admin.id = admin.id,
            "a listing source was removed"
        );
        Ok(format!(
            "Source {name} removed, with the listings only it lists."
        ))
    }

    pub async fn fetch_new() -> Result<FetchAnswer, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let answer = listings::fetch_new(&state.pool, &state.jobs, state.settings.fetch_wait, None)
            .await
            .map_err(reply)?;
        tracing::info!(
            admin.id = admin.id,
            jobs = answer.job_ids.len(),
            pending = answer.pending,
            "an admin fetched new listings"
        );
        Ok(answer)
    }
}
