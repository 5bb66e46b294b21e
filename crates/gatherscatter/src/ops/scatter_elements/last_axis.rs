//! ScatterElements along the last axis when index row `r` lands in data
//! row `r` (indices match data on every other dim): each step copies a few
//! hundred bytes to 4 KiB of data rows into the output and applies their
//! updates while those rows are still in L1.
//!
//! The general row loop copies 256 KiB of slabs, then walks the index rows
//! that land there ([`super::rows`]): by then the rows had left L1, and its
//! per-row set-up (the rows' range, chunks of 16 updates, a run per chunk)
//! cost more than short rows themselves. Measured on a 2-vCPU AMD EPYC
//! family 25 model 17 (Zen 4) VM, in one process, old and new alternating,
//! 16 MiB fresh outputs by `i64` indices, one thread, `stream_fetch=hardware`
//! (what `auto` kept), medians of 15 calls, old -> new: float32 adds in rows
//! of 16 6.8 -> 3.7 ms, of 64 6.6 -> 4.4, of 256 6.7 -> 5.0, of 1024 7.4
//! -> 5.7, of 4096 8.4 -> 7.4; int8 overwrites in rows of 16 19.4 -> 12.6,
//! of 256 14.1 -> 11.5, of 4096 18.5 -> 16.3; float64 adds in rows of 64
//! 4.5 -> 2.8, of 256 4.7 -> 3.2. Steps of 2 KiB lost much of it for short
//! rows (float32 rows of 64: 6.2 ms), and one row a step for rows of 1-2
//! KiB (float32 rows of 256: 5.7), also with the index and update arrays
//! moved off the output's offset in its pages.

use crate::index::{position_shifted, KernelIndex};
use crate::mem::prefetch::{prefetch_streams, STREAM_AHEAD, STREAM_CHUNK};
use crate::mem::uninit::Slot;
use crate::reduction::Combine;

/// Bytes of data rows copied per step: whole rows, one at the least.
const STEP_BYTES: usize = 512;
/// Rows of this many bytes or more go [`LONG_ROW_STEP_BYTES`] a step.
const LONG_ROW_BYTES: usize = 1 << 10;
const LONG_ROW_STEP_BYTES: usize = 4 << 10;

/// The rows of one task: output rows from `first` on, `data_row` elements
/// each, their index rows `row_len` long.
#[derive(Clone, Copy)]
pub(super) struct MatchingRows {
    pub first: usize,
    pub data_row: usize,
    pub row_len: usize,
    /// What a negative index is shifted by ([`crate::index::AxisRule::negative_shift`]).
    pub negative_shift: i64,
    /// Ask for the index and update streams ahead in software
    /// ([`super::measured_streams`]).
    pub stream_ahead: bool,
}

/// Copy data rows into `dst` (whole rows, from `rows.first` on) and apply
/// each one's updates, a step of rows at a time. `Err(p)`: the index at
/// flat position `p` is out of range; rows before its step are then
/// written, the rest of `dst` may not be.
pub(super) fn copy_and_apply_rows<W: Clone, O: Slot<W>, C: Combine<W>, X: KernelIndex>(
    dst: &mut [O],
    rows: MatchingRows,
    data: &[W],
    indices: &[X],
    updates: &[W],
) -> Result<(), usize> {
    let MatchingRows {
        data_row, row_len, ..
    } = rows;
    let row_bytes = data_row * std::mem::size_of::<W>().max(1);
    let step_bytes = match row_bytes < LONG_ROW_BYTES {
        true => STEP_BYTES,
        false => LONG_ROW_STEP_BYTES,
    };
    let per_step = (step_bytes / row_bytes).max(1);
    for (step, part) in dst.chunks_mut(per_step * data_row).enumerate() {
        let first_row = rows.first + step * per_step;
        let from = first_row * data_row;
        let part = O::init_from(part, &data[from..from + part.len()]);
        for (r, out_row) in part.chunks_exact_mut(data_row).enumerate() {
            let at = (first_row + r) * row_len;
            let idx = &indices[at..at + row_len];
            let upd = &updates[at..at + row_len];
            let shift = rows.negative_shift;
            let applied = match rows.stream_ahead {
                // Each group of updates asks for the streams' lines ahead
                // of it: asked for a whole row at once, rows of 4096
                // float32 (W6) ran 1.4x slower on one thread.
                true => apply_row::<W, C, X>(out_row, idx, upd, shift, |j| {
                    prefetch_streams(indices, updates, at + j + STREAM_AHEAD);
                }),
                false => apply_row::<W, C, X>(out_row, idx, upd, shift, |_| ()),
            };
            applied.map_err(|j| at + j)?;
        }
    }
    Ok(())
}

