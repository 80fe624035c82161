"""The report writes nothing a run's files say as markup: every field is text, never HTML.

A realistic run folder (the records and metric lines the report's own tests
play and write: debate, expert iteration and code collaboration episodes, an
evaluation with its tournament, a league's metrics, a config) is made hostile
by walking its JSON: every string leaf, every dict key (a hostile twin beside
each original, so the report still finds what it looks up) and, in one mode,
every number holds markup. The file names and the run folder's name do too.
Each page is then parsed (:mod:`html.parser`): it may hold only the elements
and attributes the report writes itself, no comment, no link with a scheme,
and the markup must show up as text.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from baselines.eval.run import Evaluation
from baselines.report import write_report
from baselines.report.markup import Markup, escape, href, join, markup
from tests.baselines.eval.test_run import config as eval_config
from tests.baselines.eval.test_run import debate_policies
from tests.baselines.test_report import (
    code_collab_episode,
    debate_episode,
    expert_iteration_episode,
    is_trainer_run,
    magrpo_run,
    write_run,
)

PAYLOADS = (
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg onload=alert(1)>",
    "</script><script>alert(2)</script>",
    "</style></title></textarea></pre><script>alert(3)</script>",
    '<a href="javascript:alert(4)">x</a>',
    "javascript:alert(5)",
    "<!-- ",
    "<![CDATA[",
    "&lt;script&gt;",  # already escaped once: must show as typed, not as a tag
)
PAYLOAD = "".join(PAYLOADS)
# For names that cannot hold a slash (files) or whose slashes carry meaning (metric names).
FLAT_PAYLOAD = "".join(p for p in PAYLOADS if "/" not in p)

# The report's vocabulary: every element and attribute it writes (html.parser lowercases).
TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "a", "table", "tr",
    "th", "td", "ul", "li", "b", "i", "code", "span", "div", "pre", "details", "summary", "br",
    "hr", "svg", "text", "rect", "line", "polyline", "circle",
}  # fmt: skip
ATTRIBUTES = {
    "charset", "href", "id", "class", "title", "style", "open", "width", "height", "viewbox",
    "role", "aria-label", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r", "fill", "stroke",
    "stroke-width", "points", "text-anchor",
}  # fmt: skip


# --------------------------------------------------------------------- the run, made hostile


def realistic_run(root: Path) -> dict[str, Any]:
    """Every file of a run the report reads, as JSON values: ``{relative path: content}``.

    ``.jsonl`` files are lists of lines. Built from the fixtures the report's
    other tests use, so each record has the shape the trainers write.
    """
    rows, config = is_trainer_run()
    magrpo_rows, magrpo_config = magrpo_run()
    for row, extra in zip(rows, magrpo_rows, strict=False):
        row.update({k: v for k, v in extra.items() if k not in row})
    league = [
        {"league/rating/learner": 10.0, "league/rating/latest": -10.0, "league/mix/latest": 1.0},
        {
            "league/rating/learner": 40.0,
            "league/rating/snapshot_00001": -35.0,
            "league/mix/snapshot_00001": 0.75,
            "league/score/snapshot_00001": 0.625,
        },
    ]
    for row, extra in zip(rows, league, strict=False):
        row.update(extra)
    config |= {"dataset": magrpo_config["dataset"], "models": ["a", "b"]}

    Evaluation(eval_config(root, report=False), policies=debate_policies()).run()
    evaluation = root / "run"
    summary = json.loads((evaluation / "summary.json").read_text())
    eval_lines = [json.loads(line) for line in (evaluation / "episodes" / "eval.jsonl").open()]

    debates = [
        {**debate_episode(m)[0], "iteration": 0, "phase": "train"} for m in (None, "agent_0")
    ]
    other = {  # an environment without a family: its rewards are read from the record
        "env": "demo_v0",
        "title": "demo",
        "summary": {"rewards": {"agent_a": 1.0, "agent_b": -0.5}},
        "turns": [
            {
                "agent": "agent_a",
                "round": 1,
                "prompt": [{"role": "user", "content": "hi"}],
                "text": "a\nb",
                "details": {"parse_error": "no tag", "tags": ["x", "y"], "n": 1.5},
            }
        ],
        "iteration": 3,
    }
    return {
        "config.json": config,
        "metrics.jsonl": rows,
        "summary.json": summary,
        "league/eval/summary.json": summary,
        "episodes/iter_00000.jsonl": debates,
        "episodes/iter_00001.jsonl": [
            {**expert_iteration_episode(strategy="two_turn_feedback")[0], "iteration": 1}
        ],
        "episodes/iter_00002.jsonl": [{**code_collab_episode()[0], "iteration": 2}],
        "episodes/eval.jsonl": eval_lines,
        "episodes/other.jsonl": [other],
    }


def key_twins(key: str, index: int) -> list[str]:
    """Hostile names for a key: the key with the payload after it, and inside a metric's name."""
    twins = [f"{key}{PAYLOAD}{index}"]
    parts = key.split("/")
    if len(parts) >= 3:  # env/NAME/reward/total, optim/NAME/loss: the name in the middle
        twins.append("/".join([parts[0], parts[1] + FLAT_PAYLOAD, *parts[2:]]))
    return twins


