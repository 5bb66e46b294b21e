//! EmbeddingBag's gradients. With respect to `weight`: each entry's share
//! of its bag's output gradient (the fold's rule, [`super::groups`]; with
//! per-sample weights, times the conjugate weight) added into the weight
//! row it read, the entries of a row in ascending order, so the result is
//! bit-identical for any thread count. With respect to
//! `per_sample_weights` (sum only): `Σ_c grad_out[bag, c] · conj(weight[row, c])`.
//! The padding row and its entries get 0.

use super::groups::{member_grads, Groups};
use super::scalar::{on_scalars, OnScalars, Scalar};
use super::{expect_grad_shape, expect_output_shape, require_differentiable};
use crate::aggregate::Aggregate;
use crate::error::{Error, Result};
use crate::mem::parallel;
use crate::mem::prefetch::prefetch_items;
use crate::ops::embedding_bag::{EmbeddingBag, Plan};
use crate::ops::require_same_dtype;
use crate::tensor::Tensor;
use crate::tensor_view::TensorView;

/// The gradients of an EmbeddingBag call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EmbeddingBagGrads {
    /// With respect to `weight`: `weight`'s shape.
    pub weight: Tensor,
    /// With respect to `per_sample_weights`, when the call had them.
    pub per_sample_weights: Option<Tensor>,
}

impl EmbeddingBag {
    /// The gradients of this EmbeddingBag with respect to `weight` and
    /// `per_sample_weights`, given `grad_out` (`[bags, dim]`): an entry of
    /// bag `b` adds into its weight row `grad_out[b]` (sum; times its
    /// per-sample weight), `grad_out[b] / n` (mean, `n` the bag's entries
    /// other than padding), `grad_out[b]` times the product of the bag's
    /// other rows (prod), or, column by column, `grad_out[b] / w` where it
    /// ties the result (amax, amin: `w` the tying entries; PyTorch gives it
    /// all to the one row `max` reports). The padding row gets 0. The call
    /// is checked as the forward checks it.
    ///
    /// ```
    /// use gatherscatter::{Aggregate, EmbeddingBag, Tensor};
    ///
    /// let weight = Tensor::new(vec![3, 1], vec![1.0f32, 2.0, 3.0])?;
    /// let indices = Tensor::from_vec(vec![0i64, 2, 0, 1]);
    /// let offsets = Tensor::from_vec(vec![0i64, 2]); // bags [0, 2] and [0, 1]
    /// let grad_out = Tensor::new(vec![2, 1], vec![1.0f32, 10.0])?;
    /// let op = EmbeddingBag::new(Aggregate::Mean);
    /// let grads = op.grad(&weight, &indices, Some((&offsets).into()), None, &grad_out)?;
    /// assert_eq!(grads.weight.data::<f32>().unwrap(), &[5.5, 5.0, 0.5]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad<'w, 'i, 'g>(
        &self,
        weight: impl Into<TensorView<'w>>,
        indices: impl Into<TensorView<'i>>,
        offsets: Option<TensorView<'_>>,
        per_sample_weights: Option<TensorView<'_>>,
        grad_out: impl Into<TensorView<'g>>,
    ) -> Result<EmbeddingBagGrads> {
        self.grad_with_output(weight, indices, offsets, per_sample_weights, None, grad_out)
    }

    /// [`EmbeddingBag::grad`] with the forward's result at hand (`output`,
    /// what this call's forward returned, kept by the caller as PyTorch's
    /// autograd keeps its `max` indices): amax and amin read it instead of
    /// running the forward again, which is about a third of their gradient's
    /// time (each bag's rows are then read once, to find the entries that
    /// tie). The other modes do not read it. It must have the output's shape
    /// and `weight`'s dtype; given other values than the forward's, each
    /// entry takes a column's share where its row ties the value given
    /// (none where no entry does).
    ///
    /// ```
    /// use gatherscatter::{Aggregate, EmbeddingBag, Tensor};
    ///
    /// let weight = Tensor::new(vec![3, 1], vec![1.0f32, 3.0, 3.0])?;
    /// let indices = Tensor::new(vec![1, 3], vec![0i64, 1, 2])?; // one bag of three
    /// let op = EmbeddingBag::new(Aggregate::Amax);
    /// let output = op.run(&weight, &indices, None, None)?; // [[3.0]]: rows 1 and 2 tie
    /// let grad_out = Tensor::new(vec![1, 1], vec![1.0f32])?;
    /// let grads = op.grad_with_output(&weight, &indices, None, None, Some((&output).into()), &grad_out)?;
    /// assert_eq!(grads.weight.data::<f32>().unwrap(), &[0.0, 0.5, 0.5]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn grad_with_output<'w, 'i, 'g>(
        &self,
        weight: impl Into<TensorView<'w>>,
        indices: impl Into<TensorView<'i>>,
        offsets: Option<TensorView<'_>>,
        per_sample_weights: Option<TensorView<'_>>,
        output: Option<TensorView<'_>>,
        grad_out: impl Into<TensorView<'g>>,
    ) -> Result<EmbeddingBagGrads> {
        let (weight, indices, grad_out) = (weight.into(), indices.into(), grad_out.into());
        let psw = per_sample_weights;
        let (plan, entries) = self.check(weight, indices, offsets, psw)?;
        require_differentiable("weight", weight.dtype(), "EmbeddingBag")?;
        expect_grad_shape(&grad_out, &plan.out_shape, "EmbeddingBag")?;
        require_same_dtype(
            "grad_out",
            grad_out.dtype(),
            weight.dtype(),
            "the gradient of EmbeddingBag on {} weight",
        )?;
        if let Some(output) = output {
            expect_output_shape("output", &output, &plan.out_shape, "EmbeddingBag")?;
            require_same_dtype(
                "output",
                output.dtype(),
                weight.dtype(),
                "the gradient of EmbeddingBag on {} weight",
            )?;
        }
        let ran = match (self.mode, output) {
            (Aggregate::Amax | Aggregate::Amin, None) => {
                Some(self.run(weight, indices, offsets, psw)?)
            }
            _ => None,
        };
        // Without the forward's result grad_out stands in: only amax and amin read it.
        let out = ran
            .as_ref()
            .map(TensorView::from)
            .or(output)
            .unwrap_or(grad_out);
        let mut inputs = vec![weight, out, grad_out];
        let mut shapes = vec![weight.shape()];
        if let Some(psw) = psw {
            inputs.push(psw);
            shapes.push(psw.shape());
        }
        let task = BagTask {
            mode: self.mode,
            plan: &plan,
            entries: &entries,
            dim: weight.shape()[1],
        };
        let mut grads = on_scalars(&inputs, &shapes, &task)?.into_iter();
        let weight = grads
            .next()
            .ok_or_else(|| Error::unsupported("EmbeddingBag's gradient has no weight part"))?;
        Ok(EmbeddingBagGrads {
            weight,
            per_sample_weights: grads.next(),
        })
    }
}

