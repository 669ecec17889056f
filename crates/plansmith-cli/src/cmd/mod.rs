pub mod catalog;
pub mod data;
pub mod eval;
pub mod grammar;
pub mod plan;
pub mod render;
pub mod train;
pub mod validate;
