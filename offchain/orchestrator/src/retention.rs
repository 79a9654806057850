//! Bucket retention (`iota-orchestrator run --prune-finalized`): once the epoch after it is finalized
//! on chain (its scoring window closed, so no validator judges it any more, and every stage merged it;
//! one epoch of margin for a validator judging from a slightly older block, which sends nothing for an
//! epoch finalized meanwhile), the objects only an epoch's checks needed are deleted: the miners' activations and activation gradients,
//! gradient submissions, reduced shards and revealed inner states of that epoch. Kept: stage
//! checkpoints (what a joining replica loads and `export` reads), pathway logs, evidence, reports,
//! the spec, the data and the initial weights.
//!
//! Why: a local-mode replica reveals full inner states (weights and AdamW moments, 57 MB a state for a
//! stage of `small`) when challenged; the default devnet wrote 19 GB of them in 6 epochs and filled
//! this machine's disk. With pruning the bucket holds the unfinalized epochs' objects only.

use std::time::Duration;

use iota_chain::IotaClient;
use iota_storage::keys::{self, Id, ObjectKey};
use iota_storage::{ObjectStore, StorageError};

/// Whether `key` is an object of an epoch below `below` that retention deletes (module docs).
pub fn prunable(key: &ObjectKey, below: u64) -> bool {
	match key {
		ObjectKey::Activation { epoch, .. }
		| ObjectKey::GradientSubmission { epoch, .. }
		| ObjectKey::ReducedShard { epoch, .. }
		| ObjectKey::InnerState { epoch, .. } => *epoch < below,
		ObjectKey::StageCheckpoint { .. }
		| ObjectKey::PathwayLog { .. }
		| ObjectKey::RunSpec { .. }
		| ObjectKey::InitCheckpoint { .. }
		| ObjectKey::Tokenizer { .. }
		| ObjectKey::DataShard { .. }
		| ObjectKey::HeldOut { .. }
		| ObjectKey::Evidence { .. }
		| ObjectKey::RunReport { .. } => false,
	}
}

/// What one pass deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
	/// Objects deleted.
	pub objects: u64,
	/// Their bytes.
	pub bytes: u64,
}

/// Deletes every [`prunable`] object of `run` below epoch `below` (the miners' prefix is listed once;
/// keys outside the layout are left alone).
///
/// # Errors
/// The listing's or a deletion's error (what was deleted before it stays deleted).
pub async fn prune(store: &ObjectStore, run: &Id, below: u64) -> Result<Pruned, StorageError> {
	let mut done = Pruned::default();
	for o in store.list(&format!("{}miners/", keys::run_scope(run))).await? {
		if keys::parse(&o.key).is_ok_and(|k| prunable(&k, below)) {
			store.delete(&o.key).await?;
			done.objects += 1;
			done.bytes += o.size;
		}
	}
	Ok(done)
}

/// Prunes every epoch below the last finalized one (the chain's next epoch to finalize minus one),
/// each time it moves (polled every `poll`); errors are logged and retried. Runs until its task is
/// dropped.
pub async fn prune_finalized(store: ObjectStore, run: Id, chain_url: String, poll: Duration) {
	let mut chain: Option<IotaClient> = None;
	let mut pruned_below = 0u32;
	loop {
		tokio::time::sleep(poll).await;
		let Some(c) = crate::eval::connected(&mut chain, &chain_url, "retention").await else {
			continue;
		};
		let below = match c.next_epoch_to_finalize().await {
			Ok(e) => e,
			Err(e) => {
				tracing::warn!(error = %e, "retention: reading the next epoch to finalize");
				chain = None;
				continue;
			},
		};
		// One finalized epoch of margin: a validator judging from a slightly older block may still
		// be reading the last one (it sends nothing for an epoch finalized meanwhile).
		let below = below.saturating_sub(1);
		if below <= pruned_below {
			continue;
		}
		match prune(&store, &run, u64::from(below)).await {
			Ok(p) => {
				tracing::info!(
					below,
					objects = p.objects,
					bytes = p.bytes,
					"finalized epochs' objects pruned"
				);
				pruned_below = below;
			},
			Err(e) => tracing::warn!(below, error = %e, "retention: pruning failed; retrying"),
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use bytes::Bytes;
	use iota_storage::keys::Direction;
	use iota_storage::{EmbeddedConfig, EmbeddedS3};

	#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
	async fn only_the_checks_objects_of_finalized_epochs_go() {
		let dir = tempfile::tempdir().unwrap();
		let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await.unwrap();
		let store = ObjectStore::connect(server.store_config()).await.unwrap();
		store.ensure_bucket().await.unwrap();
		let (run, m) = (Id::new("r").unwrap(), Id::new("m").unwrap());
		let mut gone = Vec::new();
		let mut kept = vec![
			keys::pathway_log(&run, 0),
			keys::run_spec(&run),
			keys::init_checkpoint(&run, 0),
			keys::evidence(&run, &Id::new("v").unwrap(), 0, &m),
			// Another run's objects of the same epochs.
			keys::inner_state(&Id::new("other").unwrap(), 0, 0, 1, &m),
		];
		for epoch in 0..3u64 {
			let of_epoch = [
				keys::activation(&run, epoch, 1, 7, Direction::Forward, &m),
				keys::activation(&run, epoch, 1, 7, Direction::Backward, &m),
				keys::gradient_submission(&run, epoch, 1, &m),
				keys::reduced_shard(&run, epoch, 1, 0, &m),
				keys::inner_state(&run, epoch, 1, 2, &m),
			];
			if epoch < 2 {
				gone.extend(of_epoch)
			} else {
				kept.extend(of_epoch)
			}
			kept.push(keys::stage_checkpoint(&run, epoch, 1, &m));
		}
		for k in gone.iter().chain(&kept) {
			store.put(k, Bytes::from_static(b"0123456789")).await.unwrap();
		}
		let p = prune(&store, &run, 2).await.unwrap();
		assert_eq!(p, Pruned { objects: gone.len() as u64, bytes: 10 * gone.len() as u64 });
		for k in &gone {
			assert!(store.head(k).await.is_err(), "{k} kept");
		}
		for k in &kept {
			assert!(store.head(k).await.is_ok(), "{k} deleted");
		}
		// Again: nothing more to delete.
		assert_eq!(prune(&store, &run, 2).await.unwrap(), Pruned::default());
		server.shutdown().await;
	}
}
