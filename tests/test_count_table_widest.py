"""benchmarks/count_table_widest.py runs end to end (smoke settings); its 15- and 17-letter windows
back off to the library's 13-letter table, and the committed results extend Chapter 5's 5-13 grid."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result
from attnbook.tasks import count_baselines

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import count_table_widest  # noqa: E402
from test_count_table_width import _check  # noqa: E402


def test_wider_shapes_back_off_to_the_13_letter_table():
    count_table_widest.add_wider_shapes()
    shapes = count_baselines.G2P_SHAPES_BY_WIDTH
    assert shapes[15] == ((7, 7), *shapes[13])
    assert shapes[17] == ((8, 8), *shapes[15])
    assert all(2 * left + 1 == w for w in (15, 17) for left, _ in shapes[w][:1])


def test_smoke_run(tmp_path):
    out = tmp_path / "widest.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "count_table_widest.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    _check(json.loads(out.read_text()), 200, widths=("15", "17"))


def test_committed_results():
    widest, wider = load_result("count_table_widest.json"), load_result("count_table_wider.json")
    assert widest["words"] == wider["words"]
    _check(widest, 5_825, widths=("15", "17"))
