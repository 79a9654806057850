#![no_main]
//! `iota_fuzz::wire_tensor` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::wire_tensor(data));
