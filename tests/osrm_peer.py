"""OSRM as the peer of the differential and profile tests: its binaries and profiles (the ``osrm-bindings``
wheel, fetched by ``.ci/fetch_osrm.sh``; ``$OSRM_BIN`` overrides), a runner for its tools, and
``osrm-routed`` on a free loopback port with one keep-alive connection."""
from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FETCH = ROOT / ".ci" / "fetch_osrm.sh"


def osrm_bin_dir(required=True):
    """The directory of the osrm-* binaries: ``$OSRM_BIN``, else what ``.ci/fetch_osrm.sh`` prints (it
    downloads the wheel once). Where that fails: ``pytest.fail`` with the script's message when the test
    needs OSRM (``required``: the differential tests never skip), else ``pytest.skip`` with it."""
    give_up = (lambda m: pytest.fail(m, pytrace=False)) if required else pytest.skip
    env = os.environ.get("OSRM_BIN")
    if env:
        if not os.access(os.path.join(env, "osrm-routed"), os.X_OK):
            give_up(f"OSRM_BIN={env}: no executable osrm-routed there")
        return Path(env)
    try:
        r = subprocess.run(["bash", str(FETCH)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as e:
        give_up(f"OSRM is not available: {FETCH.relative_to(ROOT)} did not run ({e})")
    if r.returncode != 0:
        give_up(f"OSRM is not available: {FETCH.relative_to(ROOT)} exited {r.returncode}:\n"
                f"{r.stderr.strip()[-1500:]}")
    return (ROOT / r.stdout.strip().splitlines()[-1]).resolve()


def osrm_profiles_dir(bin_dir):
    """OSRM's profiles folder (``../share/profiles`` from the bin directory); skips where car.lua is not
    there."""
    d = (Path(bin_dir) / ".." / "share" / "profiles").resolve()
    if not (d / "car.lua").is_file():
        pytest.skip(f"OSRM's profiles are not available: no car.lua in {d}")
    return d


def run_tool(cmd, cwd, timeout=600):
    """Run an osrm-* tool; RuntimeError with the end of its output when it fails."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{(r.stdout + r.stderr)[-1500:]}")


def build_mld(bindir, pbf, lua, work, threads=2):
    """OSRM's MLD files of the extract ``pbf`` with the profile ``lua``, made in the folder ``work`` (created) as
    osrm-routed's users make them: the extract copied in, ``osrm-extract -p lua -t threads``, ``osrm-partition``,
    ``osrm-customize``. Returns the ``.osrm`` base path; RuntimeError as :func:`run_tool`."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    src = work / Path(pbf).name
    shutil.copyfile(pbf, src)
    run_tool([Path(bindir) / "osrm-extract", "-p", lua, "-t", str(threads), src], work)
    base = work / (Path(pbf).name.split(".")[0] + ".osrm")
    run_tool([Path(bindir) / "osrm-partition", base], work)
    run_tool([Path(bindir) / "osrm-customize", base], work)
    return base


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OSRMRouted:
    """``osrm-routed --algorithm {ch|mld}`` (and ``extra`` arguments) on a free loopback port, with one keep-alive
    HTTP connection; ``get(path)`` returns the decoded JSON."""

    def __init__(self, bindir, base, algorithm="ch", extra=()):
        self.port = free_port()
        self.log = open(Path(base).parent / "osrm-routed.log", "w+")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([str(Path(bindir) / "osrm-routed"), "--algorithm", algorithm, "-i", "127.0.0.1",
                                      "-p", str(self.port), "-t", "1", *map(str, extra), str(base)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.conn = None
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"osrm-routed exited {self.proc.returncode}: {self.log.read()[-1500:]}")
            try:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                self.get("/nearest/v1/driving/0,0")
                return
            except OSError:
                self.conn = None
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("osrm-routed did not answer within 30 s") from None
                time.sleep(0.05)

    def get(self, path):
        for attempt in (0, 1):
            try:
                self.conn.request("GET", path)
                r = self.conn.getresponse()
                body = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self._reconnect()
                return json.loads(body)
            except (http.client.RemoteDisconnected, ConnectionError):
                if attempt:  # osrm-routed closes a keep-alive connection after a number of requests
                    raise
                self._reconnect()

    def _reconnect(self):
        self.conn.close()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def close(self):
        if self.conn is not None:
            self.conn.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
