#!/usr/bin/env python3
"""Text to token shards for `paratrain train --data`: tokenises text files (one document each) or
JSONL (one document per line, its "text" field) and writes llm.c-format shards, a held-out
validation split and manifest.json (data/README.md describes the formats and the manifest).

    prepare_data.py INPUT... --out DIR (--tokenizer FILE.json | --tiktoken gpt2 | --train-bpe VOCAB)

INPUT is a file, a directory (its files, recursively, in name order) or a glob. Every document is
followed by the end-of-text token. Tokenizers: a Hugging Face `tokenizers` JSON (copied beside the
shards), GPT-2's BPE through `tiktoken`, or a byte-level BPE trained here on the inputs like
data/sample_tokenizer.json. The split is deterministic: --val-tokens N puts the stream's first N
tokens in validation; --val-fraction F puts every block of --val-block tokens whose index b has
floor((b+1)F) > floor(bF) there, so validation is spread evenly over the corpus.
"""
import argparse
import glob
import hashlib
import json
import os
import sys
import time
from array import array

HERE = os.path.dirname(os.path.realpath(__file__))  # through the bin/paratrain-prepare link too
EOT_TEXT = "<|endoftext|>"
# The llm.c formats paratrain reads (src/io/token_data.cpp): gpt-2's uint16, llama-3's uint32.
LLMC_U16 = (20240520, 1, "uint16")
LLMC_U32 = (20240801, 7, "uint32")
HEADER_INTS = 256


class PrepareError(Exception):
    """One line for the user: what and which file."""


def fail(msg):
    raise PrepareError(msg)


def import_or_reexec(module):
    try:
        return __import__(module)
    except ImportError:
        # Not this interpreter: the project's .venv (scripts/setup_python.sh) has the packages.
        venv = os.path.join(HERE, "..", ".venv", "bin", "python")
        if os.path.exists(venv) and os.path.realpath(sys.executable) != os.path.realpath(venv):
            os.execv(venv, [venv, os.path.abspath(__file__)] + sys.argv[1:])
        fail(f"the Python package '{module}' is missing for {sys.executable}; run scripts/setup_python.sh "
             f"(it creates .venv) or pip install {module}")


# ---- inputs -------------------------------------------------------------------------------------

def input_files(specs):
    """The files named by each spec (file, directory, glob), in order, each once."""
    out, seen = [], set()
    for spec in specs:
        if os.path.isdir(spec):
            found = sorted(os.path.join(d, f) for d, _, fs in os.walk(spec) for f in fs if not f.startswith("."))
            if not found:
                fail(f"input directory '{spec}' holds no files")
        elif os.path.exists(spec) or os.path.islink(spec):
            found = [spec]
        else:
            found = sorted(glob.glob(spec, recursive=True))
            found = [f for f in found if not os.path.isdir(f)]
            if not found:
                fail(f"input '{spec}': no such file, and no file matches it as a glob")
        for f in found:
            key = os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def read_text(path):
    if not os.path.isfile(path):
        fail(f"input '{path}' is not a regular file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        fail(f"input '{path}': cannot read: {e.strerror}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"input '{path}': not UTF-8 text (byte {e.start})")


def documents(files, field):
    """(file, document text) in order: a text file is one document, a .jsonl line one each."""
    for path in files:
        text = read_text(path)
        if not path.lower().endswith((".jsonl", ".ndjson")):
            yield path, len(text.encode("utf-8")), text
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"input '{path}' line {n}: not JSON ({e.msg})")
            if not isinstance(obj, dict) or field not in obj:
                fail(f"input '{path}' line {n}: no \"{field}\" field")
            if not isinstance(obj[field], str):
                fail(f"input '{path}' line {n}: \"{field}\" is not a string")
            yield path, len(line.encode("utf-8")) + 1, obj[field]


# ---- tokenizers ---------------------------------------------------------------------------------

class HFTokenizer:
    def __init__(self, tok, eot, source):
        self.tok = tok
        self.eot_id = tok.token_to_id(eot)
        if self.eot_id is None:
            fail(f"tokenizer '{source}' has no end-of-text token '{eot}' (--eot names another)")
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)

    def encode_batch(self, texts):
        # A literal end-of-text marker inside a document becomes the token, as the tokenizer reads it.
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]


