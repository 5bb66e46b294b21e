//! Every operator of the library in one list: [`Op`], with its names, its
//! inputs and one `run`, so a caller that dispatches by name (the `gsx`
//! subcommands, model runners, fuzz targets, bindings) adds a new operator
//! here and nowhere else.

use crate::error::{Error, Result};
use crate::ops::embedding_bag::EmbeddingBag;
use crate::ops::gather::Gather;
use crate::ops::gather_elements::GatherElements;
use crate::ops::gather_nd::GatherND;
use crate::ops::scatter_elements::ScatterElements;
use crate::ops::scatter_nd::ScatterND;
use crate::ops::scatter_reduce::ScatterReduce;
use crate::ops::segment::{SegmentCoo, SegmentCsr};
use crate::ops::tensor_scatter::TensorScatter;
use crate::tensor::Tensor;
use crate::tensor_view::{TensorView, TensorViewMut};

/// One operator with its attributes.
///
/// ```
/// use gatherscatter::{Gather, Op, Tensor, TensorView};
///
/// let op = Op::from(Gather::new(0));
/// assert_eq!((op.name(), op.command()), ("Gather", "gather"));
/// assert_eq!(op.inputs(), ["data", "indices"]);
/// let data = Tensor::new(vec![3], vec![10i32, 20, 30])?;
/// let indices = Tensor::new(vec![2], vec![2i64, 0])?;
/// let out = op.run(&[TensorView::from(&data), TensorView::from(&indices)])?;
/// assert_eq!(out.data::<i32>().unwrap(), &[30, 10]);
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Op {
    /// [`Gather`].
    Gather(Gather),
    /// [`GatherElements`].
    GatherElements(GatherElements),
    /// [`ScatterElements`] (and the deprecated Scatter).
    ScatterElements(ScatterElements),
    /// [`GatherND`].
    GatherND(GatherND),
    /// [`ScatterND`].
    ScatterND(ScatterND),
    /// [`TensorScatter`].
    TensorScatter(TensorScatter),
    /// [`ScatterReduce`] (PyTorch's `scatter_reduce`, not an ONNX operator).
    ScatterReduce(ScatterReduce),
    /// [`SegmentCsr`] (pytorch_scatter's `segment_csr`).
    SegmentCsr(SegmentCsr),
    /// [`SegmentCoo`] (pytorch_scatter's `segment_coo`).
    SegmentCoo(SegmentCoo),
    /// [`EmbeddingBag`] (PyTorch's `embedding_bag`).
    EmbeddingBag(EmbeddingBag),
}

impl Op {
    /// Every operator's name (the ONNX name where ONNX has the operator),
    /// in this list's order.
    pub const NAMES: [&'static str; 10] = [
        "Gather",
        "GatherElements",
        "ScatterElements",
        "GatherND",
        "ScatterND",
        "TensorScatter",
        "ScatterReduce",
        "SegmentCsr",
        "SegmentCoo",
        "EmbeddingBag",
    ];

