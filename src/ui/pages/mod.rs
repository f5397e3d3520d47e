//! One module per page.

pub mod coming_soon;
pub mod home;
pub mod login;
pub mod not_found;
pub mod task_detail;
pub mod tasks;
