//! `/admin/account`: the owner's address, a form to change it (it changes only once the
//! new address confirms), the pending change with its mail chip and Cancel, and the
//! recovery phrase, sent at once, with what really happened.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::account::{
    AccountView, CancelEmailChange, ChangeOwnerEmail, PendingView, RecoveryView,
    SendRecoveryPhrase, account_overview,
};
use crate::api::front_page::{SaveFrontPage, front_page_form};
use crate::model::JobId;
use crate::ui::components::form::server_message;
use crate::ui::components::form::use_hydrated;
use crate::ui::components::form::{INPUT, LABEL, PRIMARY_BUTTON, SECONDARY_BUTTON};
use crate::ui::components::live::refetch_on_jobs;
use crate::ui::components::loaded::LoadError;
use crate::ui::components::status_chip::{StatusChip, mail_state_tone};
use crate::ui::components::toast::use_toasts;

#[component]
pub fn AccountPage() -> impl IntoView {
    let toasts = use_toasts();
    let account = Resource::new(|| (), |_| account_overview());
    let change = ServerAction::<ChangeOwnerEmail>::new();
    let cancel = ServerAction::<CancelEmailChange>::new();
    let recovery = ServerAction::<SendRecoveryPhrase>::new();
    let hydrated = use_hydrated();
    let change_form = NodeRef::<leptos::html::Form>::new();

    Effect::new(move |_| match change.value().get() {
        Some(Ok(message)) => {
            toasts.success(message);
            // Done: the field is cleared for the next change.
            if let Some(form) = change_form.get_untracked() {
                form.reset();
            }
            account.refetch();
        }
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    Effect::new(move |_| match cancel.value().get() {
        Some(Ok(message)) => {
            toasts.info(message);
            account.refetch();
        }
        Some(Err(error)) => {
            toasts.error(server_message(&error));
            account.refetch();
        }
        None => {}
    });
    Effect::new(move |_| match recovery.value().get() {
        Some(Ok(_)) => account.refetch(),
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });

    // Follow the pending change's mail live while it is on its way.
    refetch_on_jobs(account, |view| {
        view.pending
            .as_ref()
            .filter(|pending| pending.job_state.is_none_or(|state| !state.is_terminal()))
            .and_then(|pending| pending.job_id)
            .map(JobId)
            .into_iter()
            .collect()
    });

    view! {
        <Title text="Account"/>
        <h1 class="text-2xl font-semibold tracking-tight">"Account"</h1>
        <Transition fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match account.await {
                    Ok(view) => view! { <AccountBody view=view change=change change_form=change_form cancel=cancel recovery=recovery hydrated=hydrated/> }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Transition>
        <FrontPageEditor/>
    }
}

/// The front page's name and introduction (Markdown), as visitors see them on `/`.
#[component]
fn FrontPageEditor() -> impl IntoView {
    let form = Resource::new(|| (), |_| front_page_form());
    let save = ServerAction::<SaveFrontPage>::new();
    let toasts = use_toasts();
    let hydrated = use_hydrated();
    Effect::new(move |_| match save.value().get() {
        Some(Ok(message)) => toasts.success(message),
        Some(Err(error)) => toasts.error(server_message(&error)),
        None => {}
    });
    view! {
        <section class="mt-10" aria-labelledby="front-page-heading">
            <h2 id="front-page-heading" class="text-lg font-semibold">"Front page"</h2>
            <p class="mt-1 text-sm text-slate-600">
                "What visitors see on " <a href="/" class="text-teal-700 underline">"the front page"</a>
                ": your name and a short introduction. The introduction is Markdown (emphasis, lists, links); HTML shows as text."
            </p>
            <Suspense fallback=|| view! { <p class="mt-4 text-sm text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match form.await {
                        Ok(current) => view! {
                            <ActionForm action=save attr:novalidate=true attr:class="mt-4 space-y-4 rounded-xl border border-slate-200 bg-white p-6">
                                <div>
                                    <label for="front-page-name" class=LABEL>"Name"</label>
                                    <input id="front-page-name" name="owner_name" type="text" maxlength="200" required=true value=current.owner_name class=INPUT/>
                                </div>
                                <div>
                                    <label for="front-page-introduction" class=LABEL>"Introduction (Markdown)"</label>
                                    <textarea id="front-page-introduction" name="introduction" rows="6" maxlength="4000" class=INPUT>{current.introduction}</textarea>
                                </div>
                                <button type="submit" class=PRIMARY_BUTTON disabled=move || !hydrated.get() || save.pending().get()>
                                    "Save front page"
                                </button>
                            </ActionForm>
                        }.into_any(),
                        Err(error) => view! { <LoadError error=error/> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn AccountBody(
    view: AccountView,
    change: ServerAction<ChangeOwnerEmail>,
    change_form: NodeRef<leptos::html::Form>,
    cancel: ServerAction<CancelEmailChange>,
    recovery: ServerAction<SendRecoveryPhrase>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let AccountView {
        current_email,
        pending,
        recovery: last_recovery,
    } = view;
    view! {
        <section class="mt-6 rounded-xl border border-slate-200 bg-white p-6">
            <h2 class="font-semibold">"The owner's address"</h2>
            <p class="mt-1 text-sm text-slate-600">"Where StandMeet mails the owner: new access requests, recovery phrases."</p>
            <p class="mt-3 text-lg" data-testid="current-email">{current_email.unwrap_or_else(|| "(none yet)".into())}</p>
            <ActionForm action=change node_ref=change_form attr:novalidate=true attr:class="mt-4 flex flex-wrap items-end gap-3">
                <div class="min-w-72 flex-1">
                    <label for="new-email" class=LABEL>"New email"</label>
                    <input id="new-email" name="new_email" type="email" autocomplete="email" class=INPUT/>
                </div>
                <button type="submit" class=PRIMARY_BUTTON disabled=move || !hydrated.get() || change.pending().get()>
                    "Change email"
                </button>
            </ActionForm>
            <p class="mt-2 text-xs text-slate-500">"The new address gets a link; the change takes effect when it is opened."</p>
            {pending.map(|pending| view! { <PendingRow pending=pending cancel=cancel hydrated=hydrated/> })}
        </section>
        <RecoveryRow last=last_recovery recovery=recovery hydrated=hydrated/>
    }
}

#[component]
fn PendingRow(
    pending: PendingView,
    cancel: ServerAction<CancelEmailChange>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let id = pending.id;
    view! {
        <div data-testid="pending-email-row" data-change-id=id.to_string()
             class="mt-6 flex flex-wrap items-center gap-3 rounded-lg border border-amber-200 bg-amber-50 px-4 py-3 text-sm">
            <span>"Waiting for "<strong>{pending.new_email}</strong>" to confirm (asked " {pending.requested} ")"</span>
            <StatusChip
                label=pending.mail_state.as_str()
                tone=mail_state_tone(pending.mail_state)
                test_id="pending-email-state"
                title=pending.note.unwrap_or_default()
            />
            <button type="button" class=format!("ml-auto {SECONDARY_BUTTON}") disabled=move || !hydrated.get() || cancel.pending().get()
                    on:click=move |_| { cancel.dispatch(CancelEmailChange { id }); }>
                "Cancel"
            </button>
        </div>
    }
}

#[component]
fn RecoveryRow(
    last: Option<RecoveryView>,
    recovery: ServerAction<SendRecoveryPhrase>,
    hydrated: RwSignal<bool>,
) -> impl IntoView {
    let outcome = last.map(|attempt| {
        if attempt.sent {
            view! { <p data-testid="recovery-outcome" data-sent="true" class="text-sm text-emerald-800">{format!("sent at {} to {}", attempt.at, attempt.recipient)}</p> }.into_any()
        } else {
            view! {
                <p data-testid="recovery-outcome" data-sent="false" class="text-sm text-rose-800">
                    {format!("not sent ({}): {}", attempt.at, attempt.error.unwrap_or_default())}
                </p>
            }
            .into_any()
        }
    });
    view! {
        <section data-testid="recovery-row" class="mt-6 flex flex-wrap items-center gap-4 rounded-xl border border-slate-200 bg-white p-6">
            <div class="flex-1">
                <h2 class="font-semibold">"Recovery phrase"</h2>
                <p class="mt-1 text-sm text-slate-600">"Sent to the owner's address right away; a new phrase replaces the old."</p>
                <div class="mt-2">{outcome.unwrap_or_else(|| view! { <p class="text-sm text-slate-500">"Never sent."</p> }.into_any())}</div>
            </div>
            <button type="button" class=SECONDARY_BUTTON disabled=move || !hydrated.get() || recovery.pending().get()
                    on:click=move |_| { recovery.dispatch(SendRecoveryPhrase {}); }>
                {move || if recovery.pending().get() { "Sending…" } else { "Send recovery phrase" }}
            </button>
        </section>
    }
}
