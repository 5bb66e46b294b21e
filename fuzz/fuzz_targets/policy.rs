#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gatherscatter_fuzz::fuzz_policy(data));
