//! Corpus, tokenizer and packing.
//!
//! - [`load_texts`] reads a UTF-8 `.txt` file or a directory of them (sorted by file name); a
//!   missing corpus is [`Error::CorpusMissing`], which names `scripts/fetch-data.sh`.
//! - [`train_tokenizer`] trains a byte-level BPE (GPT-2 style: Radford et al. 2019; Sennrich et al.
//!   2016) offline with the `tokenizers` crate; [`load_tokenizer`] loads any Hugging Face
//!   `tokenizer.json`.
//! - [`PackedDataset`] concatenates the documents (each followed by the end-of-text token) and
//!   cuts the stream into rows of `T + 1` tokens. A sample id maps to a row through a permutation
//!   fixed by a seed, so the orchestrator can hand out sample ids, and anyone holding the corpus,
//!   tokenizer and seed can recompute exactly which tokens a sample was (docs/design.md §3).

use std::collections::HashSet;
use std::path::Path;

use candle_core::{Device, Tensor};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{
	AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, PostProcessorWrapper,
	PreTokenizerWrapper, Tokenizer, TokenizerBuilder, TokenizerImpl,
};

use crate::error::{Error, Result};

/// The end-of-text special token placed between documents.
pub const EOT: &str = "<|endoftext|>";

/// Default corpus location relative to the repository root (filled by `scripts/fetch-data.sh`).
pub const DEFAULT_CORPUS: &str = "data/shakespeare";

/// One text of the corpus.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
	/// File name.
	pub name: String,
	/// Contents.
	pub text: String,
}

/// Read `path`: a `.txt` file, or every `*.txt` file directly inside a directory, sorted by name.
///
/// # Errors
/// [`Error::CorpusMissing`] if `path` does not exist; [`Error::Data`] if it holds no `.txt` file
/// or a file is not UTF-8; I/O errors.
pub fn load_texts(path: impl AsRef<Path>) -> Result<Vec<Document>> {
	let path = path.as_ref();
	if !path.exists() {
		return Err(Error::CorpusMissing { path: path.to_path_buf() });
	}
	let mut files = if path.is_dir() {
		let mut v = Vec::new();
		for e in std::fs::read_dir(path)? {
			let p = e?.path();
			if p.is_file()
				&& p.extension().is_some_and(|x| x == "txt")
				&& p.file_name().is_none_or(|n| n != "ATTRIBUTION.txt")
			{
				v.push(p);
			}
		}
		v
	} else {
		vec![path.to_path_buf()]
	};
	files.sort();
	if files.is_empty() {
		return Err(Error::Data(format!("no .txt files in {}", path.display())));
	}
	files
		.into_iter()
		.map(|p| {
			let bytes = std::fs::read(&p)?;
			let text = String::from_utf8(bytes)
				.map_err(|e| Error::Data(format!("{} is not UTF-8: {e}", p.display())))?;
			let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
			Ok(Document { name, text })
		})
		.collect()
}

/// Train a byte-level BPE tokenizer with `vocab_size` entries (256 byte symbols, merges, and
/// [`EOT`]) on `texts`. Exact decode round trip (no prefix space, no normaliser).
///
/// # Errors
/// [`Error::Tokenizer`] if `vocab_size` < 257 or training fails.
pub fn train_tokenizer(texts: &[&str], vocab_size: usize) -> Result<Tokenizer> {
	if vocab_size < 257 {
		return Err(Error::Tokenizer(format!(
			"vocab_size must be ≥ 257 (256 bytes + {EOT}), got {vocab_size}"
		)));
	}
	let tk = |e: tokenizers::Error| Error::Tokenizer(e.to_string());
	// `ByteLevel::alphabet()` is an AHashSet; the trainer wants a std HashSet (docs/design.md §9).
	let alphabet: HashSet<char> = ByteLevel::alphabet().into_iter().collect();
	let trainer = BpeTrainerBuilder::new()
		.vocab_size(vocab_size)
		.min_frequency(2)
		.show_progress(false)
		.special_tokens(vec![AddedToken::from(EOT, true)])
		.initial_alphabet(alphabet)
		.build();
	let byte_level = ByteLevel::new(false, false, true);
	let mut tokenizer: TokenizerImpl<
		ModelWrapper,
		NormalizerWrapper,
		PreTokenizerWrapper,
		PostProcessorWrapper,
		DecoderWrapper,
	> = TokenizerBuilder::new()
		.with_model(BPE::default().into())
		.with_normalizer(None)
		.with_pre_tokenizer(Some(byte_level.into()))
		.with_post_processor(None)
		.with_decoder(Some(byte_level.into()))
		.build()
		.map_err(tk)?;
	let mut trainer = TrainerWrapper::BpeTrainer(trainer);
	tokenizer.train(&mut trainer, texts.iter()).map_err(tk)?;
	Ok(Tokenizer::from(tokenizer))
}

