use super::super::columns::fresh_by_columns;
use super::super::fresh_output;
use super::*;
use crate::reduction::{AddOp, Overwrite};

/// Each path of one task stores data into every slot of a fresh output
/// before applying the updates: whole slabs (a scatter along the last
/// axis and one along a middle axis), column pieces of every row with
/// and without packed strips (along axis 0), and no updates at all.
#[test]
fn every_path_writes_every_slot_of_a_fresh_output() {
    let shape = [3, 4, 70];
    let data: Vec<i64> = (0..840).collect();
    for (axis, ishape) in [
        (2, [2, 4, 70]),
        (1, [3, 2, 70]),
        (0, [2, 3, 66]),
        (0, [0, 4, 70]),
    ] {
        let count: usize = ishape.iter().product();
        let idx: Vec<i64> = (0..count as i64).map(|k| k % 2 - 1).collect();
        let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
        let rule = AxisRule {
            axis,
            size: shape[axis],
            negative_allowed: true,
        };
        let g = Geometry::new(&shape, &ishape, &rule);
        let mut expected = vec![0; data.len()];
        scatter::<i64, i64, AddOp, i64>(&data, &mut expected, &g, &idx, &upd).unwrap();
        let fresh = fresh_output(data.len(), |out| {
            scatter::<i64, _, AddOp, i64>(&data, out, &g, &idx, &upd)
        });
        assert_eq!(
            fresh,
            Ok(expected.clone()),
            "axis {axis}, indices {ishape:?}"
        );
        if axis == 0 {
            for packed_strips in [true, false] {
                let fresh = fresh_by_columns(&data, &g, &idx, &upd, 1, packed_strips);
                assert_eq!(fresh, Ok(expected.clone()), "packed strips {packed_strips}");
            }
        }
    }
}

/// Slabs walked in packed tiles (too small here to be chosen, so the
/// tiles are forced) write every slot of a fresh output and give what
/// the in-place walk gives: tiles narrower than a row, ending inside it
/// and as wide as it; index rows shorter than data's, more index rows
/// than axis positions, a slab with no index rows; overwrite and add;
/// and a bad index is reported.
#[test]
fn slabs_walked_in_packed_tiles_match_the_slabs_walked_in_place() {
    let shape = [3, 5, 70];
    let ishape = [2, 8, 66];
    let data: Vec<i64> = (0..1050).collect();
    let count: usize = ishape.iter().product();
    let mut idx: Vec<i64> = (0..count as i64)
        .map(|k| (k * 7 + k / 66) % 5 - (k % 3 == 0) as i64 * 5)
        .collect();
    let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
    let rule = AxisRule {
        axis: 1,
        size: 5,
        negative_allowed: true,
    };
    let g = Geometry::new(&shape, &ishape, &rule);
    let slabs = OwnedSlabs { first: 0, len: 350 };
    fn tiled<C: Combine<i64>>(
        data: &[i64],
        g: &Geometry<'_>,
        idx: &[i64],
        upd: &[i64],
        (slabs, tile): (OwnedSlabs, usize),
    ) -> Result<Vec<i64>, usize> {
        fresh_output(data.len(), |out| {
            let mut strip = Vec::with_capacity(g.data_shape[g.rule.axis] * tile);
            let task = (out, slabs, tile, &mut strip);
            apply_slabs_in_tiles::<i64, _, C, i64>(task, data, g, idx, upd)
        })
    }
    for tile in [4, 32, 70] {
        let mut expected = vec![0; data.len()];
        scatter::<i64, i64, AddOp, i64>(&data, &mut expected, &g, &idx, &upd).unwrap();
        let got = tiled::<AddOp>(&data, &g, &idx, &upd, (slabs, tile));
        assert_eq!(got, Ok(expected), "add, tile {tile}");
        let mut expected = vec![0; data.len()];
        scatter::<i64, i64, Overwrite, i64>(&data, &mut expected, &g, &idx, &upd).unwrap();
        let got = tiled::<Overwrite>(&data, &g, &idx, &upd, (slabs, tile));
        assert_eq!(got, Ok(expected), "overwrite, tile {tile}");
    }
    let bad = 66 * 8 + 66 * 3 + 40;
    idx[bad] = 5;
    let mut out = vec![0; data.len()];
    let found = apply_slabs_in_tiles::<i64, i64, AddOp, i64>(
        (&mut out, slabs, 32, &mut Vec::new()),
        &data,
        &g,
        &idx,
        &upd,
    );
    assert_eq!(found, Err(bad));
}

