"""rankscope in a notebook: measure a pretrained transformer and a random SAN, and plot what rank collapse looks like.

Run it as a script (headless, writes a PNG) or cell by cell (# %% markers: VS Code, Jupytext, Spyder):

    PYTHONPATH=build/python MPLBACKEND=Agg .venv/bin/python examples/notebook.py out/notebook.png

(/usr/bin/python3 after a `make TORCH=system` build: the module is built for one Python.) Needs the built module (or
`pip install .`), matplotlib (in .venv; python3-matplotlib for Debian's Python) and USE lite (scripts/install-deps.sh
fetches it).
"""
# %% Setup
import sys

import matplotlib

matplotlib.use("Agg")  # headless; drop this line in a notebook
import matplotlib.pyplot as plt
import numpy as np

import rankscope as rs

OUTPUT = sys.argv[1] if len(sys.argv) > 1 else "notebook.png"
print(rs.version(), f"- {rs.get_threads()} threads")

# %% E1/E2 on Universal Sentence Encoder lite (pretrained, from npm) and the same architecture at random init:
# the relative residual ||X - 1 mean^T||_{1,inf} / ||X||_{1,inf} after the embeddings and after each layer, for the
# paper's four surgeries; plus the "iterate" experiment: its pretrained attention sublayer applied 12 times.
run = rs.run_model("use-lite", samples=16, tokens=64, draws=20, iterate=12, record=True)
residual = run.residual
for check in run.findings.checks:
    print(f"[{check.verdict}] {check.claim}: {check.measured}")

# %% Measure the pretrained model's hidden states directly: every measure works on [..., n, d] arrays.
hidden = [run.activations["hook_embed"]] + [run.activations[f"blocks.{l}.hook_resid_post"] for l in range(2)]
effective = [rs.effective_rank(h) for h in hidden]        # [samples] per layer
cosine = [rs.mean_pairwise_cosine(h) for h in hidden]
attention = rs.attention_measures(run.activations["blocks.1.attn.hook_pattern"])  # [samples, heads]
print("blocks.1 attention (the second block): mean row entropy", attention["mean_row_entropy"].mean().round(3),
      "nats (uniform: ln 64 =", round(np.log(64), 3), "); first-token share",
      attention["first_token_share"].mean().round(3))

# %% The SAN laboratory: random self-attention networks, float64, with the theorems' per-layer bound beside them.
theory = rs.run_theory(layers=6, heads=2, d_model=16, tokens=16, seeds=3)
print(f"theory: {theory.bound_violations} bound violations in {theory.bound_rows_checked} checked rows")

# %% Plot
COLORS = {"SAN": "#D55E00", "SAN+MLP": "#E69F00", "SAN+skip": "#0072B2", "transformer": "#009E73",
          "SAN+skip+MLP": "#56B4E9", "SAN+LN": "#CC79A7", "SAN+affine-LN": "#999999"}
MARKERS = {"SAN": "o", "SAN+MLP": "s", "SAN+skip": "^", "transformer": "D", "SAN+skip+MLP": "v", "SAN+LN": "P",
           "SAN+affine-LN": "X"}
FLOOR = 1e-17  # plotted in place of an exact 0 on log axes

figure, axes = plt.subplots(2, 2, figsize=(12, 9), constrained_layout=True)
figure.suptitle(f"Rank collapse, measured with rankscope {rs.__version__}")

ax = axes[0, 0]
for shift, variant in zip((-0.06, -0.02, 0.02, 0.06), rs.VARIANTS):  # small x shifts: overlapping lines stay visible
    for weights, style in (("pretrained", "-"), ("init", "--")):
        rows = (residual["variant"] == variant) & (residual["weights"] == weights)
        ax.plot(residual["layer"][rows] + shift, np.maximum(residual["mean"][rows], FLOOR), style,
                marker=MARKERS[variant], markerfacecolor=COLORS[variant] if weights == "pretrained" else "white",
                color=COLORS[variant], label=f"{variant} ({weights})")
ax.set(yscale="log", xlabel="layer (0 = embeddings)", ylabel="relative residual (composite, mean centre)",
       title=f"E1: USE lite, {run.batch['input_ids'].shape[0]} samples x {run.batch['input_ids'].shape[1]} tokens",
       xticks=[0, 1, 2])
ax.legend(fontsize=7, ncol=2)

ax = axes[0, 1]
iterate = run.iterate
for variant, color in (("attention", COLORS["SAN"]), ("attention+skip", COLORS["SAN+skip"])):
    for weights, style in (("pretrained", "-"), ("init", "--")):
        rows = (iterate["variant"] == variant) & (iterate["weights"] == weights)
        mean, std = iterate["mean"][rows], iterate["std"][rows]
        ax.plot(iterate["step"][rows], np.maximum(mean, FLOOR), style, marker="o", markersize=4, color=color,
                markerfacecolor=color if weights == "pretrained" else "white", label=f"{variant} ({weights})")
ax.axhline(1.19e-7, color="grey", lw=0.8, ls=":")
ax.text(12, 0.8e-7, "float32 eps", fontsize=7, color="grey", ha="right", va="top")
ax.set(yscale="log", xlabel="applications of USE lite's blocks.1 attention sublayer",
       ylabel="relative residual", title="Iterated attention: without its skip it collapses")
ax.legend(fontsize=7)

ax = axes[1, 0]
layers = np.arange(len(hidden))
ax.errorbar(layers - 0.05, [e.mean() for e in effective], yerr=[e.std() for e in effective], marker="o",
            color="#0072B2", capsize=3, label="effective rank")
ax.set(xlabel="layer (0 = embeddings)", ylabel="effective rank exp(H(s/sum s))", xticks=layers,
       title="Pretrained USE lite's hidden states (mean ± std over samples)")
twin = ax.twinx()
twin.errorbar(layers + 0.05, [c.mean() for c in cosine], yerr=[c.std() for c in cosine], marker="s",
              color="#D55E00", capsize=3, label="mean pairwise cosine")
twin.set_ylabel("mean pairwise token cosine", color="#D55E00")
handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
ax.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="lower left")

ax = axes[1, 1]
summary = theory.summary
for variant in ("SAN", "SAN+MLP", "SAN+skip", "SAN+skip+MLP", "SAN+LN", "SAN+affine-LN"):
    rows = summary["variant"] == variant
    ax.plot(summary["layer"][rows], np.maximum(summary["relative_residual_mean"][rows], FLOOR),
            marker=MARKERS[variant], color=COLORS[variant], label=variant)
ax.axhline(1e-12, color="grey", lw=0.8, ls=":")
ax.text(6, 2e-12, "float64 round-off (1e-12)", fontsize=7, color="grey", ha="right")
ax.set(yscale="log", xlabel="layer", ylabel="relative residual (mean over seeds)", xticks=range(7),
       title=f"Random SANs, 1 head, d = n = 16, {len(set(theory.rows['seed']))} seeds")
ax.legend(fontsize=7)

figure.savefig(OUTPUT, dpi=110)
print("wrote", OUTPUT)
