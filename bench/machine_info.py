"""What a benchmark result records about where it ran (imported by the comparison scripts): the GPU, the
NVIDIA driver and the SM clock as nvidia-smi reports them, the commit of the repository the script runs from,
and the UTC date; and, while a benchmark runs, the SM clock and power it ran at (ClockSampler). Fields that
cannot be read are null, never guessed."""
import datetime
import json
import os
import statistics
import subprocess
import threading
import time


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def machine(index=0):
    """{gpu, driver, sm_clock_mhz, max_sm_clock_mhz} of GPU `index` (nvidia-smi), nulls when unknown."""
    out = _run(["nvidia-smi", f"--id={index}", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                "--format=csv,noheader,nounits"])
    fields = [f.strip() for f in out.split(",")] if out else []
    if len(fields) != 4:
        return {"gpu": None, "driver": None, "sm_clock_mhz": None, "max_sm_clock_mhz": None}
    num = lambda s: int(s) if s.isdigit() else None
    return {"gpu": fields[0], "driver": fields[1], "sm_clock_mhz": num(fields[2]), "max_sm_clock_mhz": num(fields[3])}


def commit():
    """The repository's commit (short hash, '-dirty' with uncommitted changes), or null outside a checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    head = _run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"])
    if head is None:
        return None
    dirty = _run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"])
    return head + ("-dirty" if dirty else "")


def stamp(schema):
    """The header fields every result file carries."""
    return {"schema": schema, "machine": machine(), "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_json(path, doc):
    """`doc` as JSON at `path`: written beside it, then renamed over it (a finished file or none)."""
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


# nvidia-smi's clocks_event_reasons bits that mean the board held the clock down for power: the software power
# cap (the board's power limit) and the hardware power brake.
POWER_LIMITED = 0x4 | 0x80


def parse_sample(line, when):
    """(when, power W, SM clock MHz, power-limited) from one line of nvidia-smi's
    `--query-gpu=power.draw,clocks.sm,clocks_event_reasons.active --format=csv,noheader,nounits`, or None for
    a line that is not such a sample ("[N/A]" fields, a header, an error)."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 3:
        return None
    try:
        return when, float(fields[0]), float(fields[1]), bool(int(fields[2], 16) & POWER_LIMITED)
    except ValueError:
        return None


def summarize(samples):
    """What a set of samples saw: median and lowest SM clock, median power, the share of samples at which the
    board limited the clock for power, and their count; nulls without samples."""
    if not samples:
        return {"sm_clock_mhz": None, "sm_clock_min_mhz": None, "power_w": None, "power_limited_share": None,
                "samples": 0}
    return {"sm_clock_mhz": statistics.median(s[2] for s in samples), "sm_clock_min_mhz": min(s[2] for s in samples),
            "power_w": statistics.median(s[1] for s in samples),
            "power_limited_share": sum(s[3] for s in samples) / len(samples), "samples": len(samples)}


def mostly_power_limited(gpu):
    """Whether the board held the clock down for power in most of a timing's samples (a summarize() dict)."""
    return (gpu.get("power_limited_share") or 0) > 0.5


class ClockSampler:
    """nvidia-smi sampling GPU `index` every `period_ms` in the background while a benchmark runs, each sample
    stamped with time.perf_counter() as it arrives; during(spans) says what the spans of time saw. A sustained
    heavy load can hold a board at its power limit, where the clock, not the kernel, sets a call's time, and
    two calls timed side by side may run at different clocks. Without nvidia-smi nothing is sampled and the
    figures are null."""

    def __init__(self, index=0, period_ms=20):
        self.samples = []
        self._proc = None
        try:
            self._proc = subprocess.Popen(
                ["nvidia-smi", f"--id={index}", "--query-gpu=power.draw,clocks.sm,clocks_event_reasons.active",
                 "--format=csv,noheader,nounits", "-lms", str(period_ms)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self._proc.stdout:
            sample = parse_sample(line, time.perf_counter())
            if sample:
                self.samples.append(sample)

    def during(self, spans):
        """summarize() over the samples inside any of the (start, end) perf_counter spans."""
        return summarize([s for s in list(self.samples) if any(a <= s[0] <= b for a, b in spans)])

    def close(self):
        if self._proc:
            self._proc.terminate()
            self._proc.wait()
