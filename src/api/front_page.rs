//! The front page over HTTP, as adapters of `ops::front_page`: anyone reads it; the
//! admin's form sets it.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::front_page::{FrontPageDraft, FrontPageView};

/// The front page's content (open to everyone: it is what visitors see).
#[server(endpoint = "front_page", input = GetUrl)]
pub async fn front_page() -> Result<FrontPageView, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    crate::ops::front_page::view(&state)
        .await
        .map_err(crate::api::replies::reply)
}

/// What the admin's form starts from (admins only).
#[server(endpoint = "front_page/form", input = GetUrl)]
pub async fn front_page_form() -> Result<FrontPageDraft, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::front_page::form(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// "Save front page" (admins only).
#[server(endpoint = "front_page/save")]
pub async fn save_front_page(
    owner_name: String,
    introduction: String,
) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::front_page::save(&state, admin, owner_name, introduction)
        .await
        .map_err(crate::api::replies::reply)
}
