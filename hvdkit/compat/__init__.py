"""Compatibility with other libraries' APIs: :mod:`hvdkit.compat.horovod` holds Horovod 0.28.1's names."""
