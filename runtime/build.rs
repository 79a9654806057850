//! Builds the WASM blob of the runtime with substrate-wasm-builder (skipped when `SKIP_WASM_BUILD` is set).

#[cfg(feature = "std")]
fn main() {
	substrate_wasm_builder::WasmBuilder::build_using_defaults();
}

#[cfg(not(feature = "std"))]
fn main() {}
