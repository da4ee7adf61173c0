"""python -m ddp_doctor (with tools/ on the path), or python tools/ddp_doctor: the command line."""

import sys
from pathlib import Path

if not __package__:  # run as a folder (python tools/ddp_doctor): import the package from tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ddp_doctor.driver import hard_exit, main

hard_exit(main(exiting=True))
