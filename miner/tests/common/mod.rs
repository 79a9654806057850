//! In-memory fakes of the orchestrator, the object store and the chain, so `Miner` runs step by step
//! without processes. The orchestrator fake scripts training work per miner and implements the merge
//! protocol for one stage (butterfly table, shard copies compared by hash, attestations).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use candle_core::{Device, Tensor};
use iota_miner::{ChainView, Committed, MinerError, ObjectIo, Orchestrator};
use iota_model::optim::AdamW;
use iota_model::wire::{self, Kind};
use iota_model::{Encoding, ModelConfig};
use iota_primitives::butterfly::butterfly_shards;
use iota_primitives::ContentHash;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::{AccountId, DataManifest, ErrorCode, LrSchedule, RunSpec, SpecObject};
use iota_storage::keys::{self, Direction, Id};
use iota_storage::{Method, PresignedRequest, StorageError};
use tokio::sync::Semaphore;

pub const RUN: &str = "test-run";

pub fn account(n: u8) -> AccountId {
	AccountId::from([n; 32])
}

pub fn miner_id(a: &AccountId) -> Id {
	Id::new(a.to_string()).unwrap()
}

pub fn run_id() -> Id {
	Id::new(RUN).unwrap()
}

pub fn req(method: Method, key: &str) -> PresignedRequest {
	PresignedRequest { method, url: format!("mem://{key}"), headers: vec![], expires_at: u64::MAX }
}

pub fn put(key: String) -> ObjectPut {
	ObjectPut { put: req(Method::Put, &key), key }
}

// ---- object store -------------------------------------------------------------------------------

/// Objects by key; `mem://{key}` URLs.
#[derive(Default)]
pub struct MemIo {
	pub objects: Mutex<HashMap<String, Bytes>>,
	/// A PUT to a key containing one of these fails once (503), as a flaky store would.
	pub fail_puts: Mutex<Vec<String>>,
	/// A PUT to a key containing this string waits for a permit of the semaphore (one per PUT), as
	/// a slow store would: a caller that awaits such a PUT inline waits with it.
	pub gate_puts: Mutex<Option<(String, Arc<Semaphore>)>>,
}

impl MemIo {
	pub fn insert(&self, key: &str, bytes: Vec<u8>) -> ObjectGet {
		let hash = ContentHash::of(&bytes);
		let size = bytes.len() as u64;
		self.objects.lock().unwrap().insert(key.to_string(), Bytes::from(bytes));
		ObjectGet { key: key.to_string(), hash, size, get: req(Method::Get, key) }
	}
	pub fn get_obj(&self, key: &str) -> Option<Bytes> {
		self.objects.lock().unwrap().get(key).cloned()
	}
	/// An `ObjectGet` of a stored object.
	pub fn object(&self, key: &str) -> ObjectGet {
		let b = self.get_obj(key).expect("object stored");
		ObjectGet {
			key: key.to_string(),
			hash: ContentHash::of(&b),
			size: b.len() as u64,
			get: req(Method::Get, key),
		}
	}
	fn key(r: &PresignedRequest) -> String {
		r.url.trim_start_matches("mem://").to_string()
	}
}

#[async_trait]
impl ObjectIo for MemIo {
	async fn get(
		&self,
		r: &PresignedRequest,
		expected: &ContentHash,
	) -> Result<Bytes, StorageError> {
		let key = Self::key(r);
		let b = self.get_obj(&key).ok_or(StorageError::NotFound { key: key.clone() })?;
		let actual = ContentHash::of(&b);
		if &actual != expected {
			return Err(StorageError::HashMismatch {
				key,
				expected: *expected,
				actual,
				size: b.len() as u64,
			});
		}
		Ok(b)
	}
	async fn get_range(
		&self,
		r: &PresignedRequest,
		range: Range<u64>,
	) -> Result<Bytes, StorageError> {
		let key = Self::key(r);
		let b = self.get_obj(&key).ok_or(StorageError::NotFound { key: key.clone() })?;
		if range.start >= range.end || range.end > b.len() as u64 {
			return Err(StorageError::InvalidRange { key, start: range.start, end: range.end });
		}
		Ok(b.slice(range.start as usize..range.end as usize))
	}
	async fn put(&self, r: &PresignedRequest, data: Bytes) -> Result<ContentHash, StorageError> {
		assert_eq!(r.method, Method::Put);
		let key = Self::key(r);
		let gate = self.gate_puts.lock().unwrap().clone();
		if let Some((_, gate)) = gate.filter(|(part, _)| key.contains(part.as_str())) {
			gate.acquire().await.expect("gate open").forget();
		}
		let mut fails = self.fail_puts.lock().unwrap();
		if let Some(i) = fails.iter().position(|f| key.contains(f.as_str())) {
			fails.remove(i);
			return Err(StorageError::Unavailable {
				key,
				status: 503,
				message: "injected".into(),
				attempts: 4,
			});
		}
		drop(fails);
		let h = ContentHash::of(&data);
		self.objects.lock().unwrap().insert(Self::key(r), data);
		Ok(h)
	}
}

