//! The strategy knobs. Where two kernel strategies compete, `Auto` lets
//! the library choose for the running CPU and the call's sizes; the other
//! values force one, for tests and benchmarks. Every strategy writes the
//! same result; only the speed differs.
//!
//! A [`Tuning`] is in force process-wide ([`set_global`], or the
//! `GATHERSCATTER_TUNING` environment variable read at first use) or for
//! the calls one thread makes ([`scoped`]). Kernels read it once per call,
//! on the calling thread, before they split work across the pool.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

mod strategies;

pub use strategies::{
    BagFold, BlockOrder, BlockPrefetch, PlaneReads, RowFetch, Stores, StreamFetch, WordGather,
};
use strategies::{
    BAG_FOLDS, BLOCK_ORDERS, BLOCK_PREFETCHES, PLANE_READS, ROW_FETCHES, STORES, STREAM_FETCHES,
    WORD_GATHERS,
};

/// The strategy knobs together; [`Tuning::AUTO`] (the default) forces
/// nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Tuning {
    /// How large outputs are written.
    pub stores: Stores,
    /// How GatherElements reads words along the last axis.
    pub word_gather: WordGather,
    /// Gather's row order into streamed outputs.
    pub block_order: BlockOrder,
    /// Where EmbeddingBag's f32 sums are held.
    pub bag_fold: BagFold,
    /// How GatherElements' vector loops have each data row in cache.
    pub row_fetch: RowFetch,
    /// How ScatterElements' row loop has its index and update streams in
    /// cache.
    pub stream_fetch: StreamFetch,
    /// Where Gather's and GatherND's streamed row copies ask for their
    /// rows ahead.
    pub block_prefetch: BlockPrefetch,
    /// How GatherElements along an outer axis reads the data planes its
    /// rows share.
    pub plane_reads: PlaneReads,
}

/// The environment variable read at first use: `Tuning`'s text form.
pub const TUNING_VARIABLE: &str = "GATHERSCATTER_TUNING";

