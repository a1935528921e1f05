"""BatchMeans: sample-weighted epoch means of per-batch 0-d tensors, read once."""

import pytest

torch = pytest.importorskip("torch")

from hvdkit.torch.batch_means import BatchMeans  # noqa: E402


def test_weighted_means_match_a_per_sample_average():
    acc = BatchMeans(["loss", "acc"], torch.device("cpu"))
    batches = [(torch.tensor(1.0), torch.tensor(0.5), 4), (torch.tensor(4.0), torch.tensor(1.0), 2)]
    for loss, a, n in batches:
        acc.add([loss, a], n)
    assert acc.count == 6
    assert acc.means() == pytest.approx({"loss": (1 * 4 + 4 * 2) / 6, "acc": (0.5 * 4 + 1.0 * 2) / 6})
    assert acc.sums() == pytest.approx([12.0, 4.0])


def test_empty_epoch_gives_zeros_and_float32_values_are_summed_in_float64():
    assert BatchMeans(["loss"], torch.device("cpu")).means() == {"loss": 0.0}
    acc = BatchMeans(["loss"], torch.device("cpu"))
    for _ in range(1000):
        acc.add([torch.tensor(0.1, dtype=torch.float32)], 3)
    assert acc.means()["loss"] == pytest.approx(float(torch.tensor(0.1, dtype=torch.float32)), rel=1e-12)


def test_a_metric_may_give_a_python_number_but_not_a_vector():
    # A metric ending in .item() is common; one giving a value per sample must fail at its first batch,
    # naming it, not when the epoch's means are taken.
    means = BatchMeans(["loss", "acc"], torch.device("cpu"))
    means.add([torch.tensor(1.0), 0.5], 2)
    means.add([torch.tensor([3.0]), torch.tensor(1.0)], 2)
    assert means.means() == {"loss": 2.0, "acc": 0.75}
    with pytest.raises(ValueError, match=r"'acc' must give the batch's mean as a number or a one-element tensor, "
                                         r"got a tensor of shape \[4\]"):
        means.add([torch.tensor(1.0), torch.ones(4)], 4)
