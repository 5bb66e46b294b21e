use super::*;

fn rule(size: usize, negative_allowed: bool) -> AxisRule {
    AxisRule {
        axis: 0,
        size,
        negative_allowed,
    }
}

#[test]
fn only_last_axis_calls_whose_leading_dims_match_walk_row_by_row() {
    let along = |axis: usize, size: usize| AxisRule {
        axis,
        size,
        negative_allowed: true,
    };
    let rows = matching_last_axis_rows;
    assert_eq!(rows(&[8, 8], &[8, 4], &along(1, 8)), Some((8, 4)));
    assert_eq!(rows(&[2, 3, 5], &[2, 3, 7], &along(2, 5)), Some((5, 7)));
    assert_eq!(rows(&[5], &[9], &along(0, 5)), Some((5, 9)));
    // An outer axis, fewer index rows than data rows, empty rows.
    assert_eq!(rows(&[8, 8], &[4, 8], &along(0, 8)), None);
    assert_eq!(rows(&[8, 8], &[4, 4], &along(1, 8)), None);
    assert_eq!(rows(&[8, 0], &[8, 4], &along(1, 0)), None);
    assert_eq!(rows(&[8, 8], &[8, 0], &along(1, 8)), None);
}

#[test]
fn resolves_the_closed_range_minus_s_to_s_minus_1() {
    let r = rule(5, true);
    assert_eq!(r.resolve(0), Some(0));
    assert_eq!(r.resolve(4), Some(4));
    assert_eq!(r.resolve(-1), Some(4));
    assert_eq!(r.resolve(-5), Some(0));
    assert_eq!(r.resolve(5), None);
    assert_eq!(r.resolve(-6), None);
}

#[test]
fn negatives_refused_when_the_profile_forbids_them() {
    let r = rule(5, false);
    assert_eq!(r.resolve(-1), None);
    assert_eq!(r.resolve(4), Some(4));
}

#[test]
fn huge_unsigned_values_are_out_of_range_not_negative() {
    let r = rule(5, true);
    assert_eq!(r.resolve(u64::MAX.to_i128()), None);
    assert_eq!(r.resolve((i64::MAX as u64 + 1).to_i128()), None);
    assert_eq!(r.resolve(i64::MIN.to_i128()), None);
}

