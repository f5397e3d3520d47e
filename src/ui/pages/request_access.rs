//! `/request-access`: a visitor asks the owner for access. The form checks every field
//! and says what to fix; a sent request is answered with "Request received".
//!
//! It works without JavaScript too: the form then posts as HTML, a request sent so
//! comes back as `/request-access?received`, and one refused comes back to the form
//! with its error (see `api::replies`).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::access::RequestAccess;
use crate::ui::components::form::{INPUT, LABEL, SubmitButton};

#[component]
pub fn RequestAccessPage() -> impl IntoView {
    let send = ServerAction::<RequestAccess>::new();
    let answer = send.value();
    // Sent with a script (the action's answer), or without (the address says so).
    let query = use_query_map();
    let received = move || {
        answer.with(|answer| matches!(answer, Some(Ok(_))))
            || query.with(|query| query.get_str("received").is_some())
    };
    let problem = move |pick: fn(&crate::api::FormError) -> Option<String>| {
        answer.with(|answer| match answer {
            Some(Err(error)) => pick(error),
            _ => None,
        })
    };
    let failure = move || {
        answer.with(|answer| match answer {
            Some(Err(error)) => Some(error.message.clone()),
            _ => None,
        })
    };
    let field_error = |text: Option<String>| {
        text.map(|text| view! { <p role="alert" class="mt-1 text-sm text-rose-700">{text}</p> })
    };

    view! {
        <Title text="Request access"/>
        <section class="mx-auto max-w-lg">
            <h1 class="text-2xl font-semibold tracking-tight">"Request access"</h1>
            <Show
                when=received
                fallback=move || view! {
                    <p class="mt-2 text-slate-600">
                        "Tell the owner who you are. If they approve, you get an access code by mail."
                    </p>
                    {move || failure().map(|text| view! {
                        <p role="alert" class="mt-4 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm text-rose-900">{text}</p>
                    })}
                    <ActionForm action=send attr:novalidate=true attr:class="mt-6 space-y-4 rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
                        <div>
                            <label for="request-name" class=LABEL>"Name"</label>
                            <input id="request-name" name="name" type="text" autocomplete="name" class=INPUT/>
                            {move || field_error(problem(|a| a.name.clone()))}
                        </div>
                        <div>
                            <label for="request-email" class=LABEL>"Email"</label>
                            <input id="request-email" name="email" type="email" autocomplete="email" class=INPUT/>
                            {move || field_error(problem(|a| a.email.clone()))}
                        </div>
                        <div>
                            <label for="request-message" class=LABEL>"Message"</label>
                            <textarea id="request-message" name="message" rows="4" class=INPUT></textarea>
                            {move || field_error(problem(|a| a.text.clone()))}
                        </div>
                        <SubmitButton label="Send request" class="w-full" pending=send.pending()/>
                    </ActionForm>
                }
            >
                <div data-testid="request-received" class="mt-6 rounded-xl border border-emerald-200 bg-emerald-50 p-6 text-emerald-900">
                    <h2 class="font-semibold">"Request received"</h2>
                    <p class="mt-1 text-sm">"The owner has been told. If they approve, an access code comes to your mail."</p>
                </div>
            </Show>
        </section>
    }
}
