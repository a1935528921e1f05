"""BackgroundSave: one write in flight, and a failed write is raised, never dropped (#14 item 3)."""

import threading

import pytest

from hvdkit.core.background_save import BackgroundSave


def test_a_second_save_waits_for_the_first():
    events = []
    release = threading.Event()

    def first():
        release.wait(timeout=30)
        events.append("first done")

    writer = BackgroundSave()
    writer.submit(first)
    assert writer.in_flight
    threading.Timer(0.05, release.set).start()  # lets the first write finish while submit waits for it
    writer.submit(lambda: events.append("second started"))
    writer.wait()
    assert events == ["first done", "second started"]


def test_a_failed_write_is_raised_by_the_next_submit_and_only_once():
    writer = BackgroundSave()

    def fail():
        raise OSError(28, "writing checkpoint '/ckpt/ckpt-000001' failed: No space left on device")

    writer.submit(fail)
    with pytest.raises(OSError, match=r"ckpt-000001.*No space left"):
        writer.submit(lambda: None)
    writer.submit(lambda: 7)
    assert writer.wait() == 7


def test_done_runs_with_the_result_after_a_successful_write():
    got = []
    writer = BackgroundSave()
    writer.submit(lambda: "manifest", done=got.append)
    writer.wait()
    assert got == ["manifest"] and writer.last_write_seconds is not None
