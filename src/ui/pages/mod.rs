//! One module per page.

pub mod access;
pub mod access_requests;
pub mod account;
pub mod confirm_email;
pub mod corpus;
pub mod home;
pub mod listings;
pub mod login;
pub mod mail_log;
pub mod not_found;
pub mod request_access;
pub mod search;
pub mod task_detail;
pub mod tasks;
