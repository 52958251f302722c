"""scripts/ptx_diff.sh on two trees of its own making (a kernel that includes a header through the
include root the build gives cuda/): the same source is identical, a renamed local is identical,
two stores swapped are the same instructions, a kernel in a folder under cuda/ is compared by
default, a changed constant is DIFFERENT (exit 1), a side that does not compile exits 2 naming it,
and a git revision works as the base. Skipped without nvcc."""
import os
import shutil
import subprocess

import pytest

from conftest import REPO, SCRIPTS

PTX_DIFF = f"{SCRIPTS}/ptx_diff.sh"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)

pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc (the CUDA toolkit is not installed)")

HEADER = """#pragma once
__device__ __forceinline__ float twice(float x) { return 2.0f * x; }
"""

KERNEL = """#include "core/scale.h"

__global__ void kernel(float* a, float* b, const float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float value = twice(x[i]);
  a[i] = value + 1.0f;
  b[i] = value * 3.0f;
}
"""


def make_tree(root, kernel=KERNEL, header=HEADER):
    os.makedirs(root / "cuda")
    os.makedirs(root / "src" / "core")
    (root / "cuda" / "k.cu").write_text(kernel)
    (root / "src" / "core" / "scale.h").write_text(header)
    return root


def ptx_diff(*args):
    env = dict(os.environ, PATH=f"{os.path.dirname(NVCC)}:{os.environ.get('PATH', '')}")
    return subprocess.run([PTX_DIFF, "--arch", "80", *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=300)


def test_the_same_source_and_a_renamed_local_are_identical(tmp_path):
    base = make_tree(tmp_path / "base")
    renamed = make_tree(tmp_path / "tree", KERNEL.replace("value", "doubled"))
    proc = ptx_diff("--base-tree", base, "--tree", renamed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cuda/k.cu" in proc.stdout and "sm_80" in proc.stdout and "identical" in proc.stdout


def test_two_stores_swapped_are_the_same_instructions(tmp_path):
    base = make_tree(tmp_path / "base")
    swapped = KERNEL.replace("  a[i] = value + 1.0f;\n  b[i] = value * 3.0f;\n",
                             "  b[i] = value * 3.0f;\n  a[i] = value + 1.0f;\n")
    assert swapped != KERNEL
    proc = ptx_diff("--base-tree", base, "--tree", make_tree(tmp_path / "tree", swapped))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "same instructions" in proc.stdout, proc.stdout


def test_kernels_in_folders_under_cuda_are_compared_by_default(tmp_path):
    base, tree = make_tree(tmp_path / "base"), make_tree(tmp_path / "tree")
    for root in (base, tree):
        os.makedirs(root / "cuda" / "flash")
        (root / "cuda" / "flash" / "f.cu").write_text(KERNEL)
    proc = ptx_diff("--base-tree", base, "--tree", tree)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cuda/flash/f.cu" in proc.stdout and "cuda/k.cu" in proc.stdout, proc.stdout


def test_a_changed_constant_in_an_included_header_is_different(tmp_path):
    base = make_tree(tmp_path / "base")
    tree = make_tree(tmp_path / "tree", header=HEADER.replace("2.0f", "4.0f"))
    proc = ptx_diff("--base-tree", base, "--tree", tree)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "DIFFERENT" in proc.stdout, proc.stdout


def test_a_side_that_does_not_compile_exits_2_naming_it(tmp_path):
    base = make_tree(tmp_path / "base")
    tree = make_tree(tmp_path / "tree", KERNEL.replace("twice(", "thrice("))
    proc = ptx_diff("--base-tree", base, "--tree", tree)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cuda/k.cu" in proc.stderr and "tree side" in proc.stderr, proc.stderr


def test_a_git_revision_as_the_base(tmp_path):
    # The repository's own rope kernel at HEAD against this checkout's copy of it (unchanged or
    # not, it compiles on both sides and gets a verdict).
    proc = ptx_diff("--base", "HEAD", "cuda/rope.cu")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert proc.stdout.startswith("cuda/rope.cu"), proc.stdout


def test_bad_usage_exits_2(tmp_path):
    assert ptx_diff("--bogus").returncode == 2
    assert ptx_diff("--base", "HEAD", "--base-tree", tmp_path).returncode == 2
    missing = ptx_diff("--base-tree", make_tree(tmp_path / "b"), "--tree", REPO, "cuda/k.cu")
    assert missing.returncode == 2 and "not in the tree side" in missing.stderr, missing.stderr
