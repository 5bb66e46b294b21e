//! float16 to float32 and back, as inline integer arithmetic, for the
//! reductions that compute each float16 step in f32 (`add`, `mul`, `mean`).
//!
//! `half`'s conversions check for F16C at run time and call a function
//! built for it on every value; three such calls per update made a float16
//! scatter-add 4x slower per element than float32 (8M updates along the
//! last axis: 72 ms on AMD EPYC family 25 model 1, torch 40 ms). These
//! inline into the kernels and give the same bits as `half` (and F16C) for
//! every input, NaNs included; the tests check all 65,536 float16 values
//! and the float32 values at and around every rounding edge.

use half::f16;

/// `a + b` computed in f32 and rounded back.
#[inline(always)]
pub(crate) fn add(a: f16, b: f16) -> f16 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if hardware::available() {
        return hardware::add(a, b);
    }
    arithmetic_add(a, b)
}

/// `a * b` computed in f32 (exactly: 11-bit significands) and rounded back.
#[inline(always)]
pub(crate) fn mul(a: f16, b: f16) -> f16 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if hardware::available() {
        return hardware::mul(a, b);
    }
    arithmetic_mul(a, b)
}

// Out of line where F16C may be taken, so that the step inlined into the
// kernels is the short one (inline, the kernels' combine calls were not).
#[cfg_attr(all(target_arch = "x86_64", not(miri)), inline(never))]
fn arithmetic_add(a: f16, b: f16) -> f16 {
    from_f32(to_f32(a) + to_f32(b))
}

#[cfg_attr(all(target_arch = "x86_64", not(miri)), inline(never))]
fn arithmetic_mul(a: f16, b: f16) -> f16 {
    from_f32(to_f32(a) * to_f32(b))
}

/// The exact float32 value of `h`; a NaN keeps its payload and is made
/// quiet, as F16C's `vcvtph2ps` does.
#[inline(always)]
pub(crate) fn to_f32(h: f16) -> f32 {
    let bits = u32::from(h.to_bits());
    let sign = (bits & 0x8000) << 16;
    let exponent = bits & 0x7c00;
    let mantissa = bits & 0x03ff;
    let magnitude = if exponent == 0x7c00 {
        // Infinity, or a NaN made quiet.
        let quiet = if mantissa == 0 { 0 } else { 0x0040_0000 };
        0x7f80_0000 | quiet | mantissa << 13
    } else if exponent == 0 {
        // Zero or subnormal: mantissa * 2^-24, exact in f32.
        (mantissa as f32 * f32::from_bits(0x3380_0000)).to_bits()
    } else {
        // Normal: rebias the exponent from 15 to 127.
        ((bits & 0x7fff) << 13) + ((127 - 15) << 23)
    };
    f32::from_bits(sign | magnitude)
}

/// `f` rounded to the nearest float16, ties to even; overflow gives
/// infinity; a NaN keeps the top of its payload and is made quiet.
#[inline(always)]
pub(crate) fn from_f32(f: f32) -> f16 {
    let bits = f.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let magnitude = bits & 0x7fff_ffff;
    let half_bits = if magnitude >= 0x7f80_0000 {
        // Infinity, or a NaN made quiet.
        let quiet = if magnitude == 0x7f80_0000 { 0 } else { 0x0200 };
        0x7c00 | quiet | ((magnitude & 0x007f_ffff) >> 13) as u16
    } else if magnitude >= 0x4780_0000 - 0x1000 {
        // At or past 65520, halfway from the largest float16 to 2^16.
        0x7c00
    } else if magnitude < 0x3880_0000 {
        // Below 2^-14, the smallest normal: a multiple of 2^-24. Adding
        // 0.5 makes the f32 adder round the value to that grid, ties to
        // even, leaving the multiple in the low mantissa bits.
        let grid = f32::from_bits(magnitude) + 0.5;
        (grid.to_bits() - 0.5f32.to_bits()) as u16
    } else {
        // Normal: round the 13 dropped mantissa bits to nearest, ties to
        // even, then rebias the exponent (a carry may step it up by one).
        let odd = (magnitude >> 13) & 1;
        let rounded = magnitude + 0x0fff + odd;
        ((rounded - ((127 - 15) << 23)) >> 13) as u16
    };
    f16::from_bits(sign | half_bits)
}

/// The same steps through F16C's conversions, written as inline assembly
/// so that they inline into kernels built for any x86-64 (a function with
/// `#[target_feature]` would not): a float16 scatter-add's combine went
/// from 63 ms (the arithmetic above) to 16 ms for 8M updates on AMD EPYC
/// family 25 model 1, against 14 ms for a plain 16-bit integer add.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[allow(unsafe_code)]
mod hardware {
    use half::f16;
    use std::arch::asm;
    use std::sync::atomic::{AtomicU8, Ordering};

    /// `UNKNOWN` until [`detect`] has run, then `YES` or `NO`.
    static F16C: AtomicU8 = AtomicU8::new(UNKNOWN);
    const UNKNOWN: u8 = 0;
    const NO: u8 = 1;
    const YES: u8 = 2;

    /// Whether the CPU (and the OS, for VEX encodings) runs F16C: one load
    /// of a byte of ours, so the step stays small enough to inline (with
    /// `is_x86_feature_detected!` inside, it was left a call per update).
    #[inline(always)]
    pub(super) fn available() -> bool {
        match F16C.load(Ordering::Relaxed) {
            YES => true,
            NO => false,
            _ => detect(),
        }
    }

    #[cold]
    #[inline(never)]
    fn detect() -> bool {
        let yes = std::arch::is_x86_feature_detected!("f16c")
            && std::arch::is_x86_feature_detected!("avx");
        F16C.store(if yes { YES } else { NO }, Ordering::Relaxed);
        yes
    }

