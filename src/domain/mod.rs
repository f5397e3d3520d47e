//! The domain: what StandMeet does, in terms of its own types, independent of Leptos
//! pages and MCP tools. Pages and tools call these operations; job handlers call them
//! too. Only this layer (and `jobs`) talks to the database.

pub mod access_requests;
pub mod admins;
pub mod bookings;
pub mod corpus;
pub mod events;
pub mod failure;
pub mod front_page;
pub mod listings;
pub mod mail;
pub mod outbound;
pub mod owner;
pub mod schedules;
pub mod secrets;
pub mod waiting;
pub mod webhooks;

use anyhow::Context;

/// Every job kind this StandMeet runs.
pub fn job_registry(mail: mail::MailContext) -> anyhow::Result<standmeet_jobs::Registry> {
    use crate::domain::access_requests::{ApprovalMail, NotifyOwner};
    use crate::domain::bookings;
    use crate::domain::corpus::vault::VaultRebuild;
    use crate::domain::corpus::{IndexBatch, IndexEntry};
    use crate::domain::listings::{FetchAllSources, FetchSource};
    use crate::domain::mail::MailKind;
    use crate::domain::owner::EmailConfirmation;
    use crate::domain::webhooks::DeliverWebhook;
    let fetch =
        FetchSource::new(&mail.settings).context("cannot make the HTTP client for job boards")?;
    let vault = VaultRebuild {
        root: mail.settings.vault.clone(),
    };
    let deliver = DeliverWebhook::new(&mail.settings)
        .context("cannot make the HTTP client for webhook deliveries")?;
    Ok(standmeet_jobs::builtin::registry()
        .register(MailKind::new(NotifyOwner, mail.clone()))
        .register(MailKind::new(ApprovalMail, mail.clone()))
        .register(MailKind::new(bookings::NotifyOwner, mail.clone()))
        .register(MailKind::new(bookings::Confirmation, mail.clone()))
        .register(bookings::Cancellation(mail.clone()))
        .register(MailKind::new(EmailConfirmation, mail))
        .register(fetch)
        .register(FetchAllSources)
        .register(deliver)
        .register(vault)
        .register(IndexEntry)
        .register(IndexBatch))
}
