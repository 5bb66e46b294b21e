//! Runs every operator example of the seed documents, prints inputs and
//! outputs, and checks each output against the value the document gives.
//! Exits non-zero if any differs.

use gatherscatter::{Gather, Profile, Result, Tensor};

struct Example {
    source: &'static str,
    run: fn() -> Result<Tensor>,
    inputs: fn() -> Vec<(&'static str, Tensor)>,
    expected: fn() -> Tensor,
}

fn t<T: gatherscatter::Element>(shape: &[usize], data: Vec<T>) -> Tensor {
    Tensor::new(shape.to_vec(), data).expect("example tensors are well formed")
}

fn gather_example_1_inputs() -> Vec<(&'static str, Tensor)> {
    vec![
        ("data", t(&[3, 2], vec![1.0f32, 1.2, 2.3, 3.4, 4.5, 5.7])),
        ("indices", t(&[2, 2], vec![0i64, 1, 1, 2])),
    ]
}

fn gather_example_2_inputs() -> Vec<(&'static str, Tensor)> {
    vec![
        (
            "data",
            t(
                &[3, 3],
                vec![1.0f32, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9],
            ),
        ),
        ("indices", t(&[1, 2], vec![0i64, 2])),
    ]
}

fn gather_negative_inputs() -> Vec<(&'static str, Tensor)> {
    vec![
        ("data", t(&[10], (0..10).map(|v| v as f32).collect())),
        ("indices", t(&[3], vec![0i64, -9, -10])),
    ]
}

fn mindspore_batch_inputs() -> Vec<(&'static str, Tensor)> {
    vec![
        ("input_params", t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6])),
        ("input_indices", t(&[2, 2], vec![2i32, 0, 1, 1])),
    ]
}

fn run_with(op: Gather, inputs: fn() -> Vec<(&'static str, Tensor)>) -> Result<Tensor> {
    let inputs = inputs();
    op.run(&inputs[0].1, &inputs[1].1)
}

const EXAMPLES: &[Example] = &[
    Example {
        source: "ONNX Gather-13, axis = 0 (Gather-1 Example 1)",
        run: || {
            run_with(
                Gather::new(0).profile(Profile::Onnx { opset: 13 }),
                gather_example_1_inputs,
            )
        },
        inputs: gather_example_1_inputs,
        expected: || t(&[2, 2, 2], vec![1.0f32, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7]),
    },
    Example {
        source: "ONNX Gather-13, axis = 1 (Gather-1 Example 2)",
        run: || {
            run_with(
                Gather::new(1).profile(Profile::Onnx { opset: 13 }),
                gather_example_2_inputs,
            )
        },
        inputs: gather_example_2_inputs,
        expected: || t(&[3, 1, 2], vec![1.0f32, 1.9, 2.3, 3.9, 4.5, 5.9]),
    },
    Example {
        source: "ONNX Gather-13 test_gather_negative_indices",
        run: || {
            run_with(
                Gather::new(0).profile(Profile::Onnx { opset: 13 }),
                gather_negative_inputs,
            )
        },
        inputs: gather_negative_inputs,
        expected: || t(&[3], vec![0.0f32, 1.0, 0.0]),
    },
    Example {
        source: "MindSpore Tensor.gather(input_indices, axis=1, batch_dims=1)",
        run: || {
            run_with(
                Gather::new(1).batch_dims(1).profile(Profile::MindSpore),
                mindspore_batch_inputs,
            )
        },
        inputs: mindspore_batch_inputs,
        expected: || t(&[2, 2], vec![3i32, 1, 5, 5]),
    },
];

fn main() {
    let mut failed = 0;
    for example in EXAMPLES {
        println!("== {}", example.source);
        for (name, tensor) in (example.inputs)() {
            println!(
                "  {name:<14} {:?} {}: {tensor}",
                tensor.shape(),
                tensor.dtype()
            );
        }
        let expected = (example.expected)();
        match (example.run)() {
            Ok(out) if out == expected => {
                println!(
                    "  {:<14} {:?} {}: {out}   ok",
                    "output",
                    out.shape(),
                    out.dtype()
                )
            }
            Ok(out) => {
                failed += 1;
                println!("  output {out} differs from the document's {expected}   FAILED");
            }
            Err(e) => {
                failed += 1;
                println!("  error [{}]: {e}   FAILED", e.kind());
            }
        }
    }
    let passed = EXAMPLES.len() - failed;
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
