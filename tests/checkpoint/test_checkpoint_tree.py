"""Format 4's split of a snapshot into JSON and named arrays, and back: what plain JSON cannot say survives."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hvdkit.core.checkpoint_tree import UnsupportedValueError, join, load_numpy, numpy_leaf, numpy_payload, split

REPO = Path(__file__).resolve().parents[2]


def round_trip(obj, tmp_path):
    tree, arrays = split(obj, numpy_leaf)
    tree = json.loads(json.dumps(tree, allow_nan=False))  # what the manifest holds
    numpy_payload(arrays)(tmp_path / "t.safetensors")
    return join(tree, load_numpy((tmp_path / "t.safetensors").read_bytes())), tree


def test_types_json_lacks_come_back_as_they_were(tmp_path):
    obj = {
        "state": {0: {"step": 3, "exp_avg": np.arange(6, dtype=np.float32).reshape(2, 3)}},  # integer keys
        "param_groups": [{"betas": (0.9, 0.999), "params": [0, 1], "lr": 1e-3}],
        "specials": [float("nan"), float("inf"), -float("inf"), b"\x00\xff", None, True, "__tensor__"],
        "nested": {"__dunder_key__": 1},
        "scalar": np.float64(2.5),
        "zero_d": np.array(7, dtype=np.int64),
        "empty": np.zeros((0, 3), dtype=np.float16),
        "rng": ("MT19937", [1, 2, 3], 624, 0, 0.0),
    }
    back, tree = round_trip(obj, tmp_path)
    assert back["state"][0]["step"] == 3 and list(back["state"]) == [0]
    np.testing.assert_array_equal(back["state"][0]["exp_avg"], obj["state"][0]["exp_avg"])
    assert back["state"][0]["exp_avg"].dtype == np.float32 and back["state"][0]["exp_avg"].flags.writeable
    assert back["param_groups"] == obj["param_groups"] and isinstance(back["param_groups"][0]["betas"], tuple)
    assert np.isnan(back["specials"][0]) and back["specials"][1:] == obj["specials"][1:]
    assert back["nested"] == {"__dunder_key__": 1} and back["rng"] == obj["rng"]
    assert type(back["scalar"]) is np.float64 and back["scalar"] == 2.5
    assert back["zero_d"].shape == () and back["zero_d"] == 7
    assert back["empty"].shape == (0, 3) and back["empty"].dtype == np.float16
    assert tree["state"]["__dict__"][0][1]["exp_avg"] == {"__tensor__": "state/0/exp_avg"}  # readable keys


def test_keys_that_join_alike_stay_apart(tmp_path):
    obj = {"a/b": np.ones(2), "a": {"b": np.zeros(2)}}
    back, _ = round_trip(obj, tmp_path)
    np.testing.assert_array_equal(back["a/b"], np.ones(2))
    np.testing.assert_array_equal(back["a"]["b"], np.zeros(2))


@pytest.mark.parametrize("value, what", [
    (object(), "a builtins.object"),
    (np.array(["x"], dtype=object), "dtype object"),
    ({"k": {1, 2}}, "a builtins.set"),
])
def test_what_a_checkpoint_cannot_hold_is_refused_naming_where(value, what):
    with pytest.raises(UnsupportedValueError, match=rf"checkpoint\['callbacks'\]\['x'\].*{what}"):
        split({"callbacks": {"x": value}}, numpy_leaf)


def test_a_tensor_the_file_lacks_is_named():
    with pytest.raises(ValueError, match="refers to tensor 'framework/model/0'"):
        join({"__tensor__": "framework/model/0"}, {})


def test_no_private_torch_api_and_no_old_format_writer_in_the_package():
    grep = subprocess.run(["grep", "-rnE", r"torch\._C\.|torch\.serialization\._", "hvdkit"], cwd=REPO,
                          capture_output=True, text=True)
    assert grep.stdout == "" and grep.returncode == 1, grep.stdout
    writers = subprocess.run(["grep", "-rln", "HVDKIT-SAFE-1", "hvdkit"], cwd=REPO, capture_output=True, text=True)
    assert writers.stdout.split() == ["hvdkit/tools/checkpoint_convert.py"]  # its reader, for converting only
