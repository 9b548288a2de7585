"""tools/tolerances.py: the headroom of each comparison a notebook makes, read from a real run."""
import math

import nbformat

from tools.tolerances import audit


def test_audit_measures_headroom_and_separates_checks_meant_to_fail(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("a comparison with room 10, one with none, one meant to differ"),
        nbformat.v4.new_code_cell("import torch\n"
                                  "torch.testing.assert_close(torch.tensor([1.0]), torch.tensor([1.0 + 1e-6]),"
                                  " atol=1e-5, rtol=0)"),
        nbformat.v4.new_code_cell("torch.testing.assert_close(torch.tensor([2.0]), torch.tensor([2.0]))\n"
                                  "print(torch.allclose(torch.tensor([0.0]), torch.tensor([0.5]), atol=0.1))"),
    ]
    path = tmp_path / "toy.ipynb"
    nbformat.write(notebook, path)
    first, exact, apart = audit(path, timeout=120)
    assert (first["cell"], exact["cell"], apart["cell"]) == (1, 2, 2)
    assert first["close"] and 9.5 < first["headroom"] < 10.5 and first["worst"] < 1.1e-6
    assert exact["close"] and math.isinf(exact["headroom"])
    assert not apart["close"] and 4.9 < apart["apart"] < 5.1  # 0.5 against a tolerance of 0.1
