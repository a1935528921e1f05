"""hvdkit's reproducible, patched Horovod build (see ``horovod_wheel``)."""

