//! GatherElements along the last axis: each output row reads one data
//! row at the positions its indices name, with the AVX2 loop or the
//! scalar one, the row read through or the next one asked for ahead.

use super::avx2::Span;
use super::word_gather::{SpanningRows, VectorRow};
use crate::index::{position_shifted, AxisRule, KernelIndex, ReadIndices, WIDEN_CHUNK};
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

/// Rows shorter than this, whose data rows follow one another, are
/// gathered by [`gather_short_rows`]: a call per row of
/// [`gather_within_row`] cost more than the row's copy (16 MiB of int8 by
/// int64 indices from Python, one thread, Intel Xeon family 6 model 207:
/// rows of 2 took 176 ms against torch's 73, rows of 16 61 against 25).
pub(super) const SHORT_ROW: usize = 32;

/// Output rows of `row_len` (under [`SHORT_ROW`]) elements from `first`
/// on, each reading the data row of `data_row` elements at the same row
/// number (data and indices agree on every dim before the last): one walk
/// over the task's indices, a widening chunk of whole rows at a time,
/// instead of a call per row. The `vector` loop, when given, takes each
/// chunk's prefix across row ends (streaming stores if asked); the scalar
/// walk the rest. `Err(k)` at the flat position `k` of the first bad
/// index.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_short_rows<W: Clone, O: Slot<W>, R: ReadIndices>(
    data: &[W],
    (data_row, row_len): (usize, usize),
    rule: &AxisRule,
    indices: &mut R,
    first: usize,
    dst: &mut [O],
    vector: Option<SpanningRows<W, O, R::Index>>,
    streaming: bool,
) -> std::result::Result<(), usize> {
    let shift = rule.negative_shift();
    let row_len = row_len.max(1);
    let step = (WIDEN_CHUNK / row_len).max(1) * row_len;
    for (s, dst) in dst.chunks_mut(step).enumerate() {
        let at = first + s * step;
        indices.try_chunks(at..at + dst.len(), |offset, idx| {
            let dst = &mut dst[offset..offset + idx.len()];
            // A chunk may start inside a row (a reader's own steps).
            let start = at + offset;
            let done = vector.map_or(0, |gather| {
                let span = Span {
                    data_row,
                    row_len,
                    first_col: start % row_len,
                };
                let from = (start / row_len).checked_mul(data_row);
                let rows = from.and_then(|from| data.get(from..)).unwrap_or_default();
                gather(rows, span, idx, shift, dst, streaming)
            });
            let (idx, dst, start) = (&idx[done..], &mut dst[done..], start + done);
            // The walk with no sign fix-up stops at the first negative or
            // bad index; the walk with it takes the rest from there (see
            // `gather_from_row` for why no pass looks for negatives first).
            let rows = (data_row, row_len);
            let walked = walk_short_rows(data, rows, idx, start, 0, dst).or_else(|j| {
                let rest = (&idx[j..], &mut dst[j..]);
                walk_short_rows(data, rows, rest.0, start + j, shift, rest.1).map_err(|k| j + k)
            });
            walked.map_err(|j| start + j)
        })?;
    }
    Ok(())
}

/// [`gather_short_rows`]' walk over one chunk of indices, from flat
/// position `start` (which may fall inside a row); `Err(j)` at the chunk's
/// first bad index. Inlined into its two calls, so with `shift` 0 the
/// fix-up of negatives compiles away.
#[inline(always)]
fn walk_short_rows<W: Clone, O: Slot<W>, X: KernelIndex>(
    data: &[W],
    (data_row, row_len): (usize, usize),
    idx: &[X],
    start: usize,
    shift: i64,
    dst: &mut [O],
) -> std::result::Result<(), usize> {
    let (mut row, mut col) = (start / row_len, start % row_len);
    let mut done = 0;
    while done < idx.len() {
        let take = (row_len - col).min(idx.len() - done);
        let from = row * data_row;
        // The plan sizes data to hold every row the indices have.
        let row_data = data.get(from..from + data_row).ok_or(done)?;
        let pairs = dst[done..done + take]
            .iter_mut()
            .zip(&idx[done..done + take]);
        for (j, (slot, &v)) in pairs.enumerate() {
            match row_data.get(position_shifted(v.wide(), shift)) {
                Some(value) => slot.put(value.clone()),
                None => return Err(done + j),
            }
        }
        done += take;
        (row, col) = (row + 1, 0);
    }
    Ok(())
}

