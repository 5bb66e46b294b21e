//! GatherElements along the last axis: each output row reads one data
//! row at the positions its indices name, with the AVX2 loop or the
//! scalar one, the row read through or the next one asked for ahead.

use super::word_gather::VectorRow;
use crate::index::{position_shifted, AxisRule, KernelIndex, ReadIndices};
use crate::mem::prefetch::{load_lines, prefetch_items_to_l2, LINE};
use crate::mem::uninit::Slot;

/// Largest part of the next data row asked for in one go. Along the last
/// axis, a whole 16 KiB row asked into L2 at once, before the current row
/// starts, ran W4 1.15-1.2x faster on one thread than asking for it 1 KiB
/// per 256 elements (into L1 or L2) or in 4 KiB parts: long sequential
/// bursts are what memory serves fastest. The cap keeps a burst well
/// inside L2.
const NEXT_ROW_BURST_BYTES: usize = 32 << 10;

/// Largest row read through once before the gathers from it start (see
/// [`gather_within_row`]): well inside L2 (512 KiB per core on the AMD
/// EPYCs measured, 256 KiB or more on current x86 cores).
const LOAD_ROW_MAX_BYTES: usize = 128 << 10;

/// Smallest row read through first: shorter rows follow one another in
/// memory, where the hardware prefetchers already run ahead.
const LOAD_ROW_MIN_BYTES: usize = 8 << 10;

/// `dst[j] = row[i_j]` for the positions `i_j` that `indices` name; `Err(j)`
/// at the first bad one (elements before it are written).
///
/// Random reads of a row that is not yet in cache wait on memory for each
/// line. When the row's indices are at least as many as its lines (so the
/// gathers would touch about all of them anyway) and it fits
/// [`LOAD_ROW_MAX_BYTES`], the row is read through once, line by line,
/// before the gathers: W4 (16 KiB rows, 4096 indices each) into a buffer ran
/// 17.6-19.5 ms on one thread and 9.3-9.7 ms on two this way, against
/// 25.9-26.2 and 13.8-14.3 ms asking for the next row into L2 in bursts
/// (AMD EPYC family 25 model 1, interleaved runs). The scalar loop gains
/// as much (same CPU, into a buffer, one thread, best of 5: W4 34 -> 26
/// ms, W4 in f64 74 -> 38, 2-byte rows of 8 and 32 KiB 32 -> 21 and
/// 63 -> 42, 1-byte rows of 16 KiB 44 -> 37). With `prefetch_next`
/// (the `row_fetch` knob, see [`super::measured_fetch`]) a row the vector
/// loop takes is not read through; the loop asks for the next row's
/// lines as it gathers this one instead. Otherwise the next row
/// is asked into L2 ahead of use, in bursts of [`NEXT_ROW_BURST_BYTES`]:
/// the row's indices are cut into as many pieces as `next_row` has
/// bursts, and each piece starts with its burst. (A branch-free variant,
/// clamping each load and flagging bad indices per chunk, measured slower
/// on W4 than this checked load.)
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_within_row<W: Clone, O: Slot<W>, R: ReadIndices>(
    row: &[W],
    next_row: &[W],
    rule: &AxisRule,
    indices: &mut R,
    first: usize,
    dst: &mut [O],
    vector: Option<VectorRow<W, O, R::Index>>,
    (streaming, prefetch_next): (bool, bool),
) -> std::result::Result<(), usize> {
    let row_bytes = std::mem::size_of_val(row);
    let load_row = (LOAD_ROW_MIN_BYTES..=LOAD_ROW_MAX_BYTES).contains(&row_bytes)
        && dst.len() >= row_bytes.div_ceil(LINE);
    let (next_row, vector_next) = if load_row && vector.is_some() && prefetch_next {
        (&[][..], next_row)
    } else if load_row {
        load_lines(row);
        (&[][..], &[][..])
    } else {
        (next_row, &[][..])
    };
    let bursts = std::mem::size_of_val(next_row)
        .div_ceil(NEXT_ROW_BURST_BYTES)
        .max(1);
    // Short rows take one burst: no divisions per row.
    let share = |len: usize| match bursts {
        1 => len.max(1),
        _ => len.div_ceil(bursts).max(1),
    };
    let piece = share(dst.len());
    let mut ahead = next_row.chunks(share(next_row.len()));
    for (c, dst) in dst.chunks_mut(piece).enumerate() {
        if let Some(lines) = ahead.next() {
            prefetch_items_to_l2(lines);
        }
        let at = first + c * piece;
        indices.try_chunks(at..at + dst.len(), |offset, idx| {
            let dst = &mut dst[offset..offset + idx.len()];
            // The vector loop writes a prefix; the scalar loop takes the
            // rest (the tail, or the vector holding a bad index, to name it).
            let shift = rule.negative_shift();
            // The share of the next row to ask for while these indices
            // are gathered (widened indices come a chunk at a time).
            let share = |k: usize| k * vector_next.len() / piece;
            let next = vector_next
                .get(share(offset)..share(offset + idx.len()))
                .unwrap_or_default();
            let done = vector.map_or(0, |gather| gather(row, next, idx, shift, dst, streaming));
            // Sliced, not `skip`ped: skipping a zip steps through each element.
            let rest = dst.get_mut(done..).unwrap_or_default();
            gather_from_row(row, idx.get(done..).unwrap_or_default(), shift, rest)
                .map_err(|j| at + offset + done + j)
        })?;
    }
    Ok(())
}

/// `dst[j] = row[p_j]` for the positions `p_j` that `indices` name (each
/// negative one shifted by `shift`); `Err(j)` at the first bad one. A
/// function of its own, not inlined: inside the closure that reads the
/// indices in chunks, the output's pointer was reloaded from the stack for
/// every element (2-byte words along the last axis, one load in three).
#[inline(never)]
fn gather_from_row<W: Clone, O: Slot<W>, X: KernelIndex>(
    row: &[W],
    indices: &[X],
    shift: i64,
    dst: &mut [O],
) -> std::result::Result<(), usize> {
    for (j, (d, &v)) in dst.iter_mut().zip(indices).enumerate() {
        d.put(row.get(position_shifted(v.wide(), shift)).ok_or(j)?.clone());
    }
    Ok(())
}
