//! The protections every request passes through, so that a page or server function
//! added later is safe without remembering to be:
//!
//! - `body_limit`: one limit on request bodies (`STANDMEET_MAX_BODY_BYTES`), over it a
//!   413 in words that reaches a client still writing its body.
//! - `guard`: `/admin/*` pages need a signed-in admin (else a redirect to `/login`), and
//!   every server function needs one too unless it is listed as public (else 401).
//! - `csrf`: a state-changing request that says it came from another site is refused.
//! - `headers`: a Content-Security-Policy (with the page's nonce for the hydration
//!   script), `nosniff`, a referrer policy and no framing, on every response.
//! - `bearer`: bearer tokens (`/mcp`, `/metrics`), compared in constant time.
//! - `client`: the client's address (the socket's peer, or what trusted proxies say).
//! - `sessions`: which sessions are still alive (live streams end with theirs).
//! - `rate_limit`: limits on guessing (sign-in, access codes) and on writes (access
//!   requests, bookings), per client address and per email.

pub mod bearer;
pub mod body_limit;
pub mod client;
pub(crate) mod csrf;
pub mod guard;
pub(crate) mod headers;
pub(crate) mod rate_limit;
pub mod sessions;
