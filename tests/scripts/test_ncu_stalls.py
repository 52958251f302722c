"""scripts/ncu_stalls.py on a hand-made source page in ncu's CSV layout (the kernel-name line,
the header, one row per SASS instruction): samples summed per opcode (predicates dropped, HGMMA
shapes folded) as percentages of all samples, the reasons ordered, the top instructions listed;
a file without stall columns refused with one line and exit 1."""
import subprocess
import sys

from conftest import SCRIPTS

NCU_STALLS = f"{SCRIPTS}/ncu_stalls.py"

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "# Samples", "Instructions Executed", "stall_long_sb", "stall_selected", "stall_wait",
          "stall_wait (Not Issued)"]
# (address, SASS, samples, executed, long_sb, selected, wait): 200 samples in all.
ROWS = [
    ("0x7f0000000000", "      MUFU.EX2 R14, R14", 60, 1000, 0, 10, 50),
    ("0x7f0000000010", "      MUFU.EX2 R15, R15", 40, 1000, 0, 10, 30),
    ("0x7f0000000020", "@!P0  BRA 0x7f0000000000", 50, 300, 50, 0, 0),
    ("0x7f0000000030", "      HGMMA.64x64x16.F32.BF16 R56, gdesc[UR20], RZ, !UPT", 30, 20, 0, 5, 25),
    ("0x7f0000000040", "      HGMMA.64x128x16.F32.BF16 R24, R212, gdesc[UR16].tnspB, R24", 19, 20, 0, 4, 15),
    ("0x7f0000000050", "      FADD R7, -R152, R7", 1, 500, 0, 1, 0),
    ("0x7f0000000060", "      NOP", 0, 10, 0, 0, 0),
]


def write_page(path, rows=ROWS, header=HEADER):
    def line(cells):
        return ",".join(f'"{c}"' for c in cells)

    text = [line(["Kernel Name", "void k<(int)64>(Params)"]) + ","]
    text.append(line(header))
    for addr, sass, samples, executed, long_sb, selected, wait in rows:
        text.append(line([addr, sass, samples, samples - selected, samples, executed, long_sb, selected, wait, wait]))
    path.write_text("\n".join(text) + "\n")
    return path


def run(*args):
    return subprocess.run([sys.executable, NCU_STALLS, *map(str, args)], capture_output=True, text=True)


def test_sums_by_opcode(tmp_path):
    r = run(write_page(tmp_path / "page.csv"), "--top", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "kernel: void k<(int)64>(Params)"
    assert lines[1] == "7 instructions, 200 samples; % of all samples"
    table = {l.split()[0]: l for l in lines if l and l.split()[0] in ("MUFU.EX2", "BRA", "HGMMA", "FADD")}
    # MUFU.EX2: 2 instructions, 2000 executed, 100 of 200 samples; wait 80 (40 %), selected 20 (10 %).
    assert table["MUFU.EX2"].split()[1:4] == ["2", "2000", "50.0"]
    assert "wait 40.0, selected 10.0" in table["MUFU.EX2"]
    # The predicate is not the opcode; both HGMMA shapes are one row (49 samples).
    assert table["BRA"].split()[1:4] == ["1", "300", "25.0"] and "long_sb 25.0" in table["BRA"]
    assert table["HGMMA"].split()[1:4] == ["2", "40", "24.5"] and "wait 20.0, selected 4.5" in table["HGMMA"]
    # 0.5 % of the samples is listed, less is not.
    assert table["FADD"].split()[1:4] == ["1", "500", "0.5"]
    assert not any(l.startswith("NOP") for l in lines)
    # Rows in order of samples.
    assert [l.split()[0] for l in lines[4:8]] == ["MUFU.EX2", "BRA", "HGMMA", "FADD"]
    top = lines[lines.index("top 2 instructions by samples:") + 1:]
    assert len(top) == 2 and "MUFU.EX2 R14, R14" in top[0] and "30.0%" in top[0]
    assert "BRA 0x7f0000000000" in top[1] and "25.0%" in top[1]


def test_refuses_a_page_without_stall_columns(tmp_path):
    header = [h for h in HEADER if not h.startswith("stall_")]
    path = tmp_path / "page.csv"
    path.write_text('"Kernel Name","k",\n' + ",".join(f'"{h}"' for h in header) + '\n"0x0","  NOP","1","1","1","1"\n')
    r = run(path)
    assert r.returncode == 1
    assert "no instruction rows with stall_* columns" in r.stderr and r.stderr.count("\n") == 1


def test_against_an_earlier_page(tmp_path):
    before = write_page(tmp_path / "before.csv")
    # After: the BRA's 50 long_sb samples gone, the rest as before (150 samples).
    after = write_page(tmp_path / "after.csv", rows=[r for r in ROWS if not r[1].startswith("@")])
    r = run(after, "--against", before)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "samples: 200 → 150 (-25.0 %); shares in % of each file's samples"
    rows = {l.split()[0]: l.split()[1:] for l in lines[3:] if l and not l.startswith(("reason", "opcode"))}
    # Each file's own percentages: wait 120 of 200 (60 %), then 120 of 150 (80 %).
    assert rows["wait"] == ["60.0", "80.0"]
    assert rows["long_sb"] == ["25.0", "0.0"]
    assert rows["BRA"] == ["25.0", "0.0"] and rows["MUFU.EX2"] == ["50.0", "66.7"]
