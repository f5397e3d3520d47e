//! StandMeet's integration tests, in one binary (one link of the application instead of
//! one per file): each module is a user story or a surface, each test a sentence, and
//! each `#[sqlx::test(migrations = false)]` gets a database of its own, which its first
//! line migrates as a start does (`common::schema`: the job engine's schema, then ours). `common` has what they share: `TestApp`, the
//! request helpers, the SMTP peer, the job boards, the webhook receiver.
//!
//! `cargo nextest run --test it <filter>` runs some of them; the job engine's own tests
//! are in `crates/standmeet-jobs/tests`.

mod common;

mod access_requests;
mod architecture;
mod auth;
mod binary;
mod bookings;
mod corpus;
mod events;
mod faults;
mod http_surface;
mod listings;
mod live;
mod mail_transport;
mod mcp;
mod mcp_agents;
mod mcp_sessions;
mod migrations;
mod overview;
mod owner_email;
mod private_cluster;
mod queues;
mod reference;
mod schedules;
mod tasks;
mod traces;
mod vault;
mod waiters;
mod webhooks;
