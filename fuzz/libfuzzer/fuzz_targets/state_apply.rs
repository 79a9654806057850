#![no_main]
//! `iota_fuzz::state_apply` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::state_apply(data));
