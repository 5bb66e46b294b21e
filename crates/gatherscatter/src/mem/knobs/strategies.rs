//! The values of each strategy knob, and their names in the text form of
//! a [`Tuning`](super::Tuning). `Auto` is each knob's default: the library
//! chooses; the other values force one strategy.

/// How outputs larger than the cache are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stores {
    /// Ordinary stores for outputs under 1 MiB and runs shorter than a
    /// cache line; streaming stores for outputs past a quarter of the
    /// last-level cache, except blocks of 16 KiB or more whose source fits
    /// in that cache with the output; everything between, and those long
    /// blocks, takes the stores that the first calls of its class (kernel,
    /// output and run size, one task or several) measured faster on this
    /// CPU ([`crate::tuning::report`] lists the verdicts).
    #[default]
    Auto,
    /// Ordinary stores, always.
    Cached,
    /// Streaming (non-temporal) stores wherever a kernel has them, at any
    /// size. On targets other than x86-64 they are ordinary stores.
    Streaming,
}

/// How GatherElements reads words: 4- and 8-byte ones along the last axis,
/// 1- to 8-byte ones along an outer axis (with `i64`, `i32` or `u16`
/// indices; other index types are widened to `i64`); and how Gather copies
/// one-element blocks (its axis the last) of 4- and 8-byte words, from
/// outputs of 1 MiB measured per word size, slab size and task count
/// under `Auto`, the scalar loop below.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WordGather {
    /// Whichever of the two this process's calls measured faster, for
    /// each axis (the last, in rows of 32 elements and up or in shorter
    /// ones walked end to end, or an outer one), word size, index type, size of the data a row reads (a data
    /// row, or a plane) and task count; until a class has its verdict, calls under 1 MiB take what a
    /// short measurement on first use found faster on this CPU (along the
    /// last axis, for 4- and 8-byte words; 1- and 2-byte words along an
    /// outer axis take the gathers).
    #[default]
    Auto,
    /// One load per element.
    Scalar,
    /// The CPU's gather instructions (AVX2 `vpgather`), when it has them;
    /// the scalar loop when it does not.
    Vector,
}

/// The order in which Gather copies rows into an output that takes
/// streaming stores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlockOrder {
    /// Source order for sources past 1.5x the last-level cache with rows
    /// of at least 256 bytes, split into few tasks. Below that, sources
    /// from 2 MiB and outputs from 1 MiB with such rows take the order that
    /// the first calls of their class (source size, row size, one task or
    /// several) measured faster on this CPU, the two orders timed in
    /// turn, three calls each in a row (the first uncounted); output order otherwise.
    #[default]
    Auto,
    /// Each task copies its rows in output order.
    Output,
    /// Each task copies its rows in the order they sit in the source (and
    /// takes one task per thread), whenever the order table can be built.
    Source,
}

/// Where EmbeddingBag keeps a bag's running sums (f32 `sum` and `mean`
/// without per-sample weights; other calls always fold in memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BagFold {
    /// Registers wherever they apply (they measured faster at every row
    /// width), the output row otherwise.
    #[default]
    Auto,
    /// In the bag's output row, each weight row added into it.
    Memory,
    /// In AVX2 registers, for rows of a multiple of 8 columns on a CPU
    /// with AVX2; in memory otherwise.
    Registers,
}

/// How GatherElements along the last axis, in its vector loops, has each
/// data row of 8 KiB to 128 KiB in cache before it gathers from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RowFetch {
    /// The one that the first calls of each class (row size, index type,
    /// one task or several) measured faster on this CPU, the two taking
    /// turns, `read` first, three calls each in a row (the first uncounted).
    #[default]
    Auto,
    /// Read the row through, a load a line, before its gathers.
    Read,
    /// Ask for the next row into L1 a line at a time, spread over the
    /// current row's gathers.
    Prefetch,
}

