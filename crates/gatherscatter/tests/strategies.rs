//! Every kernel strategy on every CPU: Gather and GatherElements under each
//! forced `Tuning` (cached or streaming stores, scalar or vector word
//! gathers, output or source row order) and under `auto`, on shapes small
//! enough that `auto` alone would never stream or reorder, checked against
//! the naive spec §1 references, fresh and into a caller's buffer, on 1-3
//! threads. A bad index is named at the same position under every tuning.
//! GatherND and ScatterND calls in the range whose stores `auto` measures
//! equal the reference on every call, measured or not.

mod common;
mod pool;

use common::measured::{assert_measured, assert_word_loop_measured};
use common::*;
use gatherscatter::tuning::{self, Tuning};
use gatherscatter::{
    DType, Error, ErrorKind, Gather, GatherElements, GatherND, Reduction, ScatterND, Tensor,
};
use pool::in_pool;
use proptest::prelude::*;

/// `auto` first, then every forced combination.
fn every_tuning() -> Vec<Tuning> {
    let mut all = vec![Tuning::AUTO];
    all.extend(Tuning::every_forced());
    all
}

/// Data of `T` from seeds, indices of `index_dtype` fitted to the axis.
#[derive(Debug)]
struct Case {
    data_shape: Vec<usize>,
    axis: usize,
    indices_shape: Vec<usize>,
    indices: Vec<i128>,
    index_dtype: DType,
    threads: usize,
}

/// Data of `shape` made from the seeds 0, 1, 2, ...
fn seeded<T: FromSeed>(shape: &[usize]) -> Vec<T> {
    (0..shape.iter().product::<usize>() as i64)
        .map(T::from_seed)
        .collect()
}

/// `op` under each tuning, fresh and into a buffer, equals `reference`
/// (or fails out of bounds where the reference refuses, with the same
/// error as under `auto`).
fn check_each_tuning<T: FromSeed>(
    case: &Case,
    reference: Option<(Vec<usize>, Vec<T>)>,
    run: impl Fn(&Tensor, &Tensor) -> Result<Tensor, gatherscatter::Error> + Sync,
    run_into: impl Fn(&Tensor, &Tensor, &mut Tensor) -> Result<(), gatherscatter::Error> + Sync,
) -> Result<(), TestCaseError> {
    let data = Tensor::new(case.data_shape.clone(), seeded::<T>(&case.data_shape)).unwrap();
    let indices = index_tensor(case.index_dtype, &case.indices_shape, &case.indices);
    let auto = run(&data, &indices);
    for tuning in every_tuning() {
        let fresh = in_pool(case.threads, || {
            tuning::scoped(tuning, || run(&data, &indices))
        });
        prop_assert_eq!(&fresh, &auto, "{} against auto", tuning);
        check_against_reference(fresh, reference.clone(), T::eq)
            .map_err(|e| TestCaseError::fail(format!("{tuning}: {e}")))?;
        if let Some((shape, expected)) = &reference {
            let filler = T::from_seed(-7);
            let count = expected.len();
            let mut out = Tensor::new(shape.clone(), vec![filler; count]).unwrap();
            in_pool(case.threads, || {
                tuning::scoped(tuning, || run_into(&data, &indices, &mut out))
            })
            .map_err(|e| TestCaseError::fail(format!("{tuning}: {e}")))?;
            prop_assert!(
                out.data::<T>().unwrap() == &expected[..],
                "{} into a buffer",
                tuning
            );
        }
    }
    Ok(())
}

fn check_gather<T: FromSeed>(case: &Case) -> Result<(), TestCaseError> {
    let values = seeded::<T>(&case.data_shape);
    let reference = reference_gather(
        &values,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        case.axis,
        0,
    );
    let op = Gather::new(case.axis as i64);
    check_each_tuning::<T>(
        case,
        reference,
        |d, i| op.run(d, i),
        |d, i, o| op.run_into(d, i, o),
    )
}

