//! PyTorch's `index_select`, `index_add` and `index_copy`: a 1-D `index`
//! along one dim, as thin entry points over Gather, ScatterND and
//! ScatterElements.
//!
//! With `k = len(index)` and `t = idx(index[j])`:
//! - `index_select`: `out[a.., j, b..] = data[a.., t, b..]`, shape `data`'s
//!   with `shape[dim] := k`;
//! - `index_add`: `out = data`, then `out[a.., t, b..] += source[a.., j, b..]`
//!   for `j` in ascending order;
//! - `index_copy`: the same with `=`: of duplicates, the last `j` wins.

use crate::display::Dims;
use crate::error::{Error, Result};
use crate::index::{resolve_along_axis, with_index_view, AxisRule};
use crate::ops::gather::Gather;
use crate::ops::scatter_elements::ScatterElements;
use crate::ops::scatter_nd::ScatterND;
use crate::reduction::Reduction;
use crate::shape::normalize_axis;
use crate::tensor::{Tensor, TypedView};
use crate::tensor_view::TensorView;

/// `torch.index_select`: the slices of `data` at `index` (1-D) along `dim`.
///
/// Gather with a 1-D index: negative indices count from the end, every
/// index is checked first.
///
/// ```
/// use gatherscatter::{index_select, Tensor};
///
/// let data = Tensor::new(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6])?;
/// let out = index_select(&data, 1, &Tensor::from_vec(vec![2i64, 0]))?;
/// assert_eq!(out.shape(), &[2, 2]);
/// assert_eq!(out.data::<i32>().unwrap(), &[3, 1, 6, 4]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn index_select<'d, 'i>(
    data: impl Into<TensorView<'d>>,
    dim: i64,
    index: impl Into<TensorView<'i>>,
) -> Result<Tensor> {
    let index = index.into();
    require_vector(&index)?;
    Gather::new(dim).run(data, index)
}

/// `torch.index_add` (with `alpha = 1`): a copy of `data` with each slice
/// `source[.., j, ..]` added into `data[.., index[j], ..]` along `dim`.
///
/// `index` is 1-D of length `k`; `source` has `data`'s dtype and shape but
/// `k` along `dim`. Duplicates add in ascending order of `j`, for any
/// thread count. Every index is checked before anything is written
/// (negatives count from the end).
///
/// ```
/// use gatherscatter::{index_add, Tensor};
///
/// let data = Tensor::new(vec![2, 3], vec![0.0f32; 6])?;
/// let source = Tensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0])?;
/// let out = index_add(&data, 1, &Tensor::from_vec(vec![2i64, 2]), &source)?;
/// assert_eq!(out.data::<f32>().unwrap(), &[0.0, 0.0, 3.0, 0.0, 0.0, 7.0]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn index_add<'d, 'i, 's>(
    data: impl Into<TensorView<'d>>,
    dim: i64,
    index: impl Into<TensorView<'i>>,
    source: impl Into<TensorView<'s>>,
) -> Result<Tensor> {
    index_scatter(
        data.into(),
        dim,
        index.into(),
        source.into(),
        Reduction::Add,
    )
}

/// `torch.index_copy`: a copy of `data` with each slice `source[.., j, ..]`
/// written to `data[.., index[j], ..]` along `dim`; of duplicates, the last
/// `j` wins (PyTorch leaves it undefined).
///
/// ```
/// use gatherscatter::{index_copy, Tensor};
///
/// let data = Tensor::from_vec(vec![0u8; 4]);
/// let out = index_copy(&data, 0, &Tensor::from_vec(vec![3i32, 0, 3]), &Tensor::from_vec(vec![7u8, 8, 9]))?;
/// assert_eq!(out.data::<u8>().unwrap(), &[8, 0, 0, 9]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
pub fn index_copy<'d, 'i, 's>(
    data: impl Into<TensorView<'d>>,
    dim: i64,
    index: impl Into<TensorView<'i>>,
    source: impl Into<TensorView<'s>>,
) -> Result<Tensor> {
    index_scatter(
        data.into(),
        dim,
        index.into(),
        source.into(),
        Reduction::None,
    )
}

fn require_vector(index: &TensorView<'_>) -> Result<()> {
    if index.rank() == 1 {
        return Ok(());
    }
    Err(Error::RankMismatch {
        what: "index",
        actual: index.rank(),
        expected: "rank 1 (a vector of positions along dim) is required".into(),
    })
}

fn index_scatter(
    data: TensorView<'_>,
    dim: i64,
    index: TensorView<'_>,
    source: TensorView<'_>,
    reduction: Reduction,
) -> Result<Tensor> {
    require_vector(&index)?;
    if data.rank() == 0 {
        return Err(Error::RankMismatch {
            what: "data",
            actual: 0,
            expected: "rank >= 1 is required".into(),
        });
    }
    let axis = normalize_axis(dim, data.rank(), "data")?;
    let mut expected = data.shape().to_vec();
    expected[axis] = index.len();
    if source.shape() != expected {
        return Err(Error::shape(format!(
            "source has shape {}, but data {} with {} indices along dim {axis} needs {}",
            Dims(source.shape()),
            Dims(data.shape()),
            index.len(),
            Dims(&expected)
        )));
    }
    let rule = AxisRule {
        axis,
        size: data.shape()[axis],
        negative_allowed: true,
    };
    // Every index checked here, where the error can name its place in `index`.
    let positions = with_index_view!(index, "index_add / index_copy", "index", idx => {
        resolve_along_axis(idx, rule)?
    });
    if axis == 0 {
        // Slices along the first dim are ScatterND's rows: one 1-tuple per index.
        let tuples = [positions.len(), 1];
        let resolved: Vec<i64> = positions.iter().map(|&p| p as i64).collect();
        let view = TypedView::new(&tuples, &resolved)?;
        return ScatterND::new()
            .reduction(reduction)
            .run(data, view, source);
    }
    // Elsewhere, ScatterElements with the index spread over source's shape.
    let inner: usize = source.shape()[axis + 1..].iter().product();
    let mut spread = Vec::new();
    spread
        .try_reserve_exact(source.len())
        .map_err(|_| Error::Allocation {
            elements: source.len(),
            dtype: crate::DType::I64,
        })?;
    let k = positions.len();
    for flat in 0..source.len() {
        spread.push(positions[flat / inner.max(1) % k.max(1)] as i64);
    }
    let view = TypedView::new(source.shape(), &spread)?;
    ScatterElements::new(axis as i64)
        .reduction(reduction)
        .run(data, view, source)
}