// ---- chain --------------------------------------------------------------------------------------

#[derive(Default)]
pub struct FakeChain {
	pub epoch: Mutex<u32>,
	pub committed: Mutex<HashMap<u32, Committed>>,
}

#[async_trait]
impl ChainView for FakeChain {
	async fn stage_epoch(&self, _stage: u16) -> iota_miner::Result<u32> {
		Ok(*self.epoch.lock().unwrap())
	}
	async fn committed(&self, epoch: u32, _stage: u16) -> iota_miner::Result<Option<Committed>> {
		Ok(self.committed.lock().unwrap().get(&epoch).cloned())
	}
}

// ---- orchestrator -------------------------------------------------------------------------------

/// What a miner called, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
	Submit(LeaseId, Option<TensorRef>),
	Loss(LeaseId, f32),
	Release(LeaseId),
	Gradient(GradientSubmission),
	Shard(SubmitShard),
	StateHash(SubmitStateHash),
	/// `iota_getShards` for an epoch.
	GetShards(u32),
}

/// The merge of one stage's epoch, as the orchestrator keeps it.
#[derive(Default)]
pub struct MergeWorld {
	/// Members expected to submit before the merge starts.
	pub expected: usize,
	pub epoch: u32,
	pub param_count: u64,
	pub submissions: BTreeMap<[u8; 32], (AccountId, GradientSubmission)>,
	/// shard -> copies (miner, hash, key).
	pub copies: BTreeMap<u32, Vec<(AccountId, ContentHash, String)>>,
	pub attested: BTreeMap<[u8; 32], ContentHash>,
	pub committed: Option<ContentHash>,
	/// Tamper with the first stored copy of this shard once both copies are in (bad-input test).
	pub corrupt_shard: Option<u32>,
	/// Restart the round once every member has submitted (a timed-out merge): fresh submissions.
	pub restart_once: bool,
	pub round: u32,
}

/// A reported inner state: (epoch, hash).
pub type ReportedState = (u32, ContentHash);

#[derive(Default)]
pub struct World {
	pub io: Arc<MemIo>,
	pub work: Mutex<HashMap<[u8; 32], VecDeque<Work>>>,
	pub calls: Mutex<HashMap<[u8; 32], Vec<Call>>>,
	pub merge: Mutex<MergeWorld>,
	/// The run spec's merge codec (`f32` by default).
	pub codec: iota_miner::merge::MergeCodec,
	/// The run spec's training mode (`sync` by default).
	pub training: Training,
	/// Local mode: each miner's reported states of its latest epoch, `(epoch, hash)` by step.
	pub inner: Mutex<HashMap<[u8; 32], Vec<ReportedState>>>,
	/// The inner step each submitted lease named.
	pub steps: Mutex<HashMap<LeaseId, u32>>,
	/// Local mode: the inner step every miner is challenged on (`None`: never seeded).
	pub challenge: Mutex<Option<u32>>,
}

pub struct FakeOrch {
	pub me: AccountId,
	pub world: Arc<World>,
	pub spec: Vec<u8>,
}

fn refuse<T>(method: &'static str, code: ErrorCode, msg: &str) -> iota_miner::Result<T> {
	Err(MinerError::Refused { method, code, message: msg.into() })
}

