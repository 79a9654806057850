//! The Llama-style decoder, cut into pipeline stages, with the bottleneck at every cut.
//!
//! Follows Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models"
//! (arXiv 2302.13971) and the shape of candle's `candle-transformers/src/models/llama.rs`:
//! pre-norm blocks with RMSNorm (Zhang & Sennrich 2019), rotary position embeddings
//! (Su et al. 2021, non-interleaved "rotate half" layout as in Hugging Face), grouped-query causal
//! attention (Ainslie et al. 2023) and a SwiGLU MLP (Shazeer 2020). Tensor names mirror Hugging
//! Face's (`model.layers.3.self_attn.q_proj.weight`), so a stage's weights are a name prefix of a
//! full checkpoint.
//!
//! Training needs gradients through every op, so this file uses only composed candle ops with a
//! backward: `rms_norm_slow`, `softmax` (not `softmax_last_dim`) and `rope_slow` (docs/design.md §9).
//!
//! Bottleneck (docs/design.md §5, reference §3.3 "uninterrupted residual flow"): the last block of a
//! non-final stage replaces `h + mlp(h)` by `down(silu(mlp(h))) + h[.., :b]` (`[B, T, b]` out);
//! the first block of a non-first stage lifts its `[B, T, b]` input `z` to `relu(up(z))` and adds
//! `z` back into the first `b` channels before the block runs.

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{Embedding, Linear, VarBuilder};
use rand::SeedableRng;
use rand_distr::Distribution;

use crate::config::ModelConfig;
use crate::error::{Error, Result};

pub use iota_protocol::model::{param_specs, Init, ParamSpec, INIT_STD};

/// Stable 64-bit FNV-1a hash, used to derive a per-parameter RNG stream from `(seed, name)`.
fn fnv1a(seed: u64, name: &str) -> u64 {
	let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
	for b in name.bytes() {
		h ^= b as u64;
		h = h.wrapping_mul(0x0100_0000_01b3);
	}
	h
}

/// Deterministic initial value of one parameter: ChaCha8 seeded from `(seed, name)`, so every
/// replica (and every stage split of the same model) gets identical weights on any machine.
///
/// # Errors
/// Candle errors creating the tensor.
pub fn init_tensor(spec: &ParamSpec, seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
	let n = spec.numel();
	let data: Vec<f32> = match spec.init {
		Init::Ones => vec![1.0; n],
		Init::Normal(std) => {
			let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(fnv1a(seed, &spec.name));
			let normal = rand_distr::Normal::new(0.0f32, std)
				.map_err(|e| Error::Config(format!("init std {std} for {}: {e}", spec.name)))?;
			(0..n).map(|_| normal.sample(&mut rng)).collect()
		},
	};
	Ok(Tensor::from_vec(data, spec.shape.as_slice(), device)?.to_dtype(dtype)?)
}

/// RMSNorm with a learned gain, `x / sqrt(mean(x²) + ε) · g` over the last dim.
#[derive(Clone, Debug)]
pub struct RmsNorm {
	weight: Tensor,
	eps: f32,
}

impl RmsNorm {
	/// Load gain `[d]` from `vb.get(d, "weight")`.
	pub fn load(vb: VarBuilder, d: usize, eps: f64) -> Result<Self> {
		Ok(RmsNorm { weight: vb.get(d, "weight")?, eps: eps as f32 })
	}
}

impl Module for RmsNorm {
	fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
		// The fused `candle_nn::ops::rms_norm` has no backward (docs/design.md §9).
		candle_nn::ops::rms_norm_slow(x, &self.weight, self.eps)
	}
}

/// RoPE tables `cos`, `sin`: `[max_seq_len, head_dim / 2]`.
#[derive(Clone, Debug)]
pub struct Rope {
	cos: Tensor,
	sin: Tensor,
}

