//! Hugging Face folders in and out (issue 20, items 1–2): a Llama, or with the bottleneck an
//! `IotaForCausalLM` with its modeling file.
//!
//! The model's parameter names are transformers' `LlamaForCausalLM` names (`model.embed_tokens.weight`,
//! `model.layers.{i}.self_attn.q_proj.weight`, …, `model.norm.weight`, `lm_head.weight`; Linear weights
//! `[out, in]`), its RoPE is transformers' rotate-half layout, and its embeddings are untied; so a folder
//! holds the same tensors under the same names:
//! - `config.json`: a transformers `LlamaConfig` ([`LlamaConfig`]);
//! - `model.safetensors`: every parameter of every stage, f32, metadata `format = pt`;
//! - `generation_config.json`, and `tokenizer.json` when the run's tokenizer is given.
//!
//! [`export`] writes one from a [`Pipeline`]; [`import`] builds a [`Pipeline`] from one, cut into the
//! stages asked for (any cut: the cut is not part of the model without the bottleneck). What a folder
//! may not hold is refused with [`Error::HfFolder`] naming it: a `rope_scaling` other than the default
//! (Llama 3's `llama3` scaling is not implemented), a `head_dim` other than `hidden_size /
//! num_attention_heads`, biases, another activation than SiLU, a missing, misshapen, non-float or
//! non-finite tensor, a tensor the model does not have, a sharded checkpoint. Tied embeddings
//! (`tie_word_embeddings`, no `lm_head.weight`) are copied into the untied head.
//!
//! A model with the bottleneck (docs/design.md §5) has two projections per cut that `LlamaForCausalLM`
//! lacks (`model.layers.{c-1}.bottleneck_down.weight` `[b, d]` and `model.layers.{c}.bottleneck_up.weight`
//! `[d, b]` at each cut `c`), so its folder says `model_type: "iota"`, architecture `IotaForCausalLM`,
//! `bottleneck_width` `b` and `bottleneck_cuts` (the blocks that start a stage), and carries
//! [`MODELING_FILE`], a short transformers module subclassing the Llama classes, named in `auto_map`:
//! transformers loads it with `trust_remote_code=True`. The cut is part of such a model, so [`import`]
//! takes its stages from the folder.

use std::collections::BTreeSet;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::{Error, ModelConfig, Pipeline, Result};

/// The model's configuration in a folder.
pub const CONFIG_FILE: &str = "config.json";
/// Every parameter, one safetensors file.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The tokenizer (Hugging Face `tokenizers` JSON).
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// Generation defaults.
pub const GENERATION_CONFIG_FILE: &str = "generation_config.json";
/// The transformers module of a model with the bottleneck (`IotaConfig`, `IotaForCausalLM`; module docs).
pub const MODELING_FILE: &str = "modeling_iota.py";
/// [`MODELING_FILE`]'s text.
pub const MODELING_SOURCE: &str = include_str!("modeling_iota.py");

/// The fields of a transformers `LlamaConfig` this model reads and writes; absent optional fields
/// take transformers' defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
	/// `["LlamaForCausalLM"]`.
	#[serde(default)]
	pub architectures: Vec<String>,
	/// `"llama"`.
	pub model_type: String,
	/// Vocabulary size `V`.
	pub vocab_size: usize,
	/// Residual width `d_model`.
	pub hidden_size: usize,
	/// SwiGLU hidden width.
	pub intermediate_size: usize,
	/// Decoder blocks.
	pub num_hidden_layers: usize,
	/// Query heads.
	pub num_attention_heads: usize,
	/// Key/value heads (default: `num_attention_heads`).
	#[serde(default)]
	pub num_key_value_heads: Option<usize>,
	/// Head dimension (default: `hidden_size / num_attention_heads`, the only one this model has).
	#[serde(default)]
	pub head_dim: Option<usize>,
	/// Activation of the MLP (`silu`).
	#[serde(default = "silu")]
	pub hidden_act: String,
	/// Longest sequence (tokens) the RoPE tables cover.
	#[serde(default = "default_max_positions")]
	pub max_position_embeddings: usize,
	/// RMSNorm ε.
	#[serde(default = "default_eps")]
	pub rms_norm_eps: f64,
	/// RoPE base θ.
	#[serde(default = "default_theta")]
	pub rope_theta: f64,
	/// RoPE scaling (`null`, or `{"rope_type": "default"}`; any other is refused on import).
	#[serde(default)]
	pub rope_scaling: Option<serde_json::Value>,
	/// Whether `lm_head` shares the embedding matrix.
	#[serde(default)]
	pub tie_word_embeddings: bool,
	/// Biases in the attention projections (refused).
	#[serde(default)]
	pub attention_bias: bool,
	/// Biases in the MLP (refused).
	#[serde(default)]
	pub mlp_bias: bool,
	/// The dtype the weights are stored in (`float32` on export).
	#[serde(default, skip_serializing_if = "Option::is_none")]
	pub torch_dtype: Option<String>,
	/// Bottleneck width `b` (`model_type` `"iota"` only).
	#[serde(default, skip_serializing_if = "Option::is_none")]
	pub bottleneck_width: Option<usize>,
	/// The blocks that start a pipeline stage, where the bottleneck sits, ascending (`"iota"` only).
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub bottleneck_cuts: Vec<usize>,
	/// transformers' `auto_map`: [`MODELING_FILE`]'s classes (`"iota"` only).
	#[serde(default, skip_serializing_if = "Option::is_none")]
	pub auto_map: Option<serde_json::Value>,
}

