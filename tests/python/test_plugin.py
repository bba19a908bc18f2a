"""The pytest plugin (python/ckptfs), run as a test author would: pytester
runs small suites with -p ckptfs over a real mount."""

import json
import os
import re
import subprocess
import sys

pytest_plugins = ["pytester"]

WORKER = r'''
import os, subprocess, sys

def write_as(job, rel, data="x"):
    """A worker of job `job` writes rel under the mount (CLINK_JOB_ID names it)."""
    path = os.path.join(os.environ["CKPTFS_MOUNT"], rel)
    code = "import os,sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); open(sys.argv[1], 'w').write(sys.argv[2])"
    env = dict(os.environ, CLINK_JOB_ID=job)
    return subprocess.run([sys.executable, "-c", code, path, data], env=env).returncode
'''


def _run(pytester, *args):
    pytester.makepyfile(worker=WORKER)
    return pytester.runpytest_subprocess("-p", "ckptfs", "-p", "no:cacheprovider", *args)


def test_the_test_that_crossed_fails_and_its_neighbours_pass(pytester):
    pytester.makepyfile(test_jobs='''
from worker import write_as

def test_a_writes_its_own():
    assert write_as("a", "_state/a/v1/0/own") == 0

def test_b_writes_a():
    write_as("b", "_state/a/v1/0/x")

def test_b_writes_its_own():
    assert write_as("b", "_state/b/v1/0/own") == 0
''')
    junit = pytester.path / "junit.xml"
    r = _run(pytester, "--junitxml", str(junit))
    r.assert_outcomes(passed=2, failed=1)
    out = r.stdout.str()
    assert "FAILED test_jobs.py::test_b_writes_a" in out
    assert "job b wrote `_state/a/v1/0/x` (foreign-write, refused)" in out
    xml = junit.read_text()
    assert re.search(r'<testcase [^>]*name="test_b_writes_a"[^>]*>\s*<failure', xml)


def test_a_fixture_started_worker_is_charged_to_the_test_running(pytester):
    # one long-lived worker of job b, started by a session fixture, writes a
    # file when told to through a pipe: its write happens during the second test
    pytester.makeconftest('''
import os, subprocess, sys, pytest

@pytest.fixture(scope="session")
def worker():
    code = ("import os,sys\\n"
            "for line in sys.stdin:\\n"
            "    p = os.path.join(os.environ['CKPTFS_MOUNT'], line.strip())\\n"
            "    try:\\n"
            "        os.makedirs(os.path.dirname(p), exist_ok=True); open(p, 'w').write('x')\\n"
            "    except OSError:\\n"
            "        pass\\n"
            "    print('done', flush=True)\\n")
    env = dict(os.environ, CLINK_JOB_ID="b")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    def ask(rel):
        p.stdin.write(rel + "\\n"); p.stdin.flush(); p.stdout.readline()
    yield ask
    p.stdin.close(); p.wait()
''')
    pytester.makepyfile(test_worker='''
def test_first(worker):
    worker("_state/b/v1/0/own")

def test_second(worker):
    worker("_state/a/v1/0/stolen")

def test_third(worker):
    worker("_state/b/v1/0/own2")
''')
    r = _run(pytester)
    r.assert_outcomes(passed=2, failed=1)
    out = r.stdout.str()
    assert "FAILED test_worker.py::test_second" in out
    assert "job b wrote `_state/a" in out  # the first refused step (mkdir or create)


def test_the_fixture_gives_the_mount_and_its_records(pytester):
    pytester.makepyfile(test_fix='''
import os
from worker import write_as

def test_paths(ckptfs_mount):
    assert os.path.ismount(ckptfs_mount.mount)
    assert os.path.isdir(ckptfs_mount.backing)
    assert ckptfs_mount.mount == os.environ["CKPTFS_MOUNT"]
    assert write_as("a", "_state/a/v1/0/f") == 0
    assert os.path.exists(os.path.join(ckptfs_mount.backing, "_state/a/v1/0/f"))
    assert ckptfs_mount.collisions() == []
''')
    r = _run(pytester)
    r.assert_outcomes(passed=1)


def test_without_the_plugin_nothing_is_mounted(pytester):
    pytester.makepyfile(test_plain='''
import os

def test_no_mount():
    assert "CKPTFS_MOUNT" not in os.environ
''')
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)


def test_installed_the_entry_point_gives_the_option(pytester):
    # ckptfs.dist-info (installed beside the package, on PYTHONPATH here)
    # loads the plugin in every session: --ckptfs alone turns it on
    pytester.makepyfile(worker=WORKER)
    pytester.makepyfile(test_opt='''
from worker import write_as

def test_fine():
    assert write_as("a", "_state/a/v1/0/z") == 0

def test_b_writes_a():
    write_as("b", "_state/a/v1/0/y")
''')
    r = pytester.runpytest_subprocess("--ckptfs", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    assert re.search(r"plugins: .*ckptfs-\d+\.\d+\.\d+", out)
    assert "job b wrote `_state/a/v1/0/y` (foreign-write, refused)" in out


def test_the_session_fixture_sees_every_record(pytester):
    # a session fixture that uses the mount (ckptfs_session_mount), and the
    # per-test one: each test sees its own records, the session all of them
    pytester.makepyfile(worker=WORKER)
    pytester.makeconftest('''
import os, pytest

@pytest.fixture(scope="session")
def root(ckptfs_session_mount):
    assert os.path.ismount(ckptfs_session_mount.mount)
    return ckptfs_session_mount
''')
    pytester.makepyfile(test_sess='''
from worker import write_as

def test_crosses(root, ckptfs_mount):
    assert write_as("a", "_state/a/v1/0/own") == 0
    write_as("b", "_state/a/v1/0/w")
    assert [r["path"] for r in ckptfs_mount.collisions()][-1] == "_state/a/v1/0/w"

def test_after(root, ckptfs_mount):
    assert ckptfs_mount.collisions() == []
    assert root.backing == ckptfs_mount.backing
    assert any(r["path"] == "_state/a/v1/0/w" for r in root.collisions())
''')
    r = pytester.runpytest_subprocess("-p", "ckptfs", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1, failed=1)
    assert "FAILED test_sess.py::test_crosses" in r.stdout.str()


def test_ninja_install_puts_the_plugin_on_the_system_python_path():
    # where the build installs the package (meson-info), and what the
    # system's Python reads: the directory must be one of its sys.path
    build = os.environ.get("CKPTFS_BUILD_ROOT")
    if not build:
        import pytest
        pytest.skip("CKPTFS_BUILD_ROOT not set (run through meson test)")
    with open(os.path.join(build, "meson-info", "intro-installed.json")) as f:
        installed = json.load(f)
    dests = [d for s, d in installed.items() if s.endswith(os.path.join("ckptfs", "plugin.py"))]
    assert len(dests) == 1, installed
    site = os.path.dirname(os.path.dirname(dests[0]))
    dist = [d for d in installed.values() if d.endswith("entry_points.txt")]
    assert len(dist) == 1 and os.path.dirname(os.path.dirname(dist[0])) == site
    path = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(chr(10).join(sys.path))"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert site in path, (site, path)
