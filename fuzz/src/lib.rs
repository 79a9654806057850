//! # iota-fuzz
//!
//! Every decoder of network input as a fuzz target (issue "Validators that cannot copy, …, decoders that
//! cannot be crashed", item 3): a function from arbitrary bytes that must never panic, and that checks
//! the decoder's contract on whatever it accepts; and the orchestrator's event-sourced state, fed event
//! sequences decoded from the bytes, its invariants checked after every event. [`TARGETS`] lists them
//! by name; `scripts/fuzz.sh` runs each under libFuzzer (`fuzz/libfuzzer`, `cargo +nightly fuzz`), and
//! `cargo test -p iota-fuzz` replays the saved corpora (`fuzz/corpus/<target>/`), so a fixed crash
//! stays fixed.
//!
//! | target | decoder | contract checked on acceptance |
//! |---|---|---|
//! | `wire_tensor` | `iota_model::wire::decode_checked` (activations, gradients) | shape `[B, T, width]` as expected, values finite, within the byte limit |
//! | `merge_vector` | `MergeCodec::decode` (f32, int8, top-k) and `merge::decode_f32` | `elems` values, all finite |
//! | `inner_state` | `optim::InnerState::from_bytes` (revealed states) | `P` weights and moments |
//! | `checkpoint` | `Stage::load_checkpoint` (stage checkpoints, initial weights) | a wrong state hash is refused, the stage unchanged |
//! | `signed_request` | the orchestrator's JSON parameters of every signed method, `Signed::verify` | a signature verifies for its method and bytes only |
//! | `pathway_log` | `PathwayLog::from_slice`, then CLASP (`score_epoch`) | every score finite and ≥ 0 |
//! | `run_spec` | `RunSpec::from_bytes_checked` | a spec that validates locates its samples without panicking |
//! | `object_key` | `iota_storage::keys::parse` | the key round-trips exactly |
//! | `pallet_call` | SCALE decoding of `pallet_iota::Call` (every extrinsic's arguments) | re-encodes to the bytes it consumed |
//! | `state_apply` | the orchestrator's `State::apply`, over event sequences ([`events`]) | `State::check_invariants` after every event; epochs go back only by a revert |

pub mod events;

use std::cell::RefCell;

use candle_core::{DType, Device};
use codec::{Decode, Encode};
use iota_model::wire::{self, Expect, Kind};
use iota_model::{ModelConfig, Stage};
use iota_primitives::ContentHash;
use iota_protocol::codec::MergeCodec;
use iota_rpc::signing::Signed;
use iota_rpc::types::*;
use iota_rpc::{PathwayLog, RunSpec};

/// A fuzz target: bytes in, no panic.
pub type Target = fn(&[u8]);

/// Every target by name (the corpus folder and the libFuzzer binary are named the same).
pub const TARGETS: &[(&str, Target)] = &[
	("wire_tensor", wire_tensor),
	("merge_vector", merge_vector),
	("inner_state", inner_state),
	("checkpoint", checkpoint),
	("signed_request", signed_request),
	("pathway_log", pathway_log),
	("run_spec", run_spec),
	("object_key", object_key),
	("pallet_call", pallet_call),
	("state_apply", state_apply),
];

/// The first byte selects among `n` choices (0 when empty); the rest is the input.
fn split(data: &[u8], n: u8) -> (u8, &[u8]) {
	match data.split_first() {
		Some((b, rest)) => (b % n.max(1), rest),
		None => (0, data),
	}
}

/// Activation and gradient messages (`iota_model::wire`): the first byte picks the kind and the width
/// (8 or 32), the rest is the message, at most 1 MiB.
pub fn wire_tensor(data: &[u8]) {
	let (sel, msg) = split(data, 4);
	let kind = if sel & 1 == 0 { Kind::Activation } else { Kind::Gradient };
	let width = if sel & 2 == 0 { 8 } else { 32 };
	let expect = Expect::btw(kind, width, 1 << 20);
	if let Ok(d) = wire::decode_checked(msg, &expect) {
		assert_eq!(d.kind, kind);
		assert_eq!(d.shape.len(), 3, "{:?}", d.shape);
		assert_eq!(d.shape[2], width);
		assert_eq!(d.values.len(), d.shape.iter().product::<usize>());
		assert!(d.values.iter().all(|v| v.is_finite()), "a non-finite value was accepted");
		assert!(msg.len() <= 1 << 20);
	}
}

