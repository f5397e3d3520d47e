//! Cross-site request refusal. Browsers say where a request comes from: modern ones
//! send `Sec-Fetch-Site` on every request and `Origin` on every POST. A request that
//! changes state (anything but GET, HEAD, OPTIONS) is refused with 403 when either says
//! another site sent it. Requests with neither header come from programs, not from a
//! page in a browser, and cannot ride on a visitor's cookies; they pass.
//!
//! This sits on top of `SameSite=Strict` session cookies: two locks, either enough.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::Settings;

pub async fn refuse_cross_site(
    State(settings): State<Arc<Settings>>,
    request: Request,
    next: Next,
) -> Response {
    let changes_state = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if changes_state && is_cross_site(request.headers(), &settings.public_url) {
        tracing::warn!(path = %request.uri().path(), "refused a cross-site request");
        return (
            StatusCode::FORBIDDEN,
            "This request came from another site, so StandMeet refused it. Use StandMeet's own pages.",
        )
            .into_response();
    }
    next.run(request).await
}

/// Whether the headers say the request was sent by a page of another site. Our own
/// origin is the public URL's, or the one the browser used to reach us (its `Host`),
/// so `localhost` and `127.0.0.1` both work on a developer's machine.
pub fn is_cross_site(headers: &HeaderMap, public_url: &url::Url) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        // `same-site` is a sibling subdomain: still somebody else's page.
        return !matches!(site.to_str(), Ok("same-origin" | "none"));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let Ok(origin) = origin.to_str() else {
        return true;
    };
    if origin == public_url.origin().ascii_serialization() {
        return false;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok());
    match (url::Url::parse(origin), host) {
        (Ok(origin_url), Some(host)) => {
            let origin_host = match origin_url.port() {
                Some(port) => format!("{}:{port}", origin_url.host_str().unwrap_or_default()),
                None => origin_url.host_str().unwrap_or_default().to_string(),
            };
            !origin_host.eq_ignore_ascii_case(host)
        }
        // "null" (a sandboxed frame, a file) or garbage: not us.
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn public() -> url::Url {
        url::Url::parse("https://desk.example.org").unwrap()
    }

    #[test]
    fn fetch_metadata_decides_when_present() {
        assert!(!is_cross_site(
            &headers(&[("sec-fetch-site", "same-origin")]),
            &public()
        ));
        assert!(!is_cross_site(
            &headers(&[("sec-fetch-site", "none")]),
            &public()
        ));
        assert!(is_cross_site(
            &headers(&[("sec-fetch-site", "cross-site")]),
            &public()
        ));
        assert!(is_cross_site(
            &headers(&[("sec-fetch-site", "same-site")]),
            &public()
        ));
    }

    #[test]
    fn origin_must_be_the_public_one_or_the_host_used() {
        assert!(!is_cross_site(
            &headers(&[("origin", "https://desk.example.org")]),
            &public()
        ));
        assert!(!is_cross_site(
            &headers(&[
                ("origin", "http://localhost:3000"),
                ("host", "localhost:3000")
            ]),
            &public()
        ));
        assert!(is_cross_site(
            &headers(&[
                ("origin", "https://evil.example"),
                ("host", "desk.example.org")
            ]),
            &public()
        ));
        assert!(is_cross_site(
            &headers(&[("origin", "null"), ("host", "desk.example.org")]),
            &public()
        ));
    }

    #[test]
    fn programs_without_browser_headers_pass() {
        assert!(!is_cross_site(
            &headers(&[("host", "desk.example.org")]),
            &public()
        ));
    }
}
