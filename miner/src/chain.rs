//! What the miner reads from and writes to the chain (`iota-chain`): registration, its stage, the
//! run's `model_hash`, the stage's epoch and the committed merge manifests. [`ChainView`] is the read
//! side the loop needs to resynchronise (a fake in tests); [`register`] is the start-up step.

use async_trait::async_trait;
use iota_chain::{IotaClient, Signer};
use iota_primitives::ContentHash;

use crate::error::{MinerError, Result};

/// The checkpoint part of a committed merge manifest of one stage.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
	/// The epoch that was merged (the manifest's key); the stage is at `epoch + 1` after it.
	pub epoch: u32,
	/// The stage state hash every replica attested.
	pub state_hash: ContentHash,
	/// The stage checkpoint uploaded in that merge, if any: `(key, BLAKE3)`.
	pub checkpoint: Option<(String, ContentHash)>,
}

/// Chain reads the miner's loop needs.
#[async_trait]
pub trait ChainView: Send + Sync {
	/// The stage's epoch (merges committed so far).
	async fn stage_epoch(&self, stage: u16) -> Result<u32>;
	/// The committed manifest of (`epoch`, `stage`), if any.
	async fn committed(&self, epoch: u32, stage: u16) -> Result<Option<Committed>>;
}

fn chain_err(e: iota_chain::Error) -> MinerError {
	MinerError::Chain(e.to_string())
}

/// Both reads are at the **best** block, as the orchestrator's are: a stage moves on every few seconds,
/// faster than finality (a few blocks), so a miner that resynchronised from finalized state would load
/// weights an epoch or two behind and chase the stage. Nothing is trusted for it: the checkpoint is loaded
/// only if it hashes to the manifest's attested state, and a manifest a reorg replaced shows up as a
/// state-hash mismatch at the next merge, which resynchronises again.
#[async_trait]
impl ChainView for IotaClient {
	async fn stage_epoch(&self, stage: u16) -> Result<u32> {
		let best = self.at_block(self.best_hash().await.map_err(chain_err)?);
		Ok(best.stage(stage).await.map_err(chain_err)?.epoch)
	}

	async fn committed(&self, epoch: u32, stage: u16) -> Result<Option<Committed>> {
		let best = self.at_block(self.best_hash().await.map_err(chain_err)?);
		let Some(m) = best.merge_manifest(epoch, stage).await.map_err(chain_err)? else {
			return Ok(None);
		};
		let checkpoint = match m.checkpoint {
			Some(o) => Some((
				String::from_utf8(o.key.0)
					.map_err(|_| MinerError::Chain("checkpoint key is not UTF-8".into()))?,
				o.content_hash,
			)),
			None => None,
		};
		Ok(Some(Committed { epoch, state_hash: m.state_hash, checkpoint }))
	}
}

/// The stage `signer` holds, registering it with `register_miner` (holding the run's bond) if it is not
/// registered yet.
///
/// # Errors
/// [`MinerError::Chain`] when the chain cannot be read or the registration fails (e.g. an
/// insufficient balance for the bond: the pallet's error name is in the message).
pub async fn register(chain: &IotaClient, signer: &Signer) -> Result<u16> {
	let me = signer.account_id();
	if let Some(info) = chain.miner(&me).await.map_err(chain_err)? {
		tracing::info!(account = %me, stage = info.stage, "already registered");
		return Ok(info.stage);
	}
	tracing::info!(account = %me, "registering as a miner");
	chain.register_miner(signer).await.map_err(chain_err)?;
	let info = chain.miner(&me).await.map_err(chain_err)?.ok_or_else(|| {
		MinerError::Chain("register_miner was included but no miner record exists".into())
	})?;
	tracing::info!(account = %me, stage = info.stage, "registered");
	Ok(info.stage)
}

/// The chain's `model_hash` of the run (the BLAKE3 of the run spec).
///
/// # Errors
/// [`MinerError::Chain`] when unreadable or no run is configured.
pub async fn model_hash(chain: &IotaClient) -> Result<ContentHash> {
	let cfg = chain
		.run_config()
		.await
		.map_err(chain_err)?
		.ok_or_else(|| MinerError::Chain("no run config on chain".into()))?;
	Ok(cfg.model_hash)
}
