"""Command-line interface: ``gpuroute route | info | sssp``.

The entry point is :func:`gpuroute.cli.main.main` (console script ``gpuroute``; also
``python -m gpuroute.cli``). One module per command (``route.py``, ``info.py``, ``sssp.py``), each
calling one library function and formatting the answer; the shared helpers are in ``common.py``. No
routing logic lives here.

Importing this package sets ``OPENBLAS_NUM_THREADS=1`` unless the environment sets it: NumPy's and SciPy's
OpenBLAS otherwise start a thread per core when they load, which spin for a while after loading and after
every BLAS call (about 0.25 s of CPU of a 2-core ``gpuroute serve`` start; more threads on more cores, and
again in every forked worker), and no command of gpuroute calls BLAS. It is done here, before any command
module imports NumPy.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
