use super::*;
use crate::mem::cpu::avx2_available;

/// Slot k holds source block `listed[k]`; the rest is zero.
fn expected_blocks(src: &[u8], block_len: usize, listed: &[usize], len: usize) -> Vec<u8> {
    let mut expected = vec![0u8; len];
    for (slot, &b) in expected.chunks_mut(block_len).zip(listed) {
        if let Some(from) = src.get(b * block_len..(b + 1) * block_len) {
            if from.len() == slot.len() {
                slot.copy_from_slice(from);
            }
        }
    }
    expected
}

#[test]
fn fill_blocks_copies_listed_blocks_and_zeroes_the_rest() {
    let src: Vec<u8> = (0..=255u8).cycle().take(40 * 70).collect();
    let listed = [3usize, 0, 39, 3, 1000, 7];
    for block_len in [1, 16, 17, 64, 70] {
        // Fewer slots than listed, as many, more (zeroed), and a partial tail.
        for len in [0, block_len * 3, block_len * 6, block_len * 8 + 5] {
            let mut dst = vec![0xAAu8; len];
            fill_blocks(&mut dst, &src, block_len, |first| {
                listed.iter().copied().skip(first)
            });
            assert_eq!(
                dst,
                expected_blocks(&src, block_len, &listed, len),
                "{block_len} {len}"
            );
        }
    }
}

/// The raw row loop writes what the slot-order copy writes, for rows a
/// multiple of 32 long from a 32-aligned start and from 16 bytes short
/// of one, and declines every other chunk without writing.
#[test]
fn whole_row_copy_writes_what_slot_order_writes() {
    let Some(avx) = Avx::detect() else {
        // Only a CPU (or, under Miri, a build) without AVX2 gets here.
        assert!(cfg!(miri) || !cfg!(target_arch = "x86_64") || !avx2_available());
        return;
    };
    let src: Vec<u8> = (0..40 * 96).map(|v| (v * 13 % 251) as u8).collect();
    // Out of range (zeroed; 40 is just past the source for 96-byte
    // rows), repeated, and fewer listed than rows.
    let listed = [3usize, 0, 1000, 3, 40, 7];
    let mut backing = vec![0u8; 7 * 512 + 64];
    let aligned_at = backing.as_ptr().addr().wrapping_neg() % 32;
    for row_len in [32, 64, 96, 512] {
        let rows = if cfg!(miri) { 4 } else { 7 };
        let len = rows * row_len;
        let expected = expected_blocks(&src, row_len, &listed, len);
        for (start, fits) in [(0, true), (16, true), (8, false)] {
            for to_l2 in [false, true] {
                let ahead = Lookahead { blocks: 2, to_l2 };
                let chunk = &mut backing[aligned_at + start..][..len];
                chunk.fill(0xAA);
                let rows = listed.iter().copied();
                let took = copy_rows_in_slot_order(avx, chunk, &src, row_len, rows, ahead);
                store_fence();
                assert_eq!(took, fits, "{row_len} bytes from +{start}");
                if fits {
                    assert!(chunk == &expected[..], "{row_len} bytes from +{start}");
                } else {
                    assert!(chunk.iter().all(|&b| b == 0xAA), "{row_len} from +{start}");
                }
            }
        }
        let partial = &mut backing[aligned_at..][..len - 16];
        let rows = listed.iter().copied();
        assert!(!copy_rows_in_slot_order(
            avx,
            partial,
            &src,
            row_len,
            rows,
            Lookahead {
                blocks: 2,
                to_l2: false
            }
        ));
    }
    let rows = listed.iter().copied();
    assert!(!copy_rows_in_slot_order(
        avx,
        &mut backing[..48],
        &src,
        48,
        rows,
        Lookahead {
            blocks: 2,
            to_l2: false
        }
    ));
}

