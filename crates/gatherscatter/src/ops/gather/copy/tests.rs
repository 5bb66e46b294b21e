use super::*;
use crate::mem::cpu::last_level_cache_bytes;
use crate::mem::knobs::{self, Stores, Tuning, WordGather};
use crate::mem::stream::streaming_min_bytes;
use crate::Complex64;
use crate::{Gather, Tensor};

/// `out[a, i, j] = data[a, indices[i] (+ size if negative), j]` for data
/// `[outer, size, inner]` and 1-D indices.
fn reference<T: Clone>(data: &[T], [outer, size, inner]: [usize; 3], indices: &[i64]) -> Vec<T> {
    let mut out = Vec::new();
    for a in 0..outer {
        for &v in indices {
            let i = if v < 0 { v + size as i64 } else { v } as usize;
            out.extend_from_slice(&data[(a * size + i) * inner..][..inner]);
        }
    }
    out
}

/// The shape check of a caller's buffer compares the output shape's
/// three parts without joining them: every near miss is refused, with
/// the expected shape in the message.
#[test]
fn a_caller_buffer_must_have_exactly_the_output_shape() {
    let data = crate::TypedTensor::new(vec![2, 3, 4], (0..24).collect::<Vec<i32>>()).unwrap();
    let indices = crate::TypedTensor::new(vec![2, 2], vec![0i64, 2, -1, 1]).unwrap();
    let batched = crate::TypedTensor::new(vec![2, 5], vec![0i64; 10]).unwrap();
    let cases = [
        (Gather::new(1), &indices, vec![2, 2, 2, 4]),
        (Gather::new(1).batch_dims(1), &batched, vec![2, 5, 4]),
        (Gather::new(-1), &indices, vec![2, 3, 2, 2]),
    ];
    for (op, indices, expected) in cases {
        let n: usize = expected.iter().product();
        let mut out = crate::TypedTensor::new(expected.clone(), vec![0i32; n]).unwrap();
        op.run_typed_into(data.view(), indices.view(), &mut out)
            .unwrap();
        let mut near_misses = vec![
            expected[..expected.len() - 1].to_vec(),
            [expected.as_slice(), &[1]].concat(),
            [&[1], expected.as_slice()].concat(),
            vec![n],
            vec![],
        ];
        for d in 0..expected.len() {
            let mut wrong = expected.clone();
            wrong[d] += 1;
            near_misses.push(wrong);
        }
        for wrong in near_misses {
            let len = wrong.iter().product();
            let mut out = crate::TypedTensor::new(wrong.clone(), vec![0i32; len]).unwrap();
            let err = op
                .run_typed_into(data.view(), indices.view(), &mut out)
                .unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::ShapeMismatch, "{wrong:?}");
            assert!(err.to_string().contains(&format!("{expected:?}")), "{err}");
            let mut dynamic = Tensor::from(out);
            let err = op
                .run_into(data.view(), indices.view(), &mut dynamic)
                .unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::ShapeMismatch, "{wrong:?}");
        }
    }
}

fn check<T: Element + PartialEq + std::fmt::Debug>(
    shape: [usize; 3],
    count: usize,
    value: impl Fn(usize) -> T,
) {
    let data: Vec<T> = (0..shape.iter().product()).map(&value).collect();
    let size = shape[1] as i64;
    // Every position, negative half the time, in a scrambled order.
    let indices: Vec<i64> = (0..count as i64)
        .map(|k| (k * 7 + 3) % size - (k % 2) * size)
        .collect();
    let typed_data = TypedTensor::new(shape.to_vec(), data.clone()).unwrap();
    let typed_indices = TypedTensor::new(vec![count], indices.clone()).unwrap();
    let out = Gather::new(1)
        .run_typed(typed_data.view(), typed_indices.view())
        .unwrap();
    let expected = reference(&data, shape, &indices);
    assert_eq!(out.data(), expected, "{shape:?}, {count} indices");
    // A caller's buffer (the initialised slots' copy), filled first with
    // a value the data does not hold where the type allows one.
    let stale = value(data.len() + 1);
    let mut into = TypedTensor::new(out.shape().to_vec(), vec![stale; expected.len()]).unwrap();
    Gather::new(1)
        .run_typed_into(typed_data.view(), typed_indices.view(), &mut into)
        .unwrap();
    assert_eq!(into.data(), expected, "into, {shape:?}, {count} indices");
}

#[test]
fn fresh_and_caller_outputs_of_every_block_length_are_written_in_full() {
    // The fixed-length loops (1, 2, 3, 4, 8, 16) and the slice loop.
    for inner in [1, 2, 3, 4, 5, 8, 16, 33] {
        check([3, 7, inner], 9, |k| k as f32);
    }
    check([2, 5, 4], 6, |k| k as u8);
    check([2, 5, 3], 6, |k| k % 3 == 0);
    check([2, 5, 1], 6, |k| Complex64::new(k as f64, -1.0));
    check([2, 5, 2], 6, |k| k.to_string());
    // One-element blocks past the small path (more than 256 outputs),
    // where words of up to 4 bytes are gathered in groups: runs of 37
    // leave a part group at each slab's end.
    check([9, 5, 1], 37, |k| k as u8);
    check([9, 5, 1], 37, |k| k % 3 == 0);
    check([9, 5, 1], 37, |k| k as i16 - 20);
    check([9, 5, 1], 37, |k| k as f32);
    check([9, 5, 1], 37, |k| k as f64);
    check([9, 5, 1], 37, |k| k.to_string());
}

