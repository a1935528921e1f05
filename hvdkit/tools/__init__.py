"""The ``hvdkit`` command's tools: the Horovod build, ``doctor``, ``plan``, checkpoint conversion and the launchers
(``elastic-local``, ``slurm-gloo``). They import the training core; the core never imports them."""
