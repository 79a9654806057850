//! Text from a trained model: autoregressive sampling of next tokens through every stage of a
//! [`Pipeline`] (issue "What the network trained, in the user's hands", item 3; `iota-generate`).
//!
//! The context is the prompt and what was generated so far, at most the model's `max_seq_len` last
//! tokens, run through the stages and the wire as training's forward does; the next token is drawn from
//! the last position's logits ([`sample_next`]). Each block keeps the keys and values of the positions
//! it has seen (a KV cache, [`Pipeline::logits_cached`]), so a new token costs one position's forward,
//! not the whole context's; once the context would pass `max_seq_len`, it slides: the cache is dropped
//! and the last `max_seq_len` tokens are run again from position 0 (what a model trained on windows of
//! that length saw).

use candle_core::Tensor;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::error::{Error, Result};
use crate::pipeline::Pipeline;

/// How next tokens are drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
	/// Tokens to generate after the prompt.
	pub max_new_tokens: usize,
	/// Softmax temperature; 0 takes the most likely token (greedy), higher flattens the distribution.
	pub temperature: f32,
	/// Draw only among the `top_k` most likely tokens (0: no limit).
	pub top_k: usize,
	/// Draw only among the most likely tokens whose probabilities sum to at least `top_p`
	/// (nucleus sampling, in (0, 1]; 1: no limit).
	pub top_p: f32,
	/// Seed of the draws (ChaCha20): the same seed, model and prompt give the same text.
	pub seed: u64,
}

impl Default for Sampling {
	/// 64 tokens, temperature 0.8, top-k 40, top-p 0.95, seed 0.
	fn default() -> Self {
		Sampling { max_new_tokens: 64, temperature: 0.8, top_k: 40, top_p: 0.95, seed: 0 }
	}
}

impl Sampling {
	/// Checks the settings.
	///
	/// # Errors
	/// [`Error::Config`] for a negative or non-finite temperature, or `top_p` outside (0, 1].
	pub fn validate(&self) -> Result<()> {
		if !(self.temperature.is_finite() && self.temperature >= 0.0) {
			return Err(Error::Config(format!(
				"temperature {} is not a finite number ≥ 0",
				self.temperature
			)));
		}
		if !(self.top_p > 0.0 && self.top_p <= 1.0) {
			return Err(Error::Config(format!("top_p {} is outside (0, 1]", self.top_p)));
		}
		Ok(())
	}
}

/// The next token drawn from one position's `logits` (`[V]`, f32): the argmax at temperature 0 (the
/// lowest id among equals), else a draw from `softmax(logits / temperature)` restricted to the
/// `top_k` most likely tokens and then to the smallest most-likely set whose mass reaches `top_p`
/// (renormalised).
///
/// # Errors
/// [`Error::Config`] for bad settings ([`Sampling::validate`]) or empty logits;
/// [`Error::NonFinite`] for a NaN or infinite logit.
pub fn sample_next(logits: &[f32], s: &Sampling, rng: &mut impl Rng) -> Result<u32> {
	s.validate()?;
	if logits.is_empty() {
		return Err(Error::Config("no logits to sample from".into()));
	}
	if let Some(index) = logits.iter().position(|x| !x.is_finite()) {
		return Err(Error::NonFinite { what: "logits".into(), index });
	}
	// Most likely first; ties by id, so the order (and every draw) is deterministic.
	let mut order: Vec<usize> = (0..logits.len()).collect();
	order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
	if s.temperature == 0.0 {
		return Ok(order[0] as u32);
	}
	if s.top_k > 0 {
		order.truncate(s.top_k);
	}
	let top = f64::from(logits[order[0]]);
	let t = f64::from(s.temperature);
	let weights: Vec<f64> =
		order.iter().map(|&i| ((f64::from(logits[i]) - top) / t).exp()).collect();
	let total: f64 = weights.iter().sum();
	// The nucleus: most likely first until the mass reaches top_p (at least one token).
	let mut kept = 0;
	let mut mass = 0.0;
	while kept < weights.len() && (kept == 0 || mass < f64::from(s.top_p) * total) {
		mass += weights[kept];
		kept += 1;
	}
	let mut x = rng.random::<f64>() * mass;
	for (i, w) in weights[..kept].iter().enumerate() {
		if x < *w {
			return Ok(order[i] as u32);
		}
		x -= w;
	}
	Ok(order[kept - 1] as u32)
}

