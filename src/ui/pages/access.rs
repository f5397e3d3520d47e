//! `/access`: a visitor enters their email and the access code they were mailed; a
//! matching pair opens the restricted entries of the corpus to their session.
//!
//! It works without JavaScript too: the form then posts as HTML; a code that matches
//! comes back to `/access`, which says what the session holds, and one that does not
//! comes back with its error (see `api::replies`).

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::access::{RedeemAccess, access_granted};
use crate::model::ACCESS_GRANTED;
use crate::ui::components::form::{INPUT, LABEL, SubmitButton};

#[component]
pub fn AccessPage() -> impl IntoView {
    let redeem = ServerAction::<RedeemAccess>::new();
    let answer = redeem.value();
    // What the session already holds (a code entered before, or just now without a
    // script): read with the page.
    let held = Resource::new(|| (), |_| access_granted());
    let outcome = move || {
        answer.with(|answer| match answer {
            Some(Ok(message)) => Some((true, message.clone())),
            Some(Err(error)) => Some((false, error.message.clone())),
            None => {
                matches!(held.get(), Some(Ok(Some(_)))).then(|| (true, ACCESS_GRANTED.to_string()))
            }
        })
    };

    view! {
        <Title text="Enter your access code"/>
        <section class="mx-auto max-w-sm">
            <h1 class="text-2xl font-semibold tracking-tight">"Enter your access code"</h1>
            <p class="mt-2 text-slate-600">"The code came by mail when the owner approved your request."</p>
            <Suspense fallback=|| ()>{move || outcome().map(|(granted, text)| {
                if granted {
                    view! { <p data-testid="access-granted" class="mt-4 rounded-md border border-emerald-200 bg-emerald-50 px-3 py-2 text-sm text-emerald-900">{text}</p> }.into_any()
                } else {
                    view! { <p role="alert" class="mt-4 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm text-rose-900">{text}</p> }.into_any()
                }
            })}</Suspense>
            <ActionForm action=redeem attr:novalidate=true attr:class="mt-6 space-y-4 rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
                <div>
                    <label for="access-email" class=LABEL>"Email"</label>
                    <input id="access-email" name="email" type="email" autocomplete="email" class=INPUT/>
                </div>
                <div>
                    <label for="access-code" class=LABEL>"Access code"</label>
                    <input id="access-code" name="code" type="text" autocomplete="one-time-code" class=INPUT/>
                </div>
                <SubmitButton label="Enter" class="w-full" pending=redeem.pending()/>
            </ActionForm>
        </section>
    }
}
