//! Fuzzing the CLI's file layer: the `.npy` reader on arbitrary bytes, the
//! `.npy` writer on arbitrary tensors, and a load → save → load round trip
//! through real files with the atomic writer.

use std::path::Path;

use arbitrary::{Result, Unstructured};
use gatherscatter::{f16, Complex32, Complex64, Tensor};
use gsx::{budget, files, npy};

/// The budget the file targets run under: hostile size claims must be
/// refused by the checks, not by the machine.
const FUZZ_BUDGET: u64 = 64 << 20;

fn same(a: &Tensor, b: &Tensor) -> bool {
    // Debug compares NaN payload-free and keeps -0.0 apart from 0.0.
    a.shape() == b.shape() && format!("{a:?}") == format!("{b:?}")
}

/// Arbitrary bytes as a `.npy` file: an error or a tensor, never a panic;
/// a tensor read must write back to bytes that read as the same tensor.
pub fn fuzz_npy_reader(data: &[u8]) {
    budget::set_budget(FUZZ_BUDGET);
    let path = Path::new("fuzz.npy");
    let Ok(tensor) = npy::read_from(&mut &data[..], data.len() as u64, path) else {
        return;
    };
    let bytes = npy::encode(&tensor).expect("a tensor read from .npy can be written as .npy");
    let back = npy::read_from(&mut bytes.as_slice(), bytes.len() as u64, path)
        .expect("what the writer wrote reads back");
    assert!(same(&tensor, &back), "{tensor:?} != {back:?}");
}

/// A small tensor of one of the dtypes `.npy` holds, from fuzz input.
fn tensor(u: &mut Unstructured) -> Result<Tensor> {
    let rank = u.int_in_range(0..=3)?;
    let shape: Vec<usize> = (0..rank)
        .map(|_| u.int_in_range(0..=4))
        .collect::<Result<_>>()?;
    let n: usize = shape.iter().product();
    macro_rules! values {
        ($t:ty) => {
            Tensor::new(
                shape,
                (0..n)
                    .map(|_| u.arbitrary::<$t>())
                    .collect::<Result<Vec<_>>>()?,
            )
        };
    }
    let t = match u.int_in_range(0..=14)? {
        0 => values!(bool),
        1 => values!(i8),
        2 => values!(i16),
        3 => values!(i32),
        4 => values!(i64),
        5 => values!(u8),
        6 => values!(u16),
        7 => values!(u32),
        8 => values!(u64),
        9 => Tensor::new(
            shape,
            (0..n)
                .map(|_| Ok(f16::from_bits(u.arbitrary()?)))
                .collect::<Result<Vec<_>>>()?,
        ),
        10 => values!(f32),
        11 => values!(f64),
        12 => Tensor::new(
            shape,
            (0..n)
                .map(|_| Ok(Complex32::new(u.arbitrary()?, u.arbitrary()?)))
                .collect::<Result<Vec<_>>>()?,
        ),
        13 => Tensor::new(
            shape,
            (0..n)
                .map(|_| Ok(Complex64::new(u.arbitrary()?, u.arbitrary()?)))
                .collect::<Result<Vec<_>>>()?,
        ),
        // numpy's U type ends a string at its first NUL: none inside.
        _ => Tensor::new(
            shape,
            (0..n)
                .map(|_| Ok(u.arbitrary::<String>()?.replace('\0', "")))
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    Ok(t.expect("the shape's count is the values' count"))
}

/// Arbitrary tensors through the `.npy` writer and back.
pub fn fuzz_npy_writer(data: &[u8]) {
    budget::set_budget(FUZZ_BUDGET);
    let Ok(t) = tensor(&mut Unstructured::new(data)) else {
        return;
    };
    let bytes = npy::encode(&t).expect("every dtype here has a .npy form");
    let back = npy::read_from(
        &mut bytes.as_slice(),
        bytes.len() as u64,
        Path::new("w.npy"),
    )
    .expect("what the writer wrote reads back");
    assert!(same(&t, &back), "{t:?} != {back:?}");
}

/// Arbitrary bytes as a `.npy` or `.pb` file on disk: loaded, saved to the
/// other format's file and to its own, and loaded again; the directory
/// holds exactly the files named, never a temporary one.
pub fn fuzz_file_layer(data: &[u8]) {
    budget::set_budget(FUZZ_BUDGET);
    let Some((&choice, bytes)) = data.split_first() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let input = dir
        .path()
        .join(if choice & 1 == 0 { "in.npy" } else { "in.pb" });
    std::fs::write(&input, bytes).expect("written");
    let Ok(tensor) = files::load(&input) else {
        return;
    };
    let inputs = [input.clone()];
    // Writing over the input itself is refused and changes nothing.
    assert!(files::save(&input, &tensor, "t", &inputs).is_err());
    assert_eq!(std::fs::read(&input).expect("still there"), bytes);
    for name in ["out.npy", "out.pb"] {
        let out = dir.path().join(name);
        match files::save(&out, &tensor, "t", &inputs) {
            Ok(()) => {
                let back = files::load(&out).expect("a saved file loads");
                assert!(same(&tensor, &back), "{name}: {tensor:?} != {back:?}");
            }
            // bfloat16 has no .npy form; nothing may be left behind.
            Err(e) => assert!(!out.exists(), "{name}: {e}"),
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("listed")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
