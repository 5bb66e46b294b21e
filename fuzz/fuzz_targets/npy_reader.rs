#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gatherscatter_fuzz::files::fuzz_npy_reader(data));
