//! The front page: what StandMeet is, where visitors and admins go, and a check that the
//! service (and its database) answers.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::status::service_status;
use crate::ui::components::form::PRIMARY_BUTTON;
use crate::ui::components::form::use_hydrated;
use crate::ui::components::toast::use_toasts;

#[component]
pub fn HomePage() -> impl IntoView {
    let toasts = use_toasts();

    // Effects run only in the browser, after hydration: until then the button would do
    // nothing, so it stays disabled.
    let hydrated = use_hydrated();

    let check = Action::new(|_: &()| service_status());
    Effect::new(move |_| match check.value().get() {
        Some(Ok(status)) if status.database_ok => {
            toasts.success("The service is up and its database is ok.")
        }
        Some(Ok(_)) => toasts.error("The service is up, but its database is not answering."),
        Some(Err(_)) => toasts.error("The service did not answer. Is it running?"),
        None => {}
    });

    view! {
        <Title text=""/>
        <section class="max-w-2xl">
            <h1 class="text-3xl font-semibold tracking-tight">"The owner's front desk"</h1>
            <p class="mt-3 text-lg leading-relaxed text-slate-600">
                "Visitors ask for access and search the owner's corpus. Admins approve requests, "
                "fetch job listings from job boards and curate the corpus. Every slow side effect "
                "runs as a durable job, and a page waits for it only as long as it should."
            </p>
        </section>

        <div class="mt-10 grid gap-6 md:grid-cols-2">
            <section class="rounded-xl border border-slate-200 bg-white p-6">
                <h2 class="font-semibold">"Visitors"</h2>
                <ul class="mt-3 space-y-2 text-sm">
                    <li><a class="text-teal-700 hover:underline" href="/request-access">"Request access"</a></li>
                    <li><a class="text-teal-700 hover:underline" href="/search">"Search the corpus"</a></li>
                </ul>
            </section>
            <section class="rounded-xl border border-slate-200 bg-white p-6">
                <h2 class="font-semibold">"Service"</h2>
                <p class="mt-3 text-sm text-slate-600">"Ask the server whether it can reach its database."</p>
                <button
                    type="button"
                    class=format!("mt-4 {PRIMARY_BUTTON}")
                    disabled=move || !hydrated.get() || check.pending().get()
                    on:click=move |_| {
                        check.dispatch(());
                    }
                >
                    {move || if check.pending().get() { "Checking…" } else { "Check the service" }}
                </button>
            </section>
        </div>
    }
}