/// Source order groups slots by the bucket of the block they read and
/// keeps slot order inside a bucket; copying in that order writes what
/// slot order writes.
#[test]
fn source_order_copies_the_same_blocks_as_slot_order() {
    let block_len = 4;
    // 9000 source blocks: more than 2^12, so buckets hold several blocks.
    let src: Vec<u8> = (0..9000 * block_len)
        .map(|v| (v * 31 % 251) as u8)
        .collect();
    let listed: Vec<usize> = (0..300).map(|k| (k * 7919 + 13) % 9000).collect();
    let order = source_order(listed.iter().copied(), 300 * block_len, 9000, block_len)
        .expect("every slot is listed");
    let shift = (usize::BITS - 9000usize.leading_zeros()) - SOURCE_ORDER_BUCKET_BITS;
    let entries: Vec<(usize, usize)> = order
        .iter()
        .map(|&e| ((e >> 32) as usize, e as u32 as usize))
        .collect();
    let mut slots: Vec<usize> = entries.iter().map(|&(_, slot)| slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, (0..300).collect::<Vec<_>>());
    for pair in entries.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert_eq!(listed[a.1], a.0);
        assert!(a.0 >> shift < b.0 >> shift || (a.0 >> shift == b.0 >> shift && a.1 < b.1));
    }
    let mut dst = vec![0xAAu8; 300 * block_len];
    let ahead = Lookahead {
        blocks: 3,
        to_l2: true,
    };
    copy_in_source_order(
        &mut dst,
        &src,
        block_len,
        &order,
        ahead,
        copy_nontemporal_16s,
    );
    store_fence();
    assert_eq!(dst, expected_blocks(&src, block_len, &listed, dst.len()));
}

/// Cases source order does not take, left to the slot-order copy.
#[test]
fn source_order_declines_what_it_cannot_order() {
    let listed = [0usize, 5, 2];
    let ok = |chunk_len, src_blocks| {
        source_order(listed.iter().copied(), chunk_len, src_blocks, 8).is_some()
    };
    assert!(ok(24, 6));
    assert!(!ok(20, 6), "a partial slot");
    assert!(!ok(32, 6), "a slot with no listed block");
    assert!(!ok(24, 5), "a block outside the source");
    assert!(!ok(24, 1 << 40), "more source blocks than 32 bits count");
}

/// The automatic rule, in multiples of this CPU's last-level cache
/// (the figures in the messages are for the 32 MiB L3 measured).
#[test]
fn source_order_is_chosen_for_sources_past_the_cache_with_few_tasks_and_long_rows() {
    let auto = |src_len, block_len, tasks| {
        reads_in_source_order(BlockOrder::Auto, src_len, block_len, tasks)
    };
    let min = source_order_min_source_bytes();
    let per_task = beyond_last_level_cache(SOURCE_ORDER_MIN_BYTES_PER_TASK);
    let block_len = SOURCE_ORDER_MIN_BLOCK;
    assert!(auto(min, block_len, 1), "48 MiB, one task");
    assert!(
        !auto(min - 1, block_len, 1),
        "the source within reach of the cache"
    );
    assert!(!auto(min, block_len / 2, 1), "rows too short");
    assert!(auto(2 * per_task + 2, block_len, 2), "over 32 MiB a task");
    assert!(!auto(2 * per_task, block_len, 2), "32 MiB a task");
    if last_level_cache_bytes() == MEASURED_LAST_LEVEL_CACHE {
        assert!(auto(64 << 20, 1024, 1), "W1, one thread");
        assert!(!auto(64 << 20, 1024, 2), "W1, two threads");
        assert!(!auto(32 << 20, 512, 1), "W8's 32 MiB source");
    }
    for (src_len, block_len, tasks) in [(1 << 40, 1 << 20, 64), (1, 1, 1)] {
        assert!(reads_in_source_order(
            BlockOrder::Source,
            src_len,
            block_len,
            tasks
        ));
        assert!(!reads_in_source_order(
            BlockOrder::Output,
            src_len,
            block_len,
            tasks
        ));
    }
}

/// Which copies the order measurements decide: those the fixed rule
/// leaves to output order, from 2 MiB sources into 1 MiB outputs, in
/// rows of 256 bytes or more, under `auto` only.
#[test]
fn copies_below_the_fixed_rule_take_a_measured_order() {
    let auto = BlockOrder::Auto;
    for on_lines in [true, false] {
        let w8 = measured_class(auto, (32 << 20, 32 << 20, 512, 1), on_lines);
        let class = Class::of(32 << 20, 512, 1, on_lines);
        assert_eq!(w8, (!cfg!(miri)).then_some(class));
        let past_the_cache = source_order_min_source_bytes();
        let sizes = [
            (past_the_cache, 32 << 20, 512, 1),
            (32 << 20, 32 << 20, 255, 1),
            ((2 << 20) - 1, 32 << 20, 512, 1),
            (32 << 20, (1 << 20) - 1, 512, 1),
        ];
        for sizes in sizes {
            assert_eq!(measured_class(auto, sizes, on_lines), None);
        }
        for forced in [BlockOrder::Output, BlockOrder::Source] {
            let sizes = (32 << 20, 32 << 20, 512, 1);
            assert_eq!(measured_class(forced, sizes, on_lines), None);
        }
    }
}

