"""examples/notebook.py runs headless and draws its figure (the figure itself was looked at; see the README)."""
import os
import subprocess
import sys

import matplotlib.image
import numpy as np

from conftest import REPO


def test_notebook_example_runs_headless_and_writes_its_figure(tmp_path):
    output = tmp_path / "notebook.png"
    env = dict(os.environ, MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "notebook.py"), output], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "theory: 0 bound violations" in result.stdout
    assert "[reproduced] Without skip connections (SAN) the representation collapses" in result.stdout
    image = matplotlib.image.imread(output)
    assert image.shape[:2] == (990, 1320)
    # Four panels of lines on white: plenty of colour, not a blank canvas.
    pixels = (image[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    assert len(np.unique(pixels, axis=0)) > 500
    assert (pixels.min(axis=1) < 200).mean() > 0.03
