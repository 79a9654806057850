//! Butterfly shard audit (docs/design.md §6): recompute sampled reduced shards and every shard whose
//! two copies disagreed, bit-exactly, and say which copy was wrong.
//!
//! ## Reduction (bit-exact everywhere)
//!
//! For a shard covering elements `[start, end)` of the stage's flat gradient and the round's gradient
//! submissions `x_i` (each the **sum** of miner `i`'s micro-batch gradients, `samples_i` micro-batches):
//!
//! ```text
//! out[j] = ((Σ_i x_i[j] as f64, summed in the submissions' listed order) / (Σ_i samples_i) as f64) as f32
//! ```
//!
//! and the reduced object is `end − start` little-endian f32. The listed order is the record's
//! (`iota_epochRecord`'s `submissions` of the stage and round), which docs/design.md §6 fixes as ascending account
//! bytes; the audit computes both and accepts a copy equal to either.
//!
//! ## What is audited
//!
//! Per stage, the copies of the final merge round: every shard with a recorded mismatch, plus
//! [`SAMPLED_SHARDS`] shards drawn from [`SeededRng`]`(`[`AUDIT_DOMAIN`]`, epoch_seed, epoch u32 LE ‖
//! stage u16 LE)` by partial Fisher–Yates over the shard indices with copies.
//!
//! ## Verdicts
//!
//! A copy equal to the recomputation passes; a copy that differs fails (its reducer is named). A copy
//! whose object is gone (404) fails too. To never blame an honest reducer for a convention the validator
//! got wrong, verdicts are issued for a stage only when **at least one audited copy of that stage matched
//! the recomputation** (the convention is confirmed by an honest party); otherwise every finding of the
//! stage stays inconclusive. Unreachable or garbage objects (bytes not hashing to the record's hash,
//! submissions whose chunk hashes disagree with their bytes, sizes that disagree) are inconclusive, as is
//! a stage whose agreed shard hashes differ from the chain's manifest.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use iota_primitives::{ContentHash, Seed, Verdict};
use iota_protocol::{MergeCodec, MergeError, SpanInput};
use iota_rpc::types::{chunk_hashes as chunk_hashes_of, EpochRecord, ShardCopy, StageSubmission};
use iota_rpc::{AccountId, ObjectEntry};
use serde::{Deserialize, Serialize};

use crate::objects::{FetchError, Objects};

pub use iota_protocol::selection::{SAMPLED_SHARDS, SHARD_AUDIT_DOMAIN as AUDIT_DOMAIN};

/// The protocol's reduction ([`iota_protocol::reduce_shard`]) of `[start, end)` over whole submissions
/// `(bytes in codec, samples, chunk hashes)` of `p` elements each, in summation order: each span is cut
/// from the whole object and checked against its listed chunk hashes. Returns the bytes a reducer
/// uploads ([`iota_protocol::reduce_shard_bytes`]).
///
/// # Errors
/// [`MergeError`]: a range outside the vectors, zero samples, a chunk that does not hash to its listed
/// hash, a chunk that does not decode, NaN/Inf.
pub fn reduce(
	codec: MergeCodec,
	p: u64,
	subs: &[(&[u8], u32, &[ContentHash])],
	start: u64,
	end: u64,
) -> Result<Vec<u8>, MergeError> {
	let mut inputs = Vec::with_capacity(subs.len());
	for (bytes, samples, chunk_hashes) in subs {
		let span = iota_protocol::merge::span_of(codec, bytes, start, end, p)?;
		inputs.push(SpanInput { samples: *samples, chunk_hashes, span });
	}
	iota_protocol::reduce_shard_bytes(codec, &inputs, start, end, p)
}

/// What the audit needs of the run spec: the merge codec and each stage's merge vector length `P`.
#[derive(Clone, Debug, PartialEq)]
pub struct MergeLayout {
	/// The run's merge codec.
	pub codec: MergeCodec,
	/// `P` per stage (index = stage).
	pub param_counts: Vec<u64>,
}

