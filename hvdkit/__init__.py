"""hvdkit: Horovod data-parallel training made practical on current PyTorch, TensorFlow and Keras 3.

Importing ``hvdkit`` (or ``hvdkit.core``/``hvdkit.callbacks``) imports neither
torch nor TensorFlow; the adapters live in ``hvdkit.torch``, ``hvdkit.keras``
and ``hvdkit.tensorflow``.
"""

__version__ = "0.1.0"
