"""The project's quality gate: its unit tests, with a JUnit XML report (stdlib only).

The report lists every test that ran, passed or not, as a JUnit report does: a judge compares
the count with the baseline's, so a change that makes tests silently not run is caught.
"""

import sys
import unittest
import xml.etree.ElementTree as ET


class Recorder(unittest.TextTestResult):
    """Remembers the passing tests too (unittest keeps only the failing ones)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test)


runner = unittest.TextTestRunner(verbosity=1, resultclass=Recorder)
result = runner.run(unittest.defaultTestLoader.discover("tests"))
outcome = {t.id(): None for t in result.passed}
outcome |= {t.id(): "failure" for t, _ in result.failures}
outcome |= {t.id(): "error" for t, _ in result.errors}
suite = ET.Element("testsuite", tests=str(result.testsRun))
for test_id in sorted(outcome):
    cls, _, name = test_id.rpartition(".")
    case = ET.SubElement(suite, "testcase", classname=cls, name=name)
    if outcome[test_id]:
        ET.SubElement(case, outcome[test_id])
ET.ElementTree(suite).write("report.xml")
sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
