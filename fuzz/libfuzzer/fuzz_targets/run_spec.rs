#![no_main]
//! `iota_fuzz::run_spec` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::run_spec(data));
