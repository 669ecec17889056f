pub mod catalog;
pub mod validate;