/// One gradient computation: the checked call.
struct BagTask<'p> {
    mode: Aggregate,
    plan: &'p Plan,
    entries: &'p [usize],
    dim: usize,
}

impl OnScalars for BagTask<'_> {
    fn run<T: Scalar>(&self, inputs: &[&[T]]) -> Result<Vec<Vec<T>>> {
        let (weight, out, grad_out, psw) = match inputs {
            [w, o, g] => (*w, *o, *g, None),
            [w, o, g, p] => (*w, *o, *g, Some(*p)),
            _ => {
                return Err(Error::unsupported(
                    "EmbeddingBag's gradient takes 3 or 4 inputs",
                ))
            }
        };
        let (dim, entries, bounds) = (self.dim, self.entries, &self.plan.bounds);
        let padding = self.plan.padding;
        let takes_part = |j: usize| Some(entries[j]) != padding;
        let row = |j: usize| &weight[entries[j] * dim..(entries[j] + 1) * dim];
        let bag_of = bag_of(bounds, entries.len())?;
        let grad_weight = match self.mode {
            Aggregate::Sum | Aggregate::Mean => {
                let share = self.shares(grad_out, &takes_part)?;
                add_rows(
                    weight.len(),
                    dim,
                    entries,
                    &takes_part,
                    |_| {},
                    |j, acc| {
                        let g = &share[bag_of[j] * dim..(bag_of[j] + 1) * dim];
                        match psw {
                            Some(w) => add_into(acc, g, |x| x * w[j].conj()),
                            None => add_into(acc, g, |x| x),
                        }
                    },
                )?
            }
            Aggregate::Amax | Aggregate::Amin => {
                // Each bag column's share (g over its tying entries), then
                // every entry that ties takes it: nothing per entry is held.
                // A bag without two ties in a column names its one winner
                // per column, so its rows are not read again.
                let w = self.winners(out, grad_out, &takes_part, &row)?;
                let ahead = |j: usize| {
                    if w.tied[bag_of[j]] {
                        prefetch_items(row(j))
                    }
                };
                add_rows(weight.len(), dim, entries, &takes_part, ahead, |j, acc| {
                    let b = bag_of[j];
                    let at = b * dim..(b + 1) * dim;
                    if w.tied[b] {
                        let columns = acc.iter_mut().zip(row(j)).zip(&out[at.clone()]);
                        for (((a, &x), &o), &s) in columns.zip(&w.share[at]) {
                            if x.ties(o) {
                                *a = *a + s;
                            }
                        }
                    } else {
                        // Past u32 it names no first (those are below MAX).
                        let seat = u32::try_from(j - bounds[b]).unwrap_or(u32::MAX);
                        let columns = acc.iter_mut().zip(&w.first[at.clone()]);
                        for ((a, &first), &s) in columns.zip(&w.share[at]) {
                            if first == seat {
                                *a = *a + s;
                            }
                        }
                    }
                })?
            }
            Aggregate::Prod => {
                let span = |b: usize| bounds[b]..bounds[b + 1];
                let groups = Groups {
                    count: bounds.len().saturating_sub(1),
                    inner: dim,
                    span: &span,
                    takes_part: &takes_part,
                    value: &row,
                };
                let mut each = super::zeroed(entries.len().saturating_mul(dim))?;
                member_grads(self.mode, &groups, out, grad_out, &mut each);
                add_rows(
                    weight.len(),
                    dim,
                    entries,
                    &takes_part,
                    |_| {},
                    |j, acc| add_into(acc, &each[j * dim..(j + 1) * dim], |x| x),
                )?
            }
        };
        let mut grads = vec![grad_weight];
        if psw.is_some() {
            let mut grad_psw = super::zeroed(entries.len())?;
            let per_task = entries
                .len()
                .div_ceil(parallel::tasks(entries.len() * dim * 8, entries.len()).max(1))
                .max(1);
            parallel::for_each_chunk(&mut grad_psw, per_task, |task, part| {
                for (k, slot) in part.iter_mut().enumerate() {
                    let j = task * per_task + k;
                    if takes_part(j) {
                        let g = &grad_out[bag_of[j] * dim..(bag_of[j] + 1) * dim];
                        *slot = g
                            .iter()
                            .zip(row(j))
                            .fold(T::ZERO, |acc, (&g, &x)| acc + g * x.conj());
                    }
                }
            });
            grads.push(grad_psw);
        }
        Ok(grads)
    }
}

