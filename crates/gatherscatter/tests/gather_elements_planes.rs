//! GatherElements along the middle axis of data with several planes (the
//! positions before the axis): packed column strips walked a plane at a
//! time over all its tiles or read in place (`plane_reads`), tasks split
//! by rows when the planes are enough to share out and by columns when
//! they are not, against the naive spec §1 reference.

mod common;
mod pool;

use common::*;
use gatherscatter::tuning::{self, PlaneReads, Tuning, WordGather};
use gatherscatter::{f16, DType, Element, GatherElements, Tensor};
use pool::{in_pool, names_the_first_bad_index_on_any_pool};

/// `auto`, the scalar and strided vector loops forced, and the planes
/// packed into strips or read in place forced.
const TUNINGS: [Tuning; 5] = [
    Tuning::AUTO,
    Tuning::AUTO.with_word_gather(WordGather::Scalar),
    Tuning::AUTO.with_word_gather(WordGather::Vector),
    Tuning::AUTO.with_plane_reads(PlaneReads::Packed),
    Tuning::AUTO.with_plane_reads(PlaneReads::InPlace),
];

/// Shapes `(planes, axis, indices along it, columns)`: planes of 64-256
/// KiB whose rows span one to eight column tiles, 1-9 planes (one task's
/// worth, fewer than the tasks of 2 and 3 threads, more than 2 threads'
/// 8 tasks), index rows that cover a quarter of the axis to more than it.
const SHAPES: [(usize, usize, usize, usize); 4] = [
    (5, 256, 200, 256),
    (9, 256, 100, 1024),
    (1, 512, 300, 300),
    (3, 128, 160, 2048),
];

/// Shapes as [`SHAPES`] whose rows of at most 32 columns fit one column
/// tile on any CPU (tiles are 32 columns or more) while their planes, of
/// 48-128 KiB, are large enough to pack: each plane is read in place, the
/// next one asked for a piece per row, not copied into a strip of its own
/// layout. 2 and 3 threads start tasks inside a plane.
const NARROW_SHAPES: [(usize, usize, usize, usize); 2] = [(3, 1024, 300, 32), (2, 600, 150, 20)];

/// [`SHAPES`] in columns of `T`: near 2 MiB of output whatever its size.
fn wide_shapes<T>() -> [(usize, usize, usize, usize); 4] {
    let size = std::mem::size_of::<T>();
    SHAPES.map(|(planes, axis_len, along, cols)| (planes, axis_len, along, (cols / size).max(64)))
}

/// Equal to the reference on 1, 2 and 3 threads, fresh and into a buffer,
/// for indices read in place (`i64`, `i32`) and widened (`i16`), and a bad
/// index named where it is: in the first plane's second tile, the last
/// plane's first row, the last position.
fn check<T: Element + Copy + PartialEq + std::fmt::Debug>(
    shapes: &[(usize, usize, usize, usize)],
    make: fn(usize) -> T,
) {
    for &(planes, axis_len, along, cols) in shapes {
        let data_shape = [planes, axis_len, cols];
        let shape = [planes, along, cols];
        let data_n = planes * axis_len * cols;
        let n = planes * along * cols;
        let values: Vec<T> = (0..data_n).map(make).collect();
        let data = Tensor::new(data_shape.to_vec(), values.clone()).unwrap();
        let raw: Vec<i128> = (0..n)
            .map(|k| ((k * 2_654_435_761) % (2 * axis_len)) as i128 - axis_len as i128)
            .collect();
        let want = reference_gather_elements(&values, &data_shape, &raw, &shape, 1).unwrap();
        for index_type in [DType::I64, DType::I32, DType::I16] {
            let indices = index_tensor(index_type, &shape, &raw);
            let op = GatherElements::new(1);
            for tuning in TUNINGS {
                for threads in [1, 2, 3] {
                    let run = || tuning::scoped(tuning, || op.run(&data, &indices).unwrap());
                    let fresh = in_pool(threads, run);
                    let mut into = Tensor::new(shape.to_vec(), vec![make(7); n]).unwrap();
                    in_pool(threads, || {
                        tuning::scoped(tuning, || op.run_into(&data, &indices, &mut into))
                    })
                    .unwrap();
                    for out in [&fresh, &into] {
                        assert!(
                            out.data::<T>().unwrap() == &want[..],
                            "{shape:?} from {data_shape:?}, {index_type:?}, {tuning}, \
                             {threads} threads"
                        );
                    }
                }
            }
        }
        let bad_value = axis_len as i128;
        let last_plane = (planes - 1) * along * cols;
        for bad in [cols - 1, along * cols / 2 + cols / 2 + 1, last_plane, n - 1] {
            let mut raw = raw.clone();
            raw[bad] = bad_value;
            let indices = index_tensor(DType::I64, &shape, &raw);
            let at = [bad / (along * cols), bad / cols % along, bad % cols];
            for tuning in TUNINGS {
                let run = || tuning::scoped(tuning, || GatherElements::new(1).run(&data, &indices));
                names_the_first_bad_index_on_any_pool(run, bad_value, &at);
            }
        }
    }
}

// One test per word size, so that the harness runs them side by side.

#[test]
fn byte_planes_along_the_middle_axis_match_the_reference() {
    check::<i8>(&wide_shapes::<i8>(), |k| (k * 131) as i8);
}

#[test]
fn two_byte_planes_along_the_middle_axis_match_the_reference() {
    check::<f16>(&wide_shapes::<f16>(), |k| f16::from_f32((k % 2048) as f32));
}

#[test]
fn four_byte_planes_along_the_middle_axis_match_the_reference() {
    check::<f32>(&wide_shapes::<f32>(), |k| k as f32 * 0.25);
}

#[test]
fn eight_byte_planes_along_the_middle_axis_match_the_reference() {
    check::<f64>(&wide_shapes::<f64>(), |k| k as f64 * -0.5);
}

#[test]
fn narrow_rows_of_planes_too_large_to_fetch_whole_are_read_in_place_and_match_the_reference() {
    check::<f32>(&NARROW_SHAPES, |k| k as f32 * 0.25);
    check::<f64>(&NARROW_SHAPES, |k| k as f64 * -0.5);
}
