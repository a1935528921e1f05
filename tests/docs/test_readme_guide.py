"""The README stays a landing page: short, the three ways in first, the set-up commands, working links."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def _code_blocks(text: str) -> list[tuple[str, list[str]]]:
    return [(lang, body.splitlines()) for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def test_readme_is_at_most_250_lines():
    assert len(README.splitlines()) <= 250


def test_three_ways_in_come_first_each_a_snippet_of_at_most_10_lines():
    first_section = re.search(r"^## (.+)$", README, re.M)
    assert first_section and first_section.group(1) == "Three ways in"
    blocks = _code_blocks(_section("Three ways in"))
    assert len(blocks) == 3, blocks
    (lang1, run), (lang2, keras), (lang3, compose) = blocks
    for lines in (run, keras, compose):
        assert 1 <= len(lines) <= 10, lines
    assert lang1 == "bash" and any(line.startswith("horovodrun ") and "examples/" in line for line in run)
    assert lang2 == "python" and "model.fit(" in "\n".join(keras)
    assert "hvdkit.keras.callbacks" in "\n".join(keras)
    assert lang3 == "bash" and "docker/compose.sh up 2" in "\n".join(compose)
    assert "docker/compose.sh down" in "\n".join(compose)
    # the first screen: all three before line 60
    assert README.index("docker/compose.sh down") < len("\n".join(README.splitlines()[:60]))


def test_the_two_setup_commands_stay_documented_exactly():
    lines = [line.split("#")[0].strip() for _, body in _code_blocks(_section("Set-up: two commands")) for line in body]
    assert "./run.sh train" in lines and "./run.sh test" in lines


def test_readme_links_point_at_files_that_exist():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, missing


def test_numbers_live_in_the_benchmark_and_gpu_pages_not_in_the_readme():
    """Medians and interquartile ranges go stale in a landing page; docs/benchmarks.md dates them."""
    assert not re.search(r"\bIQR\b|\bmedian\b|\d\.\d{3}x?\s*\(\d", README, re.I)
