//! The run spec: everything a miner or validator must agree on to compute the same thing (model config,
//! init seed, wire encoding, optimizer, micro-batch size, data manifest). It is stored as JSON in the
//! bucket (`iota_storage::keys::run_spec`) and its BLAKE3 is the chain's `RunConfig::model_hash`, so a
//! party that fetched it from anywhere checks it against the chain before trusting it.
//!
//! Data (docs/design.md §3 step 2, fixing the reference's per-head shuffled streams): the corpus is tokenized
//! once into rows of `seq_len + 1` tokens, shuffled with the run seed, and cut into shards of
//! `rows_per_shard` rows (a multiple of `batch_rows`). Sample `s` is the micro-batch of rows
//! `(s · batch_rows) mod total_rows ..+ batch_rows`, so every sample lies in one shard and anyone can
//! say which tokens a sample had.

use iota_primitives::ContentHash;
use iota_protocol::codec::MergeCodec;
use iota_protocol::encoding::Encoding;
use iota_protocol::optim::AdamW;
use iota_protocol::optim::StepOptions;
use iota_protocol::optim::Training;
use iota_protocol::ModelConfig;
use serde::{Deserialize, Serialize};

/// A stored object named by key and content hash: the protocol's one object reference.
pub type SpecObject = iota_protocol::ObjectRef;

/// The tokenized corpus.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataManifest {
	/// The tokenizer (`tokenizer.json`).
	pub tokenizer: SpecObject,
	/// Tokens per row fed to the model (`T`); a stored row has `seq_len + 1` tokens (inputs and shifted
	/// targets).
	pub seq_len: u32,
	/// Rows per micro-batch (`B`): one sample.
	pub batch_rows: u32,
	/// Rows per shard (a multiple of `batch_rows`).
	pub rows_per_shard: u32,
	/// The shards, in order; each is `rows_per_shard · (seq_len + 1)` little-endian u32 tokens.
	pub shards: Vec<SpecObject>,
	/// The held-out set each merged model is evaluated on (docs/design.md §3, "Held-out loss"):
	/// rows of documents that no shard holds. `None` (and left out of the JSON, so older specs keep
	/// their hash) when the run has none.
	#[serde(default, skip_serializing_if = "Option::is_none")]
	pub heldout: Option<HeldOut>,
}

/// The held-out rows of a run: one object of `rows · (seq_len + 1)` little-endian u32 tokens, in the
/// shards' row format, cut from the last documents of the corpus, which the shards leave out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldOut {
	/// The rows.
	pub object: SpecObject,
	/// Rows in the object (at least 1).
	pub rows: u32,
}

/// A stage's initial weights (epoch 0) in a run started from an existing model (`prepare-data
/// --init-from`, issue 20 item 2): a stage checkpoint in the spec's training mode (parameters in f32
/// and a fresh optimizer state, `Stage::to_checkpoint`), loaded by every replica, validator and
/// evaluator only if its state hashes to `state` (`Stage::load_checkpoint`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitStage {
	/// The checkpoint object (`iota_storage::keys::init_checkpoint`).
	pub checkpoint: SpecObject,
	/// Its state hash (`Stage::state_hash`): what the stage holds at the start of epoch 0.
	pub state: ContentHash,
}

/// Where a sample's rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleLocation {
	/// Shard index.
	pub shard: u32,
	/// First row within the shard.
	pub row_offset: u32,
	/// Rows (`batch_rows`).
	pub rows: u32,
}

/// Why a data shard or spec is refused.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
	/// The JSON does not parse or does not describe a usable run.
	#[error("invalid run spec: {0}")]
	Invalid(String),
	/// The spec's hash differs from the chain's `model_hash`.
	#[error("run spec hash {got} does not match the chain's model_hash {expected}")]
	HashMismatch {
		/// From chain.
		expected: ContentHash,
		/// Of the bytes received.
		got: ContentHash,
	},
	/// A data shard has the wrong size or out-of-vocabulary tokens.
	#[error("data shard {shard}: {reason}")]
	BadShard {
		/// Shard index.
		shard: u32,
		/// What is wrong.
		reason: String,
	},
}

impl DataManifest {
	/// Rows in the whole corpus.
	pub fn total_rows(&self) -> u64 {
		u64::from(self.rows_per_shard) * self.shards.len() as u64
	}

	/// Bytes of one shard.
	pub fn shard_bytes(&self) -> u64 {
		u64::from(self.rows_per_shard) * (u64::from(self.seq_len) + 1) * 4
	}