/// Output order settles its prefetch level before source order is timed,
/// so that the order compares output order at its better level; the calls
/// that time the level count for the order too, so both are settled after
/// three runs of calls (a class no other test uses: 8 KiB rows from a
/// 4 MiB source, on one thread).
#[cfg_attr(miri, ignore = "Miri cannot time")]
#[test]
fn output_order_settles_its_prefetch_level_before_source_order_is_timed() {
    use crate::mem::measured::CALLS_EACH;
    let block_len = 8 << 10;
    let src = vec![7u8; 4 << 20];
    let blocks = (1 << 20) / block_len;
    let listed: Vec<usize> = (0..blocks)
        .map(|k| (k * 37) % (src.len() / block_len))
        .collect();
    let mut dst = vec![0u8; blocks * block_len];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let order = Class::of(
        src.len(),
        block_len,
        1,
        rows_on_line_boundaries(&dst, block_len),
    );
    let level = measured_prefetch::Class::of(src.len(), block_len, 1, false);
    pool.install(|| {
        for call in 0..3 * CALLS_EACH {
            fill_blocks(&mut dst, &src, block_len, |first| {
                listed.iter().copied().skip(first)
            });
            let [output_calls, source_calls] = measured_order::calls(order);
            assert_eq!(output_calls, (call + 1).min(2 * CALLS_EACH));
            if !measured_prefetch::settled(level) {
                assert_eq!(source_calls, 0);
            }
        }
    });
    assert!(measured_prefetch::settled(level));
    assert!(measured_order::settled(order));
    assert_eq!(dst, expected_blocks(&src, block_len, &listed, dst.len()));
}

/// A copy into rows on cache-line boundaries and one into rows 16 bytes
/// past them time different classes of the order measurement (16 KiB rows
/// from an 8 MiB source, on one thread, a class no other test uses).
#[cfg_attr(miri, ignore = "Miri cannot time")]
#[test]
fn rows_on_and_across_line_boundaries_are_timed_apart() {
    let block_len = 16 << 10;
    let src = vec![3u8; 8 << 20];
    let blocks = (1 << 20) / block_len;
    let listed: Vec<usize> = (0..blocks)
        .map(|k| (k * 101) % (src.len() / block_len))
        .collect();
    let len = blocks * block_len;
    let mut buffer = vec![0u8; len + 2 * LINE];
    let on_lines = buffer.as_ptr().addr().next_multiple_of(LINE) - buffer.as_ptr().addr();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let on = Class::of(src.len(), block_len, 1, true);
    let across = Class::of(src.len(), block_len, 1, false);
    for (start, timed, untimed) in [(on_lines, on, across), (on_lines + 16, across, on)] {
        let before = measured_order::calls(untimed);
        let dst = &mut buffer[start..start + len];
        assert_eq!(rows_on_line_boundaries(dst, block_len), start == on_lines);
        pool.install(|| {
            fill_blocks(dst, &src, block_len, |first| {
                listed.iter().copied().skip(first)
            })
        });
        assert_eq!(measured_order::calls(timed)[0], 1);
        assert_eq!(measured_order::calls(untimed), before);
        assert_eq!(dst, expected_blocks(&src, block_len, &listed, len));
    }
}

/// Both orders, forced, on a small source (the automatic rule takes
/// source order only past the cache): on the calling thread (under
/// Miri too), and split across pools of 1-3 threads.
#[test]
fn fill_blocks_in_source_order_matches_slot_order() {
    let block_len = 48;
    let src_blocks = 700;
    let src: Vec<u8> = (0..src_blocks * block_len)
        .map(|v| (v % 253) as u8)
        .collect();
    let count = if cfg!(miri) { 300 } else { 8_000 };
    let listed: Vec<usize> = (0..count).map(|k| (k * 104_729 + 7) % src_blocks).collect();
    let len = listed.len() * block_len;
    let expected = expected_blocks(&src, block_len, &listed, len);
    // Rayon's worker threads trip Stacked Borrows inside crossbeam-epoch.
    let pools: &[usize] = if cfg!(miri) { &[] } else { &[1, 2, 3] };
    for order in [BlockOrder::Source, BlockOrder::Output] {
        let tuning = knobs::Tuning::AUTO.with_block_order(order);
        let fill = |dst: &mut [u8]| {
            knobs::scoped(tuning, || {
                fill_blocks(dst, &src, block_len, |first| {
                    listed.iter().copied().skip(first)
                })
            })
        };
        let mut dst = vec![0xAAu8; len];
        fill(&mut dst);
        assert!(dst == expected, "{order:?}, the calling thread");
        for &threads in pools {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a small pool");
            let mut dst = vec![0xAAu8; len];
            pool.install(|| fill(&mut dst));
            assert!(dst == expected, "{order:?}, {threads} threads");
        }
    }
}