fn silu() -> String {
	"silu".into()
}
fn default_max_positions() -> usize {
	2048
}
fn default_eps() -> f64 {
	1e-6
}
fn default_theta() -> f64 {
	10_000.0
}

fn bad(dir: &Path, reason: impl Into<String>) -> Error {
	Error::HfFolder { dir: dir.to_path_buf(), reason: reason.into() }
}

impl LlamaConfig {
	/// The config of `cfg`.
	///
	/// # Errors
	/// [`Error::Config`] for an invalid config.
	pub fn of(cfg: &ModelConfig) -> Result<Self> {
		cfg.validate()?;
		// One stage has no cut, so no bottleneck projection: a plain Llama.
		let bottleneck = cfg.bottleneck && cfg.n_stages() > 1;
		let (arch, model_type) =
			if bottleneck { ("IotaForCausalLM", "iota") } else { ("LlamaForCausalLM", "llama") };
		let module = MODELING_FILE.trim_end_matches(".py");
		Ok(LlamaConfig {
			architectures: vec![arch.into()],
			model_type: model_type.into(),
			vocab_size: cfg.vocab_size,
			hidden_size: cfg.d_model,
			intermediate_size: cfg.ffn_dim,
			num_hidden_layers: cfg.n_layers,
			num_attention_heads: cfg.n_heads,
			num_key_value_heads: Some(cfg.n_kv_heads),
			head_dim: Some(cfg.head_dim()),
			hidden_act: silu(),
			max_position_embeddings: cfg.max_seq_len,
			rms_norm_eps: cfg.norm_eps,
			rope_theta: cfg.rope_theta,
			rope_scaling: None,
			tie_word_embeddings: false,
			attention_bias: false,
			mlp_bias: false,
			torch_dtype: Some("float32".into()),
			bottleneck_width: bottleneck.then_some(cfg.bottleneck_width),
			bottleneck_cuts: if bottleneck {
				cfg.stages.iter().skip(1).map(|r| r[0]).collect()
			} else {
				Vec::new()
			},
			auto_map: bottleneck.then(|| {
				serde_json::json!({
					"AutoConfig": format!("{module}.IotaConfig"),
					"AutoModelForCausalLM": format!("{module}.IotaForCausalLM"),
				})
			}),
		})
	}

	/// Whether this is a model with the bottleneck (`model_type` `"iota"`).
	pub fn has_bottleneck(&self) -> bool {
		self.model_type == "iota"
	}

	/// The stages of a model with the bottleneck: block ranges split at [`bottleneck_cuts`](Self::bottleneck_cuts).
	fn cut_stages(&self) -> Vec<[usize; 2]> {
		let mut starts = vec![0];
		starts.extend(self.bottleneck_cuts.iter().copied());
		let ends = starts.iter().skip(1).copied().chain([self.num_hidden_layers]);
		starts.iter().zip(ends).map(|(&a, b)| [a, b]).collect()
	}