impl World {
	pub fn push_work(&self, who: &AccountId, w: Work) {
		self.work.lock().unwrap().entry(who.0).or_default().push_back(w);
	}
	pub fn calls(&self, who: &AccountId) -> Vec<Call> {
		self.calls.lock().unwrap().get(&who.0).cloned().unwrap_or_default()
	}
	fn record(&self, who: &AccountId, c: Call) {
		self.calls.lock().unwrap().entry(who.0).or_default().push(c);
	}
	fn members(m: &MergeWorld) -> Vec<AccountId> {
		m.submissions.values().map(|(a, _)| a.clone()).collect()
	}
	pub fn shard_table(m: &MergeWorld) -> Vec<iota_primitives::butterfly::ShardDescriptor> {
		butterfly_shards(m.submissions.len() as u32, m.param_count, &[7; 32]).unwrap()
	}
	fn ready(m: &MergeWorld) -> bool {
		let n = m.submissions.len();
		if n < m.expected || n == 0 {
			return false;
		}
		let need = if n == 1 { 1 } else { 2 };
		Self::shard_table(m).iter().all(|d| {
			m.copies
				.get(&d.index)
				.is_some_and(|c| c.len() == need && c.iter().all(|x| x.1 == c[0].1))
		})
	}
}

#[async_trait]
impl Orchestrator for FakeOrch {
	fn account(&self) -> AccountId {
		self.me.clone()
	}
	async fn run_spec(&self) -> iota_miner::Result<Vec<u8>> {
		Ok(self.spec.clone())
	}
	async fn get_work(&self, _stage: u16) -> iota_miner::Result<Work> {
		if let Some(w) =
			self.world.work.lock().unwrap().get_mut(&self.me.0).and_then(|q| q.pop_front())
		{
			return Ok(w);
		}
		let m = self.world.merge.lock().unwrap();
		if m.expected > 0 && m.committed.is_none() {
			if m.submissions.contains_key(&self.me.0) {
				return Ok(Work::Idle { reason: IdleReason::Merging, retry_after_ms: 10 });
			}
			let key =
				keys::gradient_submission(&run_id(), u64::from(m.epoch), 1, &miner_id(&self.me));
			return Ok(Work::UploadGradient { epoch: m.epoch, output: put(key) });
		}
		Ok(Work::Idle { reason: IdleReason::QueueEmpty, retry_after_ms: 10 })
	}
	async fn submit_activation(
		&self,
		lease: LeaseId,
		output: Option<TensorRef>,
		inner_step: u32,
	) -> iota_miner::Result<Ack> {
		if let Some(o) = &output {
			let stored = self.world.io.get_obj(&o.key).expect("uploaded before submit");
			assert_eq!(ContentHash::of(&stored), o.hash, "submitted hash is the stored object's");
		}
		{
			let reported = self.world.inner.lock().unwrap();
			let have = reported.get(&self.me.0).map_or(0, Vec::len);
			if self.world.training.is_sync() {
				assert_eq!(inner_step, 0, "sync mode passes are at inner step 0");
			} else {
				assert!(
					(inner_step as usize) < have,
					"a pass at state {inner_step}, {have} reported"
				);
			}
			self.world.steps.lock().unwrap().insert(lease, inner_step);
		}
		self.world.record(&self.me, Call::Submit(lease, output));
		Ok(Ack { backward_done: 0, backward_quota: 0 })
	}
	async fn get_challenges(&self, epoch: u32) -> iota_miner::Result<Challenges> {
		let Some(k) = *self.world.challenge.lock().unwrap() else {
			return Ok(Challenges { epoch, seeded: false, reveals: Vec::new() });
		};
		let states = self.world.inner.lock().unwrap().get(&self.me.0).cloned().unwrap_or_default();
		let hash = |j: u32| states.get(j as usize).filter(|s| s.0 == epoch).map(|s| s.1);
		let reveals = match (hash(k), hash(k + 1)) {
			(Some(before), Some(after)) => vec![Reveal {
				step: k,
				states: [(k, before), (k + 1, after)]
					.into_iter()
					.map(|(j, hash)| RevealedState {
						state: j,
						put: put(format!("inner/{}/{epoch}/{j}", self.me)),
						hash,
					})
					.collect(),
			}],
			_ => Vec::new(),
		};
		Ok(Challenges { epoch, seeded: true, reveals })
	}
	async fn report_inner_step(&self, r: InnerStepReport) -> iota_miner::Result<()> {
		assert!(!self.world.training.is_sync(), "no inner steps in sync mode");
		let mut all = self.world.inner.lock().unwrap();
		let mine = all.entry(self.me.0).or_default();
		// A new epoch starts a new trail at state 0.
		if r.step == 0 && mine.last().is_some_and(|x| x.0 != r.epoch) {
			mine.clear();
		}
		match mine.get(r.step as usize) {
			Some(x) => assert_eq!(*x, (r.epoch, r.state_hash), "a reported state changed"),
			None => {
				assert_eq!(r.step as usize, mine.len(), "states are reported in order");
				mine.push((r.epoch, r.state_hash));
			},
		}
		Ok(())
	}
	async fn report_loss(&self, lease: LeaseId, loss: f32) -> iota_miner::Result<()> {
		self.world.record(&self.me, Call::Loss(lease, loss));
		Ok(())
	}
	async fn release_lease(&self, lease: LeaseId) -> iota_miner::Result<()> {
		self.world.record(&self.me, Call::Release(lease));
		Ok(())
	}
	async fn submit_gradient(&self, s: GradientSubmission) -> iota_miner::Result<()> {
		let stored = self.world.io.get_obj(&s.gradient.key).expect("gradient uploaded");
		assert_eq!(ContentHash::of(&stored), s.gradient.hash);
		assert_eq!(
			iota_miner::merge::chunk_hashes(self.world.codec, &stored, s.gradient.shape[0]),
			s.chunk_hashes
		);
		self.world.record(&self.me, Call::Gradient(s.clone()));
		self.world
			.merge
			.lock()
			.unwrap()
			.submissions
			.insert(self.me.0, (self.me.clone(), s));
		Ok(())
	}
	async fn get_shards(&self, epoch: u32) -> iota_miner::Result<ShardAssignment> {
		self.world.record(&self.me, Call::GetShards(epoch));
		let mut m = self.world.merge.lock().unwrap();
		if m.submissions.len() < m.expected {
			return refuse("iota_getShards", ErrorCode::WrongPhase, "still uploading");
		}
		if m.restart_once {
			m.restart_once = false;
			m.round += 1;
			m.submissions.clear();
			m.copies.clear();
			return refuse(
				"iota_getShards",
				ErrorCode::Invalid,
				"round restarted: no gradient submitted this round",
			);
		}
		let members = World::members(&m);
		let Some(pos) = members.iter().position(|a| a == &self.me) else {
			return refuse("iota_getShards", ErrorCode::Invalid, "no gradient submitted");
		};
		let submissions = m
			.submissions
			.values()
			.map(|(a, s)| SubmissionSource {
				miner: a.clone(),
				samples: s.samples,
				object: self.world.io.object(&s.gradient.key),
				chunk_hashes: s.chunk_hashes.clone(),
			})
			.collect();
		let shards = World::shard_table(&m)
			.into_iter()
			.filter(|d| d.is_owned_by(pos as u32))
			.map(|d| ShardTask {
				shard: d.index,
				range: [d.start, d.end],
				output: put(keys::reduced_shard(
					&run_id(),
					u64::from(epoch),
					1,
					d.index,
					&miner_id(&self.me),
				)),
			})
			.collect();
		Ok(ShardAssignment {
			epoch,
			round: m.round,
			param_count: m.param_count,
			submissions,
			shards,
		})
	}
	async fn submit_shard(&self, s: SubmitShard) -> iota_miner::Result<()> {
		self.world.record(&self.me, Call::Shard(s.clone()));
		let mut m = self.world.merge.lock().unwrap();
		assert_eq!(s.round, m.round, "a shard of the current round");
		m.copies.entry(s.shard).or_default().push((
			self.me.clone(),
			s.reduced.hash,
			s.reduced.key.clone(),
		));
		Ok(())
	}
	async fn get_manifest(&self, epoch: u32) -> iota_miner::Result<MergeView> {
		let mut m = self.world.merge.lock().unwrap();
		if let Some(h) = m.committed {
			return Ok(MergeView::Committed { state_hash: h });
		}
		if !World::ready(&m) {
			return Ok(MergeView::Reducing { present: m.copies.len() as u32, expected: 0 });
		}
		if let Some(k) = m.corrupt_shard.take() {
			// Overwrite the stored bytes of the first copy (its published hash stays).
			let key = m.copies[&k][0].2.clone();
			let mut b = self.world.io.get_obj(&key).unwrap().to_vec();
			b[0] ^= 1;
			self.world.io.objects.lock().unwrap().insert(key, Bytes::from(b));
		}
		let shards = World::shard_table(&m)
			.iter()
			.map(|d| {
				let (_, hash, key) = m.copies[&d.index][0].clone();
				let b = self.world.io.get_obj(&key).unwrap();
				ReducedShard {
					shard: d.index,
					range: [d.start, d.end],
					object: ObjectGet {
						key: key.clone(),
						hash,
						size: b.len() as u64,
						get: req(Method::Get, &key),
					},
				}
			})
			.collect();
		let samples = m.submissions.values().map(|(_, s)| s.samples).sum();
		let first = World::members(&m)[0].clone();
		let checkpoint = (first == self.me).then(|| {
			put(keys::stage_checkpoint(&run_id(), u64::from(epoch), 1, &miner_id(&self.me)))
		});
		Ok(MergeView::Ready { shards, samples, checkpoint })
	}
	async fn submit_state_hash(&self, a: SubmitStateHash) -> iota_miner::Result<()> {
		self.world.record(&self.me, Call::StateHash(a.clone()));
		let mut m = self.world.merge.lock().unwrap();
		m.attested.insert(self.me.0, a.state_hash);
		let all = m.submissions.keys().all(|k| m.attested.get(k) == Some(&a.state_hash));
		if all {
			m.committed = Some(a.state_hash);
		}
		Ok(())
	}
	async fn presign_get(&self, keys: Vec<String>) -> iota_miner::Result<Vec<PresignedRequest>> {
		Ok(keys.iter().map(|k| req(Method::Get, k)).collect())
	}
}