/// Evidence of one audited shard copy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardEvidence {
	/// Stage.
	pub stage: u16,
	/// Merge round.
	pub round: u32,
	/// Shard index.
	pub shard: u32,
	/// Element range `[start, end)`.
	pub range: [u64; 2],
	/// The submissions reduced, in the listed order.
	pub submissions: Vec<ObjectEntry>,
	/// The audited copy.
	pub copy: ObjectEntry,
	/// BLAKE3 of the recomputed shard bytes (listed order).
	pub recomputed: ContentHash,
	/// Whether the shard's two copies disagreed (audit forced) or it was sampled.
	pub mismatch: bool,
	/// Finding.
	pub verdict: Verdict,
	/// Why it failed.
	pub reason: Option<String>,
}

/// A verdict on one reducer.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardFinding {
	/// The reducer.
	pub miner: AccountId,
	/// The evidence.
	pub evidence: ShardEvidence,
}

/// Why (part of) a stage's audit ended without verdicts. `kind()` is the metrics label.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuditInconclusive {
	/// Orchestrator or store unreachable.
	#[error("stage {stage}: unavailable: {reason}")]
	Unavailable {
		/// Stage.
		stage: u16,
		/// What failed.
		reason: String,
	},
	/// An object is garbage (hash, chunk hashes or size disagree with the record).
	#[error("stage {stage}: garbage: {reason}")]
	Garbage {
		/// Stage.
		stage: u16,
		/// What is wrong.
		reason: String,
	},
	/// The record is inconsistent (no submissions, ranges outside the gradient, zero samples).
	#[error("stage {stage}: malformed record: {reason}")]
	Malformed {
		/// Stage.
		stage: u16,
		/// What is wrong.
		reason: String,
	},
	/// The agreed shard hashes differ from the chain's manifest.
	#[error("stage {stage}: manifest does not match the chain: {reason}")]
	ManifestMismatch {
		/// Stage.
		stage: u16,
		/// What differs.
		reason: String,
	},
	/// No audited copy matched the recomputation, so no reducer is blamed.
	#[error("stage {stage}: reduction convention unconfirmed ({copies} copies differ from the recomputation)")]
	Unconfirmed {
		/// Stage.
		stage: u16,
		/// Copies that differed.
		copies: usize,
	},
}

impl AuditInconclusive {
	/// A short stable label (metrics).
	pub fn kind(&self) -> &'static str {
		match self {
			AuditInconclusive::Unavailable { .. } => "unavailable",
			AuditInconclusive::Garbage { .. } => "garbage_object",
			AuditInconclusive::Malformed { .. } => "malformed_record",
			AuditInconclusive::ManifestMismatch { .. } => "manifest_mismatch",
			AuditInconclusive::Unconfirmed { .. } => "unconfirmed",
		}
	}
}

/// The audit of one epoch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuditReport {
	/// Verdicts on reducers.
	pub findings: Vec<ShardFinding>,
	/// What could not be judged.
	pub inconclusive: Vec<AuditInconclusive>,
	/// Shards recomputed.
	pub shards_recomputed: usize,
}

/// Audits every stage of `record` (module docs). `chain_shards` holds, per stage, the shard hashes of
/// the chain's merge manifest for this epoch (stages absent from it are not compared).
pub async fn audit_epoch(
	record: &EpochRecord,
	epoch_seed: &Seed,
	chain_shards: &BTreeMap<u16, Vec<ContentHash>>,
	layout: &MergeLayout,
	objects: &dyn Objects,
) -> AuditReport {
	let mut report = AuditReport::default();
	let stages: BTreeSet<u16> = record.shard_copies.iter().map(|c| c.stage).collect();
	for stage in stages {
		audit_stage(
			record,
			stage,
			epoch_seed,
			chain_shards.get(&stage),
			layout,
			objects,
			&mut report,
		)
		.await;
	}
	report
}

