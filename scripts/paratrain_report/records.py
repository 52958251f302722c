"""Reading run records (docs/HDF5_SCHEMA.md) into pandas: every 1-D compound dataset at the
root is a table; /memory_timeline/<config>/ groups are allocation timelines. Many files (a
sweep spread over many jobs) are read together and their tables concatenated by name."""
import os
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd


class ReportError(Exception):
    """A problem with an input file; the message starts with the file's path."""


# Columns each known table must have for the report to use it (a file from an older or
# foreign writer that lacks them is an error naming the file, not a KeyError deep inside).
REQUIRED_COLUMNS = {
    "model": ["size", "context_length", "batch_size", "precision", "attention", "warmup_steps",
              "status", "step_ms_mean", "step_ms_sd"],
    "model_breakdown": ["size", "context_length", "precision", "attention", "pass", "phase",
                        "family", "ms_per_step"],
    "model_roofline": ["size", "context_length", "precision", "attention", "pass", "phase", "family",
                       "gflop", "gbytes", "achieved_ms", "floor_ms", "ratio", "bound", "peak_tflops",
                       "copy_GBps"],
    "model_memory": ["size", "context_length", "precision", "attention", "status",
                     "peak_forward_bytes", "peak_train_step_bytes"],
    "attention": ["impl", "dtype", "batch", "heads", "seq", "head_dim", "causal", "status",
                  "fwd_ms", "bwd_ms", "fwdbwd_ms"],
    "allreduce": ["backend", "ranks", "bytes", "time_us", "busbw_GBps"],
    "ddp": ["ddp", "bucket_mb", "shard", "ranks", "precision", "step_ms"],
    "ddp_torch": ["ddp", "bucket_mb", "ranks", "precision", "step_ms"],
    "ddp_events": ["ddp", "bucket_mb", "shard", "rank", "stream", "name", "start_ms", "end_ms"],
    "train_steps": ["step", "loss", "step_ms"],
    "eval": ["step", "val_loss"],
    "torch_model": ["size", "context_length", "batch_size", "precision", "variant", "status",
                    "step_ms_mean"],
    "accumulation": ["case", "sum"],
}

MEMORY_TIMELINE_GROUP = "memory_timeline"
MEMORY_TIMELINE_FIELDS = ("time_s", "bytes_in_use", "delta_bytes", "category", "tag")
# Category codes of /memory_timeline/*/category (core/allocator.h's MemCategory order).
MEMORY_CATEGORIES = ["parameters", "gradients", "optimizer_state", "activations", "workspace", "other"]


@dataclass
class MemoryTimeline:
    file: str
    name: str  # the configuration, e.g. "tiny_ctx64_fp32_naive_w1"
    frame: pd.DataFrame  # one row per event: time_s, bytes_in_use, delta_bytes, category, tag


@dataclass
class RunFile:
    path: str
    attrs: dict
    tables: dict = field(default_factory=dict)  # name -> DataFrame
    memory_timelines: list = field(default_factory=list)

    @property
    def gpu(self):
        gpus = self.attrs.get("gpus", [])
        names = list(dict.fromkeys(gpus))  # unique, in rank order
        return ", ".join(names) if names else self.attrs.get("device", "")


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _attr_value(v):
    """h5py attribute → str, list of str, int, float."""
    if isinstance(v, np.ndarray):
        return [_text(x) if isinstance(x, (bytes, str)) else x.item() for x in v.ravel()]
    if isinstance(v, np.generic):
        return v.item()
    return _text(v)


def _string_column(values):
    return pd.Series([_text(v) for v in values], dtype=object)


def _table_frame(path, name, ds):
    if ds.ndim != 1:
        raise ReportError(f"{path}: table /{name} has shape {ds.shape}; tables are 1-D compound datasets")
    data = ds[()]
    columns = {}
    for col in data.dtype.names:
        kind = data.dtype[col].kind
        if kind in ("S", "O", "U"):
            columns[col] = _string_column(data[col])
        elif kind in ("i", "u", "f", "b"):
            columns[col] = pd.Series(data[col])
        else:
            raise ReportError(f"{path}: table /{name} column '{col}' has unsupported type {data.dtype[col]}")
    return pd.DataFrame(columns, columns=list(data.dtype.names))


def _memory_timeline(path, name, group):
    missing = [k for k in MEMORY_TIMELINE_FIELDS if k not in group]
    if missing:
        raise ReportError(f"{path}: /{MEMORY_TIMELINE_GROUP}/{name} lacks dataset(s) {', '.join(missing)}")
    arrays = {k: group[k][()] for k in MEMORY_TIMELINE_FIELDS}
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ReportError(f"{path}: /{MEMORY_TIMELINE_GROUP}/{name} datasets differ in length: {lengths}")
    frame = pd.DataFrame({k: arrays[k] for k in MEMORY_TIMELINE_FIELDS if k != "tag"})
    frame["tag"] = _string_column(arrays["tag"])
    return MemoryTimeline(path, name, frame)