/// Both storage kinds, around the inline limit: the same positions,
/// and the first bad value reported at its coordinates.
#[test]
fn resolving_keeps_order_and_reports_the_first_bad_index_at_any_count() {
    for count in [
        0,
        1,
        Positions::INLINE - 1,
        Positions::INLINE,
        Positions::INLINE + 1,
        40,
    ] {
        let values: Vec<i32> = (0..count as i32).map(|v| v % 7 - 3).collect();
        let flat = [count];
        let view = TypedView::new(&flat, &values).unwrap();
        let resolved = resolve_along_axis(view, rule(7, true)).unwrap();
        let expected: Vec<usize> = values.iter().map(|&v| (v + 7) as usize % 7).collect();
        assert_eq!(&*resolved, expected.as_slice(), "{count} indices");
        if count == 0 {
            continue;
        }
        let mut bad = values.clone();
        bad[count - 1] = 7;
        if count > 2 {
            bad[count - 2] = -8;
        }
        let shape = [1, count];
        let view = TypedView::new(&shape, &bad).unwrap();
        let err = resolve_along_axis(view, rule(7, true)).unwrap_err();
        let first = if count > 2 { count - 2 } else { count - 1 };
        match err {
            Error::IndexOutOfRange {
                value, position, ..
            } => {
                assert_eq!(value, bad[first] as i128, "{count} indices");
                assert_eq!(position, vec![0, first], "{count} indices");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// An axis past i64::MAX (an empty tensor's) resolves exactly at both
/// storage kinds: -1 is its last position, and i64::MIN, below it as
/// a usize once negatives are refused, is out of range.
#[test]
fn axes_past_i64_resolve_exactly_inline_and_on_the_heap() {
    let size = (1usize << 63) + 5;
    for count in [4, Positions::INLINE + 4] {
        let mut values = vec![0i64; count];
        values[count - 1] = -1;
        let flat = [count];
        let view = TypedView::new(&flat, &values).unwrap();
        let resolved = resolve_along_axis(view, rule(size, true)).unwrap();
        assert_eq!(resolved[count - 1], size - 1, "{count} indices");
        values[count - 1] = i64::MIN;
        let view = TypedView::new(&flat, &values).unwrap();
        let err = resolve_along_axis(view, rule(size, false)).unwrap_err();
        assert!(
            matches!(err, Error::IndexOutOfRange { value, .. } if value == i64::MIN as i128),
            "{count} indices: {err:?}"
        );
    }
}

/// The vectorized passes of `resolve_along_axis` against
/// [`AxisRule::resolve`]'s wide arithmetic, value by value: the edges of
/// the range and of each index type, at the start, middle and end of a
/// heap-stored list, with and without negatives.
#[test]
#[cfg_attr(miri, ignore = "safe arithmetic only, and 15 s of CI's Miri run")]
fn resolving_agrees_with_wide_arithmetic_at_every_edge_value() {
    fn check<I: IndexElement>(edges: &[I], filler: I) {
        for negative_allowed in [true, false] {
            let r = rule(7, negative_allowed);
            for &edge in edges {
                for at in [0, 20, 39] {
                    let mut values = vec![filler; 40];
                    values[at] = edge;
                    let shape = [40];
                    let got = resolve_along_axis(TypedView::new(&shape, &values).unwrap(), r);
                    let wide: Option<Vec<usize>> =
                        values.iter().map(|v| r.resolve(v.to_i128())).collect();
                    let case = format!("{edge:?} at {at}, negatives {negative_allowed}");
                    match (got, wide) {
                        (Ok(got), Some(wide)) => assert_eq!(&*got, wide.as_slice(), "{case}"),
                        (
                            Err(Error::IndexOutOfRange {
                                value, position, ..
                            }),
                            None,
                        ) => {
                            assert_eq!((value, position), (edge.to_i128(), vec![at]), "{case}")
                        }
                        (got, wide) => panic!("{case}: {got:?} against {wide:?}"),
                    }
                }
            }
        }
    }
    check::<i64>(&[0, 6, 7, -1, -7, -8, i64::MIN, i64::MAX], 3);
    check::<u64>(
        &[0, 6, 7, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX],
        3,
    );
    check::<i32>(&[6, 7, -7, -8, i32::MIN, i32::MAX], 3);
    check::<u32>(&[6, 7, u32::MAX], 3);
    check::<i8>(&[6, 7, -7, -8, i8::MIN, i8::MAX], 3);
    check::<u8>(&[6, 7, u8::MAX], 3);
}

#[test]
fn an_empty_axis_accepts_nothing() {
    let r = rule(0, true);
    assert_eq!(r.resolve(0), None);
    assert_eq!(r.resolve(-1), None);
}

#[test]
fn the_small_walks_find_their_first_bad_index_again_by_position() {
    let row = [0i64, -4, 3, -5, 4, 9];
    // Negatives shifted by the size 4: -5 is the first out of range.
    assert_eq!(super::first_beyond(&row, 4, 4), 3);
    // Negatives refused (no shift): -4 is.
    assert_eq!(super::first_beyond(&row, 0, 4), 1);
    assert_eq!(
        super::first_beyond(&[2u16, 7, 1], 0, 8),
        3,
        "none: the length"
    );
    assert_eq!(super::first_beyond(&[2i32, 8], 8, 8), 1);
}

/// The chunks a reader handed out, each with its offset.
type Chunks = Vec<(usize, Vec<i64>)>;

/// Every chunk a reader hands out, with its offset, over `range`; the
/// walk stops with the position of `stop` when a chunk holds it.
fn chunks_read<R: ReadIndices>(
    reader: &mut R,
    range: std::ops::Range<usize>,
    stop: i64,
) -> (Chunks, Result<(), usize>) {
    let mut seen = Vec::new();
    let result = reader.try_chunks(range, |offset, chunk| {
        seen.push((offset, chunk.iter().map(|v| v.wide()).collect::<Vec<_>>()));
        match chunk.iter().position(|v| v.wide() == stop) {
            Some(k) => Err(offset + k),
            None => Ok(()),
        }
    });
    (seen, result)
}

/// The chunks joined back into the values they cover, checking that each
/// offset follows on from the chunk before.
fn joined(chunks: &Chunks) -> Vec<i64> {
    let mut all = Vec::new();
    for (offset, chunk) in chunks {
        assert_eq!(*offset, all.len());
        all.extend_from_slice(chunk);
    }
    all
}

/// Both readers handed out the same values up to where the walk ended: all
/// of them, or (stopped early) at least up to the stop, chunks ending
/// there or later.
fn same_reads(chunks: &Chunks, plain: &Chunks, result: Result<(), usize>) {
    let (got, want) = (joined(chunks), joined(plain));
    match result {
        Ok(()) => assert_eq!(got, want),
        Err(at) => {
            assert!(got.len() > at && want.len() > at, "{at}");
            let common = got.len().min(want.len());
            assert_eq!(got[..common], want[..common]);
        }
    }
}

#[test]
fn reading_ahead_hands_out_the_same_values_and_errors_as_the_reader_it_wraps() {
    let values: Vec<i64> = (0..1200).collect();
    let narrow: Vec<u32> = (0..1200).collect();
    let wide = [&narrow[..]];
    let wide = WideIndices::new(&wide[0]);
    for (start, len) in [
        (0, 0),
        (0, 1),
        (0, 63),
        (7, 64),
        (3, 65),
        (100, 900),
        (0, 1200),
    ] {
        let range = start..start + len;
        for stop in [
            -1,
            start as i64,
            (start + len / 2) as i64,
            (start + len) as i64 - 1,
        ] {
            let (plain, plain_result) = chunks_read(&mut InPlace(&values[..]), range.clone(), stop);
            for ask in [false, true] {
                let mut ahead = ReadAhead::new(InPlace(&values[..]), start, ask);
                let (chunks, result) = chunks_read(&mut ahead, range.clone(), stop);
                assert_eq!(result, plain_result, "{range:?} stop {stop} ask {ask}");
                same_reads(&chunks, &plain, result);
                let mut ahead = ReadAhead::new(wide.reader(), start, ask);
                let (chunks, result) = chunks_read(&mut ahead, range.clone(), stop);
                assert_eq!(
                    result, plain_result,
                    "widened {range:?} stop {stop} ask {ask}"
                );
                same_reads(&chunks, &plain, result);
            }
        }
    }
}

#[test]
fn reading_ahead_steps_through_eight_lines_of_the_stored_indices_at_a_time() {
    let values = vec![0i64; 1000];
    let mut ahead = ReadAhead::new(InPlace(&values[..]), 0, true);
    let (chunks, _) = chunks_read(&mut ahead, 0..1000, -1);
    let steps: Vec<usize> = chunks.iter().map(|(_, c)| c.len()).collect();
    assert_eq!(steps[..3], [64, 64, 64], "512 bytes of i64");
    assert_eq!(steps.iter().sum::<usize>(), 1000);
    // Widened u16 indices step by their own bytes, not the i64s they become.
    let narrow = vec![0u16; 1000];
    let narrow = [&narrow[..]];
    let mut ahead = ReadAhead::new(WideIndices::new(&narrow[0]).reader(), 0, true);
    let (chunks, _) = chunks_read(&mut ahead, 0..1000, -1);
    assert_eq!(chunks[0].1.len(), 256, "512 bytes of u16");
    // Not asking ahead, the reader's own chunks pass through whole.
    let mut plain = ReadAhead::new(InPlace(&values[..]), 0, false);
    let (chunks, _) = chunks_read(&mut plain, 0..1000, -1);
    assert_eq!(chunks.len(), 1);
}
