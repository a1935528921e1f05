"""One vocabulary across adapters: the same concept has the same name, signature and return type in
hvdkit.torch, hvdkit.keras and hvdkit.tensorflow (a subprocess per check: importing both frameworks
in the test process would slow every later test)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import REPO, requires_horovod

pytestmark = [requires_horovod, pytest.mark.timeout(300)]

# Concepts every training adapter (torch, keras) offers; the TF custom-loop adapter offers the subset
# that makes sense without an optimizer wrapper or a fit loop.
TRAINING = {"init", "rank", "size", "local_rank", "local_size", "shard", "is_distributed", "History", "HorovodComm"}
CUSTOM_LOOP = {"init", "rank", "size", "local_rank", "local_size", "shard", "HorovodComm"}

PROBE = """
import inspect, json, os
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import hvdkit.torch, hvdkit.keras, hvdkit.tensorflow
import hvdkit.callbacks as core_cbs, hvdkit.keras.callbacks as keras_cbs
out = {}
for name in ("torch", "keras", "tensorflow"):
    mod = getattr(hvdkit, name)
    names = {}
    for n in mod.__all__:
        obj = getattr(mod, n)
        try:
            sig = str(inspect.signature(obj))
        except (TypeError, ValueError):
            sig = None
        names[n] = {"kind": "class" if inspect.isclass(obj) else "function", "sig": sig,
                    "id": f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', n)}"}
    out[name] = names
out["callbacks"] = {n: {"core": str(inspect.signature(getattr(core_cbs, n))),
                        "keras": str(inspect.signature(getattr(keras_cbs, n))),
                        "core_classmethods": sorted(k for k, v in vars(getattr(core_cbs, n)).items()
                                                    if isinstance(v, classmethod)),
                        "keras_has": sorted(k for k in dir(getattr(keras_cbs, n)) if not k.startswith("_"))}
                    for n in core_cbs.__all__}
out["keras_callbacks_all"] = sorted(keras_cbs.__all__)
print("JSON" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def exported():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], capture_output=True, text=True,
                          timeout=240, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("JSON", 1)[1])


def test_every_adapter_exports_the_shared_concepts(exported):
    for adapter in ("torch", "keras"):
        assert TRAINING <= set(exported[adapter]), (adapter, TRAINING - set(exported[adapter]))
    assert CUSTOM_LOOP <= set(exported["tensorflow"]), CUSTOM_LOOP - set(exported["tensorflow"])


def test_a_name_in_two_adapters_has_the_same_kind_and_signature(exported):
    adapters = ("torch", "keras", "tensorflow")
    for name in set().union(*(exported[a] for a in adapters)):
        seen = {a: exported[a][name] for a in adapters if name in exported[a]}
        if len(seen) < 2:
            continue
        kinds = {v["kind"] for v in seen.values()}
        assert len(kinds) == 1, (name, seen)
        if name == "HorovodComm":  # one class per framework binding, same interface (the core's Comm)
            continue
        if name == "fit_elastic":  # (trainer, train_data, ...) vs Keras's (model, x, y, ...): same keywords
            for sig in (v["sig"] for v in seen.values()):
                assert "*, epochs: 'int', batch_size: 'int'" in sig and "validation_data" in sig, (name, seen)
                assert "commit_every: 'int' = 10, " in sig and sig.endswith("-> 'History'"), (name, seen)
            continue
        sigs = {v["sig"] for v in seen.values()}
        assert len(sigs) == 1, (name, seen)
    # History is one class, not two look-alikes
    assert exported["torch"]["History"]["id"] == exported["keras"]["History"]["id"] == "hvdkit.core.history.History"


def test_keras_callbacks_are_the_core_callbacks(exported):
    cbs = exported["callbacks"]
    assert exported["keras_callbacks_all"] == sorted(cbs)
    for name, c in cbs.items():
        assert c["keras"] == c["core"], (name, c)  # same constructor, nothing restated by hand
        assert set(c["core_classmethods"]) <= set(c["keras_has"]), (name, c)  # e.g. LearningRateSchedule.from_name
