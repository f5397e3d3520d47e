//! The HTTP surface behind the pages: Leptos server functions (compiled for both sides:
//! the server runs them, the browser gets a stub that calls them) and fixed endpoints
//! (server only).

pub mod access;
pub mod account;
pub mod auth;
pub mod corpus;
#[cfg(feature = "ssr")]
pub mod health;
pub mod listings;
#[cfg(feature = "ssr")]
pub mod metrics;
#[cfg(feature = "ssr")]
pub mod replies;
pub mod status;
pub mod tasks;