def hostile(
    value: Any, leaf: Callable[[Any], Any], counter: Iterator[int], twins: bool = True
) -> Any:
    """``value`` with ``leaf`` applied to every scalar and a hostile twin beside every key."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = hostile(item, leaf, counter, twins)
            out[key] = item
            for twin in key_twins(key, next(counter)) if twins else ():
                out[twin] = item
        return out
    if isinstance(value, list):
        return [hostile(item, leaf, counter, twins) for item in value]
    return leaf(value)


# How the leaves change: strings carry the payload after them (prefixes and families still
# read), or every scalar (numbers, iterations, ranks) becomes the payload, or only keys change.
MODES: dict[str, Callable[[Any], Any]] = {
    "strings": lambda v: f"{v}{PAYLOAD}" if isinstance(v, str) else v,
    "every scalar": lambda v: PAYLOAD,
    "keys": lambda v: v,
}


def write_hostile_run(
    root: Path, files: dict[str, Any], leaf: Callable[[Any], Any], twins: bool = True
) -> Path:
    """The run under a hostile folder name, its episode files under hostile names too."""
    run = root / f'run"><svg onload=alert(1)>{FLAT_PAYLOAD}'
    counter = iter(range(10**9))
    names = iter(
        (f"javascript:alert({i})", f'iter"><img src=x onerror=alert({i})>') for i in range(99)
    )
    for relative, content in files.items():
        path = run / relative
        if relative.startswith("episodes/"):
            stem = path.stem
            stem = next(names)[0] if stem == "eval" else f"{stem}{next(names)[1]}"
            path = path.with_name(f"{stem}.jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        content = hostile(content, leaf, counter, twins)
        if relative.endswith(".jsonl"):
            path.write_text("".join(json.dumps(line) + "\n" for line in content))
        else:
            path.write_text(json.dumps(content))
    return run


# ------------------------------------------------------------------------ reading a page


class Page(HTMLParser):
    """What a page holds: its elements and attributes, comments, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.comments: list[str] = []
        self.declarations: list[str] = []
        self.text: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self._in_style = tag == "style"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        (self.styles if self._in_style else self.text).append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_decl(self, decl: str) -> None:
        self.declarations.append(decl)

    def unknown_decl(self, data: str) -> None:  # <![CDATA[...]]> and the like
        self.declarations.append(data)

    def handle_pi(self, data: str) -> None:
        self.declarations.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def foreign_markup(page: Page, styles: set[str]) -> list[str]:
    """Everything in ``page`` the report does not write itself; ``[]`` for a clean page."""
    found = [f"element <{tag}>" for tag, _ in page.tags if tag not in TAGS]
    for tag, attrs in page.tags:
        for name, value in attrs:
            if name not in ATTRIBUTES:
                found.append(f"attribute {name}={value!r} on <{tag}>")
            elif name == "href" and (urlsplit(value or "").scheme or ":" in (value or "")):
                found.append(f"link {value!r}")
            elif name == "style" and not re.fullmatch(
                r"background:rgb\(\d+,\d+,\d+\)", value or ""
            ):
                found.append(f"style {value!r}")
            elif name == "id" and not re.fullmatch(r"e\d+", value or ""):
                found.append(f"id {value!r}")
    found += [f"comment {c!r}" for c in page.comments]
    found += [f"declaration {d!r}" for d in page.declarations if d.lower() != "doctype html"]
    found += [f"style sheet {s[:60]!r}" for s in page.styles if s not in styles]
    return found


@pytest.fixture(scope="module")
def run_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return realistic_run(tmp_path_factory.mktemp("evaluation"))


