"""The box filter from its definition, for the gate and the benchmark: this shares no code with
the project's kernel (C), and neither script ever loads it into its own process. The driver
(driver.c) runs the kernel in a child process; these scripts draw its inputs and check its
answers."""

import os
import struct
import subprocess
import tempfile

RADIUS = 8  # as in stencil.h
MASK = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """The driver's input generator: cell j of the input drawn from `seed` is
    splitmix64(seed + j) & 0xFFFFFFFF."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def expected(seed: int, n: int, i: int) -> int:
    """The box sum at cell i of the n-cell input drawn from `seed`."""
    cells = ((i + d) % n for d in range(-RADIUS, RADIUS + 1))
    return sum(splitmix64((seed + j) & MASK) & 0xFFFFFFFF for j in cells) & 0xFFFFFFFF


class Kernel:
    """The project's kernel built with the driver, in a child process: `call(seed)` returns
    (the driver's seconds for the call, the n output cells)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._tmp = tempfile.TemporaryDirectory()
        exe = os.path.join(self._tmp.name, "stencil")
        subprocess.run(["cc", "-O2", "-o", exe, "driver.c", "stencil.c"], check=True)
        self._child = subprocess.Popen([exe, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self, seed: int) -> tuple[float, memoryview]:
        stdin, stdout = self._child.stdin, self._child.stdout
        assert stdin is not None and stdout is not None
        stdin.write(struct.pack("<Q", seed))
        stdin.flush()
        head, out = stdout.read(8), stdout.read(4 * self.n)
        if len(head) != 8 or len(out) != 4 * self.n:
            raise RuntimeError(f"the kernel's driver stopped answering (exit {self._child.poll()})")
        return struct.unpack("<d", head)[0], memoryview(out).cast("I")

    def close(self) -> int:
        assert self._child.stdin is not None
        self._child.stdin.close()
        code = self._child.wait()
        self._tmp.cleanup()
        return code
