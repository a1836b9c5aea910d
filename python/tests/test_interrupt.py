"""Ctrl-C: long calls run with the GIL released and stop on SIGINT with KeyboardInterrupt, promptly (between theory
jobs; within a layer of a model's forward), leaving the module usable."""
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
        work = lambda: model.forward(ids)                    # BERT-base, 4096 tokens: several seconds
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
    signalled = time.time()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return process.returncode, time.time() - signalled, out, err


def test_ctrl_c_stops_a_theory_run_between_jobs():
    code, latency, out, err = interrupt_after("theory", 1.5)
    assert code == 42, (code, out, err)
    assert "still usable" in out
    assert latency < 5, f"took {latency:.1f} s to stop"


def test_ctrl_c_stops_a_model_forward_within_the_forward():
    code, latency, out, err = interrupt_after("model", 0.5)
    assert code == 42, (code, out, err)
    assert "still usable" in out
    assert latency < 3, f"took {latency:.1f} s to stop"
