//! The HTTP surface behind the pages: Leptos server functions (compiled for both sides:
//! the server runs them, the browser gets a stub that calls them) and fixed endpoints
//! (server only). A server function is an adapter of one operation (`ops`): it finds
//! out who asks ([`as_admin`], [`visitor`]), calls the operation, and answers its view
//! or its error's status and words (`replies`). Its body is compiled for the server
//! only, so it calls the operation directly.

pub(crate) mod access;
pub(crate) mod account;
pub(crate) mod auth;
pub(crate) mod bookings;
pub(crate) mod corpus;
pub(crate) mod events;
pub(crate) mod form_error;
pub(crate) mod front_page;
#[cfg(feature = "ssr")]
pub(crate) mod health;
pub(crate) mod listings;
#[cfg(feature = "ssr")]
pub(crate) mod live;
#[cfg(feature = "ssr")]
pub(crate) mod metrics;
pub(crate) mod overview;
pub(crate) mod queues;
#[cfg(feature = "ssr")]
pub(crate) mod replies;
pub(crate) mod schedules;
pub(crate) mod tasks;
pub(crate) mod vault;
pub(crate) mod webhooks;

pub use form_error::FormError;

/// A server function this build serves (server_fn's registry).
#[cfg(feature = "ssr")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerFunction {
    /// Its address, `/api/…`.
    pub path: &'static str,
    /// Called with a query string (`GetUrl`) rather than a form POST.
    pub get: bool,
}

/// Every server function this build serves, by path: what the fault suite's
/// bad-input scenario probes, what `docs/reference/server-functions.md` lists, and what
/// the tests of every GET function call, so that none of them keeps a list of its own.
#[cfg(feature = "ssr")]
pub fn server_functions() -> Vec<ServerFunction> {
    let mut functions: Vec<ServerFunction> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, method)| ServerFunction {
            path,
            get: method == axum::http::Method::GET,
        })
        .collect();
    functions.sort_by_key(|function| function.path);
    functions
}

/// How an answer begins when a server function's arguments did not fit it (wrong types,
/// missing fields, bodies that do not decode): the function never ran, and the caller
/// gets 400 with these words and what did not fit (see `replies::bad_arguments_are_400`).
pub const ARGUMENTS_DO_NOT_FIT: &str = "The request's fields do not fit this call: ";

/// The client's address for this server function's request (see
/// `security::client`), when the server knows it.
#[cfg(feature = "ssr")]
pub async fn client_address() -> Option<std::net::IpAddr> {
    use crate::security::client::ClientAddress;
    use axum::Extension;
    leptos_axum::extract::<Option<Extension<ClientAddress>>>()
        .await
        .ok()
        .flatten()
        .map(|Extension(ClientAddress(address))| address)
}

#[cfg(feature = "ssr")]
pub use crate::ops::when;

/// What every admin server function starts with: the app's state, and the signed-in
/// admin as the [`Operator`](crate::ops::Operator) of the operation it calls (401 in
/// words for anyone else, though the guard already answered them).
#[cfg(feature = "ssr")]
pub async fn as_admin() -> Result<(crate::state::AppState, crate::ops::Operator), ServerFnError> {
    let admin = auth::require_admin().await?;
    Ok((
        leptos::prelude::expect_context::<crate::state::AppState>(),
        crate::ops::Operator::Admin(admin.id),
    ))
}

/// The visitor of this server function's request, as the operations of the public
/// pages need them: their address, and what their session's access code granted.
#[cfg(feature = "ssr")]
pub async fn visitor() -> crate::ops::Visitor {
    let granted = match leptos_axum::extract::<tower_sessions::Session>().await {
        Ok(session) => session
            .get::<String>(crate::security::guard::SESSION_ACCESS_GRANTED)
            .await
            .ok()
            .flatten(),
        Err(_) => None,
    };
    crate::ops::Visitor {
        address: client_address().await,
        granted,
    }
}

#[cfg(feature = "ssr")]
use leptos::prelude::ServerFnError;
