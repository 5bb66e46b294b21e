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
