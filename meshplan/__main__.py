"""``python -m meshplan``: the CLI, with Ctrl-C handled from the first instruction.

Until :func:`meshplan.cli.main` takes over (it turns ``KeyboardInterrupt`` into ``error: interrupted`` and exit
130), an interrupt while the CLI's modules load prints that same one line and exits 130, instead of a
traceback through the import machinery.
"""

import os
import signal
import sys


def _interrupted_while_loading(signum, frame):  # pragma: no cover - timing-dependent; tests/cli/test_fuzz.py
    sys.stderr.write("error: interrupted\n")
    sys.stderr.flush()
    os._exit(130)  # nothing to clean up yet: no file written, no job started


signal.signal(signal.SIGINT, _interrupted_while_loading)
from meshplan.cli import main  # noqa: E402 - after the handler, on purpose

signal.signal(signal.SIGINT, signal.default_int_handler)
raise SystemExit(main())
