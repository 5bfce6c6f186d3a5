"""`privrank simulate`: tables on stdout, one PNG per scenario."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from app.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_simulate_writes_table_and_figure(tmp_path, capsys):
    assert main(["simulate", "-s", "I", "-s", "V", "--replications", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Scenario I: consistency at constant ε" in out and "Figure 2" in out
    assert "Scenario V" in out and "classic_rr" in out and "laplace" in out
    # 36 cells of Scenario I and 24 rows of Scenario V, each with a value column per metric
    assert len(re.findall(r"\d\.\d{4} ±\d", out)) == 36 * 2 + 24 * 3
    for key in ("I", "V"):
        png = (tmp_path / f"scenario_{key}.png").read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 20_000


def test_the_tables_and_figures_name_the_comparisons_per_pair(tmp_path, capsys, monkeypatch):
    """The column and the figure's axis say n_pair (the comparisons of each pair), with a
    line saying what it is; the paper's L only in that line."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    texts: list[str] = []
    save = Figure.savefig

    def savefig(fig, *args, **kwargs):
        texts.extend(t.get_text() for t in fig.findobj(Text))
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    assert main(["simulate", "-s", "IV", "--replications", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[2].split()
    assert header[:3] == ["m", "scheme", "n_pair"], header
    assert (
        "n_pair: the comparisons of each pair (every pair answered by n_pair respondents; the paper's L)"
        in out
    )
    assert "n_pair (comparisons of each pair)" in texts
    assert not [t for t in texts if re.search(r"(?<![\w'])L\b|mL", t)], texts


def test_the_output_states_the_replicates_that_ran(capsys):
    """A short run never quotes another run's replicate count (such as the paper's 50 or
    100 in the notes of a 10-replicate run)."""
    assert main(["simulate", "-s", "II", "-s", "IV", "--replications", "2", "--no-figures"]) == 0
    out = capsys.readouterr().out
    counts = re.findall(r"(\d+) replicates", out)
    assert counts == ["2", "2"]


def test_simulate_rejects_bad_arguments(capsys):
    assert main(["simulate", "--replications", "1", "--no-figures"]) == 2
    with pytest.raises(SystemExit):
        main(["simulate", "-s", "VI"])


def test_console_script_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "simulate", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--quick" in out and "--replications" in out
