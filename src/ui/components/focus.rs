//! Keeping the keyboard's place when an action re-renders the list that holds the
//! control it was done with (Pause → Resume, Disable → Enable): the control carries a
//! `data-focus-key` that stays the same across renders; [`remember`] notes the focused
//! control's key before the action, and [`restore_after_render`] (called when the list
//! was read again) focuses the control with that key once the new rows are on screen.
//! On the server both do nothing.

/// Notes the `data-focus-key` of the control that has the focus now.
pub fn remember() {
    #[cfg(feature = "hydrate")]
    browser::remember();
}

/// Notes `key` as the control to focus after the next render (the one that had the
/// focus will be gone or disabled: after a bulk action, nothing is selected).
pub fn remember_key(key: &str) {
    #[cfg(feature = "hydrate")]
    browser::remember_key(key);
    #[cfg(not(feature = "hydrate"))]
    let _ = key;
}

/// Focuses, after the next paint, the control with the remembered key (once).
pub fn restore_after_render() {
    #[cfg(feature = "hydrate")]
    browser::restore_after_render();
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::RefCell;

    use wasm_bindgen::JsCast;
    use web_sys::HtmlElement;

    thread_local! {
        static KEY: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    pub fn remember() {
        let key = web_sys::window()
            .and_then(|window| window.document())
            .and_then(|document| document.active_element())
            .and_then(|element| element.get_attribute("data-focus-key"));
        KEY.with(|remembered| *remembered.borrow_mut() = key);
    }

    pub fn remember_key(key: &str) {
        KEY.with(|remembered| *remembered.borrow_mut() = Some(key.to_string()));
    }

    pub fn restore_after_render() {
        if KEY.with(|remembered| remembered.borrow().is_none()) {
            return;
        }
        leptos::prelude::request_animation_frame(|| {
            let Some(key) = KEY.with(|remembered| remembered.borrow_mut().take()) else {
                return;
            };
            let element = web_sys::window()
                .and_then(|window| window.document())
                .and_then(|document| {
                    document
                        .query_selector(&format!("[data-focus-key=\"{key}\"]"))
                        .ok()
                        .flatten()
                })
                .and_then(|element| element.dyn_into::<HtmlElement>().ok());
            if let Some(element) = element {
                let _ = element.focus();
            }
        });
    }
}
