//! `/account/confirm-email?token=…`: the link from the confirmation mail. Opening it
//! applies the change and says so; an unknown, used, withdrawn or expired link gets a
//! page that says which, and changes nothing.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::account::confirm_email;

#[component]
pub fn ConfirmEmailPage() -> impl IntoView {
    let query = use_query_map();
    let token = Memo::new(move |_| query.read().get("token").unwrap_or_default());
    let outcome = Resource::new(move || token.get(), confirm_email);
    view! {
        <Title text="Confirm your address"/>
        <section class="mx-auto mt-6 max-w-lg">
            <Suspense fallback=|| view! { <p class="text-sm text-slate-500">"Checking the link…"</p> }>
                {move || Suspend::new(async move {
                    match outcome.await {
                        Ok(email) => view! {
                            <h1 class="text-2xl font-semibold tracking-tight">"Address confirmed"</h1>
                            <p data-testid="confirm-outcome" data-confirmed="true" class="mt-3 text-slate-700">
                                {format!("StandMeet now mails the owner at {email}.")}
                            </p>
                        }.into_any(),
                        Err(error) => view! {
                            <h1 class="text-2xl font-semibold tracking-tight">"This link does not work"</h1>
                            <p role="alert" data-testid="confirm-outcome" data-confirmed="false" class="mt-3 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-rose-900">
                                {error.message}
                            </p>
                        }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}
