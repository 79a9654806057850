//! Refused merge vectors (docs/design.md §6, §7): the gradient submissions the orchestrator refused once
//! it read them (`iota_epochRecord`'s `refused_vectors`), checked again with the protocol's own
//! acceptance rule ([`iota_protocol::accept_submission`], the one the orchestrator applied).
//!
//! A vector whose bytes break the rule by themselves (wrong length, a NaN/Inf value, a malformed
//! encoding) is a `Fail` of its sender: it was uploaded under the sender's key, which only the sender's
//! presigned PUT writes. A refusal over chunk hashes is not judged (the list is the orchestrator's
//! report of what the miner sent, not in the object), nor is a vector the rule accepts (the
//! orchestrator refused it for another reason, or wrongly: logged, never held against the miner). An
//! object that cannot be read is inconclusive, as is one a later upload to the same key replaced (its
//! bytes no longer hash to the record's).

use iota_primitives::Verdict;
use iota_protocol::{MergeCodec, Refused};
use iota_rpc::types::EpochRecord;
use iota_rpc::{AccountId, ObjectEntry};
use serde::{Deserialize, Serialize};

use crate::objects::{FetchError, Objects};

/// Evidence of one refused gradient submission checked again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorEvidence {
	/// Stage.
	pub stage: u16,
	/// Merge round.
	pub round: u32,
	/// The submitted object.
	pub object: ObjectEntry,
	/// The orchestrator's reason.
	pub refused_by_orchestrator: String,
	/// The acceptance rule's refusal, as this validator found it.
	pub refused: String,
	/// Always `Fail` (only a vector the rule refuses by its bytes is evidence).
	pub verdict: Verdict,
}

/// One judged sender.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorFinding {
	/// The sender.
	pub miner: AccountId,
	/// The evidence.
	pub evidence: VectorEvidence,
}

/// What [`audit_refused_vectors`] found: findings and, in words, what could not be judged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VectorReport {
	/// `Fail`s of senders.
	pub findings: Vec<VectorFinding>,
	/// Vectors not judged (unreadable, or not refused by their bytes).
	pub unjudged: Vec<String>,
}

/// Checks every refused vector of `record` with the acceptance rule for `codec` and the stage's
/// parameter count (`param_counts[stage]`, f32 elements) (module docs).
pub async fn audit_refused_vectors(
	record: &EpochRecord,
	codec: MergeCodec,
	param_counts: &[u64],
	objects: &dyn Objects,
) -> VectorReport {
	let mut report = VectorReport::default();
	for v in &record.refused_vectors {
		let o = &v.source.object;
		let what = format!("refused vector {} of {} at stage {}", o.key, v.source.miner, v.stage);
		let Some(&p) = param_counts.get(usize::from(v.stage)) else {
			report.unjudged.push(format!("{what}: no such stage"));
			continue;
		};
		let bytes = match objects.get(&o.key, &o.hash).await {
			Ok(b) => b,
			Err(FetchError::NotFound { .. }) => {
				report.unjudged.push(format!("{what}: object gone"));
				continue;
			},
			Err(e) => {
				report.unjudged.push(format!("{what}: {e}"));
				continue;
			},
		};
		match iota_protocol::accept_submission(codec, &bytes, &v.source.chunk_hashes, p) {
			Ok(_) => report.unjudged.push(format!("{what}: the acceptance rule takes it")),
			Err(Refused::ChunkHash { .. }) => {
				report.unjudged.push(format!("{what}: refused over the reported chunk hashes"))
			},
			Err(e) => report.findings.push(VectorFinding {
				miner: v.source.miner.clone(),
				evidence: VectorEvidence {
					stage: v.stage,
					round: v.round,
					object: ObjectEntry { key: o.key.clone(), hash: o.hash },
					refused_by_orchestrator: v.reason.clone(),
					refused: e.to_string(),
					verdict: Verdict::Fail,
				},
			}),
		}
	}
	report
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::objects::MemoryObjects;
	use iota_primitives::ContentHash;
	use iota_rpc::types::{chunk_hashes, ObjectGet, RefusedVector, SubmissionSource};
	use iota_storage::{Method, PresignedRequest};

	fn refused(
		objects: &MemoryObjects,
		key: &str,
		values: &[f32],
		list: Option<Vec<ContentHash>>,
	) -> RefusedVector {
		let bytes = iota_protocol::f32le::to_bytes(values);
		let chunks =
			list.unwrap_or_else(|| chunk_hashes(MergeCodec::F32, &bytes, values.len() as u64));
		let hash = objects.put(key, bytes.clone());
		RefusedVector {
			stage: 1,
			round: 0,
			source: SubmissionSource {
				miner: AccountId::from([key.len() as u8; 32]),
				samples: 4,
				object: ObjectGet {
					key: key.into(),
					hash,
					size: bytes.len() as u64,
					get: PresignedRequest {
						method: Method::Get,
						url: "http://x".into(),
						headers: vec![],
						expires_at: 0,
					},
				},
				chunk_hashes: chunks,
			},
			reason: "orchestrator's words".into(),
		}
	}

	#[test]
	fn a_vector_refused_by_its_bytes_fails_its_sender_and_nothing_else_does() {
		let objects = MemoryObjects::default();
		let p = 8u64;
		let mut nan = vec![0.5f32; p as usize];
		nan[3] = f32::NAN;
		let record = EpochRecord {
			epoch: 2,
			pathway_log: None,
			shard_mismatches: vec![],
			shard_copies: vec![],
			submissions: vec![],
			refused_vectors: vec![
				refused(&objects, "a", &nan, None),
				refused(&objects, "bb", &[0.5; 7], None),
				refused(&objects, "ccc", &[0.5; 8], None),
				refused(&objects, "dddd", &[0.5; 8], Some(vec![ContentHash::of(b"x")])),
			],
		};
		let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
		let r = rt.block_on(audit_refused_vectors(&record, MergeCodec::F32, &[4, p, 4], &objects));
		let failed: Vec<u8> = r.findings.iter().map(|f| f.miner.0[0]).collect();
		assert_eq!(failed, vec![1, 2], "the NaN vector and the short one: {r:?}");
		assert!(r.findings.iter().all(|f| f.evidence.verdict == Verdict::Fail));
		assert!(r.findings[0].evidence.refused.to_lowercase().contains("finite"), "{r:?}");
		assert_eq!(r.unjudged.len(), 2, "an acceptable vector, a chunk-hash refusal: {r:?}");
		// A vector whose object is gone is not judged either.
		let gone = MemoryObjects::default();
		let r = rt.block_on(audit_refused_vectors(&record, MergeCodec::F32, &[4, p, 4], &gone));
		assert!(r.findings.is_empty() && r.unjudged.len() == 4);
	}
}
