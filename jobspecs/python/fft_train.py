"""fft_train: the nomad-fft task driver's contract for Python training scripts.

Standard library only: copy this file beside your script (or put its folder on PYTHONPATH).
The driver (cmd/nomad-driver-fft/README.md) names files in the task's environment; this
module reads them and does the parts that are easy to get wrong:

- progress lines ({"t": <unix seconds>, "done": <total work done>}) in FFT_PROGRESS_FILE;
- the stop signal (SIGINT, Nomad's default kill_signal, or SIGTERM) and the checkpoint signal
  (FFT_CHECKPOINT_SIGNAL, SIGUSR1 by default) only set flags: the script acts on them at its
  next step boundary, never in the middle of a step;
- a checkpoint is written to a temporary file, fsynced and renamed into place (so a kill in
  the middle of the write leaves the previous checkpoint whole), then the marker
  FFT_CHECKPOINT_MARKER ({"step", "bytes", "file", "sha256"}) the same way;
- resuming loads the newest complete checkpoint; temporary files of a write that was killed
  are ignored and removed, and a checkpoint that does not load (or does not match the
  marker's digest) falls back to the one before.

    job = fft_train.Job()
    step = job.resume(lambda path: load(path))   # 0 when there is no checkpoint
    while step < total:
        train_one_step(step); step += 1
        job.progress(step)
        action = job.at_step_boundary()
        if action != fft_train.CONTINUE:
            job.save(step, lambda f: save(f))
        if action == fft_train.STOP:
            sys.exit(0)
"""

import hashlib
import json
import os
import re
import signal
import sys
import time

__all__ = ["Job", "CONTINUE", "CHECKPOINT", "STOP", "signal_number"]

# What at_step_boundary asks the script to do.
CONTINUE = "continue"
CHECKPOINT = "checkpoint"  # write a checkpoint, then go on training
STOP = "stop"  # write a checkpoint, then exit

_CKPT_RE = re.compile(r"^ckpt-(\d+)\.pt$")
_TMP_INFIX = ".tmp."


def _fsync_dir(path):
    # The rename is durable only once the folder's entry is on disk.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path, write):
    """Writes path through write(f) on a temporary file, fsyncs it and renames it into place.
    Returns (size in bytes, sha256 hex digest)."""
    tmp = "%s%s%d" % (path, _TMP_INFIX, os.getpid())
    try:
        with open(tmp, "wb") as raw:
            f = _HashingWriter(raw)
            write(f)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(os.path.dirname(path) or ".")
    return f.size, f.sha256.hexdigest()


class _HashingWriter:
    """A binary file that hashes and counts what goes through it (torch.save takes any
    object with write, and flush)."""

    def __init__(self, raw):
        self._raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, b):
        b = memoryview(b).cast("B")
        self.sha256.update(b)
        self.size += len(b)
        return self._raw.write(b)

    def flush(self):
        self._raw.flush()


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def signal_number(name, default):
    """The signal a name such as "SIGUSR1" or "usr1" means; default for an empty name."""
    if not name:
        return default
    name = name.strip().upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    sig = getattr(signal, name, None)
    if not isinstance(sig, signal.Signals):
        raise ValueError("FFT_CHECKPOINT_SIGNAL=%r: not a signal name such as SIGUSR1" % name)
    return sig


