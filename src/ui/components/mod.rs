//! Pieces every page uses.

pub mod toast;
