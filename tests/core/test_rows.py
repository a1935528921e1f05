"""The one nested-row helper every adapter's ``shard`` uses: containers rebuilt as they were, every part cut
alike, and an error that names the data when its parts disagree."""

import numpy as np
import pytest

from hvdkit.core.rows import leaves, map_leaves, num_rows


def test_nested_inputs_are_cut_alike_and_keep_their_shape():
    data = {"image": np.arange(10).reshape(5, 2), "extra": (np.arange(5), [np.arange(5) * 2])}
    idx = np.array([4, 0])
    cut = map_leaves(data, lambda a: a[idx])
    assert list(cut) == ["image", "extra"] and isinstance(cut["extra"], tuple) and isinstance(cut["extra"][1], list)
    assert cut["image"].tolist() == [[8, 9], [0, 1]] and cut["extra"][1][0].tolist() == [8, 0]
    assert len(leaves(data)) == 3 and num_rows(data) == 5


def test_parts_that_disagree_or_hold_no_array_are_named():
    with pytest.raises(ValueError, match=r"^x's parts must hold the same number of rows, got 5 and 4$"):
        num_rows((np.zeros(5), np.zeros(4)), "x")
    with pytest.raises(ValueError, match="data must hold at least one array, got an empty dict"):
        num_rows({})
    with pytest.raises(TypeError, match="y must hold arrays with a length, got int"):
        num_rows(3, "y")