fn name_of<T: PartialEq + Copy>(table: &[(T, &'static str)], value: T) -> &'static str {
    table
        .iter()
        .find(|(v, _)| *v == value)
        .map_or("auto", |(_, name)| name)
}

fn position<T: PartialEq + Copy>(table: &[(T, &str)], value: T) -> u32 {
    table.iter().position(|(v, _)| *v == value).unwrap_or(0) as u32
}

fn value_of<T: Copy>(table: &[(T, &str)], knob: &str, name: &str) -> Result<T> {
    let found = table.iter().find(|(_, n)| *n == name).map(|(v, _)| *v);
    found.ok_or_else(|| Error::BadAttribute {
        message: format!(
            "tuning: {knob}={name:?} is not one of {}",
            table.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
        ),
    })
}

impl Tuning {
    /// Every knob on `Auto`.
    pub const AUTO: Tuning = Tuning {
        stores: Stores::Auto,
        word_gather: WordGather::Auto,
        block_order: BlockOrder::Auto,
        bag_fold: BagFold::Auto,
        row_fetch: RowFetch::Auto,
        stream_fetch: StreamFetch::Auto,
        block_prefetch: BlockPrefetch::Auto,
        plane_reads: PlaneReads::Auto,
    };

    /// This tuning with `stores` set. The builders are `const`, so a
    /// table of tunings can be a constant:
    ///
    /// ```
    /// use gatherscatter::tuning::{Stores, Tuning, WordGather};
    ///
    /// const FORCED: [Tuning; 2] = [
    ///     Tuning::AUTO.with_stores(Stores::Streaming),
    ///     Tuning::AUTO.with_word_gather(WordGather::Scalar),
    /// ];
    /// assert_eq!(FORCED[0], Tuning::parse("stores=streaming")?);
    /// # Ok::<(), gatherscatter::Error>(())
    /// ```
    pub const fn with_stores(mut self, stores: Stores) -> Tuning {
        self.stores = stores;
        self
    }

    /// This tuning with `word_gather` set.
    pub const fn with_word_gather(mut self, word_gather: WordGather) -> Tuning {
        self.word_gather = word_gather;
        self
    }

    /// This tuning with `block_order` set.
    pub const fn with_block_order(mut self, block_order: BlockOrder) -> Tuning {
        self.block_order = block_order;
        self
    }

    /// This tuning with `bag_fold` set.
    pub const fn with_bag_fold(mut self, bag_fold: BagFold) -> Tuning {
        self.bag_fold = bag_fold;
        self
    }

    /// This tuning with `row_fetch` set.
    pub const fn with_row_fetch(mut self, row_fetch: RowFetch) -> Tuning {
        self.row_fetch = row_fetch;
        self
    }

    /// This tuning with `stream_fetch` set.
    pub const fn with_stream_fetch(mut self, stream_fetch: StreamFetch) -> Tuning {
        self.stream_fetch = stream_fetch;
        self
    }

    /// This tuning with `block_prefetch` set.
    pub const fn with_block_prefetch(mut self, block_prefetch: BlockPrefetch) -> Tuning {
        self.block_prefetch = block_prefetch;
        self
    }

    /// This tuning with `plane_reads` set.
    pub const fn with_plane_reads(mut self, plane_reads: PlaneReads) -> Tuning {
        self.plane_reads = plane_reads;
        self
    }

    /// Every combination of forced values (no `Auto`): the strategies a
    /// correctness test runs whichever this CPU would choose.
    pub fn every_forced() -> Vec<Tuning> {
        let mut all = Vec::new();
        for &(stores, _) in &STORES[1..] {
            for &(word_gather, _) in &WORD_GATHERS[1..] {
                for &(block_order, _) in &BLOCK_ORDERS[1..] {
                    for &(bag_fold, _) in &BAG_FOLDS[1..] {
                        for &(row_fetch, _) in &ROW_FETCHES[1..] {
                            for &(stream_fetch, _) in &STREAM_FETCHES[1..] {
                                for &(block_prefetch, _) in &BLOCK_PREFETCHES[1..] {
                                    for &(plane_reads, _) in &PLANE_READS[1..] {
                                        all.push(Tuning {
                                            stores,
                                            word_gather,
                                            block_order,
                                            bag_fold,
                                            row_fetch,
                                            stream_fetch,
                                            block_prefetch,
                                            plane_reads,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        all
    }

    /// Read the text form, comma-separated `knob=value` pairs in any order:
    /// `stores` (`auto`, `cached`, `streaming`), `word_gather` (`auto`,
    /// `scalar`, `vector`), `block_order` (`auto`, `output`, `source`),
    /// `bag_fold` (`auto`, `memory`, `registers`), `row_fetch` (`auto`,
    /// `read`, `prefetch`), `stream_fetch` (`auto`, `ahead`, `hardware`),
    /// `block_prefetch` (`auto`, `l1`, `l2`), `plane_reads` (`auto`,
    /// `packed`, `in_place`). Knobs left out are `auto`; the empty string
    /// is [`Tuning::AUTO`].
    ///
    /// # Errors
    /// [`Error::BadAttribute`] naming an unknown knob or value.
    ///
    /// ```
    /// use gatherscatter::tuning::{Stores, Tuning};
    /// let t = Tuning::parse("stores=streaming").unwrap();
    /// assert_eq!(t, Tuning::AUTO.with_stores(Stores::Streaming));
    /// assert_eq!(
    ///     t.to_string(),
    ///     "stores=streaming,word_gather=auto,block_order=auto,bag_fold=auto,row_fetch=auto,\
    ///      stream_fetch=auto,block_prefetch=auto,plane_reads=auto"
    /// );
    /// assert!(Tuning::parse("stores=fast").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Tuning> {
        let mut tuning = Tuning::AUTO;
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (knob, value) = pair.split_once('=').ok_or_else(|| Error::BadAttribute {
                message: format!("tuning: {pair:?} is not knob=value"),
            })?;
            let (knob, value) = (knob.trim(), value.trim());
            match knob {
                "stores" => tuning.stores = value_of(&STORES, knob, value)?,
                "word_gather" => tuning.word_gather = value_of(&WORD_GATHERS, knob, value)?,
                "block_order" => tuning.block_order = value_of(&BLOCK_ORDERS, knob, value)?,
                "bag_fold" => tuning.bag_fold = value_of(&BAG_FOLDS, knob, value)?,
                "row_fetch" => tuning.row_fetch = value_of(&ROW_FETCHES, knob, value)?,
                "stream_fetch" => tuning.stream_fetch = value_of(&STREAM_FETCHES, knob, value)?,
                "block_prefetch" => {
                    tuning.block_prefetch = value_of(&BLOCK_PREFETCHES, knob, value)?
                }
                "plane_reads" => tuning.plane_reads = value_of(&PLANE_READS, knob, value)?,
                _ => {
                    return Err(Error::BadAttribute {
                        message: format!(
                            "tuning: unknown knob {knob:?} (stores, word_gather, block_order, bag_fold, row_fetch, stream_fetch, block_prefetch, plane_reads)"
                        ),
                    })
                }
            }
        }
        Ok(tuning)
    }

    /// The tuning that `GATHERSCATTER_TUNING` names: `Ok(None)` when it is
    /// unset. Programs call it at start-up to refuse a bad value (the `gsx`
    /// tools and the Python module do), since the kernels read it as unset.
    ///
    /// # Errors
    /// As [`Tuning::parse`], the message prefixed with the variable's name,
    /// or [`Error::BadAttribute`] for a value that is not Unicode.
    pub fn from_env() -> Result<Option<Tuning>> {
        match std::env::var(TUNING_VARIABLE) {
            Ok(text) => Tuning::parse(&text).map(Some).map_err(|e| match e {
                Error::BadAttribute { message } => Error::BadAttribute {
                    message: format!("{TUNING_VARIABLE}={text:?}: {message}"),
                },
                other => other,
            }),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::BadAttribute {
                message: format!("tuning: {TUNING_VARIABLE} is not Unicode"),
            }),
        }
    }

    fn encode(self) -> u32 {
        position(&STORES, self.stores)
            | position(&WORD_GATHERS, self.word_gather) << 2
            | position(&BLOCK_ORDERS, self.block_order) << 4
            | position(&BAG_FOLDS, self.bag_fold) << 6
            | position(&ROW_FETCHES, self.row_fetch) << 8
            | position(&STREAM_FETCHES, self.stream_fetch) << 10
            | position(&BLOCK_PREFETCHES, self.block_prefetch) << 12
            | position(&PLANE_READS, self.plane_reads) << 14
    }

    fn decode(bits: u32) -> Tuning {
        let field = |shift: u32| ((bits >> shift) & 3) as usize;
        Tuning {
            stores: STORES.get(field(0)).map_or(Stores::Auto, |s| s.0),
            word_gather: WORD_GATHERS.get(field(2)).map_or(WordGather::Auto, |s| s.0),
            block_order: BLOCK_ORDERS.get(field(4)).map_or(BlockOrder::Auto, |s| s.0),
            bag_fold: BAG_FOLDS.get(field(6)).map_or(BagFold::Auto, |s| s.0),
            row_fetch: ROW_FETCHES.get(field(8)).map_or(RowFetch::Auto, |s| s.0),
            stream_fetch: STREAM_FETCHES
                .get(field(10))
                .map_or(StreamFetch::Auto, |s| s.0),
            block_prefetch: BLOCK_PREFETCHES
                .get(field(12))
                .map_or(BlockPrefetch::Auto, |s| s.0),
            plane_reads: PLANE_READS.get(field(14)).map_or(PlaneReads::Auto, |s| s.0),
        }
    }
}

impl std::fmt::Display for Tuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stores={},word_gather={},block_order={},bag_fold={},row_fetch={},stream_fetch={},\
             block_prefetch={},plane_reads={}",
            name_of(&STORES, self.stores),
            name_of(&WORD_GATHERS, self.word_gather),
            name_of(&BLOCK_ORDERS, self.block_order),
            name_of(&BAG_FOLDS, self.bag_fold),
            name_of(&ROW_FETCHES, self.row_fetch),
            name_of(&STREAM_FETCHES, self.stream_fetch),
            name_of(&BLOCK_PREFETCHES, self.block_prefetch),
            name_of(&PLANE_READS, self.plane_reads)
        )
    }
}

impl std::str::FromStr for Tuning {
    type Err = Error;

    fn from_str(text: &str) -> Result<Tuning> {
        Tuning::parse(text)
    }
}

/// The process-wide tuning, encoded; `UNREAD` until the environment has
/// been read.
static GLOBAL: AtomicU32 = AtomicU32::new(UNREAD);
const UNREAD: u32 = u32::MAX;

thread_local! {
    static SCOPED: Cell<Option<Tuning>> = const { Cell::new(None) };
}

/// The process-wide tuning: the last [`set_global`], else what
/// `GATHERSCATTER_TUNING` names, else [`Tuning::AUTO`]. (A variable that
/// does not parse counts as unset here, as a kernel has no way to report
/// it; programs check it at start-up with [`Tuning::from_env`].)
pub fn global() -> Tuning {
    let bits = GLOBAL.load(Ordering::Relaxed);
    match bits {
        // The common case, without the five fields' decode (EmbeddingBag's
        // small call, which reads its knob each time: 59 instructions).
        AUTO_BITS => return Tuning::AUTO,
        UNREAD => {}
        _ => return Tuning::decode(bits),
    }
    let from_env = Tuning::from_env().ok().flatten().unwrap_or_default();
    // A concurrent `set_global` wins over the environment.
    match GLOBAL.compare_exchange(
        UNREAD,
        from_env.encode(),
        Ordering::Relaxed,
        Ordering::Relaxed,
    ) {
        Ok(_) => from_env,
        Err(set) => Tuning::decode(set),
    }
}

/// Put `tuning` in force for the whole process, except on threads inside
/// [`scoped`].
pub fn set_global(tuning: Tuning) {
    GLOBAL.store(tuning.encode(), Ordering::Relaxed);
}

/// Run `f` with `tuning` in force for the calls this thread makes (the
/// kernels' pool threads included), then restore what was in force, also
/// when `f` panics.
///
/// ```
/// use gatherscatter::tuning::{self, Stores, Tuning};
/// let forced = Tuning::AUTO.with_stores(Stores::Streaming);
/// let seen = tuning::scoped(forced, tuning::in_force);
/// assert_eq!(seen, forced);
/// ```
pub fn scoped<R>(tuning: Tuning, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Tuning>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPED.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SCOPED.with(|s| s.replace(Some(tuning))));
    f()
}

/// The tuning in force for a call made from this thread: the innermost
/// [`scoped`] one, else [`global`].
pub fn in_force() -> Tuning {
    SCOPED.with(Cell::get).unwrap_or_else(global)
}

/// [`Tuning::AUTO`]'s encoding: every table lists `auto` first.
const AUTO_BITS: u32 = 0;

/// Whether [`in_force`] is [`Tuning::AUTO`], read from the encoded bits
/// without decoding them: the small-call paths ask on every call (8x4
/// GatherElements, callgrind: 1851 instructions a call with the decode,
/// 1792 without).
pub(crate) fn auto_in_force() -> bool {
    match SCOPED.with(Cell::get) {
        Some(tuning) => tuning == Tuning::AUTO,
        None => match GLOBAL.load(Ordering::Relaxed) {
            AUTO_BITS => true,
            UNREAD => global() == Tuning::AUTO,
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_encodes_to_the_bits_the_small_paths_compare() {
        assert_eq!(Tuning::AUTO.encode(), AUTO_BITS);
        for forced in Tuning::every_forced() {
            assert_ne!(forced.encode(), AUTO_BITS);
        }
    }

    #[test]
    fn every_tuning_survives_its_encoding_and_its_text() {
        let mut all = Tuning::every_forced();
        all.push(Tuning::AUTO);
        all.push(Tuning::AUTO.with_block_order(BlockOrder::Source));
        all.push(Tuning::AUTO.with_row_fetch(RowFetch::Prefetch));
        all.push(Tuning::AUTO.with_stream_fetch(StreamFetch::Hardware));
        all.push(Tuning::AUTO.with_block_prefetch(BlockPrefetch::L2));
        all.push(Tuning::AUTO.with_plane_reads(PlaneReads::InPlace));
        assert_eq!(Tuning::every_forced().len(), 256);
        for t in all {
            assert_eq!(Tuning::decode(t.encode()), t);
            assert_eq!(Tuning::parse(&t.to_string()).unwrap(), t);
            assert_ne!(t.encode(), UNREAD);
        }
    }

    #[test]
    fn the_text_form_takes_any_order_and_spacing_and_names_what_it_refuses() {
        let t = Tuning::parse(" block_order = source , word_gather=scalar ").unwrap();
        assert_eq!(
            t,
            Tuning::AUTO
                .with_block_order(BlockOrder::Source)
                .with_word_gather(WordGather::Scalar)
        );
        assert_eq!(Tuning::parse("").unwrap(), Tuning::AUTO);
        for (bad, named) in [
            ("stores", "knob=value"),
            ("speed=high", "speed"),
            ("stores=fast", "fast"),
            ("word_gather=avx", "scalar, vector"),
        ] {
            let message = Tuning::parse(bad).unwrap_err().to_string();
            assert!(message.contains(named), "{bad}: {message}");
        }
    }

    #[test]
    fn a_scoped_tuning_holds_inside_and_is_restored_after_a_panic() {
        let forced = Tuning::AUTO.with_stores(Stores::Cached);
        let before = in_force();
        assert_eq!(scoped(forced, in_force), forced);
        let inner = Tuning::AUTO.with_word_gather(WordGather::Vector);
        assert_eq!(scoped(forced, || scoped(inner, in_force)), inner);
        let caught = std::panic::catch_unwind(|| scoped(forced, || panic!("inside")));
        assert!(caught.is_err());
        assert_eq!(in_force(), before);
    }
}