/// Combine each of `upd` into `out_row` at its index; `Err(j)` at the
/// first index out of the row's range, the updates before it applied.
///
/// Whole groups of [`STREAM_CHUNK`] go through a loop of that constant
/// length, which compiles to straight-line code, and the indices are first
/// taken as they are, with no fix-up of negatives (3 of an element's 9
/// instructions), up to the first negative or bad one, from which the
/// loop with the fix-up applies the rest in order, as Gather's row loop
/// does. Measured on W6 (float32 rows of 4096 by `i64` indices into a
/// buffer, one thread, AMD EPYC family 25 model 17): the counted loop over
/// the row with the fix-up took 22.8 ms where such a loop of groups
/// outside the library took 17.1 (the two in turn in one process); the
/// library's call 23.2-24.9 -> 19.1-21.6 ms with both (builds before and
/// after in turn, five processes each). From Python, the sweep's
/// 16 MiB cells along the last axis on one thread (old and new wheels in
/// turn, two runs each): int8 by `i64` 10.9-11.5 -> 8.3-8.4 ms (one run
/// of overwrites 11.4), float32 4.2-4.4 -> 3.6-3.9, float64 2.8-3.4 ->
/// 2.3-2.5 (overwrites), float32 by `i32` 4.4-4.6 -> 3.6-3.8.
#[inline(always)]
fn apply_row<W, C: Combine<W>, X: KernelIndex>(
    out_row: &mut [W],
    idx: &[X],
    upd: &[W],
    negative_shift: i64,
    ahead: impl Fn(usize),
) -> Result<(), usize> {
    let Err(done) = apply_groups::<W, C, X>(out_row, (idx, upd), 0, 0, &ahead) else {
        return Ok(());
    };
    let rest = (&idx[done..], &upd[done..]);
    apply_groups::<W, C, X>(out_row, rest, negative_shift, done, &ahead).map_err(|k| done + k)
}

/// [`apply_row`] from the row's update `first` on, each negative index
/// shifted by `shift` (0: none is, so every negative one is out of range),
/// calling `ahead` with the row position of each group before applying
/// it; `Err(j)` at the first index out of range, the updates before it
/// applied.
#[inline(always)]
fn apply_groups<W, C: Combine<W>, X: KernelIndex>(
    out_row: &mut [W],
    (idx, upd): (&[X], &[W]),
    shift: i64,
    first: usize,
    ahead: &impl Fn(usize),
) -> Result<(), usize> {
    debug_assert_eq!(idx.len(), upd.len());
    let (idx_groups, idx_rest) = idx.as_chunks::<STREAM_CHUNK>();
    let (upd_groups, upd_rest) = upd.as_chunks::<STREAM_CHUNK>();
    for (g, (idx, upd)) in idx_groups.iter().zip(upd_groups).enumerate() {
        ahead(first + g * STREAM_CHUNK);
        apply_elements::<W, C, X>(out_row, idx, upd, shift).map_err(|k| g * STREAM_CHUNK + k)?;
    }
    let done = idx_groups.len() * STREAM_CHUNK;
    apply_elements::<W, C, X>(out_row, idx_rest, upd_rest, shift).map_err(|k| done + k)
}

