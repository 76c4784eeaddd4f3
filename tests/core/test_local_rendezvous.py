"""Single-host process groups open no port on a wildcard address (methods/core/distributed.py):
the ranks of `init_local` (agoq's ranks, methods/agoq/run.py) and of the local launcher
(`python -m methods.core.distributed --nproc-per-node 2 ...`, whose ranks `init` joins) meet
through a file store, and gloo's sockets are on the loopback interface; the all-reduce they run
is exact. Listening sockets are read from /proc/net/tcp and /proc/net/tcp6 (Linux) and matched to
a process through the socket inodes among its open files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from methods.core import distributed

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp (Linux)")

LISTEN = "0A"  # the TCP state column of /proc/net/tcp*


def listening(pid: int) -> list[tuple[str, int]]:
    """(address as hex, port) of every TCP socket process `pid` listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == LISTEN and f[9] in inodes:
                addr, port = f[1].split(":")
                out.append((addr, int(port, 16)))
    return out


def is_wildcard(addr_hex: str) -> bool:
    return set(addr_hex) == {"0"}  # 0.0.0.0 or ::


def is_loopback(addr_hex: str) -> bool:
    if len(addr_hex) == 8:  # IPv4, little-endian hex: 127.x.x.x ends in 7F
        return addr_hex.endswith("7F")
    return addr_hex == "0" * 24 + "01000000" or (addr_hex.startswith("0000000000000000FFFF0000")
                                                  and addr_hex.endswith("7F"))  # ::1, ::ffff:127.x


def _rank(rank: int, world: int, rdzv: str, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    distributed.init_local("gloo", rank, world, rdzv)
    x = torch.arange(4, dtype=torch.float64) + 10.0 * rank
    dist.all_reduce(x)
    socks = listening(os.getpid())  # while the group is up
    Path(out, f"rank{rank}.json").write_text(json.dumps({"sum": x.tolist(), "listening": socks}))
    dist.barrier()
    dist.destroy_process_group()


def check_ranks(rows: list[dict], world: int) -> None:
    expect = [world * i + 10.0 * sum(range(world)) for i in range(4)]  # Σ_r (i + 10 r)
    lo = distributed.loopback_interface()
    for r, row in enumerate(rows):
        assert row["sum"] == pytest.approx(expect, abs=0), (r, row)
        assert row["listening"], f"rank {r}: gloo listens on no socket (the check would see nothing)"
        for addr, port in row["listening"]:
            assert not is_wildcard(addr), f"rank {r} listens on a wildcard address, port {port}"
            if lo is not None and "GLOO_SOCKET_IFNAME" not in os.environ:
                assert is_loopback(addr), f"rank {r} listens on {addr}:{port}, not loopback"


def test_listening_check_sees_a_tcp_store():
    """The check itself: a TCPStore server of this process shows up, on the port it reports."""
    import datetime

    store = torch.distributed.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30))
    try:
        assert store.port in {p for _, p in listening(os.getpid())}
    finally:
        del store


def test_init_local_gloo_group_listens_on_loopback_only(tmp_path):
    import torch.multiprocessing as mp

    rdzv = tmp_path / "rdzv"
    rdzv.mkdir()
    mp.start_processes(_rank, args=(2, str(rdzv), str(tmp_path)), nprocs=2, join=True, start_method="fork")
    check_ranks([json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)], 2)


RANK_SCRIPT = """
import json, os, sys
import torch, torch.distributed as dist
from methods.core import distributed
from tests.core.test_local_rendezvous import listening
torch.set_num_threads(1)
assert distributed.init()
x = torch.arange(4, dtype=torch.float64) + 10.0 * dist.get_rank()
dist.all_reduce(x)
row = {"sum": x.tolist(), "listening": listening(os.getpid()), "launcher": listening(os.getppid())}
open(os.path.join(sys.argv[1], f"rank{dist.get_rank()}.json"), "w").write(json.dumps(row))
distributed.barrier()
distributed.shutdown()
"""


def test_local_launcher_ranks_open_no_wildcard_port(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ICML26_RUNTIME", distributed.RDZV_ENV):
        env.pop(k, None)
    out = subprocess.run([sys.executable, "-m", "methods.core.distributed", "--nproc-per-node", "2",
                          "-c", RANK_SCRIPT, str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    check_ranks(rows, 2)
    assert all(row["launcher"] == [] for row in rows), rows  # the launcher itself listens on nothing


def test_local_launcher_stops_on_a_failing_rank(tmp_path):
    code = "import os, sys, time; r = int(os.environ['RANK']); time.sleep(60 if r else 0); sys.exit(0 if r else 3)"
    out = subprocess.run([sys.executable, "-m", "methods.core.distributed", "--nproc-per-node", "2", "-c", code],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 3, out.stderr[-2000:]
