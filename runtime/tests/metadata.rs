//! The checked-in metadata that iota-chain's code is generated from must be the runtime's own.
//!
//! It lives here rather than in iota-chain so that iota-chain has no dependency on the runtime: the
//! clippy run (every crate but the node and the runtime) then never builds the runtime's WASM builder.

/// Same version as `runtime/examples/export_metadata.rs` writes.
const METADATA_VERSION: u32 = 16;

#[test]
fn checked_in_metadata_matches_the_runtime() {
	let current = iota_runtime::Runtime::metadata_at_version(METADATA_VERSION)
		.expect("the runtime offers metadata V16");
	// Read at run time: the shared target folder may hold a binary another clone compiled.
	let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test or nextest");
	let path = std::path::Path::new(&manifest).join("../offchain/chain/metadata/iota.scale");
	let checked_in = std::fs::read(path).expect("metadata/iota.scale is checked in");
	assert!(
		checked_in.as_slice() == current.as_slice(),
		"offchain/chain/metadata/iota.scale is stale ({} bytes, runtime has {}): regenerate it with \
		 `SKIP_WASM_BUILD=1 cargo run -p iota-runtime --example export-metadata`",
		checked_in.len(),
		current.len()
	);
}
