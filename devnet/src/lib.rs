//! # iota-devnet
//!
//! The one-command local training network (`./scripts/devnet.sh`, binary `iota-devnet`): a dev node, the
//! orchestrator with the embedded S3 server, `stages × miners` miners and the validators, each a real
//! process on 127.0.0.1 with a dev account, training a model on the fetched corpus for a number of epochs;
//! then a report read back from chain.
//!
//! | concept | file | what it holds |
//! |---|---|---|
//! | processes | [`process`] | a supervised child with its own log; SIGTERM then SIGKILL; stopped on drop |
//! | network | [`network`] | start order, dev accounts, readiness, liveness, stop; also used by the end-to-end tests |
//! | report | [`report`] | `report.md`, `loss.csv`, `loss.png`, manifests/verdicts/emissions from chain |
//! | model cut | [`recut`] | re-cutting a preset's blocks into a given number of stages |

pub mod network;
pub mod process;
pub mod report;

pub use network::{
	assign_accounts, ChainTarget, Network, NetworkError, NetworkOptions, StoreTarget, DEV_ACCOUNTS,
	GENESIS_VALIDATORS,
};
pub use process::{free_port, ProcessError, Supervised};

use iota_model::ModelConfig;

/// Re-cuts `model`'s blocks into `stages` contiguous stages, as even as possible (earlier stages get the
/// extra block, since the tail also holds the LM head). `None` when `stages` is 0 or exceeds the blocks.
pub fn recut(mut model: ModelConfig, stages: usize) -> Option<ModelConfig> {
	let n = model.n_layers;
	if stages == 0 || stages > n {
		return None;
	}
	let (base, extra) = (n / stages, n % stages);
	let mut start = 0;
	model.stages = (0..stages)
		.map(|s| {
			let len = base + usize::from(s < extra);
			let r = [start, start + len];
			start += len;
			r
		})
		.collect();
	Some(model)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn recut_covers_every_block_once() {
		let m = recut(ModelConfig::small(), 3).unwrap();
		assert_eq!(m.stages, vec![[0, 3], [3, 6], [6, 8]]);
		m.validate().unwrap();
		assert_eq!(recut(ModelConfig::small(), 8).unwrap().stages.len(), 8);
		assert!(recut(ModelConfig::small(), 9).is_none());
		assert!(recut(ModelConfig::small(), 0).is_none());
	}
}
