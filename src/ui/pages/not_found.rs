//! The page for an address StandMeet does not have; answered with status 404.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(axum::http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Page not found"/>
        <section class="py-16 text-center">
            <p class="text-sm font-medium text-teal-700">"404"</p>
            <h1 class="mt-2 text-2xl font-semibold tracking-tight">"Page not found"</h1>
            <p class="mt-2 text-slate-500">"There is nothing at this address."</p>
            <a href="/" class="mt-6 inline-block text-sm font-medium text-teal-700 hover:underline">
                "Back to the front desk"
            </a>
        </section>
    }
}
