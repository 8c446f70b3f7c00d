"""Command-line interface: ``gpuroute route | info | sssp``.

The entry point is :func:`gpuroute.cli.main.main` (console script ``gpuroute``; also
``python -m gpuroute.cli``). One module per command (``route.py``, ``info.py``, ``sssp.py``), each
calling one library function and formatting the answer; the shared helpers are in ``common.py``. No
routing logic lives here.
"""