    /// The name (`"GatherElements"`).
    pub fn name(&self) -> &'static str {
        Self::NAMES[self.position()]
    }

    /// The command-line name (`"gather-elements"`).
    pub fn command(&self) -> &'static str {
        [
            "gather",
            "gather-elements",
            "scatter-elements",
            "gather-nd",
            "scatter-nd",
            "tensor-scatter",
            "scatter-reduce",
            "segment-csr",
            "segment-coo",
            "embedding-bag",
        ][self.position()]
    }

    /// The names of the inputs, in order; the last of TensorScatter's
    /// (`write_indices`) and the last two of EmbeddingBag's (`offsets`, for
    /// 2-D indices, and `per_sample_weights`) may be left out.
    pub fn inputs(&self) -> &'static [&'static str] {
        match self {
            Op::Gather(_) | Op::GatherElements(_) | Op::GatherND(_) => &["data", "indices"],
            Op::ScatterElements(_) | Op::ScatterND(_) | Op::ScatterReduce(_) => {
                &["data", "indices", "updates"]
            }
            Op::TensorScatter(_) => &["past_cache", "update", "write_indices"],
            Op::SegmentCsr(_) => &["src", "indptr"],
            Op::SegmentCoo(_) => &["src", "index"],
            Op::EmbeddingBag(_) => &["weight", "indices", "offsets", "per_sample_weights"],
        }
    }

    /// How many inputs must be given.
    pub fn required_inputs(&self) -> usize {
        match self {
            Op::TensorScatter(_) | Op::EmbeddingBag(_) => 2,
            other => other.inputs().len(),
        }
    }

    fn position(&self) -> usize {
        match self {
            Op::Gather(_) => 0,
            Op::GatherElements(_) => 1,
            Op::ScatterElements(_) => 2,
            Op::GatherND(_) => 3,
            Op::ScatterND(_) => 4,
            Op::TensorScatter(_) => 5,
            Op::ScatterReduce(_) => 6,
            Op::SegmentCsr(_) => 7,
            Op::SegmentCoo(_) => 8,
            Op::EmbeddingBag(_) => 9,
        }
    }

    /// Run on the inputs in [`Op::inputs`] order. Too few or too many is a
    /// `shape_mismatch` error naming the operator's inputs.
    pub fn run(&self, inputs: &[TensorView<'_>]) -> Result<Tensor> {
        self.check_input_count(inputs)?;
        let i = |k: usize| inputs[k];
        match self {
            Op::Gather(op) => op.run(i(0), i(1)),
            Op::GatherElements(op) => op.run(i(0), i(1)),
            Op::ScatterElements(op) => op.run(i(0), i(1), i(2)),
            Op::GatherND(op) => op.run(i(0), i(1)),
            Op::ScatterND(op) => op.run(i(0), i(1), i(2)),
            Op::TensorScatter(op) => op.run(i(0), i(1), inputs.get(2).copied()),
            Op::ScatterReduce(op) => op.run(i(0), i(1), i(2)),
            Op::SegmentCsr(op) => op.run(i(0), i(1)),
            Op::SegmentCoo(op) => op.run(i(0), i(1)),
            Op::EmbeddingBag(op) => {
                op.run(i(0), i(1), inputs.get(2).copied(), inputs.get(3).copied())
            }
        }
    }

    /// Like [`Op::run`], but writes the result into `out`, a buffer of the
    /// output's dtype and shape. What `out` holds after an error is each
    /// operator's `run_into` rule (untouched, except ScatterElements and
    /// ScatterReduce, which check indices as they apply them).
    ///
    /// ```
    /// use gatherscatter::{GatherElements, Op, Tensor, TensorView, TypedViewMut};
    ///
    /// let data = Tensor::new(vec![2, 2], vec![1i64, 2, 3, 4])?;
    /// let indices = Tensor::new(vec![2, 1], vec![1i64, 0])?;
    /// let (shape, mut buffer) = ([2, 1], [0i64; 2]);
    /// let inputs = [TensorView::from(&data), TensorView::from(&indices)];
    /// Op::from(GatherElements::new(1)).run_into(&inputs, TypedViewMut::new(&shape, &mut buffer)?)?;
    /// assert_eq!(buffer, [2, 3]);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub fn run_into<'o>(
        &self,
        inputs: &[TensorView<'_>],
        out: impl Into<TensorViewMut<'o>>,
    ) -> Result<()> {
        self.check_input_count(inputs)?;
        let i = |k: usize| inputs[k];
        match self {
            Op::Gather(op) => op.run_into(i(0), i(1), out),
            Op::GatherElements(op) => op.run_into(i(0), i(1), out),
            Op::ScatterElements(op) => op.run_into(i(0), i(1), i(2), out),
            Op::GatherND(op) => op.run_into(i(0), i(1), out),
            Op::ScatterND(op) => op.run_into(i(0), i(1), i(2), out),
            Op::TensorScatter(op) => op.run_into(i(0), i(1), inputs.get(2).copied(), out),
            Op::ScatterReduce(op) => op.run_into(i(0), i(1), i(2), out),
            Op::SegmentCsr(op) => op.run_into(i(0), i(1), out),
            Op::SegmentCoo(op) => op.run_into(i(0), i(1), out),
            Op::EmbeddingBag(op) => op.run_into(
                i(0),
                i(1),
                inputs.get(2).copied(),
                inputs.get(3).copied(),
                out,
            ),
        }
    }

    fn check_input_count(&self, inputs: &[TensorView<'_>]) -> Result<()> {
        let (required, all) = (self.required_inputs(), self.inputs().len());
        if (required..=all).contains(&inputs.len()) {
            return Ok(());
        }
        let count = if required == all {
            format!("{all}")
        } else {
            format!("{required} to {all}")
        };
        Err(Error::shape(format!(
            "{} takes {count} inputs ({}), {} were given",
            self.name(),
            self.inputs().join(", "),
            inputs.len()
        )))
    }
}

macro_rules! from_builder {
    ($($builder:ident),*) => {$(
        impl From<$builder> for Op {
            fn from(op: $builder) -> Op {
                Op::$builder(op)
            }
        }
    )*};
}

from_builder!(
    Gather,
    GatherElements,
    ScatterElements,
    GatherND,
    ScatterND,
    TensorScatter,
    ScatterReduce,
    SegmentCsr,
    SegmentCoo,
    EmbeddingBag
);

#[cfg(test)]
mod tests {
    use super::*;

    fn every_op() -> [Op; 10] {
        [
            Gather::new(0).into(),
            GatherElements::new(0).into(),
            ScatterElements::new(0).into(),
            GatherND::new().into(),
            ScatterND::new().into(),
            TensorScatter::new().into(),
            ScatterReduce::new(0, crate::Aggregate::Sum).into(),
            SegmentCsr::new(crate::Aggregate::Sum).into(),
            SegmentCoo::new(crate::Aggregate::Sum).into(),
            EmbeddingBag::new(crate::Aggregate::Sum).into(),
        ]
    }

    #[test]
    fn names_follow_the_list_and_commands_are_their_kebab_case() {
        let expected = [
            ("Gather", "gather"),
            ("GatherElements", "gather-elements"),
            ("ScatterElements", "scatter-elements"),
            ("GatherND", "gather-nd"),
            ("ScatterND", "scatter-nd"),
            ("TensorScatter", "tensor-scatter"),
            ("ScatterReduce", "scatter-reduce"),
            ("SegmentCsr", "segment-csr"),
            ("SegmentCoo", "segment-coo"),
            ("EmbeddingBag", "embedding-bag"),
        ];
        for (op, (name, command)) in every_op().iter().zip(expected) {
            assert_eq!((op.name(), op.command()), (name, command));
        }
        assert_eq!(Op::NAMES, expected.map(|(name, _)| name));
    }

    #[test]
    fn a_wrong_number_of_inputs_is_an_error_naming_them() {
        let t = Tensor::new(vec![1], vec![0i64]).unwrap();
        let v = TensorView::from(&t);
        for op in every_op() {
            let err = op.run(&[v]).unwrap_err();
            assert!(err.to_string().contains(op.inputs()[1]), "{err}");
            let too_many = vec![v; op.inputs().len() + 1];
            assert!(op.run(&too_many).is_err());
        }
    }
}
