//! The corpus over HTTP, as adapters of `ops::corpus`: the admin's entries (list with
//! grep, one entry, create, update, promote) and the visitors' entry page and search.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

use super::FormError;
pub use crate::model::WriteReceipt;

pub use crate::ops::corpus::{EntryView, PublicEntryView, SearchAnswer};

/// The newest entries; with `grep`, those whose title or text contains it.
#[server(endpoint = "corpus/entries", input = GetUrl)]
pub async fn corpus_entries(grep: Option<String>) -> Result<Vec<EntryView>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::corpus::entries(&state, admin, grep)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "corpus/entry", input = GetUrl)]
pub async fn corpus_entry(id: i64) -> Result<EntryView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::corpus::entry(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "corpus/create")]
pub async fn create_corpus_entry(
    title: String,
    body: String,
    visibility: String,
) -> Result<WriteReceipt, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::corpus::create(&state, admin, &title, &body, &visibility)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "corpus/update")]
pub async fn update_corpus_entry(
    id: i64,
    title: String,
    body: String,
    visibility: String,
) -> Result<WriteReceipt, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::corpus::update(
        &state,
        admin,
        id,
        Some(&title),
        Some(&body),
        Some(&visibility),
    )
    .await
    .map_err(crate::api::replies::reply)
}

#[server(endpoint = "corpus/promote")]
pub async fn promote_corpus_entry(id: i64) -> Result<WriteReceipt, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::corpus::promote(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// Entry `id` for a visitor, under search's rules (promoted; restricted only after
/// `/access`); `None` when there is no such entry for them.
#[server(endpoint = "entry", input = GetUrl)]
pub async fn public_entry(id: i64) -> Result<Option<PublicEntryView>, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    crate::ops::corpus::public_entry(&state, &crate::api::visitor().await, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// A visitor's search: promoted entries, restricted ones only after `/access`.
#[server(endpoint = "search", input = GetUrl)]
pub async fn search_corpus(q: String) -> Result<SearchAnswer, FormError> {
    let state = expect_context::<crate::state::AppState>();
    crate::ops::corpus::search(&state, &crate::api::visitor().await, &q)
        .await
        .map_err(crate::api::replies::form_reply)
}
