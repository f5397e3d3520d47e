//! Confirmation before a destructive action (Cancel a job, Deny a request, Remove a
//! source, Delete an endpoint): an in-page dialog that says what will happen, with a
//! button naming the action and one to keep things as they are. Escape or "Keep it"
//! closes it; the action's button has the focus while it is open, and the button that
//! opened it gets the focus back when it closes, so the keyboard stays where it was.

use leptos::prelude::*;

/// What the dialog asks, and what its action button does.
#[derive(Clone)]
struct Question {
    text: String,
    action: String,
    run: Callback<()>,
}

/// The page's confirmation dialog. Copy it into any closure; get it with
/// [`use_confirm`].
#[derive(Clone, Copy)]
pub struct Confirm {
    asking: RwSignal<Option<Question>>,
}

impl Confirm {
    /// Creates the dialog's state and provides it to everything below.
    pub fn provide() -> Self {
        let confirm = Confirm {
            asking: RwSignal::new(None),
        };
        provide_context(confirm);
        confirm
    }

    /// Asks `text`; the button `action` runs `run`.
    pub fn ask(
        &self,
        text: impl Into<String>,
        action: impl Into<String>,
        run: impl Fn() + Send + Sync + 'static,
    ) {
        #[cfg(feature = "hydrate")]
        browser::remember_focus();
        self.asking.set(Some(Question {
            text: text.into(),
            action: action.into(),
            run: Callback::new(move |()| run()),
        }));
    }

    fn close(&self) {
        self.asking.set(None);
        #[cfg(feature = "hydrate")]
        browser::restore_focus();
    }
}

/// The page's [`Confirm`].
pub fn use_confirm() -> Confirm {
    expect_context::<Confirm>()
}

/// The dialog itself, once per page (in the app, beside the toasts).
#[component]
pub fn ConfirmDialog() -> impl IntoView {
    let confirm = use_confirm();
    let action_button = NodeRef::<leptos::html::Button>::new();
    // The action's button takes the focus as the dialog opens.
    Effect::new(move |_| {
        if confirm.asking.with(Option::is_some)
            && let Some(button) = action_button.get()
        {
            let _ = button.focus();
        }
    });
    move || {
        confirm.asking.get().map(|question| {
            let run = question.run;
            view! {
                <div class="fixed inset-0 z-40 flex items-center justify-center bg-slate-900/40 p-4"
                     on:keydown=move |event| {
                         if event.key() == "Escape" {
                             confirm.close();
                         }
                     }>
                    <div role="dialog" aria-modal="true" aria-labelledby="confirm-text" data-testid="confirm-dialog"
                         class="w-full max-w-md rounded-xl bg-white p-6 shadow-xl ring-1 ring-slate-200">
                        <p id="confirm-text" class="text-sm text-slate-800">{question.text.clone()}</p>
                        <div class="mt-6 flex flex-wrap justify-end gap-3">
                            <button type="button" data-testid="confirm-keep"
                                    class="rounded-md px-3 py-2 text-sm font-medium text-slate-700 ring-1 ring-slate-300 hover:bg-slate-50 focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600"
                                    on:click=move |_| confirm.close()>
                                "Keep it"
                            </button>
                            <button type="button" data-testid="confirm-action" node_ref=action_button
                                    class="rounded-md bg-rose-700 px-3 py-2 text-sm font-medium text-white hover:bg-rose-800 focus-visible:outline focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-rose-700"
                                    on:click=move |_| {
                                        confirm.close();
                                        run.run(());
                                    }>
                                {question.action.clone()}
                            </button>
                        </div>
                    </div>
                </div>
            }
        })
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::RefCell;

    use wasm_bindgen::JsCast;
    use web_sys::HtmlElement;

    thread_local! {
        /// The element that had the focus when the dialog opened.
        static OPENER: RefCell<Option<HtmlElement>> = const { RefCell::new(None) };
    }

    pub fn remember_focus() {
        let active = web_sys::window()
            .and_then(|window| window.document())
            .and_then(|document| document.active_element())
            .and_then(|element| element.dyn_into::<HtmlElement>().ok());
        OPENER.with(|opener| *opener.borrow_mut() = active);
    }

    pub fn restore_focus() {
        if let Some(element) = OPENER.with(|opener| opener.borrow_mut().take())
            && element.is_connected()
        {
            let _ = element.focus();
        }
    }
}
