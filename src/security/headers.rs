//! Security headers on every response.
//!
//! Pages get a Content-Security-Policy that admits only our own files plus the one
//! inline script Leptos writes to start hydration, which carries a nonce made fresh for
//! each page (leptos_axum makes it; we put it in the header). Everything else (JSON,
//! static files) gets a policy that allows nothing at all.
//!
//! Nothing but the static files may be kept by a browser or a proxy
//! (`Cache-Control: no-store`): pages show who is signed in, and answers carry secrets
//! (a webhook's signing secret, codes, links). The files under `/pkg/` may be kept:
//! for a year under their hashed names (`crate::assets` says so), otherwise checked
//! again before each use (`no-cache`). Over https, browsers are told to come
//! back over https only (`Strict-Transport-Security`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY,
    STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::middleware::Next;
use axum::response::Response;
use leptos::nonce::use_nonce;
use leptos::prelude::use_context;
use leptos_axum::ResponseOptions;

use crate::config::Settings;

/// The policy of a rendered page whose inline script carries `nonce`.
/// `'wasm-unsafe-eval'` lets the browser compile our wasm; it allows no `eval` of text.
pub fn page_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
         object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// The policy of every response that is not a page.
pub const NOTHING_POLICY: &str =
    "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Runs inside Leptos' rendering of a page (as "additional context"): puts the page's
/// policy, with this page's nonce, on the response.
pub fn set_page_policy() {
    let (Some(nonce), Some(response)) = (use_nonce(), use_context::<ResponseOptions>()) else {
        return;
    };
    if let Ok(value) = HeaderValue::from_str(&page_policy(&nonce)) {
        response.insert_header(CONTENT_SECURITY_POLICY, value);
    }
}

/// Two years: the usual HSTS lifetime (no `includeSubDomains`: the owner's other hosts
/// are not ours to speak for).
const HSTS: &str = "max-age=63072000";

/// Whether a response is one of the static files (the wasm, the JS, the CSS, images),
/// which may be cached; everything else is made for one request.
fn is_static_file(path: &str, response: &Response) -> bool {
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    path.starts_with("/pkg/") || content_type.starts_with("image/")
}

/// Adds the headers every response carries; keeps a page's own policy.
pub async fn add_security_headers(
    State(settings): State<Arc<Settings>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    let mut response = next.run(request).await;
    let cacheable = is_static_file(&path, &response);
    let headers = response.headers_mut();
    if !cacheable {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    } else if path.starts_with("/pkg/") && !headers.contains_key(CACHE_CONTROL) {
        // A name without a hash stays from one release to the next: a browser may keep
        // the file but must ask (a cheap 304) before using it, or it would run an old
        // wasm against a new page after a deploy.
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    if settings.is_https() {
        headers.insert(STRICT_TRANSPORT_SECURITY, HeaderValue::from_static(HSTS));
    }
    if !headers.contains_key(CONTENT_SECURITY_POLICY) {
        headers.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(NOTHING_POLICY),
        );
    }
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // Our URLs can hold tokens (email confirmation links): never tell other sites.
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    // For browsers older than frame-ancestors.
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