	/// The model config of this folder's model cut into `stages` (block ranges `[start, end)`;
	/// `None`: one stage, or a model with the bottleneck's own cuts).
	///
	/// # Errors
	/// [`Error::HfFolder`] (`dir` names the folder) for what this model cannot represent (module
	/// docs), and for `stages` other than the cuts of a model with the bottleneck; [`Error::Config`]
	/// for cuts that do not cover the blocks.
	pub fn to_model(&self, dir: &Path, stages: Option<Vec<[usize; 2]>>) -> Result<ModelConfig> {
		let arch = match self.model_type.as_str() {
			"llama" => "LlamaForCausalLM",
			"iota" => "IotaForCausalLM",
			other => {
				return Err(bad(
					dir,
					format!("model_type {other:?} is neither \"llama\" nor \"iota\""),
				))
			},
		};
		if let Some(a) = self.architectures.iter().find(|a| *a != arch) {
			return Err(bad(dir, format!("architecture {a:?} is not {arch}")));
		}
		let bottleneck = self.has_bottleneck();
		if bottleneck {
			if self.bottleneck_width.is_none_or(|b| b == 0) || self.bottleneck_cuts.is_empty() {
				return Err(bad(
					dir,
					"model_type \"iota\" needs bottleneck_width and bottleneck_cuts",
				));
			}
			if !self.bottleneck_cuts.windows(2).all(|w| w[0] < w[1])
				|| self.bottleneck_cuts.iter().any(|&c| c == 0 || c >= self.num_hidden_layers)
			{
				return Err(bad(
					dir,
					format!(
						"bottleneck_cuts {:?} are not ascending blocks in 1..{}",
						self.bottleneck_cuts, self.num_hidden_layers
					),
				));
			}
		} else if self.bottleneck_width.is_some() || !self.bottleneck_cuts.is_empty() {
			return Err(bad(dir, "bottleneck fields in a model_type \"llama\" config"));
		}
		let stages = match stages {
			Some(s) if bottleneck && s != self.cut_stages() => {
				return Err(bad(
					dir,
					format!(
						"a model with the bottleneck is cut where its bottleneck sits ({:?}), not at {s:?}",
						self.cut_stages()
					),
				))
			},
			Some(s) => s,
			None if bottleneck => self.cut_stages(),
			None => vec![[0, self.num_hidden_layers]],
		};
		match &self.rope_scaling {
			None | Some(serde_json::Value::Null) => {},
			Some(v)
				if v.get("rope_type").or_else(|| v.get("type")).and_then(|t| t.as_str())
					== Some("default") => {},
			Some(v) => {
				return Err(bad(
					dir,
					format!("rope_scaling {v} is not supported (only the default RoPE is)"),
				))
			},
		}
		if self.hidden_act != "silu" {
			return Err(bad(dir, format!("hidden_act {:?} is not silu", self.hidden_act)));
		}
		if self.attention_bias || self.mlp_bias {
			return Err(bad(dir, "attention_bias / mlp_bias: this model has no biases"));
		}
		if self.num_attention_heads == 0 {
			return Err(bad(dir, "num_attention_heads is 0"));
		}
		let natural = self.hidden_size / self.num_attention_heads;
		if let Some(h) = self.head_dim.filter(|h| *h != natural) {
			return Err(bad(
				dir,
				format!(
					"head_dim {h} is not hidden_size / num_attention_heads = {natural} (the only \
					 head dimension this model has)"
				),
			));
		}
		let cfg = ModelConfig {
			vocab_size: self.vocab_size,
			d_model: self.hidden_size,
			n_layers: self.num_hidden_layers,
			n_heads: self.num_attention_heads,
			n_kv_heads: self.num_key_value_heads.unwrap_or(self.num_attention_heads),
			ffn_dim: self.intermediate_size,
			rope_theta: self.rope_theta,
			norm_eps: self.rms_norm_eps,
			max_seq_len: self.max_position_embeddings,
			bottleneck,
			bottleneck_width: self.bottleneck_width.unwrap_or(0),
			stages,
		};
		cfg.validate()?;
		Ok(cfg)
	}
}

/// `n_layers` blocks cut into `n_stages` contiguous ranges as even as they go (the first
/// `n_layers mod n_stages` one block longer).
///
/// # Errors
/// [`Error::Config`] for zero stages or more stages than blocks.
pub fn even_stages(n_layers: usize, n_stages: usize) -> Result<Vec<[usize; 2]>> {
	if n_stages == 0 || n_stages > n_layers {
		return Err(Error::Config(format!("cannot cut {n_layers} blocks into {n_stages} stages")));
	}
	let (base, extra) = (n_layers / n_stages, n_layers % n_stages);
	let mut start = 0;
	Ok((0..n_stages)
		.map(|s| {
			let end = start + base + usize::from(s < extra);
			let r = [start, end];
			start = end;
			r
		})
		.collect())
}

