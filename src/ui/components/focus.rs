//! Keeping the keyboard's place when an action re-renders the part of the page that held
//! the focused control (Pause → Resume, Retry on a job's page, a list read again).
//!
//! Controls that an action may re-render carry a `data-focus-key` that stays the same
//! across renders. A listener installed once ([`install`]) notes the key of each control
//! that takes the focus (and forgets it when the pointer goes elsewhere: a mouse user
//! chooses for themselves). When a page has read its data again it calls
//! [`restore_after_render`]: if the focus is lost with the old nodes (it is on
//! `<body>`, or on a control just disabled) within half a second, the control with the
//! same key gets it back (as soon as it appears), or, when that control is gone (Approve
//! leaves no button behind), the page's `<main>`. An action may also name where the
//! focus should land ([`remember_key`]).
//! On the server all of this does nothing.

/// Starts noting which keyed control has the focus (once, when the app hydrates).
pub fn install() {
    #[cfg(feature = "hydrate")]
    browser::install();
}

/// Notes `key` as the control to focus after the next render (the one that has the
/// focus will be gone or disabled: after a bulk action, nothing is selected).
pub fn remember_key(key: &str) {
    #[cfg(feature = "hydrate")]
    browser::remember_key(key);
    #[cfg(not(feature = "hydrate"))]
    let _ = key;
}

/// After the next paint, gives the focus back if a re-render took it away (see the
/// module documentation).
pub fn restore_after_render() {
    #[cfg(feature = "hydrate")]
    browser::restore_after_render();
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::RefCell;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::{Document, Event, HtmlElement};

    thread_local! {
        /// The key of the keyed control that last took the focus.
        static KEY: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    fn document() -> Option<Document> {
        web_sys::window().and_then(|window| window.document())
    }

    pub fn install() {
        let Some(document) = document() else {
            return;
        };
        let on_focus = Closure::<dyn FnMut(Event)>::new(|event: Event| {
            let key = event
                .target()
                .and_then(|target| target.dyn_into::<web_sys::Element>().ok())
                .and_then(|element| element.get_attribute("data-focus-key"));
            if key.is_some() {
                KEY.with(|remembered| *remembered.borrow_mut() = key);
            }
        });
        let on_pointer = Closure::<dyn FnMut(Event)>::new(|_: Event| {
            KEY.with(|remembered| *remembered.borrow_mut() = None);
        });
        let _ =
            document.add_event_listener_with_callback("focusin", on_focus.as_ref().unchecked_ref());
        let _ = document
            .add_event_listener_with_callback("pointerdown", on_pointer.as_ref().unchecked_ref());
        // For the page's lifetime.
        on_focus.forget();
        on_pointer.forget();
    }

    pub fn remember_key(key: &str) {
        KEY.with(|remembered| *remembered.borrow_mut() = Some(key.to_string()));
    }

    /// How many frames a restore waits for the focus to be lost and for the keyed
    /// control to appear: the data that brings it may be rendered a few frames after the
    /// page read it (a busy machine, a suspended view), and falling back to `<main>` at
    /// once would strand the focus.
    const FRAMES_TO_WAIT: u32 = 30;

    pub fn restore_after_render() {
        if KEY.with(|remembered| remembered.borrow().is_none()) {
            return;
        }
        restore_in_a_frame(FRAMES_TO_WAIT);
    }

    fn restore_in_a_frame(frames_left: u32) {
        leptos::prelude::request_animation_frame(move || {
            let Some(document) = document() else {
                return;
            };
            // Lost: on `<body>` (its control re-rendered away), or on a control that has
            // just been disabled (a bulk action's button once nothing is selected).
            let lost = document.active_element().is_none_or(|element| {
                element.tag_name().eq_ignore_ascii_case("body") || element.has_attribute("disabled")
            });
            if !lost {
                // The render that takes the focus away may come a few frames after the
                // data that asked for this restore (the effect may run first).
                if frames_left > 0 {
                    restore_in_a_frame(frames_left - 1);
                }
                return;
            }
            let Some(key) = KEY.with(|remembered| remembered.borrow().clone()) else {
                return;
            };
            let keyed = document
                .query_selector(&format!("[data-focus-key=\"{key}\"]:not([disabled])"))
                .ok()
                .flatten();
            if keyed.is_none() && frames_left > 0 {
                restore_in_a_frame(frames_left - 1);
                return;
            }
            let target = keyed
                .or_else(|| document.query_selector("main").ok().flatten())
                .and_then(|element| element.dyn_into::<HtmlElement>().ok());
            if let Some(element) = target {
                let _ = element.focus();
            }
        });
    }
}
