//! Toasts: short messages about what just happened ("Approval mail queued").
//!
//! One region per page carries `role="status"` (a polite live region, so screen readers
//! read new toasts) and holds every toast; the toasts themselves are plain children, so
//! there is exactly one status element to find. Toasts dismiss themselves after a while
//! or on their close button.

use std::time::Duration;

use leptos::prelude::*;

/// How a toast is coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToastKind {
    Info,
    Success,
    Error,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Toast {
    id: u64,
    kind: ToastKind,
    message: String,
}

/// The page's toasts. Copy it into any closure; get it with [`use_toasts`].
#[derive(Clone, Copy)]
pub struct Toasts {
    list: RwSignal<Vec<Toast>>,
    next_id: StoredValue<u64>,
}

/// Long enough to read a sentence twice; errors stay longer.
const SHOW_FOR: Duration = Duration::from_secs(8);
const SHOW_ERRORS_FOR: Duration = Duration::from_secs(15);

impl Toasts {
    /// Creates the toast list and provides it to everything below.
    pub fn provide() -> Self {
        let toasts = Toasts {
            list: RwSignal::new(Vec::new()),
            next_id: StoredValue::new(0),
        };
        provide_context(toasts);
        toasts
    }

    /// Shows `message`.
    pub fn push(&self, kind: ToastKind, message: impl Into<String>) {
        let id = self.next_id.get_value();
        self.next_id.set_value(id + 1);
        self.list.update(|list| {
            list.push(Toast {
                id,
                kind,
                message: message.into(),
            })
        });
        let toasts = *self;
        let show_for = if kind == ToastKind::Error {
            SHOW_ERRORS_FOR
        } else {
            SHOW_FOR
        };
        set_timeout(move || toasts.dismiss(id), show_for);
    }

    pub fn info(&self, message: impl Into<String>) {
        self.push(ToastKind::Info, message)
    }

    pub fn success(&self, message: impl Into<String>) {
        self.push(ToastKind::Success, message)
    }

    pub fn error(&self, message: impl Into<String>) {
        self.push(ToastKind::Error, message)
    }

    fn dismiss(&self, id: u64) {
        // The page may be gone by the time a timer fires.
        let _ = self
            .list
            .try_update(|list| list.retain(|toast| toast.id != id));
    }
}

/// The toasts provided by the app shell.
pub fn use_toasts() -> Toasts {
    expect_context::<Toasts>()
}

/// The region that shows the toasts; the app shell renders it once.
#[component]
pub fn ToastRegion() -> impl IntoView {
    let toasts = use_toasts();
    view! {
        <div
            role="status"
            aria-live="polite"
            class="pointer-events-none fixed bottom-4 right-4 z-50 flex w-96 max-w-[calc(100vw-2rem)] flex-col gap-2"
        >
            <For each=move || toasts.list.get() key=|toast| toast.id let:toast>
                <div
                    data-testid="toast"
                    data-kind=match toast.kind {
                        ToastKind::Info => "info",
                        ToastKind::Success => "success",
                        ToastKind::Error => "error",
                    }
                    class=match toast.kind {
                        ToastKind::Info => "pointer-events-auto flex items-start gap-3 rounded-lg border border-slate-200 bg-white px-4 py-3 text-sm text-slate-800 shadow-lg",
                        ToastKind::Success => "pointer-events-auto flex items-start gap-3 rounded-lg border border-emerald-200 bg-emerald-50 px-4 py-3 text-sm text-emerald-900 shadow-lg",
                        ToastKind::Error => "pointer-events-auto flex items-start gap-3 rounded-lg border border-rose-200 bg-rose-50 px-4 py-3 text-sm text-rose-900 shadow-lg",
                    }
                >
                    <p class="flex-1">{toast.message.clone()}</p>
                    <button
                        type="button"
                        class="text-slate-400 hover:text-slate-700"
                        aria-label="Dismiss"
                        on:click=move |_| toasts.dismiss(toast.id)
                    >
                        "×"
                    </button>
                </div>
            </For>
        </div>
    }
}
