"""`scripts/report FILE.h5 [FILE.h5 ...] --out DIR [--format md,tex] [--plots]`"""
import argparse
import os
import sys

from . import render, sections
from .records import Records, ReportError

FORMATS = ("md", "tex", "csv")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="report",
        description="Tables (Markdown, LaTeX, CSV) and plots (PNG) from paratrain's HDF5 run records. "
                    "Any number of files, e.g. one per job of a sweep; their tables are read together. "
                    "Kinds of benchmark absent from the files are skipped.")
    ap.add_argument("files", nargs="+", metavar="FILE.h5", help="run records (paratrain --out files)")
    ap.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    ap.add_argument("--format", default="md,tex",
                    help="comma list of md (report.md), tex (report.tex, a LaTeX document), csv "
                         "(one file per table at full precision); default md,tex")
    ap.add_argument("--plots", action="store_true", help="also draw the figures into DIR/plots/")
    ap.add_argument("--title", default="paratrain results", help="heading of the report")
    args = ap.parse_args(argv)
    args.formats = [f for f in args.format.split(",") if f]
    bad = [f for f in args.formats if f not in FORMATS]
    if bad or not args.formats:
        ap.error(f"--format: unknown format(s) {', '.join(bad) or '(none)'}; choose from {', '.join(FORMATS)}")
    return args


def write(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        rec = Records.load(args.files)
    except ReportError as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    built = sections.build_all(rec)
    os.makedirs(args.out, exist_ok=True)
    sources = "Sources: " + ", ".join(os.path.basename(f.path) for f in rec.files) + "."
    written = []
    if "md" in args.formats:
        body = [f"# {args.title}", "", sources, ""] + [render.markdown(s) for s in built]
        written.append(os.path.join(args.out, "report.md"))
        write(written[-1], "\n".join(body))
    if "tex" in args.formats:
        written.append(os.path.join(args.out, "report.tex"))
        write(written[-1], render.latex_document(built, args.title))
    if "csv" in args.formats:
        os.makedirs(os.path.join(args.out, "csv"), exist_ok=True)
        for s in built:
            written.append(os.path.join(args.out, "csv", f"{s.key}.csv"))
            write(written[-1], render.csv(s))
    if args.plots:
        from . import plots  # matplotlib only when asked for
        written += plots.plot_all(rec, os.path.join(args.out, "plots"))
    print(f"report: {len(rec.files)} file(s), {len(built)} table(s): "
          + (", ".join(s.key for s in built) or "none"))
    for p in written:
        print(f"  {p}")
    return 0
