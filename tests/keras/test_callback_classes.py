"""hvdkit's Keras callbacks are explicit classes a type checker sees: each an EngineBridge subclass with
the core class's constructor written out (no type(), no __signature__), and Horovod's hvd.callbacks names
apart from hvdkit's. A subprocess: importing TensorFlow in the test process would slow every later test."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import REPO, requires_horovod

pytestmark = [requires_horovod, pytest.mark.timeout(240)]

PROBE = """
import ast, inspect, json, os
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import hvdkit.callbacks as core, hvdkit.compat.horovod.callbacks as core_compat
import hvdkit.keras.callbacks as kcb, hvdkit.compat.horovod.keras_callbacks as compat
from hvdkit.keras.engine_bridge import EngineBridge
out = {"classes": {}, "compat": {}}
def describe(cls, core_cls):
    src = inspect.getsource(cls)
    tree = ast.parse(src)
    init = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    return {"bridge": issubclass(cls, EngineBridge), "core_class": cls.core_class is core_cls,
            "written_init": bool(init), "patched": "__signature__" in vars(cls.__init__),
            "sig_same": str(inspect.signature(cls)) == str(inspect.signature(core_cls)),
            "module": cls.__module__}
for n in kcb.__all__:
    out["classes"][n] = describe(getattr(kcb, n), getattr(core, n))
for n in ("BroadcastGlobalVariablesCallback", "MetricAverageCallback", "LearningRateWarmupCallback",
          "LearningRateScheduleCallback"):
    out["compat"][n] = describe(getattr(kcb, n), getattr(core_compat, n))
    out["compat"][n]["same_object"] = getattr(kcb, n) is getattr(compat, n)
out["star"] = sorted(k for k in vars(kcb) if not k.startswith("_") and k[0].isupper())
print("JSON" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def probe():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], capture_output=True, text=True,
                          timeout=200, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("JSON", 1)[1])


def test_every_keras_callback_is_a_written_out_class_with_the_core_constructor(probe):
    for name, c in probe["classes"].items():
        assert c == {"bridge": True, "core_class": True, "written_init": True, "patched": False, "sig_same": True,
                     "module": c["module"]}, name
        assert c["module"] == "hvdkit.keras.callbacks", name


def test_horovods_callbacks_live_in_the_compat_module_not_in_hvdkits_namespace(probe):
    for name, c in probe["compat"].items():
        assert c["bridge"] and c["core_class"] and c["written_init"] and c["sig_same"] and c["same_object"], name
        assert c["module"] == "hvdkit.compat.horovod.keras_callbacks", name
    # hvdkit.keras.callbacks' own namespace holds hvdkit's classes (and EngineBridge's module's), not Horovod's
    assert not any(n.endswith("Callback") for n in probe["star"]), probe["star"]
