//! # iota-validator
//!
//! (crate map being written)

pub mod clasp;
pub mod weights;
