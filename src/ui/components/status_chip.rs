//! The one status chip every page uses: a word in a coloured pill. Job states, mail
//! states and index states all go through it, so the same word always looks the same.

use leptos::prelude::*;

use crate::model::{JobState, MailState};

/// The colour family of a chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// Waiting its turn.
    Queued,
    /// Waiting for a time.
    Waiting,
    /// Happening now.
    Active,
    /// Went wrong, will try again.
    Warning,
    Success,
    Danger,
    Muted,
}

impl Tone {
    fn classes(self) -> &'static str {
        match self {
            Tone::Queued => "bg-sky-50 text-sky-800 ring-sky-200",
            Tone::Waiting => "bg-violet-50 text-violet-800 ring-violet-200",
            Tone::Active => "bg-blue-50 text-blue-800 ring-blue-200",
            Tone::Warning => "bg-amber-50 text-amber-900 ring-amber-300",
            Tone::Success => "bg-emerald-50 text-emerald-800 ring-emerald-200",
            Tone::Danger => "bg-rose-50 text-rose-800 ring-rose-200",
            Tone::Muted => "bg-slate-100 text-slate-700 ring-slate-300",
        }
    }
}

/// The colour of each job state.
pub fn job_state_tone(state: JobState) -> Tone {
    match state {
        JobState::Available => Tone::Queued,
        JobState::Scheduled => Tone::Waiting,
        JobState::Running => Tone::Active,
        JobState::Retryable => Tone::Warning,
        JobState::Completed => Tone::Success,
        JobState::Discarded => Tone::Danger,
        JobState::Cancelled => Tone::Muted,
    }
}

/// The colour of each mail state.
pub fn mail_state_tone(state: MailState) -> Tone {
    match state {
        MailState::Sending => Tone::Active,
        MailState::Sent => Tone::Success,
        MailState::Failed => Tone::Danger,
    }
}

/// A chip showing `label`, with `test_id` as its `data-testid` and an optional
/// `title` (the tooltip that says more, such as the last error).
#[component]
pub fn StatusChip(
    #[prop(into)] label: String,
    tone: Tone,
    test_id: &'static str,
    #[prop(optional, into)] title: Option<String>,
) -> impl IntoView {
    let state_word = label.clone();
    view! {
        <span
            data-testid=test_id
            data-state=state_word
            title=title
            class=format!(
                "inline-flex items-center rounded-full px-2 py-0.5 text-xs font-medium ring-1 ring-inset {}",
                tone.classes(),
            )
        >
            {label}
        </span>
    }
}

/// The chip of a job's state, `data-testid="job-state"`.
#[component]
pub fn JobStateChip(
    state: JobState,
    #[prop(optional, into)] title: Option<String>,
) -> impl IntoView {
    view! { <StatusChip label=state.as_str() tone=job_state_tone(state) test_id="job-state" title=title.unwrap_or_default()/> }
}