#[inline(always)]
fn apply_elements<W, C: Combine<W>, X: KernelIndex>(
    out_row: &mut [W],
    idx: &[X],
    upd: &[W],
    shift: i64,
) -> Result<(), usize> {
    for (k, (&v, u)) in idx.iter().zip(upd).enumerate() {
        let target = out_row
            .get_mut(position_shifted(v.wide(), shift))
            .ok_or(k)?;
        C::combine(target, u);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduction::{AddOp, Overwrite};

    /// The formula, update by update in row-major order: `out` with each
    /// update combined by `add` or stored, or the flat position of the
    /// first index out of its row (negatives count from the row's end).
    fn naive(
        data: &[i64],
        (rows, data_row, row_len): (usize, usize, usize),
        idx: &[i64],
        upd: &[i64],
        add: bool,
    ) -> Result<Vec<i64>, usize> {
        let mut out = data.to_vec();
        for r in 0..rows {
            for j in 0..row_len {
                let k = r * row_len + j;
                let v = idx[k];
                let p = if v < 0 { v + data_row as i64 } else { v };
                if !(0..data_row as i64).contains(&p) {
                    return Err(k);
                }
                let target = &mut out[r * data_row + p as usize];
                *target = if add { *target + upd[k] } else { upd[k] };
            }
        }
        Ok(out)
    }

    /// Rows around the loop's group of 16 (shorter, equal, one over, a few
    /// groups and a rest), the first negative index anywhere in a row
    /// (where the loop without the sign fix-up hands over to the one with
    /// it), duplicates whose order decides the overwrite, and a bad index
    /// at each position of a row: every target and every reported
    /// position are the formula's, with and without the streams asked for
    /// ahead.
    #[test]
    fn rows_switch_to_the_sign_fix_up_at_their_first_negative_index_and_apply_in_order() {
        for (data_row, row_len) in [(5, 1), (20, 15), (16, 16), (9, 17), (40, 40), (33, 100)] {
            let rows = 3;
            let data: Vec<i64> = (0..(rows * data_row) as i64).collect();
            let count = rows * row_len;
            let upd: Vec<i64> = (0..count as i64).map(|k| 1000 + k).collect();
            let size = data_row as i64;
            for first_negative in [0, 1, 15, 16, 17, row_len / 2, row_len] {
                // In range, with duplicates; negative from `first_negative`
                // on in every row, every other index.
                let idx: Vec<i64> = (0..count)
                    .map(|k| {
                        let (j, v) = (k % row_len, (k as i64 * 7 + 3) % size);
                        match j >= first_negative && j % 2 == 0 {
                            true => v - size,
                            false => v,
                        }
                    })
                    .collect();
                let mut bad_cases = vec![None];
                // Fewer under Miri, whose interpreter is slow.
                let every = if cfg!(miri) { 41 } else { 7 };
                bad_cases.extend((0..count).step_by(every).map(Some));
                for bad in bad_cases {
                    for bad_value in [size, -size - 1] {
                        let mut idx = idx.clone();
                        if let Some(at) = bad {
                            idx[at] = bad_value;
                        }
                        for stream_ahead in [false, true] {
                            let rows_of = MatchingRows {
                                first: 0,
                                data_row,
                                row_len,
                                negative_shift: size,
                                stream_ahead,
                            };
                            let case = format!(
                                "rows of {data_row} by {row_len}, negatives from {first_negative}, \
                                 bad {bad:?} = {bad_value}, ahead {stream_ahead}"
                            );
                            let shape = (rows, data_row, row_len);
                            let mut out = vec![0i64; data.len()];
                            let got = copy_and_apply_rows::<i64, i64, Overwrite, i64>(
                                &mut out, rows_of, &data, &idx, &upd,
                            );
                            match naive(&data, shape, &idx, &upd, false) {
                                Ok(expected) => {
                                    assert_eq!(got, Ok(()), "{case}");
                                    assert_eq!(out, expected, "{case}");
                                }
                                Err(at) => assert_eq!(got, Err(at), "{case}"),
                            }
                            let mut out = vec![0i64; data.len()];
                            let got = copy_and_apply_rows::<i64, i64, AddOp, i64>(
                                &mut out, rows_of, &data, &idx, &upd,
                            );
                            match naive(&data, shape, &idx, &upd, true) {
                                Ok(expected) => {
                                    assert_eq!((got, out), (Ok(()), expected), "{case}")
                                }
                                Err(at) => assert_eq!(got, Err(at), "add, {case}"),
                            }
                        }
                    }
                }
            }
        }
    }
}
