//! `iota-orchestrator prepare-data`: tokenize a corpus once into fixed-size, content-hashed shards in the
//! bucket and write the run spec that names them (docs/design.md §3 step 2, fixing the reference, where every
//! head streamed its own shuffled view of the data and nobody could audit what a sample was).
//!
//! Steps: read the corpus (`iota_model::data::load_texts`), train a byte-level BPE tokenizer on it (or
//! load a given `tokenizer.json`), tokenize every document (each followed by the end-of-text token),
//! pack the stream into rows of `seq_len + 1` tokens, shuffle the rows with the run seed, and cut them
//! into shards of `rows_per_shard` rows (`rows_per_shard · (seq_len + 1)` little-endian u32 each; the
//! rows that do not fill a last shard are dropped and counted). The tokenizer, every shard and the spec
//! JSON are uploaded with their BLAKE3 hashes ([`iota_storage::keys::tokenizer`], `data_shard`,
//! `run_spec`); the spec's own hash is what the chain's `RunConfig::model_hash` must hold.
//!
//! With `heldout_rows > 0` the fewest documents from the end of the corpus that fill that many rows are
//! kept out of the shards and written as the held-out set ([`iota_storage::keys::heldout`], rows in
//! document order), on which the orchestrator evaluates every merged model (`crate::eval`).
//!
//! Everything is a pure function of the corpus bytes and the options, so running it twice produces the
//! same objects and the same spec hash.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use iota_model::optim::AdamW;
use iota_model::{data, hf, ModelConfig, Pipeline};
use iota_primitives::ContentHash;
use iota_protocol::optim::Training;
use iota_protocol::MergeCodec;
use iota_rpc::{DataManifest, HeldOut, InitStage, LrSchedule, RunSpec};
use iota_storage::{keys, ObjectStore, StorageError};

/// Longest run id, in bytes: the longest object key the chain records (a reduced shard,
/// `v1/runs/{run}/miners/{48-char SS58}/epochs/{8}/stages/{3}/shards/{6}`, 105 bytes plus the run id)
/// must fit the runtime's 128-byte `MaxKeyLen`.
pub const MAX_RUN_ID_LEN: usize = 23;

/// What to prepare.
#[derive(Clone, Debug)]
pub struct PrepareOptions {
	/// Run id (the bucket scope `v1/runs/{run}/`).
	pub run: String,
	/// Corpus: a `.txt` file or a directory of them (`data/shakespeare` after `scripts/fetch-data.sh`).
	pub corpus: PathBuf,
	/// An existing `tokenizer.json` to use instead of training one.
	pub tokenizer: Option<PathBuf>,
	/// The model (its `vocab_size` bounds the tokenizer's).
	pub model: ModelConfig,
	/// Tokenizer vocabulary when training one (≤ `model.vocab_size`).
	pub vocab_size: usize,
	/// Tokens per row fed to the model, `T` (≤ `model.max_seq_len`).
	pub seq_len: u32,
	/// Rows per micro-batch, `B` (one sample).
	pub batch_rows: u32,
	/// Rows per shard (rounded down to a multiple of `batch_rows`).
	pub rows_per_shard: u32,
	/// Weight-init and shuffle seed.
	pub seed: u64,
	/// Wire encoding name (`f32`, `bf16`, `u8`).
	pub encoding: String,
	/// AdamW hyper-parameters.
	pub adamw: AdamW,
	/// Learning-rate schedule over epochs.
	pub lr: LrSchedule,
	/// Global clipping norm.
	pub max_norm: Option<f32>,
	/// Codec of merge vectors (`f32` exact; `int8`, `topk:<per mille>` compressed).
	pub merge_codec: MergeCodec,
	/// Training mode (`sync` exact, `local` inner steps and outer Nesterov merges).
	pub training: Training,
	/// Held-out rows to cut from the last documents of the corpus (0: no held-out set). The documents
	/// they come from, the fewest from the end (in file order) that fill the rows, are left out of
	/// the shards; the tokenizer is trained on the whole corpus (it is not the model, and the same
	/// tokenizer must cut both sets).
	pub heldout_rows: u32,
	/// Continue an existing model: a Hugging Face folder (`iota_model::hf`) whose model replaces
	/// `model` (cut into as many stages as `model` has; a model with the bottleneck keeps its own
	/// cuts, which must be as many) and whose `tokenizer.json` is the run's unless `tokenizer` is
	/// given. Its stages' checkpoints are uploaded ([`keys::init_checkpoint`]) and named in the
	/// spec's `init`.
	pub init_from: Option<PathBuf>,
}

