use super::*;
use crate::mem::cpu::avx2_available;

/// What the kernels must compute, written from the formula: element `j`
/// reads `data[r * data_row + p]` for its row `r = (first_col + j) /
/// row_len` and its position `p` (a negative index shifted); the outputs
/// up to the first bad index (or the first row past `data`), and that
/// index's place (the length when there is none).
fn expected<W: Copy + Default>(data: &[W], span: Span, idx: &[i64], shift: i64) -> (Vec<W>, usize) {
    let mut out = Vec::new();
    for (j, &v) in idx.iter().enumerate() {
        let row = (span.first_col + j) / span.row_len;
        let p = if v < 0 { v + shift } else { v };
        let p = usize::try_from(p).ok().filter(|&p| p < span.data_row);
        match p.and_then(|p| data.get(row * span.data_row + p)) {
            Some(&w) => out.push(w),
            None => return (out, j),
        }
    }
    (out, idx.len())
}

/// A kernel in groups of `group` must write exactly the whole groups
/// before the first bad index and within `reach` (all whole groups when
/// there is none), each element from the formula; nothing without AVX2.
fn check_prefix<W: Copy + Default + PartialEq + std::fmt::Debug>(
    (done, group): (usize, usize),
    out: &[W],
    data: &[W],
    span: Span,
    idx: &[i64],
    shift: i64,
) {
    let (want, good) = expected(data, span, idx, shift);
    let taken = good.min(reach(data.len(), span, idx.len(), false));
    let whole_groups = if avx2_available() {
        taken / group * group
    } else {
        0
    };
    assert_eq!(done, whole_groups, "{span:?} {idx:?} shift {shift}");
    assert_eq!(out[..done], want[..done], "{span:?} {idx:?} shift {shift}");
}

/// Both words' kernels on indices `idx` of one type, against the formula.
fn check_each_word<X: SpanningIndex + Copy + Into<i64>>(
    (data32, data64): (&[u32], &[u64]),
    span: Span,
    idx: &[X],
    shift: i64,
    streaming: bool,
) {
    let wide: Vec<i64> = idx.iter().map(|&v| v.into()).collect();
    let mut out32 = vec![0u32; idx.len()];
    let done = gather_spanning(data32, span, idx, shift, &mut out32, streaming);
    check_prefix((done, 8), &out32, data32, span, &wide, shift);
    let mut out64 = vec![0u64; idx.len()];
    let done = gather_spanning(data64, span, idx, shift, &mut out64, streaming);
    let group = if X::NARROW { 4 } else { 8 };
    check_prefix((done, group), &out64, data64, span, &wide, shift);
    crate::mem::stream::store_fence();
}

/// `idx` in `i64`, and in `i32` and `u16` wherever all its values fit.
fn check_each_index(data: (&[u32], &[u64]), span: Span, idx: &[i64], shift: i64, streaming: bool) {
    check_each_word(data, span, idx, shift, streaming);
    if let Ok(narrow) = idx
        .iter()
        .map(|&v| i32::try_from(v))
        .collect::<Result<Vec<_>, _>>()
    {
        check_each_word(data, span, &narrow, shift, streaming);
    }
    if let Ok(narrow) = idx
        .iter()
        .map(|&v| u16::try_from(v))
        .collect::<Result<Vec<_>, _>>()
    {
        check_each_word(data, span, &narrow, shift, streaming);
    }
}

