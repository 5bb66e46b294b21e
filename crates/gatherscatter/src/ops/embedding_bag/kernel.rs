//! The EmbeddingBag kernels: each output row folds its bag's weight rows
//! in bag order (the segment kernels' row fold), so a task owns whole bags
//! and results are bit-identical for any thread count.

use super::registers;
use crate::dtype::Element;
use crate::mem::parallel;
use crate::mem::prefetch::prefetch_items;
use crate::ops::segment::kernel::{first_row_of, fold_rows, fold_weighted_rows, same};
use crate::reduction::Combine;
use crate::tuning;

/// How many entries ahead a bag's fold asks for weight rows.
const ROWS_AHEAD: usize = 16;

/// The checked inputs of one call: `weight` as `[rows, dim]`, every entry
/// resolved to its weight row, bag `b` the entries `bounds[b]..bounds[b + 1]`,
/// and the row that takes no part (`padding_idx`), if any.
pub(crate) struct Bags<'a, T> {
    pub weight: &'a [T],
    pub dim: usize,
    pub entries: &'a [usize],
    pub bounds: &'a [usize],
    pub padding: Option<usize>,
    pub per_sample_weights: Option<&'a [T]>,
}

impl<T> Bags<'_, T> {
    fn row(&self, entry: usize) -> &[T] {
        &self.weight[entry * self.dim..(entry + 1) * self.dim]
    }

    /// The positions (into `entries`) of bag `b` that take part.
    fn members(&self, b: usize) -> impl Iterator<Item = usize> + '_ {
        let padding = self.padding;
        (self.bounds[b]..self.bounds[b + 1]).filter(move |&j| Some(self.entries[j]) != padding)
    }

    /// [`Bags::members`], asking the cache for the row [`ROWS_AHEAD`]
    /// entries on as each is taken: the rows are random, so no hardware
    /// prefetcher sees them coming.
    fn members_prefetching(&self, b: usize) -> impl Iterator<Item = usize> + '_ {
        self.members(b).inspect(move |&j| {
            if let Some(&ahead) = self.entries.get(j + ROWS_AHEAD) {
                prefetch_items(self.row(ahead));
            }
        })
    }

    /// Tasks get whole bags: the chunk length in output elements.
    fn chunk_len(&self, out_len: usize) -> usize {
        let bags = self.bounds.len().saturating_sub(1);
        let tasks = parallel::tasks(out_len * std::mem::size_of::<T>() * 2, bags.max(1));
        bags.div_ceil(tasks).max(1) * self.dim
    }
}

/// `out[b] = C`-fold of bag `b`'s rows (each times its weight, with `M`
/// the product, when there are per-sample weights), then `C`'s finish with
/// the count; a bag with no rows gets `empty`.
pub(crate) fn reduce<T: Clone + Send + Sync + 'static, C: Combine<T>, M: Combine<T>>(
    bags: &Bags<'_, T>,
    empty: &T,
    out: &mut [T],
) {
    if out.is_empty() {
        return;
    }
    let chunk = bags.chunk_len(out.len());
    let dim = bags.dim;
    let registers = C::ADDS && registers::chosen(bags, tuning::in_force().bag_fold);
    let finish = |acc: &mut [T], count: usize| {
        if count == 0 {
            acc.fill(empty.clone());
        } else if C::FINISHES {
            for a in acc.iter_mut() {
                C::finish(a, count as u64);
            }
        }
    };
    parallel::for_each_chunk(out, chunk, |task, part| {
        let first_bag = first_row_of(task, chunk, dim);
        if !registers {
            fold_in_memory::<T, C, M>(bags, first_bag, part, &finish);
        } else if part.len() <= FEW_BAGS * dim {
            // Counts for a few bags: zeroing the whole group's 1 KiB of
            // counts was a tenth of a 4-bag call's instructions.
            fold_in_registers::<T, C, M, FEW_BAGS>(bags, first_bag, part, &finish);
        } else {
            fold_in_registers::<T, C, M, { registers::GROUP }>(bags, first_bag, part, &finish);
        }
    });
}

/// At most this many bags in a part take a group of counts this size.
const FEW_BAGS: usize = 8;

/// The bags from `first_bag` on folded into `part` by
/// [`registers::sum_bags`], `G` bags at a time (at most
/// [`registers::GROUP`]: their output rows are still in cache when they are
/// finished), each finished with its member count.
fn fold_in_registers<T: Clone + 'static, C: Combine<T>, M: Combine<T>, const G: usize>(
    bags: &Bags<'_, T>,
    first_bag: usize,
    part: &mut [T],
    finish: &impl Fn(&mut [T], usize),
) {
    let dim = bags.dim;
    let mut counts = [0; G];
    // Bags by number, one division for their count: the chunked walks
    // took one for each length (three a group).
    let bags_here = part.len() / dim;
    for first in (0..bags_here).step_by(G) {
        let n = G.min(bags_here - first);
        let group = &mut part[first * dim..(first + n) * dim];
        let counts = &mut counts[..n];
        if !registers::sum_bags(bags, first_bag + first, group, counts) {
            fold_in_memory::<T, C, M>(bags, first_bag + first, group, finish);
            continue;
        }
        for (k, &count) in counts.iter().enumerate() {
            finish(&mut group[k * dim..(k + 1) * dim], count);
        }
    }
}

/// The bags from `first_bag` on folded into `part` (whole output rows) in
/// their output rows, each finished with its member count.
fn fold_in_memory<T: Clone, C: Combine<T>, M: Combine<T>>(
    bags: &Bags<'_, T>,
    first_bag: usize,
    part: &mut [T],
    finish: &impl Fn(&mut [T], usize),
) {
    for (k, acc) in part.chunks_exact_mut(bags.dim).enumerate() {
        let members = bags.members_prefetching(first_bag + k);
        let count = match bags.per_sample_weights {
            None => fold_rows::<T, C>(acc, members.map(|j| bags.row(bags.entries[j]))),
            Some(w) => fold_weighted_rows::<T, C, M>(
                acc,
                members.map(|j| (bags.row(bags.entries[j]), &w[j])),
            ),
        };
        finish(acc, count);
    }
}

/// For `amax`/`amin` whose `values` are computed: `arg[b, c]` = the weight
/// row of the first member of bag `b` whose column `c` holds the value, or
/// `rows` (one past the last weight row) for a bag without members.
pub(crate) fn arg<T: Element>(bags: &Bags<'_, T>, values: &[T], arg: &mut [i64]) {
    if arg.is_empty() {
        return;
    }
    let chunk = bags.chunk_len(arg.len());
    let dim = bags.dim;
    let none = (bags.weight.len() / dim.max(1)) as i64;
    parallel::for_each_chunk(arg, chunk, |task, part| {
        let first_bag = task * chunk / dim;
        for (k, found) in part.chunks_exact_mut(dim).enumerate() {
            let b = first_bag + k;
            let value = &values[b * dim..(b + 1) * dim];
            found.fill(none);
            for j in bags.members(b) {
                let entry = bags.entries[j];
                for ((slot, v), x) in found.iter_mut().zip(value).zip(bags.row(entry)) {
                    if *slot == none && same(x, v) {
                        *slot = entry as i64;
                    }
                }
            }
        }
    });
}
