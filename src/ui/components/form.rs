//! Forms: the look of their controls (in one place so every form looks alike), when
//! they may be used, and what a failed server function says to a person.

use leptos::prelude::*;

pub const LABEL: &str = "block text-sm font-medium text-slate-700";
pub const INPUT: &str = "mt-1 block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-teal-600 focus:outline-none focus:ring-1 focus:ring-teal-600";
pub const PRIMARY_BUTTON: &str = "rounded-md bg-teal-700 px-4 py-2 text-sm font-medium text-white shadow-sm hover:bg-teal-800 disabled:cursor-not-allowed disabled:opacity-50";
pub const SECONDARY_BUTTON: &str = "rounded-md border border-slate-300 px-3 py-1.5 text-sm text-slate-700 hover:bg-slate-100 disabled:cursor-not-allowed disabled:opacity-50";

/// Whether the page is hydrated: one signal for the whole app.
#[derive(Clone, Copy)]
struct Hydrated(RwSignal<bool>);

/// Makes the app's one "hydrated" signal (the app's root does, and sets it once its
/// browser side is installed: the same moment `<html>` gets `data-shortcuts="on"`).
pub fn provide_hydrated() -> RwSignal<bool> {
    // A page the server sends without the app's code is as good as hydrated: its
    // buttons are plain HTML that work as they are (see `crate::ui::page_hydrates`).
    let hydrated = RwSignal::new(!crate::ui::hydration::page_hydrates());
    provide_context(Hydrated(hydrated));
    hydrated
}

/// A signal that turns true once the page is hydrated. Buttons that call server
/// functions stay disabled until then: before hydration a click would do nothing.
pub fn use_hydrated() -> RwSignal<bool> {
    match use_context::<Hydrated>() {
        Some(Hydrated(hydrated)) => hydrated,
        // Outside the app (a component rendered alone): hydrated with itself.
        None => {
            let hydrated = RwSignal::new(false);
            Effect::new(move |_| hydrated.set(true));
            hydrated
        }
    }
}

/// What a failed server function says to a person: the server's message, or that it
/// did not answer.
pub fn server_message(error: &ServerFnError) -> String {
    match error {
        ServerFnError::ServerError(message) => message.clone(),
        _ => "StandMeet did not answer; try again.".to_string(),
    }
}

/// A form's submit button that works with or without JavaScript. With it, the button
/// calls the form's server function once the page is hydrated (disabled until then,
/// and while `pending`). Without it (`@media (scripting: none)`, Tailwind's
/// `noscript:`), a plain submit button stands in its place and posts the form as HTML;
/// the server function answers such a post with a page (see `api::replies`).
#[component]
pub fn SubmitButton(
    /// The button's words.
    label: &'static str,
    /// Classes beside [`PRIMARY_BUTTON`] (its width, say).
    #[prop(optional)]
    class: &'static str,
    /// Whether the form's call is under way.
    #[prop(into)]
    pending: Signal<bool>,
) -> impl IntoView {
    let hydrated = use_hydrated();
    view! {
        <button
            type="submit"
            class=format!("{class} {PRIMARY_BUTTON} noscript:hidden")
            disabled=move || !hydrated.get() || pending.get()
        >
            {label}
        </button>
        <button type="submit" class=format!("hidden {class} {PRIMARY_BUTTON} noscript:inline-block")>
            {label}
        </button>
    }
}