fn check_gather_elements<T: FromSeed>(case: &Case) -> Result<(), TestCaseError> {
    let values = seeded::<T>(&case.data_shape);
    let reference = reference_gather_elements(
        &values,
        &case.data_shape,
        &case.indices,
        &case.indices_shape,
        case.axis,
    )
    .map(|expected| (case.indices_shape.clone(), expected));
    let op = GatherElements::new(case.axis as i64);
    check_each_tuning::<T>(
        case,
        reference,
        |d, i| op.run(d, i),
        |d, i, o| op.run_into(d, i, o),
    )
}

/// Every element width, and a type that is never streamed.
fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![
        DType::U8,
        DType::F16,
        DType::F32,
        DType::I32,
        DType::F64,
        DType::U64,
        DType::Complex128,
        DType::String,
    ])
}

fn index_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![DType::I64, DType::I32, DType::U16, DType::I8])
}

/// Indices into an axis of `size`: negatives, repeats, and now and then
/// one out of range.
fn indices_into(size: usize, count: usize) -> impl Strategy<Value = Vec<i128>> {
    let size = size as i128;
    let bad = prop_oneof![6 => Just(None), 1 => (0..count.max(1)).prop_map(Some)];
    (
        prop::collection::vec(-size..size.max(1), count),
        bad,
        prop::sample::select(vec![size, -size - 1, 1000]),
    )
        .prop_map(move |(mut values, bad, outside)| {
            if let Some(at) = bad.filter(|&at| at < values.len()) {
                values[at] = outside;
            }
            values
        })
}

/// Unsigned types take the positive form of each index; values past the
/// type's range (int8 into an axis of 300) are clamped to it.
fn fit(indices: &mut [i128], dtype: DType, size: usize) {
    fit_to_index_type(indices, dtype, size);
    for v in indices {
        *v = (*v).clamp(index_type_min(dtype), index_type_max(dtype));
    }
}

/// Gather rows (or runs of `inner` elements along a middle axis) of 1 to
/// 100 elements: blocks shorter and longer than a cache line.
fn gather_case() -> impl Strategy<Value = (Case, DType)> {
    (
        1usize..=3,
        1usize..=40,
        1usize..=100,
        0usize..=300,
        1usize..=3,
    )
        .prop_flat_map(|(outer, rows, inner, count, threads)| {
            (
                Just((outer, rows, inner, count, threads)),
                indices_into(rows, count),
                index_dtype(),
                dtype(),
            )
        })
        .prop_map(
            |((outer, rows, inner, count, threads), mut indices, index_dtype, dtype)| {
                fit(&mut indices, index_dtype, rows);
                let case = Case {
                    data_shape: vec![outer, rows, inner],
                    axis: 1,
                    indices_shape: vec![count],
                    indices,
                    index_dtype,
                    threads,
                };
                (case, dtype)
            },
        )
}

/// GatherElements along the last axis (rows up to 3000 indices, past a
/// widening chunk) or the middle one.
fn elements_case() -> impl Strategy<Value = (Case, DType)> {
    (
        1usize..=4,
        1usize..=300,
        0usize..=3000,
        any::<bool>(),
        1usize..=3,
    )
        .prop_flat_map(|(rows, size, row_len, last, threads)| {
            let (data_shape, indices_shape, axis) = if last {
                (vec![rows, size], vec![rows, row_len], 1)
            } else {
                let width = row_len.min(40);
                (vec![rows, size, width], vec![rows, 3, width], 1)
            };
            let count = indices_shape.iter().product();
            (
                Just((data_shape, indices_shape, axis, threads, size)),
                indices_into(size, count),
                index_dtype(),
                dtype(),
            )
        })
        .prop_map(
            |(
                (data_shape, indices_shape, axis, threads, size),
                mut indices,
                index_dtype,
                dtype,
            )| {
                fit(&mut indices, index_dtype, size);
                let case = Case {
                    data_shape,
                    axis,
                    indices_shape,
                    indices,
                    index_dtype,
                    threads,
                };
                (case, dtype)
            },
        )
}

