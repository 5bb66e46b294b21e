//! The aggregates of ScatterReduce, with PyTorch's names: ONNX's
//! reductions plus `mean`. Their per-dtype rules are the reductions'
//! ([`crate::reduction`]).

use std::fmt;
use std::str::FromStr;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::reduction::Reduction;

/// How the contributions to one output element are aggregated, with
/// PyTorch's names (`scatter_reduce`, segment reductions): ONNX's
/// reductions plus `mean`.
///
/// Per-dtype rules are [`Reduction`]'s (f16/bf16 in f32 per step, integers
/// wrap, NaN propagates under `amax`/`amin`, no order on complex numbers, no
/// product of strings). `mean` divides the sum by the number of
/// contributions: floating and complex types divide, integers round down
/// (floor division, as PyTorch); bool and strings have no mean.
///
/// ```
/// use gatherscatter::Aggregate;
///
/// assert_eq!("mean".parse::<Aggregate>()?, Aggregate::Mean);
/// assert_eq!("max".parse::<Aggregate>()?, Aggregate::Amax); // pytorch_scatter's name
/// assert_eq!(Aggregate::Amin.name(), "amin");
/// # Ok::<(), gatherscatter::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Aggregate {
    /// The sum (bool: OR; strings: concatenation; integers wrap).
    #[default]
    Sum,
    /// The product (bool: AND; integers wrap; not for strings).
    Prod,
    /// The sum divided by the count (integers: floor division; not for bool or strings).
    Mean,
    /// The largest (NaN propagates; bool: OR; strings by bytes; not for complex).
    Amax,
    /// The smallest (NaN propagates; bool: AND; strings by bytes; not for complex).
    Amin,
}

impl Aggregate {
    /// Every aggregate.
    pub const ALL: [Aggregate; 5] = [
        Aggregate::Sum,
        Aggregate::Prod,
        Aggregate::Mean,
        Aggregate::Amax,
        Aggregate::Amin,
    ];

    /// PyTorch's name: `sum`, `prod`, `mean`, `amax`, `amin`.
    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Sum => "sum",
            Aggregate::Prod => "prod",
            Aggregate::Mean => "mean",
            Aggregate::Amax => "amax",
            Aggregate::Amin => "amin",
        }
    }

    /// The ONNX reduction that combines two values the same way (`mean`
    /// adds, then divides once at the end).
    pub(crate) fn step(self) -> Reduction {
        match self {
            Aggregate::Sum | Aggregate::Mean => Reduction::Add,
            Aggregate::Prod => Reduction::Mul,
            Aggregate::Amax => Reduction::Max,
            Aggregate::Amin => Reduction::Min,
        }
    }

    /// `Ok` if `dtype` defines this aggregate, else a `BadReduction` error saying why not.
    pub fn check_dtype(self, dtype: DType) -> Result<()> {
        let why = match (self, dtype) {
            (Aggregate::Mean, DType::Bool) => "booleans have no mean",
            (Aggregate::Mean, DType::String) => "strings have no mean",
            // The rest are the rules of the reduction it steps with.
            _ => match self.step().why_undefined(dtype) {
                Some(why) => why,
                None => return Ok(()),
            },
        };
        Err(Error::BadReduction {
            message: format!("reduce {} is not defined for {dtype}: {why}", self.name()),
        })
    }
}

impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Aggregate {
    type Err = Error;
    /// PyTorch's names, and the names pytorch_scatter and ONNX use for the
    /// same aggregate (`add`, `mul`, `max`, `min`).
    fn from_str(s: &str) -> Result<Aggregate> {
        let aliases = [
            ("add", Aggregate::Sum),
            ("mul", Aggregate::Prod),
            ("max", Aggregate::Amax),
            ("min", Aggregate::Amin),
        ];
        Aggregate::ALL
            .into_iter()
            .map(|a| (a.name(), a))
            .chain(aliases)
            .find(|(name, _)| *name == s)
            .map(|(_, a)| a)
            .ok_or_else(|| Error::BadReduction {
                message: format!(
                    "unknown reduce {s:?}; expected one of sum, prod, mean, amax, amin"
                ),
            })
    }
}
