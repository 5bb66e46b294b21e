//! numpy-style printing: nested brackets, long dimensions elided; shapes in
//! messages, long ranks elided.

use std::fmt::{self, Display, Formatter};

use crate::tensor::{with_typed, Tensor, TypedTensor};

/// Above this many elements, dimensions longer than `2 * EDGE` are elided.
const SUMMARY_THRESHOLD: usize = 1000;
const EDGE: usize = 3;

impl<T: Display> Display for TypedTensor<T> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let summarize = self.len() > SUMMARY_THRESHOLD;
        write_nested(f, self.shape(), self.data(), summarize)
    }
}

impl Display for Tensor {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        with_typed!(self, t => Display::fmt(t, f))
    }
}

fn write_nested<T: Display>(
    f: &mut Formatter<'_>,
    shape: &[usize],
    data: &[T],
    summarize: bool,
) -> fmt::Result {
    let Some((&len, rest)) = shape.split_first() else {
        return match data.first() {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("[]"),
        };
    };
    let block = data.len().checked_div(len).unwrap_or(0);
    f.write_str("[")?;
    let mut first = true;
    for i in 0..len {
        if summarize && len > 2 * EDGE && i == EDGE {
            f.write_str(", ...")?;
        }
        if summarize && len > 2 * EDGE && (EDGE..len - EDGE).contains(&i) {
            continue;
        }
        if !first {
            f.write_str(", ")?;
        }
        first = false;
        write_nested(f, rest, &data[i * block..(i + 1) * block], summarize)?;
    }
    f.write_str("]")
}

/// A shape (or a position) as messages print it: `[2, 3, 4]`, with the
/// middle elided past [`Dims::MAX_SHOWN`] dims so that a hostile rank cannot
/// make an error message megabytes long:
/// `[1, 1, 1, 1, 1, 1, 1, 1, ..., 1, 1, 1, 1, 1, 1, 1, 1] (2000000 dims)`.
///
/// ```
/// use gatherscatter::Dims;
///
/// assert_eq!(Dims(&[2, 3]).to_string(), "[2, 3]");
/// assert_eq!(Dims(&[]).to_string(), "[]");
/// let long = vec![1usize; 100];
/// assert!(Dims(&long).to_string().ends_with(", 1] (100 dims)"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Dims<'a>(pub &'a [usize]);

impl Dims<'_> {
    /// Ranks up to this are printed whole; longer ones keep half of it at
    /// each end.
    pub const MAX_SHOWN: usize = 16;
}

impl Display for Dims<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let dims = self.0;
        let elide = dims.len() > Self::MAX_SHOWN;
        let edge = Self::MAX_SHOWN / 2;
        f.write_str("[")?;
        for (i, d) in dims.iter().enumerate() {
            if elide && (edge..dims.len() - edge).contains(&i) {
                if i == edge {
                    f.write_str(", ...")?;
                }
                continue;
            }
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")?;
        if elide {
            write!(f, " ({} dims)", dims.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Dims;
    use crate::{Tensor, TypedTensor};

    #[test]
    fn dims_print_whole_up_to_sixteen_and_elide_the_middle_beyond() {
        let sixteen: Vec<usize> = (0..16).collect();
        assert_eq!(
            Dims(&sixteen).to_string(),
            format!("{sixteen:?}"),
            "sixteen dims print as Debug does"
        );
        // (Two million dims are checked natively by gsx's hostile tests;
        // Miri runs this one.)
        let many: Vec<usize> = (0..300).collect();
        assert_eq!(
            Dims(&many).to_string(),
            "[0, 1, 2, 3, 4, 5, 6, 7, ..., 292, 293, 294, 295, 296, 297, 298, 299] (300 dims)"
        );
    }

    #[test]
    fn prints_nested_brackets() {
        let t = TypedTensor::new(vec![2, 2], vec![1, 2, 3, 4]).unwrap();
        assert_eq!(t.to_string(), "[[1, 2], [3, 4]]");
        assert_eq!(Tensor::scalar(1.5f32).to_string(), "1.5");
        assert_eq!(
            Tensor::new(vec![2, 0], Vec::<u8>::new())
                .unwrap()
                .to_string(),
            "[[], []]"
        );
    }

    #[test]
    fn elides_long_dimensions_of_large_tensors() {
        let t = TypedTensor::from_vec((0..2000).collect::<Vec<i32>>());
        assert_eq!(t.to_string(), "[0, 1, 2, ..., 1997, 1998, 1999]");
    }
}
