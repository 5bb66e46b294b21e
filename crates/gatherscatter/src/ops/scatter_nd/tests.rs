use crate::{Reduction, ScatterND, Tensor};

/// Fresh outputs are not zeroed first: under Miri, a slot the data copy
/// skipped would be read uninitialised by the comparison. ONNX ScatterND
/// example 1 with each reduction, and with no tuples at all.
#[test]
fn fresh_outputs_hold_data_with_the_updates_applied() {
    let data = Tensor::new(vec![8], (1..=8).collect::<Vec<i64>>()).unwrap();
    let indices = Tensor::new(vec![4, 1], vec![4i64, 3, 1, 7]).unwrap();
    let updates = Tensor::new(vec![4], vec![9i64, 10, 11, 12]).unwrap();
    let cases = [
        (Reduction::None, [1, 11, 3, 10, 9, 6, 7, 12]),
        (Reduction::Add, [1, 13, 3, 14, 14, 6, 7, 20]),
        (Reduction::Mul, [1, 22, 3, 40, 45, 6, 7, 96]),
        (Reduction::Max, [1, 11, 3, 10, 9, 6, 7, 12]),
        (Reduction::Min, [1, 2, 3, 4, 5, 6, 7, 8]),
    ];
    for (reduction, expected) in cases {
        let op = ScatterND::new().reduction(reduction);
        let out = op.run(&data, &indices, &updates).unwrap();
        assert_eq!(out.data::<i64>().unwrap(), &expected, "{reduction:?}");
    }
    let none = Tensor::new(vec![0, 1], Vec::<i64>::new()).unwrap();
    let no_updates = Tensor::new(vec![0], Vec::<i64>::new()).unwrap();
    let out = ScatterND::new().run(&data, &none, &no_updates).unwrap();
    assert_eq!(out.data::<i64>().unwrap(), &[1, 2, 3, 4, 5, 6, 7, 8]);
}

/// Forced streaming stores write an overwrite or a reduction as a
/// gather of slices at any size: every byte of the fresh output is
/// written once (Miri would report a byte left out when the comparison
/// reads it), runs of untouched slices come from data, duplicates leave
/// the last update or fold in order.
#[test]
fn outputs_streamed_as_a_gather_of_slices_write_every_byte() {
    let streaming = crate::tuning::Tuning::parse("stores=streaming").unwrap();
    let data = Tensor::new(vec![6, 3], (0..18).collect::<Vec<i16>>()).unwrap();
    let indices = Tensor::new(vec![3, 1], vec![4i64, -5, 4]).unwrap();
    let updates = Tensor::new(vec![3, 3], (100..109).collect::<Vec<i16>>()).unwrap();
    let expected = [
        0, 1, 2, 103, 104, 105, 6, 7, 8, 9, 10, 11, 106, 107, 108, 15, 16, 17,
    ];
    let out = crate::tuning::scoped(streaming, || {
        ScatterND::new().run(&data, &indices, &updates)
    })
    .unwrap();
    assert_eq!(out.data::<i16>().unwrap(), &expected);
    let mut into = Tensor::new(vec![6, 3], vec![-1i16; 18]).unwrap();
    crate::tuning::scoped(streaming, || {
        ScatterND::new().run_into(&data, &indices, &updates, &mut into)
    })
    .unwrap();
    assert_eq!(into.data::<i16>().unwrap(), &expected);
    // Reductions fold each slice from data and its tuples in order.
    let add = ScatterND::new().reduction(Reduction::Add);
    let sums = [
        0, 1, 2, 106, 108, 110, 6, 7, 8, 9, 10, 11, 218, 221, 224, 15, 16, 17,
    ];
    let out = crate::tuning::scoped(streaming, || add.run(&data, &indices, &updates)).unwrap();
    assert_eq!(out.data::<i16>().unwrap(), &sums);
    crate::tuning::scoped(streaming, || {
        add.run_into(&data, &indices, &updates, &mut into)
    })
    .unwrap();
    assert_eq!(into.data::<i16>().unwrap(), &sums);
}
