"""Average gradients over workers with Horovod (dense, IndexedSlices and None alike): a list of gradients,
or a DistributedGradientTape that accepts Keras 3 variables as well as tf.Variables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import horovod.tensorflow as hvd
import keras
import tensorflow as tf

from hvdkit.core.collectives import resolve_reduction
from hvdkit.core.comm import under_elastic_driver
from hvdkit.core.hang_report import heartbeat
from hvdkit.tensorflow.variables import to_tf_variable

_XLA_MESSAGE = (
    "Horovod ops cannot run inside an XLA-compiled function: hvdkit's Horovod build leaves out "
    "xla_mpi_ops.cc (it does not compile against TensorFlow >= 2.16). Compile the model with "
    "jit_compile=False (on a GPU, Keras's jit_compile='auto' resolves to True), or drop jit_compile=True "
    "from the tf.function that computes the gradients."
)


def in_xla_context() -> bool:
    """True while tracing a function that XLA will compile."""
    try:
        from tensorflow.python.framework import ops as tf_ops
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - private API moved
        return False
    if tf.executing_eagerly():
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph()))


def allreduce_gradients(grads: Sequence[Any], *, op: Any = "average", compression: Any = "none",
                        name_prefix: str = "hvdkit.grad", prescale_factor: float = 1.0,
                        postscale_factor: float = 1.0, process_set: Any = None, sparse_as_dense: bool = False,
                        device_dense: str = "", device_sparse: str = "", groups: int | None = None) -> list[Any]:
    """Allreduce every gradient (``None`` stays ``None``); raises a clear error under XLA. ``op`` and
    ``compression`` take hvdkit's names or Horovod's objects; ``groups=k``: ``k`` grouped allreduces."""
    compressor, reduce_op = resolve_reduction(hvd, compression, op)
    process_set = hvd.global_process_set if process_set is None else process_set
    if process_set.size() == 1 and not under_elastic_driver():
        # Decided at trace time: under elastic training a worker that traced alone must still
        # allreduce once others join.
        return list(grads)
    if in_xla_context():
        raise RuntimeError(_XLA_MESSAGE)
    present = [i for i, g in enumerate(grads) if g is not None]
    values = [grads[i] for i in present]
    if sparse_as_dense:
        values = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in values]
    kw = {"op": reduce_op, "prescale_factor": prescale_factor, "postscale_factor": postscale_factor,
          "process_set": process_set}
    if groups and all(not isinstance(g, tf.IndexedSlices) for g in values):
        reduced: list[Any] = []
        size = -(-len(values) // groups)
        for k in range(0, len(values), size):
            reduced += hvd.grouped_allreduce(values[k:k + size], compression=compressor, device_dense=device_dense,
                                             device_sparse=device_sparse, **kw)
    else:
        reduced = [hvd.allreduce(g, compression=compressor, name=f"{name_prefix}.{i}", device_dense=device_dense,
                                 device_sparse=device_sparse, **kw) for i, g in zip(present, values)]
    result: list[Any] = [None] * len(grads)
    for i, g in zip(present, reduced):
        result[i] = g
    return result


def _unconnected_is_zero(value: Any) -> bool:
    """Whether ``unconnected_gradients`` (a ``tf.UnconnectedGradients`` or its name) asks for zeros."""
    try:
        return tf.UnconnectedGradients(value) == tf.UnconnectedGradients.ZERO
    except ValueError:
        raise ValueError("unconnected_gradients must be tf.UnconnectedGradients.NONE or .ZERO (or 'none', 'zero'), "
                         f"got {value!r}") from None


def _tf_source(s: Any) -> Any:
    return s if isinstance(s, tf.Tensor) else to_tf_variable(s)


def _name(source: Any) -> str:
    return str(getattr(source, "path", None) or getattr(source, "name", None) or source)


def agree_on_none(grads: Sequence[Any], names: Sequence[str], process_set: Any) -> list[Any]:
    """``grads``, once every rank of ``process_set`` agrees which are None: one small allreduce of how many
    ranks have each (a variable used on some ranks only, by rank-dependent code, would leave each rank
    waiting in a different allreduce). A disagreement raises on every rank alike (they all see the same
    counts), naming the variables."""
    present = [0 if g is None else 1 for g in grads]
    what = ("the gradient of a variable is None on some ranks only (it is used on some ranks only): every "
            "rank must use the same variables, or register it with register_local_source()")
    if tf.executing_eagerly():
        size = process_set.size()
        counts = hvd.allreduce(tf.constant(present, tf.int32), op=hvd.Sum, process_set=process_set,
                               name="hvdkit.tape.gradients_present")
        bad = [f"{names[k]} (present on {c} of {size} ranks)" for k, c in enumerate(counts.numpy().tolist())
               if 0 < c < size]
        if bad:
            raise ValueError(f"{what}: {', '.join(bad)}")
        return list(grads)
    # Traced, the size is read when the step runs (an elastic reset changes it), and the allreduce's input
    # depends on that read: from a constant alone, Grappler's constant folding would run the allreduce once,
    # when the function is optimised, and keep its result. Ranks that traced before and after a reset would
    # then reduce different tensors, and wait for each other for ever.
    size = hvd.size_op(process_set.process_set_id)
    counts = hvd.allreduce(tf.constant(present, tf.int32) * tf.sign(size), op=hvd.Sum, process_set=process_set,
                           name="hvdkit.tape.gradients_present")
    # the allreduces after this wait for the check, which fails the step on every rank alike
    disagree = tf.logical_and(counts > 0, counts < size)
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(disagree)),
                                [what + "; the variables:", tf.boolean_mask(tf.constant(list(names)), disagree)],
                                summarize=len(names))
    out = list(grads)
    with tf.control_dependencies([check]):
        for i, g in enumerate(out):
            if isinstance(g, tf.IndexedSlices):
                out[i] = tf.IndexedSlices(tf.identity(g.values), g.indices, g.dense_shape)
            elif g is not None:
                out[i] = tf.identity(g)
    return out


class DistributedGradientTape:
    """Horovod 0.28.1's ``hvd.DistributedGradientTape`` (same signature; Horovod's tape reduces) for Keras 3
    variables too, which Horovod's refuses: they are mapped to their tf.Variables, and the structure of
    ``sources`` is kept. ``compression`` and ``op`` also take hvdkit's names (``"fp16"``, ``"sum"``...)."""

    def __init__(self, gradtape: tf.GradientTape, device_dense: str = "", device_sparse: str = "",
                 compression: Any = hvd.Compression.none, sparse_as_dense: bool = False, op: Any = hvd.Average,
                 gradient_predivide_factor: float = 1.0, num_groups: int = 0, groups: Any = None,
                 process_set: Any = hvd.global_process_set, scale_local_gradients: bool = True) -> None:
        if not isinstance(gradtape, tf.GradientTape):
            raise TypeError(f"tape must be a tf.GradientTape, got {type(gradtape).__name__}")
        compression, op = resolve_reduction(hvd, compression, op)
        if isinstance(groups, list):
            groups = [[to_tf_variable(v) for v in group] for group in groups]
        self.tape = gradtape
        self._hvd_tape = hvd.DistributedGradientTape(
            gradtape, device_dense=device_dense, device_sparse=device_sparse, compression=compression,
            sparse_as_dense=sparse_as_dense, op=op, gradient_predivide_factor=gradient_predivide_factor,
            num_groups=num_groups, groups=groups, process_set=process_set,
            scale_local_gradients=scale_local_gradients)
        # Horovod's tape hands the gradients of the sources not registered as local to this function
        reduce = self._hvd_tape._allreduce_grads

        def agreed_then_reduced(grads: list[Any], variables: list[Any], *args: Any) -> Any:
            # traced under the elastic driver, the check stays in: the size may grow after a reset
            if grads and (process_set.size() > 1 or (under_elastic_driver() and not tf.executing_eagerly())):
                grads = agree_on_none(grads, [_name(v) for v in variables], process_set)
            return reduce(grads, variables, *args)
        self._hvd_tape._allreduce_grads = agreed_then_reduced

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None, use_generic_names: bool = False,
                 unconnected_gradients: Any = tf.UnconnectedGradients.NONE) -> Any:
        """The gradients of ``target`` w.r.t. ``sources``, reduced over workers, shaped as ``sources``.

        A gradient that is None on some ranks only is an error on every rank, naming the variable (each
        rank would wait for the others in a different allreduce). ``unconnected_gradients`` as
        ``tf.GradientTape.gradient`` takes it: with ``ZERO`` (or ``"zero"``) a source the target does not
        depend on gets zeros, reduced like every other gradient, so ranks whose losses use different
        variables (a branch taken on some ranks) still reduce the same tensors."""
        if in_xla_context():
            raise RuntimeError(_XLA_MESSAGE)
        heartbeat()  # a step, or (traced) training has begun: the hang report may watch this rank
        zero = _unconnected_is_zero(unconnected_gradients)
        flat = [_tf_source(s) for s in tf.nest.flatten(sources)]
        if not zero:
            grads = self._hvd_tape.gradient(target, flat, output_gradients, use_generic_names)
            return tf.nest.pack_sequence_as(sources, list(grads))
        # Horovod's tape takes no unconnected_gradients and leaves a None out of its allreduces: fill the
        # zeros in on the way into its reduction (its per-tape function) so they are reduced too.
        reduce = self._hvd_tape._allreduce_grads

        def filled(grads: Sequence[Any], variables: Sequence[Any], *rest: Any) -> Any:
            return reduce([tf.zeros_like(v) if g is None else g for g, v in zip(grads, variables)], variables, *rest)

        self._hvd_tape._allreduce_grads = filled
        try:
            grads = self._hvd_tape.gradient(target, flat, output_gradients, use_generic_names)
        finally:
            self._hvd_tape._allreduce_grads = reduce
        grads = [tf.zeros_like(s) if g is None else g for g, s in zip(grads, flat)]  # local sources' too
        return tf.nest.pack_sequence_as(sources, grads)

    def register_local_source(self, source: Any) -> None:
        """Horovod's ``register_local_source``: this variable's gradient is not reduced over workers."""
        self._hvd_tape.register_local_source(_tf_source(source))

    def get_local_and_global_gradients(self, target: Any, sources: Any, output_gradients: Any = None,
                                       use_generic_names: bool = False) -> tuple[list[Any], list[Any]]:
        """Horovod's ``(local (var, grad) pairs, global (var, grad) pairs)``, with the variables as given."""
        srcs = list(sources)
        grads = self.gradient(target, srcs, output_gradients, use_generic_names)
        local = {id(s) for s in srcs if _tf_source(s).ref() in self._hvd_tape._local_sources}
        pairs = list(zip(srcs, grads))
        return [p for p in pairs if id(p[0]) in local], [p for p in pairs if id(p[0]) not in local]

    def __getattr__(self, name: str) -> Any:  # watch(), stop_recording(), ... go to the tape
        return getattr(self.tape, name)


def PartialDistributedGradientTape(gradtape: tf.GradientTape, device_dense: str = "", device_sparse: str = "",
                                   compression: Any = hvd.Compression.none, sparse_as_dense: bool = False,
                                   op: Any = hvd.Average, gradient_predivide_factor: float = 1.0,
                                   num_groups: int = 0, groups: Any = None, process_set: Any = hvd.global_process_set,
                                   local_layers: Any = None, scale_local_gradients: bool = True
                                   ) -> DistributedGradientTape:
    """Horovod's ``PartialDistributedGradientTape``: a :class:`DistributedGradientTape` whose ``local_layers``'
    trainable weights (a Keras layer or a list of them) keep their local gradients."""
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups, groups, process_set, scale_local_gradients)
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    if not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError(f"local_layers must be Keras layers (or a list of them), got {local_layers!r}")
    for layer in local_layers:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape
