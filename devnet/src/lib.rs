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
//! | test hosts | [`hosts`] | miners and validators in network namespaces of their own, with rate-limited links |
//! | baseline | [`baseline`] | the run's model trained in one process on the network's samples (report, `bench-pipeline`) |
//! | report | [`report`] | `report.md`, `loss.csv`, `loss.png`, manifests/verdicts/emissions from chain |
//! | model cut | [`recut`] | re-cutting a preset's blocks into a given number of stages, balanced by compute |

pub mod baseline;
pub mod hosts;
pub mod network;
pub mod process;
pub mod report;

pub use hosts::{Host, Hosts, HostsError, LinkBytes};
pub use network::{
	assign_accounts, ChainTarget, CpuReading, HostLinks, Network, NetworkError, NetworkOptions,
	ProcessCpu, StoreTarget, DEV_ACCOUNTS, GENESIS_VALIDATORS,
};
pub use process::{free_port, ProcessError, Supervised};

use iota_model::ModelConfig;

/// Re-cuts `model`'s blocks into `stages` contiguous stages balanced by compute at `seq_len` tokens
/// per row ([`ModelConfig::balanced_stages`]: the largest stage's forward + backward MACs, LM head
/// included, is as small as any cut allows). `None` when `stages` is 0 or exceeds the blocks.
pub fn recut(mut model: ModelConfig, stages: usize, seq_len: usize) -> Option<ModelConfig> {
	model.stages = model.balanced_stages(stages, seq_len).ok()?;
	Some(model)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn recut_covers_every_block_once() {
		// The devnet's default cut (small, 3 stages, T = 64): the head makes the tail's 2 blocks
		// about as dear as 3 blocks elsewhere.
		let m = recut(ModelConfig::small(), 3, 64).unwrap();
		assert_eq!(m.stages, vec![[0, 3], [3, 6], [6, 8]]);
		m.validate().unwrap();
		assert_eq!(recut(ModelConfig::small(), 8, 64).unwrap().stages.len(), 8);
		assert!(recut(ModelConfig::small(), 9, 64).is_none());
		assert!(recut(ModelConfig::small(), 0, 64).is_none());
	}
}
