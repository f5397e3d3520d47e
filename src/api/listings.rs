//! The listings page over HTTP (admins only), as adapters of `ops::listings`: sources,
//! the newest listings, and "Fetch new".

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

use crate::model::FetchAnswer;

pub use crate::ops::listings::{ListingView, ListingsView, SourceView};

#[server(endpoint = "listings/overview", input = GetUrl)]
pub async fn listings_overview() -> Result<ListingsView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::listings::overview(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "listings/add_source")]
pub async fn add_listing_source(
    name: String,
    kind: String,
    url: String,
) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::listings::add_source(&state, admin, name, kind, url)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "listings/set_enabled")]
pub async fn set_source_enabled(id: i64, enabled: bool) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::listings::set_enabled(&state, admin, id, enabled)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "listings/remove_source")]
pub async fn remove_listing_source(id: i64) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::listings::remove_source(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// "Fetch new": one fetch per enabled source; waits up to `STANDMEET_FETCH_WAIT_MS`.
#[server(endpoint = "listings/fetch_new")]
pub async fn fetch_new_listings() -> Result<FetchAnswer, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::listings::fetch_new(&state, admin, None)
        .await
        .map_err(crate::api::replies::reply)
}