/// Merge vectors: the first byte picks the codec (f32, int8, top-k at 1, 10 or 100 per mille), the
/// next two the element count (≤ 4096) and the chunk size (1..=256), the rest is the vector.
pub fn merge_vector(data: &[u8]) {
	let (sel, rest) = split(data, 6);
	let codec = match sel {
		0 => MergeCodec::F32,
		1 => MergeCodec::Int8,
		2 => MergeCodec::TopK { per_mille: 1 },
		3 => MergeCodec::TopK { per_mille: 10 },
		4 => MergeCodec::TopK { per_mille: 100 },
		_ => {
			if let Ok(v) = iota_protocol::merge::decode_f32("fuzz", rest) {
				assert_eq!(v.len() * 4, rest.len());
				assert!(v.iter().all(|x| x.is_finite()), "a non-finite value was accepted");
			}
			return;
		},
	};
	let (Some(&e), Some(&c)) = (rest.first(), rest.get(1)) else { return };
	let elems = u64::from(e) * 16;
	let chunk = u64::from(c).max(1);
	let bytes = &rest[2..];
	if let Ok(v) = codec.decode(bytes, elems, chunk) {
		assert_eq!(v.len() as u64, elems);
		assert!(v.iter().all(|x| x.is_finite()), "a non-finite value was accepted");
	}
}

/// Revealed inner states (`InnerState::from_bytes`) of a 16-parameter stage.
pub fn inner_state(data: &[u8]) {
	const P: usize = 16;
	if let Ok(s) = iota_protocol::optim::InnerState::from_bytes(data, P) {
		assert_eq!(s.weights.len(), P);
		assert_eq!(s.adam.m.len(), P);
		assert_eq!(s.adam.v.len(), P);
		let _ = s.hash();
	}
}

/// A two-block model of a few thousand parameters per stage (the checkpoint target parses and hashes
/// a whole stage per input; `tiny`'s stages ran at 230 inputs a second).
pub fn micro() -> ModelConfig {
	ModelConfig {
		vocab_size: 16,
		d_model: 8,
		n_layers: 2,
		n_heads: 2,
		n_kv_heads: 1,
		ffn_dim: 16,
		rope_theta: 10_000.0,
		norm_eps: 1e-5,
		max_seq_len: 8,
		bottleneck: false,
		bottleneck_width: 0,
		stages: vec![[0, 1], [1, 2]],
	}
}

thread_local! {
	/// The last stage of [`micro`], built once per thread, and its state hash.
	static STAGE: RefCell<(Stage, [u8; 32])> = RefCell::new({
		let stage = Stage::new(&micro(), 1, 1, DType::F32, &Device::Cpu).expect("micro's stage 1");
		let hash = stage.state_hash().expect("state hash");
		(stage, hash)
	});
}

/// Stage checkpoints (`Stage::load_checkpoint`, as miners, validators and evaluators load them):
/// bytes under a state hash they cannot match are refused and leave the stage as it was.
pub fn checkpoint(data: &[u8]) {
	STAGE.with(|s| {
		let (stage, before) = &mut *s.borrow_mut();
		assert!(
			stage.load_checkpoint(data, &[0x5a; 32]).is_err(),
			"a checkpoint matched a made-up state"
		);
		assert_eq!(
			&stage.state_hash().expect("state hash"),
			before,
			"a refused checkpoint changed the stage"
		);
	});
}

/// The JSON parameters of every signed orchestrator method: the first byte picks the method; what
/// parses is verified (signature, clock window), and a request that verifies stops verifying under
/// another method or with any bit of its signature changed.
pub fn signed_request(data: &[u8]) {
	fn one<T: serde::de::DeserializeOwned + serde::Serialize>(bytes: &[u8], method: &str) {
		if let Ok(mut s) = serde_json::from_slice::<Signed<T>>(bytes) {
			let _ = s.verify(method, 0, 60_000);
			if s.verify(method, s.timestamp_ms, 60_000).is_ok() {
				// Signed by its account: any other signature, or the same one under another method,
				// is refused.
				assert!(
					s.verify_signature("iota_other").is_err(),
					"a signature verified for another method"
				);
				s.signature[0] ^= 1;
				assert!(s.verify_signature(method).is_err(), "a changed signature verified");
			}
		}
	}
	use iota_rpc::api::methods as m;
	let (sel, json) = split(data, 12);
	match sel {
		0 => one::<GetWork>(json, m::GET_WORK),
		1 => one::<SubmitActivation>(json, m::SUBMIT_ACTIVATION),
		2 => one::<ReportLoss>(json, m::REPORT_LOSS),
		3 => one::<ReleaseLease>(json, m::RELEASE_LEASE),
		4 => one::<GradientSubmission>(json, m::SUBMIT_GRADIENT),
		5 => one::<MergeQuery>(json, m::GET_SHARDS),
		6 => one::<SubmitShard>(json, m::SUBMIT_SHARD),
		7 => one::<SubmitStateHash>(json, m::SUBMIT_STATE_HASH),
		8 => one::<PresignGet>(json, m::PRESIGN_GET),
		9 => one::<PresignPut>(json, m::PRESIGN_PUT),
		10 => one::<InnerStepReport>(json, m::REPORT_INNER_STEP),
		_ => one::<ChallengeQuery>(json, m::GET_CHALLENGES),
	}
}

