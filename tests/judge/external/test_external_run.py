"""What the judge reads back from an external task's commands: output and JUnit reports, both
written by processes running the candidate's code, so neither may hang or exhaust the judge."""

from __future__ import annotations

import os
from pathlib import Path

# private: the readers of a command's output, fed hostile files directly
from optarena.judge.external._run import _read_tail, read_junit

REPORT = (
    '<testsuite tests="3"><testcase classname="t.A" name="ok"/>'
    '<testcase classname="t.A" name="bad"><failure/></testcase>'
    '<testcase name="err"><error/></testcase></testsuite>'
)


def test_only_the_end_of_a_flood_of_output_is_read(tmp_path: Path) -> None:
    """The candidate's code decides how much a command prints; the judge reads the last bytes
    (where a benchmark prints its JSON), and says how much it left out."""
    log = tmp_path / "out.log"
    log.write_bytes(b"x" * 10_000 + b'\n{"seconds": 0.5}\n')
    text = _read_tail(log, 100)
    assert text.startswith("[the first 9918 bytes of output were not kept]\n")
    assert text.endswith('{"seconds": 0.5}\n') and len(text) < 200
    assert _read_tail(log, 1 << 20) == log.read_text()


def test_a_report_lists_its_tests_and_the_failing_ones(tmp_path: Path) -> None:
    (tmp_path / "report.xml").write_text(REPORT)
    r = read_junit(tmp_path, "report.xml")
    assert r is not None and r.tests == 3 and r.failing == ["t.A.bad", "err"]


def test_a_report_of_nested_suites_with_output_reads_every_case(tmp_path: Path) -> None:
    """Suites in suites, a case's output beside its failure, a failure outside any case (not a
    case's): read as a stream, each case is counted once and keeps its failure."""
    (tmp_path / "report.xml").write_text(
        '<testsuites><testsuite name="outer"><properties><property name="p" value="1"/>'
        '</properties><testsuite name="inner"><testcase classname="m.T" name="a">'
        "<system-out>hi</system-out><failure message='x'>trace</failure></testcase>"
        '<testcase classname="m.T" name="b"/></testsuite>'
        '<testcase name="c"><skipped/></testcase><failure/></testsuite>'
        '<testsuite name="other"><testcase name="d"><error/></testcase></testsuite></testsuites>'
    )
    r = read_junit(tmp_path, "report.xml")
    assert r is not None and r.tests == 4
    assert r.failing == ["m.T.a", "d"]
    assert r.names == {"m.T.a", "m.T.b", "c", "d"}


def test_a_case_nested_5000_deep_and_a_name_not_utf8(tmp_path: Path) -> None:
    """Read as a stream with its own stack, a case 5,000 elements deep is found with its
    failure; bytes that are not UTF-8 in a report that declares none are no report."""
    (tmp_path / "deep.xml").write_text(
        "<a>" * 5000 + '<testcase name="x"><failure/></testcase>' + "</a>" * 5000
    )
    r = read_junit(tmp_path, "deep.xml")
    assert r is not None and r.tests == 1 and r.failing == ["x"]
    (tmp_path / "bytes.xml").write_bytes(b'<testsuite><testcase name="\xff\xfe"/></testsuite>')
    assert read_junit(tmp_path, "bytes.xml") is None


def test_a_report_of_many_tiny_elements_is_read_in_little_memory(tmp_path: Path) -> None:
    """The candidate's code writes the report: at the size limit, in tiny elements, the whole
    tree held 2.8 GB of the judge's memory. Read as a stream, what is held is the cases' names
    (the same name here) and the parser's buffer, not the tree. Negative control: the whole
    tree of the same report takes many times more."""
    import tracemalloc
    import xml.etree.ElementTree as ET

    body = b'<testcase name="t"><x/><x/><x/></testcase>' * 20_000 + b"<y/>" * 40_000
    path = tmp_path / "report.xml"
    path.write_bytes(b"<testsuite>" + body + b"</testsuite>")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        r = read_junit(tmp_path, "report.xml")
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        tree = ET.fromstring(path.read_bytes())
        _, whole = tracemalloc.get_traced_memory()
        del tree
    finally:
        tracemalloc.stop()
    assert r is not None and r.tests == 20_000 and r.failing == []
    assert streamed < 4 * size, (streamed, size)
    assert whole > 5 * streamed, (whole, streamed)


