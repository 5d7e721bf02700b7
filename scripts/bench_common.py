"""What the Python halves of the benchmark scripts share (they import it from scripts/)."""


def peak_rss_mb() -> float:
    """VmHWM: this process image's peak (ru_maxrss would carry the parent's across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")
