//! Polling from the browser: run a tick every so often while the tab is visible. On
//! the server it does nothing (pages are rendered once there).

use std::time::Duration;

/// Calls `tick` every `every` while the page is visible, until the calling component
/// is gone. Ticks while the tab is hidden are skipped, so a forgotten tab costs the
/// server nothing.
pub fn use_polling(every: Duration, tick: impl Fn() + 'static) {
    #[cfg(feature = "hydrate")]
    {
        use leptos::prelude::*;
        let handle = set_interval_with_handle(
            move || {
                let hidden = web_sys::window()
                    .and_then(|window| window.document())
                    .map(|document| document.hidden())
                    .unwrap_or(false);
                if !hidden {
                    tick();
                }
            },
            every,
        );
        if let Ok(handle) = handle {
            on_cleanup(move || handle.clear());
        }
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (every, tick);
    }
}
