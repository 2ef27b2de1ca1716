"""What a benchmark result records about where it ran (imported by the comparison scripts): the GPU, the
NVIDIA driver and the SM clock as nvidia-smi reports them, the commit of the repository the script runs from,
and the UTC date. Fields that cannot be read are null, never guessed."""
import datetime
import json
import os
import subprocess


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
