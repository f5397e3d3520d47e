//! Pieces every page uses.

pub mod confirm;
pub mod focus;
pub mod form;
pub mod live;
pub mod loaded;
pub mod params;
pub mod poll;
pub mod shortcuts;
pub mod status_chip;
pub mod table;
pub mod tags;
pub mod theme;
pub mod toast;
