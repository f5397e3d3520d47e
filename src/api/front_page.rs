//! The front page's server side: what it says of the owner (anyone may read it), and
//! the admin's form that sets it (`domain::front_page`).

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

/// What the visitors' front page shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontPageView {
    /// The owner's name; `None` until an admin sets it.
    pub owner_name: Option<String>,
    /// The introduction, rendered from its Markdown on the server (safe to insert).
    pub introduction_html: String,
    /// Whether visitors may book a meeting at all (`STANDMEET_BOOKING` is not `off`).
    pub booking_open: bool,
}

/// The admin's form: the name and the introduction as written (Markdown).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontPageDraft {
    pub owner_name: String,
    pub introduction: String,
}

/// The front page's content (open to everyone: it is what visitors see).
#[server(endpoint = "front_page", input = GetUrl)]
pub async fn front_page() -> Result<FrontPageView, ServerFnError> {
    server::view().await
}

/// What the admin's form starts from (admins only).
#[server(endpoint = "front_page/form", input = GetUrl)]
pub async fn front_page_form() -> Result<FrontPageDraft, ServerFnError> {
    server::form().await
}

/// "Save front page" (admins only).
#[server(endpoint = "front_page/save")]
pub async fn save_front_page(
    owner_name: String,
    introduction: String,
) -> Result<String, ServerFnError> {
    server::save(owner_name, introduction).await
}

#[cfg(feature = "ssr")]
mod server {
    use leptos::prelude::*;

    use super::*;
    use crate::api::auth::require_admin;
    use crate::api::replies::reply;
    use crate::config::BookingMode;
    use crate::domain::front_page;
    use crate::state::AppState;

    pub async fn view() -> Result<FrontPageView, ServerFnError> {
        let state = expect_context::<AppState>();
        let page = front_page::get(&state.pool).await.map_err(reply)?;
        Ok(FrontPageView {
            introduction_html: page
                .as_ref()
                .map(|page| front_page::introduction_html(&page.introduction))
                .unwrap_or_default(),
            owner_name: page.map(|page| page.owner_name),
            booking_open: state.settings.booking != BookingMode::Off,
        })
    }

    pub async fn form() -> Result<FrontPageDraft, ServerFnError> {
        require_admin().await?;
        let state = expect_context::<AppState>();
        let page = front_page::get(&state.pool).await.map_err(reply)?;
        Ok(page
            .map(|page| FrontPageDraft {
                owner_name: page.owner_name,
                introduction: page.introduction,
            })
            .unwrap_or_default())
    }

    pub async fn save(owner_name: String, introduction: String) -> Result<String, ServerFnError> {
        let admin = require_admin().await?;
        let state = expect_context::<AppState>();
        let page = front_page::checked(&owner_name, &introduction).map_err(reply)?;
        front_page::save(&state.pool, &page).await.map_err(reply)?;
        tracing::info!(admin.id = admin.id, "the front page was changed");
        Ok("Front page saved.".to_string())
    }
}
