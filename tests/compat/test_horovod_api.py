"""Horovod 0.28.1's API through ``import hvdkit.torch as hvd`` / ``import hvdkit.tensorflow as hvd``: the values
of the collectives and of a DistributedOptimizer step across two real ranks are what Horovod defines."""

import json

import pytest
from helpers import horovodrun, requires_horovod

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(300)]


def _ranks(out):
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.fixture(scope="module")
def torch_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("hvd_torch")
    horovodrun("horovod_api_torch.py", str(out), timeout=240)
    return _ranks(out)


def test_torch_init_and_build_queries(torch_ranks):
    for r, res in enumerate(torch_ranks):
        assert (res["rank"], res["size"], res["is_initialized"]) == (r, 2, True)
        assert res["mpi_built"] and res["gloo_built"] and not res["nccl_built"]  # hvdkit's CPU build


def test_torch_collectives_return_horovods_values(torch_ranks):
    # rank r contributes x = [r + 1, 10 (r + 1)]
    for r, res in enumerate(torch_ranks):
        assert res["allreduce_avg"] == [1.5, 15.0]
        for k in ("allreduce_sum", "allreduce_inplace", "allreduce_async", "allreduce_fp16"):
            assert res[k] == [3.0, 30.0], k
        assert res["allreduce_max"] == [2.0, 20.0]
        assert res["grouped_allreduce"] == [[3.0, 30.0], [6.0, 60.0]]
        assert res["allgather"] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]  # rank r gives r + 1 rows
        assert res["allgather_async"] == [0.0, 1.0]
        assert res["broadcast"] == [6.0]  # root 1 holds 1 + 5
        assert res["broadcast_inplace"] == [7.0]  # root 0 holds 0 + 7
        assert res["alltoall"] == [[0.0, 10.0], [1.0, 11.0]][r]
        assert res["reducescatter"] == [[3.0, 4.0], [6.0, 8.0]][r]
        assert res["broadcast_object"] == {"from": 1}
        assert res["allgather_object"] == [0, 3]
        assert res["join"] == 1  # rank 1 joined last
        assert res["elastic"] == [True] * 4
    # a process set of rank 1 alone (hvd.init(process_sets="dynamic") + add_process_set)
    assert "allreduce_pset" not in torch_ranks[0] and torch_ranks[1]["allreduce_pset"] == [2.0, 20.0]
    assert torch_ranks[0]["timeline_written"]


@pytest.mark.parametrize(("key", "lr_times_grad"), [
    ("opt_average", 0.15),   # mean of the ranks' gradients 1 and 2, times lr 0.1
    ("opt_sum", 0.3),        # op=hvd.Sum
    ("opt_fp16", 0.15),      # compression=hvd.Compression.fp16
    ("opt_predivide", 0.15),  # gradient_predivide_factor=2: divided before, multiplied after: still the mean
    ("opt_bpps2", 0.4),      # backward_passes_per_step=2: local sums 1+2 and 2+3, then averaged
    ("opt_adasum", 0.15),    # op=hvd.Adasum of parallel gradients g, 2g: 0*g + 0.75*2g
])
def test_torch_distributed_optimizer_arguments(torch_ranks, key, lr_times_grad):
    seed = str(["opt_average", "opt_sum", "opt_fp16", "opt_predivide", "opt_bpps2", "opt_adasum"].index(key))
    start = torch_ranks[0]["start_weights"][seed]
    assert torch_ranks[1]["start_weights"][seed] == start  # broadcast_parameters from rank 0
    assert torch_ranks[0][key] == torch_ranks[1][key]  # the same update on every rank
    assert torch_ranks[0][key] == pytest.approx([w - lr_times_grad for w in start], abs=1e-6)


@pytest.fixture(scope="module")
def tf_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("hvd_tf")
    horovodrun("horovod_api_tf.py", str(out), timeout=240)
    return _ranks(out)


def test_tensorflow_collectives_return_horovods_values(tf_ranks):
    for r, res in enumerate(tf_ranks):
        assert (res["rank"], res["size"], res["is_initialized"], res["mpi_built"]) == (r, 2, True, True)
        assert res["allreduce_avg"] == [1.5, 15.0]
        for k in ("allreduce_sum", "allreduce_fp16", "allreduce_scaled"):  # scaled: x2 before, x0.5 after
            assert res[k] == [3.0, 30.0], k
        assert res["grouped_allreduce"] == [[3.0, 30.0], [6.0, 60.0]]
        assert res["allgather"] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
        assert res["broadcast"] == [6.0]
        assert res["alltoall"] == [[0.0, 10.0], [1.0, 11.0]][r]
        assert res["reducescatter"] == [[3.0, 4.0], [6.0, 8.0]][r]
        assert res["broadcast_object"] == {"from": 1}
        assert res["allgather_object"] == [0, 3]
        assert res["elastic"] == [True] * 3
        assert "Use keras.layers.BatchNormalization" in res["syncbn_error"]


def test_tape_unconnected_gradients_zero_reduces_a_variable_only_some_ranks_use(tf_ranks):
    # a: gradients 1 and 2, averaged; b: unused on rank 0 (zeros), 3 on rank 1, averaged: 1.5 on both ranks
    for res in tf_ranks:
        assert res["unconnected_zero"] == [[1.5], [1.5]]
        assert res["unconnected_zero_by_name"] == [[1.5], [1.5]]
        assert res["unconnected_bad"] == ("unconnected_gradients must be tf.UnconnectedGradients.NONE or .ZERO "
                                          "(or 'none', 'zero'), got 'zeros'")


def test_tensorflow_variables_broadcast_whether_tf_or_keras(tf_ranks):
    for res in tf_ranks:
        assert res["broadcast_variables"] == [[0.0, 1.0], [10.0]]  # rank 0's tf.Variable and keras.Variable
        assert res["broadcast_inplace"] == [21.0]  # broadcast_ from rank 1


def test_tensorflow_distributed_gradient_tape_arguments(tf_ranks):
    # rank r's gradient is r + 1 for each element
    for r, res in enumerate(tf_ranks):
        for k in ("tape_average", "tape_fp16", "tape_predivide", "tape_keras_variable", "tape_tf_function",
                  "tape_adasum"):  # Adasum of g and 2g: 0*g + 0.75*2g
            assert res[k] == pytest.approx([1.5, 1.5]), k
        assert res["tape_sum"] == [3.0, 3.0]
        # PartialDistributedGradientTape: shared layer averaged, local layer kept (divided by size, as Horovod)
        assert res["partial"] == [[[1.5]], [[(r + 1) / 2]]]
        # DistributedOptimizer(keras SGD(0.1), op=Sum): 1 - 0.1 * (1 + 2)
        assert res["optimizer_sum"] == pytest.approx([0.7, 0.7])
        # backward_passes_per_step=2 with gradients r + 1 twice: sums 2 and 4, averaged 3 (mean of passes: 1.5)
        assert res["optimizer_bpps_sum"] == pytest.approx([0.7, 0.7])
        assert res["optimizer_bpps_mean"] == pytest.approx([0.85, 0.85])
