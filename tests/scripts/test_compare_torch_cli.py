"""The command lines of compare_torch.py and compare_torch_ddp.py where PyTorch is absent: --help
works without importing torch, each bad argument is one clear error (exit 2), and an existing
--out is refused."""
import pytest

from conftest import run_without_torch

MODEL, DDP = "compare_torch.py", "compare_torch_ddp.py"


@pytest.mark.parametrize("script, words", [
    (MODEL, ["--variants", "torch_model"]),
    (DDP, ["--strategies", "ddp_torch", "ddp_bf16", "bf16_compress_hook"]),
])
def test_help_without_torch(tmp_path, script, words):
    proc = run_without_torch(script, ["--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout and all(w in proc.stdout for w in words), proc.stdout


# Refusals both scripts share, spelled alike in both (and as paratrain spells them).
SHARED = [("model", "huge", "unknown size 'huge'"), ("precision", "fp16", "unknown precision 'fp16'"),
          ("attention", "flash", "--attention must be naive or sdpa"), ("steps", "0", "--steps")]
OWN = [(MODEL, ["--variants", "jit"], "unknown variant 'jit'"), (MODEL, ["--context-length", "5x"], "--context-length"),
       (DDP, ["--strategies", "fsdp"], "unknown strategy 'fsdp'"), (DDP, ["--strategies", ","], "at least one value"),
       (DDP, ["--bucket-mb", "0"], "--bucket-mb must be positive")]
BAD = [(s, [f"--{key}", value], message) for s in (MODEL, DDP) for key, value, message in SHARED]


@pytest.mark.parametrize("script, args, message", BAD + OWN)
def test_bad_arguments(tmp_path, script, args, message):
    proc = run_without_torch(script, args, tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize("script", [MODEL, DDP])
def test_existing_output_is_refused(tmp_path, script):
    out = tmp_path / "existing.h5"
    out.write_bytes(b"")
    proc = run_without_torch(script, ["--out", str(out)], tmp_path)
    assert proc.returncode == 2 and "exists" in proc.stderr, proc.stderr