def test_a_report_that_is_not_a_plain_file_in_the_tree_is_not_read(tmp_path: Path) -> None:
    """Read as root, a symlink to /dev/zero or a FIFO would hang the judge; a symlink out of
    the tree would read what the candidate chose."""
    tree = tmp_path / "tree"
    tree.mkdir()
    outside = tmp_path / "outside.xml"
    outside.write_text(REPORT)
    os.symlink("/dev/zero", tree / "zero.xml")
    os.symlink(outside, tree / "out.xml")
    os.mkfifo(tree / "fifo.xml")
    (tree / "sub").symlink_to(tmp_path)  # a parent directory that leads out of the tree
    (tree / "garbage.xml").write_text("<testsuite><testcase")
    for name in ("zero.xml", "out.xml", "fifo.xml", "sub/outside.xml", "garbage.xml", "none"):
        assert read_junit(tree, name) is None, name


def test_json_nested_too_deep_to_parse_is_no_metric_not_a_crash() -> None:
    """The candidate's code prints into the benchmark's output: a last line of JSON nested
    200,000 deep made the parser raise RecursionError out of the judge."""
    # private: see above
    from optarena.judge.external._run import CommandRun, read_metric
    from optarena.tasks.external import Metric

    deep = '{"a":' * 200_000 + "1" + "}" * 200_000
    run = CommandRun("python3 benchmark.py", 0, '{"seconds": 0.5}\n' + deep + "\n", 1.0, 1.0)
    value, why = read_metric(Metric.model_validate({"json": "seconds"}), run)
    assert value == 0.5 and why == ""  # the last line that parses
    only = CommandRun("python3 benchmark.py", 0, deep, 1.0, 1.0)
    assert read_metric(Metric.model_validate({"json": "seconds"}), only) == (
        None,
        "the benchmark printed no JSON object",
    )


def test_hostile_reports_and_metrics_are_none_never_the_judges_crash(tmp_path: Path) -> None:
    """Red team, 2026-12-06: each of these raised out of the judge (no judgement recorded): a
    report's folder that is a symlink loop (RuntimeError from 3.11's pathlib), an XML
    declaration naming an encoding Python lacks (LookupError) or a multi-byte one (ValueError),
    and a JSON metric that is an integer of 400 digits (OverflowError in float)."""
    # private: see above
    from optarena.judge.external._run import CommandRun, read_metric
    from optarena.tasks.external import Metric

    os.symlink("out", tmp_path / "out")  # out -> out
    assert read_junit(tmp_path, "out/report.xml") is None
    for encoding in ("x-no-such", "rot13", "utf-32"):
        (tmp_path / "report.xml").write_text(
            f'<?xml version="1.0" encoding="{encoding}"?>' + REPORT
        )
        assert read_junit(tmp_path, "report.xml") is None, encoding
    huge = CommandRun("python3 benchmark.py", 0, '{"seconds": 1' + "0" * 400 + "}\n", 1.0, 1.0)
    value, why = read_metric(Metric.model_validate({"json": "seconds"}), huge)
    assert value is None and "is not a number" in why and len(why) < 100


def test_a_regex_metric_is_the_last_lines_and_never_the_judges_hours() -> None:
    """Red team, 2026-12-06: a spec's backtracking regex over 25 KB of digits the candidate's
    child wrote to stderr took 7.8 s, 100 KB 82 s (quadratic: hours over the 8 MiB kept).
    The regex now searches lines from the last (as a benchmark prints its metric last, and
    so an earlier line the candidate printed never stands in for it), skips lines over
    4,096 characters and stops searching after 5 s."""
    import time

    # private: see above
    from optarena.judge.external._run import CommandRun, read_metric
    from optarena.tasks.external import Metric

    metric = Metric.model_validate({"regex": r'([0-9.e-]+), "n"'})
    junk = "9" * 30_000
    out = f'0.000001, "n": forged\n{junk}\n{junk[:4000]}\n0.25, "n": 60000\n'
    t0 = time.monotonic()
    value, why = read_metric(metric, CommandRun("python3 benchmark.py", 0, out, 1.0, 1.0))
    assert value == 0.25 and why == ""  # the last line's match, not the forged first one
    only_junk = CommandRun("python3 benchmark.py", 0, (junk[:4000] + "\n") * 200, 1.0, 1.0)
    value, why = read_metric(metric, only_junk)
    assert value is None and "no match" in why
    assert time.monotonic() - t0 < 20  # the whole search was 82 s on 100 KB