/// One-element and short blocks under each `word_gather`: the vector
/// loops (the windows' byte permutes for blocks of up to 16 bytes where
/// the CPU has AVX-512 VBMI, the AVX2 gathers for one-element blocks of 4-
/// and 8-byte words; under Miri, when compiled in) write what the scalar
/// loops write, with a part group at
/// each end of a slab's run, a last window group of fewer slabs, pixels of
/// three channels and, in the larger cases, runs that start where a
/// task's share begins.
#[test]
fn gather_vector_elements_write_what_the_scalar_loop_writes() {
    let mut cases = vec![
        ([9, 5, 1], 37),
        ([3, 300, 1], 300),
        ([40, 17, 1], 13),
        ([9, 5, 3], 37),
    ];
    if !cfg!(miri) {
        cases.extend([
            ([64, 1000, 1], 1021),
            ([200, 3, 1], 3),
            ([21, 256, 1], 300),
            ([30, 16, 2], 40),
            ([100, 4, 4], 5),
        ]);
    }
    // Under Miri, `auto` is the scalar loop and one dtype a word width
    // does: the lane's time is CI's.
    let word_gathers: &[WordGather] = if cfg!(miri) {
        &[WordGather::Scalar, WordGather::Vector]
    } else {
        &[WordGather::Scalar, WordGather::Vector, WordGather::Auto]
    };
    for &word_gather in word_gathers {
        knobs::scoped(Tuning::AUTO.with_word_gather(word_gather), || {
            for &(shape, count) in &cases {
                check(shape, count, |k| k as u8);
                check(shape, count, |k| (k as i16).wrapping_sub(300));
                check(shape, count, |k| k as f32);
                check(shape, count, |k| k as f64);
                check(shape, count, |k| Complex64::new(k as f64, -(k as f64)));
                if !cfg!(miri) {
                    check(shape, count, |k| k as i32 - 50);
                    check(shape, count, |k| u64::MAX - k as u64);
                }
            }
        });
    }
}

/// Under `auto`, outputs from 1 MiB up to the streaming threshold, and
/// blocks of 16 KiB or more past it whose source fits in the last-level
/// cache with the output, are the calls whose stores are timed (ordinary
/// stores first); every other call, and every forced knob, follows the
/// fixed rule.
#[test]
fn auto_times_the_stores_between_small_outputs_and_the_threshold_and_of_long_blocks_in_cache() {
    use crate::index::AxisRule;
    use crate::mem::knobs::Tuning;
    let (threshold, cache) = (streaming_min_bytes(), last_level_cache_bytes());
    // Four rows of 16 KiB.
    let data = TypedTensor::new(vec![4, 4096], vec![0u32; 4 * 4096]).unwrap();
    let plan = |inner: usize, out_bytes: usize| GatherPlan {
        outer: 1,
        axis_size: 4,
        inner,
        indices_per_batch: out_bytes / 4 / inner,
        output_parts: [&[], &[], &[]],
        output_len: out_bytes / 4,
        rule: AxisRule {
            axis: 0,
            size: 4,
            negative_allowed: true,
        },
    };
    let choose = |stores, inner, out_bytes| {
        knobs::scoped(Tuning::AUTO.with_stores(stores), || {
            Writing::choose(data.view(), &plan(inner, out_bytes))
        })
    };
    let fits = threshold + (64 << 10) <= cache;
    let timed = [
        (4096, threshold, fits),
        (1024, threshold - (64 << 10), true),
        (4096, 1 << 20, true),
    ];
    for (inner, out_bytes, measured) in timed {
        let writing = choose(Stores::Auto, inner, out_bytes);
        let stores = &writing.stores;
        let is_timed = stores.is_timed();
        assert_eq!(is_timed, measured && !cfg!(miri), "{inner} {out_bytes}");
        if is_timed {
            assert_eq!(writing.streamed_block_bytes, None, "ordinary stores first");
        }
    }
    let fixed = [
        (Stores::Auto, 1024, threshold, Some(4096)),
        (Stores::Auto, 4096, cache, Some(16 << 10)),
        (Stores::Auto, 4096, (1 << 20) - (64 << 10), None),
        (Stores::Cached, 4096, threshold, None),
        (Stores::Streaming, 4096, threshold, Some(16 << 10)),
    ];
    for (stores, inner, out_bytes, streamed) in fixed {
        let writing = choose(stores, inner, out_bytes);
        let timed = writing.stores.is_timed();
        assert!(!timed, "{stores:?} {inner} {out_bytes}");
        assert_eq!(writing.streamed_block_bytes, streamed, "{stores:?} {inner}");
    }
}