def load_hf(path, eot):
    tokenizers = import_or_reexec("tokenizers")
    if not os.path.isfile(path):
        fail(f"tokenizer '{path}': no such file")
    try:
        tok = tokenizers.Tokenizer.from_file(path)
    except Exception as e:  # the library raises its own exception types for a bad file
        fail(f"tokenizer '{path}': not a tokenizers JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    return HFTokenizer(tok, eot, path)


def train_bpe(files, field, vocab, eot):
    """A byte-level BPE like data/sample_tokenizer.json (scripts/make_sample_data.py) on the inputs."""
    tokenizers = import_or_reexec("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[eot],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((text for _, _, text in documents(files, field)), trainer=trainer)
    return HFTokenizer(tok, eot, "the trained BPE")


class TiktokenTokenizer:
    def __init__(self, name):
        tiktoken = import_or_reexec("tiktoken")
        try:
            self.enc = tiktoken.get_encoding(name)
        except ValueError as e:
            fail(f"--tiktoken {name}: {e}")
        except Exception as e:  # no network: requests' and urllib's errors alike
            fail(f"--tiktoken {name}: cannot load the encoding ({type(e).__name__}); tiktoken downloads it on first "
                 "use, so run once where the internet is reachable, or point TIKTOKEN_CACHE_DIR at a copy")
        self.eot_id = self.enc.eot_token
        self.vocab_size = self.enc.n_vocab

    def encode_batch(self, texts):
        return self.enc.encode_batch(texts, allowed_special={EOT_TEXT})

    def ranks_sha256(self):
        # The encoding's merge ranks in tiktoken's own text format ("base64 rank" lines, by rank).
        import base64
        h = hashlib.sha256()
        for token, rank in sorted(self.enc._mergeable_ranks.items(), key=lambda kv: kv[1]):
            h.update(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
        return h.hexdigest()


# ---- output -------------------------------------------------------------------------------------

def write_atomic(path, data):
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(f"cannot write '{path}': {e.strerror}")


class ShardWriter:
    """Tokens of one split into DIR/{prefix}_{split}_NNNNNN.bin, `shard_tokens` each."""

    def __init__(self, out, prefix, split, shard_tokens, llmc):
        self.out, self.prefix, self.split, self.cap = out, prefix, split, shard_tokens
        self.magic, self.version, dtype = llmc
        self.code = "H" if dtype == "uint16" else "I"
        self.buf = array(self.code)
        self.shards = []

    def add(self, tokens):
        while tokens:
            room = self.cap - len(self.buf)
            self.buf.extend(tokens[:room])
            tokens = tokens[room:]
            if len(self.buf) == self.cap:
                self.flush()

    def flush(self):
        if not self.buf:
            return
        header = array("i", [0] * HEADER_INTS)
        header[0], header[1], header[2] = self.magic, self.version, len(self.buf)
        body = self.buf
        if sys.byteorder != "little":
            header.byteswap()
            body = array(self.code, self.buf)
            body.byteswap()
        data = header.tobytes() + body.tobytes()
        name = f"{self.prefix}_{self.split}_{len(self.shards):06d}.bin"
        write_atomic(os.path.join(self.out, name), data)
        self.shards.append({"file": name, "tokens": len(self.buf), "sha256": hashlib.sha256(data).hexdigest()})
        self.buf = array(self.code)


def split_stream(tokens, pos, args, train, val):
    """Routes tokens at stream positions [pos, pos + len) to the train or validation writer."""
    while tokens:
        if args.val_tokens is not None:
            boundary, to_val = (args.val_tokens, True) if pos < args.val_tokens else (pos + len(tokens), False)
        else:
            b = pos // args.val_block
            boundary = (b + 1) * args.val_block
            to_val = int((b + 1) * args.val_fraction) > int(b * args.val_fraction)
        n = min(len(tokens), boundary - pos)
        (val if to_val else train).add(tokens[:n])
        tokens, pos = tokens[n:], pos + n


class Progress:
    def __init__(self, total_bytes, quiet):
        self.total, self.quiet, self.start = total_bytes, quiet, time.monotonic()
        self.last, self.shown = self.start, False

    def update(self, done_bytes, tokens, final=False):
        """A line every 2 s on a long input; the final one only after such lines."""
        now = time.monotonic()
        if self.quiet or (now - self.last < 2.0 if not final else not self.shown):
            return
        self.last, self.shown = now, True
        pct = 100.0 * done_bytes / self.total if self.total else 100.0
        rate = done_bytes / max(now - self.start, 1e-9) / 1e6
        print(f"prepare_data: {pct:5.1f}% of {self.total / 1e6:.1f} MB, {tokens:,} tokens, {rate:.1f} MB/s",
              file=sys.stderr, flush=True)


def existing_outputs(out, prefix):
    names = glob.glob(os.path.join(glob.escape(out), f"{glob.escape(prefix)}_*.bin"))
    names += [os.path.join(out, n) for n in ("manifest.json", "tokenizer.json") if os.path.exists(os.path.join(out, n))]
    return sorted(names)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="prepare_data.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="text or .jsonl files, directories or globs")
    p.add_argument("--out", required=True, help="directory for the shards and manifest.json (created)")
    tk = p.add_mutually_exclusive_group(required=True)
    tk.add_argument("--tokenizer", help="a Hugging Face tokenizers JSON (copied into --out)")
    tk.add_argument("--tiktoken", metavar="ENCODING", help="a tiktoken encoding, e.g. gpt2 (downloaded on first use)")
    tk.add_argument("--train-bpe", type=int, metavar="VOCAB", help="train a byte-level BPE of VOCAB tokens on the inputs")
    p.add_argument("--eot", default=EOT_TEXT, help=f"the end-of-text token of a tokenizers JSON (default {EOT_TEXT})")
    p.add_argument("--field", default="text", help="the JSONL field holding the text (default text)")
    v = p.add_mutually_exclusive_group()
    v.add_argument("--val-fraction", type=float, default=None, help="validation share of the tokens (default 0.05)")
    v.add_argument("--val-tokens", type=int, default=None, help="validation: the stream's first N tokens")
    p.add_argument("--val-block", type=int, default=None,
                   help="block size in tokens of --val-fraction's split (default 4096, less for small inputs)")
    p.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard (default 1e8, as llm.c)")
    p.add_argument("--prefix", default="data", help="shard names: PREFIX_train_000000.bin, PREFIX_val_000000.bin")
    p.add_argument("--overwrite", action="store_true", help="replace the outputs of an earlier run in --out")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    if args.val_tokens is None and args.val_fraction is None:
        args.val_fraction = 0.05
    if args.val_fraction is not None and not 0.0 < args.val_fraction < 1.0:
        p.error(f"--val-fraction {args.val_fraction}: must lie strictly between 0 and 1")
    for name in ("val_tokens", "val_block", "shard_tokens", "train_bpe"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} {value}: must be positive")
    if args.train_bpe is not None and args.train_bpe < 257:
        p.error(f"--train-bpe {args.train_bpe}: a byte-level BPE needs more than 256 tokens")
    if os.sep in args.prefix or not args.prefix:
        p.error(f"--prefix '{args.prefix}': a file name prefix, without '{os.sep}'")
    return args


def check_splits(args, docs, pos, train, val):
    if docs == 0 or pos == docs:
        fail("the inputs hold no text (" + ("no documents" if docs == 0 else "every document is empty") + ")")
    if not val.shards:
        fail(f"the validation split is empty: {pos} tokens, and --val-fraction {args.val_fraction} of blocks of "
             f"{args.val_block} tokens takes none; lower --val-block or pass --val-tokens")
    if not train.shards:
        fail(f"the training split is empty: all {pos} tokens went to validation; lower --val-tokens")


def prepare(args):
    files = input_files(args.inputs)
    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        fail(f"--out '{out}' exists and is not a directory")
    old = existing_outputs(out, args.prefix) if os.path.isdir(out) else []
    if old and not args.overwrite:
        fail(f"--out '{out}' already holds {os.path.basename(old[0])} (and {len(old) - 1} more outputs); "
             "pass --overwrite to replace them")
    total_bytes = 0
    for f in files:
        if not os.path.isfile(f):
            fail(f"input '{f}' is not a regular file")
        total_bytes += os.path.getsize(f)
    if args.val_fraction is not None and args.val_block is None:
        # About 16 validation blocks on a small input (tokens estimated at 4 bytes each), so the
        # default split is not empty; a large one gets 4096-token blocks.
        args.val_block = min(4096, max(64, int(total_bytes / 4 * args.val_fraction / 16)))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        fail(f"--out '{out}': cannot create: {e.strerror}")

    # The tokenizer JSON to ship beside the shards: written with the manifest, after every shard.
    tok_path, tok_json = os.path.join(out, "tokenizer.json"), None
    if args.tokenizer:
        tok = load_hf(args.tokenizer, args.eot)
        with open(args.tokenizer, "rb") as f:
            tok_json = f.read()
        tokenizer = {"kind": "tokenizers", "name": args.tokenizer}
    elif args.tiktoken:
        tok = TiktokenTokenizer(args.tiktoken)
        tokenizer = {"kind": "tiktoken", "name": args.tiktoken, "file": None, "sha256": tok.ranks_sha256()}
    else:
        tok = train_bpe(files, args.field, args.train_bpe, args.eot)
        tok_json = tok.tok.to_str(pretty=False).encode("utf-8")
        tokenizer = {"kind": "tokenizers", "name": f"byte-level BPE trained on the inputs ({args.train_bpe})"}
    if tok_json is not None:
        tokenizer.update(file="tokenizer.json", sha256=hashlib.sha256(tok_json).hexdigest())

    llmc = LLMC_U16 if tok.vocab_size <= 1 << 16 else LLMC_U32
    train = ShardWriter(out, args.prefix, "train", args.shard_tokens, llmc)
    val = ShardWriter(out, args.prefix, "val", args.shard_tokens, llmc)
    progress = Progress(total_bytes, args.quiet)
    pos = docs = done_bytes = 0
    batch, batch_bytes = [], 0

    def encode_pending():
        nonlocal pos, docs, done_bytes
        for ids in tok.encode_batch(batch):
            ids.append(tok.eot_id)
            split_stream(ids, pos, args, train, val)
            pos += len(ids)
        docs += len(batch)
        done_bytes += batch_bytes
        batch.clear()
        progress.update(done_bytes, pos)

    try:
        for _, nbytes, text in documents(files, args.field):
            batch.append(text)
            batch_bytes += nbytes
            if len(batch) >= 1024 or batch_bytes >= 8 << 20:
                encode_pending()
                batch_bytes = 0
        encode_pending()
        train.flush()
        val.flush()
        check_splits(args, docs, pos, train, val)
    except PrepareError:
        for s in train.shards + val.shards:  # no partial set stays behind
            os.unlink(os.path.join(out, s["file"]))
        raise
    progress.update(done_bytes, pos, final=True)

    split = ({"val_tokens": args.val_tokens} if args.val_tokens is not None
             else {"val_fraction": args.val_fraction, "val_block": args.val_block})
    manifest = {
        "format": "paratrain token shards", "version": 1,
        "tokenizer": tokenizer, "vocab_size": tok.vocab_size, "eot_id": tok.eot_id,
        "token_dtype": llmc[2], "llmc_magic": llmc[0], "llmc_version": llmc[1],
        "split": split, "documents": docs, "input_files": len(files), "input_bytes": total_bytes,
        "train": train.shards, "val": val.shards,
    }
    written = {s["file"] for s in train.shards + val.shards}
    for stale in existing_outputs(out, args.prefix):  # an earlier run's extra shards (--overwrite)
        if stale.endswith(".bin") and os.path.basename(stale) not in written:
            os.unlink(stale)
    if tok_json is not None:
        if not (args.tokenizer and os.path.exists(tok_path) and os.path.samefile(args.tokenizer, tok_path)):
            write_atomic(tok_path, tok_json)
    elif os.path.exists(tok_path):  # --overwrite: an earlier run's tokenizer is not this one
        os.unlink(tok_path)
    write_atomic(os.path.join(out, "manifest.json"), (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))
    if not args.quiet:
        print(f"prepare_data: {docs} documents, {pos:,} tokens: {sum(s['tokens'] for s in train.shards):,} train in "
              f"{len(train.shards)} shards, {sum(s['tokens'] for s in val.shards):,} validation; "
              f"{os.path.join(out, 'manifest.json')}", file=sys.stderr)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        prepare(args)
    except PrepareError as e:
        print(f"prepare_data: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
