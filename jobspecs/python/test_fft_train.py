"""Tests of fft_train (python3 -m unittest, from this folder; jobspecs/python_test.go runs them)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fft_train  # noqa: E402


def read_text(path):
    with open(path) as f:
        return f.read()


class JobTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "ckpt")
        self.progress = os.path.join(self.tmp.name, "progress.jsonl")
        self.logs = []

    def tearDown(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        self.tmp.cleanup()

    def job(self, **kw):
        kw.setdefault("checkpoint_dir", self.dir)
        kw.setdefault("progress_file", self.progress)
        kw.setdefault("log", self.logs.append)
        kw.setdefault("checkpoint_signal", "SIGUSR1")
        return fft_train.Job(**kw)

    def test_progress_lines(self):
        j = self.job()
        j.progress(1, loss=0.5)
        j.progress(2)
        lines = [json.loads(l) for l in read_text(self.progress).splitlines()]
        self.assertEqual([l["done"] for l in lines], [1, 2])
        self.assertEqual(lines[0]["loss"], 0.5)
        self.assertLessEqual(lines[0]["t"], lines[1]["t"])
        self.assertAlmostEqual(lines[1]["t"], time.time(), delta=60)

    def test_progress_only_rank0(self):
        self.job(rank=1, install_signals=False).progress(5)
        self.assertFalse(os.path.exists(self.progress))

    def test_save_writes_checkpoint_then_marker(self):
        j = self.job()
        path = j.save(7, lambda f: f.write(b"weights-7"))
        self.assertEqual(os.path.basename(path), "ckpt-000000000007.pt")
        self.assertEqual(read_text(path), "weights-7")
        m = json.loads(read_text(os.path.join(self.dir, "fft-checkpoint.json")))
        self.assertEqual(m["step"], 7)
        self.assertEqual(m["bytes"], 9)
        self.assertEqual(m["file"], "ckpt-000000000007.pt")
        self.assertEqual(len(m["sha256"]), 64)
        self.assertEqual(j.partial_files(), [])

    def test_save_keeps_latest(self):
        j = self.job(keep=2)
        for s in (1, 2, 3):
            j.save(s, lambda f, s=s: f.write(b"w%d" % s))
        self.assertEqual([s for s, _ in j.complete_checkpoints()], [3, 2])

    def test_save_on_other_rank_writes_nothing(self):
        j = self.job(rank=1, install_signals=False)
        self.assertIsNone(j.save(3, lambda f: f.write(b"x")))
        self.assertFalse(os.path.exists(self.dir))

    def test_failed_write_leaves_previous(self):
        j = self.job()
        j.save(1, lambda f: f.write(b"good"))

        def broken(f):
            f.write(b"half")
            raise RuntimeError("disk full")

        with self.assertRaises(RuntimeError):
            j.save(2, broken)
        self.assertEqual(j.partial_files(), [])
        self.assertEqual([s for s, _ in j.complete_checkpoints()], [1])
        self.assertEqual(json.loads(read_text(j.marker))["step"], 1)

    def test_resume_none(self):
        self.assertEqual(self.job().resume(lambda p: self.fail("nothing to load")), 0)

    def test_resume_latest_complete_ignores_partial(self):
        j = self.job(keep=3)
        j.save(4, lambda f: f.write(b"w4"))
        j.save(8, lambda f: f.write(b"w8"))
        # A write killed half way: a temporary file of a later step.
        partial = j.checkpoint_path(12) + ".tmp.4242"
        with open(partial, "wb") as f:
            f.write(b"half")
        loaded = []
        self.assertEqual(j.resume(lambda p: loaded.append(read_text(p))), 8)
        self.assertEqual(loaded, ["w8"])
        self.assertFalse(os.path.exists(partial), "the partial file is removed")

    def test_resume_falls_back_when_load_fails(self):
        j = self.job(keep=3)
        j.save(4, lambda f: f.write(b"w4"))
        j.save(8, lambda f: f.write(b"w8"))
        tried = []

        def load(p):
            tried.append(read_text(p))
            if read_text(p) == "w8":
                raise ValueError("truncated")

        self.assertEqual(j.resume(load), 4)
        self.assertEqual(tried, ["w8", "w4"])
        self.assertTrue(any("skipping" in l for l in self.logs), self.logs)

    def test_resume_checks_marker_digest(self):
        j = self.job(keep=3)
        j.save(4, lambda f: f.write(b"w4"))
        j.save(8, lambda f: f.write(b"w8"))
        with open(j.checkpoint_path(8), "wb") as f:  # torn after the rename
            f.write(b"w?")
        loaded = []
        self.assertEqual(j.resume(lambda p: loaded.append(read_text(p))), 4)
        self.assertEqual(loaded, ["w4"])

    def test_resume_newer_than_marker(self):
        # Killed between the checkpoint's rename and the marker's: the checkpoint is complete.
        j = self.job(keep=3)
        j.save(4, lambda f: f.write(b"w4"))
        with open(j.checkpoint_path(9), "wb") as f:
            f.write(b"w9")
        self.assertEqual(j.resume(lambda p: None), 9)

    def test_step_boundary(self):
        j = self.job()
        self.assertEqual(j.at_step_boundary(), fft_train.CONTINUE)
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertEqual(j.at_step_boundary(), fft_train.CHECKPOINT)
        self.assertEqual(j.at_step_boundary(), fft_train.CONTINUE, "a checkpoint request is cleared")
        os.kill(os.getpid(), signal.SIGINT)
        self.assertEqual(j.at_step_boundary(), fft_train.STOP)
        self.assertEqual(j.at_step_boundary(), fft_train.STOP, "a stop stays")

    def test_sigterm_stops_and_signal_from_env(self):
        os.environ["FFT_CHECKPOINT_SIGNAL"] = "usr2"
        try:
            j = self.job(checkpoint_signal=None)
        finally:
            del os.environ["FFT_CHECKPOINT_SIGNAL"]
        self.assertEqual(j.checkpoint_signal, signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGUSR2)
        self.assertEqual(j.at_step_boundary(), fft_train.CHECKPOINT)
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertEqual(j.at_step_boundary(), fft_train.STOP)

    def test_bad_signal_name(self):
        with self.assertRaisesRegex(ValueError, "SIGFOO"):
            self.job(checkpoint_signal="SIGFOO")

    def test_agree(self):
        j = self.job()
        # Another rank got the stop signal: this one stops too.
        self.assertEqual(j.at_step_boundary(agree=lambda s, c: (True, c)), fft_train.STOP)
        j2 = self.job()
        seen = []
        j2.request_checkpoint()
        self.assertEqual(j2.at_step_boundary(agree=lambda s, c: seen.append((s, c)) or (s, c)), fft_train.CHECKPOINT)
        self.assertEqual(seen, [(False, True)])

    def test_sigkill_during_write_keeps_previous(self):
        """A process killed with SIGKILL while it writes a checkpoint leaves the previous one
        complete and named by the marker; resume loads it and removes the partial file."""
        child = textwrap.dedent("""
            import sys, time
            sys.path.insert(0, %r)
            import fft_train
            j = fft_train.Job(checkpoint_dir=%r, progress_file="", install_signals=False)
            j.save(10, lambda f: f.write(b"ten"))
            def slow(f):
                f.write(b"x" * 4096)
                f.flush()
                print("writing", flush=True)
                time.sleep(60)
            j.save(20, slow)
        """) % (os.path.dirname(os.path.abspath(fft_train.__file__)), self.dir)
        p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            self.assertEqual(p.stdout.readline(), b"writing\n")
            p.kill()
        finally:
            p.wait()
            p.stdout.close()
        j = self.job()
        self.assertEqual(len(j.partial_files()), 1, "the killed write left its temporary file")
        self.assertEqual(json.loads(read_text(j.marker))["step"], 10)
        loaded = []
        self.assertEqual(j.resume(lambda path: loaded.append(read_text(path))), 10)
        self.assertEqual(loaded, ["ten"])
        self.assertEqual(j.partial_files(), [])


if __name__ == "__main__":
    unittest.main()
