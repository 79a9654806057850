//! Tests of pallet-iota, one file per concern. Every test runs in [`ExtBuilder::build_and_execute`],
//! which checks the pallet's invariants (`do_try_state`) at the end.

use crate::mock::*;

mod config;
mod epochs;
mod merge;
mod phases;
mod registry;
mod spot_checks;
mod weights;

/// Advance to block `n`.
pub fn run_to(n: u64) {
	System::set_block_number(n);
}
