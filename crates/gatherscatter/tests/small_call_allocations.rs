//! How many heap allocations one small call of each op makes (issue #34,
//! item 4): on a small call an allocation costs about as much as the copy
//! (the 2-vCPU Zen 3's 64-element clone, two allocations, ran 38-73 ns),
//! so each op is held to its output's two (shape and values) plus what
//! its kernel really needs. A count, unlike a time, does not move with the
//! machine: a planning step that starts allocating fails here.

use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, Reduction, ScatterElements,
    ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, Tensor, TensorScatter,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting this thread's allocations (tests run on
/// several threads at once).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the count is not kept while the thread's locals are torn down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// count is a plain thread-local cell that never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `alloc` is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is the system's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as for `dealloc`, and the caller's contract for `realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations made by `call` on this thread (its second run: the first may
/// set up process-wide state once, such as the tuning read from the
/// environment).
fn allocations_of<R>(mut call: impl FnMut() -> R) -> usize {
    drop(call());
    let before = ALLOCATIONS.with(Cell::get);
    let result = call();
    let after = ALLOCATIONS.with(Cell::get);
    drop(result);
    after - before
}

fn tensor<T: gatherscatter::Element>(shape: &[usize], values: Vec<T>) -> Tensor {
    Tensor::new(shape.to_vec(), values).unwrap()
}

fn floats(len: usize) -> Vec<f32> {
    (0..len).map(|i| i as f32 * 0.5).collect()
}

fn indices(len: usize, modulo: usize) -> Vec<i64> {
    (0..len).map(|i| ((i * 5 + 3) % modulo) as i64).collect()
}

#[test]
fn each_small_call_allocates_its_output_and_little_else() {
    // The shapes of `benches/tiny_calls.rs`.
    let rows = tensor(&[16, 16], floats(256));
    let row_ids = tensor(&[4], indices(4, 16));
    let square = tensor(&[8, 8], floats(64));
    let elements = tensor(&[8, 4], indices(32, 8));
    let updates = tensor(&[8, 4], floats(32));
    let tuples = tensor(&[4, 2], indices(8, 8));
    let nd_updates = tensor(&[4], floats(4));
    let cache = tensor(&[1, 8, 4], floats(32));
    let step = tensor(&[1, 1, 4], floats(4));
    let at = tensor(&[1], vec![3i64]);
    let src = tensor(&[32], floats(32));
    let indptr = tensor(&[5], vec![0i64, 8, 16, 24, 32]);
    let ids = tensor(&[32], (0..32).map(|i| i / 8).collect::<Vec<i64>>());
    let bag_rows = tensor(&[8], indices(8, 8));
    let offsets = tensor(&[4], vec![0i64, 2, 4, 6]);

    // (op, allocations at most, allocations made)
    let counts = [
        (
            "clone (the output alone)",
            2,
            allocations_of(|| square.clone()),
        ),
        (
            "Gather",
            2,
            allocations_of(|| Gather::new(0).run(&rows, &row_ids).unwrap()),
        ),
        (
            "GatherElements",
            2,
            allocations_of(|| GatherElements::new(1).run(&square, &elements).unwrap()),
        ),
        (
            "ScatterElements",
            2,
            allocations_of(|| {
                ScatterElements::new(1)
                    .run(&square, &elements, &updates)
                    .unwrap()
            }),
        ),
        (
            "ScatterElements add",
            2,
            allocations_of(|| {
                ScatterElements::new(1)
                    .reduction(Reduction::Add)
                    .run(&square, &elements, &updates)
                    .unwrap()
            }),
        ),
        (
            "scatter_reduce mean",
            2,
            allocations_of(|| {
                ScatterReduce::new(1, Aggregate::Mean)
                    .run(&square, &elements, &updates)
                    .unwrap()
            }),
        ),
        // The output, and the resolved offset of each tuple.
        (
            "GatherND",
            3,
            allocations_of(|| GatherND::new().run(&square, &tuples).unwrap()),
        ),
        (
            "ScatterND",
            3,
            allocations_of(|| ScatterND::new().run(&square, &tuples, &nd_updates).unwrap()),
        ),
        (
            "TensorScatter",
            3,
            allocations_of(|| {
                TensorScatter::new()
                    .axis(1)
                    .run(&cache, &step, Some((&at).into()))
                    .unwrap()
            }),
        ),
        (
            "segment_csr",
            3,
            allocations_of(|| SegmentCsr::new(Aggregate::Sum).run(&src, &indptr).unwrap()),
        ),
        (
            "segment_coo",
            3,
            allocations_of(|| {
                SegmentCoo::new(Aggregate::Sum)
                    .segments(4)
                    .run(&src, &ids)
                    .unwrap()
            }),
        ),
        (
            "embedding_bag",
            3,
            allocations_of(|| {
                EmbeddingBag::new(Aggregate::Sum)
                    .run(&square, &bag_rows, Some((&offsets).into()), None)
                    .unwrap()
            }),
        ),
    ];
    let over: Vec<String> = counts
        .iter()
        .filter(|(_, most, made)| made > most)
        .map(|(op, most, made)| format!("{op}: {made} allocations, at most {most}"))
        .collect();
    assert!(over.is_empty(), "{}", over.join("; "));
}

#[test]
fn the_counter_counts() {
    assert_eq!(allocations_of(|| vec![1u8; 16]), 1);
    assert_eq!(allocations_of(|| ()), 0);
}
