//! Runs every operator example of the seed documents, prints inputs and
//! outputs, and checks each output against the value the document gives.
//! Exits non-zero if any differs.

use gatherscatter::{
    Element, Gather, GatherElements, GatherND, Profile, Reduction, Result, ScatterElements,
    ScatterND, Tensor,
};

type Op = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

struct Example {
    source: &'static str,
    inputs: Vec<(&'static str, Tensor)>,
    op: Op,
    expected: Tensor,
}

fn t<T: Element>(shape: &[usize], data: Vec<T>) -> Tensor {
    Tensor::new(shape.to_vec(), data).expect("example tensors are well formed")
}

fn gather(op: Gather) -> Op {
    Box::new(move |x| op.run(&x[0], &x[1]))
}

fn gather_elements(op: GatherElements) -> Op {
    Box::new(move |x| op.run(&x[0], &x[1]))
}

fn scatter_elements(op: ScatterElements) -> Op {
    Box::new(move |x| op.run(&x[0], &x[1], &x[2]))
}

fn directml(level: &str) -> Profile {
    Profile::DirectMl {
        level: level.parse().expect("valid feature level"),
    }
}

fn examples() -> Vec<Example> {
    let onnx = |opset| Profile::Onnx { opset };
    let one_to_nine: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    vec![
        Example {
            source: "ONNX Gather-13, axis = 0 (Gather-1 Example 1)",
            inputs: vec![
                ("data", t(&[3, 2], vec![1.0f32, 1.2, 2.3, 3.4, 4.5, 5.7])),
                ("indices", t(&[2, 2], vec![0i64, 1, 1, 2])),
            ],
            op: gather(Gather::new(0).profile(onnx(13))),
            expected: t(&[2, 2, 2], vec![1.0f32, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7]),
        },
        Example {
            source: "ONNX Gather-13, axis = 1 (Gather-1 Example 2)",
            inputs: vec![
                (
                    "data",
                    t(
                        &[3, 3],
                        vec![1.0f32, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9],
                    ),
                ),
                ("indices", t(&[1, 2], vec![0i64, 2])),
            ],
            op: gather(Gather::new(1).profile(onnx(13))),
            expected: t(&[3, 1, 2], vec![1.0f32, 1.9, 2.3, 3.9, 4.5, 5.9]),
        },
        Example {
            source: "ONNX Gather-13 test_gather_negative_indices",
            inputs: vec![
                ("data", t(&[10], (0..10).map(|v| v as f32).collect())),
                ("indices", t(&[3], vec![0i64, -9, -10])),
            ],
            op: gather(Gather::new(0).profile(onnx(13))),
            expected: t(&[3], vec![0.0f32, 1.0, 0.0]),
        },
        Example {
            source: "MindSpore Tensor.gather(input_indices, axis=1, batch_dims=1)",
            inputs: vec![
                ("input_params", t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6])),
                ("input_indices", t(&[2, 2], vec![2i32, 0, 1, 1])),
            ],
            op: gather(Gather::new(1).batch_dims(1).profile(Profile::MindSpore)),
            expected: t(&[2, 2], vec![3i32, 1, 5, 5]),
        },
        Example {
            source: "ONNX GatherElements-13 Example 1",
            inputs: vec![
                ("data", t(&[2, 2], vec![1i64, 2, 3, 4])),
                ("indices", t(&[2, 2], vec![0i64, 0, 1, 0])),
            ],
            op: gather_elements(GatherElements::new(1).profile(onnx(13))),
            expected: t(&[2, 2], vec![1i64, 1, 4, 3]),
        },
        Example {
            source: "ONNX GatherElements-13 Example 2",
            inputs: vec![
                ("data", t(&[3, 3], (1..=9).collect::<Vec<i64>>())),
                ("indices", t(&[2, 3], vec![1i64, 2, 0, 2, 0, 0])),
            ],
            op: gather_elements(GatherElements::new(0).profile(onnx(13))),
            expected: t(&[2, 3], vec![4i64, 8, 3, 7, 2, 3]),
        },
        Example {
            source: "DirectML GatherElements, UINT32 indices, feature level 4.1",
            inputs: vec![
                ("InputTensor", t(&[3, 3], one_to_nine)),
                ("IndicesTensor", t(&[2, 3], vec![1u32, 2, 0, 2, 0, 0])),
            ],
            op: gather_elements(GatherElements::new(0).profile(directml("4.1"))),
            expected: t(&[2, 3], vec![4.0f32, 8.0, 3.0, 7.0, 2.0, 3.0]),
        },
        Example {
            source: "MindSpore Tensor.gather(dim=1, index), negative index",
            inputs: vec![
                ("input", t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6])),
                ("index", t(&[2, 2], vec![-1i32, 0, 1, -3])),
            ],
            op: gather_elements(GatherElements::new(1).profile(Profile::MindSpore)),
            expected: t(&[2, 2], vec![3i32, 1, 5, 4]),
        },
        Example {
            source: "ONNX ScatterElements-16 Example 1 (scatter_elements_without_axis)",
            inputs: vec![
                ("data", t(&[3, 3], vec![0.0f32; 9])),
                ("indices", t(&[2, 3], vec![1i64, 0, 2, 0, 2, 1])),
                ("updates", t(&[2, 3], vec![1.0f32, 1.1, 1.2, 2.0, 2.1, 2.2])),
            ],
            op: scatter_elements(ScatterElements::new(0).profile(onnx(16))),
            expected: t(
                &[3, 3],
                vec![2.0f32, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2],
            ),
        },
        Example {
            source: "ONNX ScatterElements-16 Example 2 (scatter_elements_with_axis)",
            inputs: vec![
                ("data", t(&[1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])),
                ("indices", t(&[1, 2], vec![1i64, 3])),
                ("updates", t(&[1, 2], vec![1.1f32, 2.1])),
            ],
            op: scatter_elements(ScatterElements::new(1).profile(onnx(16))),
            expected: t(&[1, 5], vec![1.0f32, 1.1, 3.0, 2.1, 5.0]),
        },
        Example {
            source: "ONNX ScatterElements-16 scatter_elements_with_negative_indices",
            inputs: vec![
                ("data", t(&[1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])),
                ("indices", t(&[1, 2], vec![1i64, -3])),
                ("updates", t(&[1, 2], vec![1.1f32, 2.1])),
            ],
            op: scatter_elements(ScatterElements::new(1).profile(onnx(16))),
            expected: t(&[1, 5], vec![1.0f32, 1.1, 2.1, 4.0, 5.0]),
        },
        Example {
            source: "ONNX ScatterElements-16 scatter_elements_with_duplicate_indices (add)",
            inputs: vec![
                ("data", t(&[1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0])),
                ("indices", t(&[1, 2], vec![1i64, 1])),
                ("updates", t(&[1, 2], vec![1.1f32, 2.1])),
            ],
            op: scatter_elements(
                ScatterElements::new(1)
                    .reduction(Reduction::Add)
                    .profile(onnx(16)),
            ),
            expected: t(&[1, 5], vec![1.0f32, 5.2, 3.0, 4.0, 5.0]),
        },
        Example {
            source: "ONNX GatherND-13 Example 5 (batch_dims = 1)",
            inputs: vec![
                ("data", t(&[2, 2, 2], (0..8).collect::<Vec<i32>>())),
                ("indices", t(&[2, 1], vec![1i64, 0])),
            ],
            op: Box::new(move |x| {
                GatherND::new()
                    .batch_dims(1)
                    .profile(onnx(13))
                    .run(&x[0], &x[1])
            }),
            expected: t(&[2, 2], vec![2i32, 3, 4, 5]),
        },
        Example {
            source: "ONNX ScatterND-18 Example 1",
            inputs: vec![
                ("data", t(&[8], (1..=8).collect::<Vec<i64>>())),
                ("indices", t(&[4, 1], vec![4i64, 3, 1, 7])),
                ("updates", t(&[4], vec![9i64, 10, 11, 12])),
            ],
            op: Box::new(move |x| ScatterND::new().profile(onnx(18)).run(&x[0], &x[1], &x[2])),
            expected: t(&[8], vec![1i64, 11, 3, 10, 9, 6, 7, 12]),
        },
    ]
}

fn main() {
    let examples = examples();
    let mut failed = 0;
    for example in &examples {
        println!("== {}", example.source);
        for (name, tensor) in &example.inputs {
            println!(
                "  {name:<14} {:?} {}: {tensor}",
                tensor.shape(),
                tensor.dtype()
            );
        }
        let inputs: Vec<Tensor> = example.inputs.iter().map(|(_, t)| t.clone()).collect();
        match (example.op)(&inputs) {
            Ok(out) if out == example.expected => {
                println!(
                    "  {:<14} {:?} {}: {out}   ok",
                    "output",
                    out.shape(),
                    out.dtype()
                )
            }
            Ok(out) => {
                failed += 1;
                println!(
                    "  output {out} differs from the document's {}   FAILED",
                    example.expected
                );
            }
            Err(e) => {
                failed += 1;
                println!("  error [{}]: {e}   FAILED", e.kind());
            }
        }
    }
    println!("{} passed, {failed} failed", examples.len() - failed);
    if failed > 0 {
        std::process::exit(1);
    }
}
