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