/// Writes `model` to the folder `dir` (created if missing; the files of the module docs are
/// overwritten): its config, every parameter in f32, generation defaults, and `tokenizer_json` (the
/// run's `tokenizer.json` bytes) when given. Returns the parameters written.
///
/// # Errors
/// [`Error::Tokenizer`] for tokenizer bytes that do not parse or hold more tokens than the model's
/// vocabulary; [`Error::Io`]; candle errors.
pub fn export(model: &Pipeline, dir: &Path, tokenizer_json: Option<&[u8]>) -> Result<usize> {
	let config = LlamaConfig::of(model.config())?;
	if let Some(bytes) = tokenizer_json {
		let t = crate::data::tokenizer_from_bytes(bytes)?;
		if t.get_vocab_size(true) > config.vocab_size {
			return Err(Error::Tokenizer(format!(
				"the tokenizer has {} tokens, the model {}",
				t.get_vocab_size(true),
				config.vocab_size
			)));
		}
	}
	let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
	for stage in model.stages() {
		for (spec, (_, var)) in stage.specs().iter().zip(stage.params()) {
			let v = var.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
			owned.push((spec.name.clone(), spec.shape.clone(), iota_protocol::f32le::to_bytes(&v)));
		}
	}
	let count = owned.iter().map(|(_, s, _)| s.iter().product::<usize>()).sum();
	let views = owned
		.iter()
		.map(|(n, s, d)| {
			safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d)
				.map(|v| (n.clone(), v))
				.map_err(|e| Error::Checkpoint(e.to_string()))
		})
		.collect::<Result<Vec<_>>>()?;
	let meta = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
	let weights =
		safetensors::serialize(views, Some(meta)).map_err(|e| Error::Checkpoint(e.to_string()))?;
	std::fs::create_dir_all(dir)?;
	std::fs::write(dir.join(WEIGHTS_FILE), weights)?;
	std::fs::write(dir.join(CONFIG_FILE), serde_json::to_vec_pretty(&config)?)?;
	let generation = serde_json::json!({
		"_from_model_config": true,
		"max_length": model.config().max_seq_len,
	});
	std::fs::write(dir.join(GENERATION_CONFIG_FILE), serde_json::to_vec_pretty(&generation)?)?;
	if let Some(bytes) = tokenizer_json {
		std::fs::write(dir.join(TOKENIZER_FILE), bytes)?;
	}
	if config.has_bottleneck() {
		std::fs::write(dir.join(MODELING_FILE), MODELING_SOURCE)?;
	}
	Ok(count)
}

/// Name of the token ids `[N, T]` (i64) in a reference file ([`write_reference`]).
pub const REFERENCE_IDS: &str = "input_ids";
/// Name of the logits `[N, T, V]` (f32) in a reference file ([`write_reference`]).
pub const REFERENCE_LOGITS: &str = "logits";

/// Writes the safetensors file `path` holding `rows` (`n · t` token ids, `n` rows of `t`) as
/// [`REFERENCE_IDS`] `[n, t]` and `model`'s logits for them as [`REFERENCE_LOGITS`] `[n, t, V]` (f32,
/// computed `batch` rows at a time), for checking an exported folder against another implementation
/// (`scripts/check-hf-export.py` runs transformers on the ids and compares the logits). Returns `n`.
///
/// # Errors
/// [`Error::Config`] for `t = 0`, `t` above the model's `max_seq_len` or ids that are not whole rows;
/// the model's errors (an id outside the vocabulary); [`Error::Io`] or candle errors writing `path`.
pub fn write_reference(
	model: &mut Pipeline,
	rows: &[u32],
	t: usize,
	batch: usize,
	path: &Path,
) -> Result<usize> {
	if t == 0 || t > model.config().max_seq_len || !rows.len().is_multiple_of(t) {
		return Err(Error::Config(format!(
			"{} ids are not whole rows of t = {t} (1..={} tokens)",
			rows.len(),
			model.config().max_seq_len
		)));
	}
	let n = rows.len() / t;
	let mut logits = Vec::new();
	for chunk in rows.chunks(batch.max(1) * t) {
		let x = Tensor::from_slice(chunk, (chunk.len() / t, t), &Device::Cpu)?;
		logits.push(model.logits(&x)?.to_dtype(DType::F32)?);
	}
	let ids: Vec<i64> = rows.iter().map(|&i| i64::from(i)).collect();
	let tensors = std::collections::HashMap::from([
		(REFERENCE_IDS.to_string(), Tensor::from_vec(ids, (n, t), &Device::Cpu)?),
		(REFERENCE_LOGITS.to_string(), Tensor::cat(&logits, 0)?),
	]);
	candle_core::safetensors::save(&tensors, path)?;
	Ok(n)
}