#[test]
fn new_vec_of_blocks_writes_every_byte_of_plain_elements() {
    let src: Vec<u8> = (0..200u8).collect();
    let listed = [2usize, 0, 4, 2];
    let out = new_vec_of_blocks::<u32, _>(10, &src, 8, |first| listed.iter().copied().skip(first))
        .expect("plain type");
    let bytes: Vec<u8> = out.iter().flat_map(|v| v.to_ne_bytes()).collect();
    assert_eq!(bytes, expected_blocks(&src, 8, &listed, 40));
    assert!(new_vec_of_blocks::<String, _>(1, &src, 8, |_| 0..1).is_none());
    assert!(new_vec_of_blocks::<bool, _>(1, &src, 1, |_| 0..1).is_none());
    assert!(new_vec_of_blocks::<u64, _>(usize::MAX / 4, &src, 8, |_| 0..1).is_none());
}

#[test]
fn by_the_rule_sources_beyond_the_last_level_cache_are_prefetched_into_l2_32_kib_ahead_in_output_order(
) {
    let cache = last_level_cache_bytes();
    let w1 = Lookahead::new(2 * cache, 1024, false, None);
    assert!(w1.to_l2);
    assert_eq!(w1.blocks, 32);
    let w1_by_source = Lookahead::new(2 * cache, 1024, true, None);
    assert!(!w1_by_source.to_l2);
    assert_eq!(w1_by_source.blocks, 8);
    let w8 = Lookahead::new(cache, 512, false, None);
    assert!(!w8.to_l2);
    assert_eq!(w8.blocks, 16);
    assert_eq!(Lookahead::new(0, 1 << 20, false, None).blocks, 2);
    assert_eq!(Lookahead::new(0, 0, true, None).blocks, 16);
}

#[test]
fn prefetches_into_l1_ask_8_kib_ahead_and_into_l2_32_kib_within_their_caps() {
    let to = |level, block_len| Lookahead::new(0, block_len, false, Some(level)).blocks;
    assert_eq!(to(false, 512), 16);
    assert_eq!(to(true, 512), 64);
    assert_eq!(to(true, 4096), 8);
    assert_eq!(to(false, 64), 16, "L1: at most 16 blocks");
    assert_eq!(to(true, 64), 256, "L2: at most 256 blocks");
    assert_eq!(to(true, 1 << 20), 2, "at least two blocks ahead");
    let w1 = Lookahead::new(0, 1024, false, Some(true));
    let w8 = Lookahead::new(0, 512, false, Some(false));
    w1.prefetch(&[1, 2, 3]);
    w8.prefetch(&[]);
}

#[test]
fn a_measured_or_forced_level_overrides_the_rule() {
    let cache = last_level_cache_bytes();
    assert!(!Lookahead::new(2 * cache, 1024, false, Some(false)).to_l2);
    assert!(Lookahead::new(cache, 512, true, Some(true)).to_l2);
    let sizes = (8 << 20, 4 << 20, 512, 1);
    assert_eq!(
        prefetch_level(BlockPrefetch::L1, sizes, true),
        (Some(false), None)
    );
    assert_eq!(
        prefetch_level(BlockPrefetch::L2, sizes, false),
        (Some(true), None)
    );
    // Small copies keep the rule, and are never timed.
    let small = (1 << 20, 1 << 20, 512, 1);
    assert_eq!(
        prefetch_level(BlockPrefetch::Auto, small, false),
        (None, None)
    );
    // An unsettled class (one no other test uses) is timed, L1 first.
    if !cfg!(miri) {
        let fresh_sizes = (9 << 30, 4 << 20, 1 << 17, 1);
        let fresh_class = measured_prefetch::Class::of(9 << 30, 1 << 17, 1, true);
        assert_eq!(
            prefetch_level(BlockPrefetch::Auto, fresh_sizes, true),
            (Some(false), Some(fresh_class))
        );
    }
}
