//! `service_status`: the home page's "Check the service" button asks this.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;
use serde::{Deserialize, Serialize};

/// What a visitor may learn about the service: whether it can reach its database.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceHealth {
    pub database_ok: bool,
}

/// Reads nothing but the database's pulse, so it is a GET and open to everyone, like
/// `/healthz`.
#[server(endpoint = "service_status", input = GetUrl)]
pub async fn service_status() -> Result<ServiceHealth, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    Ok(ServiceHealth {
        database_ok: crate::db::ping(&state.pool).await,
    })
}
