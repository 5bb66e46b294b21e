//! Per-call cost of every operator on tiny inputs (issue #34, item 4: the
//! overhead of each op as low as the tiny Gather's, W9). Every call returns a
//! fresh output and runs on the calling thread, outside the rayon pool, as a
//! Python caller's would. `tiny/copy` clones a tensor of the same size: the
//! allocation every fresh call pays. `cargo bench -p gatherscatter --bench
//! tiny_calls` prints one time per op; `-- tiny/GatherElements` runs one.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, Reduction, ScatterElements,
    ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, TensorScatter,
};
use std::time::Duration;

#[path = "../tests/common/tiny_inputs.rs"]
mod tiny_inputs;

use tiny_inputs::TinyInputs;

fn bench_tiny_calls(c: &mut Criterion) {
    let mut group = c.benchmark_group("tiny");
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30);

    let inputs = TinyInputs::new();

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

    group.bench_function("copy", |b| b.iter(|| black_box(&inputs.square).clone()));
    group.bench_function("Gather", |b| {
        b.iter(|| {
            gather
                .run(black_box(&inputs.rows), &inputs.row_ids)
                .unwrap()
        })
    });
    group.bench_function("GatherElements", |b| {
        b.iter(|| {
            gather_elements
                .run(black_box(&inputs.square), &inputs.elements)
                .unwrap()
        })
    });
    group.bench_function("ScatterElements", |b| {
        b.iter(|| {
            scatter
                .run(black_box(&inputs.square), &inputs.elements, &inputs.updates)
                .unwrap()
        })
    });
    group.bench_function("ScatterElements_add", |b| {
        b.iter(|| {
            scatter_add
                .run(black_box(&inputs.square), &inputs.elements, &inputs.updates)
                .unwrap()
        })
    });
    group.bench_function("ScatterReduce_mean", |b| {
        b.iter(|| {
            scatter_reduce
                .run(black_box(&inputs.square), &inputs.elements, &inputs.updates)
                .unwrap()
        })
    });
    group.bench_function("GatherND", |b| {
        b.iter(|| {
            gather_nd
                .run(black_box(&inputs.square), &inputs.tuples)
                .unwrap()
        })
    });
    group.bench_function("ScatterND", |b| {
        b.iter(|| {
            scatter_nd
                .run(
                    black_box(&inputs.square),
                    &inputs.tuples,
                    &inputs.nd_updates,
                )
                .unwrap()
        })
    });
    group.bench_function("TensorScatter", |b| {
        b.iter(|| {
            tensor_scatter
                .run(
                    black_box(&inputs.cache),
                    &inputs.step,
                    Some((&inputs.at).into()),
                )
                .unwrap()
        })
    });
    group.bench_function("SegmentCsr", |b| {
        b.iter(|| {
            segment_csr
                .run(black_box(&inputs.src), &inputs.indptr)
                .unwrap()
        })
    });
    group.bench_function("SegmentCoo", |b| {
        b.iter(|| {
            segment_coo
                .run(black_box(&inputs.src), &inputs.ids)
                .unwrap()
        })
    });
    group.bench_function("EmbeddingBag", |b| {
        b.iter(|| {
            embedding_bag
                .run(
                    black_box(&inputs.square),
                    &inputs.bag_rows,
                    Some((&inputs.offsets).into()),
                    None,
                )
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_tiny_calls);
criterion_main!(benches);
