"""hvdkit's pickle-free checkpoint format: what it holds comes back unchanged; what could carry code is
refused when writing and never built when reading."""

import io
import pickle

import numpy as np
import pytest

from hvdkit.core import safe_format


def roundtrip(obj):
    f = io.BytesIO()
    safe_format.dump(obj, f)
    return safe_format.loads(f.getvalue())


def test_plain_data_and_arrays_come_back_unchanged():
    obj = {"model": [np.arange(6, dtype=np.float32).reshape(2, 3), np.float64(2.5), np.array(7, dtype=np.int64)],
           "rng": ("MT19937", [1, 2, 3], 4, None), "inf": float("inf"), "b": b"\x00\x01", 3: [True, "x"],
           "empty": np.zeros((0, 4), np.float16)}
    back = roundtrip(obj)
    np.testing.assert_array_equal(back["model"][0], obj["model"][0])
    assert back["model"][0].dtype == np.float32 and back["model"][2].shape == ()
    assert back["model"][1] == 2.5 and isinstance(back["model"][1], np.float64)
    assert back["rng"] == ("MT19937", [1, 2, 3], 4, None) and back["inf"] == float("inf")
    assert back["b"] == b"\x00\x01" and back[3] == [True, "x"] and back["empty"].shape == (0, 4)


def test_objects_that_need_pickle_are_refused_naming_where_they_are():
    class Custom:
        pass

    with pytest.raises(safe_format.UnsafePayloadError, match=r"checkpoint\['callbacks'\]\['x'\]: a .*Custom"):
        roundtrip({"callbacks": {"x": Custom()}})
    with pytest.raises(safe_format.UnsafePayloadError, match="dtype object"):
        roundtrip(np.array([object()]))


def test_a_pickle_is_not_read():
    with pytest.raises(ValueError, match="not an hvdkit safe-format payload"):
        safe_format.loads(pickle.dumps({"a": 1}))
