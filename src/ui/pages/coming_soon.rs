//! A placeholder for a page whose feature has not landed yet, so the navigation is
//! complete from the start and says honestly what is missing.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ComingSoon(title: &'static str) -> impl IntoView {
    view! {
        <Title text=title/>
        <section class="rounded-xl border border-dashed border-slate-300 bg-white p-10 text-center">
            <h1 class="text-2xl font-semibold tracking-tight">{title}</h1>
            <p class="mt-2 text-slate-500">"Coming soon: this page is not built yet."</p>
        </section>
    }
}