// ---- run spec -----------------------------------------------------------------------------------

pub const SEQ: usize = 8;
pub const ROWS: usize = 2;
pub const ROWS_PER_SHARD: usize = 8;

/// A tiny-model spec with one data shard of deterministic tokens, stored in `io`.
pub fn spec(io: &MemIo) -> RunSpec {
	let cfg = ModelConfig::tiny();
	let tokens: Vec<u32> = (0..ROWS_PER_SHARD * (SEQ + 1))
		.map(|i| ((i * 37 + 11) % cfg.vocab_size) as u32)
		.collect();
	let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
	let key = keys::data_shard(&run_id(), 0);
	let obj = io.insert(&key, bytes);
	RunSpec {
		init: None,
		run: RUN.into(),
		model: cfg,
		seed: 42,
		encoding: "f32".into(),
		adamw: AdamW::default(),
		lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
		max_norm: Some(1.0),
		merge_codec: Default::default(),
		training: Default::default(),
		data: DataManifest {
			tokenizer: SpecObject { key: "tok".into(), hash: ContentHash::of(b"tok"), size: 3 },
			seq_len: SEQ as u32,
			batch_rows: ROWS as u32,
			rows_per_shard: ROWS_PER_SHARD as u32,
			shards: vec![SpecObject { key: obj.key, hash: obj.hash, size: obj.size }],
			heldout: None,
		},
	}
}

