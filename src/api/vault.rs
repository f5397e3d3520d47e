//! The vault panel of `/admin/corpus` over HTTP (admins only), as adapters of
//! `ops::vault`.

use leptos::prelude::*;
use leptos::server_fn::codec::GetUrl;

pub use crate::ops::vault::{RebuildView, VaultView};

#[server(endpoint = "corpus/vault", input = GetUrl)]
pub async fn vault_status() -> Result<Option<VaultView>, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::vault::status(&state, admin)
        .await
        .map_err(crate::api::replies::reply)
}

/// "Rebuild from vault": queues a rebuild, or finds the one waiting. `allow_removals`:
/// the admin confirmed removing the entries the last rebuild kept.
#[server(endpoint = "corpus/rebuild")]
pub async fn rebuild_vault(
    #[server(default)] allow_removals: bool,
) -> Result<String, ServerFnError> {
    let (state, admin) = crate::api::as_admin().await?;
    crate::ops::vault::rebuild(&state, admin, allow_removals)
        .await
        .map(|done| done.message)
        .map_err(crate::api::replies::reply)
}
