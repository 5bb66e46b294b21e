//! Shapes whose element count overflows and outputs too large to allocate
//! are errors: no abort, no panic, no partial result.

use gatherscatter::{
    Aggregate, EmbeddingBag, ErrorKind, Gather, GatherND, ScatterND, Tensor, TensorScatter,
};

#[test]
fn an_output_too_large_to_allocate_is_an_error() {
    // 16 MiB of data and 16 Mi one-byte indices make a 256 TiB output.
    let n = 1usize << 24;
    let data = Tensor::new(vec![1, n], vec![7u8; n]).unwrap();
    let indices = Tensor::new(vec![n], vec![0u8; n]).unwrap();
    let err = Gather::new(0).run(&data, &indices).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfMemory);
    assert_eq!(err.kind().as_str(), "out_of_memory");
    assert_eq!(
        err.to_string(),
        format!("cannot allocate {} elements of uint8 for the output", n * n)
    );
    // GatherND: each of n tuples picks a whole row of n elements.
    let tuples = Tensor::new(vec![n, 1], vec![0u8; n]).unwrap();
    let err = GatherND::new().run(&data, &tuples).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfMemory);
}

#[test]
fn element_counts_that_overflow_usize_are_errors() {
    let big = 1usize << 40;
    // GatherND output [1, big, big] from empty data: the shape is checked
    // before any index.
    let data = Tensor::new(vec![0, big, big], Vec::<f64>::new()).unwrap();
    let indices = Tensor::new(vec![1, 1], vec![0i64]).unwrap();
    let err = GatherND::new().run(&data, &indices).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SizeOverflow, "{err}");
    // A zero anywhere makes the count 0, whatever the other dims.
    let indices = Tensor::new(vec![0, 1], Vec::<i64>::new()).unwrap();
    let out = GatherND::new().run(&data, &indices).unwrap();
    assert_eq!(out.shape(), &[0, big, big]);
    // A tensor whose shape alone overflows cannot be built.
    let err = Tensor::new(vec![big, big, big], Vec::<u8>::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SizeOverflow);
    // ScatterND with a huge but empty updates shape.
    let data = Tensor::new(vec![3], vec![1i32, 2, 3]).unwrap();
    let indices = Tensor::new(vec![0, big, 1], Vec::<i64>::new()).unwrap();
    let updates = Tensor::new(vec![0, big], Vec::<i32>::new()).unwrap();
    let out = ScatterND::new().run(&data, &indices, &updates).unwrap();
    assert_eq!(out, data, "no tuple, no write");
}

#[test]
fn more_empty_bags_than_memory_holds_bounds_for_are_an_allocation_error_not_an_abort() {
    // `[bags, 0]` indices hold no entry, whatever the count of bags; each
    // bag still needs a bound.
    let weight = Tensor::new(vec![3, 2], vec![1.0f32; 6]).unwrap();
    for bags in [1usize << 60, usize::MAX] {
        let indices = Tensor::new(vec![bags, 0], Vec::<i64>::new()).unwrap();
        let err = EmbeddingBag::new(Aggregate::Sum)
            .run(&weight, &indices, None, None)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OutOfMemory, "{bags} bags: {err}");
    }
    // A count that fits keeps working: 3 empty bags take the fill, zero.
    let indices = Tensor::new(vec![3, 0], Vec::<i64>::new()).unwrap();
    let out = EmbeddingBag::new(Aggregate::Sum)
        .run(&weight, &indices, None, None)
        .unwrap();
    assert_eq!(out.shape(), &[3, 2]);
    assert_eq!(out.data::<f32>().unwrap(), &[0.0; 6]);
}

#[test]
fn a_cache_of_more_empty_batches_than_memory_holds_positions_for_is_an_allocation_error() {
    // An empty cache [batches, 0, 4] and an empty step: without
    // write_indices every batch writes at position 0, a list of `batches`.
    for batches in [1usize << 60, usize::MAX] {
        let cache = Tensor::new(vec![batches, 0, 4], Vec::<f32>::new()).unwrap();
        let step = Tensor::new(vec![batches, 0, 4], Vec::<f32>::new()).unwrap();
        let err = TensorScatter::new()
            .axis(1)
            .run(&cache, &step, None)
            .unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::OutOfMemory,
            "{batches} batches: {err}"
        );
    }
}

#[test]
fn index_tuples_resolve_exactly_against_dims_past_i64() {
    // Data [2^63 + 5, 0] holds no element, but its first dim is real: -1
    // is row 2^63 + 4, and so is that row named as a u64.
    let rows = (1usize << 63) + 5;
    let data = Tensor::new(vec![rows, 0], Vec::<f32>::new()).unwrap();
    let last = (rows - 1) as u64;
    let indices = Tensor::new(vec![2, 1], vec![last, 0]).unwrap();
    let out = GatherND::new().run(&data, &indices).unwrap();
    assert_eq!(out.shape(), &[2, 0]);
    let negative = Tensor::new(vec![1, 1], vec![-1i64]).unwrap();
    assert_eq!(
        GatherND::new().run(&data, &negative).unwrap().shape(),
        &[1, 0]
    );
    let past = Tensor::new(vec![1, 1], vec![rows as u64]).unwrap();
    let err = GatherND::new().run(&data, &past).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::OutOfBounds, "{err}");
}