impl Rope {
	/// Tables for `cfg` in `dtype` on `device`; angles `t · θ^(-2i/head_dim)` computed in f64.
	pub fn new(cfg: &ModelConfig, dtype: DType, device: &Device) -> Result<Self> {
		let hd = cfg.head_dim();
		let half = hd / 2;
		let mut cos = Vec::with_capacity(cfg.max_seq_len * half);
		let mut sin = Vec::with_capacity(cfg.max_seq_len * half);
		for t in 0..cfg.max_seq_len {
			for i in 0..half {
				let inv = cfg.rope_theta.powf(-((2 * i) as f64) / hd as f64);
				let a = t as f64 * inv;
				cos.push(a.cos());
				sin.push(a.sin());
			}
		}
		let shape = (cfg.max_seq_len, half);
		Ok(Rope {
			cos: Tensor::from_vec(cos, shape, device)?.to_dtype(dtype)?,
			sin: Tensor::from_vec(sin, shape, device)?.to_dtype(dtype)?,
		})
	}

	/// Rotate `x: [B, H, T, head_dim]` by position (T ≤ max_seq_len).
	pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
		// `rope` / `rope_i` are fused without backward; `rope_slow` is composed (docs/design.md §9).
		Ok(candle_nn::rotary_emb::rope_slow(x, &self.cos, &self.sin)?)
	}

	/// Rotate `x: [B, H, T, head_dim]` as positions `offset .. offset + T` (the new tokens after a
	/// KV cache of `offset`; `offset + T ≤ max_seq_len`).
	///
	/// # Errors
	/// [`Error::Config`] past the table's end; candle errors.
	pub fn apply_at(&self, x: &Tensor, offset: usize) -> Result<Tensor> {
		let max = self.cos.dim(0)?;
		if offset + x.dim(2)? > max {
			return Err(Error::Config(format!(
				"positions {offset}..{} are past the RoPE table's {max}",
				offset + x.dim(2)?
			)));
		}
		let (cos, sin) =
			(self.cos.narrow(0, offset, max - offset)?, self.sin.narrow(0, offset, max - offset)?);
		Ok(candle_nn::rotary_emb::rope_slow(x, &cos, &sin)?)
	}
}

/// Grouped-query causal self-attention.
#[derive(Clone, Debug)]
pub struct Attention {
	q: Linear,
	k: Linear,
	v: Linear,
	o: Linear,
	n_heads: usize,
	n_kv_heads: usize,
	head_dim: usize,
}

impl Attention {
	/// Load `q_proj`, `k_proj`, `v_proj`, `o_proj` under `vb`.
	pub fn load(vb: VarBuilder, cfg: &ModelConfig) -> Result<Self> {
		let (d, hd) = (cfg.d_model, cfg.head_dim());
		let lin = |o: usize, i: usize, n: &str| -> Result<Linear> {
			Ok(Linear::new(vb.pp(n).get((o, i), "weight")?, None))
		};
		Ok(Attention {
			q: lin(cfg.n_heads * hd, d, "q_proj")?,
			k: lin(cfg.n_kv_heads * hd, d, "k_proj")?,
			v: lin(cfg.n_kv_heads * hd, d, "v_proj")?,
			o: lin(d, cfg.n_heads * hd, "o_proj")?,
			n_heads: cfg.n_heads,
			n_kv_heads: cfg.n_kv_heads,
			head_dim: hd,
		})
	}

	/// `x: [B, T, d] -> [B, T, d]`, causal; `mask: [T, T]` with 0 on and below the diagonal, -inf above.
	pub fn forward(&self, x: &Tensor, rope: &Rope, mask: &Tensor) -> Result<Tensor> {
		let (b, t, _) = x.dims3()?;
		let heads = |y: Tensor, h: usize| -> Result<Tensor> {
			Ok(y.reshape((b, t, h, self.head_dim))?.transpose(1, 2)?.contiguous()?)
		};
		let q = rope.apply(&heads(self.q.forward(x)?, self.n_heads)?)?;
		let k = rope.apply(&heads(self.k.forward(x)?, self.n_kv_heads)?)?;
		let v = heads(self.v.forward(x)?, self.n_kv_heads)?;
		self.attend(q, k, v, mask)
	}

