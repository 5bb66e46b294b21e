//! The gradient of a fold over groups of rows (segment reductions,
//! EmbeddingBag's bags): each member row gets its share of its group's
//! output gradient `g`, column by column.
//!
//! | fold | a member's gradient |
//! |---|---|
//! | sum | `g` |
//! | mean | `g / n`, `n` the members |
//! | prod | `g · conj(Π of the other members)` (prefix times suffix, no division) |
//! | amax / amin | `g / w` if the member ties the result, else 0; `w` the members that tie |
//!
//! A group owns its members, so groups run in parallel and each member's
//! gradient is the same for any thread count.

use std::ops::Range;

use super::scalar::Scalar;
use crate::aggregate::Aggregate;
use crate::mem::parallel;

/// Groups of member rows, each `inner` elements, folded into one output row
/// per group.
pub(super) struct Groups<'a, 'v, T> {
    /// How many groups (output rows).
    pub count: usize,
    /// The elements of a row.
    pub inner: usize,
    /// Group `g`'s member rows: ascending with `g`, disjoint.
    pub span: &'a (dyn Fn(usize) -> Range<usize> + Sync),
    /// Whether a member row takes part (EmbeddingBag's padding row does not).
    pub takes_part: &'a (dyn Fn(usize) -> bool + Sync),
    /// A member row's values; read by prod, amax and amin only.
    pub value: &'a (dyn Fn(usize) -> &'v [T] + Sync),
}

/// Write each member row's gradient into `dest` (row `m` at `m * inner`,
/// zeros on entry), given the fold's output `out` (read by amax and amin)
/// and its gradient `grad_out`, both `count × inner`. Rows that take no
/// part, or are in no group, stay 0.
pub(super) fn member_grads<T: Scalar>(
    aggregate: Aggregate,
    groups: &Groups<'_, '_, T>,
    out: &[T],
    grad_out: &[T],
    dest: &mut [T],
) {
    let inner = groups.inner;
    if groups.count == 0 || inner == 0 {
        return;
    }
    let tasks = parallel::tasks(std::mem::size_of_val(dest), groups.count);
    // Task k owns groups cuts[k]..cuts[k + 1] and the rows from its first
    // group's first row to the next task's.
    let cuts: Vec<usize> = (0..=tasks).map(|k| k * groups.count / tasks).collect();
    let mut pieces = Vec::with_capacity(tasks);
    let mut rest = dest;
    let mut base = 0;
    for k in 0..tasks {
        let end = match cuts.get(k + 2) {
            Some(_) => (groups.span)(cuts[k + 1]).start,
            None => base + rest.len() / inner,
        };
        let (mine, tail) = rest.split_at_mut((end - base) * inner);
        pieces.push((cuts[k]..cuts[k + 1], base, mine));
        rest = tail;
        base = end;
    }
    let Ok(()) = parallel::try_for_each_list(pieces, |_, (owned, base, piece)| {
        let mut scratch = Scratch::new(inner);
        for g in owned {
            let span = (groups.span)(g);
            let rows = &mut piece[(span.start - base) * inner..(span.end - base) * inner];
            let row = g * inner..(g + 1) * inner;
            let fold = Fold {
                groups,
                first: span.start,
                out: &out[row.clone()],
                grad: &grad_out[row],
            };
            fold.member_grads(aggregate, rows, &mut scratch);
        }
        Ok::<(), std::convert::Infallible>(())
    });
}

/// A task's per-column working rows, reused from group to group.
struct Scratch<T> {
    winners: Vec<u32>,
    after: Vec<T>,
}

impl<T: Scalar> Scratch<T> {
    fn new(inner: usize) -> Scratch<T> {
        Scratch {
            winners: vec![0; inner],
            after: vec![T::ONE; inner],
        }
    }
}

/// One group: its first member row, its output row and that row's gradient.
struct Fold<'g, 'a, 'v, T> {
    groups: &'g Groups<'a, 'v, T>,
    first: usize,
    out: &'g [T],
    grad: &'g [T],
}

impl<'a, T: Scalar> Fold<'_, 'a, '_, T> {
    /// The members that take part, each with its row of `rows`.
    fn members<'r>(
        &self,
        rows: &'r mut [T],
    ) -> impl DoubleEndedIterator<Item = (usize, &'r mut [T])> + 'r
    where
        'a: 'r,
    {
        let (first, inner) = (self.first, self.groups.inner);
        let takes_part = self.groups.takes_part;
        rows.chunks_exact_mut(inner)
            .enumerate()
            .map(move |(k, row)| (first + k, row))
            .filter(move |(m, _)| takes_part(*m))
    }

    fn member_grads(&self, aggregate: Aggregate, rows: &mut [T], scratch: &mut Scratch<T>) {
        let value = self.groups.value;
        match aggregate {
            Aggregate::Sum => {
                for (_, row) in self.members(rows) {
                    row.copy_from_slice(self.grad);
                }
            }
            Aggregate::Mean => {
                let n = self.members(rows).count();
                for (_, row) in self.members(rows) {
                    for (d, &g) in row.iter_mut().zip(self.grad) {
                        *d = g.over(n);
                    }
                }
            }
            Aggregate::Amax | Aggregate::Amin => {
                let winners = &mut scratch.winners;
                winners.fill(0);
                for (m, _) in self.members(rows) {
                    for ((w, &x), &o) in winners.iter_mut().zip(value(m)).zip(self.out) {
                        *w += u32::from(x.ties(o));
                    }
                }
                for (m, row) in self.members(rows) {
                    let columns = row.iter_mut().zip(value(m)).zip(self.out);
                    for (((d, &x), &o), (&g, &w)) in columns.zip(self.grad.iter().zip(&*winners)) {
                        *d = if x.ties(o) {
                            g.over(w as usize)
                        } else {
                            T::ZERO
                        };
                    }
                }
            }
            Aggregate::Prod => {
                // Each row first holds the product of the members before it,
                // then, walking back, times those after it.
                let running = &mut scratch.after;
                running.fill(T::ONE);
                for (m, row) in self.members(rows) {
                    for ((d, r), &x) in row.iter_mut().zip(running.iter_mut()).zip(value(m)) {
                        *d = *r;
                        *r = *r * x;
                    }
                }
                running.fill(T::ONE);
                for (m, row) in self.members(rows).rev() {
                    let columns = row.iter_mut().zip(running.iter_mut()).zip(value(m));
                    for (((d, a), &x), &g) in columns.zip(self.grad) {
                        *d = g * (*d * *a).conj();
                        *a = *a * x;
                    }
                }
            }
        }
    }
}
