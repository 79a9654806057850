#![no_main]
//! `iota_fuzz::checkpoint` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::checkpoint(data));
