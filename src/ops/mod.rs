//! One operation per action, whatever door it comes through.
//!
//! An action StandMeet offers (approve a request, list jobs, retry one) has up to three
//! doors: a page's server function (`api`), an MCP tool (`mcp`), and the lab's fault
//! suite, which knocks on both over HTTP. Each action is one function here: it takes
//! the app's state, who is acting ([`Operator`], or a visitor), and typed input, and
//! answers a typed view that serializes to the contract's JSON shape (docs/reference/answers.md), or
//! an [`AppError`](crate::error::AppError) that says in words what was wrong. The doors
//! are adapters: a `#[server]` function finds out who is signed in and maps the error
//! to its status; a tool serializes the view as its structured answer.
//!
//! The views are shared with the browser (the pages render them); the operations are
//! compiled for the server only. What the filters of a list accept, how a page of rows
//! ends ([`paging`]) and how a moment reads ([`when`]) are written once, here, so the
//! page and the tool cannot drift apart.
//!
//! The operations by feature: [`access`] (access requests and the mail log), [`account`]
//! (the owner's address), [`bookings`], [`corpus`] and its [`vault`], [`events`],
//! [`front_page`], [`listings`], [`overview`] (`/admin`), [`queues`], [`schedules`],
//! [`tasks`] (the Tasks panel's jobs) and [`webhooks`].

pub mod access;
pub mod account;
pub mod bookings;
pub mod corpus;
pub mod events;
pub mod front_page;
pub mod listings;
pub mod overview;
#[cfg(feature = "ssr")]
pub mod paging;
pub mod queues;
pub mod schedules;
pub mod tasks;
pub mod vault;
pub mod webhooks;

/// How an operation waits for its jobs, and how a door watches its waits
/// (`mcp::progress`).
#[cfg(feature = "ssr")]
pub use crate::domain::waiting;

/// Who asks for an operation that only the owner's side may do.
#[cfg(feature = "ssr")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// An admin signed in to the console (their id, which some records keep).
    Admin(i64),
    /// An agent holding the MCP token: it acts for the owner, as nobody in particular.
    Agent,
}

/// A visitor of the public pages, as an operation needs to know them.
#[cfg(feature = "ssr")]
#[derive(Clone, Debug, Default)]
pub struct Visitor {
    /// Their address, when the server knows it: the limits on requests count by it.
    pub address: Option<std::net::IpAddr>,
    /// The email whose access code their session redeemed (`/access`): restricted
    /// entries are theirs to see, and they may book where booking asks for it.
    pub granted: Option<String>,
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

/// What an action did: its result as an agent reads it, and a sentence for the page's
/// toast. It serializes as `view` alone, so a tool answers the contract's shape and the
/// page says what happened in words, from one operation.
#[cfg(feature = "ssr")]
#[derive(Clone, Debug)]
pub struct Done<T> {
    pub view: T,
    pub message: String,
}

/// `Done<T>` is written as its `view`, so its schema is the view's.
#[cfg(feature = "ssr")]
impl<T: schemars::JsonSchema> schemars::JsonSchema for Done<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

#[cfg(feature = "ssr")]
impl<T: serde::Serialize> serde::Serialize for Done<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.view.serialize(serializer)
    }
}
