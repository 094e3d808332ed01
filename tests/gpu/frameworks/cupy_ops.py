#!/usr/bin/env python3
"""CuPy: a RawKernel (NVRTC), a 1D and 2D FFT (cuFFT) and a sort (CUB/Thrust), each checked
against NumPy and printed as "value NAME X" lines for comparison with the native run."""
import cupy as cp
import numpy as np

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
'''


def main():
    rng = np.random.default_rng(5)
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    k = cp.RawKernel(SAXPY, "saxpy")
    out = cp.empty(n, dtype=cp.float32)
    k(((n + 255) // 256,), (256,), (cp.float32(2.5), cp.asarray(x), cp.asarray(y), out, cp.int32(n)))
    got = cp.asnumpy(out)
    ok = np.allclose(got, 2.5 * x + y, rtol=1e-6)
    print(f"value rawkernel_ok {ok} sum {float(got.sum()):.3f}", flush=True)

    s = rng.standard_normal(4096) + 1j * rng.standard_normal(4096)
    f1 = cp.asnumpy(cp.fft.fft(cp.asarray(s)))
    print(f"value fft1d_ok {np.allclose(f1, np.fft.fft(s), atol=1e-8)} "
          f"abs {float(np.abs(f1).sum()):.4f}", flush=True)
    m = rng.standard_normal((256, 256)).astype(np.float32)
    f2 = cp.asnumpy(cp.fft.rfft2(cp.asarray(m)))
    print(f"value rfft2_ok {np.allclose(f2, np.fft.rfft2(m), atol=1e-2)} "
          f"abs {float(np.abs(f2).sum()):.2f}", flush=True)

    v = rng.integers(0, 1 << 30, 1 << 20).astype(np.int32)
    srt = cp.asnumpy(cp.sort(cp.asarray(v)))
    print(f"value sort_ok {bool((srt == np.sort(v)).all())} first {int(srt[0])} "
          f"last {int(srt[-1])}", flush=True)
    print("result cupy_ops ok", flush=True)


if __name__ == "__main__":
    main()
