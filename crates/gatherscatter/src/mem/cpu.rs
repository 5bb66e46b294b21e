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

/// The size of the last-level cache the first CPU sees, in bytes, read
/// once from Linux's sysfs; 32 MiB (the L3 of the CPU most thresholds were
/// measured on, AMD EPYC family 25 model 1) where it cannot be read.
/// Thresholds that mean "larger than the cache" scale with it.
pub(crate) fn last_level_cache_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| read_last_level_cache().unwrap_or(MEASURED_LAST_LEVEL_CACHE))
}

/// The L3 of the CPU the thresholds were first measured on.
pub(crate) const MEASURED_LAST_LEVEL_CACHE: usize = 32 << 20;

/// The largest data or unified cache in `/sys/devices/system/cpu/cpu0/cache`
/// (sizes such as `32768K`); `None` off Linux, under Miri, or when no size
/// parses.
fn read_last_level_cache() -> Option<usize> {
    read_data_caches().map(|(_, bytes)| bytes).max()
}

/// The data or unified caches of the first CPU: `(level, bytes)` each,
/// from sysfs; none off Linux, under Miri, or where nothing parses.
fn read_data_caches() -> impl Iterator<Item = (u32, usize)> {
    let readable = !cfg!(miri) && cfg!(target_os = "linux");
    let entries = readable
        .then(|| std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok())
        .flatten();
    entries.into_iter().flatten().flatten().filter_map(|entry| {
        let dir = entry.path();
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        if read("type").trim() == "Instruction" {
            return None;
        }
        let level = read("level").trim().parse().ok()?;
        let bytes = parse_cache_size(read("size").trim()).filter(|&b| b > 0)?;
        Some((level, bytes))
    })
}

/// The level-1 data and level-2 caches of one core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoreCaches {
    pub(crate) level1: usize,
    pub(crate) level2: usize,
}

/// The running CPU's [`CoreCaches`], read once from sysfs; where a level
/// cannot be read, the smallest of the x86-64 server cores measured
/// (32 KiB and 512 KiB, AMD EPYC family 25 model 1). Tiles meant to stay in
/// L1 or L2 are sized from them.
pub(crate) fn core_caches() -> CoreCaches {
    static CACHES: std::sync::OnceLock<CoreCaches> = std::sync::OnceLock::new();
    *CACHES.get_or_init(|| {
        let mut caches = MEASURED_CORE_CACHES;
        for (level, bytes) in read_data_caches() {
            match level {
                1 => caches.level1 = bytes,
                2 => caches.level2 = bytes,
                _ => {}
            }
        }
        caches
    })
}

/// The most columns of `column_bytes` each, a power of two, that fit in
/// two thirds of L1 (the rest is left to the indices and output streaming
/// past): the width of the packed tiles that GatherElements and
/// ScatterElements keep in L1. 0 when not even one fits.
pub(crate) fn columns_in_level1(column_bytes: usize) -> usize {
    let fits = core_caches().level1 * 2 / 3 / column_bytes.max(1);
    fits.checked_ilog2().map_or(0, |bits| 1 << bits)
}

/// The fallback of [`core_caches`].
const MEASURED_CORE_CACHES: CoreCaches = CoreCaches {
    level1: 32 << 10,
    level2: 512 << 10,
};

/// `"32768K"` → 32 MiB; also `M`, `G` and plain bytes.
fn parse_cache_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit.trim() {
        "" => 0,
        "K" | "KB" | "KiB" => 10,
        "M" | "MB" | "MiB" => 20,
        "G" | "GB" | "GiB" => 30,
        _ => return None,
    };
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_read_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("512K"), Some(512 << 10));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("4096"), Some(4096));
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_cache_size("12Q"), None);
        assert!(last_level_cache_bytes() > 0);
        let caches = core_caches();
        assert!(0 < caches.level1 && caches.level1 <= caches.level2);
        let columns = columns_in_level1(64);
        assert!(columns.is_power_of_two() && columns * 64 <= caches.level1);
        assert_eq!(columns_in_level1(usize::MAX), 0);
    }
}
