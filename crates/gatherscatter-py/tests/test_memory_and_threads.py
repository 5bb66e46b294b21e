"""No copies where the contract promises none, and the GIL released."""

import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import gatherscatter as gs


def test_out_is_the_callers_array_and_holds_the_result():
    data = np.arange(12, dtype=np.int32).reshape(4, 3)
    out = np.full((2, 3), -1, np.int32)
    assert gs.gather(data, np.array([3, 1]), out=out) is out
    np.testing.assert_array_equal(out, [[9, 10, 11], [3, 4, 5]])


def test_a_fresh_result_is_the_cores_memory_handed_over():
    got = gs.gather(np.arange(1000.0), np.arange(999, -1, -1))
    # numpy did not allocate it: the array's base is the core's buffer.
    assert not got.flags.owndata
    assert got.base is not None and not isinstance(got.base, np.ndarray)
    assert got.flags.c_contiguous and got.flags.writeable


PEAK_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import gatherscatter as gs

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    rows, width = 1 << 17, 256                       # 128 MiB of float32
    data = np.ones((rows, width), np.float32)
    indices = np.arange(rows - 1, -1, -1, dtype=np.int64)
    data.sum(); indices.sum()                        # every page touched
    warm = gs.gather(data[:8], indices[:8] % 8)      # the module's own memory
    before = peak()
    out = gs.gather(data, indices)                   # 128 MiB result
    grew = peak() - before
    print(grew, out.nbytes, data.nbytes + indices.nbytes)
""")


def test_a_large_call_does_not_copy_its_input():
    run = subprocess.run([sys.executable, "-c", PEAK_SCRIPT], capture_output=True, text=True,
                         check=True)
    grew, out_bytes, in_bytes = (int(x) for x in run.stdout.split())
    # The peak grows by the output alone; a copy of the input would add 129 MiB.
    assert grew <= out_bytes + 0.05 * (in_bytes + out_bytes), (grew, out_bytes, in_bytes)


def test_another_python_thread_runs_while_a_call_works():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4096, 4096)).astype(np.float32)
    idx = rng.integers(0, 4096, (4096, 4096))
    ticks = 0
    running = threading.Event()
    stop = threading.Event()

    def count():
        nonlocal ticks
        running.set()
        while not stop.is_set():
            ticks += 1

    counter = threading.Thread(target=count)
    counter.start()
    running.wait()
    try:
        start, before = time.perf_counter(), ticks
        gs.gather_elements(data, idx, axis=0, threads=1)   # ~0.1-0.5 s of work
        during, elapsed = ticks - before, time.perf_counter() - start
    finally:
        stop.set()
        counter.join()
    # With the GIL held the counter could not move at all during the call.
    assert during > 1000, (during, elapsed)


def test_the_result_of_a_strided_input_is_right_and_the_input_untouched():
    base = np.arange(40).reshape(5, 8)
    view = base[::2, 1::3]
    before = base.copy()
    np.testing.assert_array_equal(gs.gather(view, np.array([2, 0]), axis=0), view[[2, 0]])
    np.testing.assert_array_equal(base, before)


CACHE_SCRIPT = textwrap.dedent("""
    import numpy as np
    import gatherscatter as gs
    print(gs.cache_info()["limit"])
