#!/usr/bin/env python3
"""JAX: a jit-compiled tanh(A @ B) of 2048x2048 float32 matrices made from a fixed key.

Prints sums and a few elements ("value NAME X" lines) for comparison with the native run."""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


@jax.jit
def f(a, b):
    return jnp.tanh(a @ b / 32.0)


def main():
    dev = jax.devices()[0]
    print(f"device {dev.platform}", flush=True)
    ka, kb = jax.random.split(jax.random.PRNGKey(3))
    a = jax.random.normal(ka, (2048, 2048), dtype=jnp.float32)
    b = jax.random.normal(kb, (2048, 2048), dtype=jnp.float32)
    c = f(a, b).block_until_ready()
    print(f"value sum {float(jnp.sum(c)):.4f}", flush=True)
    print(f"value abssum {float(jnp.sum(jnp.abs(c))):.4f}", flush=True)
    print(f"value c00 {float(c[0, 0]):.6f}", flush=True)
    print(f"value c_last {float(c[-1, -1]):.6f}", flush=True)
    print("result jax_jit ok", flush=True)


if __name__ == "__main__":
    main()
