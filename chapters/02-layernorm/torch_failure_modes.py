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

With --mode storage it runs PyTorch's CPU layer norm with x and dy in bf16
(and fp16), gamma and beta in float32 (its mixed-type kernel), on the rows
of `layernorm storage` (`layernorm run --storage S`, bits as `apply --load`
reads them), and counts, against the float64 result on the same stored
inputs, how many of y and dx are its correct rounding, and the largest
error in ulps of the storage type (with the value where it is reached).

Not needed to build or test anything; run it where torch is installed:
    python3 torch_failure_modes.py --commit "$(git rev-parse HEAD)" > torch-failure-modes.tsv
    python3 torch_failure_modes.py --mode overflow --commit "$(git rev-parse HEAD)" > torch-overflow.tsv
    python3 torch_failure_modes.py --mode storage --commit "$(git rev-parse HEAD)" > torch-storage.tsv
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
    "storage": None,
}
# The cases of `layernorm storage` (TABLE_CASES in storage_accuracy.c): rows, row length, seed, offset.
STORAGE_CASES = ((512, 768, 11, 0.0), (256, 1000, 12, 0.0), (128, 4096, 13, 0.0), (256, 781, 14, 3.0),
                 (64, 2048, 15, 30.0))
# storage: (torch dtype, significant bits, smallest normal exponent, largest finite value)
STORAGE_FORMATS = {"fp16": (torch.float16, 11, -14, 65504.0), "bf16": (torch.bfloat16, 8, -126, 3.3895313892515355e38)}


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


def load_stored_inputs(storage, rows, width, seed, offset):
    """x and dy as tensors of the storage type (bf16 arrives as int16 bits), gamma and beta float32."""
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([os.path.join(HERE, "layernorm"), "run", "--n", str(rows), "--d", str(width), "--seed",
                        str(seed), "--offset", repr(offset), "--storage", storage, "--save-inputs", directory],
                       check=True, stdout=subprocess.DEVNULL)
        arrays = {name: np.load(os.path.join(directory, name + ".npy")) for name in ("x", "gamma", "beta", "dy")}
    for name in ("x", "dy"):
        tensor = torch.from_numpy(arrays[name])
        arrays[name] = tensor.view(torch.bfloat16) if storage == "bf16" else tensor
    return arrays


def storage_ulp(value, precision, min_exponent):
    """The spacing of the storage type's values at each value (float64 tensor)."""
    exponent = torch.floor(torch.log2(value.abs().clamp(min=2.0 ** min_exponent)))
    return torch.pow(2.0, exponent - precision + 1)


def correct_rounding(value, precision, min_exponent, largest):
    """The float64 values rounded once to the storage type, to nearest even."""
    ulp = storage_ulp(value, precision, min_exponent)
    rounded = torch.round(value / ulp) * ulp  # torch.round rounds halves to even
    return torch.where(rounded.abs() > largest, torch.copysign(torch.tensor(float("inf"), dtype=torch.float64),
                                                               value), rounded)


def storage_accuracy(got, want, precision, min_exponent, largest):
    """(correctly rounded count, max error in ulps, the reference value there)."""
    got = got.double().flatten()
    want = want.flatten()
    correct = int((got == correct_rounding(want, precision, min_exponent, largest)).sum())
    ulps = (got - want).abs() / storage_ulp(want, precision, min_exponent)
    worst = int(torch.argmax(ulps))
    return correct, ulps[worst].item(), want[worst].item()


def storage_main():
    print(f"storage\tn\td\tseed\toffset\tx_fnv1a64\telements\ty_correct\ty_max_ulp\ty_worst\tdx_correct"
          f"\tdx_max_ulp\tdx_worst")
    for storage, (dtype, precision, min_exponent, largest) in STORAGE_FORMATS.items():
        for rows, width, seed, offset in STORAGE_CASES:
            inputs = load_stored_inputs(storage, rows, width, seed, offset)
            x = inputs["x"].clone().requires_grad_()
            gamma, beta = (torch.tensor(inputs[n]) for n in ("gamma", "beta"))
            y = F.layer_norm(x, gamma.shape, gamma, beta, EPS)
            (dx,) = torch.autograd.grad(y, (x,), inputs["dy"])
            wide = {n: (inputs[n].double() if torch.is_tensor(inputs[n]) else torch.tensor(inputs[n]).double())
                    for n in ("x", "gamma", "beta", "dy")}
            x64 = wide["x"].clone().requires_grad_()
            y64 = F.layer_norm(x64, gamma.shape, wide["gamma"], wide["beta"], EPS)
            (dx64,) = torch.autograd.grad(y64, (x64,), wide["dy"])
            checksum = fnv1a64(inputs["x"].float().numpy().tobytes())
            figures = []
            for got, want in ((y.detach(), y64.detach()), (dx, dx64)):
                correct, max_ulps, at = storage_accuracy(got, want, precision, min_exponent, largest)
                figures += [str(correct), f"{max_ulps:.6g}", f"{at:.6g}"]
            print(f"{storage}\t{rows}\t{width}\t{seed}\t{offset:g}\t{checksum:016x}\t{rows * width}\t"
                  + "\t".join(figures))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default=os.environ.get("GIT_COMMIT", "unknown"))
    parser.add_argument("--mode", choices=sorted(MODES), default="huge-mean")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    what = "bf16 and fp16 storage, float32 gamma and beta" if arguments.mode == "storage" else "float32"
    print(f"# torch_failure_modes.py --mode {arguments.mode}: PyTorch {torch.__version__}, CPU, {what} against "
          f"float64 on the same inputs; {datetime.date.today().isoformat()}, commit {arguments.commit}")
    if arguments.mode == "storage":
        storage_main()
        return
    option, values, rows, width = MODES[arguments.mode]
    print(f"{option}\tx_fnv1a64\ty\tdx\tdgamma")
    for value in values:
        inputs = load_inputs(option, value, rows, width)
        got = layer_norm_with_gradients(inputs, torch.float32)
        want = layer_norm_with_gradients(inputs, torch.float64)
        errors = "\t".join(f"{max_error(g, w):.6g}" for g, w in zip(got, want))
        print(f"{value:g}\t{fnv1a64(inputs['x'].tobytes()):016x}\t{errors}")


if __name__ == "__main__":
    main()
