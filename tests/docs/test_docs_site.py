"""The MkDocs site builds with --strict (broken links and references fail it) from the docstrings alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Loaded through PYTHONPATH into the build process: the API pages must come from griffe's static analysis,
# so an import of a framework or of Horovod during the build is a failure, not a slow success.
_NO_FRAMEWORKS = '''
import importlib.abc, sys
class _Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "tensorflow", "keras", "horovod"}:
            raise ImportError(f"the docs build imported {name}")
        return None
sys.meta_path.insert(0, _Refuse())
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    tmp = tmp_path_factory.mktemp("docs")
    guard = tmp / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(_NO_FRAMEWORKS)
    out = tmp / "site"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(guard), str(REPO)]), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "the docs build imported" not in proc.stderr
    return out


@pytest.mark.timeout(300)
def test_the_site_builds_strictly_with_every_guide_page(site: Path):
    for page in ("install", "pytorch", "keras", "tensorflow", "checkpoints", "elastic", "clusters", "docker",
                 "gpu", "migrating-from-horovod", "threat-model", "spark", "benchmarks", "checkpoint-format"):
        assert (site / page / "index.html").is_file(), page


@pytest.mark.timeout(300)
def test_links_to_repository_files_outside_docs_become_their_paths(site: Path):
    """docs/hooks/repo_links.py: a forge shows the link; the site, which lacks the file, shows its path."""
    assert "<code>examples/tensorflow_custom_loop.py</code>" in (site / "tensorflow/index.html").read_text()


@pytest.mark.timeout(300)
def test_api_pages_are_generated_from_the_docstrings(site: Path):
    torch_api = (site / "api/torch/index.html").read_text()
    assert 'id="hvdkit.torch.Trainer"' in torch_api
    assert 'id="hvdkit.torch.distribute.distribute"' in torch_api
    callbacks_api = (site / "api/callbacks/index.html").read_text()
    assert 'id="hvdkit.callbacks.LearningRateWarmup"' in callbacks_api
    core_api = (site / "api/core/index.html").read_text()
    assert 'id="hvdkit.core.Callback"' in core_api


@pytest.mark.timeout(300)
def test_the_pages_load_no_web_fonts(site: Path):
    """Material links Google Fonts unless ``theme.font`` is false; the pages must render offline."""
    for html in site.rglob("*.html"):
        assert "fonts.googleapis.com" not in html.read_text(), html