async fn audit_stage(
	record: &EpochRecord,
	stage: u16,
	epoch_seed: &Seed,
	chain: Option<&Vec<ContentHash>>,
	layout: &MergeLayout,
	objects: &dyn Objects,
	report: &mut AuditReport,
) {
	let malformed = |reason: String| AuditInconclusive::Malformed { stage, reason };
	let codec = layout.codec;
	let Some(&p) = layout.param_counts.get(usize::from(stage)) else {
		report
			.inconclusive
			.push(malformed(format!("stage {stage} is not in the run spec")));
		return;
	};
	let whole = iota_protocol::submission_len(codec, p);
	// The final round: the largest round with copies.
	let Some(round) =
		record.shard_copies.iter().filter(|c| c.stage == stage).map(|c| c.round).max()
	else {
		return;
	};
	let copies: Vec<&ShardCopy> = record
		.shard_copies
		.iter()
		.filter(|c| c.stage == stage && c.round == round)
		.collect();
	let subs: Vec<&StageSubmission> = record
		.submissions
		.iter()
		.filter(|s| s.stage == stage && s.round == round)
		.collect();
	if subs.is_empty() {
		report
			.inconclusive
			.push(malformed(format!("round {round} has shard copies but no submissions")));
		return;
	}

	// The agreed hash per shard vs the chain's manifest.
	let mismatched: BTreeSet<u32> = record
		.shard_mismatches
		.iter()
		.filter(|m| m.stage == stage && m.round == round)
		.map(|m| m.shard)
		.collect();
	let mut by_shard: BTreeMap<u32, Vec<&ShardCopy>> = BTreeMap::new();
	for c in &copies {
		by_shard.entry(c.shard).or_default().push(c);
	}
	if let Some(chain) = chain {
		for (shard, cs) in &by_shard {
			let expected = chain.get(*shard as usize);
			if !mismatched.contains(shard) && cs.iter().any(|c| Some(&c.object.hash) != expected) {
				report.inconclusive.push(AuditInconclusive::ManifestMismatch {
					stage,
					reason: format!("shard {shard}: copy hash not the manifest's {expected:?}"),
				});
			}
		}
	}

	// Which shards to recompute.
	let agreeing: Vec<u32> = by_shard.keys().copied().filter(|s| !mismatched.contains(s)).collect();
	let mut chosen: BTreeSet<u32> =
		mismatched.iter().copied().filter(|s| by_shard.contains_key(s)).collect();
	chosen.extend(iota_protocol::selection::audited_shards(
		epoch_seed,
		record.epoch,
		stage,
		agreeing,
	));
	if chosen.is_empty() {
		return;
	}

	// Load the submissions (hash-checked, chunk hashes and sizes consistent).
	let mut loaded: Vec<(Bytes, u32, &StageSubmission)> = Vec::with_capacity(subs.len());
	for s in &subs {
		let o = &s.source.object;
		match objects.get(&o.key, &o.hash).await {
			Ok(b) => {
				if b.len() as u64 != whole || chunk_hashes_of(codec, &b, p) != s.source.chunk_hashes
				{
					report.inconclusive.push(AuditInconclusive::Garbage {
						stage,
						reason: format!(
							"submission {} does not match its chunk hashes or is not {whole} bytes",
							o.key
						),
					});
					return;
				}
				loaded.push((b, s.source.samples, s));
			},
			Err(FetchError::Unavailable { key, reason }) => {
				report.inconclusive.push(AuditInconclusive::Unavailable {
					stage,
					reason: format!("{key}: {reason}"),
				});
				return;
			},
			Err(e) => {
				report
					.inconclusive
					.push(AuditInconclusive::Garbage { stage, reason: e.to_string() });
				return;
			},
		}
	}
	let listed: Vec<(&[u8], u32, &[ContentHash])> = loaded
		.iter()
		.map(|(b, n, s)| (b.as_ref(), *n, s.source.chunk_hashes.as_slice()))
		.collect();
	let mut sorted_idx: Vec<usize> = (0..loaded.len()).collect();
	sorted_idx.sort_by(|&a, &b| loaded[a].2.source.miner.0.cmp(&loaded[b].2.source.miner.0));
	let sorted: Vec<(&[u8], u32, &[ContentHash])> = sorted_idx.iter().map(|&i| listed[i]).collect();
	let sub_entries: Vec<ObjectEntry> = loaded
		.iter()
		.map(|(_, _, s)| ObjectEntry {
			key: s.source.object.key.clone(),
			hash: s.source.object.hash,
		})
		.collect();

	let mut pending: Vec<ShardFinding> = Vec::new();
	let mut confirmed = false;
	for shard in chosen {
		let cs = &by_shard[&shard];
		let [start, end] = cs[0].range;
		if end > p || start >= end || cs.iter().any(|c| c.range != [start, end]) {
			report.inconclusive.push(malformed(format!(
				"shard {shard} range {start}..{end} outside 0..{p} or inconsistent"
			)));
			continue;
		}
		let a = match reduce(codec, p, &listed, start, end) {
			Ok(a) => a,
			Err(e) => {
				report.inconclusive.push(malformed(format!("shard {shard}: {e}")));
				return;
			},
		};
		let b = reduce(codec, p, &sorted, start, end).unwrap_or_default();
		report.shards_recomputed += 1;
		for c in cs {
			let mut ev = ShardEvidence {
				stage,
				round,
				shard,
				range: [start, end],
				submissions: sub_entries.clone(),
				copy: ObjectEntry { key: c.object.key.clone(), hash: c.object.hash },
				recomputed: ContentHash::of(&a),
				mismatch: mismatched.contains(&shard),
				verdict: Verdict::Fail,
				reason: None,
			};
			match objects.get(&c.object.key, &c.object.hash).await {
				Ok(bytes) => {
					if bytes.as_ref() == a.as_slice() || bytes.as_ref() == b.as_slice() {
						ev.verdict = Verdict::Pass;
						confirmed = true;
					} else {
						ev.reason = Some(format!(
							"copy {} differs from the recomputed reduction",
							c.object.key
						));
					}
				},
				Err(FetchError::NotFound { key }) => {
					ev.reason = Some(format!("copy {key} is missing"))
				},
				Err(FetchError::HashMismatch { key, expected }) => {
					report.inconclusive.push(AuditInconclusive::Garbage {
						stage,
						reason: format!("{key} does not hash to {expected}"),
					});
					continue;
				},
				Err(FetchError::Unavailable { key, reason }) => {
					report.inconclusive.push(AuditInconclusive::Unavailable {
						stage,
						reason: format!("{key}: {reason}"),
					});
					continue;
				},
			}
			pending.push(ShardFinding { miner: c.miner.clone(), evidence: ev });
		}
	}
	if confirmed {
		report.findings.extend(pending);
	} else if !pending.is_empty() {
		report
			.inconclusive
			.push(AuditInconclusive::Unconfirmed { stage, copies: pending.len() });
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::objects::MemoryObjects;
	use iota_rpc::types::{ObjectGet, ShardMismatch, SubmissionSource};
	use iota_storage::{Method, PresignedRequest};

	const F: MergeCodec = MergeCodec::F32;

	fn le_bytes(v: &[f32]) -> Vec<u8> {
		iota_protocol::f32le::to_bytes(v)
	}

	fn hashes(b: &[u8]) -> Vec<ContentHash> {
		chunk_hashes_of(F, b, b.len() as u64 / 4)
	}

	fn values(b: &[u8]) -> Vec<f32> {
		iota_protocol::f32le::from_bytes(b).unwrap()
	}

	fn acc(i: u8) -> AccountId {
		AccountId::from([i; 32])
	}

	fn get(key: &str, hash: ContentHash, size: u64) -> ObjectGet {
		ObjectGet {
			key: key.into(),
			hash,
			size,
			get: PresignedRequest {
				method: Method::Get,
				url: "http://x".into(),
				headers: vec![],
				expires_at: 0,
			},
		}
	}

	/// A stage with 3 members (3 shards over P = 30 elements), every copy honest; `corrupt` = (shard,
	/// member index of the copy's writer) whose copy is altered (and recorded as a mismatch).
	fn world(
		objects: &MemoryObjects,
		corrupt: Option<(u32, usize)>,
	) -> (EpochRecord, Vec<ContentHash>) {
		let p = 30u64;
		let members = [acc(3), acc(1), acc(2)];
		let samples = [3u32, 5, 2];
		let mut submissions = Vec::new();
		for (i, m) in members.iter().enumerate() {
			let v: Vec<f32> =
				(0..p).map(|j| ((j as f32) * 0.37 + i as f32).sin() * (i + 1) as f32).collect();
			let bytes = le_bytes(&v);
			let key = format!("sub{i}");
			let hash = objects.put(&key, bytes.clone());
			submissions.push(StageSubmission {
				stage: 1,
				round: 0,
				source: SubmissionSource {
					miner: m.clone(),
					samples: samples[i],
					object: get(&key, hash, p * 4),
					chunk_hashes: hashes(&bytes),
				},
			});
		}
		let subs: Vec<(Vec<u8>, u32)> = (0..3)
			.map(|i| {
				(
					le_bytes(
						&(0..p)
							.map(|j| ((j as f32) * 0.37 + i as f32).sin() * (i + 1) as f32)
							.collect::<Vec<_>>(),
					),
					samples[i],
				)
			})
			.collect();
		let hashes: Vec<Vec<ContentHash>> = subs.iter().map(|(b, _)| hashes(b)).collect();
		let refs: Vec<(&[u8], u32, &[ContentHash])> = subs
			.iter()
			.zip(&hashes)
			.map(|((b, n), h)| (b.as_slice(), *n, h.as_slice()))
			.collect();
		let (mut copies, mut mismatches, mut chain) = (Vec::new(), Vec::new(), Vec::new());
		let owners = [(0usize, 1usize), (0, 2), (1, 2)];
		for (k, (a, b)) in owners.iter().enumerate() {
			let range = [k as u64 * 10, k as u64 * 10 + 10];
			let honest = reduce(F, p, &refs, range[0], range[1]).unwrap();
			let mut shard_copies = Vec::new();
			for &w in &[*a, *b] {
				let mut bytes = honest.clone();
				if corrupt == Some((k as u32, w)) {
					bytes[0] ^= 1;
				}
				let key = format!("shard{k}-{w}");
				let hash = objects.put(&key, bytes);
				shard_copies.push(ShardCopy {
					stage: 1,
					round: 0,
					shard: k as u32,
					range,
					miner: members[w].clone(),
					object: get(&key, hash, 40),
				});
			}
			if shard_copies[0].object.hash != shard_copies[1].object.hash {
				mismatches.push(ShardMismatch {
					stage: 1,
					round: 0,
					shard: k as u32,
					copies: shard_copies.clone(),
				});
			}
			chain.push(ContentHash::of(&honest));
			copies.extend(shard_copies);
		}
		let record = EpochRecord {
			epoch: 4,
			pathway_log: None,
			shard_mismatches: mismatches,
			shard_copies: copies,
			submissions,
			refused_vectors: vec![],
		};
		(record, chain)
	}

	fn audit(objects: &MemoryObjects, record: &EpochRecord, chain: &[ContentHash]) -> AuditReport {
		let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
		let chain = BTreeMap::from([(1u16, chain.to_vec())]);
		let layout = MergeLayout { codec: F, param_counts: vec![0, 30, 0] };
		rt.block_on(audit_epoch(record, &[9; 32], &chain, &layout, objects))
	}

	#[test]
	fn reduction_is_the_f64_weighted_mean() {
		let a = le_bytes(&[1.0, 2.0, 3.0]);
		let b = le_bytes(&[3.0, 0.5, f32::MAX]);
		let (ha, hb) = (hashes(&a), hashes(&b));
		let out = values(&reduce(F, 3, &[(&a, 1, &ha), (&b, 3, &hb)], 0, 3).unwrap());
		assert_eq!(out[0], 1.0);
		assert_eq!(out[1], 0.625);
		assert_eq!(out[2], ((3.0f64 + f64::from(f32::MAX)) / 4.0) as f32);
		assert_eq!(values(&reduce(F, 3, &[(&a, 1, &ha)], 1, 2).unwrap()), vec![2.0]);
		assert!(matches!(reduce(F, 3, &[(&a, 0, &ha)], 0, 1), Err(MergeError::ZeroSamples)));
		assert!(matches!(reduce(F, 3, &[(&a, 1, &ha)], 0, 4), Err(MergeError::BadRange { .. })));
		// A listed chunk hash that is not the bytes' is refused, not reduced.
		assert!(matches!(reduce(F, 3, &[(&a, 1, &hb)], 0, 3), Err(MergeError::ChunkHash { .. })));
	}

	#[test]
	fn honest_copies_pass_sampled_audits() {
		let objects = MemoryObjects::default();
		let (record, chain) = world(&objects, None);
		let r = audit(&objects, &record, &chain);
		assert_eq!(r.shards_recomputed, SAMPLED_SHARDS);
		assert_eq!(r.findings.len(), 2 * SAMPLED_SHARDS);
		assert!(r.findings.iter().all(|f| f.evidence.verdict == Verdict::Pass), "{r:?}");
		assert!(r.inconclusive.is_empty(), "{r:?}");
	}

	#[test]
	fn the_wrong_copy_of_a_mismatch_is_named() {
		for (shard, writer) in [(0u32, 0usize), (0, 1), (1, 2), (2, 1)] {
			let objects = MemoryObjects::default();
			let (record, chain) = world(&objects, Some((shard, writer)));
			let r = audit(&objects, &record, &chain);
			let fails: Vec<_> =
				r.findings.iter().filter(|f| f.evidence.verdict == Verdict::Fail).collect();
			assert_eq!(fails.len(), 1, "{r:?}");
			assert_eq!(fails[0].evidence.shard, shard);
			assert!(fails[0].evidence.mismatch);
			let members = [acc(3), acc(1), acc(2)];
			assert_eq!(fails[0].miner, members[writer]);
			// The other copy of the mismatched shard passes.
			assert!(r
				.findings
				.iter()
				.any(|f| f.evidence.shard == shard && f.evidence.verdict == Verdict::Pass));
		}
	}

	#[test]
	fn garbage_outages_and_unconfirmed_conventions_blame_nobody() {
		// A submission whose bytes do not hash to the record: inconclusive, no findings.
		let objects = MemoryObjects::default();
		let (record, chain) = world(&objects, Some((0, 0)));
		objects.put("sub1", vec![0; 120]);
		let r = audit(&objects, &record, &chain);
		assert!(r.findings.is_empty());
		assert_eq!(r.inconclusive[0].kind(), "garbage_object");

		// Unreachable store.
		let objects = MemoryObjects::default();
		let (record, chain) = world(&objects, Some((0, 0)));
		objects.unreachable.store(true, std::sync::atomic::Ordering::Relaxed);
		let r = audit(&objects, &record, &chain);
		assert!(r.findings.is_empty());
		assert_eq!(r.inconclusive[0].kind(), "unavailable");

		// Sample counts the validator reads differently from the reducers (a convention it got wrong):
		// nothing matches, so nobody is blamed.
		let objects = MemoryObjects::default();
		let (mut record, chain) = world(&objects, None);
		record.submissions[0].source.samples += 1;
		let r = audit(&objects, &record, &chain);
		assert!(r.findings.is_empty(), "{r:?}");
		assert!(r.inconclusive.iter().any(|i| i.kind() == "unconfirmed"));

		// A chain manifest that differs from the agreed copies is reported.
		let objects = MemoryObjects::default();
		let (record, mut chain) = world(&objects, None);
		chain[2] = ContentHash::of(b"other");
		let r = audit(&objects, &record, &chain);
		assert!(r.inconclusive.iter().any(|i| i.kind() == "manifest_mismatch"));

		// No submissions for the round: malformed.
		let objects = MemoryObjects::default();
		let (mut record, chain) = world(&objects, None);
		record.submissions.clear();
		let r = audit(&objects, &record, &chain);
		assert_eq!(r.inconclusive[0].kind(), "malformed_record");
	}

	#[test]
	fn a_missing_copy_fails_its_reducer() {
		let objects = MemoryObjects::default();
		let (record, chain) = world(&objects, Some((1, 0)));
		objects.remove("shard1-0");
		let r = audit(&objects, &record, &chain);
		let fail = r.findings.iter().find(|f| f.evidence.verdict == Verdict::Fail).unwrap();
		assert_eq!(fail.miner, acc(3));
		assert!(fail.evidence.reason.as_ref().unwrap().contains("missing"));
	}
}
