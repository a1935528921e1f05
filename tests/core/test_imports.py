"""Importing hvdkit or its core pulls in no framework; a missing framework names the extra to install."""

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_core_imports_no_framework():
    out = run("""
        import sys
        import hvdkit, hvdkit.core, hvdkit.callbacks, hvdkit.core.engine, hvdkit.tools.doctor, hvdkit.cli
        heavy = sorted(m for m in ("torch", "tensorflow", "keras", "horovod", "ray") if m in sys.modules)
        print("HEAVY", heavy)
    """)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout


BLOCK = """
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == {mod!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}")
    sys.meta_path.insert(0, Block())
    try:
        import {adapter}
    except ImportError as e:
        print("ERR", e)
"""


def test_missing_torch_names_the_extra():
    out = run(BLOCK.format(mod="torch", adapter="hvdkit.torch"))
    assert "ERR" in out.stdout and "pip install 'hvdkit[torch]'" in out.stdout, out.stdout + out.stderr


def test_missing_horovod_names_the_build_command():
    out = run(BLOCK.format(mod="horovod", adapter="hvdkit.torch"))
    assert "ERR" in out.stdout and "hvdkit build-horovod" in out.stdout, out.stdout + out.stderr


def test_missing_ray_names_the_extra():
    out = run(BLOCK.format(mod="ray", adapter="hvdkit.integrations.ray"))
    assert "ERR" in out.stdout and "pip install 'hvdkit[ray]'" in out.stdout, out.stdout + out.stderr


def test_optional_dependencies_name_their_extra_when_used():
    tb = run(textwrap.dedent(BLOCK.format(mod="tensorboardX", adapter="hvdkit.callbacks")) + textwrap.dedent("""
        from types import SimpleNamespace
        from hvdkit.callbacks import TensorBoard
        try:
            TensorBoard("tb").on_train_begin(SimpleNamespace(is_root=True))
        except ImportError as e:
            print("ERR", e)
    """))
    assert "ERR" in tb.stdout and "pip install 'hvdkit[tensorboard]'" in tb.stdout, tb.stdout + tb.stderr
    block = textwrap.dedent(BLOCK.format(mod="hostlist", adapter="hvdkit.runtime.environments.slurm"))
    slurm = run(block + textwrap.dedent("""
        from hvdkit.runtime.environments.slurm import expand_hostlist
        try:
            expand_hostlist("node[1-2]")
        except ImportError as e:
            print("ERR", e)
    """))
    assert "ERR" in slurm.stdout and "pip install 'hvdkit[slurm]'" in slurm.stdout, slurm.stdout + slurm.stderr
