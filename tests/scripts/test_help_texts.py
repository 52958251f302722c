"""Every subcommand's --help: each option's text says what it does and its default in at most three
lines at boost's 80 columns, with no measurements or pointers to benchmark figures (those live in
docs/BENCHMARKS.md and docs/reports/)."""
import os
import re
import subprocess

import pytest

BIN = os.environ.get("PARATRAIN_BIN", "")
SUBCOMMANDS = ["train", "bench model", "bench attention", "bench allreduce", "bench ddp", "bench gemm",
               "demo accumulation", "plan"]
MAX_LINES = 3
FIGURE = re.compile(r"\d\s?(%|ms\b|us\b|µs\b|TFLOP|[GT]B/s|GB\b)|docs/BENCHMARKS|docs/reports|[Ss]ession \d")


def option_texts(help_text):
    """{option: [its description's lines]} from boost's help layout."""
    options, current = {}, None
    for line in help_text.splitlines():
        m = re.match(r"^  (--?[\w-]+)", line)
        if m:
            current = m.group(1)
            options[current] = [line]
        elif current and line.startswith(" " * 10) and line.strip():
            options[current].append(line)
        else:
            current = None
    return options


@pytest.fixture(scope="module")
def helps():
    if not BIN:
        pytest.skip("PARATRAIN_BIN is not set: run through ctest")
    out = {}
    for sub in SUBCOMMANDS:
        proc = subprocess.run([BIN, *sub.split(), "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{sub} --help: {proc.stderr}"
        out[sub] = option_texts(proc.stdout)
        assert out[sub], f"{sub} --help lists no options"
    return out


def test_every_option_help_fits_three_lines(helps):
    long = [f"{sub} {opt}: {len(lines)} lines" for sub, opts in helps.items() for opt, lines in opts.items()
            if len(lines) > MAX_LINES]
    assert not long, "help texts over three lines:\n" + "\n".join(long)


def description(lines):
    """The text of an option's help without its name, 'arg' and default."""
    first = re.sub(r"^  --?[\w-]+( arg)?( \(=[^)]*\))?", "", lines[0])
    return " ".join(l.strip() for l in [first, *lines[1:]])


def test_no_help_quotes_a_measurement(helps):
    quoting = [f"{sub} {opt}: {description(lines)}" for sub, opts in helps.items()
               for opt, lines in opts.items() if FIGURE.search(description(lines))]
    assert not quoting, "help texts with figures or benchmark pointers:\n" + "\n".join(quoting)


def test_the_checks_see_a_long_text_and_a_figure():
    text = "  --peak-tflops arg (=1)    first line\n" + "".join(f"                  line {i}\n" for i in range(4))
    lines = option_texts(text)["--peak-tflops"]
    assert len(lines) == 5 and not FIGURE.search(description(lines))
    assert FIGURE.search(description(["  --x arg (=0)   XL: -2 to -3 % a step"]))
