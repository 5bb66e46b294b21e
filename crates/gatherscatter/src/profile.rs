//! Strict contracts of ONNX opsets, DirectML feature levels and MindSpore (spec §3).
//!
//! A profile only validates; the computation is the same under every profile.
//! The default, [`Profile::Permissive`], is the superset of spec §2.

use std::fmt;
use std::str::FromStr;

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Which contract a call is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Profile {
    /// Everything spec §2 allows: every dtype, every index type, negative indices.
    #[default]
    Permissive,
    /// ONNX at the given opset: the operator version in force at that opset,
    /// with its attributes and dtypes.
    Onnx {
        /// The model's `opset_import` version for the default domain.
        opset: u32,
    },
    /// DirectML at the given feature level (GatherElements only).
    DirectMl {
        /// `DML_FEATURE_LEVEL`.
        level: FeatureLevel,
    },
    /// MindSpore `Tensor.gather` in either of its two forms.
    MindSpore,
}

/// A DirectML feature level such as 3.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FeatureLevel {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
}

impl FeatureLevel {
    /// Feature level `major.minor`.
    pub const fn new(major: u8, minor: u8) -> FeatureLevel {
        FeatureLevel { major, minor }
    }
}

impl fmt::Display for FeatureLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for FeatureLevel {
    type Err = Error;
    fn from_str(s: &str) -> Result<FeatureLevel> {
        let bad = || {
            Error::attribute(format!(
                "feature level {s:?} is not of the form MAJOR.MINOR, e.g. \"3.0\""
            ))
        };
        let (major, minor) = s.split_once('.').ok_or_else(bad)?;
        Ok(FeatureLevel {
            major: major.parse().map_err(|_| bad())?,
            minor: minor.parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Profile::Permissive => f.write_str("permissive"),
            Profile::Onnx { opset } => write!(f, "onnx:{opset}"),
            Profile::DirectMl { level } => write!(f, "directml:{level}"),
            Profile::MindSpore => f.write_str("mindspore"),
        }
    }
}

impl FromStr for Profile {
    type Err = Error;
    /// Parses `permissive`, `onnx:13`, `directml:3.0` or `mindspore`.
    fn from_str(s: &str) -> Result<Profile> {
        let bad = || {
            Error::attribute(format!(
                "profile {s:?} is not one of permissive, onnx:OPSET, directml:MAJOR.MINOR, mindspore"
            ))
        };
        match s.split_once(':') {
            None if s == "permissive" => Ok(Profile::Permissive),
            None if s == "mindspore" => Ok(Profile::MindSpore),
            Some(("onnx", opset)) => Ok(Profile::Onnx {
                opset: opset.parse().map_err(|_| bad())?,
            }),
            Some(("directml", level)) => Ok(Profile::DirectMl {
                level: level.parse()?,
            }),
            _ => Err(bad()),
        }
    }
}

/// Every dtype but one (a constant table: profile checks run on every call
/// and allocate nothing).
const fn all_dtypes_but(excluded: DType) -> [DType; 15] {
    let mut out = [DType::F32; 15];
    let (mut from, mut to) = (0, 0);
    while from < DType::ALL.len() {
        if DType::ALL[from] as u8 != excluded as u8 {
            out[to] = DType::ALL[from];
            to += 1;
        }
        from += 1;
    }
    out
}

const ALL_BUT_BF16: [DType; 15] = all_dtypes_but(DType::BF16);
const ALL_BUT_STRING: [DType; 15] = all_dtypes_but(DType::String);

/// Every dtype, but bfloat16 only from version 13 (ONNX added it at opset 13).
pub(crate) fn onnx_data_types(since_version: u32) -> &'static [DType] {
    if since_version >= 13 {
        &DType::ALL
    } else {
        &ALL_BUT_BF16
    }
}

/// ONNX `Tind`: int32 and int64.
pub(crate) const ONNX_INDEX_TYPES: [DType; 2] = [DType::I32, DType::I64];

