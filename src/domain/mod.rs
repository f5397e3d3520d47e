//! The domain: what StandMeet does, in terms of its own types, independent of Leptos
//! pages and MCP tools. Pages and tools call these operations; job handlers call them
//! too. Only this layer (and `jobs`) talks to the database.

pub mod access_requests;
pub mod admins;
pub mod corpus;
pub mod listings;
pub mod mail;
pub mod owner;
pub mod types;
