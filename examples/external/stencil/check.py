"""The project's quality gate: every cell of the kernel's answer, at sizes where the window
wraps (n smaller than the window, n just larger) and at ordinary ones, against the definition.
Writes a JUnit report (report.xml) listing every case; exit 1 if any fails."""

import sys
import xml.etree.ElementTree as ET

from reference import Kernel, expected

CASES = [(n, seed) for n in (1, 2, 5, 16, 17, 18, 100, 4096) for seed in (0, 7, 2**63 + 5)]


def main() -> int:
    suite = ET.Element("testsuite", tests=str(len(CASES)))
    failed = 0
    kernels = {n: Kernel(n) for n in sorted({n for n, _ in CASES})}
    for n, seed in CASES:
        case = ET.SubElement(suite, "testcase", classname="stencil", name=f"n{n}_seed{seed}")
        _, got = kernels[n].call(seed)
        wrong = [i for i in range(n) if got[i] != expected(seed, n, i)]
        if wrong:
            failed += 1
            i = wrong[0]
            message = f"{len(wrong)} wrong cells; cell {i}: {got[i]}, expected {expected(seed, n, i)}"
            ET.SubElement(case, "failure", message=message)
            print(f"FAIL n={n} seed={seed}: {message}")
    for kernel in kernels.values():
        kernel.close()
    ET.ElementTree(suite).write("report.xml")
    print(f"{len(CASES) - failed} of {len(CASES)} cases pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
