"""The README's code runs: every fenced block of code is preceded by a marker
(``<!-- readme-test: NAME -->``) naming the test below that runs it, as written, in a
temporary directory with real ``feltdb`` processes. A block without a marker, a marker
without a test, or a test whose block is gone fails :func:`test_every_code_block_has_a_runner`.

What a test changes in a block, and why, is said where it does it: the port ``8700`` becomes
a free one (tests run side by side), ``.venv/bin/`` becomes this interpreter's bin directory
(the venv ``make`` built), and the placeholder ``fgt2.…`` of the quick start becomes the
token the server printed. ``text`` blocks (the layout) are prose, not code.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from support.server import free_port, wait_until_healthy

from feltdb import Subject, WorkloadStore
from feltdb.auth.policy import CLAIM, application_grant
from feltdb.auth.tokens import Keyring

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
MARKER = re.compile(
    r"<!-- readme-test: (?P<name>[a-z-]+) -->\n```(?P<lang>\w*)\n(?P<code>.*?)```", re.S
)
FENCE = re.compile(r"^```(\w*)$", re.M)
RUNNERS: dict[str, Callable[..., None]] = {}


def runs(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(test: Callable[..., None]) -> Callable[..., None]:
        RUNNERS[name] = test
        return test

    return register


def blocks() -> dict[str, str]:
    """The README's marked code blocks by runner name."""
    return {m["name"]: m["code"] for m in MARKER.finditer(README.read_text())}


def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FELTDB_")}
    clean["PATH"] = f"{BIN}:{clean.get('PATH', '/usr/bin:/bin')}"
    clean["PYTHONPATH"] = str(ROOT)  # examples/ is importable, as from the checkout
    clean["COLUMNS"] = "120"
    return clean


