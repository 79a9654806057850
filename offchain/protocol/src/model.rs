//! Model configuration: a serde Llama config with named presets, the stage cuts, and the parameter list
//! of each stage (names, shapes, initialisation, order). Every party must agree on these: the parameter
//! list fixes a stage's merge vector (length `P` and element order). The candle model (`iota-model`)
//! builds its tensors from them.
//!
//! Follows the field set of Hugging Face's `LlamaConfig` (vocab, hidden size, layers, heads,
//! key/value heads, intermediate size, RoPE θ, RMSNorm ε) plus two fields of ours: the
//! bottleneck width `b` at every cut (docs/design.md §5, reference §3.3) and the stage cuts as block ranges.

use serde::{Deserialize, Serialize};

/// Why a model config is refused.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
	/// The configuration is inconsistent (for example cuts that do not cover the blocks).
	#[error("invalid model config: {0}")]
	Config(String),
	/// The JSON could not be parsed.
	#[error("json: {0}")]
	Json(#[from] serde_json::Error),
}

type Result<T> = std::result::Result<T, ModelError>;

/// A Llama-style decoder cut into pipeline stages.
///
/// Stage `s` holds blocks `stages[s][0] .. stages[s][1]` (half-open). Stage 0 also holds the token
/// embedding, the last stage the final RMSNorm, the LM head and the loss. The ranges must be
/// non-empty, contiguous and cover `0 .. n_layers` ([`ModelConfig::validate`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
	/// Vocabulary size `V` (token ids are `0 .. V`).
	pub vocab_size: usize,
	/// Residual width `d_model` (HF `hidden_size`).
	pub d_model: usize,
	/// Number of decoder blocks.
	pub n_layers: usize,
	/// Query heads; `d_model / n_heads` is the head dimension and must be even (RoPE).
	pub n_heads: usize,
	/// Key/value heads (grouped-query attention); must divide `n_heads`.
	pub n_kv_heads: usize,
	/// SwiGLU hidden width (HF `intermediate_size`).
	pub ffn_dim: usize,
	/// RoPE base θ.
	pub rope_theta: f64,
	/// RMSNorm ε.
	pub norm_eps: f64,
	/// Longest sequence the RoPE tables cover (tokens per row `T` must not exceed it).
	pub max_seq_len: usize,
	/// Whether cuts carry the bottleneck; `false` is the uncompressed baseline (width `d_model` on the wire).
	pub bottleneck: bool,
	/// Bottleneck width `b` (`d_model / b` is the width compression ratio). Ignored when `bottleneck` is false.
	pub bottleneck_width: usize,
	/// Block range `[start, end)` of each stage.
	pub stages: Vec<[usize; 2]>,
}

/// Names accepted by [`ModelConfig::preset`].
pub const PRESETS: [&str; 4] = ["tiny", "small", "ref-1.5b", "ref-15b"];

impl ModelConfig {
	/// `tiny`: for tests, well under a second per step on one core (≈ 0.22 M parameters, 3 stages).
	pub fn tiny() -> Self {
		ModelConfig {
			vocab_size: 512,
			d_model: 64,
			n_layers: 4,
			n_heads: 4,
			n_kv_heads: 2,
			ffn_dim: 128,
			rope_theta: 10_000.0,
			norm_eps: 1e-5,
			max_seq_len: 64,
			bottleneck: true,
			bottleneck_width: 8,
			stages: vec![[0, 1], [1, 3], [3, 4]],
		}
	}

	/// `small`: the devnet default (≈ 15.8 M parameters, 4 stages), trains visibly on 2 CPU cores.
	///
	/// Width ratio 32 (`b = 12`) is chosen from `bench-compression` (crate docs, "Measured"):
	/// every bottleneck width cost about the same loss at the budgets measured (the cut itself
	/// costs ~2-3%), and 32x was at or below 16x in both runs, so the cheaper wire wins.
	pub fn small() -> Self {
		ModelConfig {
			vocab_size: 4096,
			d_model: 384,
			n_layers: 8,
			n_heads: 6,
			n_kv_heads: 2,
			ffn_dim: 1024,
			rope_theta: 10_000.0,
			norm_eps: 1e-5,
			max_seq_len: 256,
			bottleneck: true,
			bottleneck_width: 12,
			stages: vec![[0, 2], [2, 4], [4, 6], [6, 8]],
		}
	}

