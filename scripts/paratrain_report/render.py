"""Writers for report sections: Markdown (GitHub tables), LaTeX (booktabs) and CSV.

A Section is a titled table: its frame holds the values (numbers stay numbers, so CSV keeps full
precision) and its columns say how to print each one. Strings in a numeric column (e.g. "OOM")
are printed as they are; NaN is printed as an en dash."""
import math
import numbers
from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Column:
    key: str  # column of the section's frame
    header: str  # printed header, units included
    fmt: str = "{}"  # str.format pattern for non-missing values

    def text(self, value):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        if isinstance(value, str):
            return value
        try:
            return self.fmt.format(value)
        except (ValueError, TypeError):
            return str(value)


@dataclass
class Section:
    key: str  # file stem and anchor, e.g. "precision"
    title: str
    description: str  # one paragraph: what the rows are and how values were derived
    columns: list
    frame: pd.DataFrame
    notes: list = field(default_factory=list)  # lines printed under the table

    def cells(self):
        """Printed rows: one list of strings per row of the frame."""
        return [[c.text(row[c.key]) for c in self.columns] for _, row in self.frame.iterrows()]


def _is_numeric(section, col):
    values = section.frame[col.key]
    return pd.api.types.is_numeric_dtype(values) or all(
        isinstance(v, numbers.Number) or v in ("OOM", "oom") for v in values)


def markdown(section):
    heads = [c.header for c in section.columns]
    align = ["---:" if _is_numeric(section, c) else ":---" for c in section.columns]
    lines = [f"## {section.title}", "", section.description, "",
             "| " + " | ".join(h.replace("|", "\\|") for h in heads) + " |",
             "|" + "|".join(align) + "|"]
    for row in section.cells():
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    lines.append("")
    lines += [f"- {n}" for n in section.notes]
    if section.notes:
        lines.append("")
    return "\n".join(lines)


_TEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "×": r"$\times$", "±": r"$\pm$", "–": "--", "≈": r"$\approx$", "·": r"$\cdot$",
    "√": r"$\surd$", "≤": r"$\le$", "≥": r"$\ge$", "→": r"$\to$", "µ": r"$\mu$",
    "−": r"$-$", "…": r"\ldots{}", "↔": r"$\leftrightarrow$", "²": r"$^2$",
}


def tex_escape(text):
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in str(text))


def tex_prose(text):
    """Escaped text with Markdown `code` spans as \texttt."""
    parts = str(text).split("`")
    return "".join(rf"\texttt{{{tex_escape(p)}}}" if i % 2 else tex_escape(p) for i, p in enumerate(parts))


def latex(section):
    spec = "".join("r" if _is_numeric(section, c) else "l" for c in section.columns)
    lines = [f"% {section.key}", r"\begin{table}[htbp]", r"\centering\small",
             rf"\caption{{{tex_escape(section.title)}. {tex_prose(section.description)}}}",
             rf"\label{{tab:{section.key}}}",
             rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(tex_escape(c.header) for c in section.columns) + r" \\", r"\midrule"]
    for row in section.cells():
        lines.append(" & ".join(tex_escape(x) for x in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    for n in section.notes:
        lines.append(r"\par\footnotesize " + tex_prose(n))
    lines += [r"\end{table}", ""]
    return "\n".join(lines)


def latex_document(sections, title):
    head = [r"\documentclass{article}", r"\usepackage[utf8]{inputenc}", r"\usepackage{booktabs}",
            r"\usepackage[margin=1.5cm,landscape]{geometry}", r"\begin{document}",
            rf"\section*{{{tex_escape(title)}}}", ""]
    return "\n".join(head + [latex(s) for s in sections] + [r"\end{document}", ""])


def csv(section):
    """The section's values at full precision, headed by the frame's column names; the device
    column always (printed tables show it only when the rows come from several devices)."""
    keys = [c.key for c in section.columns]
    if "gpu" in section.frame and "gpu" not in keys:
        keys.insert(0, "gpu")
    return section.frame[keys].to_csv(index=False)