""")


def test_the_cache_limit_comes_from_the_environment_or_its_default():
    def limit(env):
        run = subprocess.run([sys.executable, "-c", CACHE_SCRIPT], capture_output=True,
                             text=True, env=env)
        return run.returncode, run.stdout.strip(), run.stderr
    base = {k: v for k, v in __import__("os").environ.items()
            if k != "GATHERSCATTER_CACHE_BYTES"}
    assert limit(base)[:2] == (0, str(gs.DEFAULT_CACHE_BYTES))
    assert limit({**base, "GATHERSCATTER_CACHE_BYTES": "0"})[:2] == (0, "0")
    assert limit({**base, "GATHERSCATTER_CACHE_BYTES": "1048576"})[:2] == (0, "1048576")
    code, _, err = limit({**base, "GATHERSCATTER_CACHE_BYTES": "lots"})
    assert code != 0 and "GATHERSCATTER_CACHE_BYTES" in err


def test_a_freed_large_result_is_reused_whole_and_overwritten():
    before = gs.cache_info()["limit"]
    try:
        gs.set_cache_limit(0)                 # start empty: earlier tests' blocks go
        gs.set_cache_limit(64 << 20)
        rng = np.random.default_rng(3)
        data = rng.standard_normal((1 << 12, 1 << 8)).astype(np.float32)   # 4 MiB
        first = rng.integers(0, 1 << 12, 1 << 13)
        second = rng.integers(0, 1 << 12, 1 << 13)
        result = gs.gather(data, first)                                   # 8 MiB
        assert gs.cache_info()["held"] == 0
        del result
        assert gs.cache_info()["held"] == 8 << 20
        again = gs.gather(data, second)
        assert gs.cache_info()["held"] == 0
        np.testing.assert_array_equal(again, np.take(data, second, axis=0))
        small = gs.gather(data, first[:100])
        del small
        assert gs.cache_info()["held"] == 0, "small results are not kept"
        del again
        gs.set_cache_limit(0)
        assert gs.cache_info() == {"limit": 0, "held": 0}
        del_then = gs.gather(data, first)
        del del_then
        assert gs.cache_info()["held"] == 0, "nothing is kept when turned off"
    finally:
        gs.set_cache_limit(before)


@pytest.mark.parametrize("rows", [8, 48, 512])   # kept with the GIL, one task, split
@pytest.mark.parametrize("threads", [1, 2, None])
def test_calls_of_every_size_give_numpys_result_on_any_thread_count(rows, threads):
    rng = np.random.default_rng(rows)
    data = rng.standard_normal((rows, 1024)).astype(np.float32)
    idx = rng.integers(-rows, rows, rows)
    np.testing.assert_array_equal(gs.gather(data, idx, threads=threads), np.take(data, idx, axis=0))
    targets = rng.integers(0, rows, (rows, 1024))
    updates = rng.standard_normal((rows, 1024)).astype(np.float32)
    expected = data.copy()
    np.add.at(expected, (targets, np.arange(1024)), updates)
    got = gs.scatter_elements(data, targets, updates, axis=0, reduction="add", threads=threads)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


SPIN_SCRIPT = textwrap.dedent("""
    import hashlib, time
    import numpy as np
    import gatherscatter as gs
    rng = np.random.default_rng(3)
    data = rng.standard_normal((512, 1024)).astype(np.float32)
    idx = rng.integers(-512, 512, 2048)
    digest = hashlib.sha256()
    for round in range(30):
        if round % 10 == 9:
            time.sleep(0.001)   # past the spin: the workers have gone to sleep
        for threads in (2, None):
            digest.update(gs.gather(data, idx, threads=threads).tobytes())
    print(digest.hexdigest())
""")


def test_calls_in_a_row_on_a_pool_give_the_same_results_whether_workers_spin_or_not():
    env = {k: v for k, v in __import__("os").environ.items() if k != "GATHERSCATTER_SPIN_US"}
    digests = []
    for spin in (None, "0", "100000"):
        run_env = env if spin is None else {**env, "GATHERSCATTER_SPIN_US": spin}
        run = subprocess.run([sys.executable, "-c", SPIN_SCRIPT], capture_output=True,
                             text=True, env=run_env, timeout=120)
        assert run.returncode == 0, run.stderr
        digests.append(run.stdout.strip())
    rng = np.random.default_rng(3)
    data = rng.standard_normal((512, 1024)).astype(np.float32)
    idx = rng.integers(-512, 512, 2048)
    expected = __import__("hashlib").sha256()
    for _ in range(60):
        expected.update(np.take(data, idx, axis=0).tobytes())
    assert digests == [expected.hexdigest()] * 3
