//! One operation per action, whatever door it comes through.
//!
//! An action StandMeet offers (approve a request, list jobs, retry one) has up to three
//! doors: a page's server function (`api`), an MCP tool (`mcp`), and the lab's fault
//! suite, which knocks on both over HTTP. Each action is one function here: it takes
//! the app's state, who is acting ([`Operator`], or a visitor), and typed input, and
//! answers a typed view that serializes to the contract's JSON shape (product.md), or
//! an [`AppError`](crate::error::AppError) that says in words what was wrong. The doors
//! are adapters: a `#[server]` function finds out who is signed in and maps the error
//! to its status; a tool serializes the view as its structured answer.
//!
//! The views are shared with the browser (the pages render them); the operations are
//! compiled for the server only. What the filters of a list accept, how a page of rows
//! ends ([`paging`]) and how a moment reads ([`when`]) are written once, here, so the
//! page and the tool cannot drift apart.
//!
//! The operations by feature: [`access`] (access requests and the mail log), [`tasks`]
//! (the Tasks panel's jobs).

pub mod access;
#[cfg(feature = "ssr")]
pub mod paging;
pub mod tasks;

/// Who asks for an operation that only the owner's side may do.
#[cfg(feature = "ssr")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// An admin signed in to the console (their id, which some records keep).
    Admin(i64),
    /// An agent holding the MCP token: it acts for the owner, as nobody in particular.
    Agent,
}

#[cfg(feature = "ssr")]
impl Operator {
    /// The admin's id, for the records that say who did it (`None` for an agent).
    pub fn admin_id(self) -> Option<i64> {
        match self {
            Operator::Admin(id) => Some(id),
            Operator::Agent => None,
        }
    }
}

#[cfg(feature = "ssr")]
/// A moment as every page and tool shows it: "2026-11-29 14:03:12 UTC".
pub fn when(at: time::OffsetDateTime) -> String {
    const FORMAT: &[time::format_description::FormatItem<'static>] =
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    at.to_offset(time::UtcOffset::UTC)
        .format(FORMAT)
        .unwrap_or_else(|_| at.to_string())
}