impl BagTask<'_> {
    /// For amax and amin, in one read of each bag's rows: each bag
    /// column's `grad_out` divided by how many of the bag's entries tie its
    /// result, the first of them (its seat in the bag), and whether any
    /// column of the bag has two or more (bags in parallel).
    fn winners<'w, T: Scalar>(
        &self,
        out: &[T],
        grad_out: &[T],
        takes_part: &(dyn Fn(usize) -> bool + Sync),
        row: &(dyn Fn(usize) -> &'w [T] + Sync),
    ) -> Result<Winners<T>> {
        let (dim, bounds) = (self.dim.max(1), &self.plan.bounds);
        let bags = bounds.len().saturating_sub(1);
        let mut w = Winners {
            share: super::zeroed(grad_out.len())?,
            first: super::zeroed(grad_out.len())?,
            tied: super::zeroed(bags)?,
        };
        let tasks = parallel::tasks(std::mem::size_of_val(grad_out) * 4, bags);
        let per_task = bags.div_ceil(tasks.max(1)).max(1);
        let pieces: Vec<_> = w
            .share
            .chunks_mut(per_task * dim)
            .zip(w.first.chunks_mut(per_task * dim))
            .zip(w.tied.chunks_mut(per_task))
            .collect();
        let Ok(()) = parallel::try_for_each_list(pieces, |task, ((share, first), tied)| {
            let mut count = vec![0u32; dim];
            let per_bag = share.chunks_exact_mut(dim).zip(first.chunks_exact_mut(dim));
            for (k, ((shares, first), tied)) in per_bag.zip(tied.iter_mut()).enumerate() {
                let b = task * per_task + k;
                let at = b * dim..(b + 1) * dim;
                count.fill(0);
                first.fill(u32::MAX);
                for j in (bounds[b]..bounds[b + 1]).filter(|&j| takes_part(j)) {
                    if j + ENTRIES_AHEAD < bounds[bounds.len() - 1] {
                        prefetch_items(row(j + ENTRIES_AHEAD));
                    }
                    // A seat past u32 marks the bag tied: its rows are read.
                    let seat = u32::try_from(j - bounds[b]).unwrap_or(u32::MAX);
                    let columns = count.iter_mut().zip(first.iter_mut()).zip(row(j));
                    for (((n, f), &x), &o) in columns.zip(&out[at.clone()]) {
                        // Selects, not branches: a tie is a coin toss per column.
                        let tie = x.ties(o);
                        *f = if tie & (*n == 0) { seat } else { *f };
                        *n += u32::from(tie);
                    }
                }
                *tied = count.iter().any(|&n| n > 1) || first.contains(&u32::MAX);
                for ((s, &g), &n) in shares.iter_mut().zip(&grad_out[at]).zip(&count) {
                    *s = g.over(n.max(1) as usize);
                }
            }
            Ok::<(), std::convert::Infallible>(())
        });
        Ok(w)
    }

    fn shares<'g, T: Scalar>(
        &self,
        grad_out: &'g [T],
        takes_part: &(dyn Fn(usize) -> bool + Sync),
    ) -> Result<std::borrow::Cow<'g, [T]>> {
        if self.mode != Aggregate::Mean {
            return Ok(std::borrow::Cow::Borrowed(grad_out));
        }
        let bounds = &self.plan.bounds;
        let mut share = super::zeroed(grad_out.len())?;
        for (b, row) in share.chunks_exact_mut(self.dim.max(1)).enumerate() {
            let n = (bounds[b]..bounds[b + 1])
                .filter(|&j| takes_part(j))
                .count();
            let g = &grad_out[b * self.dim..(b + 1) * self.dim];
            for (s, &x) in row.iter_mut().zip(g) {
                *s = x.over(n.max(1));
            }
        }
        Ok(std::borrow::Cow::Owned(share))
    }
}

