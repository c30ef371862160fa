"""PyTorch's float32 layer norm on the inputs of this chapter's failure
modes, for the book to show beside the chapter's own kernel.

For each mean offset, `layernorm run --seed 5 --offset M --save-inputs DIR`
writes the very rows that `layernorm failure --mode huge-mean` normalises
(64 rows of 1024 floats, offset + N(0, 1)). This script runs
torch.nn.functional.layer_norm forward and backward on them in float32 on
the CPU, and again in float64 on the same float inputs as the reference, and
prints the largest error of y, dx and dgamma as a tab-separated table,
stamped with the PyTorch version, the date and the commit, with a checksum
of each x (FNV-1a of its bytes) so that the chapter can tell when its inputs
have changed since.

With --mode overflow it does the same for the rows of `layernorm failure
--mode overflow` (16 rows of 768 floats, scale * N(0, 1), `layernorm run
--scale S`), one line per scale.

Not needed to build or test anything; run it where torch is installed:
    python3 torch_failure_modes.py --commit "$(git rev-parse HEAD)" > torch-failure-modes.tsv
    python3 torch_failure_modes.py --mode overflow --commit "$(git rev-parse HEAD)" > torch-overflow.tsv
"""
import argparse
import datetime
import os
import subprocess
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
SEED, EPS = 5, 1e-5
# mode: (the option of `layernorm run` that varies, its values, rows, row length)
MODES = {
    "huge-mean": ("offset", (0.0, 1e4, 1e5, 1e6), 64, 1024),
    "overflow": ("scale", (1e16, 1e17, 1e18, 1e19, 1e20, 1e25, 1e30, 1e35), 16, 768),
}


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def load_inputs(option, value, rows, width):
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([os.path.join(HERE, "layernorm"), "run", "--n", str(rows), "--d", str(width), "--seed",
                        str(SEED), "--" + option, repr(value), "--save-inputs", directory],
                       check=True, stdout=subprocess.DEVNULL)
        return {name: np.load(os.path.join(directory, name + ".npy")) for name in ("x", "gamma", "beta", "dy")}


def layer_norm_with_gradients(inputs, dtype):
    x, gamma, beta = (torch.tensor(inputs[n], dtype=dtype, requires_grad=True) for n in ("x", "gamma", "beta"))
    y = F.layer_norm(x, gamma.shape, gamma, beta, EPS)
    dx, dgamma = torch.autograd.grad(y, (x, gamma), torch.tensor(inputs["dy"], dtype=dtype))
    return y.detach().double(), dx.double(), dgamma.double()


def max_error(got, want):
    """The largest |got - want|, NaN if any is NaN (max would hide it)."""
    difference = (got - want).abs()
    return float("nan") if torch.isnan(difference).any() else difference.max().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT", "unknown"))
    parser.add_argument("--mode", choices=sorted(MODES), default="huge-mean")
    arguments = parser.parse_args()
    option, values, rows, width = MODES[arguments.mode]
    torch.set_num_threads(1)
    print(f"# torch_failure_modes.py --mode {arguments.mode}: PyTorch {torch.__version__}, CPU, float32 against "
          f"float64 on the same inputs; {datetime.date.today().isoformat()}, commit {arguments.commit}")
    print(f"{option}\tx_fnv1a64\ty\tdx\tdgamma")
    for value in values:
        inputs = load_inputs(option, value, rows, width)
        got = layer_norm_with_gradients(inputs, torch.float32)
        want = layer_norm_with_gradients(inputs, torch.float64)
        errors = "\t".join(f"{max_error(g, w):.6g}" for g, w in zip(got, want))
        print(f"{value:g}\t{fnv1a64(inputs['x'].tobytes()):016x}\t{errors}")


if __name__ == "__main__":
    main()