/// Load a Hugging Face `tokenizer.json`.
///
/// # Errors
/// [`Error::Tokenizer`] if the file is missing or not a tokenizer.
pub fn load_tokenizer(path: impl AsRef<Path>) -> Result<Tokenizer> {
	Tokenizer::from_file(path.as_ref())
		.map_err(|e| Error::Tokenizer(format!("{}: {e}", path.as_ref().display())))
}

/// A Hugging Face tokenizer from the bytes of a `tokenizer.json` (a run's tokenizer object in the
/// bucket, hash-checked by the caller).
///
/// # Errors
/// [`Error::Tokenizer`] if the bytes are not a tokenizer.
pub fn tokenizer_from_bytes(bytes: &[u8]) -> Result<Tokenizer> {
	Tokenizer::from_bytes(bytes)
		.map_err(|e| Error::Tokenizer(format!("tokenizer.json does not parse: {e}")))
}

/// Save `tok` as `tokenizer.json` at `path`.
///
/// # Errors
/// [`Error::Tokenizer`] on I/O or serialisation failure.
pub fn save_tokenizer(tok: &Tokenizer, path: impl AsRef<Path>) -> Result<()> {
	tok.save(path.as_ref(), false).map_err(|e| Error::Tokenizer(e.to_string()))
}

/// Tokenise every document and concatenate them, each followed by [`EOT`] (if the tokenizer has it).
///
/// # Errors
/// [`Error::Tokenizer`] if encoding fails.
pub fn tokenize_corpus(tok: &Tokenizer, docs: &[Document]) -> Result<Vec<u32>> {
	let eot = tok.token_to_id(EOT);
	let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
	let enc = tok.encode_batch(texts, false).map_err(|e| Error::Tokenizer(e.to_string()))?;
	let mut out = Vec::new();
	for e in enc {
		out.extend_from_slice(e.get_ids());
		out.extend(eot);
	}
	Ok(out)
}

/// A token stream packed into rows of `seq_len + 1` tokens (inputs are the first `seq_len`,
/// targets the last `seq_len`), with a seeded sample-id → row permutation.
#[derive(Clone, Debug)]
pub struct PackedDataset {
	tokens: Vec<u32>,
	seq_len: usize,
	order: Vec<u32>,
}

impl PackedDataset {
	/// Pack `tokens` into `floor((len - 1) / seq_len)` rows; row `r` is
	/// `tokens[r·seq_len ..= (r+1)·seq_len]` (consecutive rows share one boundary token).
	/// The order of rows for sample ids is a Fisher–Yates shuffle by ChaCha8 seeded with `seed`.
	///
	/// # Errors
	/// [`Error::Data`] if `seq_len` is 0 or there are fewer than `seq_len + 1` tokens.
	pub fn new(tokens: Vec<u32>, seq_len: usize, seed: u64) -> Result<Self> {
		if seq_len == 0 {
			return Err(Error::Data("seq_len must be > 0".into()));
		}
		let rows = tokens.len().saturating_sub(1) / seq_len;
		if rows == 0 {
			return Err(Error::Data(format!(
				"{} tokens do not fill one row of {} + 1",
				tokens.len(),
				seq_len
			)));
		}
		let mut order: Vec<u32> = (0..rows as u32).collect();
		order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
		Ok(PackedDataset { tokens, seq_len, order })
	}

	/// Number of rows.
	pub fn rows(&self) -> usize {
		self.order.len()
	}

	/// Tokens per input row `T`.
	pub fn seq_len(&self) -> usize {
		self.seq_len
	}

	/// All tokens.
	pub fn tokens(&self) -> &[u32] {
		&self.tokens
	}

