//! Keyboard shortcuts, as operators know them from the consoles they use: `/` puts the
//! focus in the page's search box (its first `input[type=search]`), and on admin pages
//! `g` and then a letter goes to another admin page ([`JUMPS`]: `g o` the overview, `g t` Tasks, `g q`
//! Queues, …). A key typed into a field, or with Ctrl, Alt or Meta held, is left alone.
//! Once listening, `<html>` carries `data-shortcuts="on"`. On the server this does
//! nothing. A visitor's page, which is not hydrated, has `/` from its own script
//! (`ui/desk.js`).

/// After `g`, the letter and the admin page it goes to.
pub const JUMPS: [(&str, &str); 12] = [
    ("o", "/admin"),
    ("t", "/admin/tasks"),
    ("q", "/admin/queues"),
    ("s", "/admin/schedules"),
    ("a", "/admin/access-requests"),
    ("b", "/admin/bookings"),
    ("c", "/admin/corpus"),
    ("l", "/admin/listings"),
    ("e", "/admin/events"),
    ("w", "/admin/webhooks"),
    ("m", "/admin/mail"),
    ("u", "/admin/account"),
];

/// Starts listening for the shortcuts (once, when the app hydrates).
pub fn install() {
    #[cfg(feature = "hydrate")]
    browser::install();
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::Cell;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::{HtmlElement, KeyboardEvent};

    use super::JUMPS;

    /// How long after `g` its letter may come, in milliseconds.
    const SECOND_KEY_WITHIN_MS: f64 = 1_500.0;

    thread_local! {
        /// When `g` was pressed (0: not waiting for a letter).
        static G_PRESSED_AT: Cell<f64> = const { Cell::new(0.0) };
    }

    pub fn install() {
        let Some(document) = web_sys::window().and_then(|window| window.document()) else {
            return;
        };
        let on_key = Closure::<dyn FnMut(KeyboardEvent)>::new(move |event: KeyboardEvent| {
            if event.ctrl_key() || event.alt_key() || event.meta_key() || event.default_prevented()
            {
                return;
            }
            if typing_in_a_field(&event) {
                return;
            }
            let key = event.key();
            let now = js_sys::Date::now();
            let after_g = G_PRESSED_AT.with(|pressed| {
                let at = pressed.replace(0.0);
                at > 0.0 && now - at <= SECOND_KEY_WITHIN_MS
            });
            if after_g && on_admin_page() {
                if let Some((_, path)) = JUMPS.iter().find(|(letter, _)| *letter == key) {
                    event.prevent_default();
                    if let Some(window) = web_sys::window() {
                        // A full page load, as the admin links make: the server's admin
                        // guard sees every visit to an admin page.
                        let _ = window.location().assign(path);
                    }
                }
                return;
            }
            match key.as_str() {
                "/" => {
                    let search = web_sys::window()
                        .and_then(|window| window.document())
                        .and_then(|document| {
                            document
                                .query_selector("main input[type=search]")
                                .ok()
                                .flatten()
                        })
                        .and_then(|element| element.dyn_into::<HtmlElement>().ok());
                    if let Some(search) = search {
                        event.prevent_default();
                        let _ = search.focus();
                    }
                }
                "g" => G_PRESSED_AT.with(|pressed| pressed.set(now)),
                _ => {}
            }
        });
        let _ =
            document.add_event_listener_with_callback("keydown", on_key.as_ref().unchecked_ref());
        // For the page's lifetime.
        on_key.forget();
        // Says that the shortcuts work now (before hydration they do not).
        if let Some(root) = document.document_element() {
            let _ = root.set_attribute("data-shortcuts", "on");
        }
    }

    /// Whether the key goes into a field (an input, a text area, a select, an editable
    /// element), where `/` and `g` are text.
    fn typing_in_a_field(event: &KeyboardEvent) -> bool {
        let Some(element) = event
            .target()
            .and_then(|target| target.dyn_into::<web_sys::Element>().ok())
        else {
            return false;
        };
        let tag = element.tag_name().to_ascii_lowercase();
        matches!(tag.as_str(), "input" | "textarea" | "select")
            || element
                .dyn_ref::<HtmlElement>()
                .is_some_and(|element| element.is_content_editable())
    }

    fn on_admin_page() -> bool {
        web_sys::window()
            .and_then(|window| window.location().pathname().ok())
            .is_some_and(|path| path.starts_with("/admin"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_goes_to_an_admin_page_and_no_letter_is_used_twice() {
        let pages: Vec<&str> = crate::ui::layout::ADMIN_PAGES
            .iter()
            .map(|(path, _)| *path)
            .collect();
        for (letter, path) in JUMPS {
            assert!(pages.contains(&path), "{path}");
            assert_eq!(
                JUMPS.iter().filter(|(other, _)| *other == letter).count(),
                1,
                "{letter}"
            );
        }
    }
}
