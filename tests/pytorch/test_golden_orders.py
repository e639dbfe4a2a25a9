"""tests/data/pytorch/ is what the pinned PyTorch writes: regenerate it and compare, file by
file. Fails when a fixture was edited by hand or PyTorch's orders changed."""
import filecmp
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "pytorch")


def test_golden_orders_are_pytorchs(tmp_path):
    subprocess.run([sys.executable, os.path.join(HERE, "make_golden_orders.py"), str(tmp_path)], check=True,
                   capture_output=True)
    fresh = sorted(f for f in os.listdir(tmp_path))
    kept = sorted(f for f in os.listdir(DATA) if f != "README.md")
    assert fresh == kept
    _, mismatch, errors = filecmp.cmpfiles(DATA, tmp_path, fresh, shallow=False)
    assert mismatch == [] and errors == []
