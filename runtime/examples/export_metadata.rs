//! Writes the runtime's metadata (V16, SCALE-encoded `RuntimeMetadataPrefixed`) to a file, by default
//! `offchain/chain/metadata/iota.scale`, the file iota-chain's code is generated from:
//!
//! ```sh
//! SKIP_WASM_BUILD=1 cargo run -p iota-runtime --example export-metadata [-- PATH]
//! ```

/// Metadata version iota-chain is generated from.
const METADATA_VERSION: u32 = 16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
	let path = std::env::args()
		.nth(1)
		.unwrap_or_else(|| "offchain/chain/metadata/iota.scale".into());
	let metadata = iota_runtime::Runtime::metadata_at_version(METADATA_VERSION)
		.ok_or_else(|| format!("the runtime offers no metadata V{METADATA_VERSION}"))?;
	std::fs::write(&path, &*metadata)?;
	println!("wrote {} bytes of metadata V{METADATA_VERSION} to {path}", metadata.len());
	Ok(())
}
