//! The front page: what it says of the owner (anyone may read it), and the admin's form
//! that sets it (`domain::front_page`); `api::front_page` answers these views.

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

#[cfg(feature = "ssr")]
pub use operations::*;

#[cfg(feature = "ssr")]
mod operations {
    use crate::error::AppError;
    use crate::ops::Operator;

    use super::*;
    use crate::config::BookingMode;
    use crate::domain::front_page;
    use crate::state::AppState;

    /// The front page: the owner's name and introduction (rendered), and whether booking is
    /// offered.
    pub async fn view(state: &AppState) -> Result<FrontPageView, AppError> {
        let page = front_page::get(&state.pool).await?;
        Ok(FrontPageView {
            introduction_html: page
                .as_ref()
                .map(|page| front_page::introduction_html(&page.introduction))
                .unwrap_or_default(),
            owner_name: page.map(|page| page.owner_name),
            booking_open: state.settings.booking != BookingMode::Off,
        })
    }

    /// The front page's form as saved.
    pub async fn form(state: &AppState, _by: Operator) -> Result<FrontPageDraft, AppError> {
        let page = front_page::get(&state.pool).await?;
        Ok(page
            .map(|page| FrontPageDraft {
                owner_name: page.owner_name,
                introduction: page.introduction,
            })
            .unwrap_or_default())
    }

    /// Saves the front page's name and introduction (Markdown), checked.
    pub async fn save(
        state: &AppState,
        by: Operator,
        owner_name: String,
        introduction: String,
    ) -> Result<String, AppError> {
        let page = front_page::checked(&owner_name, &introduction)?;
        front_page::save(&state.pool, &page).await?;
        tracing::info!(?by, "the front page was changed");
        Ok("Front page saved.".to_string())
    }
}