proptest! {
    #![proptest_config(proptest_config(40))]

    #[test]
    fn gather_gives_the_reference_under_every_tuning((case, dtype) in gather_case()) {
        for_dtype!(dtype, check_gather(&case))?;
    }

    #[test]
    fn gather_elements_gives_the_reference_under_every_tuning((case, dtype) in elements_case()) {
        for_dtype!(dtype, check_gather_elements(&case))?;
    }
}

/// A long last-axis row of 4- and 8-byte words with one bad index past the
/// vector loop's first groups, in each index type the vector loops read in
/// place: named where it is under every tuning.
#[test]
fn a_bad_index_in_a_vector_row_is_named_under_every_tuning() {
    let size = 500;
    let mut values: Vec<i64> = (0..2 * 2000).map(|k| (k * 7) % size as i64).collect();
    values[2000 + 1234] = size as i64;
    let index_tensors = [
        Tensor::new(vec![2, 2000], values.clone()).unwrap(),
        Tensor::new(vec![2, 2000], values.iter().map(|&v| v as i32).collect()).unwrap(),
        Tensor::new(vec![2, 2000], values.iter().map(|&v| v as u16).collect()).unwrap(),
    ];
    for (dtype, indices) in [DType::F32, DType::F64]
        .into_iter()
        .flat_map(|d| index_tensors.iter().map(move |i| (d, i)))
    {
        let data = match dtype {
            DType::F32 => Tensor::new(vec![2, size], vec![1.5f32; 2 * size]).unwrap(),
            _ => Tensor::new(vec![2, size], vec![2.5f64; 2 * size]).unwrap(),
        };
        for tuning in every_tuning() {
            for threads in [1, 2] {
                let err = in_pool(threads, || {
                    tuning::scoped(tuning, || GatherElements::new(1).run(&data, indices))
                })
                .unwrap_err();
                assert_eq!(err.kind(), ErrorKind::OutOfBounds);
                let Error::IndexOutOfRange { position, .. } = &err else {
                    panic!("{err:?}")
                };
                assert_eq!(position, &[1, 1234], "{tuning}, {threads} threads");
            }
        }
    }
}

/// Each forced tuning prints as it parses; outside `scoped`, the global
/// tuning is in force; the report names the thresholds.
#[test]
fn every_forced_tuning_reads_back_from_its_text() {
    for tuning in Tuning::every_forced() {
        assert_eq!(tuning.to_string().parse::<Tuning>().unwrap(), tuning);
    }
    assert_eq!(tuning::in_force(), tuning::global());
    let line = tuning::report().to_string();
    assert!(line.contains("last-level cache"), "{line}");
}

/// Nine calls fresh and nine into one buffer, on one thread and then two,
/// each equal to `expected`: the calls a measured strategy's class is
/// timed on, and those after its choice. Nineteen calls a thread count
/// leave room for a word loop's six and a store choice's runs that last
/// until settled (up to twelve): with six and six, the one-task stores
/// of a 1 MiB GatherElements were still measuring in one run in four.
fn every_call_gives<T: gatherscatter::Element + PartialEq + std::fmt::Debug + Sync>(
    run: impl Fn() -> Tensor + Sync,
    run_into: impl Fn(&mut Tensor) + Sync,
    expected: &[T],
) {
    for threads in [1, 2] {
        in_pool(threads, || {
            let mut into = run();
            for call in 0..9 {
                assert_eq!(run().data::<T>().unwrap(), expected, "call {call}");
                run_into(&mut into);
                assert_eq!(into.data::<T>().unwrap(), expected, "call {call}");
            }
        });
    }
}

