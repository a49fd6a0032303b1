"""The README's list of the ``crawl`` command's options is the one the parser builds from the
settings table (``CrawlConfig``'s field metadata), word for word.

Run this file (``python tests/docs/test_readme_options.py``) to rewrite the list after
changing a setting.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BEGIN = "<!-- crawl options: generated from CrawlConfig (beamcrawl/core/runtime/config.py) -->"
END = "<!-- end of crawl options -->"


def generated() -> str:
    from beamcrawl.cli.args import option_list
    from beamcrawl.cli.main import crawl_parser

    return option_list(crawl_parser())


def readme_block(text: str) -> str:
    (block,) = re.findall(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), text, re.DOTALL)
    return block


def test_readme_lists_every_crawl_option_as_the_parser_defines_it() -> None:
    text = README.read_text(encoding="utf-8")
    command_line = text.split("\n## Command line\n", 1)[1].split("\n## ", 1)[0]
    assert readme_block(command_line) == generated(), "run: python tests/docs/test_readme_options.py"


def test_the_list_names_each_default_once_as_the_table_does() -> None:
    from beamcrawl.cli.args import default_text
    from beamcrawl.core.runtime.config import MiB, option_fields

    listed = generated()
    assert "`--max-sitemap-bytes BYTES`" in listed and f"Default {50 * MiB} (50 MiB)." in listed
    assert "`--fetch-documents[=true|false]`" in listed and "`--exit-when-idle`" in listed
    for f, opt in option_fields():
        flag = opt.flag or "--" + f.name.replace("_", "-")
        (item,) = [line for line in listed.splitlines() if line.startswith(f"- `{flag}")]
        if isinstance(f.default, (int, float, str)) and not opt.switch:
            assert item.endswith(f" Default {opt.shown or default_text(f.default, opt.unit)}."), item
            assert item.count("Default") == 1, item  # no default retyped in the help text


# A default the README's prose names beside its flag: "`--round-window` (default 60 s)",
# "`--max-body-bytes`, 2 MiB", "up to `--defer-max` (30 days)".
PROSE_DEFAULT = re.compile(
    r"`(--[a-z-]+)(?: [A-Z]+)?`[\s(,]{1,6}(?:default )?([0-9][0-9,]*(?:\.[0-9]+)?)"
    r"(?: ?(s|h|d|days?|weeks?|MiB|B/s|segments)\b)?"
)
UNITS = {
    None: 1,
    "s": 1,
    "B/s": 1,
    "segments": 1,
    "h": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "week": 7 * 86400,
    "weeks": 7 * 86400,
    "MiB": 1024 * 1024,
}


def test_the_prose_names_each_default_as_the_table_has_it() -> None:
    from beamcrawl.core.runtime.config import flag_of, option_fields

    defaults = {flag_of(f, opt): f.default for f, opt in option_fields()}
    text = README.read_text(encoding="utf-8")
    prose = text.split("\n## Command line\n", 1)[1].split("\n## ", 1)[0].split(END, 1)[1]
    named = [
        (m.group(1), float(m.group(2).replace(",", "")) * UNITS[m.group(3)], m.group(0))
        for m in PROSE_DEFAULT.finditer(prose)
        if m.group(1) in defaults
    ]
    assert len(named) >= 25
    wrong = [said for flag, value, said in named if value != defaults[flag]]
    assert not wrong, wrong


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    text = README.read_text(encoding="utf-8")
    README.write_text(text.replace(readme_block(text), generated()), encoding="utf-8")
