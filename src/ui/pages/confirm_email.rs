//! `/account/confirm-email?token=…`: the link from the confirmation mail. Opening it
//! changes nothing: the page says which address the link would make the owner's, and
//! the owner's "Confirm" (a POST) applies it. A mail scanner that opens every link thus
//! confirms nothing. An unknown, used, withdrawn or expired link gets a page that says
//! which.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::account::{ConfirmEmail, confirm_email_preview};
use crate::ui::components::form::{PRIMARY_BUTTON, use_hydrated};

#[component]
pub fn ConfirmEmailPage() -> impl IntoView {
    let query = use_query_map();
    let token = Memo::new(move |_| query.read().get("token").unwrap_or_default());
    let preview = Resource::new(move || token.get(), confirm_email_preview);
    view! {
        <Title text="Confirm your address"/>
        <section class="mx-auto mt-6 max-w-lg">
            <Suspense fallback=|| view! { <p class="text-sm text-slate-500">"Checking the link…"</p> }>
                {move || Suspend::new(async move {
                    match preview.await {
                        Ok(email) => view! { <ConfirmButton token=token.get_untracked() email=email/> }.into_any(),
                        Err(error) => view! { <LinkRefused message=error.message/> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn LinkRefused(message: String) -> impl IntoView {
    view! {
        <h1 class="text-2xl font-semibold tracking-tight">"This link does not work"</h1>
        <p role="alert" data-testid="confirm-outcome" data-confirmed="false" class="mt-3 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-rose-900">
            {message}
        </p>
    }
}

#[component]
fn ConfirmButton(token: String, email: String) -> impl IntoView {
    let confirm = ServerAction::<ConfirmEmail>::new();
    let hydrated = use_hydrated();
    let token = StoredValue::new(token);
    view! {
        {move || match confirm.value().get() {
            Some(Ok(email)) => view! {
                <h1 class="text-2xl font-semibold tracking-tight">"Address confirmed"</h1>
                <p data-testid="confirm-outcome" data-confirmed="true" class="mt-3 text-slate-700">
                    {format!("StandMeet now mails the owner at {email}.")}
                </p>
            }.into_any(),
            Some(Err(error)) => view! { <LinkRefused message=error.message/> }.into_any(),
            None => view! {
                <h1 class="text-2xl font-semibold tracking-tight">"Confirm the owner's new address"</h1>
                <p data-testid="confirm-preview" class="mt-3 text-slate-700">
                    {format!("Confirming makes {email} the owner's address: StandMeet mails the owner there from then on.")}
                </p>
                <button type="button" class=format!("mt-6 {PRIMARY_BUTTON}")
                    disabled=move || !hydrated.get() || confirm.pending().get()
                    on:click=move |_| { confirm.dispatch(ConfirmEmail { token: token.get_value() }); }
                >"Confirm"</button>
            }.into_any(),
        }}
    }
}
