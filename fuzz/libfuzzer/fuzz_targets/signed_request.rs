#![no_main]
//! `iota_fuzz::signed_request` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::signed_request(data));
