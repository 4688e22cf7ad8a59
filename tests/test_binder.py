"""Binder readiness: a Jupyter server from this environment serves a chapter's MyST .md
file as a notebook (jupytext's contents manager), and a kernel started by that server
runs it clean. Also checks the postBuild override that opens .md files as notebooks."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.request import Request, urlopen

import pytest

pytestmark = pytest.mark.binder
ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
CHAPTER_MD = "book/07-q-learning-pd2z/theory.md"
TOKEN = "book-binder-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base: str, path: str, method: str = "GET", body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    req = Request(
        f"{base}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )
    with urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    runtime = tmp_path_factory.mktemp("jupyter-runtime")
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime), OMP_NUM_THREADS="1")
    log = open(runtime / "server.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={ROOT}",
            "--allow-root",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            _api(base, "/api/status")
            break
        except OSError as err:
            if proc.poll() is not None:
                raise RuntimeError((runtime / "server.log").read_text(errors="replace")) from err
            time.sleep(0.25)
    else:
        proc.kill()
        raise RuntimeError("jupyter server did not start")
    yield base
    log.close()
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_md_chapter_opens_as_notebook(server):
    model = _api(server, f"/api/contents/{CHAPTER_MD}?type=notebook&content=1")
    assert model["type"] == "notebook"
    cells = model["content"]["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert len(code) >= 3 and any("from lib" in c["source"] for c in code)
    assert model["content"]["metadata"]["kernelspec"]["name"] == "python3"


async def _run_cells(server: str, kernel_id: str, sources: list[str]) -> list[dict]:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws_url = server.replace("http", "ws") + f"/api/kernels/{kernel_id}/channels"
    conn = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {TOKEN}"}))
    session = uuid.uuid4().hex
    replies = []
    for src in sources:
        msg_id = uuid.uuid4().hex
        msg = {
            "header": {
                "msg_id": msg_id,
                "username": "test",
                "session": session,
                "msg_type": "execute_request",
                "version": "5.3",
                "date": "",
            },
            "parent_header": {},
            "metadata": {},
            "channel": "shell",
            "content": {
                "code": src,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        }
        await conn.write_message(json.dumps(msg))
        while True:
            raw = await asyncio.wait_for(conn.read_message(), timeout=300)
            if raw is None:
                raise RuntimeError("kernel websocket closed")
            reply = json.loads(raw)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if reply["msg_type"] == "error":
                raise AssertionError(
                    f"cell failed under the Binder-like server: {reply['content']['ename']}: "
                    f"{reply['content']['evalue']}"
                )
            if reply["channel"] == "shell" and reply["msg_type"] == "execute_reply":
                replies.append(reply["content"])
                break
    conn.close()
    return replies


def test_chapter_runs_clean_in_a_server_kernel(server):
    model = _api(server, f"/api/contents/{CHAPTER_MD}?type=notebook&content=1")
    sources = [c["source"] for c in model["content"]["cells"] if c["cell_type"] == "code"]
    kernel = _api(
        server, "/api/kernels", "POST", {"name": "python3", "path": str(Path(CHAPTER_MD).parent)}
    )
    try:
        replies = asyncio.run(_run_cells(server, kernel["id"], sources))
    finally:
        _api(server, f"/api/kernels/{kernel['id']}", "DELETE")
    assert len(replies) == len(sources)
    assert all(r["status"] == "ok" for r in replies)


def test_postbuild_makes_md_open_as_notebook(tmp_path):
    env = dict(os.environ, JUPYTER_SETTINGS_OVERRIDES_DIR=str(tmp_path))
    subprocess.run(["bash", str(BINDER / "postBuild")], check=True, env=env, capture_output=True)
    overrides = json.loads((tmp_path / "overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["markdown"] == viewers["myst"] == "Jupytext Notebook"


def _pins(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_binder_environment_files():
    """repo2docker reads binder/ (and then ignores the root): a CPU-only torch, and every other
    pin identical to requirements.txt."""
    req = _pins((ROOT / "requirements.txt").read_text())
    binder = _pins((BINDER / "requirements.txt").read_text())
    assert "jupytext" in " ".join(req) and "-e ." in req
    cpu_index = "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert cpu_index in binder
    torch_root = [p for p in req if p.startswith("torch==")]
    torch_binder = [p for p in binder if p.startswith("torch==")]
    assert len(torch_root) == 1 and torch_binder == [torch_root[0] + "+cpu"]
    rest = [p for p in binder if p != cpu_index and not p.startswith("torch==")]
    assert rest == [p for p in req if not p.startswith("torch==")]
    assert (BINDER / "runtime.txt").read_text().strip().startswith("python-3")
    assert not (ROOT / "postBuild").exists() and not (ROOT / "runtime.txt").exists(), (
        "repo2docker ignores root-level config when binder/ exists: keep it in binder/ only"
    )
