//! `/admin/access-requests`: the requests, newest first, filtered by status, with
//! Approve and Deny. Approving answers at once ("approval mail queued"); the mail chip
//! then follows the mail job (sending → sent or failed) with one status request for
//! the whole page, and the request shows `replied` once the mail went out. A request
//! sent while the list is open appears on top within a second: the live stream says a
//! newer one arrived, the list is read again and its new rows go on top.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::access::{
    AccessRequestView, ApproveAccessRequest, DenyAccessRequest, list_access_requests,
};
use crate::api::tasks::TaskRow;
use crate::model::{JobId, JobState, RequestStatus};
use crate::ui::components::confirm::use_confirm;
use crate::ui::components::focus;
use crate::ui::components::form::server_message;
use crate::ui::components::form::use_hydrated;
use crate::ui::components::form::{PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::ui::components::live::{FollowsJob, use_newest_request};
use crate::ui::components::loaded::Loaded;
use crate::ui::components::status_chip::{StatusChip, Tone, mail_state_tone};
use crate::ui::components::table::{ACTION_CELL, CELL, FollowedTable, ROW};
use crate::ui::components::toast::use_toasts;

fn status_tone(status: RequestStatus) -> Tone {
    match status {
        RequestStatus::Pending => Tone::Queued,
        RequestStatus::Approved => Tone::Active,
        RequestStatus::Replied => Tone::Success,
        RequestStatus::Denied => Tone::Muted,
    }
}

#[component]
pub fn AccessRequestsPage() -> impl IntoView {
    let query = use_query_map();
    let status = Memo::new(move |_| query.read().get("status").filter(|s| !s.is_empty()));
    let requests = Resource::new(move || status.get(), list_access_requests);
    // The newest request this page has shown, and the rows that came after it.
    let shown_newest = StoredValue::new(0_i64);
    let arriving = RwSignal::new(Vec::<AccessRequestView>::new());
    use_newest_request(move |newest| {
        if newest <= shown_newest.get_value() {
            return;
        }
        shown_newest.set_value(newest);
        leptos::task::spawn_local(async move {
            if let Ok(rows) = list_access_requests(status.get_untracked()).await {
                arriving.set(rows);
            }
        });
    });

    view! {
        <Title text="Access requests"/>
        <h1 class="text-2xl font-semibold tracking-tight">"Access requests"</h1>
        <nav aria-label="Request statuses" class="mt-6 flex flex-wrap gap-2 text-sm">
            <a href="/admin/access-requests" class="rounded-full border border-slate-300 px-3 py-1 hover:bg-slate-100"
               aria-current=move || status.get().is_none().then_some("page")>"All"</a>
            {RequestStatus::ALL.into_iter().map(RequestStatus::as_str).map(|word| view! {
                <a href=format!("/admin/access-requests?status={word}")
                   class="rounded-full border border-slate-300 px-3 py-1 hover:bg-slate-100"
                   aria-current=move || (status.get().as_deref() == Some(word)).then_some("page")>{word}</a>
            }).collect_view()}
        </nav>
        <Loaded resource=requests loading="Loading requests…" show=move |rows| {
            let newest = rows.iter().map(|row| row.id).max().unwrap_or(0);
            shown_newest.update_value(|shown| *shown = (*shown).max(newest));
            view! {
            <FollowedTable rows=rows columns=&["Who", "Message", "Asked", "Status", "Mail", ""]
                key=|request: &AccessRequestView| request.id
                row=|row| view! { <RequestRowView row=row/> }
                empty="No access requests here."
                arriving=arriving/>
            }
        }/>
    }
}

/// An approved request whose mail job is over without having sent, or was cleaned away.
fn mail_needs_another_try(row: &AccessRequestView) -> bool {
    row.status == RequestStatus::Approved
        && matches!(
            row.mail_job_state,
            None | Some(JobState::Discarded | JobState::Cancelled)
        )
}

#[component]
fn RequestRowView(row: RwSignal<AccessRequestView>) -> impl IntoView {
    let confirm = use_confirm();
    let toasts = use_toasts();
    let approve = ServerAction::<ApproveAccessRequest>::new();
    let deny = ServerAction::<DenyAccessRequest>::new();
    let hydrated = use_hydrated();
    Effect::new(move |_| match approve.value().get() {
        Some(Ok(answer)) => {
            toasts.success(format!(
                "Approved. The approval mail is queued (job {}).",
                answer.mail_job_id
            ));
            row.update(|row| {
                row.status = answer.status;
                row.mail_state = Some(answer.mail_state);
                row.mail_job_id = Some(answer.mail_job_id);
                row.mail_job_state = Some(JobState::Available);
                row.mail_note = None;
            });
            focus::restore_after_render();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    Effect::new(move |_| match deny.value().get() {
        Some(Ok(message)) => {
            toasts.info(message);
            row.update(|row| row.status = RequestStatus::Denied);
            focus::restore_after_render();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    let id = row.get_untracked().id;
    let busy = move || !hydrated.get() || approve.pending().get() || deny.pending().get();
    view! {
        <tr data-testid="access-request-row" data-request-id=id.to_string() class=format!("{ROW} md:align-top")>
            // Where the keyboard lands when Approve or Deny leaves the row without buttons.
            <td class=format!("{CELL} focus:outline-none focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600") data-label="Who" tabindex="-1" data-focus-key=format!("request-{id}")>
                <div class="min-w-0 break-words">
                    <div class="font-medium">{move || row.get().name}</div>
                    <div class="text-slate-500">{move || row.get().email}</div>
                </div>
            </td>
            <td class=format!("{CELL} md:max-w-sm whitespace-pre-wrap break-words text-slate-700") data-label="Message">{move || row.get().message}</td>
            <td class=format!("{CELL} md:whitespace-nowrap text-slate-600") data-label="Asked">{move || row.get().created}</td>
            <td class=CELL data-label="Status">
                {move || { let status = row.get().status; view! { <StatusChip label=status.as_str() tone=status_tone(status) test_id="request-status"/> } }}
            </td>
            <td class=CELL data-label="Mail">
                {move || {
                    let current = row.get();
                    match current.mail_state {
                        Some(state) => view! {
                            <StatusChip label=state.as_str() tone=mail_state_tone(state) test_id="request-mail-state" title=current.mail_note.unwrap_or_default()/>
                        }.into_any(),
                        None => view! { <span data-testid="request-mail-state" data-state="none" class="text-slate-400">"—"</span> }.into_any(),
                    }
                }}
            </td>
            <td class=format!("{ACTION_CELL} md:whitespace-nowrap md:text-right")>
                <Show when=move || row.get().status == RequestStatus::Pending>
                    <button type="button" class=PRIMARY_BUTTON disabled=busy on:click=move |_| {
                        focus::remember_key(&format!("request-{id}"));
                        approve.dispatch(ApproveAccessRequest { id });
                    }>"Approve"</button>
                    " "
                    <button type="button" class=SECONDARY_BUTTON disabled=busy on:click=move |_| {
                        let who = row.with_untracked(|row| format!("{} <{}>", row.name, row.email));
                        confirm.ask(
                            format!("Deny the request of {who}? They get no access code; the request stays on the list as denied."),
                            "Deny",
                            move || {
                                focus::remember_key(&format!("request-{id}"));
                                deny.dispatch(DenyAccessRequest { id });
                            },
                        );
                    }>"Deny"</button>
                </Show>
                // Approved, but its mail job ended without sending (or is gone): the
                // admin can queue the mail again rather than leave the visitor waiting.
                <Show when=move || row.with(mail_needs_another_try)>
                    <button type="button" class=PRIMARY_BUTTON disabled=busy on:click=move |_| { approve.dispatch(ApproveAccessRequest { id }); }>"Approve again"</button>
                </Show>
            </td>
        </tr>
    }
    // Erased: a row of live cells inside the table's `For` is a type deep enough to
    // overflow rustc's query depth in release builds.
    .into_any()
}

/// A request's mail chip follows its mail job; a completed approval mail means the
/// request was replied to.
impl FollowsJob for AccessRequestView {
    fn followed_job(&self) -> (Option<JobId>, Option<JobState>) {
        (self.mail_job_id.map(JobId), self.mail_job_state)
    }

    fn job_moved(&mut self, job: &TaskRow) {
        self.mail_job_state = Some(job.state);
        self.mail_state = Some(crate::model::MailState::of_job(job.state));
        self.mail_note = job
            .last_error
            .as_ref()
            .map(|error| format!("Last error: {error}"));
        if job.state == JobState::Completed && self.status == RequestStatus::Approved {
            self.status = RequestStatus::Replied;
        }
    }
}