    macro_rules! step {
        ($name:ident, $op:literal) => {
            /// Only where [`available`] holds.
            #[inline(always)]
            pub(super) fn $name(a: f16, b: f16) -> f16 {
                let out: u32;
                // SAFETY: F16C and AVX were detected by the caller
                // (`available`); the block reads and writes only the
                // registers named here. Rounding is to nearest, ties to
                // even (immediate 0), whatever MXCSR says; the f32 step
                // rounds as Rust's f32 arithmetic does.
                unsafe {
                    asm!(
                        "vmovd {x}, {a:e}",
                        "vmovd {y}, {b:e}",
                        "vcvtph2ps {x}, {x}",
                        "vcvtph2ps {y}, {y}",
                        concat!($op, " {x}, {x}, {y}"),
                        "vcvtps2ph {x}, {x}, 0",
                        "vmovd {out:e}, {x}",
                        a = in(reg) u32::from(a.to_bits()),
                        b = in(reg) u32::from(b.to_bits()),
                        out = lateout(reg) out,
                        x = out(xmm_reg) _,
                        y = out(xmm_reg) _,
                        options(pure, nomem, nostack),
                    );
                }
                // vcvtps2ph writes the half in the low 16 bits.
                f16::from_bits(out as u16)
            }
        };
    }
    step!(add, "vaddss");
    step!(mul, "vmulss");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_f32(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits()
    }

    #[test]
    fn every_float16_widens_to_the_bits_half_gives() {
        let step = if cfg!(miri) { 97 } else { 1 };
        for bits in (0..=u16::MAX).step_by(step) {
            let h = f16::from_bits(bits);
            let ours = to_f32(h);
            let theirs = h.to_f32();
            // `half` without F16C keeps a NaN's quiet bit as it was; F16C
            // (and this) set it. Either way the value is a NaN with the payload.
            if theirs.is_nan() {
                assert!(ours.is_nan(), "{bits:#06x}");
                assert_eq!(ours.to_bits() | 0x0040_0000, theirs.to_bits() | 0x0040_0000);
            } else {
                assert!(
                    same_f32(ours, theirs),
                    "{bits:#06x}: {ours:?} vs {theirs:?}"
                );
            }
        }
    }

    /// Each float16's f32 value, the f32 just either side of it, and the f32
    /// values at, just below and just above each midpoint to the next float16.
    fn edge_cases() -> impl Iterator<Item = f32> {
        let step = if cfg!(miri) { 997 } else { 1 };
        (0..0x7c00u16).step_by(step).flat_map(|bits| {
            let here = f16::from_bits(bits).to_f32().to_bits();
            let next = f16::from_bits(bits + 1).to_f32().to_bits();
            let middle = here + (next - here) / 2;
            let around = |b: u32| [b.saturating_sub(1), b, b + 1];
            let mut all = Vec::with_capacity(12);
            for b in around(here).into_iter().chain(around(middle)) {
                all.push(f32::from_bits(b));
                all.push(-f32::from_bits(b));
            }
            all
        })
    }

    #[test]
    fn rounding_to_float16_matches_half_at_every_edge() {
        let specials = [
            0.0,
            -0.0,
            65504.0,
            65519.99,
            65520.0,
            1e6,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        for f in edge_cases().chain(specials) {
            let (ours, theirs) = (from_f32(f), f16::from_f32(f));
            assert_eq!(
                ours.to_bits(),
                theirs.to_bits(),
                "{f:e} ({:#010x})",
                f.to_bits()
            );
        }
    }

    #[test]
    fn add_and_mul_round_once_from_the_f32_result() {
        // Hardware and arithmetic paths alike (whichever this CPU takes):
        // every pair on a grid of bit patterns, against half's conversions.
        let step = if cfg!(miri) { 4099 } else { 61 };
        let wide =
            |a: f16, b: f16, op: fn(f32, f32) -> f32| f16::from_f32(op(a.to_f32(), b.to_f32()));
        for a in (0..=u16::MAX).step_by(step).map(f16::from_bits) {
            for b in (0..=u16::MAX).step_by(step * 7 + 2).map(f16::from_bits) {
                for (ours, theirs) in [
                    (add(a, b), wide(a, b, |x, y| x + y)),
                    (mul(a, b), wide(a, b, |x, y| x * y)),
                ] {
                    // Of two NaN operands either may come through.
                    if theirs.is_nan() {
                        assert!(ours.is_nan(), "{a:?} {b:?}");
                    } else {
                        assert_eq!(ours.to_bits(), theirs.to_bits(), "{a:?} {b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn nans_narrow_quiet_with_the_top_of_their_payload() {
        for bits in [
            0x7fc0_0000u32,
            0x7f80_0001,
            0x7fbf_ffff,
            0xffc1_2345,
            0x7f80_2000,
        ] {
            let ours = from_f32(f32::from_bits(bits));
            assert!(ours.is_nan(), "{bits:#x}");
            let expected =
                ((bits >> 16) & 0x8000) as u16 | 0x7e00 | ((bits & 0x7f_ffff) >> 13) as u16;
            assert_eq!(ours.to_bits(), expected, "{bits:#x}");
        }
    }

    #[test]
    fn a_sweep_of_float32_bit_patterns_rounds_as_half_does() {
        // Every 4099th pattern (a prime stride, so every low-bit residue
        // comes up): about a million values across the whole range.
        let step = if cfg!(miri) { 40_009_999 } else { 4099 };
        for bits in (0..=u32::MAX).step_by(step) {
            let f = f32::from_bits(bits);
            if f.is_nan() {
                continue;
            }
            assert_eq!(
                from_f32(f).to_bits(),
                f16::from_f32(f).to_bits(),
                "{bits:#010x}"
            );
        }
    }
}
