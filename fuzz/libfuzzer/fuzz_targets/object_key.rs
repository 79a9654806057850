#![no_main]
//! `iota_fuzz::object_key` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::object_key(data));
