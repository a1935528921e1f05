"""Which TensorFlow op errors the elastic retry loop counts as a lost worker (hvdkit.tensorflow.elastic).

The Gloo message is the one a survivor printed in CI (stop 27) when its peer's host vanished mid-step: it has
no "Horovod" in it, only the node's name, and the Keras elastic job died instead of resetting."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
pytest.importorskip("horovod.tensorflow")

from hvdkit.tensorflow.elastic import is_worker_failure  # noqa: E402

pytestmark = pytest.mark.timeout(120)

GLOO_TIMEOUT_IN_A_STEP = (
    "Graph execution error:\n\n"
    "[/tmp/hvdkit-horovod-build-g2ndkpee/horovod-0.28.1/third_party/compatible17_gloo/gloo/transport/tcp/"
    "unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete\n"
    "\t [[{{node sgd/hvdkit.sgd.0}}]] [Op:__inference_multi_step_on_iterator_691]")


def _unknown(message: str) -> Exception:
    return tf.errors.UnknownError(None, None, message)


@pytest.mark.parametrize("message", [
    GLOO_TIMEOUT_IN_A_STEP,
    # the same Gloo failure without the node (an eager op): Gloo's source path is enough
    "[third_party/gloo/gloo/transport/tcp/pair.cc:589] Connection closed by peer [10.77.0.12]:53421",
    # hvdkit's names, no Gloo text: a node that is one of hvdkit's collectives
    "Read error\n\t [[{{node hvdkit.broadcast_variables.3}}]]",
    "Graph execution error:\n\nDetected at node hvdkit.grad.7 defined at (most recent call last):\n  ...",
    # Horovod's own texts and default op names, as upstream's run recognised them
    "Horovod has been shut down. This was caused by an exception on one of the ranks.",
    "Timed out\n\t [[{{node HorovodAllreduce_grads_0}}]]",
])
def test_a_collective_failing_is_a_lost_worker(message):
    assert is_worker_failure(_unknown(message))


def test_other_errors_are_not(tmp_path):
    @tf.function
    def gather(params, idx):
        return tf.gather(params, idx)

    with pytest.raises(tf.errors.InvalidArgumentError) as real:  # a real op error, from a node that is not Horovod's
        gather(tf.ones(3), tf.constant([10]))
    assert not is_worker_failure(real.value)
    assert not is_worker_failure(_unknown("Read error\n\t [[{{node model/dense/MatMul}}]]"))
    assert not is_worker_failure(ValueError("Horovod has not been initialized"))  # not a TensorFlow op error