def load_file(path):
    """One run record. Raises ReportError naming the file when it is not a readable run record."""
    if not os.path.isfile(path):
        raise ReportError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ReportError(f"{path}: not a readable HDF5 file ({e})") from None
    try:
        with f:
            run = RunFile(path, {k: _attr_value(v) for k, v in f.attrs.items()})
            for name, obj in f.items():
                if isinstance(obj, h5py.Dataset) and obj.dtype.names:
                    run.tables[name] = _table_frame(path, name, obj)
            timelines = f.get(MEMORY_TIMELINE_GROUP)
            if isinstance(timelines, h5py.Group):
                for name, group in timelines.items():
                    if not isinstance(group, h5py.Group):
                        raise ReportError(f"{path}: /{MEMORY_TIMELINE_GROUP}/{name} is not a group")
                    run.memory_timelines.append(_memory_timeline(path, name, group))
    except ReportError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise ReportError(f"{path}: cannot read ({type(e).__name__}: {e})") from None
    if not run.tables:
        raise ReportError(f"{path}: no result tables (not a paratrain run record?)")
    for name, frame in run.tables.items():
        missing = [c for c in REQUIRED_COLUMNS.get(name, []) if c not in frame.columns]
        if missing:
            raise ReportError(f"{path}: table /{name} lacks column(s) {', '.join(missing)}")
    return run


class Records:
    """Every file of a report, with tables concatenated across files by name."""

    def __init__(self, files):
        self.files = list(files)

    @classmethod
    def load(cls, paths):
        return cls(load_file(p) for p in paths)

    def table(self, name, attrs=()):
        """All rows of table `name` from every file, plus columns `file`, `gpu`, `world_size` and
        the requested root attributes (missing ones NaN). None when no file has a non-empty one."""
        frames = []
        for run in self.files:
            df = run.tables.get(name)
            if df is None or df.empty:
                continue
            df = df.copy()
            df["file"] = os.path.basename(run.path)
            df["gpu"] = run.gpu
            df["world_size"] = run.attrs.get("world_size", np.nan)
            for a in attrs:
                v = run.attrs.get(a, np.nan)
                df[a] = ", ".join(map(str, v)) if isinstance(v, list) else v
            frames.append(df)
        if not frames:
            return None
        return pd.concat(frames, ignore_index=True)

    def memory_timelines(self):
        return [t for run in self.files for t in run.memory_timelines]


# ---- writing (scripts that produce run records of their own, and test files) --------------

def _structured(rows):
    """Rows (dicts with the same keys, in column order) → numpy structured array in the schema's
    types: str → fixed-length null-padded UTF-8, int/bool → int64, float → float64."""
    names = list(rows[0])
    fields = []
    for n in names:
        v = rows[0][n]
        if isinstance(v, str):
            fields.append((n, f"S{max(1, max(len(r[n].encode('utf-8')) for r in rows))}"))
        elif isinstance(v, (bool, int, np.integer)):
            fields.append((n, "<i8"))
        else:
            fields.append((n, "<f8"))
    return np.array([tuple(r[n].encode("utf-8") if isinstance(r[n], str) else r[n] for n in names)
                     for r in rows], dtype=fields)


def write_record(path, tables, attrs=None, datasets=None, overwrite=False):
    """Write a run record atomically (temporary file, then rename). tables: name -> list of row
    dicts; attrs: root attributes (str, int, float, list of str); datasets: path -> 1-D values
    (a list of str becomes a fixed-length string dataset). Refuses to replace an existing file
    unless overwrite."""
    if os.path.exists(path) and not overwrite:
        raise ReportError(f"{path}: exists (pass --overwrite to replace it)")
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with h5py.File(tmp, "w", libver=("earliest", "v108")) as f:
            f.attrs["schema_version"] = np.int64(1)
            for k, v in (attrs or {}).items():
                if isinstance(v, np.ndarray) and v.dtype.kind in "US":
                    v = [x.decode() if isinstance(x, bytes) else str(x) for x in v.ravel()]
                if isinstance(v, (list, tuple)):
                    f.attrs[k] = np.array([str(x) for x in v], dtype=h5py.string_dtype())
                elif isinstance(v, (bool, int, np.integer)):
                    f.attrs[k] = np.int64(v)
                elif isinstance(v, str):
                    f.attrs[k] = str(v)  # numpy.str_ (e.g. a GPU name) has no HDF5 conversion path
                else:
                    f.attrs[k] = v
            for name, rows in tables.items():
                if not rows:
                    raise ValueError(f"table {name} has no rows")
                f.create_dataset(name, data=_structured(rows))
            for p, v in (datasets or {}).items():
                if len(v) and isinstance(v[0], str):
                    enc = [s.encode("utf-8") for s in v]
                    f.create_dataset(p, data=np.array(enc, dtype=f"S{max(1, max(map(len, enc)))}"))
                else:
                    f.create_dataset(p, data=np.asarray(v))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
