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

use crate::index::{first_beyond, position_shifted, KernelIndex};
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
            let applied = match rows.stream_ahead {
                // A piece at a time, each asking for the streams' lines
                // ahead of it: asked for a whole row at once, rows of 4096
                // float32 (W6) ran 1.4x slower on one thread.
                true => idx
                    .chunks(STREAM_CHUNK)
                    .zip(upd.chunks(STREAM_CHUNK))
                    .enumerate()
                    .try_for_each(|(c, (idx, upd))| {
                        let ahead = at + c * STREAM_CHUNK + STREAM_AHEAD;
                        prefetch_streams(indices, updates, ahead);
                        apply_row::<W, C, X>(out_row, idx, upd, rows.negative_shift)
                    }),
                false => apply_row::<W, C, X>(out_row, idx, upd, rows.negative_shift),
            };
            if applied.is_err() {
                // Found again by position: the loop keeps no count.
                return Err(at + first_beyond(idx, rows.negative_shift, data_row));
            }
        }
    }
    Ok(())
}

/// Combine each of `upd` into `out_row` at its index; `Err` at the first
/// index out of the row's range.
#[inline(always)]
fn apply_row<W, C: Combine<W>, X: KernelIndex>(
    out_row: &mut [W],
    idx: &[X],
    upd: &[W],
    negative_shift: i64,
) -> Result<(), ()> {
    for (&v, u) in idx.iter().zip(upd) {
        let target = out_row.get_mut(position_shifted(v.wide(), negative_shift));
        C::combine(target.ok_or(())?, u);
    }
    Ok(())
}
