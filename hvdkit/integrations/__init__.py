"""Other systems that start hvdkit's ranks: Ray (:mod:`hvdkit.integrations.ray`) and Spark
(:mod:`hvdkit.integrations.spark`). Each needs its extra (``pip install 'hvdkit[ray]'``, ``'hvdkit[spark]'``)."""