/// Rows shorter than a group, as long as one and longer, data rows as
/// long as the output's and longer, pieces starting at a row's first and
/// last column; a bad index at each position, in every index type.
// Under Miri without AVX2 compiled in, the kernels write nothing; CI's
// AVX2 Miri run takes it.
#[test]
#[cfg_attr(all(miri, not(target_feature = "avx2")), ignore)]
fn every_row_length_start_and_a_bad_index_at_every_position() {
    // Under Miri, fewer shapes, lengths that reach a second group and a
    // tail (13 = 8 + 5 = 3 x 4 + 1), and bad indices in the first group,
    // the second and the tail.
    let (row_lens, lengths): (&[usize], &[usize]) = match cfg!(miri) {
        true => (&[1, 3, 8, 13], &[13]),
        false => (
            &[1, 2, 3, 4, 5, 8, 13, 16, 31],
            &[0, 1, 7, 8, 9, 16, 21, 40],
        ),
    };
    for &row_len in row_lens {
        for data_row in [row_len, row_len + 2] {
            for first_col in [0, row_len / 2, row_len - 1] {
                let span = Span {
                    data_row,
                    row_len,
                    first_col,
                };
                let rows = (first_col + 40) / row_len + 1;
                let data32: Vec<u32> = (0..rows * data_row).map(|v| v as u32 * 3 + 1).collect();
                let data64: Vec<u64> = data32.iter().map(|&v| u64::from(v) << 33 | 5).collect();
                let data = (&data32[..], &data64[..]);
                for &len in lengths {
                    let size = data_row as i64;
                    let good: Vec<i64> = (0..len as i64)
                        .map(|k| (k * 37 + 11) % (2 * size) - size)
                        .collect();
                    let non_negative: Vec<i64> = good.iter().map(|v| v.rem_euclid(size)).collect();
                    for streaming in [false, true] {
                        check_each_index(data, span, &good, size, streaming);
                        check_each_index(data, span, &non_negative, size, streaming);
                        // Negative indices refused.
                        check_each_index(data, span, &good, 0, streaming);
                    }
                    let positions: Vec<usize> = match cfg!(miri) {
                        true => vec![0, 9, len - 1],
                        false => (0..len).collect(),
                    };
                    for bad_at in positions {
                        let signed = [size, -size - 1, i32::MIN.into(), i64::MAX];
                        for (start, bad) in [(&good, &signed[..]), (&non_negative, &[size, 65535])]
                        {
                            for &bad in bad {
                                let mut with_bad = start.clone();
                                with_bad[bad_at] = bad;
                                check_each_index(data, span, &with_bad, size, bad_at % 2 == 0);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Data holding fewer rows than the indices reach: the kernels stop at
/// the last whole group inside it.
#[test]
#[cfg_attr(all(miri, not(target_feature = "avx2")), ignore)]
fn short_data_stops_the_loop_at_its_last_row() {
    let span = Span {
        data_row: 5,
        row_len: 3,
        first_col: 1,
    };
    // Three data rows: elements 0..8 (rows 0-2 from column 1).
    let data32: Vec<u32> = (0..15).collect();
    let data64: Vec<u64> = (0..15).map(|v| v << 40).collect();
    let idx: Vec<i64> = (0..24).map(|k| k % 5).collect();
    check_each_index((&data32, &data64), span, &idx, 5, false);
    let mut out = [0u32; 24];
    let done = gather_spanning(&data32, span, &idx, 5, &mut out, false);
    assert_eq!(done, if avx2_available() { 8 } else { 0 });
}

/// Into memory never initialised (a fresh output), plain and streaming
/// stores alike: under Miri, reading the written prefix back is allowed
/// only if every word of it was stored.
#[test]
fn uninitialised_outputs_get_whole_words() {
    use std::mem::MaybeUninit;
    let span = Span {
        data_row: 7,
        row_len: 3,
        first_col: 2,
    };
    let data: Vec<u64> = (0..7 * 7).map(|v| v * 11 + 3).collect();
    let idx: Vec<i64> = (0..16).map(|k| (k * 5) % 14 - 7).collect();
    let (want, _) = expected(&data, span, &idx, 7);
    for streaming in [false, true] {
        let mut out = vec![MaybeUninit::<u64>::uninit(); 16];
        let done = gather_spanning(&data, span, &idx, 7, &mut out, streaming);
        crate::mem::stream::store_fence();
        // SAFETY: the kernel wrote the first `done` words.
        let got: Vec<u64> = out[..done]
            .iter()
            .map(|w| unsafe { w.assume_init() })
            .collect();
        assert_eq!(got, want[..done]);
        let data: Vec<u32> = data.iter().map(|&v| v as u32).collect();
        let narrow: Vec<i32> = idx.iter().map(|&v| v as i32).collect();
        let mut out = vec![MaybeUninit::<u32>::uninit(); 16];
        let done = gather_spanning(&data, span, &narrow, 7, &mut out, streaming);
        crate::mem::stream::store_fence();
        // SAFETY: as above.
        let got: Vec<u32> = out[..done]
            .iter()
            .map(|w| unsafe { w.assume_init() })
            .collect();
        let want: Vec<u32> = want[..done].iter().map(|&v| v as u32).collect();
        assert_eq!(got, want);
    }
}

/// On a machine with AVX2 the kernels must run (a silent fallback would
/// leave them untested).
#[test]
fn the_kernels_run_where_avx2_exists() {
    let span = Span {
        data_row: 2,
        row_len: 2,
        first_col: 0,
    };
    let ran = gather_spanning(&[1u32; 16], span, &[0i64; 8], 2, &mut [0; 8], false) == 8;
    assert_eq!(
        gather_spanning(&[1u64; 16], span, &[0u16; 8], 2, &mut [0; 8], false) == 8,
        ran
    );
    assert_eq!(ran, avx2_available());
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    assert_eq!(ran, std::arch::is_x86_feature_detected!("avx2"));
    #[cfg(all(miri, target_feature = "avx2"))]
    assert!(ran);
}

#[test]
fn reach_keeps_to_whole_data_rows_and_narrow_offsets() {
    let span = |data_row, row_len, first_col| Span {
        data_row,
        row_len,
        first_col,
    };
    // Three data rows of 10 hold rows 0-2: 3 * 4 - 1 elements from
    // column 1.
    assert_eq!(reach(30, span(10, 4, 1), 100, false), 11);
    assert_eq!(reach(29, span(10, 4, 1), 100, false), 7);
    assert_eq!(reach(30, span(10, 4, 1), 5, false), 5);
    assert_eq!(reach(30, span(0, 4, 0), 5, false), 0);
    assert_eq!(reach(30, span(10, 4, 4), 5, false), 0);
    // Narrow offsets: rows whose last offset is at most i32::MAX.
    let big = 1 << 30;
    assert_eq!(reach(usize::MAX, span(big, 2, 0), 100, true), 4);
    assert_eq!(reach(usize::MAX, span(big, 2, 0), 100, false), 100);
    assert_eq!(reach(usize::MAX, span(1 << 31, 2, 0), 100, true), 0);
}
