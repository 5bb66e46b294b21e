//! How many heap allocations one small call of each op makes (issue #34,
//! item 4): on a small call an allocation costs about as much as the copy
//! (the 2-vCPU Zen 3's 64-element clone, two allocations, ran 38-73 ns),
//! so each op is held to its output's one (its values: an output's shape
//! of up to 8 dims is kept inline) plus what its kernel really needs. A count, unlike a time, does not move with the
//! machine: a planning step that starts allocating fails here.

use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, Reduction, ScatterElements,
    ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, TensorScatter,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

#[path = "common/tiny_inputs.rs"]
mod tiny_inputs;

use tiny_inputs::TinyInputs;

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

#[test]
fn each_small_call_allocates_its_output_and_little_else() {
    let inputs = TinyInputs::new();

    // (op, allocations at most, allocations made)
    let counts = [
        (
            // Its shape as `Tensor::new` was given it, on the heap, and its values.
            "clone (the output alone)",
            2,
            allocations_of(|| inputs.square.clone()),
        ),
        (
            "Gather",
            1,
            allocations_of(|| Gather::new(0).run(&inputs.rows, &inputs.row_ids).unwrap()),
        ),
        (
            "GatherElements",
            1,
            allocations_of(|| {
                GatherElements::new(1)
                    .run(&inputs.square, &inputs.elements)
                    .unwrap()
            }),
        ),
        (
            "ScatterElements",
            1,
            allocations_of(|| {
                ScatterElements::new(1)
                    .run(&inputs.square, &inputs.elements, &inputs.updates)
                    .unwrap()
            }),
        ),
        (
            "ScatterElements add",
            1,
            allocations_of(|| {
                ScatterElements::new(1)
                    .reduction(Reduction::Add)
                    .run(&inputs.square, &inputs.elements, &inputs.updates)
                    .unwrap()
            }),
        ),
        (
            "scatter_reduce mean",
            1,
            allocations_of(|| {
                ScatterReduce::new(1, Aggregate::Mean)
                    .run(&inputs.square, &inputs.elements, &inputs.updates)
                    .unwrap()
            }),
        ),
        // The output alone: up to 16 tuples' offsets are kept inline.
        (
            "GatherND",
            1,
            allocations_of(|| GatherND::new().run(&inputs.square, &inputs.tuples).unwrap()),
        ),
        (
            "ScatterND",
            1,
            allocations_of(|| {
                ScatterND::new()
                    .run(&inputs.square, &inputs.tuples, &inputs.nd_updates)
                    .unwrap()
            }),
        ),
        // The output alone: up to 8 batches' write positions are kept inline.
        (
            "TensorScatter",
            1,
            allocations_of(|| {
                TensorScatter::new()
                    .axis(1)
                    .run(&inputs.cache, &inputs.step, Some((&inputs.at).into()))
                    .unwrap()
            }),
        ),
        // The output alone: a few segment boundaries are kept inline.
        (
            "segment_csr",
            1,
            allocations_of(|| {
                SegmentCsr::new(Aggregate::Sum)
                    .run(&inputs.src, &inputs.indptr)
                    .unwrap()
            }),
        ),
        (
            "segment_coo",
            1,
            allocations_of(|| {
                SegmentCoo::new(Aggregate::Sum)
                    .segments(4)
                    .run(&inputs.src, &inputs.ids)
                    .unwrap()
            }),
        ),
        // The output alone: up to 8 bag bounds are kept inline.
        (
            "embedding_bag",
            1,
            allocations_of(|| {
                EmbeddingBag::new(Aggregate::Sum)
                    .run(
                        &inputs.square,
                        &inputs.bag_rows,
                        Some((&inputs.offsets).into()),
                        None,
                    )
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
