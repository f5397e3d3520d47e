//! One module per page.

pub mod coming_soon;
pub mod home;
pub mod not_found;
