//! What a page shows of a server function's answer: "Loading…" until it comes, then the
//! page's view of it, or its failure in words (`role="alert"`). While the answer is read
//! again (a live change, an action) the page keeps what it shows (a `Transition`).

use leptos::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ui::components::form::server_message;

/// A server function's failure, said where the page's content would be.
#[component]
pub fn LoadError(error: ServerFnError) -> impl IntoView {
    view! {
        <p role="alert" class="mt-6 rounded-md border border-rose-200 bg-rose-50 px-4 py-3 text-sm text-rose-900">
            {server_message(&error)}
        </p>
    }
}

/// `resource`'s answer shown by `show`, with `loading` (default "Loading…") until it
/// comes and [`LoadError`] if it failed.
#[component]
pub fn Loaded<T, F, V>(
    resource: Resource<Result<T, ServerFnError>>,
    show: F,
    #[prop(into, optional)] loading: Option<String>,
) -> impl IntoView
where
    T: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
    F: Fn(T) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let loading = loading.unwrap_or_else(|| "Loading…".to_string());
    view! {
        <Transition fallback=move || view! { <p class="mt-6 text-sm text-slate-500">{loading.clone()}</p> }>
            {move || {
                let show = show.clone();
                Suspend::new(async move {
                    match resource.await {
                        Ok(value) => show(value).into_any(),
                        Err(error) => view! { <LoadError error=error/> }.into_any(),
                    }
                })
            }}
        </Transition>
    }
}