@pytest.fixture(scope="module")
def style_sheets(run_files: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The style sheets of the same run's report, benign: the only ones a page may hold."""
    run = write_hostile_run(tmp_path_factory.mktemp("benign"), run_files, MODES["keys"], False)
    index = write_report(run)
    return {s for p in index.parent.iterdir() for s in parse(p.read_text()).styles}


@pytest.mark.parametrize("mode", list(MODES))
def test_markup_in_every_field_of_every_file_shows_as_text(tmp_path, run_files, style_sheets, mode):
    run = write_hostile_run(tmp_path, run_files, MODES[mode])
    index = write_report(run)
    pages = sorted(index.parent.iterdir())
    assert len(pages) == 1 + len(list((run / "episodes").iterdir()))  # no page overwritten
    for page in pages:
        parsed = parse(page.read_text(encoding="utf-8"))
        assert foreign_markup(parsed, style_sheets) == [], page.name
        # Not vacuous: the markup reached the page, as text a reader sees.
        assert '"><img src=x onerror=alert(1)>' in "".join(parsed.text), page.name
    # Every section read the hostile files (with no number left, no curve is drawn).
    headings = re.findall(r"<h[23]>([^<]+)", index.read_text())
    sections = ["Evaluation: scores", "Debate tournament: leaderboard", "Vote matrix"]
    sections += ["Config", "Transcripts"]
    if mode != "every scalar":
        sections += ["Training, per iteration", "League", "Every metric that changed"]
    assert set(sections) <= set(headings)


def test_the_transcript_table_escapes_a_records_iteration_and_phase(tmp_path):
    record = {**debate_episode()[0], "iteration": "<script>alert(1)</script>", "phase": "<b>x</b>"}
    index = write_report(write_run(tmp_path / "run", episodes={"iter_00000": [record]}))
    parsed = parse(index.read_text())
    assert {tag for tag, _ in parsed.tags} <= TAGS
    text = "".join(parsed.text)
    assert "<script>alert(1)</script>" in text and "<b>x</b>" in text


def test_a_file_name_is_a_relative_link_and_never_a_scheme(tmp_path):
    record = debate_episode()[0]
    files = {"javascript:alert(1)": [record], "index": [record]}
    index = write_report(write_run(tmp_path / "run", episodes=files))
    parsed = parse(index.read_text())
    links = [v for tag, attrs in parsed.tags if tag == "a" for k, v in attrs if k == "href"]
    assert links == ["index.jsonl.html", "javascript%3Aalert%281%29.html"]
    assert (index.parent / "javascript:alert(1).html").exists()
    # An episode file named index.jsonl has a page of its own: the front page stays.
    assert "<h2>Transcripts</h2>" in index.read_text()
    assert "<h2>" in (index.parent / "index.jsonl.html").read_text()


# ------------------------------------------------------------------------- the helper


def test_markup_escapes_what_it_is_given_and_keeps_what_it_built():
    cell = markup("<td>{}</td>", "<b>&</b>")
    assert cell == "<td>&lt;b&gt;&amp;&lt;/b&gt;</td>" and isinstance(cell, Markup)
    assert markup("<tr>{}</tr>", cell) == f"<tr>{cell}</tr>"  # built already: kept
    assert markup('<x a="{}">', "\"'") == '<x a="&quot;&#x27;">'
    assert markup("{:.1f}|{!r}", 2.25, "<") == "2.2|&#x27;&lt;&#x27;"  # spec, then escaped
    assert join(markup("<br>"), ["<", cell]) == "&lt;<br><td>&lt;b&gt;&amp;&lt;/b&gt;</td>"
    assert Markup("<p>") + "<" == "<p>&lt;" and "<" + Markup("<p>") == "&lt;<p>"
    assert isinstance(Markup("<p>") + "x", Markup)
    assert escape(cell) is cell and escape(3) == "3"


@pytest.mark.parametrize(
    ("template", "args", "error"),
    [
        ("<a href={}>", ("x",), "unquoted"),
        ("<a title='{}' href={}>", ("x", "y"), "unquoted"),
        ('<a href="{}">', ("javascript:alert(1)",), "href"),
        ('<a href="{}#x">', ("x",), "href"),
    ],
)
def test_markup_refuses_an_unquoted_attribute_and_a_raw_link(template, args, error):
    with pytest.raises((ValueError, TypeError), match=error):
        markup(template, *args)


def test_href_is_relative_and_escapes_everything_else():
    assert href("iter_00000.html") == "iter_00000.html"
    assert href("javascript:alert(1).html") == "javascript%3Aalert%281%29.html"
    assert href("a b\"<>'.html", "e1") == "a%20b%22%3C%3E%27.html#e1"
    assert href("", "e2") == "#e2"
    assert markup('<a href="{}">', href("x y")) == '<a href="x%20y">'


def markup_written_by_hand(folder: Path) -> list[str]:
    """Where a module of ``folder`` writes markup without the helper (markup.py aside)."""
    found = []
    for path in sorted(folder.glob("*.py")):
        if path.name == "markup.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.JoinedStr) and any(
                isinstance(v, ast.Constant) and re.search(r"<\w|</|&\w+;", str(v.value))
                for v in node.values
            ):
                found.append(f"{where}: an f-string writes markup")
            elif isinstance(node, ast.Import) and "html" in [a.name for a in node.names]:
                found.append(f"{where}: imports html")
            elif isinstance(node, ast.ImportFrom) and node.module == "html":
                found.append(f"{where}: imports from html")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("Markup", "markup")
                and not (node.args and isinstance(node.args[0], ast.Constant))
            ):
                found.append(f"{where}: {node.func.id} of something not a literal")
    return found


def test_every_page_is_built_through_the_helper():
    """No f-string with a tag, no html.escape, no Markup of anything but a literal."""
    assert markup_written_by_hand(Path(__file__).resolve().parents[2] / "baselines/report") == []
