//! Dark mode. Every page follows the system's setting (`prefers-color-scheme`) until
//! the person presses the header's "Dark mode" button, which chooses dark or light and
//! remembers the choice in a cookie (a year, this site only). The server reads that
//! cookie and renders `<html class="dark">` or `<html class="light">`, so a page comes
//! in its colours from the first paint, without a script before it.
//!
//! The colours themselves are in `style/tailwind.css`: each colour of the palette the
//! pages use is a `light-dark()` pair, so every class (`bg-white`, `text-slate-600`, …)
//! has its dark counterpart without a second set of classes.

use leptos::prelude::*;

use crate::ui::components::form::{SECONDARY_BUTTON, use_hydrated};

/// The cookie that remembers the choice: `dark` or `light`.
pub const THEME_COOKIE: &str = "standmeet_theme";

/// The class `<html>` carries for a request's `Cookie` header: `dark` or `light` when
/// the person chose one, empty when the page follows the system's setting.
#[cfg(feature = "ssr")]
pub fn theme_class(cookie_header: &str) -> &'static str {
    let chosen = cookie::Cookie::split_parse(cookie_header)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == THEME_COOKIE);
    match chosen.as_ref().map(|cookie| cookie.value()) {
        Some("dark") => "dark",
        Some("light") => "light",
        _ => "",
    }
}

/// The class `<html>` carries for the page being rendered (see [`theme_class`]).
pub fn requested_theme_class() -> &'static str {
    #[cfg(feature = "ssr")]
    {
        use_context::<axum::http::request::Parts>()
            .and_then(|parts| {
                parts
                    .headers
                    .get(axum::http::header::COOKIE)
                    .and_then(|value| value.to_str().ok())
                    .map(theme_class)
            })
            .unwrap_or("")
    }
    #[cfg(not(feature = "ssr"))]
    {
        ""
    }
}

/// The header's button: pressed while the page is dark; pressing it chooses the other
/// mode and remembers it. Disabled until the page is hydrated; on a visitor's page,
/// which is not, `ui/desk.js` does the same with the same cookie.
#[component]
pub fn ThemeToggle() -> impl IntoView {
    // Unknown on the server (the system's setting is the browser's): read once
    // hydrated.
    let dark = RwSignal::new(false);
    let hydrated = use_hydrated();
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        dark.set(browser::is_dark());
    });
    view! {
        <button
            type="button"
            data-testid="theme-toggle"
            // Without scripting nothing could switch it: the page follows the system.
            class=format!("{SECONDARY_BUTTON} focus-visible:outline focus-visible:outline-2 focus-visible:outline-teal-600 noscript:hidden")
            aria-pressed=move || dark.get().to_string()
            disabled=move || !hydrated.get()
            on:click=move |_| {
                let now_dark = !dark.get_untracked();
                #[cfg(feature = "hydrate")]
                browser::choose(now_dark);
                dark.set(now_dark);
            }
        >
            // At phone width a glyph, so the header stays one row; the name stays "Dark
            // mode" for screen readers.
            <span aria-hidden="true" class="sm:hidden">"◐"</span>
            <span class="sr-only sm:not-sr-only">"Dark mode"</span>
        </button>
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use wasm_bindgen::JsCast;

    use super::THEME_COOKIE;

    fn document() -> Option<web_sys::Document> {
        web_sys::window().and_then(|window| window.document())
    }

    /// Whether the page shows dark now: the chosen mode, else the system's.
    pub fn is_dark() -> bool {
        let Some(root) = document().and_then(|document| document.document_element()) else {
            return false;
        };
        let classes = root.class_list();
        if classes.contains("dark") {
            return true;
        }
        if classes.contains("light") {
            return false;
        }
        web_sys::window()
            .and_then(|window| {
                window
                    .match_media("(prefers-color-scheme: dark)")
                    .ok()
                    .flatten()
            })
            .is_some_and(|query| query.matches())
    }

    /// Shows the page dark (or light) and remembers the choice.
    pub fn choose(dark: bool) {
        let Some(document) = document() else {
            return;
        };
        let (on, off) = if dark {
            ("dark", "light")
        } else {
            ("light", "dark")
        };
        if let Some(root) = document.document_element() {
            let _ = root.class_list().remove_1(off);
            let _ = root.class_list().add_1(on);
        }
        if let Ok(html) = document.dyn_into::<web_sys::HtmlDocument>() {
            let _ = html.set_cookie(&format!(
                "{THEME_COOKIE}={on}; Path=/; Max-Age=31536000; SameSite=Lax"
            ));
        }
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::theme_class;

    #[test]
    fn the_cookie_chooses_the_class_and_anything_else_follows_the_system() {
        assert_eq!(theme_class("standmeet_theme=dark"), "dark");
        assert_eq!(theme_class("a=b; standmeet_theme=light; c=d"), "light");
        assert_eq!(theme_class("standmeet_theme=purple"), "");
        assert_eq!(theme_class("other_theme=dark"), "");
        assert_eq!(theme_class(""), "");
    }
}
