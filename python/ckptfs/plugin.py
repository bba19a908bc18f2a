"""pytest plugin: run a test session over a ckptfs mount and fail the test
during which a write crossed job namespaces.

    pytest -p ckptfs            # or --ckptfs when the plugin is installed (its
                                # pytest11 entry point loads it in every session)

The session gets a fresh mount (``CKPTFS_MOUNT``, over ``CKPTFS_BACKING``)
whose callers are identified by ``CLINK_JOB_ID`` in their environment.  Each
collision record the daemon writes is given to the test that was running
when it was made, by its time: a worker a session fixture started long ago
is charged to the test during which it wrote, not to the fixture.  That
test fails with the record in its message ("job b wrote `_state/a/v1/0/x`
(foreign-write, refused): ..."), so pytest's summary and JUnit XML name it.
A record made between two tests fails the session.
"""

import datetime
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

_KEY = "ckptfs_mount_state"


def pytest_addoption(parser):
    g = parser.getgroup("ckptfs", "ckptfs: catch jobs writing each other's state")
    g.addoption("--ckptfs", action="store_true", default=False,
                help="run the session over a fresh ckptfs mount (implied by -p ckptfs)")
    g.addoption("--ckptfs-dir", default=None, metavar="DIR",
                help="the checkpoint directory to mount (default: a new temporary one)")
    g.addoption("--ckptfs-identity", default="env:CLINK_JOB_ID", metavar="MODE",
                help="how the mount tells the writing job (default env:CLINK_JOB_ID)")
    g.addoption("--ckptfs-policy", default="enforce", choices=("enforce", "audit"),
                help="enforce: crossing writes fail with EACCES; audit: they happen (default enforce)")
    g.addoption("--ckptfs-bin", default=None, metavar="PATH",
                help="the ckptfs daemon (default $CKPTFS_BIN, else ckptfs on PATH or in /usr/sbin)")


def _loaded_by_p(config):
    # -p ckptfs names the plugin on the command line: it is meant to run
    args = list(config.invocation_params.args)
    for i, a in enumerate(args):
        if a == "-p" and i + 1 < len(args) and args[i + 1] == "ckptfs":
            return True
        if a == "-pckptfs":
            return True
    return False


def _daemon(config):
    given = config.getoption("ckptfs_bin") or os.environ.get("CKPTFS_BIN")
    if given:
        return given
    for cand in (shutil.which("ckptfs"), "/usr/sbin/ckptfs", "/usr/local/sbin/ckptfs"):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise pytest.UsageError("ckptfs: no ckptfs daemon found (--ckptfs-bin or CKPTFS_BIN)")


def _parse_time(text):
    # "2026-12-01T18:00:00.123Z"
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def describe(rec):
    """One record as a sentence: who wrote what, of which kind, and what became of it:
    "job b wrote `_state/a/v1/0/x` (foreign-write, refused): create by pid 4242 (python3)"."""
    if rec.get("caller_job"):
        who = "job %s" % rec["caller_job"]
    elif rec.get("identity_value") is not None:
        who = "a caller whose %s identity %r is not a job id" % (
            rec.get("identity"), rec["identity_value"])
    else:
        who = "an anonymous caller"
    verdict = "refused" if rec.get("verdict") == "denied" else "allowed, recorded"
    where = "`%s`" % (rec.get("path") or "?")
    if rec.get("path2"):
        where += " -> `%s`" % rec["path2"]
    return "%s wrote %s (%s, %s): %s by pid %s (%s)" % (
        who, where, rec.get("kind"), verdict, rec.get("op"), rec.get("pid"), rec.get("comm"))