	/// The rows of sample `sample` (see the module docs). `None` for an empty manifest.
	pub fn locate(&self, sample: u64) -> Option<SampleLocation> {
		let total = self.total_rows();
		if total == 0
			|| self.batch_rows == 0
			|| !self.rows_per_shard.is_multiple_of(self.batch_rows)
		{
			return None;
		}
		// `total` is a multiple of batch_rows, so a sample never wraps inside itself.
		let start = sample.checked_mul(u64::from(self.batch_rows))? % total;
		let rps = u64::from(self.rows_per_shard);
		Some(SampleLocation {
			shard: (start / rps) as u32,
			row_offset: (start % rps) as u32,
			rows: self.batch_rows,
		})
	}

	/// Decodes shard `shard`'s bytes into tokens, checking size and that every token is below `vocab`.
	///
	/// # Errors
	/// [`SpecError::BadShard`].
	pub fn decode_shard(
		&self,
		shard: u32,
		bytes: &[u8],
		vocab: usize,
	) -> Result<Vec<u32>, SpecError> {
		if bytes.len() as u64 != self.shard_bytes() {
			return Err(SpecError::BadShard {
				shard,
				reason: format!("{} bytes, expected {}", bytes.len(), self.shard_bytes()),
			});
		}
		let tokens: Vec<u32> = bytes
			.chunks_exact(4)
			.map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
			.collect();
		if let Some(i) = tokens.iter().position(|&t| t as usize >= vocab) {
			return Err(SpecError::BadShard {
				shard,
				reason: format!("token {} at {i} >= vocab {vocab}", tokens[i]),
			});
		}
		Ok(tokens)
	}

	/// Decodes the held-out object's bytes into `rows · (seq_len + 1)` tokens, checking size and that
	/// every token is below `vocab`.
	///
	/// # Errors
	/// [`SpecError::Invalid`] when the manifest has no held-out set; [`SpecError::BadShard`] (shard
	/// index `u32::MAX`) for a wrong size or an out-of-vocabulary token.
	pub fn decode_heldout(&self, bytes: &[u8], vocab: usize) -> Result<Vec<u32>, SpecError> {
		let h = self
			.heldout
			.as_ref()
			.ok_or_else(|| SpecError::Invalid("the run has no held-out set".into()))?;
		let expected = u64::from(h.rows) * (u64::from(self.seq_len) + 1) * 4;
		let bad = |reason: String| SpecError::BadShard { shard: u32::MAX, reason };
		if bytes.len() as u64 != expected {
			return Err(bad(format!("held-out set: {} bytes, expected {expected}", bytes.len())));
		}
		let tokens: Vec<u32> = bytes
			.chunks_exact(4)
			.map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
			.collect();
		if let Some(i) = tokens.iter().position(|&t| t as usize >= vocab) {
			return Err(bad(format!("held-out token {} at {i} >= vocab {vocab}", tokens[i])));
		}
		Ok(tokens)
	}

	/// The `rows · (seq_len + 1)` tokens of a located sample, from its decoded shard.
	pub fn sample_tokens<'a>(&self, tokens: &'a [u32], loc: SampleLocation) -> Option<&'a [u32]> {
		let w = self.seq_len as usize + 1;
		let start = loc.row_offset as usize * w;
		tokens.get(start..start + loc.rows as usize * w)
	}
}

/// Learning-rate schedule over epochs (one optimizer step per epoch): linear warm-up, then cosine decay
/// to `min_ratio · peak` at `total_epochs`, constant after.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LrSchedule {
	/// Peak learning rate.
	pub peak: f32,
	/// Warm-up epochs.
	pub warmup_epochs: u32,
	/// Epochs of the decay.
	pub total_epochs: u32,
	/// Final learning rate as a share of the peak.
	pub min_ratio: f32,
}

impl LrSchedule {
	/// The learning rate of epoch `epoch`'s step.
	pub fn lr(&self, epoch: u32) -> f32 {
		iota_protocol::optim::cosine_lr(
			epoch as usize,
			self.total_epochs.max(1) as usize,
			self.warmup_epochs as usize,
			self.peak,
			self.min_ratio,
		)
	}
}