	/// Shape of the reference's 1.5 B run: Llama-3.2-1B geometry with an untied LM head
	/// (≈ 1.50 B parameters), 5 stages, width ratio 64. Built only to count parameters and wire bytes.
	pub fn ref_1_5b() -> Self {
		ModelConfig {
			vocab_size: 128_256,
			d_model: 2048,
			n_layers: 16,
			n_heads: 32,
			n_kv_heads: 8,
			ffn_dim: 8192,
			rope_theta: 500_000.0,
			norm_eps: 1e-5,
			max_seq_len: 2048,
			bottleneck: true,
			bottleneck_width: 32,
			stages: vec![[0, 4], [4, 7], [7, 10], [10, 13], [13, 16]],
		}
	}

	/// Shape of the reference's 15 B run (≈ 14.8 B parameters: d 5120, 40 blocks, GQA 40/8,
	/// SwiGLU 17 920), 8 stages, width ratio 64. Built only to count parameters and wire bytes.
	pub fn ref_15b() -> Self {
		ModelConfig {
			vocab_size: 128_256,
			d_model: 5120,
			n_layers: 40,
			n_heads: 40,
			n_kv_heads: 8,
			ffn_dim: 17_920,
			rope_theta: 500_000.0,
			norm_eps: 1e-5,
			max_seq_len: 2048,
			bottleneck: true,
			bottleneck_width: 80,
			stages: (0..8).map(|s| [5 * s, 5 * s + 5]).collect(),
		}
	}

	/// A preset by name (one of [`PRESETS`]).
	///
	/// # Errors
	/// [`ModelError::Config`] for an unknown name.
	pub fn preset(name: &str) -> Result<Self> {
		match name {
			"tiny" => Ok(Self::tiny()),
			"small" => Ok(Self::small()),
			"ref-1.5b" => Ok(Self::ref_1_5b()),
			"ref-15b" => Ok(Self::ref_15b()),
			other => Err(ModelError::Config(format!(
				"unknown preset {other:?}, expected one of {PRESETS:?}"
			))),
		}
	}

	/// Parse and validate a JSON config.
	///
	/// # Errors
	/// [`ModelError::Json`] for bad JSON, [`ModelError::Config`] when [`validate`](Self::validate) fails.
	pub fn from_json(text: &str) -> Result<Self> {
		let cfg: ModelConfig = serde_json::from_str(text)?;
		cfg.validate()?;
		Ok(cfg)
	}