/// The config of the folder `dir` (its `config.json`).
///
/// # Errors
/// [`Error::HfFolder`] for a missing or malformed `config.json`.
pub fn read_config(dir: &Path) -> Result<LlamaConfig> {
	let path = dir.join(CONFIG_FILE);
	let bytes = std::fs::read(&path).map_err(|e| bad(dir, format!("{CONFIG_FILE}: {e}")))?;
	serde_json::from_slice(&bytes).map_err(|e| bad(dir, format!("{CONFIG_FILE}: {e}")))
}

/// The model in the folder `dir`, cut into `stages` (`None`: one stage, or the cuts of a model with
/// the bottleneck, which only takes those), in f32 on the CPU, with
/// `wire` across its cuts (as [`Pipeline::new`]); its optimizer state is fresh.
///
/// # Errors
/// [`Error::HfFolder`] naming what the folder lacks or holds that this model cannot take (module
/// docs); [`Error::Config`] for cuts that do not cover the blocks.
pub fn import(
	dir: &Path,
	stages: Option<Vec<[usize; 2]>>,
	wire: Option<crate::Encoding>,
) -> Result<Pipeline> {
	let config = read_config(dir)?;
	let cfg = config.to_model(dir, stages)?;
	if !dir.join(WEIGHTS_FILE).exists() && dir.join("model.safetensors.index.json").exists() {
		return Err(bad(
			dir,
			"a sharded checkpoint (model.safetensors.index.json) is not supported",
		));
	}
	let path = dir.join(WEIGHTS_FILE);
	let bytes = std::fs::read(&path).map_err(|e| bad(dir, format!("{WEIGHTS_FILE}: {e}")))?;
	let file = safetensors::SafeTensors::deserialize(&bytes)
		.map_err(|e| bad(dir, format!("{WEIGHTS_FILE} does not parse: {e}")))?;
	let present: BTreeSet<String> = file.names().into_iter().map(str::to_owned).collect();
	let mut used = BTreeSet::new();
	let mut model = Pipeline::new(&cfg, 0, DType::F32, &Device::Cpu, wire)?;
	for stage in model.stages_mut() {
		let mut flat = Vec::with_capacity(stage.param_count());
		for spec in stage.specs() {
			let name = if spec.name == "lm_head.weight"
				&& !present.contains("lm_head.weight")
				&& config.tie_word_embeddings
			{
				"model.embed_tokens.weight"
			} else {
				spec.name.as_str()
			};
			let view = file.tensor(name).map_err(|_| {
				bad(dir, format!("{WEIGHTS_FILE} has no tensor {name} (shape {:?})", spec.shape))
			})?;
			if view.shape() != spec.shape.as_slice() {
				return Err(bad(
					dir,
					format!(
						"{name} has shape {:?}, the config asks {:?}",
						view.shape(),
						spec.shape
					),
				));
			}
			let dtype = match view.dtype() {
				safetensors::Dtype::F32 => DType::F32,
				safetensors::Dtype::F16 => DType::F16,
				safetensors::Dtype::BF16 => DType::BF16,
				safetensors::Dtype::F64 => DType::F64,
				other => return Err(bad(dir, format!("{name} is {other:?}, not a float"))),
			};
			let v = Tensor::from_raw_buffer(view.data(), dtype, view.shape(), &Device::Cpu)?
				.to_dtype(DType::F32)?
				.flatten_all()?
				.to_vec1::<f32>()?;
			if let Some(i) = v.iter().position(|x| !x.is_finite()) {
				return Err(bad(dir, format!("{name} holds a non-finite value at flat index {i}")));
			}
			flat.extend_from_slice(&v);
			used.insert(name.to_string());
		}
		stage.set_flat_params(&flat)?;
	}
	// transformers once stored RoPE's inverse frequencies; they are derived, not parameters.
	let unknown: Vec<&String> = present
		.iter()
		.filter(|n| !used.contains(*n) && !n.ends_with("rotary_emb.inv_freq"))
		.collect();
	if !unknown.is_empty() {
		return Err(bad(
			dir,
			format!(
				"{WEIGHTS_FILE} holds {} tensor(s) this model does not have: {}",
				unknown.len(),
				unknown.iter().take(5).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
			),
		));
	}
	Ok(model)
}

#[cfg(test)]
mod tests {
	use super::*;

