"""`optarena fake-model` and `optarena proxy` as a user starts them."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from optarena.cli import main


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from optarena.cli import entry; entry()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.split(" on ", 1)[1].split()[0].rstrip(";")


def test_proxy_in_front_of_fake_model(tmp_path: Path) -> None:
    fake, fake_url = start("fake-model", "--script", "hello", "--port", "0", "--seconds", "20")
    log = tmp_path / "calls.jsonl"
    proxy, url = start(
        "proxy", "--upstream", fake_url, "--port", "0", "--log", str(log), "--seconds", "2"
    )
    try:
        req = urllib.request.Request(
            f"{url}/v1/chat/completions",
            data=json.dumps(
                {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
            ).encode(),
            headers={"content-type": "application/json", "authorization": "Bearer sk-cli-secret"},
        )
        reply = json.loads(urllib.request.urlopen(req, timeout=10).read())
        assert reply["choices"][0]["message"]["content"].startswith("Hello")
        _, err = proxy.communicate(timeout=20)
        assert "1 calls, input 12 (+0 cached), output 9" in err
        [call] = [json.loads(x) for x in log.read_text().splitlines()]
        assert (call["api"], call["status"], call["input_tokens"]) == ("chat", 200, 12)
        assert "sk-cli-secret" not in log.read_text()
    finally:
        for p in (proxy, fake):
            p.kill()
            p.wait()


def test_bad_input_is_one_line_and_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["fake-model", "--script", "nope"]) == 2
    assert main(["proxy", "--upstream", "ftp://nowhere"]) == 2
    err = capsys.readouterr().err
    assert "unknown script 'nope'" in err and "expected an http(s)://host[:port] URL" in err