/// Row gathers in the range whose order `auto` measures (streamed
/// outputs, sources from 2 MiB, rows of 256 bytes or more): the first calls
/// of a class take output and source order in turn, the later ones the
/// order kept. Every call, on one and two threads, fresh and into a
/// buffer, equals the naive reference, and the report names the class.
#[test]
fn row_gathers_whose_order_is_measured_equal_the_reference_on_every_call() {
    let (rows, row_len) = (4096, 128); // 2 MiB of u32, rows of 512 bytes
    let data: Vec<u32> = (0..(rows * row_len) as u32).collect();
    // Enough rows for the output to take streaming stores on this CPU.
    let count = (tuning::report().streaming_min_bytes / (4 * row_len)).max(512) as i64 + 1;
    let picks: Vec<i64> = (0..count)
        .map(|k| (k * 2_654_435_761) % rows as i64)
        .collect();
    let expected: Vec<u32> = picks
        .iter()
        .flat_map(|&p| data[p as usize * row_len..][..row_len].iter().copied())
        .collect();
    let data = Tensor::new(vec![rows, row_len], data).unwrap();
    let indices = Tensor::new(vec![picks.len()], picks).unwrap();
    let op = Gather::new(0);
    every_call_gives(
        || op.run(&data, &indices).unwrap(),
        |into| op.run_into(&data, &indices, into).unwrap(),
        &expected,
    );
    assert_measured("block_order", "2 MiB sources by 512 B rows, one task");
}

/// Gather of 16 KiB blocks past the streaming threshold from a source that
/// fits in the last-level cache with the output: under `auto` its first
/// calls take ordinary and streaming stores in turn. Every call, fresh and
/// into a buffer, equals the naive reference, and the report names the
/// class with its choice.
#[test]
fn long_blocks_whose_stores_are_measured_equal_the_reference_on_every_call() {
    let report = tuning::report();
    let (threshold, cache) = (report.streaming_min_bytes, report.last_level_cache_bytes);
    let (rows, row_len) = (64, 4096); // 1 MiB of u32, rows of 16 KiB
    let data: Vec<u32> = (0..(rows * row_len) as u32).collect();
    let count = (threshold / (4 * row_len)) as i64;
    let picks: Vec<i64> = (0..count).map(|k| (k * 37 + 5) % rows as i64 - 3).collect();
    let expected: Vec<u32> = picks
        .iter()
        .map(|&p| p.rem_euclid(rows as i64) as usize)
        .flat_map(|p| data[p * row_len..][..row_len].iter().copied())
        .collect();
    let data = Tensor::new(vec![rows, row_len], data).unwrap();
    let indices = Tensor::new(vec![picks.len()], picks).unwrap();
    let op = Gather::new(0);
    every_call_gives(
        || op.run(&data, &indices).unwrap(),
        |into| op.run_into(&data, &indices, into).unwrap(),
        &expected,
    );
    if threshold + (1 << 20) <= cache {
        let mib = (1usize << threshold.ilog2()) >> 20;
        assert_measured(
            "stores",
            &format!("Gather {mib} MiB outputs by 16 KiB runs, one task"),
        );
    }
}

/// Gather and GatherND of 256-byte rows into 1 MiB outputs, between the
/// small outputs and the streaming threshold: under `auto` the first calls
/// of each take ordinary and streaming stores in turn. Every call, fresh
/// and into a buffer, equals the naive reference, and the report names
/// both classes with their choices.
#[test]
fn mid_size_gathers_whose_stores_are_measured_equal_the_reference_on_every_call() {
    let (rows, row_len) = (256, 64); // 64 KiB of u32, rows of 256 bytes
    let data: Vec<u32> = (0..(rows * row_len) as u32).collect();
    let count = 4096; // 1 MiB out
    let picks: Vec<i64> = (0..count)
        .map(|k| (k * 97 + 11) % rows as i64 - 7)
        .collect();
    let expected: Vec<u32> = picks
        .iter()
        .map(|&p| p.rem_euclid(rows as i64) as usize)
        .flat_map(|p| data[p * row_len..][..row_len].iter().copied())
        .collect();
    let data = Tensor::new(vec![rows, row_len], data).unwrap();
    let indices = Tensor::new(vec![picks.len()], picks.clone()).unwrap();
    let op = Gather::new(0);
    every_call_gives(
        || op.run(&data, &indices).unwrap(),
        |into| op.run_into(&data, &indices, into).unwrap(),
        &expected,
    );
    let tuples = Tensor::new(vec![picks.len(), 1], picks).unwrap();
    let nd = GatherND::new();
    every_call_gives(
        || nd.run(&data, &tuples).unwrap(),
        |into| nd.run_into(&data, &tuples, into).unwrap(),
        &expected,
    );
    if tuning::report().streaming_min_bytes > 1 << 20 {
        assert_measured("stores", "Gather 1 MiB outputs by 256 B runs, one task");
        assert_measured("stores", "GatherND 1 MiB outputs by 256 B runs, one task");
    }
}

