//! [`IotaClient`]: typed calls, storage queries and finalized events of pallet-iota.

use crate::{
	runtime::{self, runtime_types::sp_runtime::DispatchError as RuntimeDispatchError},
	AccountId, Balance, BlockHash, BlockNumber, BoundedVec, ChainConfig, ContentHash,
	EmissionSplit, Epoch, Error, IotaEvent, MergeManifest, MinerInfo, RunConfig, Signer, SpotCheck,
	StageId, StageReport, StageState, ValidatorInfo, Verdict,
};
use futures_util::{Stream, StreamExt};
use subxt::{
	backend::{legacy::LegacyRpcMethods, rpc::RpcClient},
	storage::Address,
	utils::Yes,
	OnlineClient,
};

/// A pallet-iota extrinsic that made it into a finalized block without a dispatch error.
#[derive(Debug, Clone)]
pub struct Included {
	/// The finalized block that holds the extrinsic.
	pub block_hash: BlockHash,
	/// The extrinsic's hash.
	pub extrinsic_hash: BlockHash,
	/// The pallet-iota events the extrinsic emitted, in order.
	pub events: Vec<IotaEvent>,
}

/// The pallet-iota events of one finalized block.
#[derive(Debug, Clone)]
pub struct FinalizedEvents {
	/// Block number.
	pub number: BlockNumber,
	/// Block hash.
	pub hash: BlockHash,
	/// pallet-iota's events in this block, in order.
	pub events: Vec<IotaEvent>,
}

/// A connection to an iota-rs node over JSON-RPC (WebSocket).
///
/// Calls sign, submit and wait until the extrinsic is in a finalized block; storage queries read the
/// latest finalized state, so what a call wrote is visible to the next query.
#[derive(Clone)]
pub struct IotaClient {
	api: OnlineClient<ChainConfig>,
	rpc: RpcClient,
}

impl IotaClient {
	/// Connect to a node, e.g. `ws://127.0.0.1:9944`. Plain `ws://` is accepted (local nodes); errors
	/// with [`Error::Connect`] if nothing answers or the metadata cannot be fetched.
	pub async fn connect(url: &str) -> Result<Self, Error> {
		let connect_err =
			|e: subxt::Error| Error::Connect { url: url.to_string(), source: Box::new(e) };
		let rpc = RpcClient::from_insecure_url(url).await.map_err(|e| connect_err(e.into()))?;
		let api = OnlineClient::<ChainConfig>::from_rpc_client(rpc.clone())
			.await
			.map_err(connect_err)?;
		tracing::debug!(url, spec = api.runtime_version().spec_version, "connected");
		Ok(Self { api, rpc })
	}

	/// The underlying subxt client, for anything this API does not cover.
	pub fn api(&self) -> &OnlineClient<ChainConfig> {
		&self.api
	}

	// ---- extrinsics -------------------------------------------------------------------------------

