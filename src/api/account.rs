//! The account page and the confirmation link over HTTP, as adapters of `ops::account`
//! (the page for admins; the link's preview and "Confirm" public).

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

use super::FormError;

pub use crate::ops::account::{AccountView, PendingView, RecoveryView};

#[server(endpoint = "account/overview", input = GetUrl)]
pub async fn account_overview() -> Result<AccountView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::account::overview(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// Asks to change the owner's address; answers what to tell the admin.
#[server(endpoint = "account/change_email")]
pub async fn change_owner_email(new_email: String) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::account::change(&state, admin, new_email)
        .await
        .map_err(crate::api::replies::reply)
}

#[server(endpoint = "account/cancel_change")]
pub async fn cancel_email_change(id: i64) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::account::cancel(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// Sends a recovery phrase now; answers what happened.
#[server(endpoint = "account/send_recovery")]
pub async fn send_recovery_phrase() -> Result<RecoveryView, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::account::recovery(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// What the link from the confirmation mail would do: the new address (nothing changes).
#[server(endpoint = "confirm_email/preview", input = GetUrl)]
pub async fn confirm_email_preview(token: String) -> Result<String, FormError> {
    let state = expect_context::<crate::state::AppState>();
    crate::ops::account::preview(&state, token)
        .await
        .map_err(crate::api::replies::form_reply)
}

/// Applies the change the link from the confirmation mail names (the page's "Confirm"
/// button); answers the new address.
#[server(endpoint = "confirm_email")]
pub async fn confirm_email(token: String) -> Result<String, FormError> {
    let state = expect_context::<crate::state::AppState>();
    crate::ops::account::confirm(&state, token)
        .await
        .map_err(crate::api::replies::form_reply)
}