/// Pathway logs as validators read them, then CLASP on every log that validates.
pub fn pathway_log(data: &[u8]) {
	if let Ok(log) = PathwayLog::from_slice(data) {
		if let Ok(report) = iota_validator::clasp::score_epoch(&log, &Default::default()) {
			for m in &report.miners {
				assert!(
					m.score.is_finite() && m.score >= 0.0,
					"score {} of {:?}",
					m.score,
					m.miner
				);
			}
		}
	}
}

/// Run specs as every party reads them (checked against their own hash here).
pub fn run_spec(data: &[u8]) {
	if let Ok(spec) = RunSpec::from_bytes_checked(data, &ContentHash::of(data)) {
		assert!(spec.validate().is_ok());
		for sample in [0, 1, u64::MAX / 2, u64::MAX] {
			if let Some(loc) = spec.data.locate(sample) {
				assert!((loc.shard as usize) < spec.data.shards.len(), "{loc:?}");
			}
		}
		let _ = spec.boundary_shape();
		let _ = spec.step_options(u32::MAX);
		for s in 0..spec.model.n_stages() {
			let _ = spec.init_of(s as u16);
		}
	}
}

/// Object keys (`keys::parse`, what the orchestrator checks before presigning): an accepted key is
/// exactly the key its fields build.
pub fn object_key(data: &[u8]) {
	let Ok(key) = std::str::from_utf8(data) else { return };
	if let Ok(k) = iota_storage::keys::parse(key) {
		assert_eq!(k.to_key(), key);
		let _ = k.writer();
	}
}

/// Extrinsic arguments: SCALE decoding of `pallet_iota::Call` of the runtime (what the chain decodes
/// from every signed transaction to the pallet); what decodes re-encodes to the bytes it consumed.
pub fn pallet_call(data: &[u8]) {
	let mut input = data;
	if let Ok(call) = pallet_iota::Call::<iota_runtime::Runtime>::decode(&mut input) {
		let used = data.len() - input.len();
		assert_eq!(call.encode(), &data[..used], "a call does not re-encode to its bytes");
	}
}

/// The orchestrator's event-sourced state: the bytes as a sequence of events over a small run
/// ([`events`]), each folded into a fresh state by `State::apply` (live requests and a replay after a
/// restart take the same path); after every event the state's invariants hold
/// (`State::check_invariants`) and no stage's epoch went back but by a revert to the chain's view. The
/// first byte picks sync or local mode; at most [`MAX_EVENTS`] events an input. At the end the read-only
/// views (status, pathway logs, manifests, commit plans, due events) are taken of what was built.
pub fn state_apply(data: &[u8]) {
	views(&state_of(data));
}

/// The state `state_apply` builds from `data`, checked after every event.
fn state_of(data: &[u8]) -> iota_orchestrator::state::State {
	use iota_orchestrator::state::{Event, State};
	let (mode, rest) = split(data, 2);
	let mut st = State::new(events::config(mode == 1));
	let mut input = events::Events::new(rest);
	let mut n = 0;
	while n < MAX_EVENTS {
		let Some(evs) = input.next(&mut st) else { break };
		for ev in evs {
			let before: [u32; events::STAGES as usize] =
				std::array::from_fn(|s| st.stage(s as u16).map_or(0, |v| v.epoch));
			st.apply(&ev);
			if let Err(e) = st.check_invariants() {
				panic!("event {n} ({ev:?}): {e}");
			}
			for (s, was) in before.into_iter().enumerate() {
				let now = st.stage(s as u16).map_or(0, |v| v.epoch);
				let reverted = matches!(ev, Event::ChainReverted { stage, epoch, .. }
					if usize::from(stage) == s && now == epoch);
				assert!(
					now >= was || reverted,
					"event {n} ({ev:?}): stage {s} went from epoch {was} back to {now}"
				);
			}
			n += 1;
		}
	}
	st
}

