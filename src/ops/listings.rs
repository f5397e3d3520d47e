//! Job listings: sources (add, enable / disable, remove), the newest listings, and
//! "Fetch new" with its receipt. The listings page (`api::listings`) and the tools
//! `jobs.fetch_new` and `jobs.fetch_result` answer these views.

use serde::{Deserialize, Serialize};

use crate::model::{FetchState, JobState, Listing};

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
    pub fetch_state: FetchState,
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
/// How many listings the page shows.
pub const LISTINGS_SHOWN: i64 = 200;

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::model::FetchAnswer;
    use crate::ops::Operator;

    use super::*;
    use crate::domain::listings;
    use crate::ops::paging::one_page;
    use crate::ops::when;
    use crate::state::AppState;

    /// The listings page: the sources with their last fetch, and the newest listings.
    pub async fn overview(state: &AppState, _by: Operator) -> Result<ListingsView, AppError> {
        let sources = listings::sources(&state.pool).await?;
        let (rows, more) =
            one_page(LISTINGS_SHOWN, |limit| listings::latest(&state.pool, limit)).await?;
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
                    fetch_state: FetchState::of_job(source.last_job_state),
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

    /// Adds a job board to follow.
    pub async fn add_source(
        state: &AppState,
        by: Operator,
        name: String,
        kind: String,
        url: String,
    ) -> Result<String, AppError> {
        let id = listings::add_source(
            &state.pool,
            &name,
            &kind,
            &url,
            state.settings.fetch_allow_private,
        )
        .await?;
        tracing::info!(source.id = id, ?by, "a listing source was added");
        Ok(format!("Source {} added.", name.trim()))
    }

    /// Enables or disables a source.
    pub async fn set_enabled(
        state: &AppState,
        _by: Operator,
        id: i64,
        enabled: bool,
    ) -> Result<String, AppError> {
        listings::set_enabled(&state.pool, id, enabled).await?;
        Ok(if enabled {
            "Source enabled."
        } else {
            "Source disabled: Fetch new skips it."
        }
        .into())
    }

    /// Removes a source and the listings only it lists.
    pub async fn remove_source(
        state: &AppState,
        by: Operator,
        id: i64,
    ) -> Result<String, AppError> {
        let name = listings::remove_source(&state.pool, id).await?;
        tracing::info!(source.id = id, ?by, "a listing source was removed");
        Ok(format!(
            "Source {name} removed, with the listings only it lists."
        ))
    }

    /// "Fetch new": one fetch job per enabled source (or per source in `source_ids`),
    /// waited for up to `STANDMEET_FETCH_WAIT_MS`; the listings and errors when all
    /// finished, else a receipt (`pending: true`) for [`fetch_result`].
    pub async fn fetch_new(
        state: &AppState,
        by: Operator,
        source_ids: Option<&[i64]>,
    ) -> Result<FetchAnswer, AppError> {
        let answer = listings::fetch_new(
            &state.pool,
            &state.jobs,
            state.settings.fetch_wait,
            source_ids,
        )
        .await?;
        tracing::info!(
            ?by,
            jobs = answer.job_ids.len(),
            pending = answer.pending,
            "new listings were fetched"
        );
        Ok(answer)
    }

    /// Redeems a fetch's receipt: the same answer [`fetch_new`] gives once its jobs
    /// finished, or `pending: true` while one still runs.
    pub async fn fetch_result(
        state: &AppState,
        _by: Operator,
        job_ids: &[i64],
    ) -> Result<FetchAnswer, AppError> {
        let ids: Vec<standmeet_jobs::JobId> =
            job_ids.iter().copied().map(standmeet_jobs::JobId).collect();
        Ok(listings::fetch_result(&state.pool, &state.jobs, &ids).await?)
    }
}
