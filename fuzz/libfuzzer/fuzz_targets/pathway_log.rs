#![no_main]
//! `iota_fuzz::pathway_log` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::pathway_log(data));
