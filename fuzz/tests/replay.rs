//! Replays every saved input of every fuzz target (`fuzz/corpus/<target>/`: the seeds and what
//! `scripts/fuzz.sh` kept) through the target, so a crash once found and fixed stays fixed. Also checks
//! that the seeds are accepted by their decoders and every corpus holds an accepted input (a corpus of
//! refused inputs would start the fuzzer far from the decoder's interesting paths).

use std::path::PathBuf;

fn corpus(target: &str) -> PathBuf {
	PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target)
}

#[test]
fn every_saved_input_of_every_target_replays_without_a_panic() {
	let mut total = 0;
	for (name, target) in iota_fuzz::TARGETS {
		let dir = corpus(name);
		let entries = std::fs::read_dir(&dir)
			.unwrap_or_else(|e| panic!("{}: {e} (every target keeps a corpus)", dir.display()));
		let mut n = 0;
		for entry in entries {
			let path = entry.unwrap().path();
			let bytes = std::fs::read(&path).unwrap();
			let r = std::panic::catch_unwind(|| target(&bytes));
			assert!(r.is_ok(), "{name}: {} panics", path.display());
			n += 1;
		}
		assert!(n > 0, "{name}: empty corpus");
		total += n;
	}
	eprintln!("{total} saved inputs of {} targets replayed", iota_fuzz::TARGETS.len());
}

#[test]
fn the_seeds_are_accepted_and_every_corpus_holds_an_accepted_input() {
	for (name, bytes) in iota_fuzz::seeds::all() {
		assert!(iota_fuzz::seeds::accepted(name, &bytes), "{name}: a seed is refused");
	}
	for (name, _) in iota_fuzz::TARGETS {
		let accepted = std::fs::read_dir(corpus(name))
			.unwrap()
			.filter_map(|e| std::fs::read(e.unwrap().path()).ok())
			.any(|b| iota_fuzz::seeds::accepted(name, &b));
		assert!(
			accepted,
			"{name}: no saved input is accepted (IOTA_FUZZ_WRITE_SEEDS=1 cargo test -p iota-fuzz)"
		);
	}
}

/// Writes the seeds into the corpus folders (run once after changing them).
#[test]
fn write_seeds_when_asked() {
	if std::env::var_os("IOTA_FUZZ_WRITE_SEEDS").is_none() {
		return;
	}
	for (name, bytes) in iota_fuzz::seeds::all() {
		let dir = corpus(name);
		std::fs::create_dir_all(&dir).unwrap();
		std::fs::write(
			dir.join(format!("seed-{}", iota_primitives::ContentHash::of(&bytes))),
			bytes,
		)
		.unwrap();
	}
}