/// Events per `state_apply` input (a longer input is cut there): an epoch of samples and its merge
/// take 30, and the target stays above 10,000 inputs a second under `scripts/fuzz.sh`.
pub const MAX_EVENTS: usize = 48;

/// Every read-only view of the state the server and the chain driver take (none may panic).
fn views(st: &iota_orchestrator::state::State) {
	let _ = st.stage_status();
	let _ = st.summaries();
	let _ = st.pathway_due();
	let _ = st.challenge_seeds_due();
	let _ = st.gone_miners(u64::MAX / 2, 0);
	let _ = st.expired_leases(u64::MAX / 2);
	let miners = st.miner_activity();
	for s in 0..events::STAGES {
		let epoch = st.stage(s).map_or(0, |v| v.epoch);
		let _ = st.commit_plan(s);
		let _ = st.disputed(s);
		let _ = st.pathway_log(epoch);
		for e in epoch.saturating_sub(1)..=epoch {
			for m in &miners {
				let _ = st.manifest(&m.account, s, e);
				let _ = st.challenges_of(&m.account, s, e);
			}
		}
	}
}

/// Valid inputs of every target, the fuzzers' starting points (written into the corpora as
/// `seed-<blake3>`), and whether a target's decoder accepts an input.
pub mod seeds {
	use super::*;
	use iota_model::Encoding;
	use iota_rpc::{DataManifest, LrSchedule, ObjectEntry, PathwayRecord, SpecObject};
	use iota_storage::keys::{self, Direction, Id};

	/// `(target, input)` pairs, each accepted by its target's decoder.
	pub fn all() -> Vec<(&'static str, Vec<u8>)> {
		let mut out = Vec::new();
		// Activations of `[2, 4, 8]` in every wire encoding (selector 0: activation, width 8).
		let values: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
		let t =
			candle_core::Tensor::from_vec(values.clone(), (2, 4, 8), &Device::Cpu).expect("tensor");
		for enc in [Encoding::F32, Encoding::Bf16, Encoding::U8] {
			let msg = wire::encode(&t, Kind::Activation, enc).expect("encode");
			out.push(("wire_tensor", [vec![0u8], msg].concat()));
		}
		// Merge vectors: 32 elements in chunks of 16, int8 and top-k 100 ‰; raw f32.
		for (sel, codec) in [(1u8, MergeCodec::Int8), (4, MergeCodec::TopK { per_mille: 100 })] {
			let bytes = codec.encode(&values[..32], 16).expect("encode");
			out.push(("merge_vector", [vec![sel, 2, 16], bytes].concat()));
		}
		out.push((
			"merge_vector",
			[vec![5u8], iota_protocol::f32le::to_bytes(&values[..8])].concat(),
		));
		// A revealed state of 16 parameters.
		let adam = iota_protocol::optim::AdamState {
			m: values[..16].to_vec(),
			v: values[16..32].iter().map(|x| x * x).collect(),
			step: 3,
		};
		let state = iota_protocol::optim::InnerState { weights: values[32..48].to_vec(), adam };
		out.push(("inner_state", state.to_bytes()));
		// The checkpoint target's own stage.
		out.push(("checkpoint", STAGE.with(|s| s.borrow().0.to_checkpoint().expect("checkpoint"))));
		// A signed getWork by //Alice.
		let alice = subxt_signer::sr25519::Keypair::from_uri(
			&<subxt_signer::SecretUri as std::str::FromStr>::from_str("//Alice").expect("uri"),
		)
		.expect("keypair");
		let signed = iota_rpc::signing::sign(
			&alice,
			iota_rpc::api::methods::GET_WORK,
			GetWork { stage: 1, session: Some(5) },
			7,
			1_700_000_000_000,
		)
		.expect("sign");
		out.push((
			"signed_request",
			[vec![0u8], serde_json::to_vec(&signed).expect("json")].concat(),
		));
		// A two-stage pathway log of three samples by two miners a stage.
		let acc = |b: u8| iota_rpc::AccountId::from([b; 32]);
		let entry = |k: &str| ObjectEntry { key: k.into(), hash: ContentHash::of(k.as_bytes()) };
		let records = (0..3u64)
			.map(|s| {
				let (a, b) = (acc(1 + (s % 2) as u8), acc(3 + ((s + 1) % 2) as u8));
				PathwayRecord {
					sample: s,
					forward: vec![a.clone(), b.clone()],
					backward: vec![a, b],
					forward_outputs: vec![entry("f0"), entry("f1")],
					backward_outputs: vec![None, Some(entry("b1"))],
					loss: 5.0 + s as f32 * 0.1,
					forward_steps: vec![],
					backward_steps: vec![],
					recomputed: vec![],
				}
			})
			.collect();
		let log =
			PathwayLog { run: "r".into(), epoch: 2, stages: 2, records, inner_states: vec![] };
		out.push(("pathway_log", log.to_bytes()));
		// A run spec of `tiny`.
		let obj =
			|k: &str| SpecObject { key: k.into(), hash: ContentHash::of(k.as_bytes()), size: 4 };
		let spec = RunSpec {
			run: "r".into(),
			model: ModelConfig::tiny(),
			seed: 1,
			encoding: "u8".into(),
			adamw: iota_protocol::optim::AdamW::default(),
			lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
			max_norm: Some(1.0),
			merge_codec: MergeCodec::Int8,
			training: iota_protocol::optim::Training::Local {
				accumulate: 2,
				outer_lr: 0.7,
				outer_momentum: 0.9,
			},
			data: DataManifest {
				tokenizer: obj("t"),
				seq_len: 16,
				batch_rows: 2,
				rows_per_shard: 8,
				shards: vec![obj("s0"), obj("s1")],
				heldout: None,
			},
			init: None,
		};
		out.push(("run_spec", spec.to_bytes()));
		// Keys of a few kinds.
		let (run, miner) = (Id::new("run-1").expect("id"), Id::new("miner-1").expect("id"));
		for k in [
			keys::activation(&run, 3, 1, 42, Direction::Forward, &miner),
			keys::reduced_shard(&run, 3, 1, 7, &miner),
			keys::init_checkpoint(&run, 2),
			keys::run_spec(&run),
		] {
			out.push(("object_key", k.into_bytes()));
		}
		// Extrinsics to the pallet.
		use pallet_iota::Call;
		type C = Call<iota_runtime::Runtime>;
		for call in [C::finalize_epoch { epoch: 3 }, C::register_miner {}] {
			out.push(("pallet_call", call.encode()));
		}
		// Event sequences: full epochs in sync and local mode, churn, the inputs that found bugs.
		out.extend(events::seeds().into_iter().map(|s| ("state_apply", s)));
		out
	}

