//! Reading the route's parameters.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

/// The route's `:id` as a number; `None` when it is not one (the page then says there
/// is no such thing, instead of failing).
pub fn use_id_param() -> Memo<Option<i64>> {
    let params = use_params_map();
    Memo::new(move |_| {
        params
            .read()
            .get("id")
            .and_then(|id| id.parse::<i64>().ok())
    })
}