/// Rows of 40 updates are walked in chunks of 16 with the streams
/// prefetched ahead: every target and every reported position must
/// still be the one of the plain row-major walk (spec §2.6), for the
/// last axis and an outer one.
#[test]
fn row_walks_in_chunks_apply_every_update_and_name_the_first_bad_index() {
    let row = 40;
    for (axis, shape) in [(1, [3, row]), (0, [5, row])] {
        let ishape = [3, row];
        let size = shape[axis];
        let data: Vec<i64> = (0..(shape[0] * shape[1]) as i64).collect();
        let count = ishape[0] * ishape[1];
        // Negative and duplicate indices, in range.
        let idx: Vec<i64> = (0..count as i64)
            .map(|k| (k * 5 + k / 7) % (2 * size as i64) - size as i64)
            .collect();
        let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
        let rule = AxisRule {
            axis,
            size,
            negative_allowed: true,
        };
        let g = Geometry::new(&shape, &ishape, &rule);
        let mut expected = data.clone();
        for p in 0..ishape[0] {
            for j in 0..row {
                let k = p * row + j;
                let i = (idx[k] + size as i64) as usize % size;
                let at = if axis == 1 { p * row + i } else { i * row + j };
                expected[at] = upd[k];
            }
        }
        let mut out = vec![0; data.len()];
        scatter::<i64, i64, Overwrite, i64>(&data, &mut out, &g, &idx, &upd).unwrap();
        assert_eq!(out, expected, "axis {axis}");
        let fresh = fresh_output(data.len(), |out| {
            scatter::<i64, _, Overwrite, i64>(&data, out, &g, &idx, &upd)
        });
        assert_eq!(fresh, Ok(expected), "fresh, axis {axis}");
        for bad in [0, 15, 16, 17, 31, 32, 39, 40, 56, 79, 80, 119] {
            for value in [size as i64, -(size as i64) - 1] {
                let mut wrong = idx.clone();
                wrong[bad] = value;
                let mut out = vec![0; data.len()];
                let found = scatter::<i64, i64, Overwrite, i64>(&data, &mut out, &g, &wrong, &upd);
                assert_eq!(found, Err(bad), "axis {axis}, index {value} at {bad}");
            }
        }
    }
}

/// Short index rows along a middle axis ([`ShortRows`], the index rows
/// of one data plane taken as a run): rows of 1 to 9 updates, more index
/// rows than axis positions, negative and duplicate indices, overwrite
/// and add, all as the naive walk in row-major order. A bad index
/// anywhere (the first, a run's first and last, the very last; too high,
/// too low, or negative where negatives are not allowed) is reported at
/// its position, with the updates before it applied and none after.
#[test]
fn short_rows_apply_in_row_major_order_and_fail_at_their_first_bad_index() {
    let shape = [5, 7, 9];
    let data: Vec<i64> = (0..315).collect();
    for row in [1, 3, 8, 9] {
        let ishape = [5, 10, row];
        let count = 50 * row;
        let run = 10 * row;
        for negative_allowed in [true, false] {
            let size = shape[1] as i64;
            let idx: Vec<i64> = (0..count as i64)
                .map(|k| match negative_allowed {
                    true => (k * 5 + k / 3) % (2 * size) - size,
                    false => (k * 5 + k / 3) % size,
                })
                .collect();
            let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
            let rule = AxisRule {
                axis: 1,
                size: shape[1],
                negative_allowed,
            };
            let g = Geometry::new(&shape, &ishape, &rule);
            // The naive walk of the first `upto` updates.
            let naive = |idx: &[i64], upto: usize, add: bool| {
                let mut out = data.clone();
                for (k, &v) in idx.iter().enumerate().take(upto) {
                    let (n, j) = (k / run, k % row);
                    let i = (v + size) % size;
                    let at = n * 63 + i as usize * 9 + j;
                    out[at] = if add { out[at] + upd[k] } else { upd[k] };
                }
                out
            };
            let case = format!("rows of {row}, negatives allowed {negative_allowed}");
            let mut out = vec![0; data.len()];
            scatter::<i64, i64, Overwrite, i64>(&data, &mut out, &g, &idx, &upd).unwrap();
            assert_eq!(out, naive(&idx, count, false), "{case}");
            scatter::<i64, i64, AddOp, i64>(&data, &mut out, &g, &idx, &upd).unwrap();
            assert_eq!(out, naive(&idx, count, true), "add, {case}");
            let mut values = vec![size, -size - 1];
            if !negative_allowed {
                values.push(-1);
            }
            for bad in [0, 1, run - 1, run, 2 * run + row / 2, count - 1] {
                for &value in &values {
                    let mut wrong = idx.clone();
                    wrong[bad] = value;
                    let mut out = vec![0; data.len()];
                    let found = scatter::<i64, i64, AddOp, i64>(&data, &mut out, &g, &wrong, &upd);
                    let at = format!("{case}, index {value} at {bad}");
                    assert_eq!(found, Err(bad), "{at}");
                    assert_eq!(out, naive(&wrong, bad, true), "{at}");
                }
            }
        }
    }
}
