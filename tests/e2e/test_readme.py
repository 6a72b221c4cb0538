"""README's tour, run as a newcomer would run it, against a fresh gateway process, so that it stays true (issue 39).

The tour's ```console blocks are shell transcripts: each `$ ` line is a command, the lines after it what it prints
(stdout and stderr, as a terminal shows them). Each command runs in bash, with `logway` the CLI of this checkout
pointed at the test gateway (the tour relies on the default addresses, which another gateway may hold on this
machine) and kcat's `127.0.0.1:9092` made the test gateway's Kafka address. A ```python block runs with the
addresses made the test gateway's too, and prints what the ```text block after it shows. Times differ from run to run
and are compared as times; kcat's lines come in the order its partitions arrive and are compared as a set. Needs kcat
(Debian's `kcat`): skipped without it, a failure with REQUIRE_KCAT=1 (CI).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from logway.gateway.config import Config
from logway.gateway.errors import ListenerError

from .test_cli import GatewayProcess

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def tour() -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index("## A tour\n"):text.index("\n## ", text.index("## A tour\n") + 1)]


def steps(text: str) -> list[tuple[str, str, str]]:
    """(kind, code, expected output) of each block to run: ("sh", command, output) per transcript command,
    ("python", source, its ```text block)."""
    blocks = [(m.group(1), m.group(2), m.end(), m.start()) for m in BLOCK.finditer(text)]
    out = []
    for i, (lang, body, end, _) in enumerate(blocks):
        if lang == "console":
            for chunk in body.split("$ ")[1:]:
                command, _, output = chunk.partition("\n")
                out.append(("sh", command, output))
        elif lang == "python":
            following = blocks[i + 1] if i + 1 < len(blocks) else None
            assert following and following[0] == "text" and not text[end:following[3]].strip(), \
                "a python block in the tour is followed by a text block of what it prints"
            out.append(("python", body, following[1]))
    return out


@pytest.fixture(scope="module")
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        if os.environ.get("REQUIRE_KCAT") == "1":
            pytest.fail("REQUIRE_KCAT=1 but kcat is not installed (Debian: apt-get install kcat)")
        pytest.skip("kcat is not installed (Debian: apt-get install kcat): README's tour uses it")
    return path


def test_the_tour_runs_top_to_bottom_on_a_fresh_gateway(tmp_path, kcat):
    text = tour()
    plan = steps(text)
    assert len(plan) >= 10 and {kind for kind, _, _ in plan} == {"sh", "python"}
    with GatewayProcess(str(tmp_path / "data"), "log_level=WARNING") as gw:
        native, kafka, tank = ("%s:%d" % gw.addresses[name] for name in ("native", "kafka", "tank"))
        shell = f"""
logway() {{
  local at={native}
  case " $* " in *" --protocol kafka "*) at={kafka};; *" --protocol tank "*) at={tank};; esac
  case "$1" in
    topics|groups|produce|consume) "{sys.executable}" -m logway.cli "$@" --gateway "$at";;
    *) "{sys.executable}" -m logway.cli "$@";;
  esac
}}
"""
        env = dict(os.environ, PYTHONUNBUFFERED="1")  # (stdout and stderr in the order a terminal shows them)
        for kind, code, expected in plan:
            if kind == "sh":
                command = code.replace("127.0.0.1:9092", kafka)
                r = subprocess.run(["bash", "-c", shell + command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, timeout=60, env=env, cwd=tmp_path)
                assert r.returncode == 0, (code, r.stdout)
                got, want = TIME.sub("<time>", r.stdout), TIME.sub("<time>", expected)
                if code.startswith("kcat -C"):  # partitions in the order they arrive
                    got, want = sorted(got.splitlines()), sorted(want.splitlines())
                assert got == want, f"$ {code}\n--- README shows:\n{expected}--- it printed:\n{r.stdout}"
            else:
                source = code
                for port, address in (("9898", native), ("9092", kafka), ("11011", tank)):
                    host, _, actual = address.rpartition(":")
                    source = source.replace(f'"127.0.0.1", {port}', f'"{host}", {actual}')
                r = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60,
                                   env=env, cwd=tmp_path)
                assert (r.returncode, r.stderr) == (0, ""), source
                assert r.stdout == expected, f"{code}\n--- README shows:\n{expected}--- it printed:\n{r.stdout}"


def test_what_the_readme_says_of_the_defaults_and_errors_is_true():
    text = README.read_text(encoding="utf-8")
    cfg = Config()
    ports = {name: lc.port for name, lc in cfg.listeners.items()}
    assert (f"native `:{ports['native']}`, Kafka `:{ports['kafka']}`, TANK `:{ports['tank']}`, and the admin "
            f"listener\n— console, metrics, probes — `:{ports['admin']}`") in text
    assert f"The log lives in `{cfg.data_dir}`" in text and all(lc.host == "127.0.0.1" for lc in cfg.listeners.values())
    in_use = ListenerError("admin", "127.0.0.1", ports["admin"], OSError(errno.EADDRINUSE, "Address already in use"))
    assert f"\nlogway: {in_use}\n" in text
    for link in re.findall(r"\]\((docs/[^)#]+|BENCHMARKS\.md)", text):  # every page it links to exists
        assert (README.parent / link).exists(), link