impl Pipeline {
	/// Generates up to `s.max_new_tokens` tokens after `prompt` (token ids); returns the new tokens
	/// only. The context passed to the model is the last `max_seq_len` tokens.
	///
	/// # Errors
	/// [`Error::Config`] for an empty prompt or bad settings; [`Error::TokenOutOfRange`] for a prompt
	/// id ≥ the vocabulary; [`Error::NonFinite`] when the model yields non-finite logits; candle
	/// errors.
	pub fn generate(&mut self, prompt: &[u32], s: &Sampling) -> Result<Vec<u32>> {
		s.validate()?;
		if prompt.is_empty() {
			return Err(Error::Config("an empty prompt: give at least one token".into()));
		}
		let window = self.config().max_seq_len.max(1);
		let device = self.stages()[0].device().clone();
		let mut rng = ChaCha20Rng::seed_from_u64(s.seed);
		let mut tokens = prompt.to_vec();
		// The cache holds tokens[start..fed] at positions 0..fed - start.
		let (mut cache, mut start, mut fed) = (self.new_cache(), 0usize, 0usize);
		for _ in 0..s.max_new_tokens {
			if tokens.len() - start > window {
				start = tokens.len() - window;
				(cache, fed) = (self.new_cache(), start);
			}
			let new = &tokens[fed..];
			let input = Tensor::from_slice(new, (1, new.len()), &device)?;
			let logits = self.logits_cached(&input, fed - start, &mut cache)?;
			let last: Vec<f32> = logits.get(0)?.get(new.len() - 1)?.to_vec1()?;
			fed = tokens.len();
			tokens.push(sample_next(&last, s, &mut rng)?);
		}
		Ok(tokens.split_off(prompt.len()))
	}