/// ScatterND overwrites and sums of 256-byte rows into a 1 MiB output,
/// between the small outputs and the streaming threshold: under `auto`
/// the first calls of each take ordinary stores (data copied, then each
/// tuple's row stored) and streaming ones (the output written once as a
/// gather of rows) in turn. Every call, fresh and into a buffer, equals
/// the serial reference, duplicates included, and the report names both
/// classes with their choices.
#[test]
fn mid_size_scatter_nds_whose_stores_are_measured_equal_the_reference_on_every_call() {
    let (rows, row_len) = (4096, 64); // 1 MiB of u32, rows of 256 bytes
    let data: Vec<u32> = (0..(rows * row_len) as u32).map(|v| v % 1000).collect();
    let count = 1024;
    // Rows named more than once, some by negative indices.
    let picks: Vec<i64> = (0..count)
        .map(|k| (k * 389 + 5) % (rows as i64 / 2) - 9)
        .collect();
    let updates: Vec<u32> = (0..(count as usize * row_len) as u32)
        .map(|v| v % 7)
        .collect();
    let (mut overwritten, mut summed) = (data.clone(), data.clone());
    for (k, &p) in picks.iter().enumerate() {
        let row = p.rem_euclid(rows as i64) as usize * row_len;
        let update = &updates[k * row_len..][..row_len];
        overwritten[row..row + row_len].copy_from_slice(update);
        for (o, u) in summed[row..row + row_len].iter_mut().zip(update) {
            *o += u;
        }
    }
    let data = Tensor::new(vec![rows, row_len], data).unwrap();
    let tuples = Tensor::new(vec![picks.len(), 1], picks).unwrap();
    let updates = Tensor::new(vec![count as usize, row_len], updates).unwrap();
    for (reduction, expected) in [(Reduction::None, overwritten), (Reduction::Add, summed)] {
        let op = ScatterND::new().reduction(reduction);
        every_call_gives(
            || op.run(&data, &tuples, &updates).unwrap(),
            |into| op.run_into(&data, &tuples, &updates, into).unwrap(),
            &expected,
        );
    }
    if tuning::report().streaming_min_bytes > 1 << 20 {
        assert_measured("stores", "ScatterND 1 MiB outputs by 256 B runs, one task");
        assert_measured(
            "stores",
            "ScatterND reductions 1 MiB outputs by 256 B runs, one task",
        );
    }
}

/// GatherElements along the last axis on 8-byte words, 1 MiB a call:
/// under `auto` its first calls take the scalar and the vector loop in
/// turn (unless the first-use measurement found the vector loop far
/// behind: then every call takes the scalar one, untimed). Every call,
/// fresh and into a buffer, equals the naive reference, and the report
/// names the class with its choice.
#[test]
fn last_axis_gathers_whose_loop_is_measured_equal_the_reference_on_every_call() {
    let (rows, row_len) = (512, 256); // 1 MiB of f64, rows of 2 KiB
    let data: Vec<f64> = (0..rows * row_len).map(|k| k as f64 * 0.5).collect();
    let picks: Vec<i64> = (0..rows * row_len)
        .map(|k| (k as i64 * 2_654_435_761) % (2 * row_len as i64) - row_len as i64)
        .collect();
    let expected: Vec<f64> = picks
        .iter()
        .enumerate()
        .map(|(k, &p)| data[k / row_len * row_len + p.rem_euclid(row_len as i64) as usize])
        .collect();
    let data = Tensor::new(vec![rows, row_len], data).unwrap();
    let indices = Tensor::new(vec![rows, row_len], picks).unwrap();
    let op = GatherElements::new(-1);
    every_call_gives(
        || op.run(&data, &indices).unwrap(),
        |into| op.run_into(&data, &indices, into).unwrap(),
        &expected,
    );
    if tuning::report().avx2 {
        let class = "8-byte words by 8-byte indices, rows of 2 KiB, one task";
        // Then, the vector loop chosen, its stores.
        if assert_word_loop_measured(class, 8, 8)
            && !tuning::report()
                .measured
                .iter()
                .any(|t| t.class == class && t.chosen == Some("scalar"))
        {
            assert_measured("stores", "GatherElements 1 MiB outputs, one task");
        }
    }
}