	/// Check every invariant the model relies on.
	///
	/// # Errors
	/// [`ModelError::Config`] naming the first violated rule (zero sizes, heads that do not divide,
	/// an odd head dimension, a bottleneck wider than `d_model`, cuts that are empty, overlap,
	/// leave a gap or do not cover `0 .. n_layers`).
	pub fn validate(&self) -> Result<()> {
		let bad = |m: String| Err(ModelError::Config(m));
		for (name, v) in [
			("vocab_size", self.vocab_size),
			("d_model", self.d_model),
			("n_layers", self.n_layers),
			("n_heads", self.n_heads),
			("n_kv_heads", self.n_kv_heads),
			("ffn_dim", self.ffn_dim),
			("max_seq_len", self.max_seq_len),
		] {
			if v == 0 {
				return bad(format!("{name} must be > 0"));
			}
		}
		if self.vocab_size > u32::MAX as usize {
			return bad(format!("vocab_size {} does not fit u32 token ids", self.vocab_size));
		}
		if !self.d_model.is_multiple_of(self.n_heads) {
			return bad(format!(
				"d_model {} is not a multiple of n_heads {}",
				self.d_model, self.n_heads
			));
		}
		if !self.n_heads.is_multiple_of(self.n_kv_heads) {
			return bad(format!(
				"n_heads {} is not a multiple of n_kv_heads {}",
				self.n_heads, self.n_kv_heads
			));
		}
		if !self.head_dim().is_multiple_of(2) {
			return bad(format!("head dimension {} must be even for RoPE", self.head_dim()));
		}
		if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
			return bad(format!("rope_theta must be finite and > 0, got {}", self.rope_theta));
		}
		if !(self.norm_eps.is_finite() && self.norm_eps > 0.0) {
			return bad(format!("norm_eps must be finite and > 0, got {}", self.norm_eps));
		}
		if self.bottleneck && (self.bottleneck_width == 0 || self.bottleneck_width > self.d_model) {
			return bad(format!(
				"bottleneck_width must be in 1..={} (d_model), got {}",
				self.d_model, self.bottleneck_width
			));
		}
		if self.stages.is_empty() {
			return bad("stages must hold at least one block range".into());
		}
		let mut next = 0;
		for (s, &[a, b]) in self.stages.iter().enumerate() {
			if a != next {
				return bad(format!(
					"stage {s} starts at block {a}, expected {next} (cuts must be contiguous)"
				));
			}
			if b <= a {
				return bad(format!("stage {s} range [{a}, {b}) is empty"));
			}
			next = b;
		}
		if next != self.n_layers {
			return bad(format!(
				"stages cover blocks 0..{next}, expected 0..{} (n_layers)",
				self.n_layers
			));
		}
		Ok(())
	}

	/// Head dimension `d_model / n_heads`.
	pub fn head_dim(&self) -> usize {
		self.d_model / self.n_heads
	}

	/// Number of stages.
	pub fn n_stages(&self) -> usize {
		self.stages.len()
	}

	/// Width of the tensor that crosses each cut: `b` with the bottleneck, `d_model` without.
	pub fn wire_width(&self) -> usize {
		if self.bottleneck {
			self.bottleneck_width
		} else {
			self.d_model
		}
	}

	/// Width compression ratio `d_model / wire_width` (1 without the bottleneck).
	pub fn width_ratio(&self) -> f64 {
		self.d_model as f64 / self.wire_width() as f64
	}

	/// Same config with the bottleneck switched on at width `b` or off (`None`).
	pub fn with_bottleneck(mut self, b: Option<usize>) -> Self {
		match b {
			Some(b) => {
				self.bottleneck = true;
				self.bottleneck_width = b;
			},
			None => self.bottleneck = false,
		}
		self
	}

	/// Number of trainable parameters of stage `s` (counted from the same parameter list the
	/// model allocates, see [`param_specs`]).
	///
	/// # Errors
	/// [`ModelError::Config`] if `s` is not a stage index.
	pub fn stage_param_count(&self, s: usize) -> Result<usize> {
		Ok(param_specs(self, s)?.iter().map(|p| p.numel()).sum())
	}

	/// Number of trainable parameters of the whole model.
	///
	/// # Errors
	/// [`ModelError::Config`] if the config is invalid.
	pub fn total_param_count(&self) -> Result<usize> {
		self.validate()?;
		(0..self.n_stages()).map(|s| self.stage_param_count(s)).sum()
	}
}

/// How a parameter is initialised.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
	/// All ones (RMSNorm gains).
	Ones,
	/// Normal with mean 0 and this standard deviation.
	Normal(f32),
}

/// One trainable tensor of a stage: its name, shape, initialisation and whether AdamW decays it.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
	/// Hugging Face style name, e.g. `model.layers.0.mlp.up_proj.weight`.
	pub name: String,
	/// Shape (Linear weights are `[out, in]`).
	pub shape: Vec<usize>,
	/// Initialisation.
	pub init: Init,
	/// Weight decay applies (matrices other than the embedding); not to norms.
	pub decay: bool,
}

impl ParamSpec {
	/// Number of elements.
	pub fn numel(&self) -> usize {
		self.shape.iter().product()
	}
}

/// Initialisation standard deviation of weight matrices (GPT-2 / Llama convention).
pub const INIT_STD: f32 = 0.02;

