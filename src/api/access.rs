//! Access requests over HTTP, as adapters of `ops::access`: visitors ask
//! (`request_access`) and redeem their code (`redeem_access`), both public and
//! rate-limited; admins list, approve and deny, and read the mail log.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

use super::FormError;
pub use crate::ops::access::{AccessRequestView, ApproveAnswer, MailLogView};

/// A visitor asks for access; answers what to tell them.
#[server(endpoint = "request_access")]
pub async fn request_access(
    name: String,
    email: String,
    message: String,
) -> Result<String, FormError> {
    use crate::ops::access::RequestRefused;
    let state = expect_context::<crate::state::AppState>();
    let visitor = crate::api::client_address().await;
    crate::ops::access::request_access(&state, visitor, &name, &email, &message)
        .await
        .map_err(|refused| match refused {
            // The one answer with a message per field, so not a plain refusal.
            RequestRefused::Fields(problems) => {
                crate::api::replies::set_status(axum::http::StatusCode::BAD_REQUEST);
                FormError {
                    message: "Please check the fields marked below.".into(),
                    name: problems.name,
                    email: problems.email,
                    text: problems.message,
                }
            }
            RequestRefused::Other(err) => crate::api::replies::form_reply(err),
        })
        .inspect(|_| crate::api::replies::after_a_plain_post_show(REQUEST_RECEIVED_PAGE))
}

/// Where a visitor whose browser ran no script lands after sending a request.
#[cfg(feature = "ssr")]
const REQUEST_RECEIVED_PAGE: &str = "/request-access?received";

/// A visitor redeems the access code they were mailed; answers what to tell them.
#[server(endpoint = "redeem_access")]
pub async fn redeem_access(email: String, code: String) -> Result<String, FormError> {
    use crate::api::replies::form_reply;
    let state = expect_context::<crate::state::AppState>();
    let visitor = crate::api::client_address().await;
    let session = leptos_axum::extract::<tower_sessions::Session>()
        .await
        .map_err(form_reply)?;
    crate::ops::access::redeem_access(&state, visitor, &session, &email, &code)
        .await
        .map_err(form_reply)
        // The page says so by itself: the session now holds the access.
        .inspect(|_| crate::api::replies::after_a_plain_post_show("/access"))
}

/// What this visitor's session was granted: the email its access code was for.
#[server(endpoint = "access/granted", input = GetUrl)]
pub async fn access_granted() -> Result<Option<String>, ServerFnError> {
    Ok(crate::api::visitor().await.granted)
}

/// The newest requests first, optionally of one status.
#[server(endpoint = "access_requests/list", input = GetUrl)]
pub async fn list_access_requests(
    status: Option<String>,
) -> Result<Vec<AccessRequestView>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::access::list(&state, admin, status.as_deref())
        .await
        .map(|list| list.requests)
        .map_err(crate::api::replies::reply)
}

/// Approves a pending request; answers at once (the mail is queued).
#[server(endpoint = "access_requests/approve")]
pub async fn approve_access_request(id: i64) -> Result<ApproveAnswer, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::access::approve(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// Denies a pending request.
#[server(endpoint = "access_requests/deny")]
pub async fn deny_access_request(id: i64) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::access::deny(&state, admin, id)
        .await
        .map_err(crate::api::replies::reply)
}

/// The mail log, newest first.
#[server(endpoint = "mail_log", input = GetUrl)]
pub async fn mail_log() -> Result<Vec<MailLogView>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::access::mail_log(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}
