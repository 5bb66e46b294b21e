//! numpy-style printing: nested brackets, long dimensions elided.

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

#[cfg(test)]
mod tests {
    use crate::{Tensor, TypedTensor};

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