	/// `register_miner`: hold the run config's bond and take the emptiest stage (see the
	/// `MinerRegistered` event in [`Included::events`], or [`IotaClient::miner`]).
	pub async fn register_miner(&self, signer: &Signer) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().register_miner(), signer).await
	}

	/// `register_validator`: hold `stake` (at least the run config's minimum) and become a validator.
	pub async fn register_validator(
		&self,
		signer: &Signer,
		stake: Balance,
	) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().register_validator(stake), signer).await
	}

	/// `deregister`: leave the miner or validator role (funds unbond after the unbonding period).
	pub async fn deregister(&self, signer: &Signer) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().deregister(), signer).await
	}

	/// `withdraw_unbonded`: release a bond or stake whose unbonding period has passed.
	pub async fn withdraw_unbonded(&self, signer: &Signer) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().withdraw_unbonded(), signer).await
	}

	/// `advance_phase` (orchestrator only): move `stage` on from its phase in `epoch`, with a progress report.
	pub async fn advance_phase(
		&self,
		signer: &Signer,
		stage: StageId,
		epoch: Epoch,
		report: StageReport,
	) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().advance_phase(stage, epoch, report), signer)
			.await
	}

	/// `commit_merge` (orchestrator only): record the merge manifest of `stage` for `epoch`.
	pub async fn commit_merge(
		&self,
		signer: &Signer,
		stage: StageId,
		epoch: Epoch,
		manifest: MergeManifest,
	) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().commit_merge(stage, epoch, manifest), signer)
			.await
	}

	/// `submit_spot_check` (validators): a verdict on `miner`'s work in `epoch`, with an evidence hash.
	pub async fn submit_spot_check(
		&self,
		signer: &Signer,
		epoch: Epoch,
		miner: AccountId,
		verdict: Verdict,
		evidence: ContentHash,
	) -> Result<Included, Error> {
		self.submit(
			&runtime::tx().iota().submit_spot_check(epoch, miner, verdict, evidence),
			signer,
		)
		.await
	}

	/// `set_weights` (validators): relative scores of miners for a complete `epoch`.
	pub async fn set_weights(
		&self,
		signer: &Signer,
		epoch: Epoch,
		weights: Vec<(AccountId, u16)>,
		version_key: u64,
	) -> Result<Included, Error> {
		self.submit(
			&runtime::tx().iota().set_weights(epoch, BoundedVec(weights), version_key),
			signer,
		)
		.await
	}

	/// `finalize_epoch` (anyone): pay out `epoch` once its scoring window has closed.
	pub async fn finalize_epoch(&self, signer: &Signer, epoch: Epoch) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().finalize_epoch(epoch), signer).await
	}

	/// `set_run_config` (root), sent through `sudo` by the sudo key.
	pub async fn set_run_config(
		&self,
		sudo: &Signer,
		config: RunConfig,
	) -> Result<Included, Error> {
		let call = runtime::Call::Iota(runtime::iota::Call::set_run_config { config });
		self.submit(&runtime::tx().sudo().sudo(call), sudo).await
	}

	/// `set_orchestrator` (root), sent through `sudo` by the sudo key.
	pub async fn set_orchestrator(&self, sudo: &Signer, who: AccountId) -> Result<Included, Error> {
		let call = runtime::Call::Iota(runtime::iota::Call::set_orchestrator { who });
		self.submit(&runtime::tx().sudo().sudo(call), sudo).await
	}

	/// Sign, submit, wait for finalization; a failed dispatch (also one inside `sudo`) becomes an
	/// [`Error::Pallet`] or [`Error::Dispatch`].
	async fn submit<C: subxt::tx::Payload>(
		&self,
		call: &C,
		signer: &Signer,
	) -> Result<Included, Error> {
		let progress =
			self.api.tx().sign_and_submit_then_watch_default(call, signer.keypair()).await?;
		let extrinsic_hash = progress.extrinsic_hash();
		let in_block = progress.wait_for_finalized().await?;
		let block_hash = in_block.block_hash();
		let events = in_block.wait_for_success().await?;
		let mut iota = Vec::new();
		for ev in events.iter() {
			match ev?.as_root_event::<runtime::Event>()? {
				runtime::Event::Iota(e) => iota.push(e),
				runtime::Event::Sudo(runtime::sudo::Event::Sudid { sudo_result: Err(e) }) => {
					return Err(self.resolve(e));
				},
				_ => {},
			}
		}
		tracing::debug!(?block_hash, ?extrinsic_hash, events = iota.len(), "included");
		Ok(Included { block_hash, extrinsic_hash, events: iota })
	}

	/// Resolve a dispatch error carried in an event (sudo's inner result) to names via the metadata.
	fn resolve(&self, e: RuntimeDispatchError) -> Error {
		use subxt::ext::scale_encode::EncodeAsType;
		let metadata = self.api.metadata();
		let Some(ty) = metadata.dispatch_error_ty() else {
			return Error::Dispatch(format!("{e:?}"));
		};
		let bytes = match e.encode_as_type(ty, metadata.types()) {
			Ok(b) => b,
			Err(_) => return Error::Dispatch(format!("{e:?}")),
		};
		match subxt::error::DispatchError::decode_from(bytes, metadata) {
			Ok(d) => Error::from_dispatch(d),
			Err(other) => other.into(),
		}
	}

	// ---- storage (latest finalized block) ---------------------------------------------------------

	async fn fetch<A>(&self, address: &A) -> Result<Option<A::Target>, Error>
	where
		A: Address<IsFetchable = Yes>,
	{
		Ok(self.api.storage().at_latest().await?.fetch(address).await?)
	}

	async fn fetch_or_default<A>(&self, address: &A) -> Result<A::Target, Error>
	where
		A: Address<IsFetchable = Yes, IsDefaultable = Yes>,
	{
		Ok(self.api.storage().at_latest().await?.fetch_or_default(address).await?)
	}

	/// Every entry of a map keyed last by an account (`Blake2_128Concat`), with the account decoded.
	async fn iter_by_account<A>(&self, address: A) -> Result<Vec<(AccountId, A::Target)>, Error>
	where
		A: Address<IsIterable = Yes> + 'static,
		A::Keys: 'static + Sized,
	{
		let mut out = Vec::new();
		let mut entries = self.api.storage().at_latest().await?.iter(address).await?;
		while let Some(kv) = entries.next().await {
			let kv = kv?;
			let key = &kv.key_bytes;
			let mut account = [0u8; 32];
			account.copy_from_slice(&key[key.len().saturating_sub(32)..]);
			out.push((AccountId::from(account), kv.value));
		}
		Ok(out)
	}

	/// The run config, if one is set.
	pub async fn run_config(&self) -> Result<Option<RunConfig>, Error> {
		self.fetch(&runtime::storage().iota().run_configuration()).await
	}

	/// The orchestrator account, if one is set.
	pub async fn orchestrator(&self) -> Result<Option<AccountId>, Error> {
		self.fetch(&runtime::storage().iota().orchestrator()).await
	}

	/// The record of miner `who`, if registered.
	pub async fn miner(
		&self,
		who: &AccountId,
	) -> Result<Option<MinerInfo<Balance, BlockNumber>>, Error> {
		self.fetch(&runtime::storage().iota().miners(who.clone())).await
	}

	/// Every miner record.
	pub async fn miners(&self) -> Result<Vec<(AccountId, MinerInfo<Balance, BlockNumber>)>, Error> {
		self.iter_by_account(runtime::storage().iota().miners_iter()).await
	}

	/// The accounts holding `stage`, in butterfly order.
	pub async fn stage_members(&self, stage: StageId) -> Result<Vec<AccountId>, Error> {
		Ok(self.fetch_or_default(&runtime::storage().iota().stage_members(stage)).await?.0)
	}

	/// Phase, epoch and phase start of `stage`.
	pub async fn stage(&self, stage: StageId) -> Result<StageState<BlockNumber>, Error> {
		self.fetch_or_default(&runtime::storage().iota().stages(stage)).await
	}

	/// The record of validator `who`, if registered.
	pub async fn validator(
		&self,
		who: &AccountId,
	) -> Result<Option<ValidatorInfo<Balance, BlockNumber>>, Error> {
		self.fetch(&runtime::storage().iota().validators(who.clone())).await
	}

	/// Every validator record.
	pub async fn validators(
		&self,
	) -> Result<Vec<(AccountId, ValidatorInfo<Balance, BlockNumber>)>, Error> {
		self.iter_by_account(runtime::storage().iota().validators_iter()).await
	}

	/// The 32-byte seed of `epoch`, once drawn.
	pub async fn epoch_seed(&self, epoch: Epoch) -> Result<Option<[u8; 32]>, Error> {
		self.fetch(&runtime::storage().iota().epoch_seeds(epoch)).await
	}

	/// The block at which `epoch` completed (every stage merged), if it has.
	pub async fn epoch_completed_at(&self, epoch: Epoch) -> Result<Option<BlockNumber>, Error> {
		self.fetch(&runtime::storage().iota().epoch_completed_at(epoch)).await
	}

	/// The next epoch `finalize_epoch` will pay out.
	pub async fn next_epoch_to_finalize(&self) -> Result<Epoch, Error> {
		self.fetch_or_default(&runtime::storage().iota().next_epoch_to_finalize()).await
	}

	/// The merge manifest of (`epoch`, `stage`), once committed.
	pub async fn merge_manifest(
		&self,
		epoch: Epoch,
		stage: StageId,
	) -> Result<Option<MergeManifest>, Error> {
		self.fetch(&runtime::storage().iota().merge_manifests(epoch, stage)).await
	}

	/// Every verdict of `epoch`, per miner (miners nobody checked are absent).
	pub async fn spot_checks_of_epoch(
		&self,
		epoch: Epoch,
	) -> Result<Vec<(AccountId, Vec<SpotCheck<AccountId>>)>, Error> {
		let all = self.iter_by_account(runtime::storage().iota().spot_checks_iter1(epoch)).await?;
		Ok(all.into_iter().map(|(who, checks)| (who, checks.0)).collect())
	}

	/// The validators' verdicts on `miner` in `epoch`.
	pub async fn spot_checks(
		&self,
		epoch: Epoch,
		miner: &AccountId,
	) -> Result<Vec<SpotCheck<AccountId>>, Error> {
		Ok(self
			.fetch_or_default(&runtime::storage().iota().spot_checks(epoch, miner.clone()))
			.await?
			.0)
	}

	/// The weights `validator` set for `epoch`.
	pub async fn weights(
		&self,
		epoch: Epoch,
		validator: &AccountId,
	) -> Result<Option<Vec<(AccountId, u16)>>, Error> {
		Ok(self
			.fetch(&runtime::storage().iota().weights(epoch, validator.clone()))
			.await?
			.map(|w| w.0))
	}

	/// Consensus scores of a finalized `epoch`, in parts per billion.
	pub async fn scores(&self, epoch: Epoch) -> Result<Option<Vec<(AccountId, u32)>>, Error> {
		Ok(self.fetch(&runtime::storage().iota().scores(epoch)).await?.map(|s| s.0))
	}

	/// What a finalized `epoch` paid to whom.
	pub async fn emission_split(
		&self,
		epoch: Epoch,
	) -> Result<Option<EmissionSplit<AccountId, Balance>>, Error> {
		self.fetch(&runtime::storage().iota().emission_splits(epoch)).await
	}

	/// Bonds slashed in `epoch`, per miner, in balance units.
	pub async fn slashes(&self, epoch: Epoch) -> Result<Vec<(AccountId, Balance)>, Error> {
		self.iter_by_account(runtime::storage().iota().slashes_iter1(epoch)).await
	}

	/// Everything pallet-iota has minted so far.
	pub async fn total_minted(&self) -> Result<Balance, Error> {
		self.fetch_or_default(&runtime::storage().iota().total_minted()).await
	}

	/// Free balance of `who`.
	pub async fn free_balance(&self, who: &AccountId) -> Result<Balance, Error> {
		Ok(self
			.fetch_or_default(&runtime::storage().system().account(who.clone()))
			.await?
			.data
			.free)
	}

	/// Number of the latest finalized block.
	pub async fn finalized_number(&self) -> Result<BlockNumber, Error> {
		Ok(self.api.blocks().at_latest().await?.number())
	}

	/// Number of the best (latest, not necessarily finalized) block, from the node's `chain_getHeader`.
	pub async fn best_number(&self) -> Result<BlockNumber, Error> {
		let header = LegacyRpcMethods::<ChainConfig>::new(self.rpc.clone())
			.chain_get_header(None)
			.await
			.map_err(subxt::Error::from)?;
		header.map(|h| h.number).ok_or_else(|| {
			subxt::Error::Other("the node returned no best block header".into()).into()
		})
	}

	// ---- events -----------------------------------------------------------------------------------

	/// pallet-iota's events, block by block, from the next finalized block on. Blocks without pallet-iota
	/// events are yielded too (with no events), so the stream also tracks finality.
	pub async fn finalized_events(
		&self,
	) -> Result<impl Stream<Item = Result<FinalizedEvents, Error>> + Send + Unpin, Error> {
		let blocks = self.api.blocks().subscribe_finalized().await?;
		Ok(blocks
			.then(|block| async move {
				let block = block?;
				let mut events = Vec::new();
				for ev in block.events().await?.iter() {
					if let runtime::Event::Iota(e) = ev?.as_root_event::<runtime::Event>()? {
						events.push(e);
					}
				}
				Ok(FinalizedEvents { number: block.number(), hash: block.hash(), events })
			})
			.boxed())
	}
}