def bash(script: str, cwd: Path, extra: dict[str, str] | None = None) -> str:
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env={**env(), **(extra or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"{script}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
    return run.stdout


class Serving:
    """A ``feltdb serve`` started from a README line, stopped by SIGTERM at the end."""

    def __init__(self, command: str, cwd: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = cwd / f"serve-{self.port}.log"
        line = command.replace("8700", str(self.port))
        if "--port" not in line:
            line += f" --port {self.port}"
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                ["bash", "-c", f"exec {line}"],
                cwd=cwd,
                env=env(),
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        wait_until_healthy(self.url, self.process, self.log)

    def stop(self) -> int:
        """SIGTERM, and 0 once the server shut down gracefully (uvicorn, having shut down,
        re-raises the signal, so the process ends by it: that is the graceful end too)."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        graceful = "Application shutdown complete" in self.log.read_text()
        return 0 if graceful and code in (0, -signal.SIGTERM) else code


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Callable[[str], Serving]]:
    started: list[Serving] = []

    def start(command: str, cwd: Path = tmp_path) -> Serving:
        server = Serving(command, cwd)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(timeout=10)


def test_every_code_block_has_a_runner():
    text = README.read_text()
    fences = FENCE.findall(text)
    opening = fences[0::2]
    code = [lang for lang in opening if lang != "text"]
    assert len(code) == len(MARKER.findall(text)), "a code block without a readme-test marker"
    assert set(blocks()) == set(RUNNERS), set(blocks()) ^ set(RUNNERS)


@runs("make-targets")
def test_the_two_commands_are_make_targets():
    # `make test` is what CI runs, and `make run` serves until Ctrl-C: a dry run proves
    # both resolve to their recipes (scripts/run-sample, the suite) on this checkout.
    for line in blocks()["make-targets"].splitlines():
        command = line.split("#")[0].split()
        if not command:
            continue  # a comment carried over from the line above
        assert command[0] == "make"
        dry = subprocess.run([*command, "-n"], cwd=ROOT, capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr
    assert (
        "scripts/run-sample"
        in subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True).stdout
    )


@runs("quick-start")
def test_the_quick_start_runs_work_to_success(tmp_path: Path, serving: Callable[..., Serving]):
    lines = [line.split("  #")[0].strip() for line in blocks()["quick-start"].splitlines()]
    install, serve, export, worker, submit = lines
    # 1. The install is what make has done for this interpreter's venv.
    assert install.startswith("python3 -m venv .venv") and (BIN / "feltdb").exists()
    local = lambda line: line.replace(".venv/bin/", f"{BIN}/")  # noqa: E731
    server = serving(local(serve.rstrip(" &")), tmp_path)
    token = next(t for t in server.log.read_text().split() if t.startswith("fgt2."))
    assert "FELTDB_TOKEN=fgt2.…" in export
    exported = {"FELTDB_URL": server.url, "FELTDB_TOKEN": token}
    assert export.split()[1] == "FELTDB_URL=http://127.0.0.1:8700"
    with (tmp_path / "worker.log").open("wb") as output:
        running = subprocess.Popen(
            ["bash", "-c", "exec " + local(worker.rstrip(" &"))],
            cwd=tmp_path,
            env={**env(), **exported},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        bash(local(submit), tmp_path, exported)
        deadline = time.monotonic() + 30
        headers = {"Authorization": f"Bearer {token}"}
        while True:
            items = httpx.get(f"{server.url}/v1/workloads", headers=headers).json()["items"]
            if items and items[0]["state"] == "SUCCEEDED":
                break
            assert time.monotonic() < deadline, (items, (tmp_path / "worker.log").read_text())
            time.sleep(0.1)
    finally:
        running.send_signal(signal.SIGTERM)
        assert running.wait(timeout=30) == 0
    assert server.stop() == 0
    said = (tmp_path / "worker.log").read_text()
    assert "does not hold" not in said and "lacks" not in said, said  # a token that fits


@runs("dashboard")
def test_the_sign_in_link_of_the_readme_opens_the_dashboard_once(
    tmp_path: Path, serving: Callable[..., Serving]
):
    server = serving("feltdb serve", tmp_path)  # writes feltdb-keyring.json here
    [line] = [l for l in blocks()["dashboard"].splitlines() if l.strip()]  # noqa: E741
    command = line.split("  #")[0].strip().replace("8700", str(server.port))
    link = bash(command, tmp_path).strip()
    page, _, fragment = link.partition("#")
    assert page == f"{server.url}/ui/login" and fragment.startswith("ticket=fgl1.")
    ticket = fragment.removeprefix("ticket=")
    # What the sign-in page's script does with the fragment: post it, with the form token.
    for attempt in ("first", "again"):
        with httpx.Client(follow_redirects=True, timeout=10) as browser:
            form = browser.get(page).text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form)
            assert csrf is not None
            answer = browser.post(page, data={"csrf": csrf[1], "ticket": ticket})
            if attempt == "first":
                assert answer.status_code == 200 and answer.url.path == "/ui/", answer.text
                assert "human:admin" in answer.text and "Overview" in answer.text
            else:
                assert answer.status_code == 401 and "used already" in answer.text
    assert server.stop() == 0


@runs("worker")
def test_the_worker_of_the_readme_sends_and_refuses(tmp_path: Path):
    from feltdb.testing import WorkerTestEnvironment

    sent: list[str] = []
    namespace: dict[str, Any] = {"smtp_send": sent.append}  # "your code"
    exec(compile(blocks()["worker"], "README:tasks.py", "exec"), namespace)
    worker = namespace["worker"]
    with WorkerTestEnvironment() as env_:
        good = env_.submit("send-email", {"to": "ada@example.com"}, capabilities={"email:send"})
        bad = env_.submit("send-email", {"to": ""}, capabilities={"email:send"})
        env_.run(worker)
        done = env_.get(good.workload_id)
        assert done.result is not None and done.result.output == {"sent": 1}
        assert env_.get(bad.workload_id).state.value == "DEAD_LETTER"
    assert sent == ["ada@example.com"]


@runs("command-line")
def test_the_command_line_tour_runs(tmp_path: Path):
    out = bash(blocks()["command-line"], tmp_path)
    assert "approved" in out and "cancel" in out and "CANCELLED" in out
    revoked = re.search(r"revoked grant (grant_[0-9a-f]{24})\n", out)
    assert revoked is not None and f"{revoked[1]}\trevoked" in out
    assert out.count("fgt2.") == 2  # the two tokens minted


@runs("library")
def test_the_library_snippet_runs(tmp_path: Path):
    out = bash(f"{sys.executable} - <<'EOF'\n{blocks()['library']}\nEOF", tmp_path)
    assert out.strip() == "SUCCEEDED"
    with WorkloadStore.open(tmp_path / "work.db") as store:
        assert len(store.list("acme", "billing")) == 1


@runs("schedules")
def test_the_schedules_example_admits_each_occurrence_once(tmp_path: Path):
    out = bash(f"{sys.executable} - <<'EOF'\n{blocks()['schedules']}\nEOF", tmp_path)
    assert out.strip().splitlines() == [
        "Sat 02:30 CET",
        "Sun 03:00 CEST",
        "Mon 02:30 CEST",
        "nightly-report True",
        "nightly-report True",
        "nightly-report True",
        "0",
    ], out
    with WorkloadStore.open(tmp_path / "work.db") as store:
        work = store.list("acme", "billing")
        assert len(work) == 3 and {w.trigger for w in work} == {"schedule:nightly-report"}


@runs("tracing")
def test_the_tracing_example_shows_one_trace(tmp_path: Path):
    out = bash(f"{sys.executable} - <<'EOF'\n{blocks()['tracing']}\nEOF", tmp_path)
    assert out.strip() == str(
        ["checkout", "feltdb.checkpoint", "feltdb.claim", "feltdb.complete", "feltdb.run"]
    ), out


@runs("dependencies")
def test_the_dependencies_example_shows_the_waiting_work(tmp_path: Path):
    out = bash(blocks()["dependencies"], tmp_path)
    lines = out.strip().splitlines()
    assert sorted(lines[-2:]) == ["extract false", "load true"], out  # one second: any order
    assert lines[0].startswith("submitted workload_") and "READY" in lines[0]


@runs("retention")
def test_the_retention_snippet_prunes_a_month_on_and_verifies(tmp_path: Path):
    bash(f"{sys.executable} - <<'EOF'\n{blocks()['library']}\nEOF", tmp_path)
    out = bash(f"{sys.executable} - <<'EOF'\n{blocks()['retention']}\nEOF", tmp_path)
    assert out.splitlines() == ["['SUCCEEDED']", "1 False", "True"]
    with WorkloadStore.open(tmp_path / "work.db") as store:
        assert store.list("acme", "billing") == []


@runs("retention-cli")
def test_the_prune_commands_list_archive_and_prune(tmp_path: Path):
    bash(f"{sys.executable} - <<'EOF'\n{blocks()['library']}\nEOF", tmp_path)
    out = bash(blocks()["retention-cli"], tmp_path)
    assert "would prune 1 finished workloads" in out and "pruned 1 finished workloads" in out
    archived = (tmp_path / "pruned.jsonl").read_text().splitlines()
    assert len(archived) == 1 and '"state":"SUCCEEDED"' in archived[0]
    with WorkloadStore.open(tmp_path / "work.db") as store:
        assert store.list("acme", "billing") == [] and store.audit.verify().ok


@runs("workflows")
def test_the_workflows_example_submits_shows_and_cancels_a_run(tmp_path: Path):
    out = bash(blocks()["workflows"], tmp_path).strip().splitlines()
    assert out == ["RUNNING", "extract READY", "load READY", "alert READY", "CANCELLED"], out


@runs("worker-tokens")
def test_the_worker_token_block_mints_and_rotates(tmp_path: Path, serving: Callable[..., Serving]):
    from feltdb.auth.tokens import decode_token

    server = serving("feltdb serve", tmp_path)  # its keyring is the one grant issue finds
    admin = next(t for t in server.log.read_text().split() if t.startswith("fgt2."))
    code = [line for line in blocks()["worker-tokens"].splitlines() if not line.startswith("#")]
    mint, work, mint_again, rotate = (line.split("  #")[0].strip() for line in code)
    bash(mint, tmp_path)
    first = decode_token((tmp_path / "worker.token").read_text().strip()).grant
    assert str(first.subject) == "worker:w1"
    assert first.capabilities == {"workload:claim", "email:send"}
    assert first.expires_at - first.issued_at == 30 * 86_400
    log = tmp_path / "worker.log"
    command = work.rstrip(" &").replace("http://127.0.0.1:8700", server.url)
    with log.open("wb") as output:
        running = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=tmp_path, env=env(),
            stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def logged(text: str) -> None:
        deadline = time.monotonic() + 30
        while text not in log.read_text():
            assert running.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)

    try:
        logged("expires at")
        bash(mint_again, tmp_path)
        bash(rotate, tmp_path)
        logged("took the new token")
        second = decode_token((tmp_path / "worker.token").read_text().strip()).grant
        assert second.id != first.id
        headers = {"Authorization": f"Bearer {admin}"}
        body = {"definition_id": "send-email", "input": {"to": "ada@example.com"},
                "capability_snapshot": ["email:send"]}  # fmt: skip
        made = httpx.post(f"{server.url}/v1/workloads", json=body, headers=headers)
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 30
        path = f"{server.url}/v1/workloads/{made.json()['workload_id']}"
        while httpx.get(path, headers=headers).json()["state"] != "SUCCEEDED":
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        running.send_signal(signal.SIGTERM)
        assert running.wait(timeout=30) == 0


@runs("typed-definitions")
def test_the_typed_definition_is_submitted_and_served_by_a_worker_process(
    tmp_path: Path, serving: Callable[..., Serving]
):
    import importlib.util

    from feltdb.client import Client

    server = serving("feltdb serve", tmp_path)  # its keyring is the one grant issue finds
    admin = next(t for t in server.log.read_text().split() if t.startswith("fgt2."))
    code = blocks()["typed-definitions"].replace("http://127.0.0.1:8700", server.url)
    (tmp_path / "emails.py").write_text(code)
    said = bash("python3 emails.py", tmp_path, {"FELTDB_TOKEN": admin}).splitlines()
    workload_id, revision, given = said[0].split(" ", 2)
    assert (revision, given) == ("2", "{'subject': 'Welcome', 'to': 'ada@example.com'}")
    assert said[1] == "WORKLOAD_INVALID {'fields': ['input.to']}"
    bash("feltdb grant issue --worker w1 --capability email:send > worker.token", tmp_path)
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        running = subprocess.Popen(
            ["feltdb", "worker", "emails:worker", "--url", server.url, "--token-file",
             "worker.token"], cwd=tmp_path, env=env(), stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    spec = importlib.util.spec_from_file_location("readme_emails", tmp_path / "emails.py")
    assert spec is not None and spec.loader is not None
    emails = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(emails)  # the same definition, as the submitter imports it
    try:
        with Client(server.url, admin) as felt:
            deadline = time.monotonic() + 60
            while felt.get(workload_id).state.value != "SUCCEEDED":
                assert running.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            output = emails.send_email.output_of(felt.get(workload_id))
            assert output == emails.EmailOut(message_id=f"<{workload_id}@mail.example>")
            assert len(felt.list().items) == 1  # the refused one was never sent
    finally:
        running.send_signal(signal.SIGTERM)
        assert running.wait(timeout=30) == 0


@runs("serve")
def test_both_serve_lines_serve(tmp_path: Path, serving: Callable[..., Serving], pg_databases: Any):
    first, second = [line.split("  #")[0].strip() for line in blocks()["serve"].splitlines()]
    assert serving(first, tmp_path).stop() == 0
    assert (tmp_path / "feltdb.sqlite3").exists()
    database = pg_databases.create("readme")
    try:
        url = pg_databases.url_of(database)
        # The example's placeholders: a database of the test cluster, and loopback only.
        line = second.replace("postgresql://user@host/dbname", f"'{url}'").replace(
            "0.0.0.0", "127.0.0.1"
        )
        home = tmp_path / "pg"
        home.mkdir()
        server = serving(line, home)
        assert '"message"' in server.log.read_text()  # --log-json: JSON lines
        assert server.stop() == 0
    finally:
        pg_databases.drop(database)


@runs("curl")
def test_the_curl_walkthrough_completes_work(tmp_path: Path, serving: Callable[..., Serving]):
    server = serving("feltdb serve", tmp_path)  # beside it, grant issue finds its keyring
    script = blocks()["curl"].replace("http://127.0.0.1:8700", server.url)
    out = bash(script, tmp_path)
    assert out.strip().splitlines()[-1] == '{"state":"SUCCEEDED","result":{"sent":true}}'


def client_tokens(home: Path) -> dict[str, str]:
    """A requester's and a worker's token, signed by the keyring ``feltdb serve`` wrote to
    ``home``, named as the client blocks of the README name them.
    """
    keyring = Keyring.load(home / "feltdb-keyring.json")
    now = int(time.time())

    def token(subject: Subject, capabilities: set[str]) -> str:
        grant = application_grant(
            subject, "default", "default", capabilities, issued_at=now - 5, expires_at=now + 600
        )
        return keyring.sign(grant)

    return {
        "requester_token": token(
            Subject.agent("billing-api"), {"workload:execute", "workload:read"}
        ),
        "worker_token": token(Subject.worker("w1"), {CLAIM}),
    }


@runs("client")
def test_the_client_snippet_claims_and_completes(tmp_path: Path, serving: Callable[..., Serving]):
    server = serving("feltdb serve", tmp_path)
    tokens = client_tokens(tmp_path)
    code = blocks()["client"].replace("http://127.0.0.1:8700", server.url)
    ran: dict[str, Any] = dict(tokens)
    exec(compile(code, "README:client", "exec"), ran)
    assert ran["created"] is True
    read = httpx.get(
        f"{server.url}/v1/workloads/{ran['workload'].workload_id}",
        headers={"Authorization": f"Bearer {tokens['requester_token']}"},
    ).json()
    assert read["state"] == "SUCCEEDED" and read["result"]["output"] == {"sent": True}
    # The defaults a submission may leave out, as the README lists them.
    assert (read["environment"], read["definition_revision"], read["trigger"]) == (
        "production",
        "1",
        "api",
    )
    assert read["capability_snapshot"] == [] and read["idempotency_key"] == "invoice-42"


@runs("async-client")
def test_the_async_client_snippet_admits_claims_and_completes(
    tmp_path: Path, serving: Callable[..., Serving], capsys: pytest.CaptureFixture[str]
):
    server = serving("feltdb serve", tmp_path)
    tokens = client_tokens(tmp_path)
    code = blocks()["async-client"].replace("http://127.0.0.1:8700", server.url)
    exec(compile(code, "README:async-client", "exec"), dict(tokens))
    workload_id, created = capsys.readouterr().out.split()
    assert created == "True"
    read = httpx.get(
        f"{server.url}/v1/workloads/{workload_id}",
        headers={"Authorization": f"Bearer {tokens['requester_token']}"},
    ).json()
    assert read["state"] == "SUCCEEDED" and read["result"]["output"] == {"sent": True}
    assert (read["definition_id"], read["idempotency_key"]) == ("send-email", "k1")
    assert read["input"] == {"to": "ada@example.com"}


@runs("log-pruning")
def test_the_log_pruning_block_prunes_verifies_and_checks_the_export(tmp_path: Path):
    bash(f"{sys.executable} - <<'EOF'\n{blocks()['library']}\nEOF", tmp_path)
    with WorkloadStore.open(tmp_path / "work.db") as store:
        logged = len(store.db.committed_transactions_after(0))
    out = bash(blocks()["log-pruning"], tmp_path)
    assert f"transactions deleted: {logged}" in out
    assert "pruned: through revision" in out and f"export: ok ({logged} transactions)" in out
    with WorkloadStore.open(tmp_path / "work.db") as store:
        assert store.audit.verify().ok
        kinds = {e.audit["kind"] for e in store.db.committed_transactions_after(0)}
        assert kinds == {"audit.carried_forward", "audit.log_pruned"}


@runs("quota")
def test_the_quota_block_refuses_past_the_cap_and_lists_the_quota(tmp_path: Path):
    out = bash("{\n" + blocks()["quota"] + "} 2> said.txt", tmp_path)  # stderr kept to read
    lines = out.strip().splitlines()
    assert "tenant default: 1 of 2 unfinished; 50 a second (50 admissible now)" in lines
    assert lines[-1].startswith("tenant default: 2 of 2 unfinished; 50 a second (")
    assert "error WORKLOAD_QUOTA_EXCEEDED" in (tmp_path / "said.txt").read_text()
    with WorkloadStore.open(tmp_path / "work.db") as store:
        assert len(store.list("default", "default")) == 2


@runs("concurrency")
def test_the_concurrency_block_claims_two_of_three_and_lists_them(tmp_path: Path):
    out = bash(blocks()["concurrency"], tmp_path)  # python3: the installed one, on PATH
    lines = out.strip().splitlines()
    assert "2" in lines and "acme-crm: 2 of 2 held" in lines
    with WorkloadStore.open(tmp_path / "work.db") as store:
        held = [w for w in store.list("default", "default") if w.state.value == "CLAIMED"]
        assert len(held) == 2 and all(w.workload_id in out for w in held)


@runs("rate-limits")
def test_the_rate_limits_block_starts_two_and_says_when_the_third_may(tmp_path: Path):
    out = bash(blocks()["rate-limits"], tmp_path)
    lines = out.strip().splitlines()
    assert lines[-2:] == ["2 60", "smtp: at most 2 starts per 60 s, per key"], lines
    with WorkloadStore.open(tmp_path / "work.db") as store:
        states = sorted(w.state.value for w in store.list("default", "default"))
        assert states == ["READY", "RUNNING", "RUNNING"]  # claim_work starts what it claims


@runs("fairness")
def test_the_fairness_block_serves_the_small_key_beside_the_backlog(tmp_path: Path):
    out = bash(blocks()["fairness"], tmp_path)
    assert out.strip().splitlines()[-1] == "['big', 'small']"


@runs("transactional")
def test_the_transactional_block_keeps_each_order_and_its_email_together(tmp_path: Path):
    out = bash(f"{sys.executable} - <<'EOF'\n{blocks()['transactional']}\nEOF", tmp_path)
    assert out.strip() == "[1]"
    with sqlite3.connect(tmp_path / "shop.db") as shop:
        assert shop.execute("SELECT id, item FROM orders").fetchall() == [(1, "tea")]
    with WorkloadStore.open(tmp_path / "shop.db") as store:
        [work] = store.list("acme", "shop")
        assert work.input == {"order": 1} and store.audit.verify().problem is None


@runs("fastapi-sqlalchemy")
def test_the_fastapi_view_admits_in_its_sqlalchemy_transaction(tmp_path: Path, pg_databases: Any):
    (tmp_path / "shop.py").write_text(blocks()["fastapi-sqlalchemy"])
    database = pg_databases.create("shop")
    url = pg_databases.url_of(database)
    port = free_port()
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as output:
        app = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "shop:app", "--port", str(port)],
            cwd=tmp_path,
            env={**env(), "PYTHONPATH": str(tmp_path), "SHOP_DATABASE": url},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base, app, log, path="/openapi.json")
        placed = httpx.post(f"{base}/orders/1", params={"item": "tea", "quantity": 2})
        refused = httpx.post(f"{base}/orders/2", params={"item": "tea", "quantity": 0})
        again = httpx.post(f"{base}/orders/1", params={"item": "cake", "quantity": 1})
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(timeout=30)
    try:
        assert placed.status_code == 200, log.read_text()
        assert refused.status_code == 422 and again.status_code == 422, log.read_text()
        with WorkloadStore.open(url) as store:
            [work] = store.list("acme", "shop")
            assert work.workload_id == placed.json()["workload"] and work.input == {"order": 1}
            assert store.audit.verify().problem is None
        with psycopg.connect(url) as shop:
            rows = shop.execute("SELECT id, item, quantity FROM orders").fetchall()
            assert rows == [(1, "tea", 2)]
    finally:
        pg_databases.drop(database)


@runs("worker-health")
def test_the_worker_health_block_answers_ok(tmp_path: Path, serving: Callable[..., Serving]):
    server = serving("feltdb serve", tmp_path)  # its keyring is the one grant issue finds
    bash("feltdb grant issue --worker w1 --capability email:send > worker.token", tmp_path)
    work, probe = (line.split("  #")[0].strip() for line in blocks()["worker-health"].splitlines())
    health = free_port()  # 8081 becomes a free port, as 8700 does
    command = work.rstrip(" &").replace("http://127.0.0.1:8700", server.url)
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        running = subprocess.Popen(
            ["bash", "-c", f"exec {command.replace('8081', str(health))}"], cwd=tmp_path,
            env=env(), stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        # The `&` starts it in the background: asked again until it has started claiming.
        while (said := bash(probe.replace("8081", str(health)) + " || true", tmp_path)) != (
            '{"status": "ok"}'
        ):
            assert running.poll() is None and time.monotonic() < deadline, (said, log.read_text())
            time.sleep(0.1)
    finally:
        running.send_signal(signal.SIGTERM)
        assert running.wait(timeout=30) == 0
    assert server.stop() == 0


def an_excerpt_of(block: str, path: Path) -> None:
    """Every line of ``block`` is a line of ``path``, in the same order (the file itself
    runs in tests/integration/test_deploy_examples.py)."""
    lines = iter(path.read_text().splitlines())
    for line in block.splitlines():
        assert any(line == found for found in lines), f"{line!r} is not in {path} (in order)"


@runs("systemd-unit")
def test_the_unit_block_is_an_excerpt_of_the_example():
    an_excerpt_of(blocks()["systemd-unit"], ROOT / "examples/systemd/feltdb-worker.service")


@runs("dockerfile")
def test_the_dockerfile_block_is_an_excerpt_of_the_example():
    an_excerpt_of(blocks()["dockerfile"], ROOT / "examples/container/Dockerfile")