/// How ScatterElements' row loop has its index and update streams in
/// cache, and GatherElements along an outer axis its index stream: asked
/// for in software a fixed distance ahead, or left to the CPU's hardware
/// prefetchers. ScatterReduce's sum, prod, amax and amin with
/// `include_self` run that loop; its own kernel (mean, or without
/// `include_self`) always asks ahead, whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamFetch {
    /// Along the last axis, for outputs from 1 MiB, the one that the first
    /// calls of each class (element size, index type, index row length,
    /// one task or several) measured faster on this CPU, the two taking
    /// turns, `hardware` first, three calls each in a row (the first
    /// uncounted), `ahead`
    /// kept only when its best time is at least 10% lower; `ahead` along
    /// an outer axis and for smaller outputs. GatherElements along an
    /// outer axis, outputs from 1 MiB: the faster in the first calls of
    /// each class (word size, index type, planes packed or in place, one
    /// task or several), the two taking turns likewise; `ahead` for
    /// smaller outputs.
    #[default]
    Auto,
    /// ScatterElements: ask for the indices and updates 1024 elements
    /// ahead of the one being applied, a line each per 16 updates.
    /// GatherElements: ask for the indices 2 KiB ahead, a line per 64
    /// bytes, past a row piece's end only where whole rows follow.
    Ahead,
    /// Issue no software prefetch of these streams.
    Hardware,
}

/// Where Gather's and GatherND's streamed row copies (outputs written
/// with streaming stores) ask for their source rows ahead: into L1 or
/// into L2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlockPrefetch {
    /// For sources from 2 MiB and outputs from 1 MiB, the level that the
    /// first calls of each class (source size, row size, one task or
    /// several, row order) measured faster on this CPU, the two taking
    /// turns, `l1` first, three calls each in a row (the first uncounted),
    /// output order's before the row order is timed; below that, L2 in
    /// output order from sources past 1.5x the last-level cache and L1
    /// otherwise. L1 prefetches ask about 8 KiB ahead, L2 ones 32 KiB.
    #[default]
    Auto,
    /// Ask for each row ahead into L1.
    L1,
    /// Ask for each row ahead into L2.
    L2,
}

/// How GatherElements along an outer axis reads a data plane (the axis
/// times the dims after it) that the rows reading it share: copied a tile
/// of columns at a time into a packed strip, or read where it lies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PlaneReads {
    /// For planes up to the size of L2 and outputs from 1 MiB, the one
    /// that the first calls of each class (word size, plane size, index
    /// type, one task or several) measured faster on this CPU, the two
    /// taking turns, `packed` first, three calls each in a row (the first
    /// uncounted);
    /// otherwise, and while the call's word loop is being timed, in place
    /// where a strip of an eighth of L2 would span the whole row, packed
    /// elsewhere.
    #[default]
    Auto,
    /// Copy each tile of columns into a contiguous strip, then gather.
    Packed,
    /// Gather from the plane where it lies, the next plane asked for a
    /// piece per row.
    InPlace,
}

pub(super) const STORES: [(Stores, &str); 3] = [
    (Stores::Auto, "auto"),
    (Stores::Cached, "cached"),
    (Stores::Streaming, "streaming"),
];
pub(super) const WORD_GATHERS: [(WordGather, &str); 3] = [
    (WordGather::Auto, "auto"),
    (WordGather::Scalar, "scalar"),
    (WordGather::Vector, "vector"),
];
pub(super) const BLOCK_ORDERS: [(BlockOrder, &str); 3] = [
    (BlockOrder::Auto, "auto"),
    (BlockOrder::Output, "output"),
    (BlockOrder::Source, "source"),
];
pub(super) const BAG_FOLDS: [(BagFold, &str); 3] = [
    (BagFold::Auto, "auto"),
    (BagFold::Memory, "memory"),
    (BagFold::Registers, "registers"),
];
pub(super) const ROW_FETCHES: [(RowFetch, &str); 3] = [
    (RowFetch::Auto, "auto"),
    (RowFetch::Read, "read"),
    (RowFetch::Prefetch, "prefetch"),
];
pub(super) const STREAM_FETCHES: [(StreamFetch, &str); 3] = [
    (StreamFetch::Auto, "auto"),
    (StreamFetch::Ahead, "ahead"),
    (StreamFetch::Hardware, "hardware"),
];
pub(super) const BLOCK_PREFETCHES: [(BlockPrefetch, &str); 3] = [
    (BlockPrefetch::Auto, "auto"),
    (BlockPrefetch::L1, "l1"),
    (BlockPrefetch::L2, "l2"),
];
pub(super) const PLANE_READS: [(PlaneReads, &str); 3] = [
    (PlaneReads::Auto, "auto"),
    (PlaneReads::Packed, "packed"),
    (PlaneReads::InPlace, "in_place"),
];