/// The run spec (module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
	/// Run id (the bucket's `v1/runs/{run}/` scope).
	pub run: String,
	/// The model, cut into stages (its stage count equals the chain's `RunConfig::stages`).
	pub model: ModelConfig,
	/// Seed of the initial weights (epoch 0) and of the data shuffle.
	pub seed: u64,
	/// Wire encoding of activations and activation gradients (`f32`, `bf16`, `u8`).
	pub encoding: String,
	/// AdamW hyper-parameters (its `lr` is replaced by the schedule's).
	pub adamw: AdamW,
	/// Learning-rate schedule.
	pub lr: LrSchedule,
	/// Global gradient clipping norm (`None`: off); each stage clips at its share.
	pub max_norm: Option<f32>,
	/// How merge vectors travel and are hashed (docs/design.md §6): `f32` (exact, the default; left out
	/// of the JSON so older specs keep their hash), `int8` or top-k.
	#[serde(default, skip_serializing_if = "MergeCodec::is_f32")]
	pub merge_codec: MergeCodec,
	/// How replicas train between merges (docs/design.md §3): `sync` (one AdamW step per epoch, exact;
	/// the default, left out of the JSON so older specs keep their hash) or `local` (inner AdamW steps,
	/// pseudo-gradient merges, an outer Nesterov step).
	#[serde(default, skip_serializing_if = "Training::is_sync")]
	pub training: Training,
	/// The data.
	pub data: DataManifest,
	/// Initial weights, one per stage in stage order, when the run continues an existing model;
	/// `None` (left out of the JSON, so older specs keep their hash): weights from `seed`.
	#[serde(default, skip_serializing_if = "Option::is_none")]
	pub init: Option<Vec<InitStage>>,
}

impl RunSpec {
	/// The spec's canonical bytes (pretty JSON, as stored).
	pub fn to_bytes(&self) -> Vec<u8> {
		serde_json::to_vec_pretty(self).unwrap_or_default()
	}

	/// BLAKE3 of [`to_bytes`](Self::to_bytes): the chain's `model_hash`.
	pub fn hash(&self) -> ContentHash {
		ContentHash::of(&self.to_bytes())
	}

	/// Parses stored bytes, checks them against the chain's `model_hash` and validates the spec.
	///
	/// # Errors
	/// [`SpecError::HashMismatch`], [`SpecError::Invalid`].
	pub fn from_bytes_checked(bytes: &[u8], model_hash: &ContentHash) -> Result<Self, SpecError> {
		let got = ContentHash::of(bytes);
		if &got != model_hash {
			return Err(SpecError::HashMismatch { expected: *model_hash, got });
		}
		let spec: RunSpec =
			serde_json::from_slice(bytes).map_err(|e| SpecError::Invalid(e.to_string()))?;
		spec.validate()?;
		Ok(spec)
	}

	/// Checks the model config, the encoding and the data manifest's shape.
	///
	/// # Errors
	/// [`SpecError::Invalid`] naming the first problem.
	pub fn validate(&self) -> Result<(), SpecError> {
		self.model.validate().map_err(|e| SpecError::Invalid(e.to_string()))?;
		self.wire_encoding()?;
		self.merge_codec.validate().map_err(SpecError::Invalid)?;
		self.training.validate().map_err(SpecError::Invalid)?;
		let d = &self.data;
		if d.batch_rows == 0
			|| d.rows_per_shard == 0
			|| !d.rows_per_shard.is_multiple_of(d.batch_rows)
		{
			return Err(SpecError::Invalid(format!(
				"rows_per_shard {} must be a positive multiple of batch_rows {}",
				d.rows_per_shard, d.batch_rows
			)));
		}
		if d.shards.is_empty() {
			return Err(SpecError::Invalid("no data shards".into()));
		}
		if d.heldout.as_ref().is_some_and(|h| h.rows == 0) {
			return Err(SpecError::Invalid("the held-out set has no rows".into()));
		}
		if let Some(init) = &self.init {
			if init.len() != self.model.n_stages() {
				return Err(SpecError::Invalid(format!(
					"{} initial stage checkpoints for {} stages",
					init.len(),
					self.model.n_stages()
				)));
			}
		}
		if d.seq_len == 0 || d.seq_len as usize > self.model.max_seq_len {
			return Err(SpecError::Invalid(format!(
				"seq_len {} must be in 1..={}",
				d.seq_len, self.model.max_seq_len
			)));
		}
		Ok(())
	}

	/// The initial weights of stage `stage` when the run continues an existing model; `None` for
	/// seeded weights (or a stage the spec does not have).
	pub fn init_of(&self, stage: u16) -> Option<&InitStage> {
		self.init.as_ref()?.get(usize::from(stage))
	}

	/// The wire encoding.
	///
	/// # Errors
	/// [`SpecError::Invalid`] for an unknown name.
	pub fn wire_encoding(&self) -> Result<Encoding, SpecError> {
		Encoding::parse(&self.encoding).map_err(|e| SpecError::Invalid(e.to_string()))
	}

	/// The optimizer options of epoch `epoch`'s step.
	pub fn step_options(&self, epoch: u32) -> StepOptions {
		StepOptions {
			adamw: AdamW { lr: self.lr.lr(epoch), ..self.adamw },
			max_norm: self.max_norm,
		}
	}

