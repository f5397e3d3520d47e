//! A note's tags, as chips under an entry's title (`#travel`). Search finds an entry by
//! its tags as by its title's words.

use leptos::prelude::*;

/// The tags, or nothing when there are none.
#[component]
pub fn Tags(tags: Vec<String>) -> impl IntoView {
    (!tags.is_empty()).then(|| {
        view! {
            <ul data-testid="entry-tags" aria-label="Tags" class="mt-2 flex flex-wrap gap-1.5">
                {tags
                    .into_iter()
                    .map(|tag| view! {
                        <li data-testid="entry-tag" class="rounded-full bg-slate-100 px-2 py-0.5 text-xs text-slate-700">
                            {format!("#{tag}")}
                        </li>
                    })
                    .collect_view()}
            </ul>
        }
    })
}
