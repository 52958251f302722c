"""The command line the PyTorch comparison scripts share (compare_torch.py, compare_torch_ddp.py):
their protocol and record options, comma lists, and one error per bad value. No torch needed."""
import datetime
import os


def add_protocol_arguments(ap, record, warmup, warmup_help, steps_help, out_note=""):
    """--warmup, --steps, --seed, --out (default <record>-<time>.h5) and --overwrite."""
    ap.add_argument("--warmup", type=int, default=warmup, help=warmup_help)
    ap.add_argument("--steps", type=int, default=10, help=steps_help)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--out", default="", help=f"HDF5 run record (default: {record}-<time>.h5){out_note}")
    ap.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def split_list(text):
    """'a,b,,c' → ['a', 'b', 'c']."""
    return [x for x in text.split(",") if x]


def check_choices(ap, flag, values, allowed, what):
    """One error naming the first of `values` not in `allowed`."""
    for v in values:
        if v not in allowed:
            ap.error(f"--{flag}: unknown {what} '{v}' (expected {', '.join(allowed)})")


def resolve_out(ap, args, record):
    """--out defaults to <record>-<time>.h5; an existing file is refused without --overwrite."""
    if not args.out:
        args.out = datetime.datetime.now().strftime(f"{record}-%Y%m%d-%H%M%S.h5")
    if os.path.exists(args.out) and not args.overwrite:
        ap.error(f"--out {args.out} exists (pass --overwrite to replace it)")


def check_attention(ap, attention):
    if attention not in ("naive", "sdpa"):
        ap.error(f"--attention must be naive or sdpa (got '{attention}')")