/// What [`BagTask::winners`] finds for amax and amin, per bag column
/// (`share`, `first`) and per bag (`tied`).
struct Winners<T> {
    /// `grad_out` over the number of entries that tie the result.
    share: Vec<T>,
    /// The seat in its bag of the first entry that ties.
    first: Vec<u32>,
    /// Some column has two or more entries that tie (or none at all, or a
    /// seat past `u32`): entries of this bag read their rows to know.
    tied: Vec<bool>,
}

/// The bag of each entry.
fn bag_of(bounds: &[usize], entries: usize) -> Result<Vec<usize>> {
    let mut bags = super::reserve(entries)?;
    for (b, pair) in bounds.windows(2).enumerate() {
        bags.extend(std::iter::repeat_n(b, pair[1] - pair[0]));
    }
    Ok(bags)
}

/// `acc[c] += f(g[c])`.
fn add_into<T: Scalar>(acc: &mut [T], g: &[T], f: impl Fn(T) -> T) {
    for (a, &x) in acc.iter_mut().zip(g) {
        *a = *a + f(x);
    }
}

/// How many entries ahead [`add_rows`] asks the cache for the rows an
/// entry touches: they are random, so no hardware prefetcher sees them
/// coming (as the forward's bags).
const ENTRIES_AHEAD: usize = 16;

/// The weight's gradient (`len` elements, rows of `dim`): `add(j, row)`
/// for every entry `j` that takes part, into the row it read. A task owns
/// a range of rows and walks all the entries in order, so each row sums
/// its entries in ascending order whatever the thread count. `ahead(j)` is
/// told the entries [`ENTRIES_AHEAD`] on, to prefetch what `add` will read.
fn add_rows<T: Scalar>(
    len: usize,
    dim: usize,
    entries: &[usize],
    takes_part: &(dyn Fn(usize) -> bool + Sync),
    ahead: impl Fn(usize) + Sync + Send,
    add: impl Fn(usize, &mut [T]) + Sync + Send,
) -> Result<Vec<T>> {
    let mut grad = super::zeroed(len)?;
    if dim == 0 {
        return Ok(grad);
    }
    let rows = len / dim;
    let tasks = parallel::one_task_per_thread(std::mem::size_of_val(grad.as_slice()), rows);
    let rows_per_task = rows.div_ceil(tasks.max(1)).max(1);
    parallel::for_each_chunk(&mut grad, rows_per_task * dim, |task, part| {
        let first = task * rows_per_task;
        let owned = first..first + part.len() / dim;
        for (j, &r) in entries.iter().enumerate() {
            if let Some(&next) = entries.get(j + ENTRIES_AHEAD) {
                if owned.contains(&next) {
                    let at = (next - first) * dim;
                    prefetch_items(&part[at..at + dim]);
                    ahead(j + ENTRIES_AHEAD);
                }
            }
            if owned.contains(&r) && takes_part(j) {
                let at = (r - first) * dim;
                add(j, &mut part[at..at + dim]);
            }
        }
    });
    Ok(grad)
}
