"""What ``calibrate run`` does when a rank fails (:mod:`.bench` runs the sweep).

Every collective runs under the process group's ``--timeout`` and a watchdog thread. When a collective fails (a dead
peer closes its sockets; a hung peer trips the timeout), each surviving rank posts a marker in the job's key-value
store; rank 0 waits briefly, names the ranks that did not post, prints one line with op, size and group, and exits 1.
Rows already written stay in the file and ``--resume`` continues after them.

Fault injection for tests: ``COMMMODEL_CALIBRATE_FAIL_AT=RANK:OP:SIZE[:kill|hang]`` makes that rank SIGKILL itself
(or hang) just before timing that point.
"""

import os
import signal
import sys
import threading
import time
from typing import Any

from commmodel.errors import CalibrationError

FAILED_KEY = "commmodel/calibrate/failed/"
"""Key prefix a failed rank posts in the job's store (one key per rank)."""


class Stop(Exception):
    """SIGTERM from the launcher (another rank failed) while this rank was working."""


def fault_spec() -> tuple[int, str, int, str] | None:
    spec = os.environ.get("COMMMODEL_CALIBRATE_FAIL_AT")
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) not in (3, 4):
        raise CalibrationError(f"COMMMODEL_CALIBRATE_FAIL_AT={spec!r} must be RANK:OP:SIZE[:kill|hang]")
    return int(parts[0]), parts[1], int(parts[2]), parts[3] if len(parts) == 4 else "kill"


class Watchdog(threading.Thread):
    """Ends the process when one point runs far past ``--timeout`` (a hang the backend did not report)."""

    def __init__(self, timeout_s: float, report) -> None:
        super().__init__(daemon=True)
        self.timeout_s, self.report = timeout_s, report
        self.started_at: float | None = None
        self.what = ""

    def run(self) -> None:
        while True:
            time.sleep(0.5)
            if self.started_at is not None and time.monotonic() - self.started_at > self.timeout_s * 1.5 + 5:
                self.report(f"{self.what} did not finish within --timeout {self.timeout_s:g} s (a rank hung)")
                os._exit(1)


def maybe_fail(fault: tuple | None, rank: int, op_name: str, size_bytes: int, timeout_s: float) -> None:
    """The test hook COMMMODEL_CALIBRATE_FAIL_AT=RANK:OP:SIZE[:kill|hang]: this rank dies (or hangs) here."""
    if fault and fault[0] == rank and fault[1] == op_name and fault[2] == size_bytes:
        if fault[3] == "hang":
            time.sleep(10 * timeout_s + 60)
        os.kill(os.getpid(), signal.SIGKILL)


def start_watchdog(config, rank: int, writer: Any) -> Watchdog:
    """The hang watchdog (rank 0 reports the rows kept) and SIGTERM from the launcher as :class:`Stop`."""

    def report(message: str) -> None:
        if rank == 0:
            kept = writer.rows_written if writer else 0
            sys.stderr.write(f"error: {message}; {kept} new row(s) kept in {config.out_path}; "
                             f"fix the cause and rerun with --resume\n")
            sys.stderr.flush()

    watchdog = Watchdog(config.timeout_s, report)
    watchdog.start()

    def on_term(signum, frame):
        raise Stop()

    signal.signal(signal.SIGTERM, on_term)
    return watchdog


def end_run(message: str, silent: list[int], rank: int, world: int, kept: int, out_path: Any) -> None:
    """End a failed run with one "rows kept, rerun with --resume" line: from rank 0, or when rank 0 itself died
    (it cannot say it), from the lowest surviving rank, counting the points every rank finished (rank 0 writes
    each row as soon as its point is timed)."""
    todo = ("rerun with --resume to measure the rest" if "(Ctrl-C)" in message
            else "fix the cause and rerun with --resume")
    line = f"{message}; {kept} new row(s) kept in {out_path}; {todo}"
    if rank == 0:
        raise CalibrationError(line) from None
    if 0 in silent and rank == min(set(range(world)) - set(silent)):
        sys.stderr.write(f"error: {line}\n")
        sys.stderr.flush()
    raise SystemExit(1) from None


def default_store(dist: Any) -> Any:
    """The job's key-value store, where failed ranks post (None where the backend has none)."""
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - naming the failed rank is best effort
        return None


def failure_message(err: BaseException, rank: int, world: int, store, what: str,
                     timeout_s: float) -> tuple[str, list[int]]:
    """Post this rank's failure, wait up to 1 s for the others', and name the silent ones (also returned)."""
    timed_out = "timed out" in str(err).lower() or "timeout" in str(err).lower()
    cause = f"did not finish within --timeout {timeout_s:g} s" if timed_out else "failed"
    if isinstance(err, KeyboardInterrupt):  # Ctrl-C reaches every rank of the job at once: nobody to blame
        return f"{what} was interrupted (Ctrl-C) on rank {rank}", []
    if isinstance(err, Stop):  # this rank got SIGTERM: the launcher ended it (a peer exited) or a user did;
        # the others are still waiting in the collective, so none of them is to blame
        return (f"{what} was stopped by SIGTERM on rank {rank} (from the launcher after another rank exited, or by "
                f"hand)"), []
    if store is None:
        return f"{what} {cause}: a peer rank died or hung (see the launcher's log for which)", []
    silent: list[int] = []
    held = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the launcher's SIGTERM to survivors would race the blame
    try:
        store.set(f"{FAILED_KEY}{rank}", "1")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            silent = [r for r in range(world) if r != rank and not store.check([f"{FAILED_KEY}{r}"])]
            if not silent:
                break
            time.sleep(0.05)
    except (Stop, Exception):  # noqa: BLE001 - the store may be gone too
        pass
    signal.signal(signal.SIGTERM, held)
    if silent:
        who = ", ".join(str(r) for r in silent[:8]) + (" ..." if len(silent) > 8 else "")
        return f"{what} {cause}: rank {who} stopped responding (died or hung)", silent
    return f"{what} {cause} ({type(err).__name__}: {' '.join(str(err).split())[:160]})", []
