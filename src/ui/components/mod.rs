//! Pieces every page uses.

pub mod form;
pub mod toast;