	fn plain() -> ModelConfig {
		ModelConfig::tiny().with_bottleneck(None)
	}

	fn tokens() -> Tensor {
		Tensor::from_vec(vec![1u32, 7, 42, 300, 5, 9, 11, 2], (2, 4), &Device::Cpu).unwrap()
	}

	fn logits(p: &mut Pipeline) -> Vec<f32> {
		p.logits(&tokens()).unwrap().flatten_all().unwrap().to_vec1().unwrap()
	}

	/// A model whose weights are not the seeded init (one AdamW step on random tokens).
	fn trained() -> Pipeline {
		let mut p = Pipeline::new(&plain(), 5, DType::F32, &Device::Cpu, None).unwrap();
		let targets =
			Tensor::from_vec(vec![7u32, 42, 300, 5, 9, 11, 2, 3], (2, 4), &Device::Cpu).unwrap();
		p.forward_backward(&tokens(), &targets).unwrap();
		p.step(&crate::StepOptions::default()).unwrap();
		p
	}

	fn rewrite(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Vec<usize>, Vec<u8>)>)) {
		let bytes = std::fs::read(dir.join(WEIGHTS_FILE)).unwrap();
		let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
		let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = file
			.tensors()
			.into_iter()
			.map(|(n, v)| (n, v.shape().to_vec(), v.data().to_vec()))
			.collect();
		edit(&mut owned);
		let views = owned.iter().map(|(n, s, d)| {
			(
				n.clone(),
				safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d)
					.unwrap(),
			)
		});
		std::fs::write(dir.join(WEIGHTS_FILE), safetensors::serialize(views, None).unwrap())
			.unwrap();
	}

	fn refusal(dir: &Path) -> String {
		refusal_with(dir, None)
	}

	fn refusal_with(dir: &Path, stages: Option<Vec<[usize; 2]>>) -> String {
		match import(dir, stages, None) {
			Err(e @ Error::HfFolder { .. }) => e.to_string(),
			Err(e) => panic!("another error: {e}"),
			Ok(_) => panic!("accepted"),
		}
	}

	#[test]
	fn export_then_import_gives_the_same_parameters_and_logits() {
		let mut p = trained();
		let dir = tempfile::tempdir().unwrap();
		let n = export(&p, dir.path(), None).unwrap();
		assert_eq!(n, p.param_count());
		let c = read_config(dir.path()).unwrap();
		assert_eq!((c.hidden_size, c.num_key_value_heads, c.head_dim), (64, Some(2), Some(16)));
		// The same cut: bit-identical parameters and logits.
		let mut q = import(dir.path(), Some(plain().stages), None).unwrap();
		for (a, b) in p.stages().iter().zip(q.stages()) {
			assert_eq!(a.flat_params().unwrap(), b.flat_params().unwrap());
		}
		let want = logits(&mut p);
		assert_eq!(logits(&mut q), want);
		// Another cut (one stage, two stages): the same model.
		for stages in [None, Some(even_stages(4, 2).unwrap())] {
			let mut r = import(dir.path(), stages, None).unwrap();
			let got = logits(&mut r);
			let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
			assert!(worst < 1e-5, "{worst}");
		}
		// Exported again, the same bytes.
		let again = tempfile::tempdir().unwrap();
		export(&q, again.path(), None).unwrap();
		assert_eq!(
			std::fs::read(again.path().join(WEIGHTS_FILE)).unwrap(),
			std::fs::read(dir.path().join(WEIGHTS_FILE)).unwrap()
		);
	}

	#[test]
	fn tied_embeddings_are_copied_into_the_head() {
		let p = trained();
		let dir = tempfile::tempdir().unwrap();
		export(&p, dir.path(), None).unwrap();
		rewrite(dir.path(), |t| t.retain(|(n, _, _)| n != "lm_head.weight"));
		assert!(refusal(dir.path()).contains("no tensor lm_head.weight"));
		let mut c = read_config(dir.path()).unwrap();
		c.tie_word_embeddings = true;
		std::fs::write(dir.path().join(CONFIG_FILE), serde_json::to_vec(&c).unwrap()).unwrap();
		let q = import(dir.path(), None, None).unwrap();
		let s = &q.stages()[0];
		let get = |name: &str| {
			s.params()
				.find(|(n, _)| *n == name)
				.unwrap()
				.1
				.flatten_all()
				.unwrap()
				.to_vec1::<f32>()
				.unwrap()
		};
		assert_eq!(get("lm_head.weight"), get("model.embed_tokens.weight"));
	}

	#[test]
	fn what_this_model_cannot_take_is_refused_by_name() {
		let p = trained();
		let fresh = || {
			let dir = tempfile::tempdir().unwrap();
			export(&p, dir.path(), None).unwrap();
			dir
		};
		let edit_config = |dir: &Path, f: &dyn Fn(&mut LlamaConfig)| {
			let mut c = read_config(dir).unwrap();
			f(&mut c);
			std::fs::write(dir.join(CONFIG_FILE), serde_json::to_vec(&c).unwrap()).unwrap();
		};
		let d = fresh();
		edit_config(d.path(), &|c| {
			c.rope_scaling = Some(serde_json::json!({"rope_type": "llama3", "factor": 8.0}))
		});
		assert!(refusal(d.path()).contains("rope_scaling"));
		edit_config(d.path(), &|c| {
			c.rope_scaling = Some(serde_json::json!({"rope_type": "default"}))
		});
		assert!(import(d.path(), None, None).is_ok(), "the default RoPE is taken");
		edit_config(d.path(), &|c| c.head_dim = Some(32));
		assert!(refusal(d.path()).contains("head_dim 32"));
		edit_config(d.path(), &|c| {
			c.head_dim = None;
			c.attention_bias = true;
		});
		assert!(refusal(d.path()).contains("bias"));
		std::fs::write(d.path().join(CONFIG_FILE), b"{ not json").unwrap();
		assert!(refusal(d.path()).contains("config.json"));

		let d = fresh();
		rewrite(d.path(), |t| t.retain(|(n, _, _)| n != "model.layers.2.mlp.up_proj.weight"));
		assert!(refusal(d.path()).contains("no tensor model.layers.2.mlp.up_proj.weight"));
		let d = fresh();
		rewrite(d.path(), |t| {
			let e = t.iter_mut().find(|(n, _, _)| n == "model.norm.weight").unwrap();
			e.1 = vec![32, 2];
		});
		assert!(refusal(d.path()).contains("model.norm.weight has shape [32, 2]"));
		let d = fresh();
		rewrite(d.path(), |t| {
			let e = t.iter_mut().find(|(n, _, _)| n == "model.norm.weight").unwrap();
			e.2[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
		});
		assert!(refusal(d.path())
			.contains("model.norm.weight holds a non-finite value at flat index 1"));
		let d = fresh();
		rewrite(d.path(), |t| {
			t.push(("model.layers.0.self_attn.q_proj.bias".into(), vec![64], vec![0; 256]));
		});
		assert!(refusal(d.path()).contains("q_proj.bias"));
		let d = fresh();
		std::fs::remove_file(d.path().join(WEIGHTS_FILE)).unwrap();
		assert!(refusal(d.path()).contains(WEIGHTS_FILE));
		std::fs::write(d.path().join(WEIGHTS_FILE), b"garbage").unwrap();
		assert!(refusal(d.path()).contains("does not parse"));
		// Cuts that do not cover the blocks.
		let d = fresh();
		assert!(matches!(import(d.path(), Some(vec![[0, 3]]), None), Err(Error::Config(_))));
	}

	#[test]
	fn a_model_with_the_bottleneck_goes_out_with_its_modeling_file_and_comes_back_at_its_cuts() {
		// tiny: 4 blocks in 3 stages [0,2] [2,3] [3,4], bottleneck width 8; trained a step.
		let cfg = ModelConfig::tiny();
		assert!(cfg.bottleneck);
		let mut p = Pipeline::new(&cfg, 5, DType::F32, &Device::Cpu, None).unwrap();
		let targets =
			Tensor::from_vec(vec![7u32, 42, 300, 5, 9, 11, 2, 3], (2, 4), &Device::Cpu).unwrap();
		p.forward_backward(&tokens(), &targets).unwrap();
		p.step(&crate::StepOptions::default()).unwrap();
		let dir = tempfile::tempdir().unwrap();
		assert_eq!(export(&p, dir.path(), None).unwrap(), p.param_count());
		let c = read_config(dir.path()).unwrap();
		let cuts: Vec<usize> = cfg.stages.iter().skip(1).map(|r| r[0]).collect();
		assert_eq!(
			(
				c.model_type.as_str(),
				c.architectures.clone(),
				c.bottleneck_width,
				&c.bottleneck_cuts
			),
			("iota", vec!["IotaForCausalLM".to_string()], Some(cfg.bottleneck_width), &cuts)
		);
		assert_eq!(
			c.auto_map.as_ref().unwrap()["AutoModelForCausalLM"],
			"modeling_iota.IotaForCausalLM"
		);
		let py = std::fs::read_to_string(dir.path().join(MODELING_FILE)).unwrap();
		assert!(py.contains("class IotaForCausalLM(LlamaForCausalLM)"));
		// The projections are stored under their block's names.
		let bytes = std::fs::read(dir.path().join(WEIGHTS_FILE)).unwrap();
		let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
		for &k in &cuts {
			let down =
				file.tensor(&format!("model.layers.{}.bottleneck_down.weight", k - 1)).unwrap();
			let up = file.tensor(&format!("model.layers.{k}.bottleneck_up.weight")).unwrap();
			assert_eq!((down.shape(), up.shape()), (&[8, 64][..], &[64, 8][..]));
		}
		// Back at its own cuts: the same parameters and logits, bit for bit.
		let mut q = import(dir.path(), None, None).unwrap();
		assert_eq!(q.config(), p.config());
		for (a, b) in p.stages().iter().zip(q.stages()) {
			assert_eq!(a.flat_params().unwrap(), b.flat_params().unwrap());
		}
		assert_eq!(logits(&mut q), logits(&mut p));
		assert!(import(dir.path(), Some(cfg.stages.clone()), None).is_ok());
		// Other cuts would move the bottleneck: refused, naming the folder's cuts.
		let e = refusal_with(dir.path(), Some(vec![[0, 4]]));
		assert!(e.contains("cut where its bottleneck sits"), "{e}");
		// A config that says iota without its fields, or llama with them, is refused.
		let mut bad_cfg = c.clone();
		bad_cfg.bottleneck_cuts.clear();
		std::fs::write(dir.path().join(CONFIG_FILE), serde_json::to_vec(&bad_cfg).unwrap())
			.unwrap();
		assert!(refusal(dir.path()).contains("needs bottleneck_width and bottleneck_cuts"));
		let mut bad_cfg = c.clone();
		bad_cfg.bottleneck_cuts = vec![3, 2];
		std::fs::write(dir.path().join(CONFIG_FILE), serde_json::to_vec(&bad_cfg).unwrap())
			.unwrap();
		assert!(refusal(dir.path()).contains("not ascending"));
		let mut bad_cfg = c;
		bad_cfg.model_type = "llama".into();
		bad_cfg.architectures = vec!["LlamaForCausalLM".into()];
		std::fs::write(dir.path().join(CONFIG_FILE), serde_json::to_vec(&bad_cfg).unwrap())
			.unwrap();
		assert!(refusal(dir.path()).contains("bottleneck fields"));
	}

	#[test]
	fn a_larger_tokenizer_is_not_exported() {
		let dir = tempfile::tempdir().unwrap();
		let lines = [
			"ROMEO: But soft, what light through yonder window breaks?",
			"JULIET: O Romeo, Romeo, wherefore art thou Romeo?",
			"MERCUTIO: A plague o' both your houses!",
		];
		let tok = crate::data::train_tokenizer(&lines, 270).unwrap();
		let path = dir.path().join("t.json");
		crate::data::save_tokenizer(&tok, &path).unwrap();
		let bytes = std::fs::read(&path).unwrap();
		let small = ModelConfig { vocab_size: 260, ..plain() };
		let p = Pipeline::new(&small, 5, DType::F32, &Device::Cpu, None).unwrap();
		let e = export(&p, dir.path(), Some(&bytes));
		assert!(matches!(e, Err(Error::Tokenizer(m)) if m.contains("270 tokens, the model 260")));
		let e = export(&p, dir.path(), Some(b"{}"));
		assert!(matches!(e, Err(Error::Tokenizer(m)) if m.contains("does not parse")));
		assert!(!dir.path().join(WEIGHTS_FILE).exists(), "nothing written on a refusal");
		// With a tokenizer that fits, it is written beside the weights.
		let p = trained();
		export(&p, dir.path(), Some(&bytes)).unwrap();
		assert_eq!(std::fs::read(dir.path().join(TOKENIZER_FILE)).unwrap(), bytes);
	}

	#[test]
	fn even_stages_cover_the_blocks() {
		assert_eq!(even_stages(4, 3).unwrap(), vec![[0, 2], [2, 3], [3, 4]]);
		assert_eq!(even_stages(4, 1).unwrap(), vec![[0, 4]]);
		assert!(even_stages(2, 3).is_err() && even_stages(2, 0).is_err());
	}
}
