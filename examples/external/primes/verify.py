"""The project's quality gate: its unit tests, with a JUnit XML report (stdlib only)."""

import sys
import unittest
import xml.etree.ElementTree as ET

result = unittest.TextTestRunner(verbosity=1).run(unittest.defaultTestLoader.discover("tests"))
suite = ET.Element("testsuite", tests=str(result.testsRun))
bad = {t.id(): "failure" for t, _ in result.failures} | {t.id(): "error" for t, _ in result.errors}
for test_id in sorted(bad):
    cls, _, name = test_id.rpartition(".")
    case = ET.SubElement(suite, "testcase", classname=cls, name=name)
    ET.SubElement(case, bad[test_id])
ET.ElementTree(suite).write("report.xml")
sys.exit(0 if result.wasSuccessful() else 1)
