use super::*;

/// What the kernels must compute, written from the formula.
fn expected<W: Copy + Default>(
    row: &[W],
    indices: &[i64],
    shift: i64,
) -> (Vec<W>, Result<(), usize>) {
    let mut out = vec![W::default(); indices.len()];
    for (j, &v) in indices.iter().enumerate() {
        let p = if v < 0 { v + shift } else { v };
        match usize::try_from(p).ok().and_then(|p| row.get(p)) {
            Some(&w) => out[j] = w,
            None => return (out, Err(j)),
        }
    }
    (out, Ok(()))
}

fn indices(len: usize, size: i64) -> Vec<i64> {
    (0..len as i64)
        .map(|k| (k * 37 + 11) % (2 * size) - size)
        .collect()
}

/// Every case in `i64`, and in `i32` and `u16` wherever all its values
/// fit those types.
// Under Miri without AVX2 compiled in, the kernels write nothing and
// only the reference would run (the longest test of that run); CI's
// AVX2 Miri run takes it.
#[test]
#[cfg_attr(all(miri, not(target_feature = "avx2")), ignore)]
fn every_length_and_a_bad_index_at_every_position() {
    // Under Miri (83 s of interpretation for the full set), lengths
    // that still reach every lane of a group of 8 and of 4, a whole
    // group and a tail: 13 = 8 + 5 = 3 × 4 + 1.
    let lengths: &[usize] = match cfg!(miri) {
        true => &[0, 1, 3, 13],
        false => &[0, 1, 3, 4, 7, 8, 9, 16, 21],
    };
    for &len in lengths {
        let good = indices(len, 19);
        let non_negative: Vec<i64> = good.iter().map(|v| v.rem_euclid(19)).collect();
        let mut cases = vec![(good.clone(), 19), (non_negative.clone(), 19)];
        for bad_at in 0..len {
            // Past the end and below the start of each type's range;
            // without negatives for `u16`.
            let signed = [19, -20, i32::MIN.into(), i64::MAX];
            for (start, bad) in [(&good, &signed[..]), (&non_negative, &[19, 65535])] {
                for &bad in bad {
                    let mut with_bad = start.clone();
                    with_bad[bad_at] = bad;
                    cases.push((with_bad, 19));
                }
            }
        }
        // Negative indices refused: shift 0 makes every negative bad.
        cases.push((good.clone(), 0));
        for ((idx, shift), streaming) in cases
            .into_iter()
            .flat_map(|c| [(c.clone(), false), (c, true)])
        {
            check_each_word(&idx, shift, streaming);
            if let Ok(narrow) = idx
                .iter()
                .map(|&v| i32::try_from(v))
                .collect::<Result<Vec<_>, _>>()
            {
                check_each_word(&narrow, shift, streaming);
            }
            if let Ok(narrow) = idx
                .iter()
                .map(|&v| u16::try_from(v))
                .collect::<Result<Vec<_>, _>>()
            {
                check_each_word(&narrow, shift, streaming);
            }
        }
    }
}

/// Both kernels on indices `idx` of one type, against the formula.
fn check_each_word<X: VectorIndex + Copy + Into<i64>>(idx: &[X], shift: i64, streaming: bool) {
    let row32: Vec<u32> = (0..19).map(|v| v * 3 + 1).collect();
    let row64: Vec<u64> = (0..19).map(|v| v * 5 + 2).collect();
    let wide: Vec<i64> = idx.iter().map(|&v| v.into()).collect();
    let mut out32 = vec![0u32; idx.len()];
    let done = gather_u32s(&row32, &row32[3..], idx, shift, &mut out32, streaming);
    check_prefix(done, 8, &out32, &row32, &wide, shift);
    let mut out64 = vec![0u64; idx.len()];
    let done = gather_u64s(&row64, &row64[..1], idx, shift, &mut out64, streaming);
    check_prefix(done, 4, &out64, &row64, &wide, shift);
    crate::mem::stream::store_fence();
}

/// A kernel in groups of `group` must write exactly the whole groups
/// before the first bad index (all whole groups when there is none),
/// each element from the formula; nothing at all without AVX2.
fn check_prefix<W: Copy + Default + PartialEq + std::fmt::Debug>(
    done: usize,
    group: usize,
    out: &[W],
    row: &[W],
    idx: &[i64],
    shift: i64,
) {
    let (want, want_result) = expected(row, idx, shift);
    let good_prefix = want_result.err().unwrap_or(idx.len());
    let whole_groups = if avx2_available() {
        good_prefix / group * group
    } else {
        0
    };
    assert_eq!(done, whole_groups, "{idx:?} shift {shift}");
    assert_eq!(out[..done], want[..done], "{idx:?} shift {shift}");
}

/// Into memory never initialised (a fresh output), plain and streaming
/// stores alike: under Miri, reading the written prefix back is allowed
/// only if every word of it was stored.
#[test]
fn uninitialised_outputs_get_whole_words() {
    use std::mem::MaybeUninit;
    let row: Vec<u32> = (0..19).map(|v| v * 3 + 1).collect();
    let idx = indices(16, 19);
    let (want, _) = expected(&row, &idx, 19);
    for streaming in [false, true] {
        let mut out = vec![MaybeUninit::<u32>::uninit(); 16];
        // A next row of more lines than the call has groups.
        let next = vec![0u32; 1024];
        let done = gather_u32s(&row, &next, &idx, 19, &mut out, streaming);
        crate::mem::stream::store_fence();
        // SAFETY: the kernel wrote the first `done` words.
        let got: Vec<u32> = out[..done]
            .iter()
            .map(|w| unsafe { w.assume_init() })
            .collect();
        assert_eq!(got, want[..done]);
        let mut out = vec![MaybeUninit::<u64>::uninit(); 16];
        let row: Vec<u64> = row.iter().map(|&v| u64::from(v) << 33).collect();
        let done = gather_u64s(&row, &row, &idx, 19, &mut out, streaming);
        crate::mem::stream::store_fence();
        // SAFETY: as above.
        let got: Vec<u64> = out[..done]
            .iter()
            .map(|w| unsafe { w.assume_init() })
            .collect();
        let want: Vec<u64> = want[..done].iter().map(|&v| u64::from(v) << 33).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn an_empty_row_takes_no_index() {
    let mut out = [7u32; 8];
    assert_eq!(gather_u32s(&[], &[], &[0i64; 8], 0, &mut out, false), 0);
    assert_eq!(gather_u32s(&[], &[1], &[0i32; 8], 0, &mut out, false), 0);
    assert_eq!(out, [7; 8]);
}

/// On a machine with AVX2 the kernels must run (a silent fallback would
/// leave them untested).
#[test]
fn the_kernels_run_where_avx2_exists() {
    let ran = gather_u32s(&[1; 8], &[], &[0i64; 8], 1, &mut [0; 8], false) == 8;
    assert_eq!(
        gather_u32s(&[1; 8], &[], &[0u16; 8], 1, &mut [0; 8], false) == 8,
        ran
    );
    assert_eq!(
        gather_u64s(&[1; 4], &[], &[0i32; 4], 1, &mut [0; 4], false) == 4,
        ran
    );
    assert_eq!(ran, avx2_available());
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    assert_eq!(ran, std::arch::is_x86_feature_detected!("avx2"));
    // CI's Miri run with `+avx2` must execute the unsafe blocks.
    #[cfg(all(miri, target_feature = "avx2"))]
    assert!(ran);
}