class Job:
    """One training task's side of the driver's contract. Arguments default to the
    environment the driver sets; rank is this process's rank in a data-parallel gang (only
    rank 0 writes progress and checkpoints, every rank reads them)."""

    def __init__(self, checkpoint_dir=None, progress_file=None, marker=None,
                 checkpoint_signal=None, rank=None, keep=2, log=None, install_signals=True):
        env = os.environ
        self.checkpoint_dir = checkpoint_dir or env.get("FFT_CHECKPOINT_DIR") or "checkpoints"
        self.progress_file = progress_file if progress_file is not None else env.get("FFT_PROGRESS_FILE", "")
        self.marker = marker or env.get("FFT_CHECKPOINT_MARKER") or os.path.join(self.checkpoint_dir, "fft-checkpoint.json")
        self.checkpoint_signal = signal_number(
            checkpoint_signal if checkpoint_signal is not None else env.get("FFT_CHECKPOINT_SIGNAL"), signal.SIGUSR1)
        self.rank = int(rank if rank is not None else env.get("RANK", "0"))
        if keep < 1:
            raise ValueError("keep = %d: keep at least the latest checkpoint" % keep)
        self.keep = keep
        self._log = log or (lambda msg: print("fft_train: " + msg, file=sys.stderr, flush=True))
        self._stop = False
        self._checkpoint = False
        if self.rank == 0:
            os.makedirs(self.checkpoint_dir, exist_ok=True)
        if install_signals:
            self.install_signal_handlers()

    # Signals -------------------------------------------------------------------------------

    def install_signal_handlers(self):
        """The stop signals and the checkpoint signal set flags that at_step_boundary reads:
        a handler must not checkpoint itself (it may run in the middle of a step)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_stop)
        signal.signal(self.checkpoint_signal, self._on_checkpoint)

    def _on_stop(self, signum, frame):
        self._stop = True

    def _on_checkpoint(self, signum, frame):
        self._checkpoint = True

    def request_stop(self):
        self._stop = True

    def request_checkpoint(self):
        self._checkpoint = True

    def at_step_boundary(self, agree=None):
        """What to do now: STOP, CHECKPOINT or CONTINUE; it clears a checkpoint request.
        agree(stop, checkpoint) -> (stop, checkpoint) makes the ranks of a gang decide
        alike (e.g. an all-reduce of the flags with max): a signal may reach them at
        different steps, and one rank stopping alone would leave the others waiting."""
        stop, ckpt = self._stop, self._checkpoint
        if agree is not None:
            stop, ckpt = agree(stop, ckpt)
            stop, ckpt = bool(stop), bool(ckpt)
        self._checkpoint = False
        if stop:
            self._stop = True
            return STOP
        return CHECKPOINT if ckpt else CONTINUE

    # Progress ------------------------------------------------------------------------------

    def progress(self, done, **fields):
        """Appends a progress line: done is the job's total work (a resumed run goes on from
        its checkpoint's step), fields are extra keys (loss, phase) the driver ignores."""
        if self.rank != 0 or not self.progress_file:
            return
        line = dict(fields)
        line["t"] = time.time()
        line["done"] = done
        with open(self.progress_file, "a") as f:
            f.write(json.dumps(line) + "\n")

    # Checkpoints ---------------------------------------------------------------------------

    def checkpoint_path(self, step):
        return os.path.join(self.checkpoint_dir, "ckpt-%012d.pt" % step)

    def save(self, step, write):
        """Writes the checkpoint of step through write(f) (f is a binary file), atomically,
        then the marker, then removes all but the latest keep checkpoints. Only rank 0
        writes; other ranks return None at once (the script synchronises them)."""
        if self.rank != 0:
            return None
        start = time.monotonic()
        path = self.checkpoint_path(step)
        size, digest = _write_atomic(path, write)
        marker = {"step": step, "bytes": size, "file": os.path.basename(path), "sha256": digest}
        _write_atomic(self.marker, lambda f: f.write((json.dumps(marker) + "\n").encode()))
        self._prune()
        self._log("checkpoint at step %d: %d bytes in %.3fs" % (step, size, time.monotonic() - start))
        return path

    def complete_checkpoints(self):
        """The complete checkpoints, newest first, as (step, path): only a finished write is
        renamed to ckpt-<step>.pt."""
        try:
            names = os.listdir(self.checkpoint_dir)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            m = _CKPT_RE.match(name)
            if m:
                found.append((int(m.group(1)), os.path.join(self.checkpoint_dir, name)))
        found.sort(reverse=True)
        return found

    def partial_files(self):
        try:
            return sorted(os.path.join(self.checkpoint_dir, n) for n in os.listdir(self.checkpoint_dir) if _TMP_INFIX in n)
        except FileNotFoundError:
            return []

    def read_marker(self):
        """The marker's fields, or None when there is none or it does not parse."""
        try:
            with open(self.marker) as f:
                m = json.load(f)
        except (OSError, ValueError):
            return None
        return m if isinstance(m, dict) else None

    def resume(self, load):
        """Loads the newest complete checkpoint with load(path) and returns its step; 0 when
        there is none. A checkpoint that load rejects (it raises), or whose digest differs from
        the marker's, is skipped for the one before. Rank 0 removes partial files first."""
        if self.rank == 0:
            for p in self.partial_files():
                self._log("removing %s, a checkpoint write that did not finish" % os.path.basename(p))
                try:
                    os.unlink(p)
                except OSError:
                    pass
        marker = self.read_marker() or {}
        for step, path in self.complete_checkpoints():
            if marker.get("file") == os.path.basename(path) and marker.get("sha256"):
                if _sha256_file(path) != marker["sha256"]:
                    self._log("skipping %s: its sha256 differs from the marker's" % path)
                    continue
            try:
                load(path)
            except Exception as e:  # a checkpoint that does not load: try the one before
                self._log("skipping %s: %s: %s" % (path, type(e).__name__, e))
                continue
            self._log("resuming from step %d (%s)" % (step, os.path.basename(path)))
            return step
        return 0

    def _prune(self):
        for _, path in self.complete_checkpoints()[self.keep:]:
            try:
                os.unlink(path)
            except OSError:
                pass
