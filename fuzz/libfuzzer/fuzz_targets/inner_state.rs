#![no_main]
//! `iota_fuzz::inner_state` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::inner_state(data));