	/// Inference with a KV cache: `x: [B, T, d]`, the `T` tokens after the `offset` ones whose keys
	/// and values `cache` holds (`[B, kvH, offset, head_dim]` each; `None` when `offset` is 0), ->
	/// `[B, T, d]`; `cache` then holds all `offset + T`. `mask: [T, offset + T]` ([`causal_mask_at`]).
	///
	/// # Errors
	/// [`Error::Config`] for positions past the RoPE table or a cache of another length; candle errors.
	pub fn forward_cached(
		&self,
		x: &Tensor,
		rope: &Rope,
		offset: usize,
		mask: &Tensor,
		cache: &mut Option<(Tensor, Tensor)>,
	) -> Result<Tensor> {
		let (b, t, _) = x.dims3()?;
		let heads = |y: Tensor, h: usize| -> Result<Tensor> {
			Ok(y.reshape((b, t, h, self.head_dim))?.transpose(1, 2)?.contiguous()?)
		};
		let q = rope.apply_at(&heads(self.q.forward(x)?, self.n_heads)?, offset)?;
		let k = rope.apply_at(&heads(self.k.forward(x)?, self.n_kv_heads)?, offset)?;
		let v = heads(self.v.forward(x)?, self.n_kv_heads)?;
		let (k, v) = match cache.take() {
			Some((pk, pv)) if pk.dim(2)? == offset => {
				(Tensor::cat(&[&pk, &k], 2)?, Tensor::cat(&[&pv, &v], 2)?)
			},
			None if offset == 0 => (k, v),
			other => {
				return Err(Error::Config(format!(
					"a KV cache of {:?} positions for offset {offset}",
					other.map(|(k, _)| k.dim(2)).transpose()?
				)))
			},
		};
		*cache = Some((k.clone(), v.clone()));
		self.attend(q, k, v, mask)
	}

	/// Attention of queries `q: [B, H, T, hd]` over keys and values `[B, kvH, S, hd]` with the
	/// additive `mask: [T, S]` -> `[B, T, d]`.
	fn attend(&self, q: Tensor, k: Tensor, v: Tensor, mask: &Tensor) -> Result<Tensor> {
		let (b, _, t, _) = q.dims4()?;
		let rep = self.n_heads / self.n_kv_heads;
		let k = repeat_kv(&k, rep)?;
		let v = repeat_kv(&v, rep)?;
		let scale = 1.0 / (self.head_dim as f64).sqrt();
		let att = (q.matmul(&k.t()?)? * scale)?.broadcast_add(mask)?;
		// `softmax_last_dim` is fused without backward (docs/design.md §9).
		let att = candle_nn::ops::softmax(&att, D::Minus1)?;
		let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, self.n_heads * self.head_dim))?;
		Ok(self.o.forward(&y)?)
	}
}

/// `[B, kvH, T, D] -> [B, kvH·rep, T, D]`, each key/value head serving `rep` query heads.
fn repeat_kv(x: &Tensor, rep: usize) -> Result<Tensor> {
	if rep == 1 {
		return Ok(x.clone());
	}
	let (b, h, t, d) = x.dims4()?;
	Ok(x.unsqueeze(2)?.broadcast_as((b, h, rep, t, d))?.contiguous()?.reshape((
		b,
		h * rep,
		t,
		d,
	))?)
}

/// SwiGLU MLP `down(silu(gate(x)) · up(x))`.
#[derive(Clone, Debug)]
pub struct Mlp {
	gate: Linear,
	up: Linear,
	down: Linear,
}

impl Mlp {
	/// Load `gate_proj`, `up_proj`, `down_proj` under `vb`.
	pub fn load(vb: VarBuilder, cfg: &ModelConfig) -> Result<Self> {
		let (d, f) = (cfg.d_model, cfg.ffn_dim);
		Ok(Mlp {
			gate: Linear::new(vb.pp("gate_proj").get((f, d), "weight")?, None),
			up: Linear::new(vb.pp("up_proj").get((f, d), "weight")?, None),
			down: Linear::new(vb.pp("down_proj").get((d, f), "weight")?, None),
		})
	}
}

impl Module for Mlp {
	fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
		let g = self.gate.forward(x)?.silu()?;
		self.down.forward(&(g * self.up.forward(x)?)?)
	}
}

/// One decoder block, optionally with the bottleneck's up-projection at its entry and/or its
/// down-projection at its exit.
#[derive(Clone, Debug)]
pub struct Block {
	norm1: RmsNorm,
	attn: Attention,
	norm2: RmsNorm,
	mlp: Mlp,
	/// `[d, b]`: entry lift of a non-first stage's first block.
	up: Option<Linear>,
	/// `[b, d]`: exit projection of a non-final stage's last block.
	down: Option<Linear>,
	width: usize,
}