impl PrepareOptions {
	/// Defaults for a model: the tokenizer fills the model's vocabulary, `T = min(128, max_seq_len)`,
	/// `B = 8`, 256 rows per shard, `u8` wire encoding, AdamW defaults with a 3e-3 peak learning rate,
	/// 5 warm-up epochs, cosine decay over 200 epochs to 10%, clipping at 1.0.
	pub fn new(run: impl Into<String>, corpus: impl Into<PathBuf>, model: ModelConfig) -> Self {
		let seq_len = model.max_seq_len.min(128) as u32;
		PrepareOptions {
			run: run.into(),
			corpus: corpus.into(),
			tokenizer: None,
			vocab_size: model.vocab_size,
			seq_len,
			batch_rows: 8,
			rows_per_shard: 256,
			seed: 0,
			encoding: "u8".into(),
			adamw: AdamW { lr: 3e-3, ..AdamW::default() },
			lr: LrSchedule { peak: 3e-3, warmup_epochs: 5, total_epochs: 200, min_ratio: 0.1 },
			max_norm: Some(1.0),
			merge_codec: MergeCodec::F32,
			training: Training::Sync,
			heldout_rows: 0,
			init_from: None,
			model,
		}
	}
}

/// Why preparing the data failed.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
	/// The corpus or tokenizer could not be read or used (names `scripts/fetch-data.sh` when missing).
	#[error("corpus: {0}")]
	Corpus(#[from] iota_model::Error),
	/// The options cannot produce a valid spec.
	#[error("invalid options: {0}")]
	Options(String),
	/// The object store refused a write or read.
	#[error("object store: {0}")]
	Storage(#[from] StorageError),
	/// A stored spec does not parse or does not validate.
	#[error("stored run spec: {0}")]
	Spec(#[from] iota_rpc::SpecError),
}

/// What [`prepare_data`] produced.
#[derive(Clone, Debug)]
pub struct Prepared {
	/// The spec (as stored at `keys::run_spec(run)`).
	pub spec: RunSpec,
	/// Rows written into shards.
	pub rows: u64,
	/// Rows dropped because they did not fill a last shard.
	pub rows_dropped: u64,
	/// Tokens in the tokenized corpus.
	pub tokens: u64,
}

/// Tokenizes the corpus, uploads tokenizer, shards and spec, and returns the spec (module docs).
///
/// # Errors
/// [`DataError::Corpus`] (missing corpus, tokenizer failure), [`DataError::Options`] (model config,
/// `seq_len`, `batch_rows`, vocabulary, or a corpus too small for one shard), [`DataError::Storage`].
/// Nothing is written before the options and the corpus have been checked.
pub async fn prepare_data(
	store: &ObjectStore,
	opts: &PrepareOptions,
) -> Result<Prepared, DataError> {
	let imported;
	let mut init_model: Option<Pipeline> = None;
	let opts = match &opts.init_from {
		None => opts,
		Some(dir) => {
			let (o, model) = import_options(opts, dir)?;
			(imported, init_model) = (o, Some(model));
			&imported
		},
	};
	let run = keys::Id::new(opts.run.clone()).map_err(|e| DataError::Options(e.to_string()))?;
	if opts.run.len() > MAX_RUN_ID_LEN {
		return Err(DataError::Options(format!(
			"run id {:?} is {} bytes; at most {MAX_RUN_ID_LEN} keep every object key within the chain's 128 bytes",
			opts.run,
			opts.run.len()
		)));
	}
	opts.model.validate().map_err(|e| DataError::Options(e.to_string()))?;
	if opts.batch_rows == 0 || opts.rows_per_shard < opts.batch_rows {
		return Err(DataError::Options(format!(
			"rows_per_shard {} must be at least batch_rows {} > 0",
			opts.rows_per_shard, opts.batch_rows
		)));
	}
	let rows_per_shard = opts.rows_per_shard - opts.rows_per_shard % opts.batch_rows;
	if opts.seq_len == 0 || opts.seq_len as usize > opts.model.max_seq_len {
		return Err(DataError::Options(format!(
			"seq_len {} must be in 1..={} (the model's max_seq_len)",
			opts.seq_len, opts.model.max_seq_len
		)));
	}
	iota_model::Encoding::parse(&opts.encoding).map_err(|e| DataError::Options(e.to_string()))?;
	if opts.vocab_size > opts.model.vocab_size {
		return Err(DataError::Options(format!(
			"tokenizer vocabulary {} exceeds the model's {}",
			opts.vocab_size, opts.model.vocab_size
		)));
	}

	// Tokenize (CPU-bound: off the async runtime).
	let (corpus, tok_path, vocab, seq_len, seed) = (
		opts.corpus.clone(),
		opts.tokenizer.clone(),
		opts.vocab_size,
		opts.seq_len as usize,
		opts.seed,
	);
	let heldout_rows = opts.heldout_rows as usize;
	let (tokenizer_json, dataset, heldout) =
		tokio::task::spawn_blocking(move || -> Result<_, DataError> {
			let mut docs = data::load_texts(&corpus)?;
			let tokenizer = match tok_path {
				Some(p) => data::load_tokenizer(p)?,
				None => {
					let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
					data::train_tokenizer(&texts, vocab)?
				},
			};
			let json = tokenizer
				.to_string(false)
				.map_err(|e| iota_model::Error::Tokenizer(e.to_string()))?;
			// The documents the held-out rows come from: the fewest from the end that fill them.
			let mut held_docs = Vec::new();
			let mut held = Vec::new();
			while heldout_rows > 0 && held.len() < heldout_rows * seq_len + 1 && docs.len() > 1 {
				held_docs.insert(0, docs.pop().expect("more than one document"));
				held = data::tokenize_corpus(&tokenizer, &held_docs)?;
			}
			let tokens = data::tokenize_corpus(&tokenizer, &docs)?;
			let heldout = if heldout_rows > 0 {
				let rows = held.len().saturating_sub(1) / seq_len;
				if rows < heldout_rows {
					return Err(DataError::Options(format!(
						"{} held-out document(s) give {rows} rows of {seq_len} tokens, fewer than the \
						 {heldout_rows} asked (and at least one document must stay for training)",
						held_docs.len()
					)));
				}
				// Rows in document order, overlapping by one token like the training rows.
				let mut bytes = Vec::with_capacity(heldout_rows * (seq_len + 1) * 4);
				for r in 0..heldout_rows {
					for t in &held[r * seq_len..(r + 1) * seq_len + 1] {
						bytes.extend_from_slice(&t.to_le_bytes());
					}
				}
				Some(bytes)
			} else {
				None
			};
			Ok((json, data::PackedDataset::new(tokens, seq_len, seed)?, heldout))
		})
		.await
		.map_err(|e| DataError::Options(format!("tokenizer task failed: {e}")))??;
	if let Some(&t) = dataset.tokens().iter().max() {
		if t as usize >= opts.model.vocab_size {
			return Err(DataError::Options(format!(
				"token id {t} is outside the model's vocabulary"
			)));
		}
	}
	let rows = dataset.rows() as u64;
	let shards = rows / u64::from(rows_per_shard);
	if shards == 0 {
		return Err(DataError::Options(format!(
			"{rows} rows do not fill one shard of {rows_per_shard}"
		)));
	}

	if let Some(bytes) = &heldout {
		if let Some(i) = bytes.chunks_exact(4).position(|c| {
			u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize >= opts.model.vocab_size
		}) {
			return Err(DataError::Options(format!(
				"held-out token {i} is outside the model's vocabulary"
			)));
		}
	}

	let tokenizer = store.put(&keys::tokenizer(&run), Bytes::from(tokenizer_json)).await?;
	let mut shard_objects = Vec::with_capacity(shards as usize);
	let rps = u64::from(rows_per_shard);
	for shard in 0..shards {
		let mut bytes = Vec::with_capacity((rps as usize) * (seq_len + 1) * 4);
		for i in shard * rps..(shard + 1) * rps {
			let row = dataset.row(dataset.row_of(i))?;
			for t in row {
				bytes.extend_from_slice(&t.to_le_bytes());
			}
		}
		let r = store.put(&keys::data_shard(&run, shard as u32), Bytes::from(bytes)).await?;
		shard_objects.push(r);
	}
	let heldout_object = match heldout {
		Some(bytes) => Some(store.put(&keys::heldout(&run), Bytes::from(bytes)).await?),
		None => None,
	};
	let init = match &opts.init_from {
		None => None,
		Some(_) => Some(upload_init(store, &run, init_model.as_mut(), &opts.training).await?),
	};
	let spec = RunSpec {
		init,
		run: opts.run.clone(),
		model: opts.model.clone(),
		seed: opts.seed,
		encoding: opts.encoding.clone(),
		adamw: opts.adamw,
		lr: opts.lr,
		max_norm: opts.max_norm,
		merge_codec: opts.merge_codec,
		training: opts.training,
		data: DataManifest {
			tokenizer,
			seq_len: opts.seq_len,
			batch_rows: opts.batch_rows,
			rows_per_shard,
			shards: shard_objects,
			heldout: heldout_object.map(|object| HeldOut { object, rows: opts.heldout_rows }),
		},
	};
	spec.validate()?;
	store.put(&keys::run_spec(&run), Bytes::from(spec.to_bytes())).await?;
	Ok(Prepared {
		spec,
		rows: shards * rps,
		rows_dropped: rows - shards * rps,
		tokens: dataset.tokens().len() as u64,
	})
}

/// The options of a run that continues the model in the Hugging Face folder `dir`, and that model
/// cut into the run's stages (see [`PrepareOptions::init_from`]).
///
/// # Errors
/// [`DataError::Corpus`] for a folder the model cannot take (`iota_model::Error::HfFolder` names
/// what is wrong: unsupported `rope_scaling`, a missing, misshapen or non-finite tensor, …);
/// [`DataError::Options`] for a bottleneck cut into another stage count, or a folder without a
/// tokenizer when none is given.
fn import_options(
	opts: &PrepareOptions,
	dir: &Path,
) -> Result<(PrepareOptions, Pipeline), DataError> {
	let config = hf::read_config(dir)?;
	let n = opts.model.n_stages();
	let stages = if config.has_bottleneck() {
		None
	} else {
		Some(hf::even_stages(config.num_hidden_layers, n)?)
	};
	let model = hf::import(dir, stages, None)?;
	let cfg = model.config().clone();
	if cfg.n_stages() != n {
		return Err(DataError::Options(format!(
			"{} is cut into {} stages where its bottleneck sits; the run has {n}",
			dir.display(),
			cfg.n_stages()
		)));
	}
	let tokenizer = match &opts.tokenizer {
		Some(t) => t.clone(),
		None if dir.join(hf::TOKENIZER_FILE).is_file() => dir.join(hf::TOKENIZER_FILE),
		None => {
			return Err(DataError::Options(format!(
				"{} has no {}: give the model's tokenizer (--tokenizer)",
				dir.display(),
				hf::TOKENIZER_FILE
			)))
		},
	};
	let mut o = opts.clone();
	o.vocab_size = o.vocab_size.min(cfg.vocab_size);
	o.seq_len = o.seq_len.min(cfg.max_seq_len as u32);
	o.tokenizer = Some(tokenizer);
	o.model = cfg;
	Ok((o, model))
}

/// Uploads each stage of `model` in `training`'s mode as the run's initial checkpoint of the stage
/// and returns the spec's `init` (checkpoint objects and their state hashes).
///
/// # Errors
/// [`DataError::Storage`]; [`DataError::Corpus`] for a stage that cannot be written.
async fn upload_init(
	store: &ObjectStore,
	run: &keys::Id,
	model: Option<&mut Pipeline>,
	training: &Training,
) -> Result<Vec<InitStage>, DataError> {
	let model = model.ok_or_else(|| DataError::Options("no imported model".into()))?;
	let mut init = Vec::with_capacity(model.stages().len());
	for (s, stage) in model.stages_mut().iter_mut().enumerate() {
		stage.train_as(training);
		let checkpoint = store
			.put(&keys::init_checkpoint(run, s as u32), Bytes::from(stage.to_checkpoint()?))
			.await?;
		init.push(InitStage { checkpoint, state: ContentHash(stage.state_hash()?) });
	}
	Ok(init)
}

/// Reads the run spec of `run` from the bucket: its exact stored bytes and the parsed spec. The caller
/// compares `ContentHash::of(bytes)` with the chain's `model_hash` (or uses
/// [`RunSpec::from_bytes_checked`]).
///
/// # Errors
/// [`DataError::Storage`] (missing object: `StorageError::NotFound`), [`DataError::Spec`] for bytes that
/// do not parse or validate, [`DataError::Options`] for a bad run id.
pub async fn fetch_spec(store: &ObjectStore, run: &str) -> Result<(Vec<u8>, RunSpec), DataError> {
	let run = keys::Id::new(run.to_owned()).map_err(|e| DataError::Options(e.to_string()))?;
	let key = keys::run_spec(&run);
	let size = store.head(&key).await?.size;
	let bytes = store.get_range(&key, 0..size).await?.to_vec();
	let spec: RunSpec =
		serde_json::from_slice(&bytes).map_err(|e| iota_rpc::SpecError::Invalid(e.to_string()))?;
	spec.validate()?;
	Ok((bytes, spec))
}

#[cfg(test)]
mod tests {
	use super::*;
	use candle_core::{DType, Device};
	use iota_model::Stage;
	use iota_storage::{EmbeddedConfig, EmbeddedS3};

	fn corpus(dir: &std::path::Path) -> PathBuf {
		let p = dir.join("corpus");
		std::fs::create_dir_all(&p).unwrap();
		let text = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer \
		            the slings and arrows of outrageous fortune, or to take arms against a sea of troubles. "
			.repeat(40);
		std::fs::write(p.join("a.txt"), &text).unwrap();
		std::fs::write(p.join("b.txt"), text.to_uppercase()).unwrap();
		p
	}

	fn options(corpus: PathBuf) -> PrepareOptions {
		let mut o = PrepareOptions::new("run-test", corpus, ModelConfig::tiny());
		o.vocab_size = 300;
		o.seq_len = 16;
		o.batch_rows = 2;
		o.rows_per_shard = 7; // rounded down to 6
		o.encoding = "f32".into();
		o
	}

	/// A Hugging Face folder of a plain (no bottleneck) one-stage `tiny` model seeded with 9, with a
	/// tokenizer trained on `corpus` when `tokenizer` is set; returns the model.
	fn hf_folder(dir: &Path, corpus: &Path, tokenizer: bool) -> Pipeline {
		let cfg = ModelConfig { stages: vec![[0, 4]], ..ModelConfig::tiny().with_bottleneck(None) };
		let model = Pipeline::new(&cfg, 9, DType::F32, &Device::Cpu, None).unwrap();
		let json = tokenizer.then(|| {
			let docs = data::load_texts(corpus).unwrap();
			let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
			data::train_tokenizer(&texts, 300)
				.unwrap()
				.to_string(false)
				.unwrap()
				.into_bytes()
		});
		hf::export(&model, dir, json.as_deref()).unwrap();
		model
	}

	/// `prepare-data --init-from`: the folder's model cut into the run's stages, each stage's
	/// checkpoint in the bucket named with its state hash in the spec, loading to exactly the folder's
	/// weights; a folder without a tokenizer, or one the model cannot take, is refused before
	/// anything is written.
	#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
	async fn a_run_continues_a_hugging_face_model_from_checked_stage_checkpoints() {
		let dir = tempfile::tempdir().unwrap();
		let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await.unwrap();
		let store = ObjectStore::connect(server.store_config()).await.unwrap();
		store.ensure_bucket().await.unwrap();
		let corpus = corpus(dir.path());
		let folder = dir.path().join("hf");
		let training = Training::Local { accumulate: 2, outer_lr: 0.7, outer_momentum: 0.9 };
		let opts =
			PrepareOptions { init_from: Some(folder.clone()), training, ..options(corpus.clone()) };

		// No tokenizer in the folder and none given: refused, nothing written.
		hf_folder(&folder, &corpus, false);
		let err = prepare_data(&store, &opts).await.unwrap_err();
		assert!(err.to_string().contains("tokenizer.json"), "{err}");
		assert!(fetch_spec(&store, "run-test").await.is_err(), "a spec was written");

		// An unsupported RoPE scaling: refused, naming it.
		let source = hf_folder(&folder, &corpus, true);
		let config_path = folder.join(hf::CONFIG_FILE);
		let good = std::fs::read_to_string(&config_path).unwrap();
		let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
		v["rope_scaling"] = serde_json::json!({"rope_type": "llama3", "factor": 8.0});
		std::fs::write(&config_path, v.to_string()).unwrap();
		let err = prepare_data(&store, &opts).await.unwrap_err();
		assert!(err.to_string().contains("rope_scaling"), "{err}");
		assert!(fetch_spec(&store, "run-test").await.is_err(), "a spec was written");
		std::fs::write(&config_path, good).unwrap();

		let p = prepare_data(&store, &opts).await.unwrap();
		let spec = &p.spec;
		assert_eq!(spec.model.stages, hf::even_stages(4, 3).unwrap());
		assert!(!spec.model.bottleneck);
		let init = spec.init.as_ref().expect("the spec names the initial weights");
		assert_eq!(init.len(), 3);
		let source: Vec<f32> = source.stages()[0].flat_params().unwrap();
		let mut loaded = Vec::new();
		for (s, i) in init.iter().enumerate() {
			assert_eq!(
				i.checkpoint.key,
				keys::init_checkpoint(&keys::Id::new("run-test").unwrap(), s as u32)
			);
			let bytes = store.get(&i.checkpoint.key, &i.checkpoint.hash).await.unwrap();
			let st = Stage::initial(
				&spec.model,
				s,
				spec.seed,
				&training,
				&Device::Cpu,
				Some((&bytes, &i.state.0)),
			)
			.unwrap();
			assert_eq!(st.outer_state().map(|o| o.step), Some(0), "a fresh outer state");
			// A state hash other than the named one is refused.
			assert!(Stage::initial(
				&spec.model,
				s,
				spec.seed,
				&training,
				&Device::Cpu,
				Some((&bytes, &[7; 32]))
			)
			.is_err());
			loaded.push(st);
		}
		// The stages hold the folder's tensors, by name and shape (the flat order differs only in
		// where the cut puts the embedding and the head).
		let names: Vec<(String, usize)> = loaded
			.iter()
			.flat_map(|st| st.specs().iter().map(|p| (p.name.clone(), p.shape.iter().product())))
			.collect();
		let by_name = |model: &[Stage]| -> Vec<(String, Vec<f32>)> {
			model
				.iter()
				.flat_map(|st| {
					let flat = st.flat_params().unwrap();
					let mut at = 0;
					st.specs()
						.iter()
						.map(|p| {
							let n: usize = p.shape.iter().product();
							at += n;
							(p.name.clone(), flat[at - n..at].to_vec())
						})
						.collect::<Vec<_>>()
				})
				.collect()
		};
		let mut got = by_name(&loaded);
		let one = Pipeline::new(
			&ModelConfig { stages: vec![[0, 4]], ..spec.model.clone() },
			9,
			DType::F32,
			&Device::Cpu,
			None,
		)
		.unwrap();
		let mut want = by_name(one.stages());
		got.sort_by(|a, b| a.0.cmp(&b.0));
		want.sort_by(|a, b| a.0.cmp(&b.0));
		assert_eq!(got.len(), names.len());
		assert_eq!(got, want);
		assert_eq!(want.iter().map(|(_, v)| v.len()).sum::<usize>(), source.len());
		// The run's tokenizer is the folder's.
		let tok = store.get(&spec.data.tokenizer.key, &spec.data.tokenizer.hash).await.unwrap();
		let ours = data::tokenizer_from_bytes(&tok).unwrap();
		let theirs = data::load_tokenizer(folder.join(hf::TOKENIZER_FILE)).unwrap();
		assert_eq!(ours.get_vocab(true), theirs.get_vocab(true));
		server.shutdown().await;
	}

	#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
	async fn shards_are_hashed_located_and_reproducible() {
		let dir = tempfile::tempdir().unwrap();
		let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await.unwrap();
		let store = ObjectStore::connect(server.store_config()).await.unwrap();
		store.ensure_bucket().await.unwrap();
		let opts = options(corpus(dir.path()));
		let p = prepare_data(&store, &opts).await.unwrap();
		let m = &p.spec.data;
		assert_eq!(m.rows_per_shard, 6);
		assert!(m.shards.len() >= 2, "{} shards", m.shards.len());
		assert!(p.rows_dropped < 6);

		// Every shard hashes to what the spec says and decodes within the vocabulary.
		let shard = store.get(&m.shards[1].key, &m.shards[1].hash).await.unwrap();
		let tokens = m.decode_shard(1, &shard, opts.model.vocab_size).unwrap();
		let loc = m.locate(3).unwrap();
		assert_eq!((loc.shard, loc.row_offset), (1, 0));
		assert_eq!(m.sample_tokens(&tokens, loc).unwrap().len(), 2 * 17);

		// The stored spec is exactly what was returned, and a second run gives the same hash.
		let (bytes, spec) = fetch_spec(&store, "run-test").await.unwrap();
		assert_eq!(spec, p.spec);
		assert_eq!(ContentHash::of(&bytes), p.spec.hash());
		let again = prepare_data(&store, &opts).await.unwrap();
		assert_eq!(again.spec.hash(), p.spec.hash());
		server.shutdown().await;
	}

	#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
	async fn the_heldout_set_is_the_last_document_and_no_shard_holds_it() {
		let dir = tempfile::tempdir().unwrap();
		let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await.unwrap();
		let store = ObjectStore::connect(server.store_config()).await.unwrap();
		store.ensure_bucket().await.unwrap();
		let plain = prepare_data(&store, &options(corpus(dir.path()))).await.unwrap();
		assert!(plain.spec.data.heldout.is_none());
		let opts = PrepareOptions { heldout_rows: 3, ..options(corpus(dir.path())) };
		let p = prepare_data(&store, &opts).await.unwrap();
		let h = p.spec.data.heldout.clone().unwrap();
		assert_eq!((h.rows, h.object.key.as_str()), (3, "v1/runs/run-test/data/heldout"));
		let bytes = store.get(&h.object.key, &h.object.hash).await.unwrap();
		let held = p.spec.data.decode_heldout(&bytes, opts.model.vocab_size).unwrap();
		assert_eq!(held.len(), 3 * 17);
		// The upper-case document (the last) is held out: the shards have only the first one's tokens.
		assert!(p.tokens < plain.tokens * 2 / 3, "{} of {} tokens trained", p.tokens, plain.tokens);
		let shard = store
			.get(&p.spec.data.shards[0].key, &p.spec.data.shards[0].hash)
			.await
			.unwrap();
		let train = p.spec.data.decode_shard(0, &shard, opts.model.vocab_size).unwrap();
		let window = &held[17..34];
		assert!(!train.windows(17).any(|w| w == window), "a held-out row is in a training shard");
		server.shutdown().await;
	}

	#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
	async fn bad_options_write_nothing() {
		let dir = tempfile::tempdir().unwrap();
		let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await.unwrap();
		let store = ObjectStore::connect(server.store_config()).await.unwrap();
		store.ensure_bucket().await.unwrap();
		let good = options(corpus(dir.path()));
		for (what, opts) in [
			("zero batch", PrepareOptions { batch_rows: 0, ..good.clone() }),
			("vocab", PrepareOptions { vocab_size: 100_000, ..good.clone() }),
			("seq_len", PrepareOptions { seq_len: 1_000, ..good.clone() }),
			("encoding", PrepareOptions { encoding: "fp8".into(), ..good.clone() }),
			("run id", PrepareOptions { run: "../x".into(), ..good.clone() }),
			("long run id", PrepareOptions { run: "r".repeat(MAX_RUN_ID_LEN + 1), ..good.clone() }),
			("huge shard", PrepareOptions { rows_per_shard: 1_000_000, ..good.clone() }),
			("missing corpus", PrepareOptions { corpus: dir.path().join("nope"), ..good.clone() }),
			("held-out rows", PrepareOptions { heldout_rows: 100_000, ..good.clone() }),
		] {
			assert!(prepare_data(&store, &opts).await.is_err(), "{what} accepted");
		}
		assert!(store.list("v1/").await.unwrap().is_empty(), "a refused prepare wrote objects");
		assert!(matches!(fetch_spec(&store, "run-test").await, Err(DataError::Storage(_))));
		server.shutdown().await;
	}
}
