use super::*;

/// What the loops must compute, written from the formula: the element
/// count before the first bad index, and the values up to it.
fn expected<W: Copy>(
    plane: &[W],
    (stride, size): (usize, usize),
    indices: &[i64],
    shift: i64,
) -> (Vec<W>, usize) {
    let mut out = Vec::new();
    for (j, &v) in indices.iter().enumerate() {
        let p = if v < 0 { v + shift } else { v };
        match usize::try_from(p).ok().filter(|&p| p < size) {
            Some(p) => out.push(plane[p * stride + j]),
            None => return (out, j),
        }
    }
    let good = out.len();
    (out, good)
}

/// Every word size's loop on indices of one type, against the formula:
/// exactly the whole groups before the first bad index (or before the
/// elements whose reach leaves the plane), nothing without AVX2.
fn check<X: StridedIndex + Copy + Into<i64>>(
    (stride, size, plane_len): (usize, usize, usize),
    idx: &[X],
    shift: i64,
) {
    let geometry = (stride, size, plane_len);
    check_word::<u8, X>(geometry, idx, shift, |v| (v * 7 + 1) as u8);
    check_word::<u16, X>(geometry, idx, shift, |v| (v * 3 + 9) as u16);
    check_word::<u32, X>(geometry, idx, shift, |v| v as u32 * 3 + 1);
    check_word::<u64, X>(geometry, idx, shift, |v| (v << 33) + 7);
}

fn check_word<W, X>(
    (stride, size, plane_len): (usize, usize, usize),
    idx: &[X],
    shift: i64,
    value: impl Fn(u64) -> W,
) where
    W: StridedWord + Copy + Default + PartialEq + std::fmt::Debug + Send,
    X: StridedIndex + Copy + Into<i64>,
{
    let wide: Vec<i64> = idx.iter().map(|&v| v.into()).collect();
    let plane: Vec<W> = (0..plane_len as u64).map(value).collect();
    let word = std::mem::size_of::<W>();
    let spare = (4 / word).saturating_sub(1);
    let reachable = reach(plane_len, (stride, size), idx.len(), X::NARROW, spare);
    let (want, good) = expected(&plane, (stride, size), &wide[..reachable], shift);
    // Asking for the indices ahead changes only the speed.
    for asks in [0, idx.len() / 2, idx.len()] {
        let mut out = vec![W::default(); idx.len()];
        let done = gather_strided(&plane, (stride, size), idx, shift, &mut out, asks);
        let group = if word == 8 { 4 } else { 8 };
        let whole = if avx2_available() {
            good / group * group
        } else {
            0
        };
        let what = format!("{word}-byte words, {wide:?}, stride {stride} size {size} shift {shift}, asking before {asks}");
        assert_eq!(done, whole, "{what}");
        assert_eq!(out[..done], want[..done], "{what}");
        assert!(
            out[done..].iter().all(|w| *w == W::default()),
            "{what}: past the prefix"
        );
    }
}

fn each_type(geometry: (usize, usize, usize), idx: &[i64], shift: i64) {
    check(geometry, idx, shift);
    if let Ok(narrow) = idx
        .iter()
        .map(|&v| i32::try_from(v))
        .collect::<Result<Vec<_>, _>>()
    {
        check(geometry, &narrow, shift);
    }
    if let Ok(narrow) = idx
        .iter()
        .map(|&v| u16::try_from(v))
        .collect::<Result<Vec<_>, _>>()
    {
        check(geometry, &narrow, shift);
    }
}