	/// Row index of `sample_id` (sample ids wrap around the dataset: epoch `k` reuses the order).
	pub fn row_of(&self, sample_id: u64) -> usize {
		self.order[(sample_id % self.order.len() as u64) as usize] as usize
	}

	/// The `T + 1` tokens of row `r`.
	///
	/// # Errors
	/// [`Error::Data`] if `r` is not a row.
	pub fn row(&self, r: usize) -> Result<&[u32]> {
		if r >= self.rows() {
			return Err(Error::Data(format!("row {r} out of range ({} rows)", self.rows())));
		}
		Ok(&self.tokens[r * self.seq_len..(r + 1) * self.seq_len + 1])
	}

	/// The `T + 1` tokens of `sample_id`.
	pub fn sample(&self, sample_id: u64) -> &[u32] {
		let r = self.row_of(sample_id);
		&self.tokens[r * self.seq_len..(r + 1) * self.seq_len + 1]
	}

	/// Inputs and targets `[B, T]` u32 for the given sample ids.
	///
	/// # Errors
	/// [`Error::Data`] for an empty id list; candle errors.
	pub fn batch(&self, sample_ids: &[u64], device: &Device) -> Result<(Tensor, Tensor)> {
		if sample_ids.is_empty() {
			return Err(Error::Data("empty batch".into()));
		}
		let t = self.seq_len;
		let (mut x, mut y) =
			(Vec::with_capacity(sample_ids.len() * t), Vec::with_capacity(sample_ids.len() * t));
		for &id in sample_ids {
			let row = self.sample(id);
			x.extend_from_slice(&row[..t]);
			y.extend_from_slice(&row[1..]);
		}
		let b = sample_ids.len();
		Ok((Tensor::from_vec(x, (b, t), device)?, Tensor::from_vec(y, (b, t), device)?))
	}
}

/// Everything a trainer needs from text: the tokenizer and the packed training and held-out sets.
#[derive(Debug)]
pub struct Corpus {
	/// The tokenizer.
	pub tokenizer: Tokenizer,
	/// Training rows.
	pub train: PackedDataset,
	/// Held-out rows (the last `heldout_docs` documents in file order).
	pub heldout: PackedDataset,
}

impl Corpus {
	/// Load the corpus at `path`, load `tokenizer_path` if it exists or else train a
	/// `vocab_size` BPE on the training documents and save it there (when a path is given),
	/// hold out the last `heldout_docs` documents, and pack both sets into rows of `seq_len + 1`.
	///
	/// # Errors
	/// As [`load_texts`], [`train_tokenizer`], [`PackedDataset::new`]; [`Error::Data`] when
	/// fewer than `heldout_docs + 1` documents exist or the tokenizer's vocab exceeds `max_vocab`.
	pub fn prepare(
		path: impl AsRef<Path>,
		tokenizer_path: Option<&Path>,
		vocab_size: usize,
		max_vocab: usize,
		heldout_docs: usize,
		seq_len: usize,
		seed: u64,
	) -> Result<Self> {
		let docs = load_texts(path)?;
		if docs.len() <= heldout_docs {
			return Err(Error::Data(format!(
				"{} documents cannot leave {heldout_docs} held out",
				docs.len()
			)));
		}
		let (train_docs, held_docs) = docs.split_at(docs.len() - heldout_docs);
		let tokenizer = match tokenizer_path {
			Some(p) if p.exists() => load_tokenizer(p)?,
			_ => {
				let texts: Vec<&str> = train_docs.iter().map(|d| d.text.as_str()).collect();
				let tok = train_tokenizer(&texts, vocab_size)?;
				if let Some(p) = tokenizer_path {
					if let Some(dir) = p.parent() {
						std::fs::create_dir_all(dir)?;
					}
					save_tokenizer(&tok, p)?;
				}
				tok
			},
		};
		let v = tokenizer.get_vocab_size(true);
		if v > max_vocab {
			return Err(Error::Data(format!(
				"tokenizer has {v} tokens but the model's vocab_size is {max_vocab}"
			)));
		}
		let train = PackedDataset::new(tokenize_corpus(&tokenizer, train_docs)?, seq_len, seed)?;
		let heldout =
			PackedDataset::new(tokenize_corpus(&tokenizer, held_docs)?, seq_len, seed ^ 0x5eed)?;
		Ok(Corpus { tokenizer, train, heldout })
	}
}