/// The parameters of stage `s`, sorted by name (the order of flattening and of checkpoints).
///
/// # Errors
/// [`ModelError::Config`] if the config is invalid or `s` is not a stage index.
pub fn param_specs(cfg: &ModelConfig, s: usize) -> Result<Vec<ParamSpec>> {
	cfg.validate()?;
	let [start, end] = *cfg.stages.get(s).ok_or_else(|| {
		ModelError::Config(format!("stage {s} does not exist ({} stages)", cfg.n_stages()))
	})?;
	let (d, hd, ffn) = (cfg.d_model, cfg.head_dim(), cfg.ffn_dim);
	let resid_std = INIT_STD / ((2 * cfg.n_layers) as f32).sqrt();
	let mut v = Vec::new();
	let mut push = |name: String, shape: Vec<usize>, init: Init, decay: bool| {
		v.push(ParamSpec { name, shape, init, decay })
	};
	let last = cfg.n_stages() - 1;
	if s == 0 {
		push(
			"model.embed_tokens.weight".into(),
			vec![cfg.vocab_size, d],
			Init::Normal(INIT_STD),
			false,
		);
	}
	for i in start..end {
		let p = format!("model.layers.{i}");
		push(format!("{p}.input_layernorm.weight"), vec![d], Init::Ones, false);
		push(format!("{p}.post_attention_layernorm.weight"), vec![d], Init::Ones, false);
		push(
			format!("{p}.self_attn.q_proj.weight"),
			vec![cfg.n_heads * hd, d],
			Init::Normal(INIT_STD),
			true,
		);
		push(
			format!("{p}.self_attn.k_proj.weight"),
			vec![cfg.n_kv_heads * hd, d],
			Init::Normal(INIT_STD),
			true,
		);
		push(
			format!("{p}.self_attn.v_proj.weight"),
			vec![cfg.n_kv_heads * hd, d],
			Init::Normal(INIT_STD),
			true,
		);
		push(
			format!("{p}.self_attn.o_proj.weight"),
			vec![d, cfg.n_heads * hd],
			Init::Normal(resid_std),
			true,
		);
		push(format!("{p}.mlp.gate_proj.weight"), vec![ffn, d], Init::Normal(INIT_STD), true);
		push(format!("{p}.mlp.up_proj.weight"), vec![ffn, d], Init::Normal(INIT_STD), true);
		push(format!("{p}.mlp.down_proj.weight"), vec![d, ffn], Init::Normal(resid_std), true);
		if cfg.bottleneck && i == start && s > 0 {
			let b = cfg.bottleneck_width;
			push(
				format!("{p}.bottleneck_up.weight"),
				vec![d, b],
				Init::Normal(1.0 / (b as f32).sqrt()),
				true,
			);
		}
		if cfg.bottleneck && i + 1 == end && s < last {
			let b = cfg.bottleneck_width;
			push(format!("{p}.bottleneck_down.weight"), vec![b, d], Init::Normal(INIT_STD), true);
		}
	}
	if s == last {
		push("model.norm.weight".into(), vec![d], Init::Ones, false);
		push("lm_head.weight".into(), vec![cfg.vocab_size, d], Init::Normal(INIT_STD), true);
	}
	v.sort_by(|a, b| a.name.cmp(&b.name));
	Ok(v)
}

impl ModelConfig {
	/// Forward multiply-accumulates per token of the block range `[start, end)` placed as a stage
	/// (`first`: holds the embedding, `last`: holds the final norm and the LM head) at `seq_len`
	/// tokens per row.
	///
	/// Counted: every weight matrix the stage applies to each token (q, k, v, o, gate, up, down; the
	/// bottleneck's up projection unless `first`, its down projection unless `last`; the LM head if
	/// `last`), plus causal attention's two products per block (`QKᵀ` and `AV`, each
	/// `n_heads · head_dim` MACs per attended position, `(seq_len + 1) / 2` positions on average).
	/// The embedding is a lookup and norms, RoPE and SwiGLU's products are `O(d)`: not counted. The
	/// backward pass costs two matmuls per forward matmul (input and weight gradients), so forward +
	/// backward FLOPs are `6 ×` this figure for every stage alike, and balancing one balances the other.
	/// The matrix part equals the stage's 2-D parameters of [`param_specs`] other than the embedding
	/// (unit-tested).
	pub fn range_macs_per_token(
		&self,
		[start, end]: [usize; 2],
		first: bool,
		last: bool,
		seq_len: usize,
	) -> u64 {
		let (d, hd) = (self.d_model as u64, self.head_dim() as u64);
		let (h, kv, ffn) = (self.n_heads as u64, self.n_kv_heads as u64, self.ffn_dim as u64);
		let attn_positions = (seq_len as u64).div_ceil(2);
		let block = 2 * h * hd * d + 2 * kv * hd * d + 3 * ffn * d + 2 * h * hd * attn_positions;
		let mut macs = block * end.saturating_sub(start) as u64;
		let b = self.bottleneck_width as u64;
		if self.bottleneck && !first {
			macs += b * d;
		}
		if self.bottleneck && !last {
			macs += d * b;
		}
		if last {
			macs += self.vocab_size as u64 * d;
		}
		macs
	}