/// A deterministic boundary tensor `[B, T, w]` of the tiny model.
pub fn boundary(seed: u64) -> Tensor {
	use rand::{Rng, SeedableRng};
	let w = ModelConfig::tiny().wire_width();
	let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
	let v: Vec<f32> = (0..ROWS * SEQ * w).map(|_| rng.random_range(-1.0..1.0)).collect();
	Tensor::from_vec(v, (ROWS, SEQ, w), &Device::Cpu).unwrap()
}

/// Store `t` as a wire message of `kind` under `key`.
pub fn store_tensor(io: &MemIo, key: &str, t: &Tensor, kind: Kind) -> ObjectGet {
	io.insert(key, wire::encode(t, kind, Encoding::F32).unwrap())
}

pub fn far() -> u64 {
	now_ms() + 600_000
}

/// The data slice of `sample` per the spec.
pub fn slice(spec: &RunSpec, io: &MemIo, sample: u64) -> DataSlice {
	let loc = spec.data.locate(sample).unwrap();
	DataSlice {
		shard: loc.shard,
		object: io.object(&spec.data.shards[0].key),
		row_offset: loc.row_offset,
		rows: loc.rows,
	}
}

pub fn act_key(stage: u32, sample: u64, dir: Direction, who: &AccountId) -> String {
	keys::activation(&run_id(), 0, stage, sample, dir, &miner_id(who))
}
