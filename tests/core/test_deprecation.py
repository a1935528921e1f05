"""Renamed keyword arguments: the old name works for one release with a DeprecationWarning naming the new one."""

import inspect
import warnings

import pytest

from hvdkit.core.deprecation import reject_unknown, renamed_kwarg
from hvdkit.core.sharding import shard_indices


def api(*, drop_last=False, **deprecated):
    drop_last = renamed_kwarg("api", deprecated, "drop_remainder", "drop_last", drop_last, False)
    reject_unknown("api", deprecated)
    return drop_last


def test_the_old_name_warns_naming_the_new_one_and_the_callers_line():
    with pytest.warns(DeprecationWarning, match=r"api\(drop_remainder=\.\.\.\) is deprecated: use drop_last=") as rec:
        line = inspect.currentframe().f_lineno + 1
        assert api(drop_remainder=True) is True
    assert (rec[0].filename, rec[0].lineno) == (__file__, line)  # the caller's line, not the renamed function's


def test_the_new_name_is_silent_and_both_names_or_a_typo_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert api(drop_last=True) is True
    with pytest.raises(TypeError, match=r"api\(\) got both drop_remainder= and drop_last="):
        api(drop_last=True, drop_remainder=True)
    with pytest.raises(TypeError, match="api\\(\\) got an unexpected keyword argument 'drop_lats'"):
        api(drop_lats=True)


def test_shard_indices_speak_drop_last():
    assert shard_indices(5, 1, 2, drop_last=True) == [1, 3]
    with pytest.raises(ValueError, match="drop_last=True leaves no sample"):
        shard_indices(1, 0, 2, drop_last=True)


def test_the_elastic_loops_sampler_is_no_longer_core_api():
    import hvdkit.core

    assert "ElasticIndexSampler" not in hvdkit.core.__all__
    with pytest.warns(DeprecationWarning, match="hvdkit.core.ElasticIndexSampler is deprecated"):
        cls = hvdkit.core.ElasticIndexSampler
    from hvdkit.core.elastic.sampler import ElasticIndexSampler

    assert cls is ElasticIndexSampler
