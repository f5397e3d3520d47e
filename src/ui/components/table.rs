//! Tables that stay readable on a phone. From tablet width a table is a table; below
//! it each row is a card of its cells, one per line, each led by its column's name
//! (the cell's `data-label`), so nothing scrolls sideways inside the card. The rows
//! keep their elements and test ids either way.

/// The card around the table: it scrolls sideways only from tablet width, where a
/// table is wider than the column at most by a little.
pub const TABLE_CARD: &str = "mt-4 rounded-xl border border-slate-200 bg-white md:overflow-x-auto";
pub const TABLE: &str =
    "block w-full text-sm md:table md:min-w-full md:divide-y md:divide-slate-200";
/// The column names: the cells carry them on a phone, so the head shows from tablet
/// width only.
pub const HEAD: &str = "hidden bg-slate-50 text-left text-xs font-medium uppercase tracking-wide text-slate-500 md:table-header-group";
pub const HEAD_CELL: &str = "px-4 py-2";
pub const BODY: &str = "block divide-y divide-slate-100 md:table-row-group";
/// A row: a card on a phone, a table row from tablet width.
pub const ROW: &str = "block px-4 py-3 md:table-row md:p-0";
/// A cell, led by its `data-label` on a phone.
pub const CELL: &str = "flex min-w-0 items-baseline gap-3 py-1 md:table-cell md:px-4 md:py-3 before:w-24 before:shrink-0 before:text-xs before:font-medium before:uppercase before:tracking-wide before:text-slate-500 before:content-[attr(data-label)] md:before:content-none";
/// A cell of buttons (no column name): on a phone they end the card.
pub const ACTION_CELL: &str = "flex flex-wrap gap-2 pt-2 md:table-cell md:px-4 md:py-3";

use leptos::prelude::*;

use crate::ui::components::live::{FollowsJob, follow_row_jobs};

/// A table of rows whose chips follow their jobs live (access requests, bookings): the
/// column names (an empty one over the buttons), one row view per row, keyed by
/// `key`, and what to say when there is no row. Rows in `arriving` that the table does
/// not show yet go on top, in their order (newer rows, heard of live).
#[component]
pub fn FollowedTable<R, K, F, V>(
    rows: Vec<R>,
    columns: &'static [&'static str],
    key: K,
    row: F,
    #[prop(into)] empty: String,
    #[prop(optional, into)] arriving: Option<Signal<Vec<R>>>,
) -> impl IntoView
where
    R: FollowsJob,
    K: Fn(&R) -> i64 + Clone + Send + Sync + 'static,
    F: Fn(RwSignal<R>) -> V + Clone + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let rows: RwSignal<Vec<RwSignal<R>>> =
        RwSignal::new(rows.into_iter().map(RwSignal::new).collect());
    follow_row_jobs(rows);
    if let Some(arriving) = arriving {
        let key = key.clone();
        Effect::new(move |_| {
            let new_rows: Vec<R> = arriving.with(|arriving| {
                rows.with_untracked(|shown| {
                    arriving
                        .iter()
                        .filter(|row| {
                            let id = key(row);
                            !shown
                                .iter()
                                .any(|one| one.with_untracked(|one| key(one)) == id)
                        })
                        .cloned()
                        .collect()
                })
            });
            if !new_rows.is_empty() {
                rows.update(|shown| {
                    shown.splice(0..0, new_rows.into_iter().map(RwSignal::new));
                });
            }
        });
    }
    view! {
        <div class=TABLE_CARD>
            <table class=TABLE>
                <thead class=HEAD>
                    <tr>
                        {columns.iter().map(|column| view! { <th class=HEAD_CELL>{*column}</th> }).collect_view()}
                    </tr>
                </thead>
                <tbody class=BODY>
                    <For
                        each=move || rows.get()
                        key=move |one| one.with_untracked(|value| key(value))
                        children=move |one| row(one)
                    />
                </tbody>
            </table>
            <Show when=move || rows.with(Vec::is_empty)>
                <p class="px-4 py-8 text-center text-sm text-slate-500">{empty.clone()}</p>
            </Show>
        </div>
    }
}