/// GatherElements along the last axis in rows of 16 float32 by int64
/// indices, 1 MiB a call: under `auto` its first calls take the scalar
/// walk and the vector loop across row ends in turn, then (the vector loop
/// kept) the loop's stores; none of it where the first-use measurement
/// found the vector loop far behind. Every call, fresh and into a buffer, equals
/// the naive reference, and the report names the classes.
#[test]
fn short_last_axis_rows_whose_loop_is_measured_equal_the_reference_on_every_call() {
    let (rows, row_len) = (1 << 14, 16); // 1 MiB of f32
    let shape = [rows, row_len];
    let count = rows * row_len;
    let values: Vec<f32> = (0..count).map(|k| k as f32 * 0.25).collect();
    let raw: Vec<i128> = (0..count)
        .map(|k| ((k * 2_654_435_761) % 32) as i128 - 16)
        .collect();
    let expected = reference_gather_elements(&values, &shape, &raw, &shape, 1).unwrap();
    let data = Tensor::new(shape.to_vec(), values).unwrap();
    let indices = index_tensor(DType::I64, &shape, &raw);
    let op = GatherElements::new(-1);
    every_call_gives(
        || op.run(&data, &indices).unwrap(),
        |into| op.run_into(&data, &indices, into).unwrap(),
        &expected,
    );
    if tuning::report().avx2 {
        let class = "4-byte words by 8-byte indices, short rows from rows of 64 B, one task";
        if assert_word_loop_measured(class, 4, 8)
            && !tuning::report()
                .measured
                .iter()
                .any(|t| t.class == class && t.chosen == Some("scalar"))
        {
            assert_measured(
                "stores",
                "GatherElements short rows 1 MiB outputs, one task",
            );
        }
    }
}

/// GatherElements along the middle axis on 2-byte words by int32 indices,
/// 1 MiB a call from 64 KiB planes: under `auto` its first calls take the
/// scalar and the strided vector loop in turn (unless the first-use
/// measurement found the vector loop far behind). Every call, fresh and
/// into a buffer, equals the naive reference, and the report names the
/// class with its choice.
#[test]
fn middle_axis_gathers_whose_loop_is_measured_equal_the_reference_on_every_call() {
    // Planes of 256 x 128 i16 (64 KiB), packed into strips; 1 MiB out.
    let shape = [16usize, 256, 128];
    let count: usize = shape.iter().product();
    let values: Vec<i16> = (0..count).map(|k| (k % 30_011) as i16 - 15_000).collect();
    let raw: Vec<i128> = (0..count)
        .map(|k| ((k * 2_654_435_761) % 512) as i128 - 256)
        .collect();
    let expected = reference_gather_elements(&values, &shape, &raw, &shape, 1).unwrap();
    let data = Tensor::new(shape.to_vec(), values).unwrap();
    let indices = index_tensor(DType::I32, &shape, &raw);
    let op = GatherElements::new(1);
    every_call_gives(
        || op.run(&data, &indices).unwrap(),
        |into| op.run_into(&data, &indices, into).unwrap(),
        &expected,
    );
    if tuning::report().avx2 {
        let class = "2-byte words by 4-byte indices, planes of 64 KiB, one task";
        assert_word_loop_measured(class, 2, 4);
    }
}