impl Block {
	/// Load block `vb` (= `model.layers.{i}`), with the bottleneck ends the flags ask for.
	pub fn load(vb: VarBuilder, cfg: &ModelConfig, entry: bool, exit: bool) -> Result<Self> {
		let (d, b) = (cfg.d_model, cfg.bottleneck_width);
		Ok(Block {
			norm1: RmsNorm::load(vb.pp("input_layernorm"), d, cfg.norm_eps)?,
			attn: Attention::load(vb.pp("self_attn"), cfg)?,
			norm2: RmsNorm::load(vb.pp("post_attention_layernorm"), d, cfg.norm_eps)?,
			mlp: Mlp::load(vb.pp("mlp"), cfg)?,
			up: if entry {
				Some(Linear::new(vb.pp("bottleneck_up").get((d, b), "weight")?, None))
			} else {
				None
			},
			down: if exit {
				Some(Linear::new(vb.pp("bottleneck_down").get((b, d), "weight")?, None))
			} else {
				None
			},
			width: b,
		})
	}

	/// `x: [B, T, b or d] -> [B, T, b or d]` (b-wide in when the block lifts, b-wide out when it projects).
	pub fn forward(&self, x: &Tensor, rope: &Rope, mask: &Tensor) -> Result<Tensor> {
		self.run(x, |h| self.attn.forward(h, rope, mask))
	}

	/// [`forward`](Self::forward) of the `T` tokens after `offset` cached ones
	/// ([`Attention::forward_cached`]; `mask: [T, offset + T]`).
	///
	/// # Errors
	/// As [`Attention::forward_cached`].
	pub fn forward_cached(
		&self,
		x: &Tensor,
		rope: &Rope,
		offset: usize,
		mask: &Tensor,
		cache: &mut Option<(Tensor, Tensor)>,
	) -> Result<Tensor> {
		self.run(x, |h| self.attn.forward_cached(h, rope, offset, mask, cache))
	}

	/// The block around its attention `attend` (of the normed stream).
	fn run(&self, x: &Tensor, attend: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
		let x = match &self.up {
			Some(up) => {
				let d = up.weight().dim(0)?;
				// relu(up(z)), then z added back into the first b channels.
				(up.forward(x)?.relu()? + x.pad_with_zeros(D::Minus1, 0, d - self.width)?)?
			},
			None => x.clone(),
		};
		let h = (&x + attend(&self.norm1.forward(&x)?)?)?;
		let f = self.mlp.forward(&self.norm2.forward(&h)?)?;
		Ok(match &self.down {
			Some(down) => (down.forward(&f.silu()?)? + h.narrow(D::Minus1, 0, self.width)?)?,
			None => (h + f)?,
		})
	}
}

/// Causal additive mask `[T, T]`: 0 where key ≤ query, -inf above the diagonal.
pub fn causal_mask(t: usize, dtype: DType, device: &Device) -> Result<Tensor> {
	causal_mask_at(t, 0, dtype, device)
}

/// Causal additive mask `[T, offset + T]` of `T` queries at positions `offset ..` over every key
/// from position 0: 0 where key ≤ query, -inf after.
pub fn causal_mask_at(t: usize, offset: usize, dtype: DType, device: &Device) -> Result<Tensor> {
	let s = offset + t;
	let m: Vec<f32> = (0..t)
		.flat_map(|i| (0..s).map(move |j| if j <= offset + i { 0.0 } else { f32::NEG_INFINITY }))
		.collect();
	Ok(Tensor::from_vec(m, (t, s), device)?.to_dtype(dtype)?)
}

/// A stage's KV cache for generation: per block, the keys and values `[B, kvH, S, head_dim]` of the
/// `S` positions seen so far (`None` before the first call).
pub type KvCache = Vec<Option<(Tensor, Tensor)>>;

/// The modules of one stage (weights shared with the stage's `Var`s).
#[derive(Clone, Debug)]
pub struct StageModules {
	embed: Option<Embedding>,
	blocks: Vec<Block>,
	norm: Option<RmsNorm>,
	lm_head: Option<Linear>,
	rope: Rope,
}

