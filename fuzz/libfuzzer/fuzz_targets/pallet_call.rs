#![no_main]
//! `iota_fuzz::pallet_call` under libFuzzer (scripts/fuzz.sh).
libfuzzer_sys::fuzz_target!(|data: &[u8]| iota_fuzz::pallet_call(data));
