"""The strategy knobs: every forced strategy gives the result `auto` gives
(and numpy's), a bad value is refused and changes nothing, and the
environment variable is read at first use."""

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import gatherscatter as gs

FORCED = list(itertools.product(["cached", "streaming"], ["scalar", "vector"],
                                ["output", "source"], ["memory", "registers"],
                                ["read", "prefetch"], ["ahead", "hardware"], ["l1", "l2"],
                                ["packed", "in_place"]))


@pytest.fixture
def restore_tuning():
    before = gs.get_tuning()
    yield
    knobs = dict(pair.split("=") for pair in before.split(","))
    gs.set_tuning(**knobs)


@pytest.mark.parametrize(
    "stores,word_gather,block_order,bag_fold,row_fetch,stream_fetch,block_prefetch,plane_reads",
    FORCED)
def test_every_forced_strategy_gives_numpys_result(restore_tuning, stores, word_gather,
                                                   block_order, bag_fold, row_fetch,
                                                   stream_fetch, block_prefetch, plane_reads):
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((300, 37)).astype(np.float32)
    take = rng.integers(-300, 300, 5000)
    words = rng.standard_normal((6, 2500))
    along = rng.integers(-2500, 2500, (6, 3000))
    # Along the middle axis from 64 KiB planes: packed in strips or read in place.
    planes = rng.standard_normal((3, 256, 64)).astype(np.float32)
    across = rng.integers(-256, 256, (3, 200, 64))
    table = rng.standard_normal((50, 136)).astype(np.float32)
    bags = rng.integers(0, 50, 400)
    offsets = np.array([0, 1, 31, 60, 200])
    auto_bags = gs.embedding_bag(table, bags, offsets, "sum")
    np.testing.assert_allclose(
        auto_bags, np.add.reduceat(table[bags].astype(np.float64), offsets), rtol=1e-5, atol=1e-5)
    in_force = gs.set_tuning(stores=stores, word_gather=word_gather, block_order=block_order,
                             bag_fold=bag_fold, row_fetch=row_fetch, stream_fetch=stream_fetch,
                             block_prefetch=block_prefetch, plane_reads=plane_reads)
    assert in_force == (f"stores={stores},word_gather={word_gather},block_order={block_order},"
                        f"bag_fold={bag_fold},row_fetch={row_fetch},stream_fetch={stream_fetch},"
                        f"block_prefetch={block_prefetch},plane_reads={plane_reads}")
    assert gs.get_tuning() == in_force
    assert gs.tuning_report().startswith(f"tuning {in_force} |")
    for threads in (1, 2):
        np.testing.assert_array_equal(gs.take(rows, take, axis=0, threads=threads),
                                      np.take(rows, take, axis=0))
        np.testing.assert_array_equal(gs.take_along_axis(words, along, 1, threads=threads),
                                      np.take_along_axis(words, along, 1))
        np.testing.assert_array_equal(
            gs.take_along_axis(words.astype(np.float32), along, 1, threads=threads),
            np.take_along_axis(words.astype(np.float32), along, 1))
        np.testing.assert_array_equal(gs.take_along_axis(planes, across, 1, threads=threads),
                                      np.take_along_axis(planes, across, 1))
        # Bags of 1 to 199 rows, 136 columns: the same bits whichever fold
        # holds the sums (the run before the tuning was forced is auto's).
        np.testing.assert_array_equal(
            gs.embedding_bag(table, bags, offsets, "sum", threads=threads), auto_bags)
        # Each row of 2500 overwritten at 3000 positions (duplicates: the
        # last write wins, as numpy's put_along_axis in order).
        expected = words.copy()
        np.put_along_axis(expected, along % 2500, along.astype(np.float64), 1)
        np.testing.assert_array_equal(
            gs.scatter_elements(words, along, along.astype(np.float64), axis=1,
                                threads=threads), expected)


def test_a_bad_value_is_refused_and_changes_nothing(restore_tuning):
    gs.set_tuning(stores="cached")
    with pytest.raises(ValueError, match='"fast" is not one of auto, cached, streaming'):
        gs.set_tuning(stores="fast")
    assert gs.get_tuning() == ("stores=cached,word_gather=auto,block_order=auto,bag_fold=auto,"
                               "row_fetch=auto,stream_fetch=auto,block_prefetch=auto,"
                               "plane_reads=auto")
    assert gs.set_tuning() == ("stores=auto,word_gather=auto,block_order=auto,bag_fold=auto,"
                               "row_fetch=auto,stream_fetch=auto,block_prefetch=auto,"
                               "plane_reads=auto")


def test_the_environment_names_the_tuning_at_first_use():
    script = "import gatherscatter as gs; print(gs.get_tuning()); print(gs.tuning_report())"
    env = dict(os.environ, GATHERSCATTER_TUNING="word_gather=scalar, block_order=source")
    lines = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    assert lines[0] == ("stores=auto,word_gather=scalar,block_order=source,bag_fold=auto,"
                        "row_fetch=auto,stream_fetch=auto,block_prefetch=auto,"
                        "plane_reads=auto")
    assert "last-level cache" in lines[1] and "word gather 4 B" in lines[1]


def import_with(variable, value):
    """`import gatherscatter` in a new interpreter with `variable` set."""
    env = dict(os.environ, **{variable: value})
    return subprocess.run([sys.executable, "-c", "import gatherscatter"], env=env,
                          capture_output=True, text=True)


def test_a_tuning_variable_that_does_not_parse_fails_the_import_naming_it():
    run = import_with("GATHERSCATTER_TUNING", "stores=fast")
    assert run.returncode != 0
    assert "AttributeValueError" in run.stderr
    assert 'GATHERSCATTER_TUNING="stores=fast"' in run.stderr


def test_a_pinning_variable_that_does_not_parse_fails_the_import_naming_it():
    run = import_with("GATHERSCATTER_PIN_THREADS", "no")
    assert run.returncode != 0
    assert 'GATHERSCATTER_PIN_THREADS="no"' in run.stderr
    for value in ("0", "1"):
        assert import_with("GATHERSCATTER_PIN_THREADS", value).returncode == 0


def test_a_spin_variable_that_does_not_parse_fails_the_import_naming_it():
    for bad in ("fast", "-1", "1.5", "100001"):
        run = import_with("GATHERSCATTER_SPIN_US", bad)
        assert run.returncode != 0
        assert f'GATHERSCATTER_SPIN_US="{bad}"' in run.stderr
    for value in ("0", "200", "100000"):
        assert import_with("GATHERSCATTER_SPIN_US", value).returncode == 0