impl StageModules {
	/// Build stage `s` from `vb` (the model root: names are absolute, `model.layers.{i}...`).
	pub fn load(vb: VarBuilder, cfg: &ModelConfig, s: usize) -> Result<Self> {
		let [start, end] = cfg.stages[s];
		let last = cfg.n_stages() - 1;
		let embed = if s == 0 {
			Some(Embedding::new(
				vb.pp("model.embed_tokens").get((cfg.vocab_size, cfg.d_model), "weight")?,
				cfg.d_model,
			))
		} else {
			None
		};
		let blocks = (start..end)
			.map(|i| {
				let entry = cfg.bottleneck && s > 0 && i == start;
				let exit = cfg.bottleneck && s < last && i + 1 == end;
				Block::load(vb.pp(format!("model.layers.{i}")), cfg, entry, exit)
			})
			.collect::<Result<Vec<_>>>()?;
		let (norm, lm_head) = if s == last {
			(
				Some(RmsNorm::load(vb.pp("model.norm"), cfg.d_model, cfg.norm_eps)?),
				Some(Linear::new(
					vb.pp("lm_head").get((cfg.vocab_size, cfg.d_model), "weight")?,
					None,
				)),
			)
		} else {
			(None, None)
		};
		Ok(StageModules {
			embed,
			blocks,
			norm,
			lm_head,
			rope: Rope::new(cfg, vb.dtype(), vb.device())?,
		})
	}

	/// Run the stage's blocks: tokens `[B, T]` u32 (first stage) or activations `[B, T, w_in]`
	/// in, `[B, T, w_out]` out (`w_out = d_model` on the last stage). Inputs must be checked by the caller.
	pub fn forward(&self, input: &Tensor) -> Result<Tensor> {
		let mut x = match &self.embed {
			Some(e) => e.forward(input)?,
			None => input.clone(),
		};
		let t = x.dim(1)?;
		let mask = causal_mask(t, x.dtype(), x.device())?;
		for b in &self.blocks {
			x = b.forward(&x, &self.rope, &mask)?;
		}
		Ok(x)
	}

	/// An empty [`KvCache`] for this stage's blocks.
	pub fn new_cache(&self) -> KvCache {
		vec![None; self.blocks.len()]
	}

	/// [`forward`](Self::forward) of the `T` positions after `offset` ones whose keys and values
	/// `cache` holds (from [`new_cache`](Self::new_cache) at offset 0), which then holds `offset + T`.
	/// Inference only.
	///
	/// # Errors
	/// [`Error::Config`] for a cache of another stage or length, or positions past `max_seq_len`;
	/// candle errors.
	pub fn forward_cached(
		&self,
		input: &Tensor,
		offset: usize,
		cache: &mut KvCache,
	) -> Result<Tensor> {
		if cache.len() != self.blocks.len() {
			return Err(Error::Config(format!(
				"a KV cache of {} blocks for a stage of {}",
				cache.len(),
				self.blocks.len()
			)));
		}
		let mut x = match &self.embed {
			Some(e) => e.forward(input)?,
			None => input.clone(),
		};
		let mask = causal_mask_at(x.dim(1)?, offset, x.dtype(), x.device())?;
		for (b, c) in self.blocks.iter().zip(cache.iter_mut()) {
			x = b.forward_cached(&x, &self.rope, offset, &mask, c)?;
		}
		Ok(x)
	}

	/// Last stage: hidden `[B, T, d]` -> logits `[B, T, V]`.
	pub fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
		match (&self.norm, &self.lm_head) {
			(Some(n), Some(h)) => Ok(h.forward(&n.forward(hidden)?)?),
			_ => Err(Error::Config("logits requested from a stage without the LM head".into())),
		}
	}

	/// Last stage: mean next-token cross-entropy (nats) of hidden `[B, T, d]` against targets `[B, T]` u32.
	pub fn loss(&self, hidden: &Tensor, targets: &Tensor) -> Result<Tensor> {
		let logits = self.logits(hidden)?;
		let (b, t, v) = logits.dims3()?;
		Ok(candle_nn::loss::cross_entropy(&logits.reshape((b * t, v))?, &targets.reshape(b * t)?)?)
	}
}
