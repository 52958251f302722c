"""What every section builder shares: the natural orders of sizes, precisions and strategies,
sorting, column selection, device notes and sizes in words."""
import functools
import math

from .model_sizes import SIZE_ORDER
from .render import Column

MIB = float(1 << 20)
OOM = "OOM"

_ORDERS = {
    "size": SIZE_ORDER,
    "precision": ["fp32", "tf32", "bf16", "fp8"],
    # Records since bench ddp wrote the strategy table's order (root attribute ddp_order) use theirs
    # (_use_ddp_order); this is the order of older records, which lack it.
    "ddp": ["none", "naive", "flat", "overlap", "bucketed", "reduce_scatter", "bucketed_reduce_scatter"],
    "shard": ["none", "broadcast", "zero1"],
    "grad_comm": ["fp32", "bf16"],
    "zero1_prefetch": ["n/a", "off", "on"],
    "impl": ["naive", "flash"],
    "pass": ["inference", "train-step"],
    "fused": ["off", "on"],
}


def _from_table(name, attrs=None, none_if_missing=False):
    """Decorator: the builder f(rec, df) gets the records' table `name` (with the root attributes
    `attrs` as columns); without the table it is not called and gives no section ([]), or None
    (none_if_missing: the helpers that return frames)."""
    def wrap(build):
        @functools.wraps(build)
        def from_records(rec):
            df = rec.table(name) if attrs is None else rec.table(name, attrs=attrs)
            if df is None:
                return None if none_if_missing else []
            return build(rec, df)
        return from_records
    return wrap


def _use_ddp_order(rec):
    """The --ddp strategies in the order the binary's strategy table gives them, from any record
    that carries it."""
    for run in rec.files:
        order = run.attrs.get("ddp_order")
        if order:
            _ORDERS["ddp"] = list(order)
            return


def _sort(df, by):
    """Stable sort; sizes, precisions and strategies in their natural order, others as values."""
    by = [c for c in by if c in df.columns]

    def key(col):
        order = _ORDERS.get(col.name)
        if order is None:
            return col
        return col.map(lambda v: order.index(v) if v in order else len(order))

    return df.sort_values(by, key=key, kind="stable").reset_index(drop=True) if by else df


def _present(df, cols):
    return [c for c in cols if c in df.columns]


def _device_note(df):
    gpus = [g for g in dict.fromkeys(df["gpu"]) if g]
    return f" Device: {', '.join(gpus)}." if gpus else ""


def _device_columns(df):
    """A device column only when the rows come from more than one kind of device."""
    return [Column("gpu", "device")] if df["gpu"].nunique() > 1 else []


def _keep(columns, df):
    return [c for c in columns if c.key in df.columns]


def _varying(df, *names):
    """Columns for the configuration fields (mode, fused) that take more than one value in df:
    constant ones would only repeat themselves on every row."""
    return [Column(n, n) for n in names if n in df.columns and df[n].nunique() > 1]


def _ratio(a, b):
    return a / b if (b and math.isfinite(b) and math.isfinite(a)) else float("nan")


def human_bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{int(n)} B"

