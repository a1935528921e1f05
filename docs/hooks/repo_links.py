"""MkDocs hook: links from a page to repository files outside docs/ (an example script, benchmarks/README.md).

Such links work where the Markdown is read on a forge, but the site does not contain those files, so
``mkdocs build --strict`` would reject them. A link whose target exists in the repository becomes a link
to ``repo_url`` when mkdocs.yml sets one, else the path as code text. A link to a file that does not exist
is left alone, so the strict build still fails on it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    repo = docs_dir.parent
    page_dir = (docs_dir / page.file.src_path).parent

    def rewrite(match: re.Match[str]) -> str:
        text, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        path = (page_dir / target).resolve()
        if docs_dir in path.parents or not path.is_relative_to(repo) or not path.exists():
            return match.group(0)
        relative = path.relative_to(repo).as_posix()
        if config.get("repo_url"):
            return f"[{text}]({config['repo_url'].rstrip('/')}/blob/main/{relative}{anchor})"
        return text if text.strip("`") == relative else f"{text} (`{relative}`)"

    return _LINK.sub(rewrite, markdown)
