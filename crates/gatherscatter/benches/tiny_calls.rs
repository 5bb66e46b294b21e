//! Per-call cost of every operator on tiny inputs (issue #34, item 4: the
//! overhead of each op as low as the tiny Gather's, W9). Every call returns a
//! fresh output and runs on the calling thread, outside the rayon pool, as a
//! Python caller's would. `tiny/copy` clones a tensor of the same size: the
//! allocation every fresh call pays. `cargo bench -p gatherscatter --bench
//! tiny_calls` prints one time per op; `-- tiny/GatherElements` runs one.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, Reduction, ScatterElements,
    ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, Tensor, TensorScatter,
};
use std::time::Duration;

fn tensor<T: gatherscatter::Element>(shape: &[usize], values: Vec<T>) -> Tensor {
    Tensor::new(shape.to_vec(), values).expect("a well-formed bench tensor")
}

fn floats(len: usize) -> Vec<f32> {
    (0..len).map(|i| i as f32 * 0.5).collect()
}

/// Index values `0..modulo` in a fixed scrambled order.
fn indices(len: usize, modulo: usize) -> Vec<i64> {
    (0..len).map(|i| ((i * 5 + 3) % modulo) as i64).collect()
}

fn bench_tiny_calls(c: &mut Criterion) {
    let mut group = c.benchmark_group("tiny");
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30);

    // W9's shapes: data 16×16, 4 row indices.
    let rows = tensor(&[16, 16], floats(256));
    let row_ids = tensor(&[4], indices(4, 16));
    // The shapes the issue names for the elements ops: data 8×8, indices 8×4.
    let square = tensor(&[8, 8], floats(64));
    let elements = tensor(&[8, 4], indices(32, 8));
    let updates = tensor(&[8, 4], floats(32));
    // ND: 4 index tuples of 2 into 8×8, one element each.
    let tuples = tensor(&[4, 2], indices(8, 8));
    let nd_updates = tensor(&[4], floats(4));
    // TensorScatter: a [1, 8, 4] cache, one step written at position 3.
    let cache = tensor(&[1, 8, 4], floats(32));
    let step = tensor(&[1, 1, 4], floats(4));
    let at = tensor(&[1], vec![3i64]);
    // Segments: 32 values in 4 segments; bags: 8 rows of 8, 4 bags of 2.
    let src = tensor(&[32], floats(32));
    let indptr = tensor(&[5], vec![0i64, 8, 16, 24, 32]);
    let ids = tensor(&[32], (0..32).map(|i| i / 8).collect::<Vec<i64>>());
    let bag_rows = tensor(&[8], indices(8, 8));
    let offsets = tensor(&[4], vec![0i64, 2, 4, 6]);

    let gather = Gather::new(0);
    let gather_elements = GatherElements::new(1);
    let scatter = ScatterElements::new(1);
    let scatter_add = ScatterElements::new(1).reduction(Reduction::Add);
    let scatter_reduce = ScatterReduce::new(1, Aggregate::Mean);
    let gather_nd = GatherND::new();
    let scatter_nd = ScatterND::new();
    let tensor_scatter = TensorScatter::new().axis(1);
    let segment_csr = SegmentCsr::new(Aggregate::Sum);
    let segment_coo = SegmentCoo::new(Aggregate::Sum).segments(4);
    let embedding_bag = EmbeddingBag::new(Aggregate::Sum);

    group.bench_function("copy", |b| b.iter(|| black_box(&square).clone()));
    group.bench_function("Gather", |b| {
        b.iter(|| gather.run(black_box(&rows), &row_ids).unwrap())
    });
    group.bench_function("GatherElements", |b| {
        b.iter(|| gather_elements.run(black_box(&square), &elements).unwrap())
    });
    group.bench_function("ScatterElements", |b| {
        b.iter(|| {
            scatter
                .run(black_box(&square), &elements, &updates)
                .unwrap()
        })
    });
    group.bench_function("ScatterElements_add", |b| {
        b.iter(|| {
            scatter_add
                .run(black_box(&square), &elements, &updates)
                .unwrap()
        })
    });
    group.bench_function("ScatterReduce_mean", |b| {
        b.iter(|| {
            scatter_reduce
                .run(black_box(&square), &elements, &updates)
                .unwrap()
        })
    });
    group.bench_function("GatherND", |b| {
        b.iter(|| gather_nd.run(black_box(&square), &tuples).unwrap())
    });
    group.bench_function("ScatterND", |b| {
        b.iter(|| {
            scatter_nd
                .run(black_box(&square), &tuples, &nd_updates)
                .unwrap()
        })
    });
    group.bench_function("TensorScatter", |b| {
        b.iter(|| {
            tensor_scatter
                .run(black_box(&cache), &step, Some((&at).into()))
                .unwrap()
        })
    });
    group.bench_function("SegmentCsr", |b| {
        b.iter(|| segment_csr.run(black_box(&src), &indptr).unwrap())
    });
    group.bench_function("SegmentCoo", |b| {
        b.iter(|| segment_coo.run(black_box(&src), &ids).unwrap())
    });
    group.bench_function("EmbeddingBag", |b| {
        b.iter(|| {
            embedding_bag
                .run(black_box(&square), &bag_rows, Some((&offsets).into()), None)
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_tiny_calls);
criterion_main!(benches);
