#![no_main]
//! `iota_fuzz::merge_vector` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::merge_vector(data));
