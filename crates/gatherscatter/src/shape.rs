//! Shape arithmetic: checked element counts, axis normalization, row-major
//! strides and coordinates.

use crate::error::{Error, Result};

/// Product of the dimensions, or an error naming the shape when it overflows.
pub(crate) fn element_count(what: &'static str, shape: &[usize]) -> Result<usize> {
    checked_product(shape).ok_or_else(|| Error::SizeOverflow {
        what,
        shape: shape.to_vec(),
    })
}

/// Product of the dimensions, `None` on overflow.
///
/// A zero anywhere makes the product zero even if the other factors overflow:
/// such a shape describes an empty tensor, which is valid.
pub(crate) fn checked_product(dims: &[usize]) -> Option<usize> {
    if dims.contains(&0) {
        return Some(0);
    }
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Map an axis from `[-rank, rank - 1]` to `[0, rank - 1]`.
pub(crate) fn normalize_axis(axis: i64, rank: usize, what: &'static str) -> Result<usize> {
    let rank_i = rank as i128;
    let a = axis as i128;
    let normalized = if a < 0 { a + rank_i } else { a };
    if (0..rank_i).contains(&normalized) {
        Ok(normalized as usize)
    } else {
        Err(Error::BadAxis { axis, rank, what })
    }
}

/// Row-major coordinates of the element at `flat` in a tensor of `shape`.
///
/// Only used to report errors, so it favours clarity over speed.
pub(crate) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut position = vec![0; shape.len()];
    for (p, &d) in position.iter_mut().zip(shape).rev() {
        if d > 0 {
            *p = flat % d;
            flat /= d;
        }
    }
    position
}

/// Data rank must be at least 1 for every operator (SPEC §2.11).
pub(crate) fn require_rank_at_least_1(what: &'static str, rank: usize) -> Result<()> {
    if rank == 0 {
        return Err(Error::RankMismatch {
            what,
            actual: 0,
            expected: "rank >= 1 is required".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_of_shape_with_zero_is_zero_even_if_others_overflow() {
        assert_eq!(checked_product(&[usize::MAX, 0, usize::MAX]), Some(0));
        assert_eq!(checked_product(&[usize::MAX, 2]), None);
        assert_eq!(checked_product(&[]), Some(1));
    }

    #[test]
    fn axis_normalization_accepts_exactly_minus_rank_to_rank_minus_1() {
        assert_eq!(normalize_axis(-3, 3, "data").unwrap(), 0);
        assert_eq!(normalize_axis(2, 3, "data").unwrap(), 2);
        assert!(normalize_axis(3, 3, "data").is_err());
        assert!(normalize_axis(-4, 3, "data").is_err());
        assert!(normalize_axis(i64::MIN, 3, "data").is_err());
        assert!(normalize_axis(0, 0, "data").is_err());
    }

    #[test]
    fn unravel_gives_row_major_coordinates() {
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
        assert_eq!(unravel(7, &[2, 2, 2]), vec![1, 1, 1]);
    }
}