	/// Forward multiply-accumulates per token of stage `s` at `seq_len` tokens per row (see
	/// [`range_macs_per_token`](Self::range_macs_per_token)).
	///
	/// # Errors
	/// [`ModelError::Config`] if `s` is not a stage index.
	pub fn stage_macs_per_token(&self, s: usize, seq_len: usize) -> Result<u64> {
		let range = *self.stages.get(s).ok_or_else(|| {
			ModelError::Config(format!("stage {s} does not exist ({} stages)", self.n_stages()))
		})?;
		Ok(self.range_macs_per_token(range, s == 0, s + 1 == self.n_stages(), seq_len))
	}

	/// Stage cuts of `n_layers` blocks into `n_stages` contiguous ranges that minimise the largest
	/// stage's forward + backward cost ([`range_macs_per_token`](Self::range_macs_per_token) at
	/// `seq_len`): the slowest stage bounds a pipeline's throughput, and the LM head makes the last
	/// stage dearer than an even count of blocks suggests (issue 16 item 5; the reference cuts by
	/// block count). Exact minimax by dynamic programming over `(stages, blocks)`, `O(S · L²)`; among
	/// cuts with the same maximum the first found with the smallest split points wins, so every party
	/// computes the same cuts.
	///
	/// # Errors
	/// [`ModelError::Config`] if `n_stages` is 0 or exceeds `n_layers` (every stage holds a block).
	pub fn balanced_stages(&self, n_stages: usize, seq_len: usize) -> Result<Vec<[usize; 2]>> {
		let n = self.n_layers;
		if n_stages == 0 || n_stages > n {
			return Err(ModelError::Config(format!(
				"{n_stages} stages cannot each hold one of {n} blocks"
			)));
		}
		let cost = |a: usize, b: usize, s: usize| {
			self.range_macs_per_token([a, b], s == 0, s + 1 == n_stages, seq_len)
		};
		// best[s][b]: the smallest possible maximum over stages 0..=s when stage s ends at block b;
		// from[s][b]: where stage s starts in that optimum.
		let mut best = vec![vec![u64::MAX; n + 1]; n_stages];
		let mut from = vec![vec![0usize; n + 1]; n_stages];
		for (b, slot) in best[0].iter_mut().enumerate().skip(1) {
			*slot = cost(0, b, 0);
		}
		for s in 1..n_stages {
			for b in (s + 1)..=n {
				for a in s..b {
					let prev = best[s - 1][a];
					if prev == u64::MAX {
						continue;
					}
					let m = prev.max(cost(a, b, s));
					if m < best[s][b] {
						best[s][b] = m;
						from[s][b] = a;
					}
				}
			}
		}
		let mut cuts = vec![[0, 0]; n_stages];
		let mut end = n;
		for s in (0..n_stages).rev() {
			let start = if s == 0 { 0 } else { from[s][end] };
			cuts[s] = [start, end];
			end = start;
		}
		Ok(cuts)
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	fn with_stages(mut c: ModelConfig, stages: Vec<[usize; 2]>) -> ModelConfig {
		c.stages = stages;
		c
	}

	/// Every contiguous cut of `n` blocks into `k` non-empty ranges.
	fn all_cuts(n: usize, k: usize) -> Vec<Vec<[usize; 2]>> {
		if k == 1 {
			return vec![vec![[0, n]]];
		}
		let mut out = Vec::new();
		for first_end in 1..=(n - (k - 1)) {
			for rest in all_cuts(n - first_end, k - 1) {
				let mut v = vec![[0, first_end]];
				v.extend(rest.iter().map(|&[a, b]| [a + first_end, b + first_end]));
				out.push(v);
			}
		}
		out
	}

	fn max_cost(c: &ModelConfig, seq_len: usize) -> u64 {
		(0..c.n_stages())
			.map(|s| c.stage_macs_per_token(s, seq_len).unwrap())
			.max()
			.unwrap()
	}

	#[test]
	fn matrix_macs_are_the_stage_parameter_list() {
		for preset in PRESETS {
			let c = ModelConfig::preset(preset).unwrap();
			for s in 0..c.n_stages() {
				let matrices: u64 = param_specs(&c, s)
					.unwrap()
					.iter()
					.filter(|p| p.shape.len() == 2 && p.name != "model.embed_tokens.weight")
					.map(|p| p.numel() as u64)
					.sum();
				// At seq_len 0 only the attention term (positions (0 + 1) / 2 = 0) drops out.
				assert_eq!(c.stage_macs_per_token(s, 0).unwrap(), matrices, "{preset} stage {s}");
			}
		}
		assert!(ModelConfig::tiny().stage_macs_per_token(3, 16).is_err());
	}

	#[test]
	fn balanced_cuts_are_the_exhaustive_minimax() {
		let mut configs = vec![ModelConfig::tiny(), ModelConfig::small()];
		// A wide vocabulary makes the head worth several blocks: the tail must get fewer blocks.
		let mut wide = ModelConfig::small();
		wide.vocab_size = 32_768;
		configs.push(wide);
		for base in configs {
			for k in 1..=base.n_layers.min(5) {
				for seq_len in [16, 256] {
					let cuts = base.balanced_stages(k, seq_len).unwrap();
					let got = with_stages(base.clone(), cuts.clone());
					got.validate().unwrap();
					let optimum = all_cuts(base.n_layers, k)
						.into_iter()
						.map(|v| max_cost(&with_stages(base.clone(), v), seq_len))
						.min()
						.unwrap();
					assert_eq!(max_cost(&got, seq_len), optimum, "{cuts:?} at k={k}, T={seq_len}");
				}
			}
		}
		assert!(ModelConfig::small().balanced_stages(0, 64).is_err());
		assert!(ModelConfig::small().balanced_stages(9, 64).is_err());
	}

	#[test]
	fn a_dear_head_moves_blocks_off_the_last_stage() {
		let mut wide = ModelConfig::small();
		wide.vocab_size = 32_768; // head = 32 768 · 384 MACs/token ≈ 7.9 blocks at ffn 1 024
		let cuts = wide.balanced_stages(3, 64).unwrap();
		assert_eq!(cuts.len(), 3);
		assert!(cuts[2][1] - cuts[2][0] < 8 / 3, "tail keeps fewer blocks: {cuts:?}");
		let even = with_stages(wide.clone(), vec![[0, 3], [3, 6], [6, 8]]);
		let balanced = with_stages(wide, cuts);
		assert!(max_cost(&balanced, 64) < max_cost(&even, 64));
	}

	#[test]
	fn the_presets_cuts_are_balanced_at_their_training_length() {
		// `small` (the devnet and bench preset) is minimax as cut; `tiny` is within one bottleneck
		// projection (512 MACs/token of ~83 k): its 2-block stage sits in the middle, where it pays
		// for two bottleneck projections instead of one.
		for (c, slack) in [(ModelConfig::small(), 0.0), (ModelConfig::tiny(), 0.01)] {
			let t = c.max_seq_len;
			let balanced = with_stages(c.clone(), c.balanced_stages(c.n_stages(), t).unwrap());
			let (as_cut, best) = (max_cost(&c, t) as f64, max_cost(&balanced, t) as f64);
			assert!(as_cut <= best * (1.0 + slack), "{:?}: {as_cut} vs {best}", c.stages);
		}
	}
}