	/// Whether `target`'s decoder accepts `input` (what a seed must be).
	pub fn accepted(target: &str, input: &[u8]) -> bool {
		match target {
			"wire_tensor" => {
				wire::decode_checked(&input[1..], &Expect::btw(Kind::Activation, 8, 1 << 20))
					.is_ok()
			},
			"merge_vector" => match input.first() {
				Some(5) => iota_protocol::merge::decode_f32("seed", &input[1..]).is_ok(),
				Some(&sel) => {
					let codec = if sel == 1 {
						MergeCodec::Int8
					} else {
						MergeCodec::TopK { per_mille: 100 }
					};
					codec.decode(&input[3..], u64::from(input[1]) * 16, u64::from(input[2])).is_ok()
				},
				None => false,
			},
			"inner_state" => iota_protocol::optim::InnerState::from_bytes(input, 16).is_ok(),
			"checkpoint" => STAGE.with(|s| {
				let (stage, h) = &mut *s.borrow_mut();
				stage.load_checkpoint(input, h).is_ok()
			}),
			"signed_request" => serde_json::from_slice::<Signed<GetWork>>(&input[1..])
				.is_ok_and(|s| s.verify_signature(iota_rpc::api::methods::GET_WORK).is_ok()),
			"pathway_log" => PathwayLog::from_slice(input).is_ok(),
			"run_spec" => RunSpec::from_bytes_checked(input, &ContentHash::of(input)).is_ok(),
			"object_key" => {
				std::str::from_utf8(input).is_ok_and(|k| iota_storage::keys::parse(k).is_ok())
			},
			"pallet_call" => {
				pallet_iota::Call::<iota_runtime::Runtime>::decode(&mut &input[..]).is_ok()
			},
			// A sequence that completes a sample.
			"state_apply" => state_of(input).totals().0 > 0,
			_ => false,
		}
	}
}
