"""ElasticIndexSampler: the framework-free data position of elastic training."""

from collections import Counter

import numpy as np
import pytest

from hvdkit.core.elastic.sampler import ElasticIndexSampler


def deal(sampler, size):
    return [sampler.layout(r, size) for r in range(size)]


def test_one_epoch_over_two_workers_trains_every_sample_once_plus_padding():
    s = ElasticIndexSampler(10, seed=1)
    shares = deal(s, 3)
    assert {len(x) for x in shares} == {4}  # ceil(10 / 3), padded by wrapping
    seen = Counter(int(i) for x in shares for i in x)
    assert set(seen) == set(range(10)) and sum(seen.values()) == 12


def test_rest_of_epoch_redealt_over_new_world_size_without_repeats():
    s = ElasticIndexSampler(40, seed=2)
    before = deal(s, 2)  # 20 each
    s.record(3, 4)  # every worker trained 3 batches of 4
    trained = {int(i) for x in before for i in x[:12]}
    assert s.remaining == 40 - 24
    after = deal(s, 3)
    rest = [int(i) for x in after for i in x]
    assert set(rest) == set(range(40)) - trained  # exactly the untrained samples (plus wrap padding)
    assert len(rest) - len(set(rest)) < 3


def test_state_round_trip_and_epochs_reshuffle():
    s = ElasticIndexSampler(33, seed=5)
    deal(s, 2)
    s.record(2, 5)
    t = ElasticIndexSampler(33, seed=5)
    t.load_state_dict(s.state_dict())
    assert t.remaining == s.remaining == 13
    assert np.array_equal(deal(t, 1)[0], deal(s, 1)[0])
    e0 = s.order()
    s.set_epoch(1)
    assert s.remaining == 33 and not np.array_equal(s.order(), e0)
    assert np.array_equal(ElasticIndexSampler(33, shuffle=False).order(), np.arange(33))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="num_samples"):
        ElasticIndexSampler(0)
    s = ElasticIndexSampler(8)
    with pytest.raises(ValueError, match="rank"):
        s.layout(2, 2)
    with pytest.raises(RuntimeError, match="layout"):
        s.record(1, 2)
    with pytest.raises(ValueError, match="8 samples"):
        ElasticIndexSampler(9).load_state_dict(s.state_dict())
