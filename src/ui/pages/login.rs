//! `/login`: the admin sign-in form. It is a plain HTML form posting to `/login`, so it
//! works before (and without) hydration; the server answers with a redirect, back here
//! with `?error=…` when sign-in failed.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::auth::sign_in_problem;
use crate::ui::components::form::{INPUT, LABEL, PRIMARY_BUTTON};

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let problem = move || {
        query
            .read()
            .get("error")
            .and_then(|code| sign_in_problem(&code))
    };
    let email = move || query.read().get("email").unwrap_or_default();
    let next = move || query.read().get("next").unwrap_or_default();

    view! {
        <Title text="Sign in"/>
        <section class="mx-auto mt-6 max-w-sm">
            <h1 class="text-2xl font-semibold tracking-tight">"Sign in"</h1>
            <p class="mt-1 text-sm text-slate-500">"The admin pages are for the owner's admins."</p>
            {move || problem().map(|message| view! {
                <p role="alert" data-testid="login-error" class="mt-6 rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm text-rose-900">
                    {message}
                </p>
            })}
            <form method="post" action="/login" class="mt-6 space-y-4 rounded-xl border border-slate-200 bg-white p-6 shadow-sm">
                <input type="hidden" name="next" value=next()/>
                <div>
                    <label for="login-email" class=LABEL>"Email"</label>
                    <input
                        id="login-email"
                        name="email"
                        type="email"
                        autocomplete="username"
                        required
                        // The starting value only: a reactive value would wipe what
                        // someone typed before the page was hydrated.
                        value=email()
                        class=INPUT
                    />
                </div>
                <div>
                    <label for="login-password" class=LABEL>"Password"</label>
                    <input
                        id="login-password"
                        name="password"
                        type="password"
                        autocomplete="current-password"
                        required
                        class=INPUT
                    />
                </div>
                <button type="submit" class=format!("w-full {PRIMARY_BUTTON}")>
                    "Sign in"
                </button>
            </form>
        </section>
    }
}
