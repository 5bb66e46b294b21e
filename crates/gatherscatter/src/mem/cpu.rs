//! What the running CPU can do, asked once where a kernel is chosen.

/// Whether the CPU has AVX2 (hence AVX), so the AVX2 kernels can run.
#[inline]
pub(crate) fn avx2_available() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    return std::arch::is_x86_feature_detected!("avx2");
    // Miri has no CPUID: it runs the kernels when they are compiled in.
    #[cfg(all(target_arch = "x86_64", miri))]
    return cfg!(target_feature = "avx2");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}
