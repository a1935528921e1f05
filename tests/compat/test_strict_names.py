"""A Horovod script that names something outside Horovod 0.28.1's public API gets an AttributeError naming
both packages, under real horovodrun, instead of silently reaching Horovod's internals."""

import pytest
from helpers import horovodrun, requires_horovod, tagged_json

pytestmark = [requires_horovod, pytest.mark.horovod, pytest.mark.timeout(120)]

SCRIPT = """
import json
import hvdkit.torch as hvd
hvd.init()
try:
    hvd.allreduce_asynch  # a typo of allreduce_async
except AttributeError as e:
    print("STRICT " + json.dumps({"size": hvd.size(), "error": str(e)}), flush=True)
"""


def test_a_typo_in_a_horovod_script_names_both_packages(tmp_path):
    script = tmp_path / "typo.py"
    script.write_text(SCRIPT)
    rows = tagged_json(horovodrun(script, timeout=100).stdout, "STRICT")
    assert rows == [{"size": 2, "error": "module 'hvdkit.torch' has no attribute 'allreduce_asynch' (not in "
                                         "hvdkit.torch nor in Horovod 0.28.1's horovod.torch API)"}] * 2, rows
