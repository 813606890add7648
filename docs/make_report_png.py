"""Make docs/report.png, the README's screenshot of the bundled sample's HTML report.

    python docs/make_report_png.py [--out docs/report.png] [--browser chromium]

Writes the report of the bundled sample with the settings of ``ope demo`` (IPS, clipped IPS at
50 and SNIPS; diagnostics by segment), renders it in headless Chromium at 1280 px wide, keeps the
top of the page (the answer and the forest plot), scales it to 1000 px and stores it with a
256-colour palette. The file must stay under 300 KB (the script fails otherwise).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

#: the README's limit for the screenshot
MAX_BYTES = 300_000
#: browser window, and the part of the page kept (pixels from the top)
WINDOW = (1280, 2200)
KEEP_HEIGHT = 1560
WIDTH = 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).with_name("report.png")))
    parser.add_argument("--browser", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args(argv)

    import ope
    from ope.report import write_report
    from PIL import Image

    sample = ope.load_sample()
    logs = ope.read_logs(sample.path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ope.OPEWarning)
        ev = ope.evaluate(
            logs, estimators=("ips", "clipped_ips", "snips"), max_weight=50.0, reward_range=(0, 1)
        )
        d = ope.diagnose(logs, by=["segment"], max_weight=50.0, reward_range=(0, 1))
    # the input as a path relative to the repository, not this machine's absolute path
    source = os.path.relpath(sample.path, Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        page = write_report(
            Path(tmp) / "report.html",
            evaluation=ev,
            diagnostics=d,
            truth=sample.truth,
            title="Off-policy evaluation of the bundled sample",
            provenance={
                "input": source,
                "command": f"ope report {source} --by segment "
                "--max-weight 50 --reward-range 0 1 "
                "--out report.html",
            },
        )
        shot = Path(tmp) / "shot.png"
        subprocess.run(
            [
                args.browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--user-data-dir={Path(tmp) / 'profile'}",
                f"--screenshot={shot}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        image = Image.open(shot).convert("RGB").crop((0, 0, WINDOW[0], KEEP_HEIGHT))
    height = round(KEEP_HEIGHT * WIDTH / WINDOW[0])
    image = image.resize((WIDTH, height), Image.Resampling.LANCZOS)
    image = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    image.save(args.out, optimize=True)
    size = Path(args.out).stat().st_size
    print(f"wrote {args.out}: {WIDTH}x{height}, {size:,} bytes")
    if size >= MAX_BYTES:
        print(
            f"too large: the README's screenshot must stay under {MAX_BYTES:,} bytes",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
