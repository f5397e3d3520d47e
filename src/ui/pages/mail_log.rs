//! `/admin/mail`: the mail log, newest first: who got what, when. With the `log`
//! supplier (the default) nothing leaves the machine and the bodies are kept here, so a
//! person trying StandMeet without SMTP can still follow a code or a link.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::access::mail_log;
use crate::ui::components::loaded::LoadError;

#[component]
pub fn MailLogPage() -> impl IntoView {
    let mails = Resource::new(|| (), |_| mail_log());
    view! {
        <Title text="Mail log"/>
        <h1 class="text-2xl font-semibold tracking-tight">"Mail log"</h1>
        <p class="mt-2 text-sm text-slate-600">"Every mail StandMeet sent, newest first. Bodies are kept only for mail the log supplier \"sent\"."</p>
        <Suspense fallback=|| view! { <p class="mt-6 text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match mails.await {
                    Ok(mails) if mails.is_empty() => view! { <p class="mt-6 text-sm text-slate-500">"No mail yet."</p> }.into_any(),
                    Ok(mails) => view! {
                        <ol class="mt-6 space-y-4">
                            {mails.into_iter().map(|mail| view! {
                                <li data-testid="mail-entry" data-mail-id=mail.id.to_string() class="rounded-xl border border-slate-200 bg-white p-4">
                                    <div class="flex flex-wrap items-baseline justify-between gap-2 text-sm">
                                        <span><span class="text-slate-500">"To "</span><span data-testid="mail-recipient" class="font-medium">{mail.recipient}</span></span>
                                        <span class="text-slate-500">{format!("{} · {}", mail.sent, mail.supplier)}</span>
                                    </div>
                                    <div data-testid="mail-subject" class="mt-1 font-semibold">{mail.subject}</div>
                                    {mail.body.map(|body| view! { <pre data-testid="mail-body" class="mt-2 whitespace-pre-wrap font-mono text-xs text-slate-700">{body}</pre> })}
                                    {mail.attachment.map(|ics| view! {
                                        <details open class="mt-2 text-sm">
                                            <summary class="cursor-pointer text-slate-600">"Calendar attachment: invite.ics"</summary>
                                            <pre data-testid="mail-attachment" class="mt-2 whitespace-pre-wrap rounded-md bg-slate-50 p-2 font-mono text-xs text-slate-700">{ics}</pre>
                                        </details>
                                    })}
                                </li>
                            }).collect_view()}
                        </ol>
                    }.into_any(),
                    Err(error) => view! { <LoadError error=error/> }.into_any(),
                }
            })}
        </Suspense>
    }
}