// Under Miri without AVX2 compiled in only the reference would run;
// CI's AVX2 Miri run takes it.
#[test]
#[cfg_attr(all(miri, not(target_feature = "avx2")), ignore)]
fn every_length_and_a_bad_index_at_every_position() {
    let lengths: &[usize] = match cfg!(miri) {
        true => &[0, 3, 13],
        false => &[0, 1, 3, 4, 7, 8, 9, 16, 21],
    };
    let size = 7;
    for &len in lengths {
        // A plane of `size` rows of `len` columns (more than the row:
        // a wider data row).
        let stride = len + 2;
        let geometry = (stride, size, size * stride);
        let good: Vec<i64> = (0..len as i64).map(|k| (k * 5 + 3) % 14 - 7).collect();
        let non_negative: Vec<i64> = good.iter().map(|v| v.rem_euclid(7)).collect();
        each_type(geometry, &good, 7);
        each_type(geometry, &non_negative, 7);
        // Negatives refused: shift 0 makes each of them bad.
        each_type(geometry, &good, 0);
        // Under Miri (100 s for every position), the first, the
        // middle and the last.
        let bad_positions: Vec<usize> = match cfg!(miri) {
            true => [0, len / 2, len.saturating_sub(1)]
                .into_iter()
                .filter(|&p| p < len)
                .collect(),
            false => (0..len).collect(),
        };
        for bad_at in bad_positions {
            for (start, bad) in [
                (&good, &[7, -8, i32::MIN.into(), i64::MAX][..]),
                (&non_negative, &[7, 65535]),
            ] {
                for &bad in bad {
                    let mut with_bad = start.clone();
                    with_bad[bad_at] = bad;
                    each_type(geometry, &with_bad, 7);
                }
            }
        }
    }
}

#[test]
fn only_elements_whose_every_offset_is_in_the_plane_are_taken() {
    // Columns 0..16 of a packed strip of width 16: all reachable.
    assert_eq!(reach(16 * 5, (16, 5), 16, false, 0), 16);
    // Bytes are loaded 4 at a time: the last 3 columns are left.
    assert_eq!(reach(16 * 5, (16, 5), 16, false, 3), 13);
    // A plane that ends 3 words into its last row: 3 columns.
    assert_eq!(reach(16 * 4 + 3, (16, 5), 16, true, 0), 3);
    assert_eq!(reach(100, (16, 0), 16, false, 0), 0);
    assert_eq!(reach(usize::MAX, (1 << 32, 2), 16, false, 0), 0);
    assert_eq!(reach(usize::MAX, (1 << 20, 1 << 12), 16, true, 0), 0);
    assert_eq!(reach(usize::MAX, (1 << 20, 1 << 10), 16, true, 0), 16);
    let idx = [4i64; 16];
    let plane: Vec<u32> = (0..16 * 4 + 3).collect();
    let mut out = [0u32; 16];
    let done = gather_strided(&plane, (16, 5), &idx, 5, &mut out, idx.len());
    assert_eq!(done, 0, "columns 3.. of row 4 are past the plane");
    check((16, 5, 16 * 4 + 3), &idx, 5);
    // A packed strip of 16 bytes a row: the first group of 8 only.
    let plane: Vec<u8> = (0..16 * 5).collect();
    let mut out = [0u8; 16];
    assert_eq!(
        gather_strided(&plane, (16, 5), &idx, 5, &mut out, idx.len()),
        8 * usize::from(avx2_available())
    );
    check((16, 5, 16 * 5), &idx, 5);
}

/// Into memory never initialised (a fresh output): under Miri, reading
/// the written prefix back is allowed only if every word was stored.
#[test]
fn uninitialised_outputs_get_whole_words() {
    use std::mem::MaybeUninit;
    let (stride, size) = (20, 3);
    let plane: Vec<u64> = (0..(stride * size) as u64).map(|v| v << 40).collect();
    let idx: Vec<i32> = (0..16).map(|k| k % 3 - 1).collect();
    let mut out = vec![MaybeUninit::<u64>::uninit(); 16];
    let done = gather_strided(&plane, (stride, size), &idx, 3, &mut out, 0);
    let wide: Vec<i64> = idx.iter().map(|&v| v.into()).collect();
    let (want, _) = expected(&plane, (stride, size), &wide, 3);
    // SAFETY: the kernel wrote the first `done` words.
    let got: Vec<u64> = out[..done]
        .iter()
        .map(|w| unsafe { w.assume_init() })
        .collect();
    assert_eq!(got, want[..done]);
    assert_eq!(done == 16, avx2_available());
}
