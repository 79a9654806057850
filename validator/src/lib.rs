//! # iota-validator
//!
//! (crate map being written)

pub mod clasp;
pub mod objects;
pub mod recompute;
pub mod shard_audit;
pub mod spot_check;
pub mod tolerance;
pub mod weights;