class Mount:
    """The session's mount: its paths, and the collision records so far."""

    def __init__(self, mount, backing, log):
        self.mount = mount
        self.backing = backing
        self._log = log
        self._offset = 0
        self._records = []

    def _read_new(self):
        try:
            with open(self._log, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        # a record is whole once its newline is there
        end = data.rfind(b"\n") + 1
        self._offset += end
        new = []
        for line in data[:end].splitlines():
            if line.strip():
                try:
                    new.append(json.loads(line))
                except ValueError:
                    continue
        self._records.extend(new)
        return new

    def collisions(self, since=None):
        """The collision records (dicts), all of them or those made at or after `since`
        (seconds since the epoch)."""
        self._read_new()
        if since is None:
            return list(self._records)
        return [r for r in self._records if _parse_time(r["time"]) >= since - 0.001]


class _Session:
    def __init__(self, config):
        self.config = config
        self.tmp = tempfile.mkdtemp(prefix="ckptfs-pytest-")
        backing = config.getoption("ckptfs_dir")
        if backing:
            backing = os.path.abspath(backing)
        else:
            backing = os.path.join(self.tmp, "backing")
            os.mkdir(backing)
        mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(mnt)
        log = os.path.join(self.tmp, "collisions.jsonl")
        self.daemon_log = os.path.join(self.tmp, "ckptfs.log")
        opts = "nosupervise,identity=%s,policy=%s,collision_log=%s,log=%s" % (
            config.getoption("ckptfs_identity"), config.getoption("ckptfs_policy"), log,
            self.daemon_log)
        self.proc = subprocess.Popen([_daemon(config), "-f", "-o", opts, backing, mnt],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.ismount(mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                text = ""
                if os.path.exists(self.daemon_log):
                    text = open(self.daemon_log, errors="replace").read()
                raise pytest.UsageError("ckptfs: the mount did not come up:\n" + text)
            time.sleep(0.01)
        self.mount = Mount(mnt, backing, log)
        os.environ["CKPTFS_MOUNT"] = mnt
        os.environ["CKPTFS_BACKING"] = backing
        self.current = None      # the test running, with its window's start
        self.started = None
        self.last_end = time.time()
        self.between = []        # records no test was running for
        self.charged = 0         # records given to a test or to `between` so far

    def close(self):
        mnt = self.mount.mount
        for lazy in (False, True):
            if subprocess.call(["fusermount3", "-u"] + (["-z"] if lazy else []) + [mnt],
                               stderr=subprocess.DEVNULL) == 0:
                break
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def unseen(self):
        """The records not yet charged to anyone, whoever read the log since
        (a test's ckptfs_mount.collisions() reads it too)."""
        self.mount._read_new()
        new = self.mount._records[self.charged:]
        self.charged += len(new)
        return new

    def take(self):
        """The records made since the current test's window began."""
        out = []
        for r in self.unseen():
            t = _parse_time(r["time"])
            if self.started is not None and t >= self.started - 0.001:
                out.append(r)
            else:
                self.between.append(r)
        return out


def pytest_configure(config):
    if not (config.getoption("ckptfs") or _loaded_by_p(config)):
        return
    if hasattr(config, "workerinput"):
        return  # xdist workers share the controller's mount through the environment
    config._ckptfs = _Session(config)
    config.addinivalue_line("markers", "ckptfs: a test that runs over the ckptfs mount")


def pytest_unconfigure(config):
    s = getattr(config, "_ckptfs", None)
    if s:
        s.close()
        config._ckptfs = None


def _session(config):
    return getattr(config, "_ckptfs", None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    s = _session(item.config)
    if s:
        s.between.extend(s.unseen())  # made while no test ran
        s.current = item.nodeid
        s.started = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    s = _session(item.config)
    if not s or call.when not in ("call", "teardown"):
        return
    rep = outcome.get_result()
    recs = s.take()
    if call.when == "teardown":
        s.current = None
        s.started = None
        s.last_end = time.time()
    if not recs:
        return
    text = "ckptfs: %d write(s) crossed job namespaces during this test:\n%s" % (
        len(recs), "\n".join("  " + describe(r) for r in recs))
    rep.outcome = "failed"
    prior = str(rep.longrepr) + "\n" if rep.longrepr else ""
    rep.longrepr = prior + text
    rep.sections.append(("ckptfs collisions", "\n".join(json.dumps(r) for r in recs)))


def pytest_sessionfinish(session, exitstatus):
    s = _session(session.config)
    if not s:
        return
    s.between.extend(s.take())
    if s.between:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr:
            tr.write_sep("=", "ckptfs: writes that crossed job namespaces between tests", red=True)
            for r in s.between:
                tr.write_line(describe(r))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _need(request):
    s = _session(request.config)
    if not s:
        pytest.skip("ckptfs: the session runs without a mount (use -p ckptfs or --ckptfs)")
    return s


class _TestView:
    """The mount as one test sees it: the paths, and the records of its window."""

    def __init__(self, s, since):
        self._s = s
        self._since = since
        self.mount = s.mount.mount
        self.backing = s.mount.backing

    def collisions(self):
        return self._s.mount.collisions(since=self._since)


@pytest.fixture
def ckptfs_mount(request):
    """The session's ckptfs mount, for one test: .mount, .backing, and
    .collisions() giving the records made since the test began."""
    s = _need(request)
    yield _TestView(s, s.started if s.started is not None else time.time())


@pytest.fixture(scope="session")
def ckptfs_session_mount(request):
    """The session's ckptfs mount: .mount, .backing, .collisions() (every record)."""
    s = _need(request)
    yield s.mount