	/// Completes the text `prompt`: encodes it with `tokenizer` (no special tokens added), runs
	/// [`generate`](Self::generate) and decodes the new tokens (special tokens skipped). Returns only
	/// the completion.
	///
	/// # Errors
	/// [`Error::Tokenizer`] when the tokenizer holds more tokens than the model's vocabulary or fails
	/// to encode or decode; [`generate`](Self::generate)'s errors (an empty prompt among them).
	pub fn complete(
		&mut self,
		tokenizer: &tokenizers::Tokenizer,
		prompt: &str,
		s: &Sampling,
	) -> Result<String> {
		let vocab = self.config().vocab_size;
		if tokenizer.get_vocab_size(true) > vocab {
			return Err(Error::Tokenizer(format!(
				"the tokenizer has {} tokens, the model {vocab}",
				tokenizer.get_vocab_size(true)
			)));
		}
		let ids = tokenizer
			.encode(prompt, false)
			.map_err(|e| Error::Tokenizer(format!("encoding {prompt:?}: {e}")))?
			.get_ids()
			.to_vec();
		let new = self.generate(&ids, s)?;
		tokenizer
			.decode(&new, true)
			.map_err(|e| Error::Tokenizer(format!("decoding: {e}")))
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::config::ModelConfig;
	use candle_core::{DType, Device};

	fn greedy(n: usize) -> Sampling {
		Sampling { max_new_tokens: n, temperature: 0.0, ..Sampling::default() }
	}

	#[test]
	fn greedy_takes_the_argmax_and_ties_the_lowest_id() {
		let mut rng = ChaCha20Rng::seed_from_u64(0);
		assert_eq!(sample_next(&[0.1, 2.0, -1.0, 2.0], &greedy(1), &mut rng).unwrap(), 1);
		let top1 = Sampling { top_k: 1, temperature: 5.0, ..Sampling::default() };
		for _ in 0..20 {
			assert_eq!(sample_next(&[0.1, 2.0, -1.0, 1.9], &top1, &mut rng).unwrap(), 1);
		}
		let narrow = Sampling { top_p: 1e-6, top_k: 0, temperature: 1.0, ..Sampling::default() };
		assert_eq!(sample_next(&[3.0, 0.0, 2.9], &narrow, &mut rng).unwrap(), 0);
	}

	#[test]
	fn draws_follow_the_tempered_softmax() {
		// logits [0, ln 3] at temperature 1: token 1 with probability 3/4.
		let s = Sampling { top_k: 0, top_p: 1.0, temperature: 1.0, ..Sampling::default() };
		let mut rng = ChaCha20Rng::seed_from_u64(7);
		let n = 20_000;
		let ones = (0..n)
			.filter(|_| sample_next(&[0.0, 3f32.ln()], &s, &mut rng).unwrap() == 1)
			.count();
		let p = ones as f64 / n as f64;
		assert!((p - 0.75).abs() < 0.015, "{p}");
		// Temperature 0.5 squares the odds: 9/10.
		let cold = Sampling { temperature: 0.5, ..s.clone() };
		let ones = (0..n)
			.filter(|_| sample_next(&[0.0, 3f32.ln()], &cold, &mut rng).unwrap() == 1)
			.count();
		let p = ones as f64 / n as f64;
		assert!((p - 0.9).abs() < 0.015, "{p}");
		// top-p 0.7 keeps only the most likely of the two (0.75 ≥ 0.7).
		let nucleus = Sampling { top_p: 0.7, ..s };
		assert!((0..200).all(|_| sample_next(&[0.0, 3f32.ln()], &nucleus, &mut rng).unwrap() == 1));
	}

	#[test]
	fn bad_settings_and_logits_are_refused() {
		let mut rng = ChaCha20Rng::seed_from_u64(0);
		for s in [
			Sampling { temperature: -1.0, ..Sampling::default() },
			Sampling { temperature: f32::NAN, ..Sampling::default() },
			Sampling { top_p: 0.0, ..Sampling::default() },
			Sampling { top_p: 1.5, ..Sampling::default() },
		] {
			assert!(matches!(sample_next(&[1.0], &s, &mut rng), Err(Error::Config(_))), "{s:?}");
		}
		assert!(matches!(sample_next(&[], &greedy(1), &mut rng), Err(Error::Config(_))));
		assert!(matches!(
			sample_next(&[0.0, f32::NAN], &greedy(1), &mut rng),
			Err(Error::NonFinite { index: 1, .. })
		));
	}

	/// A position's logits from the KV cache (a prefix, then one token at a time) are the full
	/// forward's, with and without a u8 wire across the cuts; positions past the RoPE table and a
	/// cache of another length are refused.
	#[test]
	fn the_kv_cache_gives_the_full_forwards_logits() {
		let cfg = ModelConfig::tiny();
		let dev = Device::Cpu;
		for wire in [None, Some(crate::Encoding::U8)] {
			let mut p = Pipeline::new(&cfg, 3, DType::F32, &dev, wire).unwrap();
			let n = cfg.max_seq_len;
			let seq: Vec<u32> =
				(0..n as u32).map(|i| (i * 37 + 5) % cfg.vocab_size as u32).collect();
			let full = p.logits(&Tensor::from_slice(&seq, (1, n), &dev).unwrap()).unwrap();
			let mut cache = p.new_cache();
			let mut off = 0;
			for chunk in std::iter::once(&seq[..5]).chain(seq[5..].chunks(1)) {
				let x = Tensor::from_slice(chunk, (1, chunk.len()), &dev).unwrap();
				let got = p.logits_cached(&x, off, &mut cache).unwrap();
				let want = full.narrow(1, off, chunk.len()).unwrap();
				let worst: f32 =
					(got - want).unwrap().abs().unwrap().max_all().unwrap().to_scalar().unwrap();
				assert!(worst < 1e-4, "{wire:?} at {off}: {worst}");
				off += chunk.len();
			}
			let one = Tensor::from_slice(&[1u32], (1, 1), &dev).unwrap();
			assert!(matches!(p.logits_cached(&one, off, &mut cache), Err(Error::Config(_))));
			let mut fresh = p.new_cache();
			assert!(matches!(p.logits_cached(&one, 3, &mut fresh), Err(Error::Config(_))));
			assert!(matches!(p.logits_cached(&one, 0, &mut []), Err(Error::Config(_))));
		}
	}

	#[test]
	fn generation_is_the_models_own_next_tokens_and_repeatable() {
		let cfg = ModelConfig::tiny();
		let mut p = Pipeline::new(&cfg, 3, DType::F32, &Device::Cpu, None).unwrap();
		let prompt = [5u32, 17, 42];
		// Greedy: each new token is the argmax of the logits of the context so far.
		let out = p.generate(&prompt, &greedy(4)).unwrap();
		assert_eq!(out.len(), 4);
		let mut ctx = prompt.to_vec();
		for &t in &out {
			let input = Tensor::from_slice(&ctx, (1, ctx.len()), &Device::Cpu).unwrap();
			let row: Vec<f32> = p
				.logits(&input)
				.unwrap()
				.get(0)
				.unwrap()
				.get(ctx.len() - 1)
				.unwrap()
				.to_vec1()
				.unwrap();
			let best = (0..row.len()).max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a)));
			assert_eq!(Some(t as usize), best);
			ctx.push(t);
		}
		// Sampling: the same seed gives the same tokens; another seed (almost surely) others.
		let s = Sampling { max_new_tokens: 12, temperature: 1.5, top_k: 0, top_p: 1.0, seed: 1 };
		let a = p.generate(&prompt, &s).unwrap();
		assert_eq!(a, p.generate(&prompt, &s).unwrap());
		assert_ne!(a, p.generate(&prompt, &Sampling { seed: 2, ..s.clone() }).unwrap());
		// Past the model's context: the window slides.
		let long = Sampling { max_new_tokens: cfg.max_seq_len + 3, ..greedy(0) };
		assert_eq!(p.generate(&prompt, &long).unwrap().len(), cfg.max_seq_len + 3);
		// The cached generation is the uncached one: context re-run in full for every token, sliding
		// past the model's context.
		let mut ctx = prompt.to_vec();
		for &t in &p.generate(&prompt, &long).unwrap() {
			let window = &ctx[ctx.len().saturating_sub(cfg.max_seq_len)..];
			let input = Tensor::from_slice(window, (1, window.len()), &Device::Cpu).unwrap();
			let logits = p.logits(&input).unwrap();
			let row: Vec<f32> =
				logits.get(0).unwrap().get(window.len() - 1).unwrap().to_vec1().unwrap();
			assert_eq!(
				t,
				sample_next(&row, &greedy(1), &mut ChaCha20Rng::seed_from_u64(0)).unwrap()
			);
			ctx.push(t);
		}
		// Bad prompts.
		assert!(matches!(p.generate(&[], &greedy(1)), Err(Error::Config(_))));
		let vocab = cfg.vocab_size as u32;
		assert!(matches!(
			p.generate(&[1, vocab], &greedy(1)),
			Err(Error::TokenOutOfRange { id, .. }) if id == vocab
		));
	}
}