/// `dst[j] = row[p_j]` for the positions `p_j` that `indices` name (each
/// negative one shifted by `shift`); `Err(j)` at the first bad one. A
/// function of its own, not inlined: inside the closure that reads the
/// indices in chunks, the output's pointer was reloaded from the stack for
/// every element (2-byte words along the last axis, one load in three).
///
/// Indices take a loop four elements a step with no sign fix-up (6
/// instructions an element instead of 11) up to the first step holding a
/// negative or bad one; from there the loop with the fix-up takes the rest
/// (a chunk with one negative index likely holds more), naming the first
/// bad index. A pass over the chunk to look for negatives first, as this
/// loop had, cost as much again as the loop when the indices come from
/// memory: 16M int8 by int64 indices in rows of 256 took 11.4 ms with it
/// and 8.4 without, a loop in C on a 2-vCPU AMD EPYC family 25 model 17
/// (Zen 4; reading the 128 MiB of indices alone 4.8-7.2 ms).
#[inline(never)]
fn gather_from_row<W: Clone, O: Slot<W>, X: KernelIndex>(
    row: &[W],
    indices: &[X],
    shift: i64,
    dst: &mut [O],
) -> std::result::Result<(), usize> {
    let len = indices.len().min(dst.len());
    let (dst, indices) = (&mut dst[..len], &indices[..len]);
    let mut dst_quads = dst.chunks_exact_mut(4);
    let mut quads = indices.chunks_exact(4);
    for (q, (d, x)) in (&mut dst_quads).zip(&mut quads).enumerate() {
        let at = |k: usize| row.get(position_shifted(x[k].wide(), 0));
        let (Some(a), Some(b), Some(c), Some(e)) = (at(0), at(1), at(2), at(3)) else {
            let done = 4 * q;
            let rest = (&indices[done..], &mut dst[done..]);
            return gather_shifted(row, rest.0, shift, rest.1).map_err(|k| done + k);
        };
        d[0].put(a.clone());
        d[1].put(b.clone());
        d[2].put(c.clone());
        d[3].put(e.clone());
    }
    let done = len - len % 4;
    gather_shifted(row, quads.remainder(), shift, dst_quads.into_remainder()).map_err(|k| done + k)
}

/// [`gather_from_row`] one element at a time, each index shifted if
/// negative.
fn gather_shifted<W: Clone, O: Slot<W>, X: KernelIndex>(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The formula one element at a time: the value, or the first bad `j`.
    fn naive(row: &[u16], indices: &[i64]) -> std::result::Result<Vec<u16>, usize> {
        let len = row.len() as i64;
        let mut out = Vec::new();
        for (j, &v) in indices.iter().enumerate() {
            let p = if v < 0 { v + len } else { v };
            if !(0..len).contains(&p) {
                return Err(j);
            }
            out.push(row[p as usize]);
        }
        Ok(out)
    }

    #[test]
    fn gather_from_row_matches_the_formula_for_every_length_and_bad_position() {
        let row: Vec<u16> = (0..37).map(|v| v * 3 + 1).collect();
        let shift = row.len() as i64;
        for len in 0..=13 {
            let good: Vec<i64> = (0..len).map(|j| (j * 7 % 37) as i64).collect();
            let mut cases = vec![good.clone()];
            for bad_at in 0..len {
                for bad in [37, -38, i64::MAX, i64::MIN] {
                    let mut case = good.clone();
                    case[bad_at] = bad;
                    cases.push(case);
                }
                let mut negative = good.clone();
                negative[bad_at] = -1;
                cases.push(negative);
            }
            for indices in cases {
                let mut dst = vec![0u16; indices.len()];
                let got = gather_from_row(&row, &indices, shift, &mut dst);
                match naive(&row, &indices) {
                    Ok(want) => {
                        assert_eq!(got, Ok(()), "{indices:?}");
                        assert_eq!(dst, want, "{indices:?}");
                    }
                    Err(j) => assert_eq!(got, Err(j), "{indices:?}"),
                }
            }
        }
    }

    #[test]
    fn gather_from_row_writes_every_element_before_a_bad_one() {
        let row = [10u16, 11, 12, 13];
        // The bad one is the second of a step of four.
        let indices = [3i64, 2, 1, 0, 3, 9, 0, 1, 2];
        let mut dst = [0u16; 9];
        assert_eq!(gather_from_row(&row, &indices, 4, &mut dst), Err(5));
        assert_eq!(dst[..5], [13, 12, 11, 10, 13]);
    }
}
