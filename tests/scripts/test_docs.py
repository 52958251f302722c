"""The documents stay references (docs/reports/README.md): README, docs/*.md, src/, cuda/ and
scripts/ tell no session history and nothing of the lent GPU machines; docs/ outside the dated
reports stays under 120 KiB; every relative link resolves; every report is named
YYYY-MM-DD_<topic>_<gpu>.md."""
import os
import re

from conftest import REPO

HISTORY = re.compile(r"session [0-9]+|lent GPU", re.IGNORECASE)
DOCS = os.path.join(REPO, "docs")
REPORTS = os.path.join(DOCS, "reports")
LIMIT_BYTES = 120 * 1024
CODE_TREES = ("src", "cuda", "scripts")
LINK = re.compile(r"\]\(([^)\s]+)\)")
REPORT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}_[a-z0-9.+-]+_[a-z0-9-]+\.md$")


def reference_docs():
    docs = sorted(os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))
    return [os.path.join(REPO, "README.md"), *docs]


def reports():
    if not os.path.isdir(REPORTS):
        return []
    return sorted(os.path.join(REPORTS, f) for f in os.listdir(REPORTS) if f.endswith(".md"))


def code_files():
    for tree in CODE_TREES:
        for root, dirs, files in os.walk(os.path.join(REPO, tree)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in sorted(files):
                yield os.path.join(root, f)


def text_of(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""  # a binary file (a fixture, an image): no prose in it


def test_no_session_history_outside_the_reports():
    hits = []
    for path in [*reference_docs(), *code_files()]:
        for n, line in enumerate(text_of(path).splitlines(), 1):
            if HISTORY.search(line):
                hits.append(f"{os.path.relpath(path, REPO)}:{n}: {line.strip()[:120]}")
    assert not hits, "history and measurement sessions belong in docs/reports/:\n" + "\n".join(hits)


def test_docs_outside_the_reports_stay_under_the_limit():
    total = 0
    for root, dirs, files in os.walk(DOCS):
        dirs[:] = [d for d in dirs if os.path.join(root, d) != REPORTS]
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    assert total <= LIMIT_BYTES, (f"docs/ outside docs/reports/ holds {total} bytes, over {LIMIT_BYTES}: "
                                  "move history into a dated report")


def test_every_relative_link_resolves():
    broken = []
    for path in [*reference_docs(), *reports()]:
        for target in LINK.findall(text_of(path)):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not os.path.exists(os.path.join(os.path.dirname(path), target.split("#")[0])):
                broken.append(f"{os.path.relpath(path, REPO)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_reports_are_named_by_date_topic_and_gpu():
    names = [os.path.basename(p) for p in reports() if os.path.basename(p) != "README.md"]
    assert names, "docs/reports/ holds no report"
    bad = [n for n in names if not REPORT_NAME.match(n)]
    assert not bad, f"not YYYY-MM-DD_<topic>_<gpu>.md: {bad}"