	/// Shape `[B, T, width]` of the tensor crossing the cut after `stage` (`width` is the bottleneck
	/// width, or `d_model` without bottleneck). Gradients crossing back have the same shape.
	pub fn boundary_shape(&self) -> [u64; 3] {
		[
			u64::from(self.data.batch_rows),
			u64::from(self.data.seq_len),
			self.model.wire_width() as u64,
		]
	}

	/// Tokens in one sample (`B · T`).
	pub fn tokens_per_sample(&self) -> u64 {
		u64::from(self.data.batch_rows) * u64::from(self.data.seq_len)
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	fn obj(i: u8) -> SpecObject {
		SpecObject { key: format!("k{i}"), hash: ContentHash::of(&[i]), size: 0 }
	}

	fn manifest(shards: u8) -> DataManifest {
		DataManifest {
			tokenizer: obj(0),
			seq_len: 4,
			batch_rows: 2,
			rows_per_shard: 6,
			shards: (1..=shards).map(obj).collect(),
			heldout: None,
		}
	}

	#[test]
	fn samples_tile_shards_and_wrap() {
		let m = manifest(2);
		assert_eq!(m.total_rows(), 12);
		assert_eq!(m.locate(0), Some(SampleLocation { shard: 0, row_offset: 0, rows: 2 }));
		assert_eq!(m.locate(2), Some(SampleLocation { shard: 0, row_offset: 4, rows: 2 }));
		assert_eq!(m.locate(3), Some(SampleLocation { shard: 1, row_offset: 0, rows: 2 }));
		assert_eq!(m.locate(6), m.locate(0), "wraps after total_rows / batch_rows samples");
		assert_eq!(manifest(0).locate(0), None);
	}

	#[test]
	fn heldout_decoding_checks_presence_size_and_vocab() {
		let mut m = manifest(1);
		assert!(matches!(m.decode_heldout(&[], 30), Err(SpecError::Invalid(_))));
		m.heldout = Some(HeldOut { object: obj(9), rows: 2 });
		let tokens: Vec<u32> = (0..10).collect();
		let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
		assert_eq!(m.decode_heldout(&bytes, 10).unwrap(), tokens);
		assert!(matches!(m.decode_heldout(&bytes, 9), Err(SpecError::BadShard { .. })));
		assert!(matches!(m.decode_heldout(&bytes[4..], 10), Err(SpecError::BadShard { .. })));
		// Left out of the JSON when absent (older specs keep their hash), kept when present.
		let text = serde_json::to_string(&manifest(1)).unwrap();
		assert!(!text.contains("heldout"), "{text}");
		let back: DataManifest = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
		assert_eq!(back, m);
	}

	#[test]
	fn shard_decoding_checks_size_and_vocab() {
		let m = manifest(1);
		let tokens: Vec<u32> = (0..30).collect();
		let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
		assert_eq!(m.decode_shard(0, &bytes, 30).unwrap(), tokens);
		assert!(matches!(m.decode_shard(0, &bytes, 29), Err(SpecError::BadShard { .. })));
		assert!(matches!(m.decode_shard(0, &bytes[4..], 30), Err(SpecError::BadShard { .. })));
		let loc = m.locate(1).unwrap();
		assert_eq!(m.sample_tokens(&tokens, loc).unwrap(), &tokens[10..20]);
	}

	#[test]
	fn spec_hash_is_checked_against_chain() {
		let spec = RunSpec {
			init: None,
			run: "r".into(),
			model: ModelConfig::tiny(),
			seed: 1,
			encoding: "f32".into(),
			adamw: AdamW::default(),
			lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
			max_norm: Some(1.0),
			merge_codec: Default::default(),
			training: Default::default(),
			data: manifest(1),
		};
		let bytes = spec.to_bytes();
		assert_eq!(RunSpec::from_bytes_checked(&bytes, &spec.hash()).unwrap(), spec);
		assert!(matches!(
			RunSpec::from_bytes_checked(&bytes, &ContentHash::of(b"other")),
			Err(SpecError::HashMismatch { .. })
		));
		let mut bad = spec.clone();
		bad.data.rows_per_shard = 5;
		assert!(matches!(
			RunSpec::from_bytes_checked(&bad.to_bytes(), &bad.hash()),
			Err(SpecError::Invalid(_))
		));
		assert_eq!(spec.boundary_shape(), [2, 4, 8]);
		// Sync mode stays out of the JSON (older specs keep their hash); local mode round-trips.
		assert!(!String::from_utf8(bytes).unwrap().contains("training"));
		let mut local = spec.clone();
		local.training = iota_protocol::optim::Training::IOTA_LOCAL;
		let bytes = local.to_bytes();
		assert_eq!(RunSpec::from_bytes_checked(&bytes, &local.hash()).unwrap(), local);
		assert_ne!(local.hash(), spec.hash());
	}
}
