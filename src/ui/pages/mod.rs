//! One module per page.

pub(crate) mod access;
pub(crate) mod access_requests;
pub(crate) mod account;
pub(crate) mod book;
pub(crate) mod bookings;
pub(crate) mod confirm_email;
pub(crate) mod corpus;
pub(crate) mod entry;
pub(crate) mod events;
pub(crate) mod home;
pub(crate) mod listings;
pub(crate) mod login;
pub(crate) mod mail_log;
pub(crate) mod not_found;
pub(crate) mod overview;
pub(crate) mod queues;
pub(crate) mod request_access;
pub(crate) mod schedules;
pub(crate) mod search;
pub(crate) mod task_detail;
pub(crate) mod tasks;
pub(crate) mod webhooks;
