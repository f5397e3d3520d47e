//! Tables that stay readable on a phone. From tablet width a table is a table; below
//! it each row is a card of its cells, one per line, each led by its column's name
//! (the cell's `data-label`), so nothing scrolls sideways inside the card. The rows
//! keep their elements and test ids either way.

/// The card around the table: it scrolls sideways only from tablet width, where a
/// table is wider than the column at most by a little.
pub const TABLE_CARD: &str = "mt-4 rounded-xl border border-slate-200 bg-white md:overflow-x-auto";
pub const TABLE: &str =
    "block w-full text-sm md:table md:min-w-full md:divide-y md:divide-slate-200";
/// The column names: the cells carry them on a phone, so the head shows from tablet
/// width only.
pub const HEAD: &str = "hidden bg-slate-50 text-left text-xs font-medium uppercase tracking-wide text-slate-500 md:table-header-group";
pub const HEAD_CELL: &str = "px-4 py-2";
pub const BODY: &str = "block divide-y divide-slate-100 md:table-row-group";
/// A row: a card on a phone, a table row from tablet width.
pub const ROW: &str = "block px-4 py-3 md:table-row md:p-0";
/// A cell, led by its `data-label` on a phone.
pub const CELL: &str = "flex min-w-0 items-baseline gap-3 py-1 md:table-cell md:px-4 md:py-3 before:w-24 before:shrink-0 before:text-xs before:font-medium before:uppercase before:tracking-wide before:text-slate-500 before:content-[attr(data-label)] md:before:content-none";
/// A cell of buttons (no column name): on a phone they end the card.
pub const ACTION_CELL: &str = "flex flex-wrap gap-2 pt-2 md:table-cell md:px-4 md:py-3";
