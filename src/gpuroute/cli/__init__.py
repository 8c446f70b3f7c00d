"""Command-line interface: ``gpuroute route | info | sssp``.

The entry point is :func:`gpuroute.cli.main.main` (console script ``gpuroute``; also
``python -m gpuroute.cli``). Each command parses its arguments, calls one library function
(``paths.shortest_path``, ``sssp.sssp``, graph statistics) and formats the answer; no routing logic lives
here. The function is deliberately not re-exported here, so that ``gpuroute.cli.main`` stays the module.
"""