/// MindSpore `Tensor.gather`: int32 and int64 indices.
pub(crate) const MINDSPORE_INDEX_TYPES: [DType; 2] = [DType::I32, DType::I64];

/// MindSpore tensors: every numeric type and bool, but no strings.
pub(crate) fn mindspore_data_types() -> &'static [DType] {
    &ALL_BUT_STRING
}

/// DirectML feature levels at which GatherElements' tables change (seed 001).
pub(crate) const DML_2_1: FeatureLevel = FeatureLevel::new(2, 1);
pub(crate) const DML_3_0: FeatureLevel = FeatureLevel::new(3, 0);
pub(crate) const DML_4_1: FeatureLevel = FeatureLevel::new(4, 1);

/// DirectML GatherElements `InputTensor` data types at a feature level.
pub(crate) fn directml_gather_elements_data_types(level: FeatureLevel) -> Vec<DType> {
    let mut types = vec![
        DType::F32,
        DType::F16,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U32,
        DType::U16,
        DType::U8,
    ];
    if level >= DML_4_1 {
        types.extend([DType::F64, DType::I64, DType::U64]);
    }
    types
}

/// DirectML GatherElements `IndicesTensor` data types at a feature level.
pub(crate) fn directml_gather_elements_index_types(level: FeatureLevel) -> Vec<DType> {
    if level >= DML_3_0 {
        vec![DType::I64, DType::I32, DType::U64, DType::U32]
    } else {
        vec![DType::U32]
    }
}

/// The operator version in force at `opset`, given the versions at which the
/// operator changed (ascending); an error if the operator did not exist yet.
pub(crate) fn onnx_since_version(op: &str, opset: u32, versions: &[u32]) -> Result<u32> {
    versions
        .iter()
        .rev()
        .find(|&&v| v <= opset)
        .copied()
        .ok_or_else(|| {
            Error::unsupported(format!(
                "ONNX {op} does not exist at opset {opset} (first defined at opset {})",
                versions[0]
            ))
        })
}

/// `Err(BadDType)` unless `dtype` is in `accepted`.
pub(crate) fn require_dtype(
    what: &'static str,
    dtype: DType,
    accepted: &[DType],
    context: impl FnOnce() -> String,
) -> Result<()> {
    if accepted.contains(&dtype) {
        Ok(())
    } else {
        Err(Error::BadDType {
            what,
            dtype,
            context: context(),
            accepted: accepted.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_print_the_same_text() {
        for text in ["permissive", "onnx:13", "directml:3.0", "mindspore"] {
            let p: Profile = text.parse().unwrap();
            assert_eq!(p.to_string(), text);
        }
        assert!("onnx:x".parse::<Profile>().is_err());
        assert!("directml:3".parse::<Profile>().is_err());
        assert!("tf".parse::<Profile>().is_err());
    }

    #[test]
    fn since_version_picks_the_latest_version_not_after_the_opset() {
        assert_eq!(onnx_since_version("Gather", 12, &[1, 11, 13]).unwrap(), 11);
        assert_eq!(onnx_since_version("Gather", 21, &[1, 11, 13]).unwrap(), 13);
        assert!(onnx_since_version("GatherElements", 10, &[11, 13]).is_err());
    }

    #[test]
    fn data_type_tables_drop_exactly_one_dtype() {
        for (table, dropped) in [
            (onnx_data_types(11), Some(DType::BF16)),
            (onnx_data_types(13), None),
            (mindspore_data_types(), Some(DType::String)),
        ] {
            let expected: Vec<DType> = DType::ALL
                .into_iter()
                .filter(|&d| Some(d) != dropped)
                .collect();
            assert_eq!(table, &expected[..]);
        }
    }

    #[test]
    fn feature_levels_order_numerically() {
        assert!(FeatureLevel::new(2, 1) < FeatureLevel::new(3, 0));
        assert!(FeatureLevel::new(3, 0) < FeatureLevel::new(4, 1));
        assert!(FeatureLevel::new(4, 1) < FeatureLevel::new(10, 0));
    }
}
