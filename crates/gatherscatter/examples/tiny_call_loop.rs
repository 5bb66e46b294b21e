//! One op's small call (the inputs of `benches/tiny_calls.rs`) run N times
//! in a plain loop, for counting its instructions a call under callgrind,
//! which criterion's harness would swamp:
//!
//! ```text
//! cargo build --release --example tiny_call_loop
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     target/release/examples/tiny_call_loop GatherElements 20000
//! ```
//!
//! The program's total over N is the figure docs/performance.md quotes
//! (start-up adds about 5 instructions a call at N = 20,000). It also
//! prints the time a call, which on a shared VM moves 2x between runs.

use gatherscatter::{
    Aggregate, EmbeddingBag, Gather, GatherElements, GatherND, Reduction, ScatterElements,
    ScatterND, ScatterReduce, SegmentCoo, SegmentCsr, TensorScatter,
};
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

#[path = "../tests/common/tiny_inputs.rs"]
mod tiny_inputs;

const OPS: &str = "copy Gather GatherElements ScatterElements ScatterElements_add \
                   ScatterReduce_mean GatherND ScatterND TensorScatter SegmentCsr SegmentCoo \
                   EmbeddingBag";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(op), Some(Ok(calls))) = (args.first(), args.get(1).map(|n| n.parse::<u32>())) else {
        eprintln!("usage: tiny_call_loop OP CALLS, OP one of: {OPS}");
        return ExitCode::FAILURE;
    };
    let i = tiny_inputs::TinyInputs::new();
    let call: Box<dyn Fn() -> gatherscatter::Result<gatherscatter::Tensor>> = match op.as_str() {
        "copy" => Box::new(|| Ok(black_box(&i.square).clone())),
        "Gather" => Box::new(|| Gather::new(0).run(black_box(&i.rows), &i.row_ids)),
        "GatherElements" => {
            Box::new(|| GatherElements::new(1).run(black_box(&i.square), &i.elements))
        }
        "ScatterElements" => {
            Box::new(|| ScatterElements::new(1).run(black_box(&i.square), &i.elements, &i.updates))
        }
        "ScatterElements_add" => Box::new(|| {
            ScatterElements::new(1).reduction(Reduction::Add).run(
                black_box(&i.square),
                &i.elements,
                &i.updates,
            )
        }),
        "ScatterReduce_mean" => Box::new(|| {
            ScatterReduce::new(1, Aggregate::Mean).run(
                black_box(&i.square),
                &i.elements,
                &i.updates,
            )
        }),
        "GatherND" => Box::new(|| GatherND::new().run(black_box(&i.square), &i.tuples)),
        "ScatterND" => {
            Box::new(|| ScatterND::new().run(black_box(&i.square), &i.tuples, &i.nd_updates))
        }
        "TensorScatter" => Box::new(|| {
            TensorScatter::new()
                .axis(1)
                .run(black_box(&i.cache), &i.step, Some((&i.at).into()))
        }),
        "SegmentCsr" => {
            Box::new(|| SegmentCsr::new(Aggregate::Sum).run(black_box(&i.src), &i.indptr))
        }
        "SegmentCoo" => Box::new(|| {
            SegmentCoo::new(Aggregate::Sum)
                .segments(4)
                .run(black_box(&i.src), &i.ids)
        }),
        "EmbeddingBag" => Box::new(|| {
            EmbeddingBag::new(Aggregate::Sum).run(
                black_box(&i.square),
                &i.bag_rows,
                Some((&i.offsets).into()),
                None,
            )
        }),
        other => {
            eprintln!("unknown op {other}; one of: {OPS}");
            return ExitCode::FAILURE;
        }
    };
    let start = Instant::now();
    for _ in 0..calls {
        if let Err(error) = black_box(call()) {
            eprintln!("{op}: {error}");
            return ExitCode::FAILURE;
        }
    }
    let per_call = start.elapsed().as_nanos() as f64 / f64::from(calls.max(1));
    println!("{op}: {per_call:.1} ns a call over {calls} calls");
    ExitCode::SUCCESS
}
