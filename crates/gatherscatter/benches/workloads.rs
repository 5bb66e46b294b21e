//! The ten workloads of `shared/bench/workloads.py` (W1–W10), in process,
//! into a caller's buffer, on 1 and 2 threads, each beside a plain copy of
//! the same output bytes measured in the same run: compare the throughput
//! lines (GB/s of output) of `Wn/op/..` and `Wn/copy/..`. `cargo bench -p
//! gatherscatter --bench workloads -- W4/` runs one workload. The peer comparison (numpy,
//! onnxruntime, PyTorch) is `scripts/bench_peers.sh`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gatherscatter::{Gather, GatherElements, Reduction, ScatterElements, Tensor};
use half::f16;
use std::cell::RefCell;
use std::time::Duration;

/// Deterministic pseudo-random values in `[0, modulo)` (SplitMix64).
fn random_indices(len: usize, modulo: usize, seed: u64) -> Vec<i64> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % modulo as u64) as i64
        })
        .collect()
}

fn floats(len: usize) -> Vec<f32> {
    (0..len).map(|i| (i % 1000) as f32 * 0.25).collect()
}

/// Each row of `rows` a shuffled `0..len` (W6: every target written once).
fn row_permutations(rows: usize, len: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(rows * len);
    for r in 0..rows {
        let keys = random_indices(len, usize::MAX >> 1, r as u64);
        let mut row: Vec<i64> = (0..len as i64).collect();
        row.sort_by_key(|&i| keys[i as usize]);
        out.extend(row);
    }
    out
}

enum Op {
    Gather(Gather),
    GatherElements(GatherElements),
    ScatterElements(ScatterElements, Tensor),
}

struct Workload {
    op: Op,
    data: Tensor,
    indices: Tensor,
}

impl Workload {
    fn run_into(&self, out: &mut Tensor) {
        let done = match &self.op {
            Op::Gather(op) => op.run_into(&self.data, &self.indices, out),
            Op::GatherElements(op) => op.run_into(&self.data, &self.indices, out),
            Op::ScatterElements(op, updates) => {
                op.run_into(&self.data, &self.indices, updates, out)
            }
        };
        done.expect("workload inputs are valid");
    }

    fn fresh_output(&self) -> Tensor {
        match &self.op {
            Op::Gather(op) => op.run(&self.data, &self.indices),
            Op::GatherElements(op) => op.run(&self.data, &self.indices),
            Op::ScatterElements(op, updates) => op.run(&self.data, &self.indices, updates),
        }
        .expect("workload inputs are valid")
    }
}

fn gather(axis: i64, data: Tensor, indices: Tensor) -> Workload {
    Workload {
        op: Op::Gather(Gather::new(axis)),
        data,
        indices,
    }
}

fn tensor<T: gatherscatter::Element>(shape: &[usize], values: Vec<T>) -> Tensor {
    Tensor::new(shape.to_vec(), values).expect("shape matches")
}

/// One workload at a time: W7's inputs alone are 768 MiB.
fn workload(name: &str) -> Workload {
    let rows = |n: usize| tensor(&[n], random_indices(n, 65536, 1));
    match name {
        "W1" => gather(0, tensor(&[65536, 256], floats(1 << 24)), rows(65536)),
        "W2" => gather(
            1,
            tensor(&[512, 4096, 4], floats(1 << 23)),
            tensor(&[2048], random_indices(2048, 4096, 2)),
        ),
        "W3" => gather(
            1,
            tensor(&[4096, 4096], floats(1 << 24)),
            tensor(&[1024], random_indices(1024, 4096, 3)),
        ),
        "W4" | "W5" => Workload {
            op: Op::GatherElements(GatherElements::new(if name == "W4" { 1 } else { 0 })),
            data: tensor(&[4096, 4096], floats(1 << 24)),
            indices: tensor(&[4096, 4096], random_indices(1 << 24, 4096, 4)),
        },
        "W6" => Workload {
            op: Op::ScatterElements(
                ScatterElements::new(1),
                tensor(&[4096, 4096], floats(1 << 24)),
            ),
            data: tensor(&[4096, 4096], floats(1 << 24)),
            indices: tensor(&[4096, 4096], row_permutations(4096, 4096)),
        },
        "W7" => Workload {
            op: Op::ScatterElements(
                ScatterElements::new(0).reduction(Reduction::Add),
                tensor(&[16384, 4096], floats(1 << 26)),
            ),
            data: tensor(&[1024, 4096], floats(1 << 22)),
            indices: tensor(&[16384, 4096], random_indices(1 << 26, 1024, 7)),
        },
        "W8" => {
            let data: Vec<f16> = floats(1 << 24).into_iter().map(f16::from_f32).collect();
            gather(0, tensor(&[65536, 256], data), rows(65536))
        }
        "W9" => gather(
            0,
            tensor(&[16, 16], floats(256)),
            tensor(&[4], vec![3i64, 0, 15, 7]),
        ),
        "W10" => {
            let idx: Vec<i32> = random_indices(65536, 65536, 1)
                .into_iter()
                .map(|v| v as i32)
                .collect();
            gather(
                0,
                tensor(&[65536, 256], floats(1 << 24)),
                tensor(&[65536], idx),
            )
        }
        other => unreachable!("no workload {other}"),
    }
}

/// A workload's inputs and output buffer, plus a copy source and target of
/// the output's size. Built when the first of the group's benches runs, so a
/// filtered `cargo bench` never builds what it skips.
struct Prepared {
    workload: Workload,
    out: Tensor,
    source: Vec<u8>,
    target: Vec<u8>,
}

fn prepare(name: &str) -> Prepared {
    let workload = workload(name);
    let out = workload.fresh_output();
    let word = if name == "W8" { 2 } else { 4 };
    let bytes = out.len() * word;
    Prepared {
        workload,
        out,
        source: vec![1; bytes],
        target: vec![0; bytes],
    }
}

/// Output bytes per call (the throughput unit).
fn output_bytes(name: &str) -> u64 {
    let elements: u64 = match name {
        "W1" | "W8" | "W10" => 65536 * 256,
        "W2" => 512 * 2048 * 4,
        "W3" => 4096 * 1024,
        "W4" | "W5" | "W6" => 4096 * 4096,
        "W7" => 1024 * 4096,
        _ => 4 * 16,
    };
    elements * if name == "W8" { 2 } else { 4 }
}

fn copy_in_chunks(target: &mut [u8], source: &[u8], threads: usize) {
    use rayon::prelude::*;
    let chunk = target.len().div_ceil(threads).max(1);
    target
        .par_chunks_mut(chunk)
        .zip(source.par_chunks(chunk))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

fn bench_workloads(c: &mut Criterion) {
    for name in ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10"] {
        let prepared = RefCell::new(None::<Prepared>);
        let with_prepared = |f: &mut dyn FnMut(&mut Prepared)| {
            let mut slot = prepared.borrow_mut();
            f(slot.get_or_insert_with(|| prepare(name)))
        };
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Bytes(output_bytes(name)));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool");
            group.bench_function(BenchmarkId::new("op", format!("{threads}t")), |b| {
                with_prepared(&mut |p| pool.install(|| b.iter(|| p.workload.run_into(&mut p.out))))
            });
            group.bench_function(BenchmarkId::new("copy", format!("{threads}t")), |b| {
                with_prepared(&mut |p| {
                    pool.install(|| b.iter(|| copy_in_chunks(&mut p.target, &p.source, threads)))
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench_workloads);
criterion_main!(benches);
