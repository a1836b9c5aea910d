"""Ctrl-C: long calls run with the GIL released and stop on SIGINT with KeyboardInterrupt inside the call (between
theory jobs; at the next layer of a model's forward), leaving the module usable.

No wall-clock bound: how long the stop takes depends on the machine's load (3.9 s once on a busy fresh machine
against a 3 s bound). What is checked is that the call raised KeyboardInterrupt instead of running to its end, which
takes far longer than the signal's delay (a minute of theory jobs; a BERT-base forward over 4096 tokens, then the
same forward twice more)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import rankscope as rs
    call = sys.argv[1]
    if call == "theory":
        work = lambda: rs.run_theory()                       # 12 layers x 12 variants x 5 seeds: a minute here
    else:
        model = rs.load_model("bert-base-cased", weights="init")
        ids = np.random.default_rng(0).integers(0, 28996, size=(16, 256))
        work = lambda: [model.forward(ids) for _ in range(3)]  # BERT-base, 3 x 4096 tokens: many seconds
    print("ready", flush=True)
    start = time.time()
    try:
        work()
    except KeyboardInterrupt:
        print(f"interrupted {time.time() - start:.3f}", flush=True)
        x = np.random.default_rng(1).normal(size=(5, 4))
        print("still usable", float(rs.relative_residual(x)), flush=True)
        sys.exit(42)
    print(f"finished {time.time() - start:.3f}", flush=True)
""")


def interrupt_after(call, delay):
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, call], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert process.stdout.readline().strip() == "ready", process.stderr.read()
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)  # a hang guard, not a latency bound
    return process.returncode, out, err


def test_ctrl_c_stops_a_theory_run_between_jobs():
    code, out, err = interrupt_after("theory", 1.5)
    assert code == 42, (code, out, err)
    assert "interrupted" in out and "finished" not in out
    assert "still usable" in out


def test_ctrl_c_stops_a_model_forward_within_the_forward():
    code, out, err = interrupt_after("model", 0.5)
    assert code == 42, (code, out, err)
    assert "interrupted" in out and "finished" not in out
    assert "still usable" in out
